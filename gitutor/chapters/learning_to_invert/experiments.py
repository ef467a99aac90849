"""Chapter 06's experiments: Learning To Invert against Inverting Gradients under four defenses
(Wu et al. 2022, §4.1, Table 1, Fig. 3a, Table 2).

:func:`load_split` gives the auxiliary set and the held-out targets, :func:`build_model` and
:func:`build_hasher` the FL model f_w and the feature hash P (§3.2). A :class:`Setup` holds the
settings every experiment shares and fits g_θ (:meth:`Setup.fit`, Eq. 2–3) or runs the
defense-aware Inverting Gradients baseline (:meth:`Setup.ig`, Appendix A). :func:`observe` builds
what the server sees of the targets through :func:`~gitutor.federated.case.defended_clients_case`;
:func:`lti_vs_ig` is one cell of Table 1, :func:`aux_size_errors` one curve of Fig. 3a and
:func:`ood_errors` one column of Table 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from gitutor.attacks import FeatureHasher, InversionMLP, dlg, make_gradient_dataset
from gitutor.attacks.lti import (
    aggregate_batches,
    gradient_features,
    reconstruct,
    train_inversion_model,
)
from gitutor.chapters.learning_to_invert.tuning import run_ig
from gitutor.data import digits, torchvision_images
from gitutor.federated import Defense, gradient_dimension
from gitutor.federated.case import defended_clients_case
from gitutor.metrics import match_batch, mse, score_batch
from gitutor.models import LeNet, init_uniform_, resnet20
from gitutor.seeding import make_generator

#: ``data_root`` value that replaces the full profile's CIFAR-10 by the bundled digits (offline smoke runs).
BUNDLED = "bundled"


def load_split(
    cfg, seed: int, data_root: str | Path = "data"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The auxiliary set and the held-out targets: ``(aux_x, aux_y, target_x, target_y)``.

    ``cfg.dataset == "digits"`` or ``data_root == "bundled"``: scikit-learn's digits at
    ``cfg.image_size`` with ``cfg.channels``, shuffled with ``seed``; the first ``cfg.n_heldout`` are
    the targets, up to ``cfg.n_aux`` of the rest (None: all) the auxiliary set, so no target is ever
    in it. Otherwise torchvision's ``cfg.dataset`` under ``data_root``: ``cfg.n_aux`` train images
    (auxiliary) and ``cfg.n_heldout`` test images (targets), as in §4.1.

    Returns:
        images ``(N, C, H, W)`` float in [0, 1] and labels ``(N,)`` int64, twice.

    Raises:
        ValueError: if the digits cannot give ``cfg.n_heldout`` targets and one auxiliary image.
        OfflineDataError: when the dataset is not under ``data_root`` (with the download command).
    """
    if cfg.dataset == "digits" or str(data_root) == BUNDLED:
        images, labels = digits(size=cfg.image_size, channels=cfg.channels)
        if not 0 < cfg.n_heldout < len(images):
            raise ValueError(
                f"n_heldout must be in [1, {len(images) - 1}] for the digits, got {cfg.n_heldout!r}"
            )
        order = torch.randperm(len(images), generator=make_generator(seed))
        held_out, auxiliary = (
            order[: cfg.n_heldout],
            order[cfg.n_heldout :][: cfg.n_aux],
        )
        return images[auxiliary], labels[auxiliary], images[held_out], labels[held_out]
    aux = torchvision_images(
        cfg.dataset,
        cfg.n_aux,
        root=data_root,
        train=True,
        size=cfg.image_size,
        seed=seed,
    )
    targets = torchvision_images(
        cfg.dataset,
        cfg.n_heldout,
        root=data_root,
        train=False,
        size=cfg.image_size,
        seed=seed,
    )
    return (*aux, *targets)


def build_model(name: str, cfg, device: str | torch.device = "cpu") -> nn.Module:
    """The untrained FL model f_w: ``"lenet"`` (DLG LeNet, U(−a, a) weights from ``cfg.model_seed``)
    or ``"resnet20"``, for ``cfg.channels`` × ``cfg.image_size``² inputs and ``cfg.num_classes``.

    Raises:
        ValueError: for another name.
    """
    if name == "lenet":
        model = LeNet(
            num_classes=cfg.num_classes,
            in_channels=cfg.channels,
            image_size=cfg.image_size,
        )
        init_uniform_(model, a=cfg.init_a, generator=make_generator(cfg.model_seed))
    elif name == "resnet20":
        model = resnet20(
            num_classes=cfg.num_classes, in_channels=cfg.channels, seed=cfg.model_seed
        )
    else:
        raise ValueError(f"name must be 'lenet' or 'resnet20', got {name!r}")
    return model.to(device)


