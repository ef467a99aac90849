"""The settings and trials of chapter 04's setting study: which network, BatchNorm statistics,
prior scale and batch size let Inverting Gradients, GradInversion and stepwise GradInversion
recover whole photographs, changing one factor at a time from a base setting.

A *setting* fixes the network (architecture and width), its weights (random, or the trained
substitute that ships with ``gitutor``), its BatchNorm statistics (torchvision's defaults —
mean 0, variance 1 —, calibrated on 64 auxiliary crops, or trained), the image size, the batch
size, the prior scale, the client's BatchNorm mode and the learning rate. The prior scale
multiplies the paper's λ_tv = 0.01 and λ_BN = 1e-4 on the *sums* of Ye et al. (AAAI 2024) Eq. 11
for GradInversion and stepwise GradInversion; Inverting Gradients keeps Geiping et al.'s
α_TV = 0.01 on their mean TV (:data:`IG_TV`). A *trial* runs one method on one batch for
``iterations`` steps and scores the snapshots along the way (PSNR, SSIM after Hungarian
matching): the curve is the trajectory of one run whose lr schedule spans the whole budget.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import torch
import torchvision

from gitutor.chapters.stepwise_gradinversion.trials import run_attack
from gitutor.data import (
    ATTACKED_PHOTOGRAPHS,
    BUNDLED_PHOTOGRAPHS,
    attacked_photographs,
    bundled_crops,
)
from gitutor.federated.client import client_gradients
from gitutor.metrics import match_batch, psnr, ssim
from gitutor.models import calibrate_batchnorm, cifar_resnet18, resnet20, resnet34
from gitutor.models.substitute import load_substitute
from gitutor.seeding import make_generator

METHODS = ("Inverting Gradients", "GradInversion", "Stepwise")
#: Iterations at which a trial's snapshot is scored (those ≤ its budget).
CHECKPOINTS = (0, 10, 30, 100, 200, 300, 500, 700, 1000, 1500, 2000, 3000, 5000)
PAPER_TV, PAPER_BN = 0.01, 1e-4
#: α_TV of Inverting Gradients (Geiping et al. 2020: a mean anisotropic TV), every setting.
IG_TV = 0.01
ARCHITECTURES = ("cifar_resnet18", "resnet20", "resnet34")
BN_STATISTICS = ("default", "calibrated", "trained")
#: Classes of a random network's last layer (labels are drawn distinct among them).
RANDOM_CLASSES = 10
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class Setting:
    """One point of the study (see the module docstring).

    ``width`` is the first stage's channels: any for ``cifar_resnet18``, 16 or 64 (ResNet-20-4)
    for ``resnet20``, 64 for ``resnet34``. ``weights="trained"`` is the shipped ResNet-20
    substitute (width 16) with its trained statistics (``bn_statistics="trained"``).

    Raises:
        ValueError: naming the field that is out of its range or inconsistent with another.
    """

    architecture: str = "cifar_resnet18"
    width: int = 32
    weights: str = "random"
    bn_statistics: str = "default"
    image_size: int = 32
    batch_size: int = 1
    prior_scale: float = 0.01
    bn_mode: str = "eval"
    lr: float = 0.1

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(
                f"architecture must be one of {ARCHITECTURES}, got {self.architecture!r}"
            )
        if self.weights not in ("trained", "random"):
            raise ValueError(
                f"weights must be 'trained' or 'random', got {self.weights!r}"
            )
        if self.bn_statistics not in BN_STATISTICS:
            raise ValueError(
                f"bn_statistics must be one of {BN_STATISTICS}, got {self.bn_statistics!r}"
            )
        if (self.weights == "trained") != (self.bn_statistics == "trained"):
            raise ValueError(
                "bn_statistics is 'trained' exactly when weights is 'trained', got "
                f"weights={self.weights!r}, bn_statistics={self.bn_statistics!r}"
            )
        if self.weights == "trained" and (self.architecture, self.width) != (
            "resnet20",
            16,
        ):
            raise ValueError(
                "trained weights exist for the ResNet-20 of width 16 only (the shipped "
                f"substitute), got {self.architecture} of width {self.width}"
            )
        if self.architecture == "resnet34" and self.width != 64:
            raise ValueError(f"resnet34 has width 64, got width={self.width}")
        if not isinstance(self.width, int) or self.width < 1:
            raise ValueError(f"width must be a positive int, got {self.width!r}")
        if self.bn_mode not in ("eval", "train"):
            raise ValueError(f"bn_mode must be 'eval' or 'train', got {self.bn_mode!r}")
        if not 1 <= self.batch_size <= len(self.photographs()):
            raise ValueError(
                f"batch_size must be in [1, {len(self.photographs())}], got {self.batch_size!r}"
            )
        if not self.prior_scale >= 0 or not self.lr > 0:
            raise ValueError(
                f"need prior_scale ≥ 0 and lr > 0, got {self.prior_scale}, {self.lr}"
            )

    def photographs(self) -> tuple[str, ...]:
        """The photographs a batch draws on: all bundled ones, or for the trained substitute the
        six held out of its training (the first six of the bundled ones, in the same order)."""
        return (
            ATTACKED_PHOTOGRAPHS if self.weights == "trained" else BUNDLED_PHOTOGRAPHS
        )

    def label(self, base: "Setting") -> str:
        """What differs from ``base``, e.g. ``"width=64"`` (``"base"`` if nothing)."""
        changed = [f"{k}={v}" for k, v in asdict(self).items() if getattr(base, k) != v]
        return ", ".join(changed) or "base"


#: The study's networks by name (random weights): name → (architecture, width).
NETWORKS = {
    "ResNet-20 (width 16)": ("resnet20", 16),
    "CIFAR ResNet-18, width 32": ("cifar_resnet18", 32),
    "ResNet-20-4 (width 64)": ("resnet20", 64),
    "CIFAR ResNet-18, width 64": ("cifar_resnet18", 64),
    "ResNet34 (ImageNet stem)": ("resnet34", 64),
}

BASE = Setting()
#: One factor at a time: factor name → the settings that change it.
FACTORS = {
    "width and architecture": [
        replace(BASE, architecture="resnet20", width=16),
        replace(BASE, architecture="resnet20", width=64),
        replace(BASE, width=64),
        replace(BASE, architecture="resnet34", width=64),
    ],
    "BatchNorm statistics": [
        replace(BASE, bn_statistics="calibrated"),
        replace(BASE, architecture="resnet20", width=16, bn_statistics="calibrated"),
    ],
    "trained weights": [
        replace(
            BASE,
            architecture="resnet20",
            width=16,
            weights="trained",
            bn_statistics="trained",
        )
    ],
    "prior scale": [
        replace(BASE, prior_scale=scale) for scale in (0.0, 0.001, 0.1, 1.0)
    ],
    "batch size": [replace(BASE, batch_size=8)],  # B = 4: chapter 04's recording
}


def study_batch(setting: Setting, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch ``index`` of a setting (:func:`gitutor.data.attacked_photographs` of
    :meth:`Setting.photographs`), ``(B, 3, S, S)`` in [0, 1], with distinct labels drawn from
    the network's classes (seed ``index``)."""
    classes = 16 if setting.weights == "trained" else RANDOM_CLASSES
    labels = torch.randperm(classes, generator=make_generator(index))
    x = attacked_photographs(
        setting.image_size, setting.batch_size, index, setting.photographs()
    )
    return x, labels[: setting.batch_size]


