"""Chapter 04 on a trained network: the attacks against ImageNet-trained EfficientNet-Lite0.

The paper attacks an ImageNet-trained ResNet34 in eval mode, whose BatchNorm layers hold ImageNet
running statistics, so that R_BN (Ye et al., AAAI 2024, Eq. 11) pulls the candidate's feature
statistics towards those of natural images. The only ImageNet-trained network with real BatchNorm
statistics available offline is EfficientNet-Lite0 (:func:`gitutor.models.pretrained`, 49 BatchNorm
layers); the photographs are the 20 ImageNet samples with their true labels
(``gitutor.data.load("imagenet")``, the ImageNet evaluation resize and centre crop at ``image_size``).

Two disjoint sets of photographs: the *study* set (:data:`STUDY_PHOTOGRAPHS`, B = 1) on which the
factors are measured — R_BN on / off, λ_BN around the paper's, the authors' options — and the
*table* set (:data:`TABLE_BATCHES`, four batches of four distinct labels from the other 16) on which
Table 1 is scored, so that nothing chosen on the study set is scored in the table.

A trial (:func:`trial`, what :func:`gitutor.sweeps.run_trials` calls) runs one method on one batch
and scores snapshots along the way (PSNR, SSIM after Hungarian matching) and the final images (LPIPS,
real AlexNet backbone, at ``image_size`` — not 224 px, so not comparable with the paper's LPIPS).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from gitutor.chapters.stepwise_gradinversion.trials import run_attack
from gitutor.attacks.stepwise import stepwise_inversion
from gitutor.attacks.stepwise_options import (
    AUTHORS_BN_WEIGHT,
    AUTHORS_TV_WEIGHT,
    StepwiseOptions,
)
from gitutor.attacks.stepwise_schedule import StepwiseSchedule, stage_floor
from gitutor.chapters.stepwise_gradinversion.setting_study.settings import (
    CHECKPOINTS,
    IG_TV,
    PAPER_BN,
    PAPER_TV,
)
from gitutor.federated.client import client_gradients
from gitutor.metrics import lpips_distance, match_batch, psnr, ssim

#: Table 1's methods on the trained network (DLG: L-BFGS, labels given, iterations // 20 steps).
TABLE_METHODS = ("DLG", "Inverting Gradients", "GradInversion", "Stepwise")
#: Indices into the 20 ImageNet samples: the study set (bull mastiff, folding chair, beaker, buckeye).
STUDY_PHOTOGRAPHS = (0, 1, 2, 3)
#: Table 1's batches: four batches of four distinct labels from the other 16 (the two jeeps apart).
TABLE_BATCHES = ((4, 5, 6, 8), (9, 10, 11, 12), (13, 14, 15, 16), (17, 18, 19, 7))
OPTIONS = ("paper", "authors")
SPLITS = ("study", "table")


@dataclass(frozen=True)
class TrainedSetting:
    """One point of the trained-network study.

    Attributes:
        image_size: side in pixels (a multiple of 32; the network was trained at 224).
        split: ``"study"`` (B = 1 on :data:`STUDY_PHOTOGRAPHS`) or ``"table"`` (:data:`TABLE_BATCHES`).
        bn_scale: λ_BN as a multiple of the paper's 1e-4 (0: R_BN off); GradInversion and Stepwise.
        tv_scale: λ_tv as a multiple of the paper's 0.01 on Eq. 11's sum.
        options: ``"paper"`` (Eq. 10–12 as written) or ``"authors"`` (Stepwise only: the authors'
            code, :meth:`StepwiseOptions.authors` in the network's own normalisation, their TV weight
            5e-3 × ``tv_scale`` and R_BN weight 1e-4 × ``bn_scale``, their schedule timing).
        lr: base learning rate (pixels for ``"paper"``, normalised units for ``"authors"``).

    Raises:
        ValueError: naming the field that is out of range.
    """

    image_size: int = 96
    split: str = "study"
    bn_scale: float = 1.0
    tv_scale: float = 1.0
    options: str = "paper"
    lr: float = 0.1

    def __post_init__(self) -> None:
        if (
            not isinstance(self.image_size, int)
            or self.image_size < 32
            or self.image_size % 32
        ):
            raise ValueError(
                f"image_size must be a multiple of 32 ≥ 32, got {self.image_size!r}"
            )
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {self.split!r}")
        if self.options not in OPTIONS:
            raise ValueError(f"options must be one of {OPTIONS}, got {self.options!r}")
        if not (self.bn_scale >= 0 and self.tv_scale >= 0 and self.lr > 0):
            raise ValueError(
                f"need bn_scale ≥ 0, tv_scale ≥ 0, lr > 0, got {self.bn_scale}, "
                f"{self.tv_scale}, {self.lr}"
            )

    @property
    def batch_size(self) -> int:
        return 1 if self.split == "study" else len(TABLE_BATCHES[0])

    def batches(self) -> int:
        """How many batches the split holds."""
        return len(STUDY_PHOTOGRAPHS) if self.split == "study" else len(TABLE_BATCHES)

    def label(self) -> str:
        """The setting's factors away from the paper's, e.g. ``"R_BN off"`` (``"paper"`` if none)."""
        words = (
            {0.0: "R_BN off"}.get(self.bn_scale, f"λ_BN × {self.bn_scale:g}")
            if self.bn_scale != 1
            else ""
        )
        parts = [
            words,
            f"λ_tv × {self.tv_scale:g}" if self.tv_scale != 1 else "",
            "authors' options" if self.options == "authors" else "",
            f"lr {self.lr:g}" if self.lr != 0.1 else "",
        ]
        return ", ".join(p for p in parts if p) or "paper"


@functools.lru_cache(maxsize=1)
def trained_model() -> torch.nn.Module:
    """EfficientNet-Lite0 with its ImageNet weights and statistics, inputs in [0, 1], eval mode (cached)."""
    from gitutor.models import pretrained

    return pretrained("efficientnet_lite0")


@functools.lru_cache(maxsize=4)
def _photographs(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    from gitutor.data import load

    return load("imagenet", size=size)


def trained_batch(
    setting: TrainedSetting, index: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch ``index`` of ``setting.split``: ``(B, 3, S, S)`` photographs in [0, 1] and their true labels (B,).

    Raises:
        ValueError: if ``index`` is not in ``range(setting.batches())``.
    """
    if not 0 <= index < setting.batches():
        raise ValueError(f"index must be in [0, {setting.batches()}), got {index!r}")
    images, labels = _photographs(setting.image_size)
    picks = (
        [STUDY_PHOTOGRAPHS[index]]
        if setting.split == "study"
        else list(TABLE_BATCHES[index])
    )
    return images[picks].clone(), labels[picks].clone()