def build_hasher(name: str, model: nn.Module, cfg, seed: int) -> FeatureHasher | None:
    """Feature hashing P (§3.2) of the m gradient coordinates to ``cfg.hash_fraction[name]`` · m bins,
    or None when that fraction is None (no hashing)."""
    fraction, m = cfg.hash_fraction[name], gradient_dimension(model)
    return None if fraction is None else FeatureHasher(m, int(fraction * m), seed=seed)


@dataclass(frozen=True)
class Setup:
    """What every experiment of the chapter shares: the profile ``cfg`` (MLP and IG settings), the
    ``seed``, the ``device``, tqdm ``progress`` and the ``image_shape`` ``(C, H, W)``."""

    cfg: object
    seed: int
    device: str | torch.device
    progress: bool
    image_shape: tuple[int, int, int]

    def fit(
        self, features: torch.Tensor, batches: torch.Tensor, batch_size: int
    ) -> tuple[InversionMLP, dict[str, list[float]]]:
        """A fresh g_θ (hidden size ``cfg.hidden[batch_size]``) trained on ``features`` ``(N, in_dim)`` →
        ``batches`` ``(N, B, C, H, W)`` (Eq. 2–3), its input standardised when ``cfg.standardise``, for
        ``cfg.epochs`` epochs or, with ``cfg.patience``, until its validation loss flattens (the stopping
        rule of :func:`~gitutor.attacks.lti.train_inversion_model`, ``cfg.epochs`` the cap); returns it and
        its loss curves.

        Raises:
            ValueError / KeyError: as :func:`~gitutor.attacks.lti.train_inversion_model`; KeyError for a
                batch size without a hidden size in the profile.
        """
        cfg = self.cfg
        inversion = InversionMLP(
            features.shape[1],
            self.image_shape,
            batch_size,
            cfg.hidden[batch_size],
            seed=self.seed,
        )
        history = train_inversion_model(
            inversion,
            features,
            batches,
            epochs=cfg.epochs,
            lr=cfg.lr,
            batch_size=cfg.train_batch,
            val_fraction=cfg.val_fraction,
            lr_drop_at=cfg.lr_drop_at,
            seed=self.seed,
            device=self.device,
            progress=self.progress,
            standardise=cfg.standardise,
            patience=cfg.patience,
            min_delta=cfg.min_delta,
        )
        return inversion, history

    def ig(
        self,
        model: nn.Module,
        observed: list[torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
        defense_name: str,
    ) -> torch.Tensor:
        """Defense-aware Inverting Gradients on one observed gradient of the batch ``x`` ``(B, C, H, W)``
        with known labels ``y``, at ``cfg.ig_iterations`` and the settings ``cfg.ig_settings[defense_name]``
        (:func:`~gitutor.chapters.learning_to_invert.tuning.run_ig`), tuned for B = 1: a batch (B > 1) runs
        them with one start (restarts would multiply B = 4's larger cost); returns ``(1, B, C, H, W)``.

        Raises:
            KeyError: for a defense without settings in the profile.
        """
        settings = self.cfg.ig_settings[defense_name]
        settings = settings if len(x) == 1 else {**settings, "restarts": 1}
        return run_ig(
            model,
            observed,
            x,
            y,
            defense_name,
            self.cfg.ig_iterations,
            settings,
            self.seed,
            self.progress,
        )

    def dlg(
        self,
        model: nn.Module,
        observed: list[torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> torch.Tensor:
        """DLG (Zhu et al. 2019, Alg. 1) with the labels known (the iDLG setting, as IG is given them): L-BFGS
        on the L2 distance to the observed (defended) gradient for ``cfg.dlg_iterations`` steps, stopped once
        it is below ``cfg.dlg_stop_loss``; the image clamped to the pixel box [0, 1] for scoring (DLG itself
        does not clamp). Returns ``(1, B, C, H, W)``."""
        result = dlg(
            model,
            observed,
            tuple(x.shape),
            self.cfg.num_classes,
            labels=y.to(observed[0].device),
            iterations=self.cfg.dlg_iterations,
            stop_loss=self.cfg.dlg_stop_loss,
            seed=self.seed,
            progress=self.progress,
        )
        return result.images.clamp(0, 1)[None]


def observe(
    model: nn.Module,
    hasher: FeatureHasher | None,
    defense: Defense | None,
    images: torch.Tensor,
    labels: torch.Tensor,
    batch_size: int,
) -> tuple[torch.Tensor, list[list[torch.Tensor]], torch.Tensor]:
    """What the server sees of the targets: consecutive groups of ``batch_size`` clients with one image
    each send defended gradients, the server receives their mean
    (:func:`~gitutor.federated.case.defended_clients_case`, §3.1).

    Returns:
        ``groups`` ``(n, B)`` target indices (the last ``N mod B`` targets are left out), the ``n``
        observed gradient lists and their (hashed) features ``(n, m or k)``.

    Raises:
        ValueError: if ``batch_size`` is not in [1, N]; as ``defended_clients_case``.
    """
    if not 1 <= batch_size <= len(images):
        raise ValueError(
            f"batch_size must be in [1, {len(images)}], got {batch_size!r}"
        )
    device = next(model.parameters()).device
    n = len(images) // batch_size
    groups = torch.arange(n * batch_size).view(n, batch_size)
    observed = [
        defended_clients_case(
            model, images[g].to(device), labels[g].to(device), defense
        ).update
        for g in groups
    ]
    return (
        groups,
        observed,
        torch.stack([gradient_features(o, hasher) for o in observed]),
    )


@dataclass(frozen=True)
class Comparison:
    """One cell of Table 1: IG, DLG (B = 1) and LTI reconstructions of the same targets.

    Attributes:
        scores: ``{"IG", "DLG" (B = 1 only), "LTI", "LTI (all held-out)": {"mse", "psnr", "ssim", "lpips"}}``
            (:func:`~gitutor.metrics.score_batch`; LPIPS with its AlexNet backbone, None when not installed).
        history: g_θ's loss curves; ``ig_images`` ``(n_ig, B, C, H, W)``; ``lti_images`` ``(n, B, C, H, W)``;
        truth: ``(n, B, C, H, W)`` the targets; ``features``: the targets' observed features ``(n, m or k)``;
        dlg_images: ``(n_ig, B, C, H, W)`` for B = 1, else None.
    """

    scores: dict[str, dict[str, float]]
    history: dict[str, list[float]]
    ig_images: torch.Tensor
    lti_images: torch.Tensor
    truth: torch.Tensor
    features: torch.Tensor
    dlg_images: torch.Tensor | None = None

    def per_batch_mse(self, method: str) -> list[float]:
        """MSE of every target batch attacked by both methods (``"IG"``, ``"DLG"`` or ``"LTI"``): one value per
        batch, its images put in their best order first (:func:`~gitutor.metrics.match_batch`); for
        B = 1 one value per target.

        Raises:
            ValueError: for another method, or DLG in a cell it did not attack.
        """
        return [float(mse(r, x).mean()) for r, x in self.matched(method)]

    def matched(self, method: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``(reconstruction, truth)`` ``(B, C, H, W)`` pairs of every batch attacked by both methods, the
        reconstruction put in its best order (:func:`~gitutor.metrics.match_batch`).

        Raises:
            ValueError: for a method other than ``"IG"``, ``"DLG"`` or ``"LTI"``, or DLG in a cell without it.
        """
        if method not in ("IG", "DLG", "LTI") or (
            method == "DLG" and self.dlg_images is None
        ):
            raise ValueError(
                f"method must be 'IG', 'LTI' or (B = 1) 'DLG', got {method!r}"
            )
        images = {"IG": self.ig_images, "DLG": self.dlg_images}.get(
            method, self.lti_images[: len(self.ig_images)]
        )
        return [
            (match_batch(r, x), x) for r, x in zip(images, self.truth[: len(images)])
        ]


def lti_vs_ig(
    setup: Setup,
    model: nn.Module,
    hasher: FeatureHasher | None,
    defense: Defense,
    aux: tuple[torch.Tensor, torch.Tensor],
    targets: tuple[torch.Tensor, torch.Tensor],
    batch_size: int,
) -> Comparison:
    """Table 1, one model × defense × B: train g_θ on the aggregated auxiliary ``(features, batches)``
    (B = 1 pairs from :func:`~gitutor.attacks.make_gradient_dataset`; ``cfg.b4_batches`` random
    B-batches for B > 1), observe the targets ``(images, labels)`` (:func:`observe`), reconstruct all
    of them with LTI and the first ``cfg.n_ig_targets`` (B = 1) or ``cfg.n_ig_batches`` with IG; for B = 1
    the same targets also with DLG (:meth:`Setup.dlg`), on the same observed gradients.

    Raises:
        ValueError: as :func:`observe`, :func:`~gitutor.attacks.lti.aggregate_batches` and the attacks.
    """
    cfg, (target_x, target_y) = setup.cfg, targets
    groups, observed, features = observe(
        model, hasher, defense, target_x, target_y, batch_size
    )
    train_f, train_b = aggregate_batches(
        *aux,
        batch_size,
        num_batches=None if batch_size == 1 else cfg.b4_batches,
        seed=setup.seed,
    )
    inversion, history = setup.fit(train_f, train_b, batch_size)
    lti_images = reconstruct(inversion, features, device=setup.device).images
    n_ig = cfg.n_ig_targets if batch_size == 1 else cfg.n_ig_batches
    ig_images = torch.cat(
        [
            setup.ig(
                model,
                observed[i],
                target_x[groups[i]],
                target_y[groups[i]],
                defense.name,
            )
            for i in range(n_ig)
        ]
    )
    dlg_images = (
        None
        if batch_size > 1
        else torch.cat(
            [
                setup.dlg(model, observed[i], target_x[groups[i]], target_y[groups[i]])
                for i in range(n_ig)
            ]
        ).cpu()
    )
    truth = target_x[groups]
    scores = {
        "IG": score_batch(ig_images, truth[:n_ig], lpips=True),
        **(
            {}
            if dlg_images is None
            else {"DLG": score_batch(dlg_images, truth[:n_ig], lpips=True)}
        ),
        "LTI": score_batch(lti_images[:n_ig], truth[:n_ig], lpips=True),
        "LTI (all held-out)": score_batch(lti_images, truth, lpips=True),
    }
    return Comparison(
        scores, history, ig_images, lti_images, truth, features, dlg_images
    )


def aux_size_errors(
    setup: Setup,
    features: torch.Tensor,
    aux_x: torch.Tensor,
    sizes: list[int],
    target_features: torch.Tensor,
    target_x: torch.Tensor,
) -> list[list[float]]:
    """Fig. 3a for one defense: per size, g_θ (B = 1) trained on the first ``size`` auxiliary pairs
    (``features`` ``(N, d)``, ``aux_x`` ``(N, C, H, W)``) and the MSE of each held-out target.

    Raises:
        ValueError: for a size outside [1, N].
    """
    if any(not 1 <= size <= len(aux_x) for size in sizes):
        raise ValueError(f"sizes must lie in [1, {len(aux_x)}], got {sizes}")
    errors = []
    for size in sizes:
        inversion, _ = setup.fit(features[:size], aux_x[:size, None], 1)
        errors.append(
            mse(
                reconstruct(inversion, target_features, device=setup.device).images[
                    :, 0
                ],
                target_x,
            ).tolist()
        )
    return errors


def ood_errors(
    setup: Setup,
    model: nn.Module,
    hasher: FeatureHasher | None,
    defense: Defense,
    ood: tuple[torch.Tensor, torch.Tensor],
    synthetic: tuple[torch.Tensor, torch.Tensor],
    target_features: torch.Tensor,
    target_x: torch.Tensor,
) -> dict[str, list[float]]:
    """Table 2 for one defense: per-target MSE on the targets of g_θ trained on the out-of-distribution
    auxiliary pairs ``ood`` = (features, images) alone, and with the DCT-Gaussian ``synthetic`` (images,
    labels) added (LTI-OOD, §4.1.2), whose defended gradients are computed here.

    Returns:
        ``{"LTI, OOD only": [mse per target], "LTI-OOD (+ DCT samples)": [...]}``.
    """
    synthetic_features, _ = make_gradient_dataset(
        model, *synthetic, defense, 1, hasher=hasher
    )
    variants = {
        "LTI, OOD only": ood,
        "LTI-OOD (+ DCT samples)": (
            torch.cat([ood[0], synthetic_features]),
            torch.cat([ood[1], synthetic[0]]),
        ),
    }
    result = {}
    for variant, (features, images) in variants.items():
        inversion, _ = setup.fit(features, images[:, None], 1)
        rec = reconstruct(inversion, target_features, device=setup.device).images
        result[variant] = mse(rec[:, 0], target_x).tolist()
    return result
