"""Inverting Gradients (Geiping et al. 2020, §4, Eq. 4) on P independent problems at once (the stacked
DLG LeNets of :mod:`gitutor.attacks.stacked_lenet`).

Each problem p is what ``inverting_gradients(models[p], targets[p], labels[p:p+1], (1, C, H, W),
iterations=…, tv_weight=…, seed=seeds[p])`` solves: cosine gradient distance over all layers together
plus α_TV · TV (mean reduction) of its own image, signed Adam (lr 0.1, ×0.1 at 3/8, 5/8, 7/8), the image
clamped to [0, 1] after every step, label known. Adam with signed gradients acts on every pixel on its own
and the problems' losses are summed, so the batch changes nothing but the order of floating-point sums.
Cosine matching is blind to the gradient's scale: it finds the same image from ∇f and from 2∇f.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gitutor.attacks import stacked_lenet as stacked
from gitutor.attacks.inverting_gradients import step_milestones
from gitutor.attacks.loop import (
    check_count,
    check_hyperparameter,
    initial_images,
    optimise_images,
    step_schedule,
)
from gitutor.attacks.objectives import total_variation
from gitutor.attacks.result import AttackResult
from gitutor.checks import check_seeds, check_sizes
from gitutor.seeding import make_generator


def batched_inverting_gradients(
    models: Sequence,
    targets: Sequence[Sequence[torch.Tensor]],
    labels: torch.Tensor,
    input_shape: Sequence[int],
    *,
    seeds: Sequence[int],
    iterations: int,
    tv_weight: float,
    lr: float = 0.1,
    record_every: int = 50,
) -> list[AttackResult]:
    """Inverting Gradients on P problems, one :class:`AttackResult` per problem (module docstring).

    Args:
        models: P DLG LeNets of one architecture; targets: P observed gradients (or −Δ/η), aligned with
            ``LeNet.parameters()``; labels: ``(P,)`` int64 known labels; input_shape: ``(C, H, W)``;
            seeds: the P seeds of the start clamp(N(0, 1), 0, 1); iterations: Adam steps; tv_weight: α_TV.

    Returns:
        One result per problem: ``images`` ``(1, C, H, W)`` in [0, 1], its label, ``history["loss"]``
        (the summed objective of all problems, the same list in every result) and snapshots.

    Raises:
        TypeError: for ``seeds`` that is not a sequence of ints, labels that are not an int64 tensor,
            or a non-int entry of ``input_shape``.
        ValueError: for mismatched counts, labels not ``(P,)``, a bad ``input_shape``, ``iterations`` < 1,
            a negative ``tv_weight`` or a non-positive ``lr``.
    """
    count = len(models)
    seeds = check_seeds(seeds, count)
    if not isinstance(labels, torch.Tensor) or labels.dtype != torch.int64:
        raise TypeError(
            f"labels must be a ({count},) int64 tensor, got {getattr(labels, 'dtype', type(labels).__name__)}"
        )
    if not len(targets) == count or count < 1 or labels.shape != (count,):
        raise ValueError(f"models, targets and labels must all have length {count} ≥ 1")
    if len(input_shape) != 3:
        raise ValueError(
            f"input_shape must be (C, H, W) of one image, got {tuple(input_shape)}"
        )
    check_sizes(**{f"input_shape[{i}]": size for i, size in enumerate(input_shape)})
    check_count(iterations, "iterations")
    tv_weight = check_hyperparameter(tv_weight, "tv_weight")
    device = next(models[0].parameters()).device
    params = [
        p.to(device).requires_grad_(True) for p in stacked.stacked_parameters(models)
    ]
    wanted = [
        t.to(device) for t in stacked.stack([[g.detach() for g in t] for t in targets])
    ]
    wanted_norm = sum(stacked.per_problem(t**2, count).sum(1) for t in wanted).sqrt()
    x0 = torch.cat(
        [
            initial_images((1, *input_shape), make_generator(seed, device))
            for seed in seeds
        ]
    )

    def objective(x: torch.Tensor, t: int) -> dict[str, torch.Tensor]:
        grads = stacked.gradients(params, x, labels.to(device), create_graph=True)
        dot = sum(
            stacked.per_problem(g * w, count).sum(1) for g, w in zip(grads, wanted)
        )
        norm = sum(stacked.per_problem(g**2, count).sum(1) for g in grads).sqrt()
        distance = 1 - dot / (norm * wanted_norm + 1e-12)
        tv = torch.stack([total_variation(x[p : p + 1]) for p in range(count)])
        return {"loss": (distance + tv_weight * tv).sum()}

    result = optimise_images(
        objective,
        x0,
        iterations=iterations,
        lr=lr,
        signed=True,
        labels=labels,
        lr_schedule=step_schedule(step_milestones(iterations), 0.1),
        record_every=record_every,
        desc="Inverting Gradients (batched)",
    )
    return [
        AttackResult(
            images=result.images[p : p + 1],
            labels=labels[p : p + 1].cpu(),
            history=result.history,
            snapshots=[(step, images[p : p + 1]) for step, images in result.snapshots],
            info=dict(result.info),
        )
        for p in range(count)
    ]