def _authors_stepwise(
    model, shared, y, shape, setting: TrainedSetting, iterations: int, seed: int
):
    from gitutor.models.pretrained import LITE_MEAN, LITE_STD

    schedule = StepwiseSchedule.paper(
        iterations, len(shared), floor=stage_floor(model), authors_timing=True
    )
    return stepwise_inversion(
        model,
        shared,
        y,
        shape,
        iterations=iterations,
        schedule=schedule,
        dropout=0.3,
        tv_weight=AUTHORS_TV_WEIGHT * setting.tv_scale,
        bn_weight=AUTHORS_BN_WEIGHT * setting.bn_scale,
        lr=setting.lr,
        seed=seed,
        record_every=10,
        options=StepwiseOptions.authors(mean=LITE_MEAN, std=LITE_STD),
    )


def trial(
    context: Mapping,
    *,
    setting: TrainedSetting,
    method: str,
    batch: int,
    iterations: int,
    seed: int = 0,
) -> dict:
    """One scored run on the trained network (what :func:`gitutor.sweeps.run_trials` calls).

    Returns:
        ``{"curve": [[iteration, PSNR dB, SSIM], …] at the :data:`CHECKPOINTS` ≤ iterations and the
        end, "images": final reconstruction matched to the truth (B, 3, S, S), "lpips": per image (B,),
        "seconds"}``.

    Raises:
        ValueError: for ``options="authors"`` with a method other than Stepwise (and as :func:`run_attack`).
    """
    if setting.options == "authors" and method != "Stepwise":
        raise ValueError(
            f"options='authors' is a Stepwise setting, got method {method!r}"
        )
    start = time.perf_counter()
    device = torch.device(context.get("device", "cpu"))
    model = trained_model().to(device).eval()
    x, y = (t.to(device) for t in trained_batch(setting, batch))
    shared = client_gradients(model, x, y)
    if setting.options == "authors":
        result = _authors_stepwise(
            model, shared, y, tuple(x.shape), setting, iterations, seed
        )
    else:
        settings = {
            "dropout": 0.3,
            "tv_weight": PAPER_TV * setting.tv_scale,
            "ig_tv_weight": IG_TV,
            "bn_weight": PAPER_BN * setting.bn_scale,
            "lr": setting.lr,
            "t1": 3000,
            "t2": 5000,
            "dlg_inner_steps": 20,
            "num_classes": 1000,
            "record_every": 10,
        }
        context = {
            "model": model,
            "batches": {(len(x), batch): (x, y, shared)},
            "settings": settings,
        }
        result = run_attack(
            context, method, (len(x), batch), iterations, seed, floor=stage_floor(model)
        )
    wanted = {t for t in CHECKPOINTS if t <= iterations} | {iterations}
    x = x.cpu()
    curve = []
    for t, images in result.snapshots:
        if t in wanted:
            matched = match_batch(images.cpu().clamp(0, 1), x)
            curve.append(
                [t, psnr(matched, x).mean().item(), ssim(matched, x).mean().item()]
            )
    final = match_batch(result.images.cpu().clamp(0, 1), x)
    return {
        "curve": curve,
        "images": final,
        "lpips": lpips_distance(final, x).tolist(),
        "seconds": time.perf_counter() - start,
    }


def encode_images(images: torch.Tensor) -> list[str]:
    """``(B, 3, S, S)`` images in [0, 1] as base64 PNG strings (8 bits per channel), one per image."""
    import base64
    import io

    from PIL import Image

    pixels = (
        (images.detach().cpu().clamp(0, 1) * 255)
        .round()
        .byte()
        .permute(0, 2, 3, 1)
        .numpy()
    )
    out = []
    for array in pixels:
        buffer = io.BytesIO()
        Image.fromarray(array).save(buffer, format="PNG")
        out.append(base64.b64encode(buffer.getvalue()).decode("ascii"))
    return out


def decode_images(encoded: list[str]) -> torch.Tensor:
    """The inverse of :func:`encode_images`: ``(B, 3, S, S)`` float images in [0, 1].

    Raises:
        ValueError: if ``encoded`` is empty or an entry is not a base64 PNG.
    """
    import base64
    import binascii
    import io

    import numpy as np
    from PIL import Image, UnidentifiedImageError

    if not encoded:
        raise ValueError("encoded must hold at least one image")
    try:
        arrays = [
            np.asarray(
                Image.open(io.BytesIO(base64.b64decode(s, validate=True))).convert(
                    "RGB"
                )
            )
            for s in encoded
        ]
    except (binascii.Error, UnidentifiedImageError, TypeError) as error:
        raise ValueError(
            f"encoded holds an entry that is not a base64 PNG: {error}"
        ) from None
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).float() / 255
