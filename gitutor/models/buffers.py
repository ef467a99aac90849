"""The one way gitutor keeps a model's buffers (BatchNorm running statistics) unchanged.

A client computes its update in training mode, so every forward pass through a BatchNorm layer
updates ``running_mean``, ``running_var`` and ``num_batches_tracked``. Attacks simulate the client
thousands of times on the *shared* model; without protection each simulation would drift the
model the server is supposed to know. :func:`preserved_buffers` restores every buffer on exit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


@contextmanager
def preserved_buffers(model: nn.Module) -> Iterator[nn.Module]:
    """Run the ``with`` block and give every buffer of ``model`` back its value from before the block.

    The buffers get their saved values by swapping storage (``buffer.data = saved``), not by an
    in-place copy, so autograd graphs built inside the block (which may have saved a buffer) stay
    valid and can still be differentiated after the block, e.g. with ``create_graph=True``. Only
    the buffers of submodules in training mode are saved (PyTorch's layers update buffers only
    then), so an attack's many calls on a model in evaluation mode copy nothing.

    Raises:
        TypeError: if ``model`` is not an ``nn.Module``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    saved = [
        (buffer, buffer.detach().clone())
        for module in model.modules()
        if module.training
        for buffer in module.buffers(recurse=False)
    ]
    try:
        yield model
    finally:
        with torch.no_grad():
            for buffer, values in saved:
                buffer.data = values
