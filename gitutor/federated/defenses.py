"""Gradient defenses a client can apply before sending (DLG §5; Learning To Invert §4.1).

Every defense maps a list of gradient tensors to a new list of the same shapes and never changes
its input. A custom defense is any function with the same signature.
"""
from __future__ import annotations

import math

import torch


def _check_grads(grads) -> list[torch.Tensor]:
    if isinstance(grads, torch.Tensor) or not all(isinstance(g, torch.Tensor) for g in grads):
        raise TypeError("grads must be a list of tensors (one per model parameter)")
    grads = list(grads)
    if not grads:
        raise ValueError("grads is empty")
    if not all(torch.isfinite(g).all() for g in grads):
        raise ValueError("grads contain NaN or inf")
    return grads


def prune_gradients(grads, rate: float) -> list[torch.Tensor]:
    """Gradient pruning: zero the fraction ``rate`` of entries with the smallest magnitude.

    The threshold is per tensor, as in the DLG defense experiments (DLG §5, Fig. 7: pruning 1 % …
    70 %) and the prune defense of Learning To Invert (α = 0.99 keeps the top 1 %).

    Args:
        grads: list of tensors.
        rate: fraction in [0, 1) of each tensor's entries set to zero (ties at the threshold are
            resolved by sort order, so exactly ⌊rate · numel⌋ entries are zeroed).

    Raises:
        ValueError: if ``rate`` is outside [0, 1) or the gradients are not finite.
        TypeError: if ``grads`` is not a list of tensors.
    """
    grads = _check_grads(grads)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"rate must be in [0, 1), got {rate!r}")
    pruned = []
    for g in grads:
        k = math.floor(rate * g.numel())
        flat = g.flatten().clone()
        if k > 0:
            flat[flat.abs().argsort()[:k]] = 0.0
        pruned.append(flat.view_as(g))
    return pruned


def sign_compress(grads) -> list[torch.Tensor]:
    """signSGD compression: every entry replaced by its sign (−1, 0, +1) (Learning To Invert §4.1).

    Raises:
        TypeError / ValueError: as :func:`prune_gradients`.
    """
    return [g.sign() for g in _check_grads(grads)]


def add_gaussian_noise(grads, sigma: float, generator: torch.Generator | None = None) -> list[torch.Tensor]:
    """Additive Gaussian noise N(0, σ²) on every entry (DLG §5, Fig. 7; Learning To Invert σ = 0.1).

    Args:
        grads: list of tensors.
        sigma: standard deviation, ≥ 0 (the DLG paper reports variances 1e-4 … 1e-1; σ = √variance).
        generator: ``torch.Generator`` on the gradients' device, for reproducibility.

    Raises:
        ValueError: if ``sigma < 0`` or the gradients are not finite.
        TypeError: if ``grads`` is not a list of tensors.
    """
    grads = _check_grads(grads)
    if not sigma >= 0:
        raise ValueError(f"sigma must be >= 0, got {sigma!r}")
    return [g + sigma * torch.randn(g.shape, generator=generator, device=g.device, dtype=g.dtype) for g in grads]
