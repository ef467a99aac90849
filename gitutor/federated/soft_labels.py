"""Soft training labels a client may use: label smoothing and mixup (Wang et al., ICLR 2024, §4.1).

Label smoothing (Szegedy et al., 2016): y = (1 − ε) · onehot + ε / C. Mixup (Zhang et al., 2018):
x = λ x₁ + (1 − λ) x₂ and y = λ y₁ + (1 − λ) y₂. Both break the sign rule of iDLG because the true
class may no longer have p_i − y_i < 0 alone (Wang et al., §2).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gitutor.checks import check_images, check_num_classes


def _as_batch_values(value, batch: int, name: str) -> torch.Tensor:
    values = torch.as_tensor(value, dtype=torch.float32)
    if values.dim() == 0:
        values = values.expand(batch)
    if values.shape != (batch,):
        raise ValueError(
            f"{name} must be a float or a tensor of shape ({batch},), got shape {tuple(values.shape)}"
        )
    if not ((values >= 0) & (values <= 1)).all():
        raise ValueError(f"{name} must lie in [0, 1], got {values.tolist()}")
    return values


def _one_hot(y: torch.Tensor, num_classes: int) -> torch.Tensor:
    if y.dtype != torch.long or y.dim() != 1:
        raise TypeError(
            f"class labels must be an int64 tensor (B,), got dtype {y.dtype} and shape {tuple(y.shape)}"
        )
    check_num_classes(num_classes)
    if y.numel() and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(
            f"class labels must lie in [0, {num_classes}), got {y.tolist()}"
        )
    return F.one_hot(y, num_classes).float()


def smooth_labels(y: torch.Tensor, eps, num_classes: int) -> torch.Tensor:
    """Label smoothing y = (1 − ε) · onehot(y) + ε / C (Wang et al. §4.1; Szegedy et al. 2016).

    Args:
        y: class indices, int64 ``(B,)``.
        eps: smoothing probability ε ∈ [0, 1], a float or a tensor ``(B,)`` (one per sample).
        num_classes: C.

    Returns:
        soft labels ``(B, C)`` float32, each row summing to 1.

    Raises:
        TypeError: if ``y`` is not an int64 vector or ``num_classes`` is not an int.
        ValueError: for ε outside [0, 1] or of the wrong shape, classes out of range, C < 2.
    """
    onehot = _one_hot(y, num_classes)
    eps = _as_batch_values(eps, y.shape[0], "eps").unsqueeze(1)
    return (1 - eps) * onehot + eps / num_classes


def mixup(
    x1: torch.Tensor,
    y1: torch.Tensor,
    x2: torch.Tensor,
    y2: torch.Tensor,
    lam,
    *,
    num_classes: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixup x = λ x₁ + (1 − λ) x₂, y = λ y₁ + (1 − λ) y₂ (Wang et al. §4.1; Zhang et al. 2018).

    Args:
        x1, x2: images ``(B, C, H, W)`` in [0, 1] of the same shape.
        y1, y2: labels, either probability vectors ``(B, K)`` or class indices int64 ``(B,)``
            (then ``num_classes`` is required).
        lam: mixing weight λ ∈ [0, 1], a float or a tensor ``(B,)``.
        num_classes: K, needed only for class-index labels.

    Returns:
        ``(x, y)``: mixed images ``(B, C, H, W)`` and soft labels ``(B, K)``.

    Raises:
        TypeError: for class-index labels without ``num_classes`` or of a non-integer dtype, or
            non-float images.
        ValueError: for mismatched shapes, λ outside [0, 1], or images ``x1``/``x2`` that are not
            ``(B, C, H, W)`` in [0, 1] (:func:`gitutor.checks.check_images`: channels-last, 0–255).
    """
    check_images(x1, "x1")
    check_images(x2, "x2")
    if x1.shape != x2.shape:
        raise ValueError(
            f"x1 and x2 must have the same shape, got {tuple(x1.shape)} and {tuple(x2.shape)}"
        )
    labels = []
    for y in (y1, y2):
        if y.dim() == 1:
            if num_classes is None:
                raise TypeError(
                    "class-index labels need num_classes=K (or pass one-hot / soft labels (B, K))"
                )
            y = _one_hot(y, num_classes)
        labels.append(y.float())
    if labels[0].shape != labels[1].shape or labels[0].shape[0] != x1.shape[0]:
        raise ValueError(
            f"labels must be (B, K) with B = {x1.shape[0]}, got {tuple(labels[0].shape)} "
            f"and {tuple(labels[1].shape)}"
        )
    weight = _as_batch_values(lam, x1.shape[0], "lam")
    x = (
        weight.view(-1, *([1] * (x1.dim() - 1))) * x1
        + (1 - weight.view(-1, *([1] * (x1.dim() - 1)))) * x2
    )
    y = weight.unsqueeze(1) * labels[0] + (1 - weight.unsqueeze(1)) * labels[1]
    return x, y