@functools.lru_cache(maxsize=2)
def study_model(
    architecture: str,
    width: int,
    weights: str,
    bn_statistics: str,
    image_size: int,
    weights_path: str | None,
) -> torch.nn.Sequential:
    """The attacked network behind ImageNet normalisation, in eval mode (cached): the trained
    substitute at ``weights_path``, or a random one (seed 0) with default statistics or
    statistics calibrated on 64 auxiliary crops."""
    if weights == "trained":
        return load_substitute(weights_path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(
            0
        )  # torchvision's initialisers draw from the global generator
        body = {
            "cifar_resnet18": lambda: cifar_resnet18(RANDOM_CLASSES, width, seed=0),
            "resnet20": lambda: resnet20(RANDOM_CLASSES, seed=0, width=width),
            "resnet34": lambda: resnet34(num_classes=RANDOM_CLASSES),
        }[architecture]()
    model = torch.nn.Sequential(
        torchvision.transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD), body
    )
    if bn_statistics == "calibrated":
        calibrate_batchnorm(model, bundled_crops(64, image_size, 1, "aux"))
    return model.eval()


def trial(
    context: Mapping,
    *,
    setting: Setting,
    method: str,
    batch: int,
    iterations: int,
    seed: int = 0,
) -> dict:
    """One scored run (what :func:`gitutor.sweeps.run_trials` calls).

    ``context["weights"]`` is the trained substitute's path; the trial runs on
    ``context.get("device", "cpu")`` and is scored on the CPU.

    Returns:
        ``{"curve": [[iteration, PSNR dB, SSIM], …] at the :data:`CHECKPOINTS` ≤ iterations
        and the end, "images": final reconstruction matched to the truth, "seconds"}``.
    """
    start = time.perf_counter()
    device = torch.device(context.get("device", "cpu"))
    model = study_model(
        setting.architecture,
        setting.width,
        setting.weights,
        setting.bn_statistics,
        setting.image_size,
        context.get("weights"),
    ).to(device)
    model.train(setting.bn_mode == "train")
    x, y = (t.to(device) for t in study_batch(setting, batch))
    shared = client_gradients(model, x, y)
    scale = setting.prior_scale
    settings = {
        "dropout": 0.3,
        "tv_weight": PAPER_TV * scale,
        "ig_tv_weight": IG_TV,
        "bn_weight": PAPER_BN * scale if setting.bn_mode == "eval" else 0.0,
        "lr": setting.lr,
        "t1": 3000,
        "t2": 5000,
        "dlg_inner_steps": 20,
        "num_classes": 16 if setting.weights == "trained" else RANDOM_CLASSES,
        "record_every": 10,
    }
    attack_context = {
        "model": model,
        "batches": {(setting.batch_size, batch): (x, y, shared)},
        "settings": settings,
    }
    result = run_attack(
        attack_context, method, (setting.batch_size, batch), iterations, seed
    )
    model.eval()
    wanted = {t for t in CHECKPOINTS if t <= iterations} | {iterations}
    x = x.cpu()
    curve = [
        [t, *_scores(images.cpu(), x)] for t, images in result.snapshots if t in wanted
    ]
    return {
        "curve": curve,
        "images": match_batch(result.images.cpu().clamp(0, 1), x),
        "seconds": time.perf_counter() - start,
    }


def _scores(images: torch.Tensor, truth: torch.Tensor) -> tuple[float, float]:
    matched = match_batch(images.clamp(0, 1), truth)
    return psnr(matched, truth).mean().item(), ssim(matched, truth).mean().item()


def study_trials(
    settings: Sequence[Setting],
    iterations: int,
    batches: int = 3,
    methods: Sequence[str] = METHODS,
) -> list[dict]:
    """Every (setting, method, batch) trial at ``iterations``; batch i starts from seed i."""
    return [
        dict(setting=s, method=m, batch=i, iterations=iterations, seed=i)
        for s in settings
        for m in methods
        for i in range(batches)
    ]
