"""Reconstruction metrics: MSE, PSNR, SSIM (scikit-image), LPIPS (lpips), Hungarian batch matching.

All image arguments are float tensors ``(B, C, H, W)`` in [0, 1] (data range 1). Per-image values
come back as ``(B,)`` tensors; take ``.mean()`` for the batch figure the papers report.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

LPIPS_NA = "n/a (AlexNet weights not on disk; see running the book)"


class LPIPSUnavailable(RuntimeError):
    """The LPIPS backbone weights (AlexNet from torchvision) cannot be loaded on this machine."""


def _check_pair(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError("images must be torch tensors")
    if x.shape != y.shape or x.dim() != 4:
        raise ValueError(f"need two (B, C, H, W) batches of equal shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    return x.detach().float().cpu(), y.detach().float().cpu()


def mse(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error per image, ``(B,)``.

    Raises:
        ValueError / TypeError: for batches of different shape or non-tensors.
    """
    x, y = _check_pair(x, y)
    return ((x - y) ** 2).flatten(1).mean(dim=1)


def psnr(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Peak signal-to-noise ratio in dB per image, data range 1: 10 log10(1 / MSE), ``(B,)``.

    Values outside [0, 1] (e.g. unclamped DLG images) are clipped to the data range first, as
    ``skimage.metrics.peak_signal_noise_ratio`` expects; identical images give ``inf``.
    """
    from skimage.metrics import peak_signal_noise_ratio

    x, y = _check_pair(x, y)
    values = []
    for a, b in zip(x.clamp(0, 1).numpy(), y.numpy()):
        with np.errstate(divide="ignore"):
            values.append(peak_signal_noise_ratio(b, a, data_range=1.0))
    return torch.tensor(values, dtype=torch.float64)


def ssim(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Structural similarity per image (``skimage.metrics.structural_similarity``, data range 1), ``(B,)``.

    Images smaller than 7×7 use the largest odd window that fits.
    """
    from skimage.metrics import structural_similarity

    x, y = _check_pair(x, y)
    side = min(x.shape[-2:])
    window = min(7, side if side % 2 else side - 1)
    return torch.tensor([structural_similarity(b, a, data_range=1.0, channel_axis=0, win_size=window)
                         for a, b in zip(x.clamp(0, 1).numpy(), y.numpy())], dtype=torch.float64)


_LPIPS: dict = {}  # the loaded model, or the reason it could not be loaded (tried once per process)
ALEXNET_FILE = "alexnet-owt-7be5be79.pth"  # torchvision's ImageNet AlexNet, LPIPS's backbone


def alexnet_weights_path() -> Path:
    """Where torchvision keeps the AlexNet weights LPIPS needs: ``torch.hub.get_dir()/checkpoints``."""
    return Path(torch.hub.get_dir()) / "checkpoints" / ALEXNET_FILE


def _lpips_model():
    """The LPIPS (AlexNet) model, built only from weights already on disk: this never downloads."""
    if "model" not in _LPIPS and "error" not in _LPIPS:
        weights = alexnet_weights_path()
        if not weights.is_file():
            _LPIPS["error"] = LPIPSUnavailable(
                f"LPIPS needs torchvision's ImageNet AlexNet weights at {weights}; gitutor never downloads "
                "them. On a machine with internet run: python -c \"import torchvision; "
                "torchvision.models.alexnet(weights='IMAGENET1K_V1')\"")
        else:
            import lpips

            with warnings.catch_warnings():  # lpips still passes torchvision's deprecated `pretrained=`
                warnings.simplefilter("ignore", UserWarning)
                _LPIPS["model"] = lpips.LPIPS(net="alex", verbose=False).eval()
    if "error" in _LPIPS:
        raise _LPIPS["error"]
    return _LPIPS["model"]


def lpips_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """LPIPS (Zhang et al. 2018, AlexNet variant) per image, ``(B,)``; lower is more similar.

    Grey images are replicated to three channels; inputs are mapped to [−1, 1] as lpips expects.

    Raises:
        LPIPSUnavailable: when the AlexNet weights cannot be loaded (offline).
        ValueError / TypeError: for mismatched batches.
    """
    x, y = _check_pair(x, y)
    if x.shape[1] == 1:
        x, y = x.repeat(1, 3, 1, 1), y.repeat(1, 3, 1, 1)
    with torch.no_grad():
        return _lpips_model()(x.clamp(0, 1) * 2 - 1, y * 2 - 1).flatten().double()


def lpips_or_none(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
    """:func:`lpips_distance`, or None when the weights are unavailable (show :data:`LPIPS_NA`)."""
    try:
        return lpips_distance(x, y)
    except LPIPSUnavailable:
        return None


def match_batch(reconstruction: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """Order the reconstructed batch to best match the true batch (Hungarian matching on MSE).

    Batch attacks recover images in arbitrary order; the papers compare each true image with its
    best-matching reconstruction, a linear assignment solved by ``scipy.optimize.linear_sum_assignment``.

    Returns:
        ``reconstruction`` permuted so that row i matches ``truth[i]``, ``(B, C, H, W)``.

    Raises:
        ValueError / TypeError: for mismatched batches.
    """
    from scipy.optimize import linear_sum_assignment

    x, y = _check_pair(reconstruction, truth)
    cost = torch.cdist(y.flatten(1).double(), x.flatten(1).double()) ** 2
    _, columns = linear_sum_assignment(cost.numpy())
    return reconstruction[torch.as_tensor(columns, device=reconstruction.device)]


def label_accuracy(predicted: torch.Tensor, truth: torch.Tensor) -> float:
    """Fraction of equal entries of two int label tensors of the same shape.

    Raises:
        ValueError: if the shapes differ.
    """
    if predicted.shape != truth.shape:
        raise ValueError(f"label shapes differ: {tuple(predicted.shape)} vs {tuple(truth.shape)}")
    return float((predicted.cpu() == truth.cpu()).float().mean())
