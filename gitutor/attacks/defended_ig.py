"""Inverting Gradients adapted to defended gradients, the baseline of Learning To Invert (Appendix A).

Wu et al. (2022, Appendix A, "Vision baselines") change only the gradient-matching term of
Inverting Gradients (Geiping et al. 2020, Eq. 4) when the clients defend:

- sign compression, B = 1: the dummy gradient g' only has to agree in sign with the observed
  s = sign(g), so the distance is Σ_i (ℓ_sign^i)² with ℓ_sign^i = max{−g'_i · s_i, 0}  (Eq. 4);
- sign compression, B > 1: the server sees the mean of the B signs, so tanh (a differentiable
  sign) is applied to each dummy example's gradient, the results are averaged and compared with
  the observed gradient by the cosine distance;
- gradient pruning: the cosine distance runs only over the coordinates the client kept (non-zero);
- none and Gaussian noise: the plain cosine distance.

The rest — TV prior, signed Adam, step schedule, clamping to [0, 1] — is
:func:`gitutor.attacks.inverting_gradients`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from gitutor.attacks.inverting_gradients import inverting_gradients
from gitutor.attacks.objectives import (
    check_input_shape,
    check_target_gradients,
    cosine_gradient_distance,
)
from gitutor.attacks.result import AttackResult
from gitutor.federated.client import client_gradients

#: Defense names whose matching term Appendix A adapts ("none" and "gauss" use the cosine distance).
ADAPTED_DEFENSES = ("none", "sign", "prune", "gauss")


def sign_matching_loss(
    dummy: Sequence[torch.Tensor], observed_signs: Sequence[torch.Tensor]
) -> torch.Tensor:
    """Σ_i max{−g'_i · s_i, 0}² over all coordinates (Wu et al. Appendix A, Eq. 4); 0 when every
    coordinate of the dummy gradient g' has the observed sign s."""
    return sum(torch.relu(-d * s).pow(2).sum() for d, s in zip(dummy, observed_signs))


def _matching_term(
    model: nn.Module,
    x: torch.Tensor,
    labels: torch.Tensor,
    observed: list[torch.Tensor],
    defense: str,
    masks: list[torch.Tensor] | None,
) -> torch.Tensor:
    if defense == "sign" and x.shape[0] == 1:
        return sign_matching_loss(
            client_gradients(model, x, labels, create_graph=True), observed
        )
    if defense == "sign":
        per_example = [
            client_gradients(model, x[i : i + 1], labels[i : i + 1], create_graph=True)
            for i in range(x.shape[0])
        ]
        soft_signs = [
            torch.stack([g[layer].tanh() for g in per_example]).mean(0)
            for layer in range(len(observed))
        ]
        return cosine_gradient_distance(soft_signs, observed)
    return cosine_gradient_distance(
        client_gradients(model, x, labels, create_graph=True), observed, masks=masks
    )


def defended_inverting_gradients(
    model: nn.Module,
    observed_grads: Sequence[torch.Tensor],
    labels: torch.Tensor,
    input_shape: Sequence[int],
    defense: str,
    *,
    iterations: int,
    tv_weight: float,
    lr: float = 0.1,
    seed: int = 0,
    record_every: int = 50,
    progress: bool = False,
    lr_steps: Sequence[float] = (3 / 8, 5 / 8, 7 / 8),
    keep_best: bool = False,
) -> AttackResult:
    """Inverting Gradients with the defense-aware matching term of Wu et al. Appendix A.

    Args:
        model: the shared model.
        observed_grads: the defended, aggregated gradient the server received, aligned with
            ``model.parameters()``.
        labels: ``(B,)`` int64 labels of the private batch (known to the attacker, as in IG).
        input_shape: ``(B, C, H, W)``.
        defense: one of :data:`ADAPTED_DEFENSES`.
        iterations, tv_weight, lr, seed, record_every, progress, lr_steps, keep_best: as
            :func:`gitutor.attacks.inverting_gradients`.

    Returns:
        :class:`AttackResult` with images in [0, 1], ``history["loss"]`` and
        ``history["gradient_distance"]`` per iteration, snapshots every ``record_every``.

    Raises:
        ValueError: for an unknown defense name, bad shapes (``input_shape`` not ``(B, C, H, W)`` with
            the model's input channels, e.g. channels-last), a label/batch mismatch,
            ``iterations < 1``, ``tv_weight < 0``, or gradients that do not match the model.
    """
    if defense not in ADAPTED_DEFENSES:
        raise ValueError(
            f"defense must be one of {ADAPTED_DEFENSES}, got {defense!r}; for a custom defense "
            "pick the closest adaptation (e.g. 'none' for plain cosine matching)"
        )
    observed = check_target_gradients(model, observed_grads)
    if labels.shape[0] != check_input_shape(input_shape, model)[0]:
        raise ValueError(f"{labels.shape[0]} labels for a batch of {input_shape[0]}")
    masks = [(g != 0).float() for g in observed] if defense == "prune" else None

    def defended_distance(x: torch.Tensor) -> torch.Tensor:
        return _matching_term(model, x, labels, observed, defense, masks)

    return inverting_gradients(
        model,
        observed,
        labels,
        input_shape,
        iterations=iterations,
        tv_weight=tv_weight,
        lr=lr,
        seed=seed,
        record_every=record_every,
        progress=progress,
        matching_distance=defended_distance,
        lr_steps=lr_steps,
        keep_best=keep_best,
    )


def defended_matching_distance(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    observed_grads: Sequence[torch.Tensor],
    defense: str,
) -> float:
    """The matching term :func:`defended_inverting_gradients` minimises, at ``images`` ``(B, C, H, W)`` with
    ``labels`` ``(B,)``: at the true images it is the sanity check of the objective (a run that reaches below the
    truth's value is fitting something other than the images).

    Raises:
        ValueError: for an unknown defense name or gradients that do not match the model.
    """
    if defense not in ADAPTED_DEFENSES:
        raise ValueError(f"defense must be one of {ADAPTED_DEFENSES}, got {defense!r}")
    observed = check_target_gradients(model, observed_grads)
    masks = [(g != 0).float() for g in observed] if defense == "prune" else None
    return float(
        _matching_term(model, images, labels, observed, defense, masks).detach()
    )
