"""The schedules of Li et al.'s Algorithm 1 (App. C, Fig. 5): diffusion time τ_i, clipping ratio ζ_i
and the sliding layer window of the matching term (§2.3.2).

All three are frozen dataclasses; bad settings raise ``ValueError`` naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


def _cosine_ramp(fraction: np.ndarray) -> np.ndarray:
    """(1 + cos π f) / 2: 1 at f = 0, 0 at f = 1, monotone in between."""
    return (1 + np.cos(np.pi * np.clip(fraction, 0.0, 1.0))) / 2


def _fractions(steps: int) -> np.ndarray:
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an int >= 1, got {steps!r}")
    return np.linspace(0.0, 1.0, steps) if steps > 1 else np.zeros(1)


@dataclass(frozen=True)
class TauSchedule:
    """Diffusion time τ_i per optimisation step (Li et al. App. C, Fig. 5a; after Graikos et al. 2022).

    Cosine-modulated linear annealing: with f = i / (S − 1),
    mean(f) = t_min + (t_max − t_min) · (1 − f) · (1 + cos π f) / 2, falling from ``t_max`` to
    ``t_min``; each τ_i adds integer uniform noise in [−noise, noise] and is clipped to
    [t_min, t_max]. ``num_timesteps`` is the DDPM's T (1000): τ must be a valid index < T.

    Raises:
        ValueError: naming ``t_min``, ``t_max``, ``noise`` or ``num_timesteps`` unless
            0 <= t_min <= t_max < num_timesteps and noise >= 0 (all integers).
    """

    t_max: int = 999
    t_min: int = 500
    noise: int = 50
    num_timesteps: int = 1000

    def __post_init__(self):
        for name in ("t_max", "t_min", "noise", "num_timesteps"):
            if not isinstance(getattr(self, name), (int, np.integer)) or isinstance(
                getattr(self, name), bool
            ):
                raise ValueError(
                    f"{name} must be an integer, got {getattr(self, name)!r}"
                )
        if self.num_timesteps < 1:
            raise ValueError(f"num_timesteps must be >= 1, got {self.num_timesteps}")
        if not 0 <= self.t_max < self.num_timesteps:
            raise ValueError(
                f"t_max must be in [0, num_timesteps - 1] = [0, {self.num_timesteps - 1}], got {self.t_max}"
            )
        if not 0 <= self.t_min <= self.t_max:
            raise ValueError(
                f"t_min must be in [0, t_max] = [0, {self.t_max}], got {self.t_min}"
            )
        if self.noise < 0:
            raise ValueError(f"noise must be >= 0, got {self.noise}")

    def mean(self, steps: int) -> np.ndarray:
        """Noise-free schedule, ``(steps,)`` floats, non-increasing from t_max to t_min."""
        f = _fractions(steps)
        return self.t_min + (self.t_max - self.t_min) * (1 - f) * _cosine_ramp(f)

    def sample(self, steps: int, generator: torch.Generator) -> torch.Tensor:
        """``(steps,)`` int64 diffusion times with uniform noise drawn from ``generator``."""
        jitter = torch.randint(
            -self.noise, self.noise + 1, (steps,), generator=generator
        )
        tau = torch.as_tensor(np.rint(self.mean(steps)), dtype=torch.int64) + jitter
        return tau.clamp(self.t_min, self.t_max)


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


@dataclass(frozen=True)
class ZetaSchedule:
    """Clipping ratio ζ_i (Li et al. App. C): a cosine ramp from ``start`` (1.5) to ``end`` (1.0).

    ζ(f) = end + (start − end) · (1 + cos π f) / 2 with f = i / (S − 1).

    Raises:
        ValueError: naming ``start`` or ``end`` if it is not a finite positive number.
    """

    start: float = 1.5
    end: float = 1.0

    def __post_init__(self):
        _check_positive(start=self.start, end=self.end)

    def values(self, steps: int) -> np.ndarray:
        """``(steps,)`` floats from ``start`` to ``end``."""
        return self.end + (self.start - self.end) * _cosine_ramp(_fractions(steps))


@dataclass(frozen=True)
class LayerWindow:
    """Sliding asymmetric Hamming window over the gradient tensors (Li et al. §2.3.2, Fig. 5b).

    Tensor ℓ = 0 … L − 1 follows ``model.parameters()`` (shallow → deep). The window's edge c(f)
    slides from the deepest tensor (c = L − 1 at f = 0) to the first (c = 0 at f = ``open_at``):
    tensors deeper than c weigh 1; the ``width`` tensors just below c get the rising half of a
    Hamming window, 0.54 − 0.46 cos(π (ℓ − c + width) / width); shallower ones weigh 0. So matching
    starts on the deep layers (high-level semantics) and gradually adds the shallow ones.

    Raises:
        ValueError: naming ``width`` (not finite and positive) or ``open_at`` (not in (0, 1]).
    """

    width: float = 2.0
    open_at: float = 0.5

    def __post_init__(self):
        _check_positive(width=self.width, open_at=self.open_at)
        if self.open_at > 1:
            raise ValueError(f"open_at must be in (0, 1], got {self.open_at}")

    def weights(self, num_tensors: int, fraction: float) -> torch.Tensor:
        """``(num_tensors,)`` weights in [0, 1] at optimisation progress ``fraction`` ∈ [0, 1].

        Raises:
            ValueError: naming ``num_tensors`` (< 1) or ``fraction`` (outside [0, 1]).
        """
        if num_tensors < 1:
            raise ValueError(f"num_tensors must be >= 1, got {num_tensors}")
        if not 0 <= fraction <= 1:
            raise ValueError(f"fraction must be in [0, 1], got {fraction}")
        edge = (num_tensors - 1) * (1 - min(1.0, fraction / self.open_at))
        layer = torch.arange(num_tensors, dtype=torch.float64)
        rising = 0.54 - 0.46 * torch.cos(
            math.pi * (layer - edge + self.width) / self.width
        )
        weights = torch.where(layer >= edge, torch.ones_like(layer), rising)
        return torch.where(
            layer < edge - self.width, torch.zeros_like(layer), weights
        ).float()
