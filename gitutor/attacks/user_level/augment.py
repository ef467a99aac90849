"""Random semantics-preserving transformations 𝒯 of the user-level attack (Li et al. 2023, Eq. 7, App. C).

The transforms are torchvision v2 *functionals* (``adjust_brightness``, ``adjust_contrast``,
``adjust_saturation``, ``perspective``, ``gaussian_blur``): differentiable in the image, and their
random parameters are drawn here from an explicit ``torch.Generator`` — the v2 transform *classes*
draw from torch's global generator, which would make runs depend on unrelated code. Gaussian noise is
written out for the same reason (``v2.functional.gaussian_noise`` calls ``torch.randn_like``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torchvision.transforms.v2.functional as TF

from gitutor.checks import check_layout


@dataclass(frozen=True)
class Augmentation:
    """𝒯 of Li et al. App. C: each of four transforms applied with probability ``p``.

    Gaussian noise (std ``noise_std``), colour jitter (brightness and contrast factors in
    1 ± ``jitter``; saturation too for RGB), perspective (corners moved by up to
    ``distortion`` × side), Gaussian blur (3×3, σ ∈ [0.1, ``blur_sigma``]). The result is clamped
    to [0, 1].

    Raises:
        ValueError: naming ``p`` (outside [0, 1]), a negative or non-finite ``noise_std``, ``jitter``
            (also >= 1) or ``distortion``, or ``blur_sigma`` < 0.1.
    """

    p: float = 0.5
    noise_std: float = 0.05
    jitter: float = 0.2
    distortion: float = 0.1
    blur_sigma: float = 1.0

    def __post_init__(self):
        for name in ("p", "noise_std", "jitter", "distortion", "blur_sigma"):
            value = getattr(self, name)
            if (
                not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.p > 1:
            raise ValueError(f"p must be a probability in [0, 1], got {self.p}")
        if self.jitter >= 1:
            raise ValueError(
                f"jitter must be < 1 (factors 1 ± jitter stay positive), got {self.jitter}"
            )
        if self.blur_sigma < 0.1:
            raise ValueError(f"blur_sigma must be >= 0.1, got {self.blur_sigma}")

    def __call__(
        self, image: torch.Tensor, copies: int, generator: torch.Generator
    ) -> torch.Tensor:
        """``copies`` augmented versions ``(copies, C, H, W)`` of ``image`` ``(1, C, H, W)`` in [0, 1].

        Raises:
            ValueError: naming ``image`` if it is not one ``(1, C, H, W)`` image (e.g. channels-last),
                ``copies`` if < 1.
        """
        if image.dim() != 4 or image.shape[0] != 1:
            raise ValueError(
                f"image must be (1, C, H, W), got shape {tuple(image.shape)}"
            )
        check_layout(image.shape, "image")
        if copies < 1:
            raise ValueError(f"copies must be >= 1, got {copies}")
        return torch.cat([self._one(image, generator) for _ in range(copies)]).clamp(
            0, 1
        )

    def _uniform(
        self, generator: torch.Generator, low: float, high: float, n: int = 1
    ) -> list[float]:
        return (
            low + (high - low) * torch.rand(n, generator=generator, dtype=torch.float64)
        ).tolist()

    def _one(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        apply = (torch.rand(4, generator=generator) < self.p).tolist()
        side = x.shape[-1]
        if apply[0]:
            x = (
                x
                + self.noise_std
                * torch.randn(x.shape, generator=generator, dtype=x.dtype).to(x.device)
            ).clamp(0, 1)
        if apply[1]:
            brightness, contrast, saturation = self._uniform(
                generator, 1 - self.jitter, 1 + self.jitter, 3
            )
            x = TF.adjust_contrast(TF.adjust_brightness(x, brightness), contrast)
            if x.shape[1] == 3:
                x = TF.adjust_saturation(x, saturation)
        if apply[2]:
            shift = self.distortion * (side - 1)
            corners = [[0, 0], [side - 1, 0], [side - 1, side - 1], [0, side - 1]]
            offsets = self._uniform(generator, -shift, shift, 8)
            moved = [
                [round(c[0] + offsets[2 * k]), round(c[1] + offsets[2 * k + 1])]
                for k, c in enumerate(corners)
            ]
            x = TF.perspective(x, corners, moved)
        if apply[3]:
            sigma = self._uniform(generator, 0.1, self.blur_sigma)[0]
            x = TF.gaussian_blur(x, kernel_size=[3, 3], sigma=[sigma, sigma])
        return x
