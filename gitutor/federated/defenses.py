"""Gradient defenses a client can apply before sending (DLG §5; Learning To Invert §4.1).

Every defense maps a list of gradient tensors to a new list of the same shapes and never changes
its input. :class:`Defense` is the one type the rest of gitutor passes around: a name, the map
itself (``apply``) and the gradient-matching term an optimisation attack should use against it
(Wu et al. 2022, Appendix A). A custom defense is any function grads -> grads, wrapped in a
:class:`Defense` (or passed bare to :func:`apply_defense`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch

from gitutor.seeding import make_generator

#: Gradient-matching terms of Wu et al. Appendix A: plain cosine distance (no defense, Gaussian
#: noise), the sign-agreement loss (sign compression, Eq. 4) and the cosine distance over the kept
#: coordinates only (pruning).
MATCHING_TERMS = ("cosine", "sign", "masked_cosine")


def _check_grads(grads) -> list[torch.Tensor]:
    if isinstance(grads, torch.Tensor) or not all(
        isinstance(g, torch.Tensor) for g in grads
    ):
        raise TypeError("grads must be a list of tensors (one per model parameter)")
    grads = list(grads)
    if not grads:
        raise ValueError("grads is empty")
    if not all(g.is_floating_point() for g in grads):
        raise TypeError(
            f"grads must be float tensors, got {sorted({str(g.dtype) for g in grads})}"
        )
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


def add_gaussian_noise(
    grads, sigma: float, generator: torch.Generator | None = None
) -> list[torch.Tensor]:
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
    if not 0 <= sigma < math.inf:
        raise ValueError(f"sigma must be finite and >= 0, got {sigma!r}")
    return [
        g
        + sigma
        * torch.randn(g.shape, generator=generator, device=g.device, dtype=g.dtype)
        for g in grads
    ]


def add_laplacian_noise(
    grads, scale: float, generator: torch.Generator | None = None
) -> list[torch.Tensor]:
    """Additive Laplacian noise Laplace(0, b) on every entry, b = ``scale`` (DLG §5, Fig. 7).

    The density is exp(−|z| / b) / 2b, so the variance is 2b²: the DLG paper states its levels as
    variances v (1e-4 … 1e-1), i.e. b = √(v / 2). Each entry is b·(E₁ − E₂) with E₁, E₂ independent
    Exp(1) draws (the difference of two exponentials is Laplacian), drawn as −log(1 − U) from ``generator``.

    Args:
        grads: list of tensors.
        scale: the scale b ≥ 0 (standard deviation √2·b).
        generator: ``torch.Generator`` on the gradients' device, for reproducibility.

    Raises:
        ValueError: if ``scale < 0`` or not finite, or the gradients are not finite.
        TypeError: if ``grads`` is not a list of tensors.
    """
    grads = _check_grads(grads)
    if not 0 <= scale < math.inf:
        raise ValueError(f"scale must be finite and >= 0, got {scale!r}")

    def exponential(g: torch.Tensor) -> torch.Tensor:
        uniform = torch.rand(
            g.shape, generator=generator, device=g.device, dtype=g.dtype
        )
        return -torch.log1p(-uniform)  # U in [0, 1): finite

    return [g + scale * (exponential(g) - exponential(g)) for g in grads]


@dataclass(frozen=True)
class Defense:
    """A client-side gradient defense: ``name``, ``apply`` (grads -> grads) and ``matching``.

    Attributes:
        name: short name, e.g. ``"prune"`` (shown in tables and used as a key).
        apply: maps one client's gradient list to a list of the same count and shapes.
        matching: one of :data:`MATCHING_TERMS`, the gradient-matching term an optimisation attack
            adapts to this defense (Wu et al. 2022, Appendix A).

    Calling a Defense applies it and checks the result (:func:`apply_defense`).

    Raises:
        TypeError / ValueError: for a non-string or empty name, a non-callable ``apply`` or an
            unknown ``matching``.
    """

    name: str
    apply: Callable[[list[torch.Tensor]], list[torch.Tensor]]
    matching: str = "cosine"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty str, got {self.name!r}")
        if not callable(self.apply):
            raise TypeError(
                f"apply must be a function grads -> grads, got {type(self.apply).__name__}"
            )
        if self.matching not in MATCHING_TERMS:
            raise ValueError(
                f"matching must be one of {MATCHING_TERMS}, got {self.matching!r}"
            )

    def __call__(self, grads: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return apply_defense(self, grads)


def _no_defense(grads) -> list[torch.Tensor]:
    return list(grads)


def paper_defenses(
    *,
    prune_rate: float = 0.99,
    sigma: float = 0.1,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> dict[str, Defense]:
    """The four settings of Wu et al. §4.1: ``none``, ``sign`` (sign compression), ``prune``
    (gradient pruning with α = ``prune_rate``) and ``gauss`` (Gaussian perturbation σ = ``sigma``).

    The Gaussian defense draws from its own ``torch.Generator`` seeded with ``seed`` on ``device``,
    so the same calls in the same order give the same noise.

    Raises:
        ValueError: for ``prune_rate`` outside [0, 1) or a negative or non-finite ``sigma``.
    """
    if not 0.0 <= prune_rate < 1.0:
        raise ValueError(f"prune_rate must be in [0, 1), got {prune_rate!r}")
    if not 0.0 <= sigma < math.inf:
        raise ValueError(f"sigma must be finite and >= 0, got {sigma!r}")
    return {
        "none": Defense("none", _no_defense, "cosine"),
        "sign": Defense("sign", sign_compress, "sign"),
        "prune": Defense(
            "prune", partial(prune_gradients, rate=prune_rate), "masked_cosine"
        ),
        "gauss": Defense(
            "gauss",
            partial(
                add_gaussian_noise, sigma=sigma, generator=make_generator(seed, device)
            ),
            "cosine",
        ),
    }


def apply_defense(
    defense: Defense | Callable | None, grads: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    """Apply ``defense`` to one client's gradient list and check that the result is a valid gradient.

    This is the check for a home-made defense (the chapter's exercise): it must return a list of
    finite tensors with the same count and shapes as its input.

    Args:
        defense: a :class:`Defense`, a bare function grads -> grads, or None (no defense).
        grads: one client's gradient list.

    Raises:
        TypeError: if ``defense`` is not callable or does not return a list/tuple of tensors.
        ValueError: naming the first tensor whose shape changed or that is not finite.
    """
    grads = list(grads)
    if defense is None:
        return grads
    function = defense.apply if isinstance(defense, Defense) else defense
    if not callable(function):
        raise TypeError(
            f"defense must be a Defense or a function grads -> grads (or None), got "
            f"{type(defense).__name__}"
        )
    defended = function(grads)
    if not isinstance(defended, (list, tuple)) or not all(
        isinstance(g, torch.Tensor) for g in defended
    ):
        raise TypeError(
            "a defense must return a list of tensors, one per model parameter"
        )
    if len(defended) != len(grads):
        raise ValueError(
            f"the defense returned {len(defended)} tensors for {len(grads)} parameters"
        )
    for i, (before, after) in enumerate(zip(grads, defended)):
        if after.shape != before.shape:
            raise ValueError(
                f"the defense changed the shape of gradient tensor {i}: "
                f"{tuple(before.shape)} -> {tuple(after.shape)}"
            )
        if not torch.isfinite(after).all():
            raise ValueError(f"the defense returned NaN or inf in gradient tensor {i}")
    return list(defended)
