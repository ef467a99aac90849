"""Labels of a batch with repeated classes (Ye et al., AAAI 2024, §Stage I "Label Inference", Eq. 2–8).

1. *Label initializing*: with non-negative features h and softmax outputs p_i ≈ 0 early in training,
   the row ∇W_k of the FC weight gradient is negative exactly for the classes k in the batch, so the
   coarse labels are the rows with a negative mean. How many images each class has is invisible in
   the sign.
2. *Feature approximating*: every image of class k adds ≈ −h_i/N to ∇W_k, so sorted in ascending
   order the row resembles −v_k·h̄ at the low-CV ranks t of :class:`~gitutor.labels.FeatureCV`.
   The counts v minimise (Eq. 6)
       J(v) = 1 − ⟨−v h̄[t]ᵀ, sort(∇W_k,:)[:, t]⟩ / (‖v h̄[t]ᵀ‖ ‖sort(∇W_k,:)[:, t]‖),
   subject to v_k ≥ 1 integer and Σ v_k = N.
3. *Evolutionary matching* (Eq. 7–8) and the whole of Stage I: :mod:`gitutor.labels.count_search`.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from gitutor.labels.feature_cv import FeatureCV


def check_fc_weight_grad(fc_weight_grad: torch.Tensor) -> None:
    """Check a last-layer weight gradient: a finite float ``(C, m)`` tensor.

    Raises:
        TypeError: if it is not a float tensor.
        ValueError: if it is not 2-D or holds NaN/inf.
    """
    if (
        not isinstance(fc_weight_grad, torch.Tensor)
        or not fc_weight_grad.is_floating_point()
    ):
        kind = getattr(fc_weight_grad, "dtype", None) or type(fc_weight_grad).__name__
        raise TypeError(f"fc_weight_grad must be a float torch.Tensor, got {kind}")
    if fc_weight_grad.dim() != 2:
        raise ValueError(
            "fc_weight_grad must be the (classes, features) gradient of the last Linear layer's "
            f"weight, got shape {tuple(fc_weight_grad.shape)}"
        )
    if not torch.isfinite(fc_weight_grad).all():
        raise ValueError("fc_weight_grad contains NaN or inf")


def check_batch_size(batch_size: int, num_classes_present: int) -> None:
    """Check that ``batch_size`` is an int of at least ``num_classes_present`` (TypeError / ValueError)."""
    if not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool):
        raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if batch_size < num_classes_present:
        raise ValueError(
            f"batch_size={batch_size} is smaller than the {num_classes_present} classes found in the "
            "gradient; every class needs at least one image (is the batch size right, or is the "
            "model past the early-training regime where negative rows mark present classes?)"
        )


def coarse_labels(fc_weight_grad: torch.Tensor) -> torch.Tensor:
    """Classes present in the batch: rows of ∇W^FC with a negative mean (Ye et al. 2024, "Label Initializing").

    Args:
        fc_weight_grad: ``(C, m)`` batch-mean gradient of the last Linear layer's weight.

    Returns:
        Sorted ``(K,)`` int64 class indices (K may be 0 when no row is negative).

    Raises:
        TypeError / ValueError: if the gradient is not a finite 2-D tensor.
    """
    check_fc_weight_grad(fc_weight_grad)
    return torch.nonzero(fc_weight_grad.mean(dim=1) < 0).flatten()


def _sorted_rows(
    fc_weight_grad: torch.Tensor, classes: torch.Tensor, stats: FeatureCV
) -> torch.Tensor:
    """sort(∇W^FC_k,:)[:, t] of Eq. 6, ``(K, M)`` float64, rows sorted ascending (most negative first)."""
    check_fc_weight_grad(fc_weight_grad)
    if not isinstance(stats, FeatureCV):
        raise TypeError(
            f"stats must be a FeatureCV (FeatureCV.fit), got {type(stats).__name__}"
        )
    if fc_weight_grad.shape[1] != stats.mean_feature.shape[0]:
        raise ValueError(
            f"fc_weight_grad has {fc_weight_grad.shape[1]} features per row but the FeatureCV "
            f"statistics have {stats.mean_feature.shape[0]}; fit them with the same model"
        )
    classes = torch.as_tensor(classes, dtype=torch.int64).cpu()
    if classes.dim() != 1 or classes.numel() == 0:
        raise ValueError(
            "classes must be a non-empty 1-D list of class indices (e.g. coarse_labels(...))"
        )
    if int(classes.min()) < 0 or int(classes.max()) >= fc_weight_grad.shape[0]:
        raise ValueError(
            f"classes must lie in [0, {fc_weight_grad.shape[0]}), got {classes.tolist()}"
        )
    return (
        fc_weight_grad.detach()
        .cpu()
        .double()[classes]
        .sort(dim=1)
        .values[:, stats.indices]
    )


def class_evidence(
    fc_weight_grad: torch.Tensor, classes: torch.Tensor, stats: FeatureCV
) -> torch.Tensor:
    """a_k = −h̄[t] · sort(∇W^FC_k,:)[t], the per-class evidence that Eq. 6 matches (Ye et al. 2024).

    Expanding the outer product in Eq. 6 gives J(v) = 1 − κ·cos(v, a) with the constant
    κ = ‖a‖ / (‖h̄[t]‖ ‖sort(∇W^FC)[:, t]‖_F) ≤ 1 (Cauchy–Schwarz; κ = 1 only when every selected row is
    a multiple of h̄[t]). κ does not depend on v, so the minimiser of J is the v that points most nearly
    in the direction of a; a_k / v_k should be the same for every class when the model of Eq. 6
    holds, and its spread across the classes of a batch is what makes Eq. 6 miss the true counts. The
    gradient rows are sorted in ascending order (most negative first), to line up with the
    descending sorted features of :class:`FeatureCV`.

    Args:
        fc_weight_grad: ``(C, m)`` FC weight gradient.
        classes: ``(K,)`` class indices (usually :func:`coarse_labels`).
        stats: auxiliary :class:`FeatureCV` with m-dimensional features.

    Returns:
        ``(K,)`` float64 tensor.

    Raises:
        ValueError / TypeError: for a bad gradient, class indices out of range or an empty class list,
            statistics of another feature dimension, or a ``stats`` that is not a FeatureCV.
    """
    return -(
        _sorted_rows(fc_weight_grad, classes, stats)
        @ stats.mean_feature.double()[stats.indices]
    )


def objective_direction(
    fc_weight_grad: torch.Tensor, classes: torch.Tensor, stats: FeatureCV
) -> np.ndarray:
    """c with J(v) = 1 − v·c / ‖v‖ (Eq. 6 with the outer product expanded): c = a / (‖h̄[t]‖ ‖G‖_F), ``(K,)``.

    G = sort(∇W^FC_k,:)[:, t] and a = :func:`class_evidence`; so J(v) = 1 − κ·cos(v, a) with
    κ = ‖c‖ = ‖a‖ / (‖h̄[t]‖ ‖G‖_F) ≤ 1, not 1 − cos(v, a).

    Raises:
        ValueError / TypeError: as :func:`class_evidence`, or if the selected rows are all zero.
    """
    rows = _sorted_rows(fc_weight_grad, classes, stats)
    h_bar = stats.mean_feature.double()[stats.indices]
    denominator = float(h_bar.norm() * rows.norm())
    if denominator == 0:
        raise ValueError(
            "the selected gradient rows are all zero at the ranks t; Eq. 6 is undefined"
        )
    return (-(rows @ h_bar) / denominator).numpy()


def cosine_objective(counts: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """J(v) = 1 − v·c / ‖v‖ for counts ``(..., K)`` and c = :func:`objective_direction`; ``(...)`` float64."""
    counts = np.asarray(counts, dtype=np.float64)
    return 1.0 - counts @ direction / np.linalg.norm(counts, axis=-1)


def label_count_objective(
    counts: torch.Tensor,
    fc_weight_grad: torch.Tensor,
    classes: torch.Tensor,
    stats: FeatureCV,
) -> torch.Tensor:
    """J(v) of Ye et al. 2024, Eq. 6, for one or many count vectors (lower is better, range [0, 2]).

    Args:
        counts: ``(..., K)`` candidate counts v (any non-zero real vectors; J is scale-free).
        fc_weight_grad: ``(C, m)`` FC weight gradient.
        classes: ``(K,)`` class indices k (the coarse labels).
        stats: auxiliary :class:`FeatureCV` (h̄ and t).

    Returns:
        ``(...)`` float64 tensor of J values.

    Raises:
        ValueError / TypeError: for mismatched shapes, non-finite gradients, class indices out of range,
            or a zero count vector.
    """
    direction = objective_direction(fc_weight_grad, classes, stats)
    counts = torch.as_tensor(counts, dtype=torch.float64)
    if counts.shape[-1:] != (direction.shape[0],):
        raise ValueError(
            f"counts must end in K={direction.shape[0]} entries (one per class), "
            f"got {tuple(counts.shape)}"
        )
    if (counts.norm(dim=-1) == 0).any():
        raise ValueError("a count vector of zeros has no direction; J is undefined")
    return torch.as_tensor(cosine_objective(counts.numpy(), direction))
