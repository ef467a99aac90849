"""DCT-Gaussian augmentation of an out-of-distribution auxiliary set (Learning To Invert §4.1.2).

LTI-OOD (Wu et al. 2022, §4.1.2, "Out-of-distribution (OOD) auxiliary data", steps 1–4):

1. convert the OOD auxiliary images to the frequency domain with the 2-D discrete cosine
   transform (DCT-II, orthonormal, per channel);
2. compute the mean and variance of every DCT coefficient over the auxiliary set;
3. sample new coefficient arrays from the Gaussian with that mean and (diagonal) variance;
4. transform them back to image space.

A Gaussian fitted in the DCT domain keeps the frequency profile of images (most energy in low
frequencies), which the paper found much better than a Gaussian fitted in pixel space.
"""

from __future__ import annotations

import numpy as np
import scipy.fft
import torch

from gitutor.checks import check_images


def dct_gaussian_augment(images: torch.Tensor, n: int, seed: int = 0) -> torch.Tensor:
    """Sample ``n`` synthetic images from a Gaussian fitted to the DCT coefficients of ``images``.

    Args:
        images: ``(N, C, H, W)`` float images in [0, 1], N ≥ 2 (a variance needs two samples).
        n: number of synthetic images to draw (≥ 1).
        seed: seed of the NumPy generator that draws the coefficients.

    Returns:
        ``(n, C, H, W)`` float32 tensor. Samples of a Gaussian are unbounded, so the inverse DCT
        is clamped to [0, 1] to give valid images (step 4 above; the paper does not say how it
        maps samples back to the image range).

    Raises:
        TypeError: if ``images`` is not a float tensor.
        ValueError: if ``images`` is not ``(N, C, H, W)`` in [0, 1] (:func:`gitutor.checks.check_images`:
            e.g. channels-last, 0–255 pixels, NaN), has fewer than 2 images, or ``n < 1``.
    """
    check_images(images, "images")
    if images.shape[0] < 2:
        raise ValueError("fitting a Gaussian needs at least 2 auxiliary images")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    coefficients = scipy.fft.dctn(
        images.detach().cpu().double().numpy(), type=2, norm="ortho", axes=(-2, -1)
    )
    mean = coefficients.mean(axis=0)
    std = coefficients.std(axis=0)
    rng = np.random.default_rng(seed)
    samples = mean + std * rng.standard_normal((n, *mean.shape))
    pixels = scipy.fft.idctn(samples, type=2, norm="ortho", axes=(-2, -1))
    return torch.from_numpy(pixels).float().clamp(0.0, 1.0)
