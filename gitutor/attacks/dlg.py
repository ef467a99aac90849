"""Deep Leakage from Gradients (Zhu, Liu, Han, NeurIPS 2019, §3, Algorithm 1).

The attacker holds the model F(·; W) and a client's gradient ∇W. It draws a dummy image
x' ~ N(0, 1) and dummy label logits y' ~ N(0, 1), and minimises the squared-L2 distance between
the dummy gradient ∂ℓ(F(x'), softmax(y'))/∂W and ∇W over (x', y') with L-BFGS (learning rate 1,
as in the public code; each of the 300 steps runs up to 20 inner L-BFGS iterations).
The public code uses torch's L-BFGS without a line search (fixed step ``lr``); ``line_search=
"strong_wolfe"`` switches on torch's strong-Wolfe line search (Nocedal & Wright, Numerical
Optimization, Alg. 3.5–3.6), a beyond-the-paper option that picks each step length so the distance
decreases sufficiently, instead of trusting the fixed step.
Given the labels (e.g. from the iDLG sign rule), only the image is optimised: the iDLG setting
(Zhao et al. 2020). :func:`dlg_distance` is the objective, :func:`dlg` the attack that minimises it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from gitutor.attacks.inverting_gradients import step_milestones
from gitutor.attacks.loop import (
    check_count,
    check_hyperparameter,
    optimise_images,
    step_schedule,
)
from gitutor.attacks.objectives import (
    check_input_shape,
    check_target_gradients,
    gradient_l2_distance,
    total_variation,
)
from gitutor.attacks.result import AttackResult
from gitutor.checkpoints import Checkpoint
from gitutor.checks import check_num_classes
from gitutor.federated.client import check_labels, client_gradients
from gitutor.models.buffers import preserved_buffers
from gitutor.seeding import make_generator

#: ``line_search`` values and the step rule of :func:`gitutor.attacks.loop.optimise_images` each runs:
#: the DLG code's fixed step, or torch's strong-Wolfe line search.
LINE_SEARCHES = {None: "lbfgs", "strong_wolfe": "lbfgs_strong_wolfe"}


def dlg_distance(
    model: nn.Module,
    dummy_x: torch.Tensor,
    dummy_y: torch.Tensor | None,
    target_grads: Sequence[torch.Tensor],
    *,
    labels: torch.Tensor | None = None,
    dummy_gradients: Callable[[torch.Tensor, torch.Tensor], list[torch.Tensor]]
    | None = None,
) -> torch.Tensor:
    """DLG's objective (Zhu et al. 2019, §3, Eq. 4; Algorithm 1, line 5), a scalar tensor:
    D = Σ_l ‖∂ℓ(F(x'; W), softmax(y'))/∂W_l − ∇W_l‖², summed over the parameter tensors.

    Args:
        model: the shared model F(·; W), twice differentiable (e.g. Sigmoid LeNet).
        dummy_x: ``(B, C, H, W)`` dummy images x'.
        dummy_y: ``(B, K)`` dummy label logits y' (the label is softmax(y')); may be None
            when ``labels`` is given.
        target_grads: the observed gradient ∇W, aligned with ``model.parameters()``.
        labels: ``(B,)`` int64 or ``(B, K)`` soft labels used instead of softmax(y')
            (the iDLG setting, Zhao et al. 2020).
        dummy_gradients: ``f(x', labels) -> list of tensors`` the client would send;
            default its gradient, ``client_gradients(..., create_graph=True)``.

    Returns:
        D in the squared units of the gradient, differentiable in ``dummy_x`` and
        ``dummy_y`` (second derivatives of the model).

    Raises:
        ValueError: ``dummy_y`` None without ``labels`` or not ``(B, K)``; gradients
            whose count or shapes differ from ``target_grads``; or as
            :func:`gitutor.federated.client_gradients` for a bad batch.
    """
    if labels is None:
        _check_logits(dummy_y, dummy_x)
    soft_labels = F.softmax(dummy_y, dim=-1) if labels is None else labels
    if dummy_gradients is None:
        dummy_grads = client_gradients(model, dummy_x, soft_labels, create_graph=True)
    else:
        dummy_grads = dummy_gradients(dummy_x, soft_labels)
    return gradient_l2_distance(dummy_grads, target_grads)  # Σ_l ‖g'_l − g_l‖²


def dlg(
    model: nn.Module,
    target_grads: Sequence[torch.Tensor],
    input_shape: Sequence[int],
    num_classes: int,
    *,
    labels: torch.Tensor | None = None,
    iterations: int = 300,
    seed: int = 0,
    record_every: int = 10,
    lr: float = 1.0,
    line_search: str | None = None,
    stop_loss: float | None = None,
    progress: bool = False,
    dummy_gradients: Callable[[torch.Tensor, torch.Tensor], list[torch.Tensor]]
    | None = None,
    checkpoint: Checkpoint | None = None,
    tv_weight: float = 0.0,
    lr_steps: Sequence[float] = (),
    keep_best: bool | str = False,
    start: torch.Tensor | None = None,
) -> AttackResult:
    """DLG (``labels=None``) or iDLG-style image-only DLG (``labels`` given).

    Args:
        model: the shared model, in the same mode (train/eval) as when the client computed
            ``target_grads``; it must be twice differentiable (e.g. Sigmoid LeNet).
        target_grads: the observed gradient, aligned with ``model.parameters()``.
        input_shape: ``(B, C, H, W)`` of the private batch, channels first.
        num_classes: the number of classes (≥ 2) of the model's output, the width of the dummy
            label logits.
        labels: ``(B,)`` int64 labels or ``(B, num_classes)`` soft labels (label smoothing, mixup;
            Wang et al. 2024, Table 3; rows summing to 1) to fix instead of optimising dummy labels.
        iterations: L-BFGS steps (the paper's n = 300).
        seed: seed of the N(0, 1) initialisation.
        record_every: store an image snapshot every this many steps (and at step 0).
        lr: L-BFGS learning rate (1 in the DLG code).
        line_search: ``None`` (the DLG code: fixed steps) or ``"strong_wolfe"`` (torch's strong-Wolfe
            line search; not in the paper).
        stop_loss: stop once the gradient distance is below this value (None, the DLG code: run every
            step); :func:`gitutor.attacks.loop.optimise_images` sets ``info["stopped_at"]``. A budget
            rule beyond the paper: a run stopped there is scored before the paper's 300 steps.
        progress: show a tqdm progress bar.
        checkpoint: save and resume the run there (:class:`gitutor.checkpoints.Checkpoint`).
        dummy_gradients: ``f(dummy_x, dummy_label) -> list of tensors`` (differentiable) that the
            client would send for that data; default the gradient ``client_gradients(...,
            create_graph=True)``. The ADMM attacks pass a simulated client update here (the
            CLIENTUPDATE of the reproduction report's Algorithm 2).
        tv_weight: α_TV ≥ 0: add α_TV · TV(x') (the anisotropic mean total variation of
            :func:`gitutor.attacks.objectives.total_variation`) to the distance. 0 (default) is DLG;
            Wang et al.'s code (ICLR 2024, ``recovering.py``, ``reconstruct``) adds TV 1e-2 to its L2
            matching on an untrained LeNet.
        lr_steps: fractions of ``iterations`` at which the L-BFGS learning rate drops ×0.1
            (:func:`gitutor.attacks.inverting_gradients.step_milestones`); ``()`` (default, DLG) keeps it
            constant; Wang et al.'s code steps at 3/8, 5/8, 7/8.
        keep_best: ``False`` (default, DLG) returns the last iterate; ``True`` the iterate after the step
            with the lowest recorded objective (:func:`gitutor.attacks.loop.optimise_images`'s
            ``best_resets`` never resetting); ``"scored"`` the iterate the lowest objective was scored at,
            the final one included (``best_at="scored"``): Wang et al.'s code (``record_picking``,
            ``pick_best("loss")``), which falls back to an earlier iterate when a fixed L-BFGS step blows
            up. ``info["best_iteration"]`` says when. The dummy label logits stay the last iterate's
            (``labels``, ``info["final_loss"]``).
        start: ``(B, C, H, W)`` finite float tensor, the dummy image's start in place of the N(0, 1) draw, in
            the units the model takes (DLG's dummy is unbounded); the label logits are drawn from ``seed``
            as without it. Not in the paper: the sanity arm of a study (the truth plus small noise) runs the
            attack from it (DESIGN.md, "Attack strength").

    Every step minimises :func:`dlg_distance` (plus ``tv_weight`` · TV) over the dummy image (and the dummy label logits
    when ``labels`` is None).

    Returns:
        :class:`AttackResult` of :func:`gitutor.attacks.loop.optimise_images` (step rule L-BFGS, no box)
        with ``images`` (unclamped, as DLG returns them), ``labels`` (argmax of the recovered label
        distribution, or the given labels as passed), ``history["loss"]`` (gradient distance at the start
        of every step, so entry 0 is the initial distance), ``info["final_loss"]`` (the distance at the
        returned image and label logits, after the last step) and snapshots. If the loss becomes NaN/inf, the
        attack stops and returns the last finite state, with ``info["stopped_early"]`` set. If a step leaves
        the dummy data exactly unchanged, the run is at a fixed point of the L-BFGS iteration (torch's
        L-BFGS returned without moving: its direction does not descend, or the gradient is below its
        tolerance; every later step returns the same way). This is a state of the optimiser, not
        necessarily a stationary point of the distance. The loop stops computing there, sets
        ``info["converged_at"]`` and fills history and snapshots as the remaining steps would, so the
        result equals that of the full budget.

    Raises:
        TypeError: for a non-integer ``iterations``/``record_every``/``num_classes`` or a non-real ``lr``.
        ValueError: for a bad ``input_shape`` (not ``(B, C, H, W)``: channels-last, or C not the model's
            input channels), ``num_classes < 2`` or not the width of the model's output,
            ``iterations < 1``, ``record_every < 1``, ``labels`` of the wrong shape, outside
            [0, num_classes), not finite or soft labels whose rows do not sum to 1, a non-positive or
            non-finite ``lr``, an unknown ``line_search``, a negative or non-finite ``tv_weight``, an
            ``lr_steps`` fraction outside (0, 1), or gradients that do not match the model (the message
            names the parameter).
        TypeError: for a ``keep_best`` other than a bool or ``"scored"``, or a ``start`` that is not a
            float tensor.
        ValueError: naming ``start`` for another shape than ``input_shape`` or a NaN/inf value.
    """
    target_grads = check_target_gradients(model, target_grads)
    shape = check_input_shape(input_shape, model)
    num_classes = check_num_classes(num_classes)
    check_count(iterations, "iterations"), check_count(record_every, "record_every")
    lr = check_hyperparameter(lr, "lr", positive=True)
    tv_weight = check_hyperparameter(tv_weight, "tv_weight")
    lr_steps = tuple(lr_steps)
    if not all(
        isinstance(f, (int, float)) and not isinstance(f, bool) and 0 < f < 1
        for f in lr_steps
    ):
        raise ValueError(f"lr_steps must be fractions in (0, 1), got {lr_steps!r}")
    milestones = step_milestones(iterations, lr_steps) if lr_steps else None
    if not (isinstance(keep_best, bool) or keep_best == "scored"):
        raise TypeError(
            f"keep_best must be a bool or 'scored', got {keep_best!r} ({type(keep_best).__name__})"
        )
    if line_search not in LINE_SEARCHES:
        raise ValueError(
            f"line_search must be one of {tuple(LINE_SEARCHES)}, got {line_search!r}"
        )
    _check_labels(labels, shape[0], num_classes)
    if start is not None:
        if not isinstance(start, torch.Tensor) or not start.is_floating_point():
            raise TypeError(f"start must be a float tensor, got {type(start).__name__}")
        if tuple(start.shape) != shape or not torch.isfinite(start).all():
            raise ValueError(
                f"start must be a finite tensor of shape {shape}, got {tuple(start.shape)}"
            )
    device = target_grads[0].device
    generator = make_generator(seed, device)
    dummy_x = torch.randn(shape, generator=generator, device=device)
    if start is not None:  # the label logits below are drawn as without it
        dummy_x = start.detach().to(device=device, dtype=dummy_x.dtype).clone()
    _check_output_width(model, dummy_x, num_classes)
    dummy_y = torch.randn(
        (shape[0], num_classes), generator=generator, device=device
    ).requires_grad_(True)

    def objective(x: torch.Tensor, t: int) -> dict[str, torch.Tensor]:
        distance = dlg_distance(
            model,
            x,
            dummy_y,
            target_grads,
            labels=labels,
            dummy_gradients=dummy_gradients,
        )
        if not tv_weight:
            return {"loss": distance}
        tv = total_variation(x)
        return {
            "loss": distance + tv_weight * tv,
            "gradient_distance": distance,
            "tv": tv,
        }

    result = optimise_images(
        objective,
        dummy_x,
        iterations=iterations,
        lr=lr,
        lr_schedule=None if milestones is None else step_schedule(milestones, 0.1),
        step_rule=LINE_SEARCHES[line_search],
        signed=False,
        box=None,
        record_every=record_every,
        stop_loss=stop_loss,
        progress=progress,
        desc="DLG",
        checkpoint=checkpoint,
        extra_variables=() if labels is not None else (dummy_y,),
        best_resets=(lambda t: False) if keep_best else None,
        best_at="scored" if keep_best == "scored" else "after",
    )
    result.labels = (
        labels if labels is not None else dummy_y.detach().argmax(dim=-1)
    ).cpu()
    # the distance at what is returned: history["loss"] ends at the start of the last step
    final = dlg_distance(
        model,
        result.images.to(device),
        dummy_y,
        target_grads,
        labels=labels,
        dummy_gradients=dummy_gradients,
    )
    result.info["final_loss"] = float(final.detach())
    return result


def _check_labels(
    labels: torch.Tensor | None, batch_size: int, num_classes: int
) -> None:
    """Raise ValueError unless ``labels`` is None, ``(B,)`` int64 in [0, C) or ``(B, C)`` soft labels
    (probability rows, :func:`gitutor.federated.client.check_labels`)."""
    if labels is None:
        return
    if not (
        (labels.shape == (batch_size,) and labels.dtype == torch.int64)
        or (labels.shape == (batch_size, num_classes) and labels.is_floating_point())
    ):
        raise ValueError(
            f"labels must be int64 of shape ({batch_size},) or soft labels of shape "
            f"({batch_size}, {num_classes}), got {labels.dtype} {tuple(labels.shape)}"
        )
    if (
        not labels.is_floating_point()
        and not ((labels >= 0) & (labels < num_classes)).all()
    ):
        raise ValueError(
            f"labels must lie in [0, num_classes={num_classes}), got {labels.tolist()}"
        )
    check_labels(labels, num_classes, name="`labels`")


def _check_output_width(model: nn.Module, x: torch.Tensor, num_classes: int) -> None:
    """Raise ValueError naming ``num_classes`` unless the model outputs that many logits for ``x``
    (one forward pass without gradients, buffers kept)."""
    with preserved_buffers(model), torch.no_grad():
        width = model(x).shape[-1]
    if width != num_classes:
        raise ValueError(
            f"num_classes={num_classes} but the model outputs {width} logits per image; pass "
            f"num_classes={width}"
        )


def _check_logits(dummy_y: torch.Tensor | None, dummy_x: torch.Tensor) -> None:
    """Raise ValueError naming ``dummy_y`` unless it is a ``(B, K)`` tensor with B = len(dummy_x)."""
    if (
        not isinstance(dummy_y, torch.Tensor)
        or dummy_y.dim() != 2
        or dummy_y.shape[0] != dummy_x.shape[0]
    ):
        shape = tuple(dummy_y.shape) if isinstance(dummy_y, torch.Tensor) else dummy_y
        raise ValueError(
            f"dummy_y must be ({dummy_x.shape[0]}, num_classes) dummy label logits (or "
            f"pass labels=), got {shape!r}"
        )
