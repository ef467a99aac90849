"""A copy of a network at other parameters: the model a client computed its gradient at (e.g. a FedADMM
client's local model w, which differs from the global model z the server sent)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import nn


def model_at(model: nn.Module, params: Sequence[torch.Tensor]) -> nn.Module:
    """A deep copy of ``model`` whose parameters are ``params`` (aligned with ``model.parameters()``); the
    model itself is not changed.

    Raises:
        ValueError: if ``params`` does not hold one tensor per parameter (``zip(..., strict=True)``), or a
            tensor's shape differs from its parameter's (``Tensor.copy_`` broadcasting is not allowed).
    """
    params = list(params)
    clone = copy.deepcopy(model)
    with torch.no_grad():
        for p, value in zip(clone.parameters(), params, strict=True):
            if tuple(value.shape) != tuple(p.shape):
                raise ValueError(
                    f"params: a tensor of shape {tuple(value.shape)} for a parameter of "
                    f"shape {tuple(p.shape)}"
                )
            p.copy_(value)
    return clone
