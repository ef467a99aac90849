"""Analytic input recovery from a bias-free ReLU FCN (Wang, Liang & He, ICLR 2024, §4.2, Eq. 6–7).

Given the last-layer feature h and label y (recovered by :func:`gitutor.labels.recover_soft_label`),
∂L/∂z of the last layer is softmax(W h) − y. Going down one layer z = W x:

    ∂L/∂x = Wᵀ ∂L/∂z                       (Eq. 6)
    x_r   = (∂L/∂W)_{i,r} / (∂L/∂z)_i       (Eq. 7, any i with (∂L/∂z)_i ≠ 0)

and through a ReLU ∂L/∂z of the layer below is ∂L/∂x masked by x > 0. Eq. 7 is applied to all rows
at once in the least-squares form x = (∂L/∂W)ᵀ δ / ‖δ‖², which equals Eq. 7 for exact gradients.
"""

from __future__ import annotations

import torch

from gitutor.models.fcn import FCN


def invert_fcn(
    model: FCN, grads: list[torch.Tensor], feature: torch.Tensor, label: torch.Tensor
) -> torch.Tensor:
    """Reconstruct the input of a bias-free FCN layer by layer from its gradients (§4.2, Eq. 6–7).

    Args:
        model: the :class:`gitutor.models.FCN` that produced the gradients.
        grads: one sample's gradients, aligned with ``model.parameters()`` (hidden weights, fc).
        feature: last-layer input h ``(d,)`` (e.g. ``recover_soft_label(...).feature``).
        label: the sample's (soft) label ``(C,)``, summing to 1 (e.g. ``recover_soft_label(...).label``,
            which sums to 1 for every λ, Wang et al. Thm. 1).

    Returns:
        the input ``(1, *model.image_shape)`` (float32, not clipped).

    Raises:
        TypeError: if ``model`` is not an FCN.
        ValueError: for gradients that do not match the parameters, feature / label of the wrong
            shape, a non-finite ``feature`` (``recover_soft_label`` returns NaN when the gradient is
            zero), a ``label`` that is not finite or does not sum to 1 (logits? apply softmax), or a
            layer whose ∂L/∂z is all zero (no information passes below it).
    """
    if not isinstance(model, FCN):
        raise TypeError(
            f"invert_fcn needs a gitutor.models.FCN, got {type(model).__name__}"
        )
    weights = [
        layer.weight.detach().to(torch.float64) for layer in (*model.hidden, model.fc)
    ]
    if len(grads) != len(weights) or any(
        g.shape != w.shape for g, w in zip(grads, weights)
    ):
        raise ValueError(
            "grads must be aligned with model.parameters(): shapes "
            f"{[tuple(w.shape) for w in weights]}, got {[tuple(g.shape) for g in grads]}"
        )
    num_classes, dim = weights[-1].shape
    if feature.shape != (dim,) or label.shape != (num_classes,):
        raise ValueError(
            f"feature must be ({dim},) and label ({num_classes},), got "
            f"{tuple(feature.shape)} and {tuple(label.shape)}"
        )
    if not torch.isfinite(feature).all():
        raise ValueError(
            "feature contains NaN or inf (a zero last-layer gradient carries no feature; "
            "see recover_soft_label)"
        )
    total = float(label.detach().to(torch.float64).sum())
    if not (torch.isfinite(label).all() and abs(total - 1.0) <= 1e-4):
        raise ValueError(
            f"label must be a soft label summing to 1, got a sum of {total:.6g}; logits? apply "
            "torch.softmax(..., dim=0)"
        )
    x = feature.detach().to(torch.float64)
    delta = torch.softmax(weights[-1] @ x, dim=0) - label.detach().to(torch.float64)
    for weight_above, grad in zip(reversed(weights[1:]), reversed(grads[:-1])):
        delta = (weight_above.T @ delta) * (x > 0)  # Eq. 6 through the ReLU
        norm2 = delta.dot(delta)
        if norm2 == 0:
            raise ValueError(
                "∂L/∂z of a hidden layer is all zero (every unit inactive); the input cannot be recovered"
            )
        x = grad.detach().to(torch.float64).T @ delta / norm2  # Eq. 7, all rows at once
    return x.to(torch.float32).reshape(1, *model.image_shape)
