"""Baselines for batch labels that Stage I of Ye et al. (AAAI 2024) is compared with.

- Yin et al. (CVPR 2021, GradInversion §3.2): one label per row, the N rows whose minimum entry is
  most negative — exact when all labels differ, necessarily wrong when a class repeats.
- The iDLG sign rule (Zhao et al. 2020) on a batch: the negative rows tell which classes are present
  but not how often; here each present class gets one image and the remaining images go to the iDLG
  label (the row with the most negative sum).
- The bias count, a baseline the paper does not discuss: ∂L/∂b_k = (1/N) Σ_i (p_ik − 1[y_i = k]), so
  n_k = N·(p̄_k − ∂L/∂b_k) ≈ −N·∂L/∂b_k while softmax outputs are small (early training). It needs an
  FC bias and breaks once the model is confident (p̄_k of the true classes no longer ≈ 0).
"""

from __future__ import annotations

import torch

from gitutor.labels.batch_labels import (
    check_batch_size,
    check_fc_weight_grad,
    coarse_labels,
)
from gitutor.labels.idlg import idlg_label


def yin_batch_labels(fc_weight_grad: torch.Tensor, batch_size: int) -> torch.Tensor:
    """GradInversion's batch labels (Yin et al. 2021, §3.2): argsort_k(min_j ∇W_kj)[:N].

    Args:
        fc_weight_grad: ``(C, m)`` batch-mean FC weight gradient.
        batch_size: N ≤ C.

    Returns:
        ``(N,)`` sorted int64 labels, all distinct (so wrong whenever the batch repeats a class).

    Raises:
        ValueError: if the gradient is not a finite 2-D tensor or N exceeds the number of classes.
    """
    check_fc_weight_grad(fc_weight_grad)
    if not 1 <= batch_size <= fc_weight_grad.shape[0]:
        raise ValueError(
            f"batch_size must be in [1, {fc_weight_grad.shape[0]}] (one distinct class per image), "
            f"got {batch_size}"
        )
    return fc_weight_grad.min(dim=1).values.argsort()[:batch_size].sort().values


def idlg_batch_labels(fc_weight_grad: torch.Tensor, batch_size: int) -> torch.Tensor:
    """The iDLG sign rule on a batch: each negative-mean row once, the rest the iDLG label.

    iDLG (Zhao et al. 2020, via :func:`gitutor.labels.idlg_label`) reads one label from the most
    negative row; on a batch the sign still marks every present class (:func:`coarse_labels`), but
    the counts are invisible, so all N − K repeats are assigned to the iDLG label.

    Returns:
        ``(N,)`` sorted int64 labels.

    Raises:
        ValueError: for a bad gradient, no negative row, or N smaller than the number of negative rows.
    """
    classes = coarse_labels(fc_weight_grad)
    if classes.numel() == 0:
        raise ValueError(
            "no row of fc_weight_grad has a negative mean; the sign rule finds no class"
        )
    check_batch_size(batch_size, classes.numel())
    repeats = torch.full(
        (batch_size - classes.numel(),), idlg_label(fc_weight_grad), dtype=torch.int64
    )
    return torch.cat([classes.cpu(), repeats]).sort().values


def bias_label_counts(
    fc_bias_grad: torch.Tensor | None, batch_size: int
) -> torch.Tensor:
    """Counts per class from the FC bias gradient: n_k ≈ −N·∂L/∂b_k, exact while p_ik ≪ 1.

    Rounded to the nearest integer; a class whose estimate rounds below 0 (an absent class that
    the model already predicts strongly) is reported as 0. The counts are not forced to sum to N:
    a sum ≠ N shows that the small-softmax assumption failed.

    Args:
        fc_bias_grad: ``(C,)`` batch-mean gradient of the last Linear layer's bias, or ``None`` for a
            bias-free FC layer.
        batch_size: N ≥ 1.

    Returns:
        ``(C,)`` int64 counts.

    Raises:
        ValueError: if the FC layer has no bias (``None``), the gradient is not a finite 1-D tensor,
            or N < 1.
        TypeError: for an integer gradient.
    """
    if fc_bias_grad is None:
        raise ValueError(
            "the FC layer has no bias, so there is no bias gradient to count labels from; "
            "use recover_batch_labels (weight gradient) instead"
        )
    if (
        not isinstance(fc_bias_grad, torch.Tensor)
        or not fc_bias_grad.is_floating_point()
    ):
        raise TypeError(
            f"fc_bias_grad must be a float tensor, got {getattr(fc_bias_grad, 'dtype', type(fc_bias_grad))}"
        )
    if fc_bias_grad.dim() != 1 or not torch.isfinite(fc_bias_grad).all():
        raise ValueError(
            f"fc_bias_grad must be a finite (classes,) vector, got shape {tuple(fc_bias_grad.shape)}"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be ≥ 1, got {batch_size}")
    return (
        (-batch_size * fc_bias_grad.detach().double())
        .round()
        .clamp(min=0)
        .to(torch.int64)
    )
