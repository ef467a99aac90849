"""What a reconstruction score is worth: trivial reconstructions, and the book's one "recognisable".

A PSNR or SSIM means little until it is set beside reconstructions that know (almost) nothing about
the image: a flat image of the image's own mean colour, a 4×4-pixel thumbnail enlarged again, the
mean of the batch, and a *different* photograph of the same set (REVIEW.md, controls). A threshold
called "recognisable" must lie above all of them on the images a chapter scores.

The book's definition, used by every success count: **recognisable = PSNR ≥ 30 dB** (MSE ≤ 0.001
for images in [0, 1]) against the true image, after matching. It was set on chapter 01's 20 CIFAR-100
samples, where the best control reaches 28.1 dB (a 4×4 thumbnail of a near-flat image) and the median
control 13.5–16.9 dB; each chapter checks it against these controls on its own images
(:func:`check_threshold`) and raises if a control reaches it. SSIM and LPIPS are reported beside it,
not used for the count (SSIM of a flat image is high on smooth photographs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import nn

from gitutor.checks import (
    check_flag,
    check_images,
    check_int,
    check_layout,
    check_real,
    check_seed,
)
from gitutor.metrics import psnr

#: dB: the book's "recognisable" (see the module docstring).
RECOGNISABLE_PSNR = 30.0


def control_images(images: torch.Tensor, thumbnail: int = 4) -> dict[str, torch.Tensor]:
    """Reconstructions that carry (almost) nothing of each image, same shape as ``images``.

    Args:
        images: ``(N, C, H, W)`` in [0, 1].
        thumbnail: side of the thumbnail in pixels (smaller than H and W).

    Returns:
        ``{"mean colour", f"{t}×{t} thumbnail", "batch mean", "different photograph": (N, C, H, W)}``
        — a flat image of each image's own mean colour; the image averaged down to ``thumbnail``
        pixels a side and enlarged again (bilinear); the pixel-wise mean of the N images; image i+1
        (cyclically) in place of image i. The last two need N ≥ 2 and are left out for N = 1.

    Raises:
        TypeError: naming ``images`` when it is not a float tensor, or ``thumbnail`` when it is not an int.
        ValueError: naming ``images`` when it is not ``(N, C, H, W)`` in [0, 1] or not larger than
            ``thumbnail``.
    """
    check_int(thumbnail, "thumbnail")
    if not isinstance(images, torch.Tensor) or not images.is_floating_point():
        raise TypeError(
            f"images must be a float tensor (N, C, H, W) in [0, 1], got {type(images).__name__}"
        )
    if images.dim() == 4:
        check_images(images, "images")
    if images.dim() != 4 or not 0 < thumbnail < min(images.shape[-2:]):
        raise ValueError(
            f"images must be (N, C, H, W) larger than thumbnail={thumbnail}, "
            f"got {tuple(images.shape)}"
        )
    images = images.detach().cpu()
    flat = images.mean(dim=(2, 3), keepdim=True).expand_as(images).contiguous()
    small = nn.functional.interpolate(images, size=thumbnail, mode="area")
    thumb = nn.functional.interpolate(
        small, size=tuple(images.shape[-2:]), mode="bilinear", align_corners=False
    ).clamp(0, 1)
    found = {"mean colour": flat, f"{thumbnail}×{thumbnail} thumbnail": thumb}
    if len(images) >= 2:
        found["batch mean"] = (
            images.mean(dim=0, keepdim=True).expand_as(images).contiguous()
        )
        found["different photograph"] = images.roll(1, dims=0)
    return found


def control_scores(
    images: torch.Tensor, metric: Callable = psnr, thumbnail: int = 4
) -> dict[str, torch.Tensor]:
    """``{control: metric(control, images)}`` per image, (N,), for :func:`control_images`.

    Raises:
        TypeError: naming ``metric`` when it is not callable, or as :func:`control_images`.
        ValueError: as :func:`control_images`.
    """
    if not callable(metric):
        raise TypeError(
            f"metric must be a function (reconstruction, truth) -> (N,) such as psnr, got {metric!r}"
        )
    return {
        name: metric(found, images.detach().cpu())
        for name, found in control_images(images, thumbnail).items()
    }


def check_threshold(
    scores: Mapping[str, torch.Tensor], threshold: float = RECOGNISABLE_PSNR
) -> float:
    """The highest control score, after checking that it stays below ``threshold``.

    Args:
        scores: :func:`control_scores` (higher is better, as PSNR and SSIM).

    Raises:
        ValueError: naming the control and its score when a control reaches ``threshold`` (the
            threshold would count a reconstruction that knows nothing as a success); naming ``scores``
            when it holds no control or a NaN score, or ``threshold`` when it is NaN.
        TypeError: naming ``threshold`` when it is not a real number.
    """
    threshold = check_real(threshold, "threshold", finite=False)
    if not scores:
        raise ValueError(
            "scores must hold at least one control's scores (control_scores)"
        )
    for name, values in scores.items():
        if torch.isnan(torch.as_tensor(values, dtype=torch.float64)).any():
            raise ValueError(
                f"scores[{name!r}] holds NaN: a control that cannot be scored cannot bound the threshold"
            )
    best_name = max(scores, key=lambda k: float(scores[k].max()))
    best = float(scores[best_name].max())
    if best >= threshold:
        raise ValueError(
            f"threshold {threshold} is reached by the control {best_name!r} ({best:.3g}): "
            "it cannot mean recognisable on these images"
        )
    return best


def start_images(
    x: torch.Tensor, mean: Sequence[float], std: Sequence[float], *, seed: int
) -> dict[str, torch.Tensor]:
    """The attacks' two starts for a batch shaped like ``x`` ``(B, C, H, W)``, in [0, 1], drawn from
    one N(0, 1) tensor (``torch.Generator().manual_seed(seed)``): ``"noise N(0, 1), normalised
    units"`` — z·std + mean, as the authors' code of Ye et al. and Geiping et al. starts, clipped to
    [0, 1] — and ``"noise clamp(N(0, 1), 0, 1), pixels"`` — the book's start in pixels.

    Raises:
        TypeError: naming ``seed`` when it is not an int (``1.5``), ``x`` when it is not a float tensor,
            or ``mean``/``std`` when they are not sequences of real numbers.
        ValueError: if ``mean``/``std`` do not have one value per channel of ``x``, hold NaN/inf or a std
            ≤ 0, or ``x`` is not ``(B, C, H, W)``.
    """
    seed = check_seed(seed)
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(
            f"x must be a float tensor (B, C, H, W), got {type(x).__name__}"
        )
    check_layout(x.shape, "x")
    channels = x.shape[1]
    for name, values in (("mean", mean), ("std", std)):
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise TypeError(
                f"{name} must be a sequence of {channels} per-channel numbers, got {values!r}"
            )
    if len(mean) != channels or len(std) != channels:
        raise ValueError(
            f"mean and std need {channels} values, got {len(mean)} and {len(std)}"
        )
    mean = [check_real(v, f"mean[{i}]") for i, v in enumerate(mean)]
    std = [
        check_real(v, f"std[{i}]", low=0.0, low_open=True) for i, v in enumerate(std)
    ]
    m, s = (torch.tensor(v, dtype=torch.float32).view(1, -1, 1, 1) for v in (mean, std))
    drawn = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed))
    return {
        "noise N(0, 1), normalised units": (drawn * s + m).clamp(0, 1),
        "noise clamp(N(0, 1), 0, 1), pixels": drawn.clamp(0, 1),
    }


def batch_controls(
    batches: Sequence[torch.Tensor],
    mean: Sequence[float],
    std: Sequence[float],
    *,
    seed: int = 0,
    lpips: bool = False,
) -> dict[str, dict[str, list[float]]]:
    """Controls of gradient-inversion batches, scored per batch: the attacks' two starts and
    :func:`control_images`.

    The starts are drawn from one N(0, 1) tensor per batch (seed ``seed + i`` for batch i): "noise
    N(0, 1), normalised units" — z·std + mean, the start in the network's normalised units as the
    authors' code of Ye et al. and Geiping et al. draw it, clipped to [0, 1] for scoring — and
    "noise clamp(N(0, 1), 0, 1), pixels" — the book's start in pixels (half its pixels exactly 0).

    Args:
        batches: ``(B, C, H, W)`` batches in [0, 1].
        mean, std: the network's per-channel normalisation (C values each).
        lpips: also score LPIPS (:func:`gitutor.metrics.lpips_distance`, real AlexNet backbone).

    Returns:
        ``{control: {"PSNR": [...], "SSIM": [...](, "LPIPS": [...])}}``, one batch-mean value per batch.

    Raises:
        ValueError: if ``batches`` is empty or ``mean``/``std`` do not have one value per channel (as
            :func:`start_images`).
        TypeError: naming ``seed`` (not an int) or ``lpips`` (not True or False).
    """
    from gitutor.metrics import lpips_distance, ssim

    check_seed(seed)
    lpips = check_flag(lpips, "lpips")
    if not batches:
        raise ValueError("batches must hold at least one batch")
    metrics = {
        "PSNR": psnr,
        "SSIM": ssim,
        **({"LPIPS": lpips_distance} if lpips else {}),
    }
    scores: dict[str, dict[str, list[float]]] = {}
    for i, x in enumerate(batches):
        x = x.detach().cpu()
        found = {**start_images(x, mean, std, seed=seed + i), **control_images(x)}
        for name, images in found.items():
            row = scores.setdefault(name, {k: [] for k in metrics})
            for k, metric in metrics.items():
                row[k].append(metric(images, x).mean().item())
    return scores
