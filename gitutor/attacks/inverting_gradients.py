"""Inverting Gradients (Geiping, Bauermeister, Dröge, Moeller, NeurIPS 2020, §4, Eq. 4).

Minimise the cosine gradient distance over all layers plus a TV prior,
    argmin_x 1 − ⟨∇W(x, y), ∇W*⟩ / (||∇W(x, y)|| ||∇W*||) + α_TV · TV(x),
with Adam on the sign of the image gradient, learning rate ×0.1 at 3/8, 5/8 and 7/8 of the
iterations, and the image clamped to the pixel box [0, 1] after every step. Labels are known.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

from gitutor.attacks.objectives import (check_input_shape, check_target_gradients, cosine_gradient_distance,
                                        total_variation)
from gitutor.attacks.result import AttackResult
from gitutor.federated.client import client_gradients
from gitutor.seeding import make_generator


def step_milestones(iterations: int, fractions: Sequence[float] = (3 / 8, 5 / 8, 7 / 8)) -> list[int]:
    """Iterations at which the learning rate steps down (Geiping et al. 2020: 3/8, 5/8, 7/8)."""
    return [int(iterations * f) for f in fractions]


def inverting_gradients(model: nn.Module, target_grads: Sequence[torch.Tensor], labels: torch.Tensor,
                        input_shape: Sequence[int], *, iterations: int, tv_weight: float, lr: float = 0.1,
                        signed: bool = True, seed: int = 0, record_every: int = 50, progress: bool = False,
                        matching_distance: Callable[[torch.Tensor], torch.Tensor] | None = None) -> AttackResult:
    """Geiping et al.'s attack: cosine gradient distance + TV, signed Adam, clamp to [0, 1].

    Args:
        model: the shared model, in the mode the client used.
        target_grads: observed gradient aligned with ``model.parameters()``.
        labels: ``(B,)`` int64 labels or ``(B, C)`` soft labels of the private batch.
        input_shape: ``(B, C, H, W)``.
        iterations: Adam steps (24 000 in the paper for ImageNet; far fewer in quick profiles).
        tv_weight: α_TV ≥ 0.
        lr: Adam learning rate (0.1).
        signed: step on the sign of the image gradient (the paper's choice).
        seed: seed of the N(0, 1) initialisation (clamped into [0, 1]).
        record_every: snapshot interval.
        progress: show a tqdm progress bar.
        matching_distance: ``f(x) -> scalar`` replacing the gradient-matching term (default: the
            cosine gradient distance between ``client_gradients(model, x, labels)`` and
            ``target_grads``). Defense-aware matching (Learning To Invert, App. A) and the
            user-level objective (Li et al. 2023, Eq. 6) plug in here.

    Returns:
        :class:`AttackResult` with images in [0, 1], the given labels, ``history["loss"]`` (total
        objective) and ``history["gradient_distance"]`` per iteration, snapshots.

    Raises:
        ValueError: for bad shapes, a label/batch mismatch, ``iterations < 1``, ``tv_weight < 0``,
            or gradients that do not match the model.
    """
    target_grads = check_target_gradients(model, target_grads)
    shape = check_input_shape(input_shape)
    if matching_distance is None and labels.shape[0] != shape[0]:
        raise ValueError(f"{labels.shape[0]} labels for a batch of {shape[0]}")
    if iterations < 1 or record_every < 1 or tv_weight < 0:
        raise ValueError("need iterations >= 1, record_every >= 1 and tv_weight >= 0")
    device = target_grads[0].device
    x = torch.randn(shape, generator=make_generator(seed, device), device=device).clamp(0, 1)
    x.requires_grad_(True)
    optimizer = torch.optim.Adam([x], lr=lr)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, step_milestones(iterations), gamma=0.1)
    if matching_distance is None:
        def matching_distance(images: torch.Tensor) -> torch.Tensor:
            return cosine_gradient_distance(client_gradients(model, images, labels, create_graph=True), target_grads)

    history: dict[str, list[float]] = {"loss": [], "gradient_distance": []}
    snapshots = [(0, x.detach().cpu().clone())]
    for step in tqdm(range(1, iterations + 1), desc="Inverting Gradients", disable=not progress):
        distance = matching_distance(x)
        loss = distance + tv_weight * total_variation(x)
        x.grad, = torch.autograd.grad(loss, x)
        if signed:
            x.grad.sign_()
        optimizer.step()
        scheduler.step()
        with torch.no_grad():
            x.clamp_(0, 1)
        history["loss"].append(float(loss.detach()))
        history["gradient_distance"].append(float(distance.detach()))
        if step % record_every == 0:
            snapshots.append((step, x.detach().cpu().clone()))
    return AttackResult(images=x.detach().cpu(), labels=labels.detach().cpu(), history=history, snapshots=snapshots)
