"""Chapter 05's set-up and per-user evaluation (Li et al. 2023, user-level inversion with a diffusion prior).

The shared classifier, the image prior, the users, Algorithm 1 from the server's view
(:func:`gitutor.federated.case.gradient_case` with known labels) and the two Inverting Gradients baselines
of Table 1a on the same budget, scored per user with :mod:`gitutor.attacks.user_level.evaluation`; beside
them the arms that take DiffULA apart (its image before the final denoising, t* = 0; the no-prior control)
and two controls that know nothing of the user (a generic face, a prior sample).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

from gitutor.attacks import inverting_gradients
from gitutor.attacks.result import AttackResult
from gitutor.attacks.user_level import (
    Augmentation,
    LayerWindow,
    TauSchedule,
    ZetaSchedule,
    intra_user_scores,
    paired_scores,
    representative_scores,
    user_level_inversion,
    user_level_inverting_gradients,
)
from gitutor.face_detection import face_detection_rate
from gitutor.federated.case import Case
from gitutor.federated.users import celeba_users, lfw_user
from gitutor.metrics import match_batch
from gitutor.models import GapCNN, LeNet, resnet18
from gitutor.seeding import trial_seeds

#: Table 1a's rows in order: the user's own photos, the two baselines, DiffULA.
METHODS = (
    "intra-user",
    "IG sample-level (matched)",
    "IG user-level, no prior",
    "DiffULA (diffusion prior)",
)
#: Arms beside Table 1a's rows, each on the same users: the final denoising pass as its own arm (the same
#: DiffULA runs read before it), the no-prior control (:func:`no_prior_users`) and the two controls that know
#: nothing of the user (:func:`know_nothing_controls`).
T_STAR_ZERO = "DiffULA, t* = 0 (no final denoising)"
NO_PRIOR = "no-prior control (Algorithm 1's matching step, prior off, t* = 0)"
GENERIC_FACE = "generic face: mean of the other users' photos (knows nothing)"
PRIOR_SAMPLE = "prior sample (knows nothing)"


def shared_model(name: str, cfg) -> nn.Module:
    """The untrained 2-class classifier ``name`` (``"lenet"`` with ReLU, ``"gap-cnn"``, ``"resnet18"``) for
    ``cfg.channels``-channel images of side ``cfg.image_size``; weights from torch's global generator.

    Raises:
        ValueError: for an unknown ``name``.
    """
    if name == "lenet":
        return LeNet(
            num_classes=2,
            in_channels=cfg.channels,
            image_size=cfg.image_size,
            activation="relu",
        )
    if name == "gap-cnn":
        return GapCNN(num_classes=2, in_channels=cfg.channels)
    if name == "resnet18":
        return resnet18(num_classes=2)
    raise ValueError(f"model must be 'lenet', 'gap-cnn' or 'resnet18', got {name!r}")


def untrained_face_ddpm(
    image_size: int, channels: int, seed: int = 0, device: str | torch.device = "cpu"
):
    """A DDPM of the shipped prior's architecture at ``image_size``/``channels`` with random weights drawn
    from ``seed`` (torch's global generator is left as it was): the offline stand-in for the hub prior
    in smoke runs. It is not an image prior; results with it mean nothing."""
    from diffusers import DDPMScheduler, UNet2DModel

    from gitutor.priors import FACE_DDPM_CONFIG, FACE_DDPM_SCHEDULER, DiffusionPrior

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        unet = UNet2DModel(
            **dict(
                FACE_DDPM_CONFIG,
                sample_size=image_size,
                in_channels=channels,
                out_channels=channels,
            )
        )
    return DiffusionPrior(
        unet=unet.to(device).eval().requires_grad_(False),
        scheduler=DDPMScheduler(**FACE_DDPM_SCHEDULER),
        image_size=image_size,
        channels=channels,
    )


def load_prior(cfg, device: str | torch.device = "cpu", seed: int = 0):
    """The prior ``cfg.prior`` names: the shipped LFW DDPM (``"lfw32"``, the sha256 of its weights and
    configuration checked), an untrained one (``"untrained"``, smoke runs) or a hub DDPM (any other id).

    Raises:
        PriorChecksumError / FileNotFoundError / RuntimeError: as the loaders in :mod:`gitutor.priors`.
    """
    from gitutor.priors import face_ddpm, pretrained_face_ddpm

    if cfg.prior == "lfw32":
        return face_ddpm(device)
    if cfg.prior == "untrained":
        return untrained_face_ddpm(cfg.image_size, cfg.channels, seed, device)
    return pretrained_face_ddpm(cfg.prior, device)


def chapter_users(
    cfg, data_root: str, seed: int, device: str | torch.device = "cpu"
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``[(x (B, C, s, s) in [0, 1], y (B,))]`` per user: variations of held-out LFW faces ``cfg.users``
    (``cfg.data == "lfw"``) or the first ``cfg.users`` CelebA identities with >= B images, on ``device``.

    Raises:
        ValueError / OfflineDataError: as :func:`~gitutor.federated.users.lfw_user` and ``celeba_users``.
    """
    if (
        cfg.data == "lfw"
    ):  # each user's variations from its own seed (independent users)
        seeds = trial_seeds(seed, len(cfg.users), "users")
        users = [
            lfw_user(
                face, cfg.batch_size, size=cfg.image_size, channels=cfg.channels, seed=s
            )
            for face, s in zip(cfg.users, seeds)
        ]
    else:
        users = celeba_users(
            cfg.users, cfg.batch_size, root=data_root, size=cfg.image_size
        )
    return [(x.to(device), y.to(device)) for x, y in users]


def distinct_photographs(cfg) -> bool:
    """Whether each user's photos are different photographs of one person (CelebA identities), so an
    identity test can ask about the person; False for the LFW users (one photograph and its variations)."""
    return cfg.data != "lfw"


def attack_schedules(cfg) -> dict:
    """Keyword arguments of Algorithm 1 from the profile: τ, ζ, the layer window (App. C) and 𝒯."""
    return dict(
        tau_schedule=TauSchedule(**cfg.tau),
        zeta_schedule=ZetaSchedule(**cfg.zeta),
        layer_window=LayerWindow(**cfg.window),
        augment=Augmentation(),
    )


def diffula(
    case: Case,
    prior,
    cfg,
    schedules: Mapping,
    *,
    seed: int,
    matching_weight: float | None = None,
    prior_weight: float = 1.0,
    t_star: int | None = None,
) -> AttackResult:
    """Algorithm 1 (:func:`~gitutor.attacks.user_level.user_level_inversion`) from ``case.server_view``
    (labels known, B = the batch size) with the profile's steps, η, t*, λ (``matching_weight`` and ``t_star``
    override them; ``prior_weight`` 0: the no-prior control)."""
    view = case.server_view
    return user_level_inversion(
        view["model"],
        view["update"],
        view["labels"],
        prior,
        batch_size=view["batch_size"],
        steps=cfg.steps,
        lr=cfg.lr,
        t_star=cfg.t_star if t_star is None else t_star,
        image_size=cfg.image_size,
        seed=seed,
        matching_weight=cfg.matching_weight
        if matching_weight is None
        else matching_weight,
        prior_weight=prior_weight,
        record_every=cfg.record_every,
        **schedules,
    )


def diffula_users(
    cases: Sequence[Case],
    prior,
    cfg,
    schedules: Mapping,
    seed: int,
    *,
    matching_weight: float | None = None,
    prior_weight: float = 1.0,
    t_star: int | None = None,
    users: int | None = None,
    progress: bool = False,
) -> list[AttackResult]:
    """:func:`diffula` on the first ``users`` (default: all) of ``cases``, user k seeded by
    :func:`~gitutor.seeding.trial_seeds` ``(seed, len(cases), "DiffULA")[k]``: users are independent
    trials (their own x_T, ε draws, τ jitter, augmentations), and a call with another ``matching_weight``,
    ``prior_weight`` or ``t_star`` repeats each user's noise exactly (a paired design that differs only in
    that setting). ``progress``: a tqdm bar over the users.

    Raises:
        ValueError: naming ``users`` if it is not in [1, len(cases)].
    """
    count = len(cases) if users is None else users
    if (
        isinstance(count, bool)
        or not isinstance(count, int)
        or not 1 <= count <= len(cases)
    ):
        raise ValueError(f"users must be an int in [1, {len(cases)}], got {users!r}")
    seeds = trial_seeds(seed, len(cases), "DiffULA")
    chosen = tqdm(
        list(zip(cases[:count], seeds)), desc="DiffULA users", disable=not progress
    )
    return [
        diffula(
            case,
            prior,
            cfg,
            schedules,
            seed=s,
            matching_weight=matching_weight,
            prior_weight=prior_weight,
            t_star=t_star,
        )
        for case, s in chosen
    ]


def no_prior_users(
    cases: Sequence[Case],
    prior,
    cfg,
    schedules: Mapping,
    seed: int,
    *,
    users: int | None = None,
    progress: bool = False,
) -> list[AttackResult]:
    """The no-prior control of DiffULA: :func:`diffula_users` with the prior term off (``prior_weight=0``)
    and no final denoising (``t_star=0``), same users and seeds. The prior's gradient is still computed and
    still sets the clip's scale ζ_i ||g_p|| (Algorithm 1, line 7), so the matching step is DiffULA's; only the
    prior's own pull (line 8) and its final denoising are gone. Paired with :data:`T_STAR_ZERO` it isolates
    the prior term of the optimisation. The page runs it on the first ``cfg.weight_users`` users (as the
    λ = 1 runs; ``users``), which keeps the quick book within its time. ``progress``: a tqdm bar
    over the users.

    Raises:
        ValueError: as :func:`diffula_users`.
    """
    return diffula_users(
        cases,
        prior,
        cfg,
        schedules,
        seed,
        prior_weight=0.0,
        t_star=0,
        users=users,
        progress=progress,
    )


def before_final_denoising(result: AttackResult) -> torch.Tensor:
    """x̂ after Algorithm 1's S steps, before the final DDPM denoising from t*: the run's last snapshot
    ``(1, C, s, s)`` in [0, 1] (classifier side), equal to the image of the same run with ``t_star = 0``
    (the denoising draws its noise after the loop) — the t* = 0 arm at no extra cost.

    Raises:
        ValueError: naming ``result`` if its last snapshot is not at its last step (a run recorded
            without the final step).
    """
    steps = len(result.history["gradient_distance"])
    if not result.snapshots or result.snapshots[-1][0] != steps:
        raise ValueError(
            f"result must hold a snapshot at its last step {steps}, got snapshots at "
            f"{[t for t, _ in result.snapshots]}"
        )
    return result.snapshots[-1][1]


def generic_faces(photos: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """For user k, the mean of every photo of the *other* users ``(1, C, H, W)`` in [0, 1]: a generic face
    that knows nothing of user k (a control for Table 1a's scores).

    Args:
        photos: each user's ``(B, C, H, W)`` photos in [0, 1], one tensor per user (>= 2 users, the same
            ``(C, H, W)``).

    Raises:
        ValueError: naming ``photos`` with fewer than 2 users or users of different image shapes.
    """
    if len(photos) < 2:
        raise ValueError(f"photos must hold >= 2 users, got {len(photos)}")
    if any(x.dim() != 4 or x.shape[1:] != photos[0].shape[1:] for x in photos):
        raise ValueError(
            "photos must be (B, C, H, W) tensors of one image shape, got "
            f"{[tuple(x.shape) for x in photos]}"
        )
    return [
        torch.cat([x.cpu() for j, x in enumerate(photos) if j != k]).mean(
            0, keepdim=True
        )
        for k in range(len(photos))
    ]


def know_nothing_controls(
    photos: Sequence[torch.Tensor], samples: torch.Tensor
) -> dict[str, list[torch.Tensor]]:
    """The two controls that know nothing of the user, one ``(1, C, H, W)`` image per user:
    :data:`GENERIC_FACE` (:func:`generic_faces`) and :data:`PRIOR_SAMPLE` (prior sample ``k mod N`` for user k,
    resized to the users' side, as the identity test's control).

    Args:
        photos: as :func:`generic_faces`.
        samples: ``(N, C, H', W')`` unconditional prior samples in [0, 1].

    Raises:
        ValueError: as :func:`generic_faces`, or naming ``samples`` (empty, other channels).
    """
    from gitutor.chapters.diffusion_user_level.identity import (
        CONTROLS,
        identity_controls,
    )

    generic = generic_faces(photos)
    return {
        GENERIC_FACE: generic,
        PRIOR_SAMPLE: identity_controls(photos, samples)[CONTROLS["prior_sample"]],
    }


def score_images(
    images: Sequence[torch.Tensor], photos: Sequence[torch.Tensor]
) -> list[dict]:
    """Table 1a's scores of one representative image per user: per user a dict of ``mse``, ``psnr``,
    ``ssim``, ``lpips`` (:func:`~gitutor.attacks.user_level.representative_scores` against the user's
    photos, averaged) and ``face_rate`` (0 or 1), as :func:`evaluate_users`' rows. ``images[k]`` is user
    k's; an arm run on the first n users only (:func:`no_prior_users`) gives n images.

    Raises:
        ValueError: naming ``images`` when it is empty or holds more images than there are users, or as
            :func:`~gitutor.attacks.user_level.representative_scores` (shapes, ranges).
    """
    if not 1 <= len(images) <= len(photos):
        raise ValueError(
            f"images must hold one image for each of the first 1 to {len(photos)} users, "
            f"got {len(images)}"
        )
    return [
        dict(
            representative_scores(image.cpu(), x.cpu()),
            face_rate=face_detection_rate(image.cpu()),
        )
        for image, x in zip(images, photos)
    ]


def baselines(
    case: Case, cfg, augment: Augmentation, seed: int
) -> tuple[AttackResult, AttackResult]:
    """Inverting Gradients on the same budget (``cfg.ig_steps``): sample level (B images) and user level
    without prior (one image, the augmented objective, TV instead of the DDPM)."""
    view, shape = case.server_view, tuple(case.inputs.shape)
    common = dict(
        tv_weight=cfg.ig_tv_weight, lr=cfg.ig_lr, seed=seed, record_every=cfg.ig_steps
    )
    sample = inverting_gradients(
        view["model"],
        view["update"],
        view["labels"],
        shape,
        iterations=cfg.ig_steps,
        **common,
    )
    user = user_level_inverting_gradients(
        view["model"],
        view["update"],
        view["labels"],
        shape[1:],
        batch_size=view["batch_size"],
        steps=cfg.ig_steps,
        augment=augment,
        **common,
    )
    return sample, user


def evaluate_users(
    cases: Sequence[Case],
    attack,
    cfg,
    augment: Augmentation,
    seed: int,
    progress: bool = False,
):
    """DiffULA (``attack(index, case)``, which seeds each user's run itself) and both :func:`baselines` on
    every user (user k's baselines seeded by :func:`~gitutor.seeding.trial_seeds` ``(seed, …)[k]``), scored
    (Table 1a).

    Returns ``(rows, examples, seconds)``: ``rows[method]`` one dict per user (``mse``, ``psnr``, ``ssim``,
    ``lpips``, ``face_rate``; :data:`METHODS`), ``examples`` one ``(truth, matched sample-level images,
    user-level IG result, DiffULA result)`` per user and ``seconds[method]`` the attacks' wall times.
    ``progress``: a tqdm bar over the users.
    """
    rows, examples = {name: [] for name in METHODS}, []
    seconds = {name: [] for name in METHODS}
    starts = trial_seeds(
        seed, len(cases), "baseline starts"
    )  # each user's baselines start from their own noise
    for index, case in enumerate(tqdm(cases, desc="baselines", disable=not progress)):
        truth = case.inputs.cpu()
        diff = attack(index, case)
        sample_level, user_ig = baselines(case, cfg, augment, starts[index])
        matched = match_batch(sample_level.images, truth)
        entries = {
            METHODS[0]: (intra_user_scores(truth), truth),
            METHODS[1]: (paired_scores(matched, truth), sample_level.images),
            METHODS[2]: (representative_scores(user_ig.images, truth), user_ig.images),
            METHODS[3]: (representative_scores(diff.images, truth), diff.images),
        }
        for name, (scores, images) in entries.items():
            rows[name].append(dict(scores, face_rate=face_detection_rate(images)))
        for name, result in ((METHODS[2], user_ig), (METHODS[3], diff)):
            seconds[name].append(result.info["seconds"])
        examples.append((truth, matched, user_ig, diff))
    return rows, examples, seconds
