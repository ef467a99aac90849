"""LLG and LLG+: label counts of a batch from the row sums of the last layer's weight gradient
(Wainakh, Ventola, Müßig, Keim, Cordero, Zimmer, Grube, Kersting, Mühlhäuser, "User-Level Label Leakage from
Gradients in Federated Learning", PoPETs 2022, §4, Algorithm 1).

For a batch-mean cross-entropy loss the row sum of the FC weight gradient is
    g_k = Σ_j ∂L/∂W_kj = (1/N) Σ_n (p_nk − [y_n = k]) s_n,   s_n = Σ_j h_nj ≥ 0 (features after a ReLU),
so (property 1) a row is negative when class k is in the batch (and p ≪ 1), and (property 2) each image of
class k moves g_k by about the same *impact* m = −(1 − p) s / N < 0. The attack:

1. every class with g_k < 0 gets one label, and g_k ← g_k − m (LLG+: the signs of the observed g, the
   updates on g − s, as the authors' code);
2. N − K times: the class with the smallest g_k gets one more label, g_k ← g_k − m.

**LLG** estimates m from the gradient itself, m = (1 + 1/C) · (1/N) Σ_{k: g_k < 0} g_k. **LLG+** estimates the
impact and, per class, an *offset* s_k (the positive contribution p_nk s_n of images of other classes) from the
model and auxiliary data, then runs the same loop on g − s: here in closed form from ``(n, m)`` auxiliary
features through the FC layer, the average of the authors' batches of one class drawn from auxiliary data.

Unlike the bias count (:func:`~gitutor.labels.bias_label_counts`) neither needs an FC bias; like it, both model
p ≪ 1 (LLG) or a p that auxiliary data predict (LLG+).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch
from torch import nn

from gitutor.labels.batch_labels import check_fc_weight_grad


@dataclass(frozen=True)
class LLGPlus:
    """LLG+'s model-based parameters: the impact of one image on its class's row sum **times N** (negative;
    divide by the batch size N) and the ``(C,)`` offset of every row sum."""

    impact: float
    offset: torch.Tensor


def _check_n(batch_size) -> None:
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, numbers.Integral)
        or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")


def llg_label_counts(
    fc_weight_grad: torch.Tensor, batch_size: int, parameters: LLGPlus | None = None
) -> torch.Tensor:
    """Label counts by LLG (``parameters=None``) or LLG+ (Wainakh et al. 2022, Algorithm 1).

    Args:
        fc_weight_grad: ``(C, m)`` batch-mean gradient of the last Linear layer's weight.
        batch_size: N ≥ 1.
        parameters: LLG+'s impact and offset (:func:`fit_llg_plus`); ``None`` for LLG's estimate from the
            gradient.

    Returns:
        ``(C,)`` int64 counts summing to N (when more than N rows are negative, the N most negative ones).

    Raises:
        TypeError / ValueError: for a gradient that is not a finite float ``(C, m)`` tensor, N < 1, an offset
            of another length, or an impact that is not negative (no row moves down: nothing to count with).
    """
    check_fc_weight_grad(fc_weight_grad)
    _check_n(batch_size)
    sums = fc_weight_grad.detach().double().sum(dim=1).cpu()
    classes = sums.numel()
    negative = torch.nonzero(sums < 0).flatten()[sums[sums < 0].argsort()][
        :batch_size
    ]  # on the raw sums
    if parameters is None:
        impact = float(sums[sums < 0].sum()) / batch_size * (1 + 1 / classes)
    else:
        if parameters.offset.shape != (classes,):
            raise ValueError(
                f"the LLG+ offset has shape {tuple(parameters.offset.shape)}, the gradient "
                f"{classes} rows; fit it on the same FC layer"
            )
        sums = sums - parameters.offset.double().cpu()
        impact = parameters.impact / batch_size
    if not impact < 0:
        raise ValueError(
            f"the impact of one image must be negative, got {impact:g} (no negative row sum?)"
        )
    counts = torch.zeros(classes, dtype=torch.int64)
    for k in negative:
        counts[k] += 1
        sums[k] -= impact
    for _ in range(batch_size - int(counts.sum())):
        k = int(sums.argmin())
        counts[k] += 1
        sums[k] -= impact
    return counts


def fit_llg_plus(head: nn.Linear, aux_features: torch.Tensor) -> LLGPlus:
    """LLG+'s impact and offset from auxiliary features (Wainakh et al. 2022, §4.2 "LLG+"), in closed form.

    The authors feed batches of N auxiliary images all labelled i through the model, for every class i; the
    row sum of class i is then (1/N) Σ_n (p_ni − 1) s_n and that of any other class j is (1/N) Σ_n p_nj s_n.
    Averaged over the auxiliary images: impact × N = (1 + 1/C) · mean_i mean_n (p_ni − 1) s_n and
    offset_j = mean_n p_nj s_n (the same for every i ≠ j).

    Args:
        head: the model's last Linear layer (its bias may be absent).
        aux_features: ``(n, m)`` auxiliary features h (the head's inputs), n ≥ 1.

    Raises:
        ValueError: if the features are not a finite ``(n, head.in_features)`` tensor with n ≥ 1.
    """
    if not isinstance(head, nn.Linear):
        raise TypeError(
            f"head must be the last nn.Linear layer, got {type(head).__name__}"
        )
    if (
        aux_features.dim() != 2
        or aux_features.shape[1] != head.in_features
        or len(aux_features) < 1
        or not torch.isfinite(aux_features).all()
    ):
        raise ValueError(
            f"aux_features must be finite (n ≥ 1, {head.in_features}) features, got shape "
            f"{tuple(aux_features.shape)}"
        )
    with torch.no_grad():
        features = aux_features.to(head.weight.device, head.weight.dtype)
        p = head(features).softmax(-1).double().cpu()
        s = features.double().sum(dim=1).cpu()[:, None]  # (n, 1) feature sums
    classes = p.shape[1]
    impact = (1 + 1 / classes) * float(((p - 1) * s).mean())
    return LLGPlus(impact=impact, offset=(p * s).mean(dim=0))
