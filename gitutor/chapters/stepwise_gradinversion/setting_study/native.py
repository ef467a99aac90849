"""Chapter 04 at the trained network's own resolution: the native recording (issue 42).

EfficientNet-Lite0 was trained at 224 px; at 96 px it classifies half of the study photographs
(top-1 0.50 against 0.85 at 224 px) and its gradients are 13–43× larger, so the recording attacks
it at 224 px, B = 1, on the :data:`PHOTOGRAPHS` of the study set, each method as its
authors configure it:

* **Inverting Gradients** — Geiping et al.'s ImageNet configuration
  (:data:`~gitutor.attacks.inverting_gradients.GEIPING_IMAGENET`): the normalised image optimised
  with signed Adam at lr 0.1, α_TV = 0.1 on the mean TV, lr × 0.1 at 3/8, 5/8, 7/8, restarts chosen by
  the matching distance (the recording affords ``restarts`` of their eight);
* **GradInversion** — every tensor matched from the first step, no dropout, TV and R_BN from the
  start as Ye et al.'s code applies them (:meth:`StepwiseOptions.authors`, TV 5e-3 on breaching's
  mean TV, R_BN 1e-4 with the first layers × 1.3 and × 3);
* **Stepwise** — Ye et al.'s code (:meth:`StepwiseOptions.authors`, their schedule timing, the floor
  placed by structure).

The *sanity arm* (``start_noise > 0``) starts each method at the true photograph plus N(0, σ²) noise
in pixels: a working attack stays there. Every trial weighs each prior's image gradient against the
matching term's (:func:`gitutor.attacks.loop.prior_gradients`) at T1, T2 and the end, and records
the matching distance over every tensor (cosine, no dropout) of its final image beside that of the
truth plus σ = :data:`SANITY_SIGMA` noise — the loss a run would reach if it had found the photograph.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from gitutor.attacks.gradinversion import gradinversion
from gitutor.attacks.inverting_gradients import GEIPING_IMAGENET, inverting_gradients
from gitutor.attacks.loop import check_count, check_hyperparameter
from gitutor.attacks.objectives import CosineToTarget
from gitutor.attacks.result import AttackResult
from gitutor.attacks.stepwise import stepwise_inversion
from gitutor.attacks.stepwise_options import (
    AUTHORS_BN_WEIGHT,
    AUTHORS_TV_WEIGHT,
    StepwiseOptions,
)
from gitutor.attacks.stepwise_schedule import StepwiseSchedule, stage_floor
from gitutor.chapters.stepwise_gradinversion.setting_study.trained import (
    TrainedSetting,
    encode_images,
    trained_batch,
    trained_model,
)
from gitutor.chapters.stepwise_gradinversion.setting_study.trained_reading import (
    layout_correlation,
)
from gitutor.checkpoints import Checkpoint
from gitutor.checks import check_choice
from gitutor.federated.client import client_gradients
from gitutor.metrics import lpips_distance, match_batch, psnr, ssim
from gitutor.seeding import make_generator

METHODS = ("Inverting Gradients", "GradInversion", "Stepwise")
#: The study photographs the recording scores (indices into trained.STUDY_PHOTOGRAPHS, B = 1 each), and
#: the one on which the learning rate is chosen (never scored in the recording's tables).
PHOTOGRAPHS, TUNING_PHOTOGRAPH = (0, 1, 2), 3
#: σ (pixels) of the truth-plus-noise reference and of the sanity arm's start.
SANITY_SIGMA = 0.01
#: Ye et al.'s base learning rate (normalised units, our_res34_pretrained.yaml), also Geiping et al.'s.
AUTHORS_LR = 0.1
#: Snapshots per run (besides T1, T2 and the end) and curve points of the stored loss history.
SNAPSHOTS, LOSS_POINTS = 20, 500


@dataclass(frozen=True)
class NativeSetting:
    """One arm of the native recording.

    Attributes:
        image_size: side in pixels (224: the network's training resolution; a multiple of 32).
        start_noise: σ in pixels of the sanity arm's start (the true photograph plus N(0, σ²) noise,
            clamped to [0, 1]); 0 starts from the method's own noise.
        restarts: Inverting Gradients' restarts (Geiping et al.: 8), chosen by matching distance.
        lr: the base learning rate of every method in normalised units; None: the authors' (0.1).

    Raises:
        ValueError/TypeError: naming the field that is out of range or of the wrong type.
    """

    image_size: int = 224
    start_noise: float = 0.0
    restarts: int = 1
    lr: float | None = None

    def __post_init__(self) -> None:
        TrainedSetting(image_size=self.image_size)  # checks the size
        check_hyperparameter(self.start_noise, "start_noise")
        check_count(self.restarts, "restarts")
        if self.lr is not None:
            check_hyperparameter(self.lr, "lr", positive=True)

    def label(self) -> str:
        """``"sanity arm (σ = 0.01)"``, ``"8 restarts"``, ``"lr 0.01"`` or ``"attack"``."""
        parts = [
            f"sanity arm (σ = {self.start_noise:g})" if self.start_noise else "",
            f"{self.restarts} restarts" if self.restarts > 1 else "",
            f"lr {self.lr:g}" if self.lr is not None else "",
        ]
        return ", ".join(p for p in parts if p) or "attack"


def authors_attack(
    model: torch.nn.Module,
    shared: list[torch.Tensor],
    labels: torch.Tensor,
    input_shape: tuple[int, int, int, int],
    method: str,
    iterations: int,
    *,
    seed: int,
    start: torch.Tensor | None = None,
    restarts: int = 1,
    checkpoint: Checkpoint | None = None,
    snapshots: int = SNAPSHOTS,
    lr: float | None = None,
) -> AttackResult:
    """Run ``method`` of :data:`METHODS` as its authors configure it (the module docstring) on the
    trained network ``model`` (inputs in [0, 1], its own normalisation inside) for ``iterations``.

    Args:
        shared: the client's gradient, one tensor per parameter.
        labels: ``(B,)`` true labels.
        input_shape: ``(B, 3, S, S)``.
        start: ``(B, 3, S, S)`` images in [0, 1] to start from (the sanity arm), or None.
        restarts: Inverting Gradients only.
        checkpoint: save and resume the run there.
        snapshots: evenly spaced snapshots (besides T1, T2 and the end).
        lr: the base learning rate in normalised units (None: the authors', 0.1 for every method).

    Returns:
        The attack's :class:`AttackResult`, ``info["prior_gradients"]`` at T1, T2 and the last
        iteration (T1, T2 of the stepwise schedule at this budget, for every method).

    Raises:
        ValueError: for an unknown method, restarts with another method than Inverting Gradients.
    """
    from gitutor.models.pretrained import LITE_MEAN, LITE_STD

    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if restarts != 1 and method != "Inverting Gradients":
        raise ValueError(
            f"restarts are an Inverting Gradients setting, got method {method!r}"
        )
    schedule = StepwiseSchedule.paper(
        iterations, len(shared), floor=stage_floor(model), authors_timing=True
    )
    shape = tuple(input_shape)
    common = dict(
        seed=seed,
        start=start,
        checkpoint=checkpoint,
        record_every=max(1, iterations // snapshots),
        diagnose_at=sorted({schedule.t1, schedule.t2, iterations - 1} - {iterations}),
    )
    options = StepwiseOptions.authors(mean=LITE_MEAN, std=LITE_STD)
    if method == "Inverting Gradients":
        return inverting_gradients(
            model,
            shared,
            labels,
            shape,
            iterations=iterations,
            tv_weight=GEIPING_IMAGENET["tv_weight"],
            lr=GEIPING_IMAGENET["lr"] if lr is None else lr,
            normalisation=(LITE_MEAN, LITE_STD),
            restarts=restarts,
            **common,
        )
    if method == "GradInversion":
        return gradinversion(
            model,
            shared,
            labels,
            shape,
            iterations=iterations,
            tv_weight=AUTHORS_TV_WEIGHT,
            bn_weight=AUTHORS_BN_WEIGHT,
            lr=AUTHORS_LR if lr is None else lr,
            options=options,
            **common,
        )
    return stepwise_inversion(
        model,
        shared,
        labels,
        shape,
        iterations=iterations,
        schedule=schedule,
        dropout=0.3,
        tv_weight=AUTHORS_TV_WEIGHT,
        bn_weight=AUTHORS_BN_WEIGHT,
        lr=AUTHORS_LR if lr is None else lr,
        options=options,
        **common,
    )


def matching_distance(
    model: torch.nn.Module,
    shared: list[torch.Tensor],
    images: torch.Tensor,
    labels: torch.Tensor,
) -> float:
    """The cosine distance over every tensor, no dropout (Geiping et al. Eq. 4's matching term), of
    ``images``' gradient to ``shared``: the yardstick every method's final image is read against."""
    candidate = client_gradients(model, images, labels)
    return float(CosineToTarget(shared)(candidate).detach())


def trial(
    context: Mapping,
    *,
    setting: NativeSetting,
    method: str,
    batch: int,
    iterations: int,
    seed: int = 0,
    checkpoint: Checkpoint | None = None,
) -> dict:
    """One scored arm (what :func:`gitutor.sweeps.run_trials` calls; ``context["device"]``).

    Returns:
        ``{"curve": [[t, PSNR dB, SSIM, LPIPS, layout r], …] per snapshot, "snapshots": {str(t): PNG}
        at T1, T2 and the end, "images": final image (1, 3, S, S) matched to the truth,
        "loss", "gradient_distance": [[t, value], …] (:data:`LOSS_POINTS` points),
        "prior_gradients": {str(t): …}, "distance": {"final", "truth+noise"}, "info", "seconds"}``.

    Raises:
        TypeError/ValueError: for a setting that is not a :class:`NativeSetting`, an unknown method,
            restarts with another method, ``iterations < 1`` or a batch that is not a recorded or the
            tuning photograph — before the model is loaded (and as :func:`authors_attack`).
    """
    if not isinstance(setting, NativeSetting):
        raise TypeError(
            f"setting must be a NativeSetting, got {type(setting).__name__}"
        )
    check_choice(method, "method", METHODS)
    check_count(iterations, "iterations")
    if setting.restarts != 1 and method != "Inverting Gradients":
        raise ValueError(
            f"restarts are an Inverting Gradients setting, got method {method!r}"
        )
    if isinstance(batch, bool) or batch not in (*PHOTOGRAPHS, TUNING_PHOTOGRAPH):
        raise ValueError(
            f"batch must be one of {(*PHOTOGRAPHS, TUNING_PHOTOGRAPH)}, got {batch!r}"
        )
    start_time = time.perf_counter()
    device = torch.device(context.get("device", "cpu"))
    model = trained_model().to(device).eval()
    x, y = (
        t.to(device)
        for t in trained_batch(TrainedSetting(image_size=setting.image_size), batch)
    )
    shared = client_gradients(model, x, y)
    generator = make_generator(
        10_000 + seed, device
    )  # the noise of the references, not the attack's stream
    noisy = (
        x + SANITY_SIGMA * torch.randn(x.shape, generator=generator, device=device)
    ).clamp(0, 1)
    start = None
    if setting.start_noise:
        start = (
            x
            + setting.start_noise
            * torch.randn(x.shape, generator=generator, device=device)
        ).clamp(0, 1)
    result = authors_attack(
        model,
        shared,
        y,
        tuple(x.shape),
        method,
        iterations,
        seed=seed,
        start=start,
        restarts=setting.restarts,
        checkpoint=checkpoint,
        lr=setting.lr,
    )
    truth = x.cpu()
    curve, pictures = [], {}
    schedule = StepwiseSchedule.paper(
        iterations, len(shared), floor=stage_floor(model), authors_timing=True
    )
    for t, images in result.snapshots:
        matched = match_batch(images.cpu().clamp(0, 1), truth)
        curve.append(
            [
                t,
                psnr(matched, truth).mean().item(),
                ssim(matched, truth).mean().item(),
                lpips_distance(matched, truth).mean().item(),
                layout_correlation(matched, truth).mean().item(),
            ]
        )
        if t in (schedule.t1, schedule.t2, iterations):
            pictures[str(t)] = encode_images(matched)
    final = match_batch(result.images.cpu().clamp(0, 1), truth)
    every = max(1, iterations // LOSS_POINTS)
    history = {
        key: [
            [t, result.history[key][t]]
            for t in range(0, len(result.history[key]), every)
        ]
        for key in ("loss", "gradient_distance")
    }
    return {
        "curve": curve,
        "snapshots": pictures,
        "images": final,
        **history,
        "prior_gradients": result.info.get("prior_gradients", {}),
        "distance": {
            "final": matching_distance(model, shared, final.to(device), y),
            "truth+noise": matching_distance(model, shared, noisy, y),
        },
        "info": {k: v for k, v in result.info.items() if k != "prior_gradients"},
        "seconds": time.perf_counter() - start_time,
    }


def study_trials(
    settings, iterations: int, methods=METHODS, photographs=PHOTOGRAPHS
) -> list[dict]:
    """Every (setting, method, photograph) arm at ``iterations``; photograph i runs with seed i.

    Args:
        settings: :class:`NativeSetting` arms.
        iterations: the budget of every arm (≥ 1).
        methods: names of :data:`METHODS` (a list, not one name).
        photographs: indices of :data:`PHOTOGRAPHS` or :data:`TUNING_PHOTOGRAPH`.

    Raises:
        TypeError/ValueError: naming the argument that is not of that kind, before any trial is built.
    """
    check_count(iterations, "iterations")
    if isinstance(methods, str) or not all(
        isinstance(s, NativeSetting) for s in settings
    ):
        raise TypeError(
            "methods must be a list of method names and settings a list of NativeSetting"
        )
    for method in methods:
        check_choice(method, "methods[i]", METHODS)
    if any(
        isinstance(i, bool) or i not in (*PHOTOGRAPHS, TUNING_PHOTOGRAPH)
        for i in photographs
    ):
        raise ValueError(
            f"photographs must be among {(*PHOTOGRAPHS, TUNING_PHOTOGRAPH)}, got {photographs!r}"
        )
    return [
        dict(setting=s, method=m, batch=i, iterations=iterations, seed=i)
        for s in settings
        for m in methods
        for i in photographs
    ]
