"""Where the last fully connected layer of a model is and what it sees (used by label recovery and attacks)."""

from __future__ import annotations

import torch
from torch import nn

from gitutor.checks import check_images
from gitutor.models.buffers import preserved_buffers


def last_linear(model: nn.Module) -> nn.Linear:
    """The model's last fully connected layer W^FC: ``model.fc`` when it is a Linear, else the last Linear module.

    Raises:
        TypeError: if ``model`` is not an ``nn.Module``.
        ValueError: if the model has no ``nn.Linear`` layer.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    fc = getattr(model, "fc", None)
    if isinstance(fc, nn.Linear):
        return fc
    linears = [module for module in model.modules() if isinstance(module, nn.Linear)]
    if not linears:
        raise ValueError(
            f"{type(model).__name__} has no nn.Linear layer; label recovery needs the FC layer's gradient"
        )
    return linears[-1]


def fc_weight_index(model: nn.Module) -> int:
    """Position of the last linear layer's weight (:func:`last_linear`) in ``list(model.parameters())``;
    the iDLG rule and Stage I of Ye et al. read that entry of a gradient list.

    Raises:
        ValueError: if the model has no ``nn.Linear`` layer.
    """
    fc = last_linear(model)
    return next(i for i, p in enumerate(model.parameters()) if p is fc.weight)


def fc_input_features(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The input h = Φ(x) of the model's last Linear layer (penultimate features), without gradients.

    The images pass through the model in one forward pass in its current mode (in training mode
    BatchNorm uses this batch's statistics, as during the client's step); the buffers are kept by
    :func:`~gitutor.models.buffers.preserved_buffers`, so the call leaves the model unchanged.

    Args:
        model: a classifier whose last Linear layer is found by :func:`last_linear`.
        images: ``(n, C, H, W)`` float images in [0, 1].

    Returns:
        ``(n, m)`` features, m = ``in_features`` of the last Linear layer (512 for ResNet34).

    Raises:
        ValueError: as :func:`gitutor.checks.check_images` (layout, NaN/inf, values outside [0, 1]),
            for an empty batch, or if the model has no Linear layer.
        TypeError: if ``images`` is not a float tensor.
    """
    check_images(images, "images")
    if images.shape[0] == 0:
        raise ValueError("images is an empty batch: give at least one image")
    fc = last_linear(model)
    captured = []
    hook = fc.register_forward_pre_hook(
        lambda module, inputs: captured.append(inputs[0].detach())
    )
    try:
        with preserved_buffers(model), torch.no_grad():
            model(images)
    finally:
        hook.remove()
    return captured[-1].flatten(1)
