"""The FedADMM client update and the increment it sends (Gong, Li, Freris, ICDE 2022; the DLG
reproduction report, Algorithm 2 lines 11–22).

A FedADMM client i keeps its local model w (x_i in Algorithm 2) and a dual variable π, and receives
the global model z. It runs E local steps on the augmented Lagrangian
f(w) + ⟨π, w − z⟩ + ρ/2 ||w − z||² (line 15),

    w_{t+1} = w_t − η (∇f(w_t) + π + ρ (w_t − z)),

updates the dual π⁺ = π + ρ (w_E − z) (line 18) and sends the increment (line 19)

    Δ = (w_E + π⁺/ρ) − (w_0 + π/ρ),

never the gradient itself. The report's DLG-ADMM feeds −Δ/η (line 21) to DLG as if it were a
gradient. For one local step from the global model (w_0 = z) the increment is a closed form of the
gradient: −Δ/η = 2 (∇f(z) + π); in general, for one step, −Δ/η = 2 (∇f(w) + π) + (2ρ − 1/η)(w − z).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn
from torch.func import functional_call

from gitutor.federated.client import (
    check_client_batch,
    check_parameter_list,
    cross_entropy,
)
from gitutor.models.buffers import preserved_buffers


class FedADMMUpdate(NamedTuple):
    """Result of one FedADMM client round; every field is a list aligned with ``model.parameters()``.

    Attributes:
        delta: the increment Δ = (w⁺ + π⁺/ρ) − (w + π/ρ) the client sends (Algorithm 2 line 19).
        dual: the new dual variable π⁺ = π + ρ (w⁺ − z) the client keeps (line 18).
        local_params: the new local model w⁺ after the E local steps (line 15).
    """

    delta: list[torch.Tensor]
    dual: list[torch.Tensor]
    local_params: list[torch.Tensor]


def _check_hyperparameters(rho: float, lr: float, local_steps: int) -> None:
    if not 0 < rho < math.inf:
        raise ValueError(
            f"rho must be finite and > 0 (the increment divides by rho), got {rho!r}"
        )
    if not 0 < lr < math.inf:
        raise ValueError(
            f"lr (the client learning rate eta) must be finite and > 0, got {lr!r}"
        )
    if (
        not isinstance(local_steps, int)
        or isinstance(local_steps, bool)
        or local_steps < 1
    ):
        raise ValueError(
            f"local_steps must be a positive int (E · number of batches), got {local_steps!r}"
        )


def fedadmm_client_update(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    global_params: Sequence[torch.Tensor],
    dual: Sequence[torch.Tensor],
    *,
    rho: float,
    lr: float,
    local_steps: int,
    local_params: Sequence[torch.Tensor] | None = None,
    create_graph: bool = False,
) -> FedADMMUpdate:
    """One FedADMM client round on the batch ``(x, y)`` (Algorithm 2 lines 11–22; Gong et al. 2022).

    Runs ``local_steps`` gradient steps w ← w − η(∇f(w) + π + ρ(w − z)) on the batch-mean
    cross-entropy f (one full-batch step per local step, so E epochs over one batch give E steps),
    then π⁺ = π + ρ(w⁺ − z) and Δ = (w⁺ + π⁺/ρ) − (w + π/ρ). The model itself is not modified:
    neither its parameters nor its buffers (BatchNorm running statistics in training mode are kept
    by :func:`~gitutor.models.preserved_buffers`).

    Args:
        model: the network; it is evaluated at the local parameters through
            ``torch.func.functional_call``.
        x: ``(B, C, H, W)`` client images in [0, 1] (or an attacker's dummy images).
        y: ``(B,)`` int64 labels or ``(B, num_classes)`` soft labels.
        global_params: z, the global model received from the server, aligned with
            ``model.parameters()``.
        dual: π, the client's dual variable (zeros in the first round), same alignment.
        rho: ρ > 0, the penalty parameter (FedADMM default 0.01).
        lr: η > 0, the client learning rate (FedADMM default 0.1).
        local_steps: E ≥ 1, the number of local gradient steps.
        local_params: w, the client's local model before the round; default: the model's current
            parameters (in the first round these equal z).
        create_graph: keep the graph through all local steps, so Δ can be differentiated with
            respect to ``x`` and ``y`` (the adaptive attack sets this).

    Returns:
        :class:`FedADMMUpdate` ``(delta, dual, local_params)``; detached unless ``create_graph``.

    Raises:
        ValueError: for ρ or η not finite and > 0, local_steps < 1, non-finite ``x``, images not
            ``(B, C, H, W)`` (e.g. channels-last), a batch-size mismatch, labels out of range, soft
            labels that are not probabilities (rows summing to 1), or a parameter list whose length or
            shapes do not match the model or that holds NaN/inf (the message names the parameter).
        TypeError: if a parameter list is not a list of float tensors, ``x`` is not a float tensor,
            or integer labels are not int64.
    """
    _check_hyperparameters(rho, lr, local_steps)
    names = [name for name, _ in model.named_parameters()]
    z = [
        t.detach() for t in check_parameter_list(model, global_params, "global_params")
    ]
    pi = [t.detach() for t in check_parameter_list(model, dual, "dual")]
    start = (
        list(model.parameters())
        if local_params is None
        else check_parameter_list(model, local_params, "local_params")
    )
    start = [t.detach() for t in start]
    check_client_batch(x, y, model)

    w = [t.clone().requires_grad_(True) for t in start]
    with preserved_buffers(model):
        for _ in range(local_steps):
            loss = cross_entropy(functional_call(model, dict(zip(names, w)), (x,)), y)
            grads = torch.autograd.grad(loss, w, create_graph=create_graph)
            w = [
                wi - lr * (gi + pi_i + rho * (wi - zi))
                for wi, gi, pi_i, zi in zip(w, grads, pi, z)
            ]
            if not create_graph:
                w = [wi.detach().requires_grad_(True) for wi in w]
    if not create_graph:
        w = [wi.detach() for wi in w]
    new_dual = [pi_i + rho * (wi - zi) for pi_i, wi, zi in zip(pi, w, z)]
    delta = [
        (wi + new_pi / rho) - (w0 + pi_i / rho)
        for wi, new_pi, w0, pi_i in zip(w, new_dual, start, pi)
    ]
    return FedADMMUpdate(delta=delta, dual=new_dual, local_params=w)


def pseudo_gradient(delta: Sequence[torch.Tensor], lr: float) -> list[torch.Tensor]:
    """−Δ/η, the "gradient" DLG-ADMM attacks (Algorithm 2 line 21).

    For one local step from the global model it equals 2 (∇f(z) + π) (see the module docstring).

    Args:
        delta: the increment Δ, a list of tensors.
        lr: η > 0, the client learning rate.

    Returns:
        A list of tensors of the same shapes.

    Raises:
        ValueError: if ``lr <= 0``.
        TypeError: if ``delta`` is not a list of tensors.
    """
    if not 0 < lr < math.inf:
        raise ValueError(
            f"lr (the client learning rate eta) must be finite and > 0, got {lr!r}"
        )
    if isinstance(delta, torch.Tensor) or not all(
        isinstance(d, torch.Tensor) for d in delta
    ):
        raise TypeError(
            "delta must be a list of tensors aligned with model.parameters()"
        )
    if not all(d.is_floating_point() for d in delta):
        raise TypeError("delta must hold float tensors")
    if not all(torch.isfinite(d).all() for d in delta):
        raise ValueError("delta contains NaN or inf")
    return [-d / lr for d in delta]
