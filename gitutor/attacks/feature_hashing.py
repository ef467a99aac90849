"""Feature hashing of gradient vectors (Weinberger et al. 2009; Learning To Invert §3.2).

A gradient of m coordinates is too wide for the first layer of an inversion MLP when the model is
large (ResNet20: 270 K parameters). Wu et al. (2022, §3.2, "Dimensionality reduction") assign
every coordinate i ∈ [m] to one random bin r(i) ∈ [k] and sum the coordinates of each bin:

    P ∈ {0, 1}^{k×m},   P_{r(i), i} = 1,   P_{j, i} = 0 for j ≠ r(i),   hashed = P · grad.

P has exactly m non-zero entries, so it is stored as the index vector r (memory O(m), independent
of k · m), and the map is linear: P(a u + b v) = a P u + b P v, and it preserves the total sum.
"""

from __future__ import annotations

import torch

from gitutor.seeding import make_generator


class FeatureHasher:
    """The fixed random projection P of Learning To Invert §3.2 (each coordinate summed into one bin).

    Args:
        in_dim: m, the length of the vectors to hash (e.g. the number of model parameters).
        out_dim: k, the number of bins (1 ≤ k; k < m compresses, the paper uses k = m / 2 for ResNet20).
        seed: seed of the bin assignment r; the same seed gives the same P.

    Calling the hasher on ``(..., in_dim)`` returns ``(..., out_dim)`` with the same dtype and device.

    Raises:
        ValueError: for non-positive dimensions, or (when called) an input whose last dimension is
            not ``in_dim``.
        TypeError: if ``seed`` is not an int.
    """

    def __init__(self, in_dim: int, out_dim: int, seed: int = 0):
        for name, value in (("in_dim", in_dim), ("out_dim", out_dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.in_dim = in_dim
        self.out_dim = out_dim
        self.seed = seed
        #: r(i) for every input coordinate i, shape (in_dim,), values in [0, out_dim).
        self.bins = torch.randint(out_dim, (in_dim,), generator=make_generator(seed))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_dim:
            raise ValueError(
                f"FeatureHasher built for vectors of length {self.in_dim}, got shape "
                f"{tuple(x.shape)}; build it with in_dim = number of gradient coordinates"
            )
        out = torch.zeros(*x.shape[:-1], self.out_dim, dtype=x.dtype, device=x.device)
        return out.index_add_(x.dim() - 1, self.bins.to(x.device), x)

    def __repr__(self) -> str:
        return f"FeatureHasher(in_dim={self.in_dim}, out_dim={self.out_dim}, seed={self.seed})"
