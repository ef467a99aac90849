"""Gradient inversion against FedADMM increments (the DLG reproduction report, §4.2 and Algorithm 2).

Three attackers see the same increment Δ a FedADMM client sends (``gitutor.federated.admm``):

- DLG-ADMM and iDLG-ADMM (the report's Algorithm 2, lines 5–10 and 21): treat −Δ/η as if it were
  the client's gradient and run DLG (dummy labels optimised) or iDLG (label from the sign rule,
  image only) against it.
- The adaptive attack (this book's addition; the report's §6 asks for an attack designed for ADMM):
  the attacker knows ρ, the dual π, η and the number of local steps E, simulates the client's E
  local steps on the dummy data and minimises ||Δ(x', y') − Δ||² / η², differentiating through the
  unrolled steps (``create_graph=True``).
- The closed form (one local step, E = 1): the increment is affine in the client's gradient at its
  local model w, so :func:`closed_form_gradient` reads ∇f(w) off Δ exactly and DLG attacks that
  (:func:`closed_form_inversion`); :func:`server_state_after_round_one` derives the w and π it needs from
  what the server holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from gitutor.attacks.dlg import dlg
from gitutor.attacks.objectives import check_input_shape, check_target_gradients
from gitutor.attacks.result import AttackResult
from gitutor.checks import check_real
from gitutor.federated.admm import fedadmm_client_update, pseudo_gradient
from gitutor.federated.client import check_parameter_list
from gitutor.labels.idlg import idlg_label
from gitutor.models.introspect import fc_weight_index
from gitutor.models.parameters_at import model_at


def dlg_admm(
    model: nn.Module,
    delta: Sequence[torch.Tensor],
    lr: float,
    input_shape: Sequence[int],
    num_classes: int,
    **dlg_options,
) -> AttackResult:
    """DLG-ADMM (Algorithm 2): DLG (Zhu et al. 2019, Algorithm 1) run against −Δ/η.

    Args:
        model: the shared model at the parameters where the client's round started (the global
            model z in the first round).
        delta: the observed increment Δ, aligned with ``model.parameters()``.
        lr: η, the client learning rate (known to the server).
        input_shape: ``(B, C, H, W)`` of the private batch.
        num_classes: classes of the dummy label logits.
        **dlg_options: passed to :func:`gitutor.attacks.dlg` (``iterations``, ``seed``,
            ``record_every``, ``lr`` of L-BFGS, ``progress``).

    Returns:
        DLG's :class:`AttackResult` (``history["loss"]`` is the distance to −Δ/η).

    Raises:
        ValueError: for η ≤ 0 or as :func:`gitutor.attacks.dlg` (``input_shape`` not ``(B, C, H, W)``,
            ``num_classes`` < 2 or not the model's output width, iterations).
    """
    return dlg(
        model, pseudo_gradient(delta, lr), input_shape, num_classes, **dlg_options
    )


def idlg_admm(
    model: nn.Module,
    delta: Sequence[torch.Tensor],
    lr: float,
    input_shape: Sequence[int],
    num_classes: int,
    **dlg_options,
) -> AttackResult:
    """iDLG-ADMM (report §4.2.2): the iDLG label rule (Zhao et al. 2020) on the last-layer rows of
    −Δ/η, then image-only DLG against −Δ/η.

    The label is read from −Δ/η exactly as iDLG reads it from a gradient; for one local step from
    the global model with a zero dual, −Δ/η = 2∇f, so the rule still finds the true label.
    ``result.info["label"]`` holds the inferred label.

    Raises:
        ValueError: if the batch size is not 1 (the sign rule is for one sample), ``input_shape`` is not
            ``(B, C, H, W)`` (e.g. channels-last), the model has no ``fc`` layer, η ≤ 0, or as
            :func:`gitutor.attacks.dlg` (e.g. ``num_classes``).
    """
    shape = check_input_shape(input_shape, model)
    if shape[0] != 1:
        raise ValueError(
            f"iDLG infers the label of ONE sample; got batch size {shape[0]}"
        )
    grads = pseudo_gradient(delta, lr)
    label = idlg_label(grads[fc_weight_index(model)])
    result = dlg(
        model,
        grads,
        shape,
        num_classes,
        labels=torch.tensor([label], device=grads[0].device),
        **dlg_options,
    )
    result.info["label"] = label
    return result


def adaptive_admm_inversion(
    model: nn.Module,
    delta: Sequence[torch.Tensor],
    input_shape: Sequence[int],
    num_classes: int,
    *,
    global_params: Sequence[torch.Tensor],
    dual: Sequence[torch.Tensor],
    rho: float,
    lr: float,
    local_steps: int,
    local_params: Sequence[torch.Tensor] | None = None,
    labels: torch.Tensor | None = None,
    iterations: int = 300,
    seed: int = 0,
    record_every: int = 10,
    optimizer_lr: float = 1.0,
    progress: bool = False,
) -> AttackResult:
    """Adaptive inversion of a FedADMM increment: match the simulated increment, not a gradient.

    The attacker knows everything the client's round depends on except the data: the model, the
    global model z, the dual π, ρ, η, the number of local steps E and the local start w (by default
    the model's parameters). It is :func:`gitutor.attacks.dlg` (same N(0, 1) draws for the same
    seed, L-BFGS) with the client's gradient replaced by the simulated client round: Algorithm 2
    lines 12–19 on (x', softmax(y')) through :func:`gitutor.federated.fedadmm_client_update`
    (``create_graph=True``). It minimises D = ||Δ' /η − Δ/η||² (DLG's squared-L2 distance on the pseudo-gradients, so the
    loss is on the same scale as DLG-ADMM's) with L-BFGS, as DLG does. Each evaluation of D costs
    about E times a DLG evaluation.

    Args:
        model: the shared model.
        delta: the observed increment Δ, aligned with ``model.parameters()``.
        input_shape: ``(B, C, H, W)`` of the private batch.
        num_classes: classes of the dummy label logits.
        global_params, dual, rho, lr, local_steps, local_params: the client's round, as in
            :func:`gitutor.federated.fedadmm_client_update`.
        labels: ``(B,)`` int64 labels to fix (e.g. from iDLG) instead of optimising dummy labels.
        iterations: L-BFGS steps.
        seed: seed of the N(0, 1) initialisation.
        record_every: snapshot every this many steps (and at step 0).
        optimizer_lr: L-BFGS learning rate (1, as DLG).
        progress: show a tqdm progress bar.

    Returns:
        :class:`AttackResult`: ``images`` (unclamped), ``labels`` (argmax of the recovered label
        distribution, or the given labels), ``history["loss"]`` (D at the start of every step) and
        snapshots. On a NaN/inf loss it stops, returns the last finite state and sets
        ``info["stopped_early"]``.

    Raises:
        ValueError: for a bad ``input_shape`` (not ``(B, C, H, W)``, e.g. channels-last), ``num_classes``
            < 2 or not the model's output width, ``iterations``/``record_every`` < 1, labels of the
            wrong shape, ρ ≤ 0, η ≤ 0, local_steps < 1, or parameter lists that do not match the model.
    """
    target = pseudo_gradient(check_target_gradients(model, delta), lr)
    client_round = dict(
        global_params=global_params,
        dual=dual,
        rho=rho,
        lr=lr,
        local_steps=local_steps,
        local_params=local_params,
    )

    def simulated_pseudo_gradient(
        images: torch.Tensor, soft_labels: torch.Tensor
    ) -> list[torch.Tensor]:
        update = fedadmm_client_update(
            model, images, soft_labels, create_graph=True, **client_round
        )
        return pseudo_gradient(update.delta, lr)

    return dlg(
        model,
        target,
        input_shape,
        num_classes,
        labels=labels,
        iterations=iterations,
        seed=seed,
        record_every=record_every,
        lr=optimizer_lr,
        progress=progress,
        dummy_gradients=simulated_pseudo_gradient,
    )


def closed_form_gradient(
    model: nn.Module,
    delta: Sequence[torch.Tensor],
    *,
    global_params: Sequence[torch.Tensor],
    dual: Sequence[torch.Tensor],
    local_params: Sequence[torch.Tensor],
    rho: float,
    lr: float,
    local_steps: int = 1,
) -> list[torch.Tensor]:
    """The client's gradient ∇f(w) at its local model w, read exactly off one FedADMM increment Δ.

    With one local step (Algorithm 2 lines 15–19; Gong et al. 2022), w⁺ = w − η(∇f(w) + π + ρ(w − z)),
    π⁺ = π + ρ(w⁺ − z) and Δ = (w⁺ + π⁺/ρ) − (w + π/ρ) = 2w⁺ − w − z, so
    −Δ/η = 2(∇f(w) + π) + (2ρ − 1/η)(w − z) and

        ∇f(w) = ½ [−Δ/η − (2ρ − 1/η)(w − z)] − π,

    which DLG can attack at the model w (:func:`closed_form_inversion`). In round 1 (w = z, π = 0) it is
    −Δ/(2η), the report's DLG-ADMM target halved. Float32 rounding grows with |2ρ − 1/η|.

    Args:
        model: the shared model (for the parameters' alignment and shapes).
        delta: Δ, aligned with ``model.parameters()``.
        global_params, dual, local_params: z, π and w of the client's round.
        rho, lr: ρ > 0 and η > 0.
        local_steps: E; only 1 has this closed form.

    Returns:
        ∇f(w), a list aligned with ``model.parameters()`` (f: the batch-mean cross-entropy).

    Raises:
        ValueError: naming ``local_steps`` when it is not 1 (E > 1 steps compose non-linearly: use
            :func:`adaptive_admm_inversion`), ``rho`` or ``lr`` when not finite and > 0, or a parameter
            list that does not match the model; before anything is computed.
    """
    if isinstance(local_steps, bool) or local_steps != 1:
        raise ValueError(
            f"local_steps must be 1 for the closed form, got {local_steps!r}: with E > 1 steps the "
            "increment is not affine in one gradient (use adaptive_admm_inversion)"
        )
    rho = check_real(rho, "rho", low=0.0, low_open=True)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    delta = check_parameter_list(model, delta, "delta")
    z = check_parameter_list(model, global_params, "global_params")
    pi = check_parameter_list(model, dual, "dual")
    w = check_parameter_list(model, local_params, "local_params")
    slope = 2 * rho - 1 / lr
    return [
        0.5 * (-d / lr - slope * (wi - zi)) - pi_i
        for d, zi, pi_i, wi in zip(delta, z, pi, w)
    ]


def server_state_after_round_one(
    model: nn.Module,
    start: Sequence[torch.Tensor],
    first_delta: Sequence[torch.Tensor],
    *,
    rho: float,
    global_after: Sequence[torch.Tensor] | None = None,
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """``(z, w, π)`` of a client's second round, from what the server holds: the model z₀ it sent in round
    1 (``start``) and the client's round-1 increment Δ₁, for one local step. Round 1 starts at w₀ = z₀
    with π₀ = 0, so Δ₁ = 2(w₁ − z₀) and π₁ = ρ(w₁ − z₀):

        w₁ = z₀ + Δ₁/2,   π₁ = ρ Δ₁ / 2.

    z₁ is the server's own aggregate (the report's line 20): ``global_after`` when given (several clients,
    or a server step other than 1), else z₀ + Δ₁ (one client, server step η_i = 1). No client secret
    enters: every input is the server's own.

    Args:
        model: the network whose parameters the lists follow (shapes only).
        start, first_delta: z₀ and the client's Δ₁, one tensor per parameter of ``model``.
        rho: the ADMM penalty ρ (> 0).
        global_after: z₁ as the server aggregated it (one tensor per parameter), or None.

    Raises:
        ValueError: naming ``rho`` (finite, > 0) or a parameter list (``start``, ``first_delta``,
            ``global_after``) that does not match the model.
    """
    rho = check_real(rho, "rho", low=0.0, low_open=True)
    z0 = check_parameter_list(model, start, "start")
    d1 = check_parameter_list(model, first_delta, "first_delta")
    if global_after is None:
        z = [a + d for a, d in zip(z0, d1)]
    else:
        z = [
            t.clone() for t in check_parameter_list(model, global_after, "global_after")
        ]
    w = [a + d / 2 for a, d in zip(z0, d1)]
    pi = [rho * d / 2 for d in d1]
    return z, w, pi


def closed_form_inversion(
    model: nn.Module,
    delta: Sequence[torch.Tensor],
    input_shape: Sequence[int],
    num_classes: int,
    *,
    global_params: Sequence[torch.Tensor],
    dual: Sequence[torch.Tensor],
    local_params: Sequence[torch.Tensor],
    rho: float,
    lr: float,
    **options,
) -> AttackResult:
    """DLG (:func:`gitutor.attacks.dlg`, ``options``: labels, iterations, seed, record_every, …) on the
    gradient :func:`closed_form_gradient` reads off Δ, at the client's local model w — the model the
    gradient was computed at. One local step only.

    Raises:
        ValueError: as :func:`closed_form_gradient` and :func:`gitutor.attacks.dlg`.
    """
    gradient = closed_form_gradient(
        model,
        delta,
        global_params=global_params,
        dual=dual,
        local_params=local_params,
        rho=rho,
        lr=lr,
    )
    return dlg(
        model_at(model, local_params), gradient, input_shape, num_classes, **options
    )
