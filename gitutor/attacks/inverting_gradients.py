"""Inverting Gradients (Geiping, Bauermeister, Dröge, Moeller, NeurIPS 2020, §4, Eq. 4).

Minimise the cosine gradient distance over all layers plus a TV prior,
    argmin_x 1 − ⟨∇W(x, y), ∇W*⟩ / (||∇W(x, y)|| ||∇W*||) + α_TV · TV(x),
with Adam on the sign of the image gradient, learning rate ×0.1 at 3/8, 5/8 and 7/8 of the
iterations, and the image clamped to the pixel box [0, 1] after every step (the loop of
:mod:`gitutor.attacks.loop`). Labels are known.

Geiping et al.'s own ImageNet configuration (their ``inversefed`` README: ``lr=0.1``,
``total_variation=1e-1``, ``restarts=8``, ``max_iterations=24_000``, ``init="randn"``,
``boxed=True``, ``lr_decay=True``, ``scoring_choice="loss"``, all on the normalised image) is
:data:`GEIPING_IMAGENET`; pass ``normalisation`` to optimise in their units.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from gitutor.attacks.loop import (
    check_count,
    check_hyperparameter,
    check_start,
    initial_images,
    optimise_images,
    step_schedule,
)
from gitutor.attacks.stepwise_options import StepwiseOptions
from gitutor.attacks.objectives import (
    CosineToTarget,
    check_input_shape,
    check_target_gradients,
    total_variation,
)
from gitutor.attacks.result import AttackResult
from gitutor.checkpoints import Checkpoint
from gitutor.federated.client import client_gradients
from gitutor.seeding import make_generator

#: Geiping et al.'s ImageNet configuration (see the module docstring): α_TV on the mean TV of the
#: normalised image, lr in normalised units, restarts and iterations.
GEIPING_IMAGENET = {"tv_weight": 0.1, "lr": 0.1, "restarts": 8, "iterations": 24_000}


def step_milestones(
    iterations: int, fractions: Sequence[float] = (3 / 8, 5 / 8, 7 / 8)
) -> list[int]:
    """Iterations at which the learning rate steps down (Geiping et al. 2020: 3/8, 5/8, 7/8).

    Raises:
        ValueError/TypeError: if ``iterations`` is not an int ≥ 1 or a fraction is not in (0, 1).
    """
    check_count(iterations, "iterations")
    if not all(isinstance(f, (int, float)) and 0 < f < 1 for f in fractions):
        raise ValueError(f"fractions must lie in (0, 1), got {tuple(fractions)!r}")
    return [int(iterations * f) for f in fractions]


def inverting_gradients(
    model: nn.Module,
    target_grads: Sequence[torch.Tensor],
    labels: torch.Tensor,
    input_shape: Sequence[int],
    *,
    iterations: int,
    tv_weight: float,
    lr: float = 0.1,
    signed: bool = True,
    seed: int = 0,
    record_every: int = 50,
    progress: bool = False,
    matching_distance: Callable[[torch.Tensor], torch.Tensor] | None = None,
    lr_steps: Sequence[float] = (3 / 8, 5 / 8, 7 / 8),
    keep_best: bool | str = False,
    normalisation: tuple[Sequence[float], Sequence[float]] | None = None,
    restarts: int = 1,
    start: torch.Tensor | None = None,
    diagnose_at: Sequence[int] = (),
    checkpoint: Checkpoint | None = None,
) -> AttackResult:
    """Geiping et al.'s attack: cosine gradient distance + TV, signed Adam, clamp to [0, 1].

    Args:
        model: the shared model, in the mode the client used (train-mode BatchNorm buffers are
            restored after every forward pass, see ``client_gradients``).
        target_grads: observed float gradient aligned with ``model.parameters()``.
        labels: ``(B,)`` int64 labels or ``(B, C)`` soft labels of the private batch.
        input_shape: ``(B, C, H, W)``, channels first.
        iterations: Adam steps (24 000 in the paper for ImageNet; far fewer in quick profiles).
        tv_weight: α_TV ≥ 0.
        lr: Adam learning rate (> 0; paper 0.1).
        signed: step on the sign of the image gradient (the paper's choice).
        seed: seed of the N(0, 1) initialisation (clamped into [0, 1]).
        record_every: snapshot interval.
        progress: show a tqdm progress bar.
        matching_distance: ``f(x) -> scalar`` replacing the gradient-matching term (default: the
            cosine gradient distance between ``client_gradients(model, x, labels)`` and
            ``target_grads``). Defense-aware matching (Learning To Invert, App. A) and the
            user-level objective (Li et al. 2023, Eq. 6) plug in here.
        lr_steps: fractions of ``iterations`` at which the learning rate drops ×0.1 (the paper's 3/8,
            5/8, 7/8); ``()`` keeps it constant.
        keep_best: return the iterate of the lowest objective over the run (what the attacker can
            compute), not the last (:func:`gitutor.attacks.loop.optimise_images` with ``best_resets``
            never resetting; ``info["best_iteration"]`` says when): ``True`` the iterate after the step
            with the lowest recorded objective, ``"scored"`` the iterate it was scored at, the final one
            included (``best_at="scored"``, Wang et al.'s ``pick_best("loss")``). Not in the paper.
        normalisation: ``(mean, std)`` per channel: optimise the *normalised* image z = (x − mean)/std
            as Geiping et al.'s code does (``inversefed``: start N(0, 1) unclamped in z, box
            [−mean/std, (1 − mean)/std], TV on z, ``lr`` in z's units); None: the image in [0, 1]
            (start clamp(N(0, 1), 0, 1), TV on x). The model always sees x = z·std + mean.
        restarts: independent starts (the paper's ImageNet setting: 8), drawn one after another from
            the seed's generator; the result is the restart whose final image has the lowest
            gradient-matching distance — what the attacker can compute (``scoring_choice="loss"`` of
            their code). ``info["restart_distances"]`` lists each restart's, ``info["restart"]`` the
            chosen one (0-based).
        start: ``(B, C, H, W)`` images in [0, 1] to start from instead of the seeded noise (the sanity
            arm: the truth plus small noise); one restart only.
        diagnose_at: iterations at which TV's image gradient is weighed against the matching term's
            (``info["prior_gradients"]``, :func:`gitutor.attacks.loop.optimise_images`).
        checkpoint: save and resume the run there (one file per restart,
            :meth:`gitutor.checkpoints.Checkpoint.part`).

    Returns:
        :class:`AttackResult` with images in [0, 1], the given labels, ``history`` per iteration
        (``iteration``, ``lr``, ``loss`` = the total objective, ``gradient_distance``, ``tv``) and
        snapshots.

    Raises:
        ValueError: for bad shapes (``input_shape`` not ``(B, C, H, W)`` with the model's input channels,
            e.g. channels-last), a label/batch mismatch, soft labels whose rows do not sum to 1,
            ``iterations < 1``, ``record_every < 1``,
            a NaN/inf/negative ``tv_weight``, a NaN/inf/non-positive ``lr``, ``restarts < 1``,
            a ``normalisation`` without one positive std per input channel, a ``start`` that is not
            finite images in [0, 1] of ``input_shape`` or comes with ``restarts > 1``, or gradients that do
            not match the model or are not finite.
        TypeError: for non-float gradients, non-numeric hyper-parameters or a ``keep_best``
            other than a bool or ``"scored"``.
    """
    target_grads = check_target_gradients(model, target_grads)
    shape = check_input_shape(input_shape, model)
    tv_weight = check_hyperparameter(tv_weight, "tv_weight")
    check_count(iterations, "iterations")
    if not (isinstance(keep_best, bool) or keep_best == "scored"):
        raise TypeError(
            f"keep_best must be a bool or 'scored', got {keep_best!r} ({type(keep_best).__name__})"
        )
    if matching_distance is None and labels.shape[0] != shape[0]:
        raise ValueError(f"{labels.shape[0]} labels for a batch of {shape[0]}")
    if matching_distance is None:
        cosine = CosineToTarget(target_grads)

        def matching_distance(images: torch.Tensor) -> torch.Tensor:
            return cosine(client_gradients(model, images, labels, create_graph=True))

    restarts = check_count(restarts, "restarts")
    device = target_grads[0].device
    units = StepwiseOptions()
    if normalisation is not None:
        mean, std = (tuple(float(v) for v in part) for part in normalisation)
        if len(mean) != shape[1]:
            raise ValueError(
                f"normalisation has {len(mean)} channels, the images {shape[1]}"
            )
        units = StepwiseOptions(units="normalised", mean=mean, std=std)

    def objective(z: torch.Tensor, t: int) -> dict[str, torch.Tensor]:
        distance, tv = matching_distance(units.to_pixels(z)), total_variation(z)
        return {
            "loss": distance + tv_weight * tv,
            "gradient_distance": distance,
            "tv": tv,
            "parts": {"matching": distance, "TV": tv_weight * tv},
        }

    if start is not None:
        start = check_start(start, shape)
        if restarts > 1:
            raise ValueError(
                f"start gives one start; restarts must be 1 with it, got {restarts}"
            )
    generator = make_generator(seed, device)
    results, distances = [], []
    for restart in range(restarts):
        if start is not None:
            z0 = units.from_pixels(start.to(device=device, dtype=target_grads[0].dtype))
        elif normalisation is None:
            z0 = initial_images(shape, generator)
        else:  # inversefed's init="randn": N(0, 1) in normalised units, no clamp
            z0 = torch.randn(
                shape, generator=generator, device=device, dtype=target_grads[0].dtype
            )
        part = (
            checkpoint
            if checkpoint is None or restarts == 1
            else checkpoint.part(f"restart{restart}")
        )
        result = optimise_images(
            objective,
            z0,
            iterations=iterations,
            lr=lr,
            signed=signed,
            labels=labels,
            lr_schedule=step_schedule(step_milestones(iterations, lr_steps), 0.1),
            box=units.box(device, z0.dtype),
            view=units.to_pixels,
            record_every=record_every,
            progress=progress,
            desc="Inverting Gradients",
            best_resets=(lambda t: False) if keep_best else None,
            best_at="scored" if keep_best == "scored" else "after",
            diagnose_at=diagnose_at,
            checkpoint=part,
        )
        results.append(result)
        distances.append(
            float(matching_distance(result.images.to(device)).detach())
            if restarts > 1
            else None
        )
    if restarts == 1:
        return results[0]
    chosen = min(range(restarts), key=distances.__getitem__)
    best = results[chosen]
    return AttackResult(
        images=best.images,
        labels=best.labels,
        history=best.history,
        snapshots=best.snapshots,
        info={**best.info, "restart": chosen, "restart_distances": distances},
    )
