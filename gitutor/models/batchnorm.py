"""BatchNorm running statistics from auxiliary images (offline stand-in for pretrained statistics).

The R_BN prior of Ye et al. (AAAI 2024, Eq. 11) compares the candidate batch with the running
mean and variance stored in a *pretrained* model's BatchNorm layers. Offline there are no
ImageNet-pretrained weights, so the quick profiles calibrate a randomly initialised model's
running statistics on auxiliary images that are disjoint from the attacked ones.
"""

from __future__ import annotations

import torch
from torch import nn


def calibrate_batchnorm(
    model: nn.Module, images: torch.Tensor, *, batch_size: int = 64
) -> nn.Module:
    """Replace every BatchNorm layer's running mean/variance by statistics of ``images``.

    The running statistics are reset, then ``images`` pass through the model in training mode
    without gradients and with a cumulative average (``momentum=None``), in chunks of
    ``batch_size``; with one chunk the result is exactly the batch mean and the unbiased batch
    variance of each layer's input. Weights and biases are untouched; each layer's momentum
    and the model's train/eval mode are restored afterwards.

    Args:
        model: a network with BatchNorm layers that keep running statistics.
        images: ``(N, C, H, W)`` float auxiliary images in [0, 1] (or whatever the model expects).
        batch_size: chunk size of the calibration forward passes.

    Returns:
        ``model`` itself (calibrated in place).

    Raises:
        ValueError: if ``images`` is not 4-D or empty, ``batch_size < 1``, or the model has no
            BatchNorm layer with running statistics.
    """
    if images.dim() != 4 or images.shape[0] == 0:
        raise ValueError(
            f"images must be a non-empty (N, C, H, W) batch, got shape {tuple(images.shape)}"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be ≥ 1, got {batch_size}")
    layers = [
        m
        for m in model.modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats
    ]
    if not layers:
        raise ValueError(
            "calibrate_batchnorm needs BatchNorm layers with track_running_stats=True"
        )
    was_training = model.training
    momenta = [layer.momentum for layer in layers]
    for layer in layers:
        layer.reset_running_stats()
        layer.momentum = None
    model.train()
    with torch.no_grad():
        for chunk in images.split(batch_size):
            model(chunk)
    for layer, momentum in zip(layers, momenta):
        layer.momentum = momentum
    model.train(was_training)
    return model
