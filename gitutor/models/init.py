"""Weight initialisation used by the DLG code and Learning To Invert."""

from __future__ import annotations

import torch
from torch import nn


@torch.no_grad()
def init_uniform_(
    model: nn.Module, a: float = 0.5, generator: torch.Generator | None = None
) -> nn.Module:
    """Set every parameter (weights and biases) of ``model`` to U(−a, a), in place.

    The DLG public code initialises LeNet this way with a = 0.5 (Zhu et al. 2019, repository
    ``models/vision.py``); large uniform weights keep the Sigmoid network's gradients informative.

    Args:
        model: any module; BatchNorm running statistics are left alone.
        a: half-width of the interval, > 0.
        generator: optional ``torch.Generator`` for reproducibility (on the parameters' device).

    Returns:
        ``model`` itself.

    Raises:
        ValueError: if ``a <= 0``.
    """
    if not a > 0:
        raise ValueError(f"a must be > 0, got {a!r}")
    for parameter in model.parameters():
        values = torch.rand(
            parameter.shape,
            generator=generator,
            device=parameter.device,
            dtype=parameter.dtype,
        )
        parameter.copy_(values * 2 * a - a)
    return model
