"""iDLG's analytic label rule (Zhao, Mopuri, Bilen 2020, §3; Wang et al. ICLR 2024, Eq. 2–3).

For one sample with cross-entropy and a last layer z = W h (+ b), ∂L/∂W_i = (p_i − y_i) hᵀ. With a
one-hot label only the true class has p_i − y_i < 0, and when h ≥ 0 (after ReLU or Sigmoid) its
row of the weight gradient is the only one whose entries are negative: label = argmin_i Σ_j ∂L/∂W_ij.
"""

from __future__ import annotations

import torch


def idlg_label(fc_weight_grad: torch.Tensor) -> int:
    """The iDLG label: the index of the row of ∂L/∂W_fc with the smallest (most negative) sum.

    Args:
        fc_weight_grad: ``(C, d)`` gradient of the last linear layer's weight for ONE sample.

    Returns:
        The class index in [0, C).

    Raises:
        ValueError: if the gradient is not 2-D or not finite.
    """
    if fc_weight_grad.dim() != 2:
        raise ValueError(
            f"fc_weight_grad must be the (classes, features) weight gradient, got shape "
            f"{tuple(fc_weight_grad.shape)}"
        )
    if not torch.isfinite(fc_weight_grad).all():
        raise ValueError("fc_weight_grad contains NaN or inf")
    return int(fc_weight_grad.sum(dim=1).argmin())
