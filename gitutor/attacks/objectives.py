"""Gradient-matching objectives and image priors shared by the optimisation attacks.

- squared-L2 gradient distance: DLG (Zhu et al. 2019, Algorithm 1 line 5);
- cosine gradient distance: Inverting Gradients (Geiping et al. 2020, Eq. 4), also the matching
  term of stepwise GradInversion (Ye et al. 2024, Eq. 9–10) and of the user-level attack
  (Li et al. 2023, Eq. 6);
- total variation TV: Inverting Gradients (Eq. 4) and Ye et al. (Eq. 11).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from gitutor.federated.client import check_parameter_list


def check_target_gradients(model: nn.Module, target_grads: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Check that ``target_grads`` is aligned with ``model.parameters()`` and finite.

    Returns:
        The gradients as a list of detached tensors.

    Raises:
        TypeError: if ``target_grads`` is not a sequence of tensors, or one is not floating point.
        ValueError: on a count mismatch, or naming the first parameter whose gradient has the wrong
            shape or contains NaN/inf.
    """
    grads = check_parameter_list(model, target_grads, "target_grads")
    for (name, _), grad in zip(model.named_parameters(), grads):
        if not grad.is_floating_point():
            raise TypeError(f"target_grads: gradient for parameter {name!r} has dtype {grad.dtype}; "
                            "gradients must be floating point")
        if not torch.isfinite(grad).all():
            raise ValueError(f"gradient for parameter {name!r} contains NaN or inf")
    return [g.detach() for g in grads]


def check_input_shape(input_shape: Sequence[int]) -> tuple[int, ...]:
    """``input_shape`` as a tuple ``(B, C, H, W)`` of positive ints.

    Raises:
        ValueError: if it does not have four positive entries.
    """
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 4 or min(shape) < 1:
        raise ValueError(f"input_shape must be (B, C, H, W) with positive sizes, got {input_shape!r}")
    return shape


def _check_pair(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> None:
    if len(a) != len(b):
        raise ValueError(f"gradient lists differ in length: {len(a)} vs {len(b)}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            raise ValueError(f"gradient tensor {i} differs in shape: {tuple(x.shape)} vs {tuple(y.shape)}")


def gradient_l2_distance(dummy: Sequence[torch.Tensor], target: Sequence[torch.Tensor]) -> torch.Tensor:
    """DLG's distance Σ_l ||∇W'_l − ∇W_l||² (Zhu et al. 2019, Algorithm 1 line 5), a scalar tensor.

    Raises:
        ValueError: if the lists differ in length or any pair differs in shape.
    """
    _check_pair(dummy, target)
    return sum(((d - t) ** 2).sum() for d, t in zip(dummy, target))


def cosine_gradient_distance(dummy: Sequence[torch.Tensor], target: Sequence[torch.Tensor], *,
                             indices: Sequence[int] | None = None,
                             masks: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
    """Cosine gradient distance 1 − ⟨g', g⟩ / (||g'|| ||g||) over the chosen parameter tensors.

    The inner product and norms run over all selected tensors together, as in Inverting Gradients
    (Geiping et al. 2020, Eq. 4). Stepwise GradInversion (Ye et al. 2024, Eq. 10) selects the
    deep tensors with ``indices`` and drops entries of both gradients with ``masks``.

    Args:
        dummy, target: gradient lists aligned with ``model.parameters()``.
        indices: which tensors to use (default: all).
        masks: one 0/1 tensor per selected tensor (same order as ``indices``), multiplied into both
            gradients.

    Returns:
        Scalar tensor in [0, 2].

    Raises:
        ValueError: on mismatched lists or masks, or an empty selection.
    """
    _check_pair(dummy, target)
    selected = list(range(len(dummy))) if indices is None else list(indices)
    if not selected:
        raise ValueError("indices selects no gradient tensor")
    if masks is not None and len(masks) != len(selected):
        raise ValueError(f"got {len(masks)} masks for {len(selected)} selected tensors")
    dot = norm_dummy = norm_target = 0.0
    for position, i in enumerate(selected):
        d, t = dummy[i], target[i]
        if masks is not None:
            d, t = d * masks[position], t * masks[position]
        dot = dot + (d * t).sum()
        norm_dummy = norm_dummy + d.pow(2).sum()
        norm_target = norm_target + t.pow(2).sum()
    return 1 - dot / (norm_dummy.sqrt() * norm_target.sqrt() + 1e-12)


class CosineToTarget:
    """The cosine gradient distance to one fixed target gradient, its constant parts computed once.

    ``CosineToTarget(target)(candidate, start, masks)`` equals
    ``cosine_gradient_distance(candidate, target[start:], masks=masks)`` bit for bit, but the
    squared norms of the target tensors (a pass over every entry of ∇W, 21.8 M for ResNet34) are
    computed once instead of at every iteration when no mask is given (Inverting Gradients,
    GradInversion; Ye et al. Eq. 10 without dropout).

    Raises:
        ValueError: (on call) on a length or shape mismatch between ``candidate`` and ``target[start:]``.
    """

    def __init__(self, target: Sequence[torch.Tensor]) -> None:
        self.target = [t.detach() for t in target]
        self.square_sums = [t.pow(2).sum() for t in self.target]

    def __call__(self, candidate: Sequence[torch.Tensor], start: int = 0,
                 masks: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        target = self.target[start:]
        _check_pair(candidate, target)
        dot = norm_candidate = norm_target = 0.0
        for position, (d, t) in enumerate(zip(candidate, target)):
            if masks is None:
                norm_target = norm_target + self.square_sums[start + position]
            else:
                d, t = d * masks[position], t * masks[position]
                norm_target = norm_target + t.pow(2).sum()
            dot = dot + (d * t).sum()
            norm_candidate = norm_candidate + d.pow(2).sum()
        return 1 - dot / (norm_candidate.sqrt() * norm_target.sqrt() + 1e-12)


def total_variation(x: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """Total variation TV of images ``(B, C, H, W)``, a scalar tensor.

    ``beta = 1``: the anisotropic TV of Inverting Gradients, mean |x_{i,j+1} − x_{ij}| +
    mean |x_{i+1,j} − x_{ij}|. Other ``beta``: TV_β = mean ((Δ_h x)² + (Δ_v x)²)^{β/2}
    (Mahendran & Vedaldi 2015), the prior of Ye et al. 2024, Eq. 11, with β = 2.

    Raises:
        ValueError: if ``x`` is not 4-D or ``beta <= 0``.
    """
    if x.dim() != 4:
        raise ValueError(f"x must be (B, C, H, W), got shape {tuple(x.shape)}")
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta!r}")
    dh = x[:, :, :, 1:] - x[:, :, :, :-1]
    dv = x[:, :, 1:, :] - x[:, :, :-1, :]
    if beta == 1.0:
        return dh.abs().mean() + dv.abs().mean()
    return (dh[:, :, :-1, :] ** 2 + dv[:, :, :, :-1] ** 2).pow(beta / 2).mean()
