"""What a federated client computes and sends: the gradient of its local loss (DLG Eq. 1)."""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn


def check_parameter_list(model: nn.Module, tensors: Sequence[torch.Tensor], what: str) -> list[torch.Tensor]:
    """Check that ``tensors`` is a list aligned with ``model.parameters()`` (count and shapes).

    Gradients, increments, dual variables and global weights all follow this convention.

    Returns:
        The tensors as a list.

    Raises:
        TypeError: if ``tensors`` is not a sequence of tensors.
        ValueError: on a count mismatch, or naming the first parameter whose entry has the wrong shape.
    """
    if isinstance(tensors, torch.Tensor) or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise TypeError(f"{what} must be a list of tensors aligned with model.parameters()")
    named = list(model.named_parameters())
    if len(tensors) != len(named):
        raise ValueError(f"{what} has {len(tensors)} tensors but the model has {len(named)} parameters")
    for (name, parameter), tensor in zip(named, tensors):
        if tensor.shape != parameter.shape:
            raise ValueError(f"{what} entry for parameter {name!r} has shape {tuple(tensor.shape)}, "
                             f"expected {tuple(parameter.shape)}")
    return list(tensors)


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Batch-mean cross-entropy for integer labels ``(B,)`` or soft labels ``(B, C)`` (rows sum to 1).

    Soft labels cover one-hot, label smoothing and mixup targets: −Σ_c y_c log softmax(z)_c.

    Raises:
        ValueError: on a batch-size or class-count mismatch.
        TypeError: for integer labels that are not int64.
    """
    if y.shape[0] != logits.shape[0]:
        raise ValueError(f"batch size mismatch: {logits.shape[0]} inputs but {y.shape[0]} labels")
    if y.dim() == 1:
        if y.dtype != torch.int64:
            raise TypeError(f"integer labels must be int64 (torch.long), got {y.dtype}")
        return F.cross_entropy(logits, y)
    if y.dim() != 2 or y.shape[1] != logits.shape[1]:
        raise ValueError(f"soft labels must be (B, {logits.shape[1]}), got {tuple(y.shape)}")
    return -(y * F.log_softmax(logits, dim=-1)).sum(dim=-1).mean()


def client_gradients(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *,
                     create_graph: bool = False) -> list[torch.Tensor]:
    """∇_W ℓ(F(x; W), y): the gradient a client shares (DLG Eq. 1), batch-mean cross-entropy.

    Args:
        model: the shared model; its parameters' ``.grad`` are not touched.
        x: ``(B, C, H, W)`` images in [0, 1].
        y: ``(B,)`` int64 labels or ``(B, num_classes)`` soft labels.
        create_graph: keep the graph so the result can be differentiated again (attacks set this).

    The model's buffers (BatchNorm running statistics) are restored afterwards, so computing a
    gradient in train mode — as the client does, and as attacks do thousands of times — never
    changes the shared model.

    Returns:
        One tensor per entry of ``model.parameters()``, same shapes; detached unless
        ``create_graph``.

    Raises:
        ValueError: on batch-size mismatch, non-finite inputs, or a parameter that gets no gradient.
        TypeError: for integer labels that are not int64.
    """
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"batch size mismatch: x has {x.shape[0]} images, y has {y.shape[0]} labels")
    if not torch.isfinite(x).all():
        raise ValueError("x contains NaN or inf")
    parameters = [p for p in model.parameters()]
    saved = [(buffer, buffer.detach().clone()) for buffer in model.buffers()] if model.training else []
    loss = cross_entropy(model(x), y)
    for buffer, values in saved:
        buffer.data = values  # swap the storage: the autograd graph of this forward stays valid
    grads = torch.autograd.grad(loss, parameters, create_graph=create_graph, allow_unused=True)
    missing = [i for i, g in enumerate(grads) if g is None]
    if missing:
        raise ValueError(f"parameters {missing} get no gradient from this loss (frozen or unused layers?)")
    return list(grads) if create_graph else [g.detach() for g in grads]
