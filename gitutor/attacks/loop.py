"""The one image-optimisation loop behind every optimisation attack of the book.

Inverting Gradients (Geiping et al. 2020, §4), GradInversion (Yin et al. 2021), stepwise
GradInversion (Ye et al. 2024, Eq. 12) and the defense-aware Inverting Gradients of Learning To
Invert (Wu et al. 2022, App. A) all run the same loop over a candidate batch x:

    for t = 0 … T − 1:
        terms = objective(x, t)                 # {"loss": scalar, other named terms}
        g = ∇_x terms["loss"]                   # or terms["grad"], a gradient the attack built itself
        g = sign(g)                             # "signed" step rule (Geiping et al.; Ye et al. Eq. 12)
        x = Adam step of x with g, lr(t)        # lr(t) from a torch.optim.lr_scheduler
        x = clamp(x, box)                       # the pixel box [0, 1] (Truncate in Eq. 12)

and return one :class:`AttackResult` with one history format: ``history[key][t]`` is the value at
iteration ``t`` (before that step) for ``"iteration"``, ``"loss"``, ``"lr"`` and every other term
the objective returns; snapshots at 0, every ``record_every`` steps, at ``snapshot_at`` and at the end.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence

import torch
from tqdm.auto import tqdm

from gitutor.attacks.result import AttackResult
from gitutor.seeding import make_generator

Objective = Callable[[torch.Tensor, int], Mapping[str, torch.Tensor | float | int]]
SchedulerFactory = Callable[[torch.optim.Optimizer], torch.optim.lr_scheduler.LRScheduler]


def check_hyperparameter(value, name: str, *, positive: bool = False) -> float:
    """``value`` as a float after checking that it is a finite real number ≥ 0 (> 0 if ``positive``).

    Raises:
        TypeError: if ``value`` is not a real number (bools and tensors with more than one entry too).
        ValueError: if it is NaN, infinite, negative, or zero when ``positive``; the message names ``name``.
    """
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be a finite number {'> 0' if positive else '≥ 0'}, got {value!r}")
    return value


def check_count(value, name: str) -> int:
    """``value`` as an int ≥ 1. Raises TypeError (not an int) or ValueError (< 1), naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be ≥ 1, got {value}")
    return int(value)


def initial_images(shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    """The common start x_0 = clamp(N(0, I), 0, 1) of shape ``(B, C, H, W)`` drawn from ``generator``."""
    return torch.randn(tuple(shape), generator=generator, device=generator.device).clamp(0, 1)


def step_schedule(milestones: Iterable[int], gamma: float) -> SchedulerFactory:
    """A factory of ``MultiStepLR(optimizer, milestones, gamma)``: lr × ``gamma`` at each milestone."""
    milestones = list(milestones)
    return lambda optimizer: torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones, gamma=gamma)


def optimise_images(objective: Objective, x0: torch.Tensor, *, iterations: int, lr: float,
                    lr_schedule: SchedulerFactory | None = None, signed: bool = True,
                    box: tuple[float, float] | None = (0.0, 1.0), record_every: int = 50,
                    snapshot_at: Iterable[int] = (), view: Callable[[torch.Tensor], torch.Tensor] | None = None,
                    labels: torch.Tensor | None = None, progress: bool = False, desc: str = "attack") -> AttackResult:
    """Run the loop of the module docstring from ``x0`` and return the result.

    Args:
        objective: ``objective(x, t) -> {"loss": scalar tensor, name: scalar tensor or number, …}``;
            it may add ``"grad"``, a tensor like ``x`` used as the image gradient instead of
            ∇_x loss (attacks that combine gradients themselves, e.g. Li et al. 2023, Alg. 1).
        x0: ``(B, C, H, W)`` start (not modified).
        iterations: number of steps T ≥ 1.
        lr: Adam's base learning rate (> 0).
        lr_schedule: ``optimizer -> torch.optim.lr_scheduler`` (default: constant lr); stepped
            once after every step, so iteration t runs with the scheduler's lr after t steps.
        signed: step on sign(g) (Geiping et al. 2020; Ye et al. 2024 Eq. 12) instead of g.
        box: ``(low, high)`` clamp after each step, or None.
        record_every: snapshot period in steps (≥ 1).
        snapshot_at: further step counts at which to snapshot.
        view: maps x to the image stored in snapshots and ``images`` (default: x itself).
        labels: stored in the result as they are (moved to the CPU).
        progress: show a tqdm bar labelled ``desc``.

    Returns:
        :class:`AttackResult`: ``images`` (CPU), ``history`` (one entry per iteration, see the
        module docstring), ``snapshots`` ``[(steps done, images)]``, and ``info["stopped_early"]``
        (a string) when the loss became NaN/inf; the result is then the last finite iterate.

    Raises:
        ValueError/TypeError: for ``iterations``/``record_every`` < 1, a non-positive or non-finite
            ``lr``, an ``x0`` that is not a finite 4-D float tensor, or an objective without "loss".
    """
    iterations, record_every = check_count(iterations, "iterations"), check_count(record_every, "record_every")
    lr = check_hyperparameter(lr, "lr", positive=True)
    if not isinstance(x0, torch.Tensor) or x0.dim() != 4 or not x0.is_floating_point():
        raise ValueError("x0 must be a (B, C, H, W) float tensor")
    if not torch.isfinite(x0).all():
        raise ValueError("x0 contains NaN or inf")
    view = view or (lambda images: images)
    x = x0.detach().clone().requires_grad_(True)
    optimizer = torch.optim.Adam([x], lr=lr)
    scheduler = lr_schedule(optimizer) if lr_schedule else None
    snapshot_times = {t for t in snapshot_at if 0 < t <= iterations} | {iterations}
    history: dict[str, list] = {}
    snapshots, info = [(0, view(x.detach()).cpu().clone())], {}
    for t in tqdm(range(iterations), desc=desc, disable=not progress):
        terms = dict(objective(x, t))
        if "loss" not in terms:
            raise ValueError(f"objective must return a dict with a 'loss' entry, got keys {sorted(terms)}")
        if not torch.isfinite(terms["loss"]):
            info["stopped_early"] = f"non-finite loss at iteration {t}"
            break
        grad = terms.pop("grad", None)
        grad = grad.detach() if grad is not None else torch.autograd.grad(terms["loss"], x)[0]
        x.grad = torch.sign(grad) if signed else grad.clone()
        _record(history, t, optimizer.param_groups[0]["lr"], terms)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        if box is not None:
            with torch.no_grad():
                x.clamp_(*box)
        if (t + 1) % record_every == 0 or (t + 1) in snapshot_times:
            snapshots.append((t + 1, view(x.detach()).cpu().clone()))
    history = {key: _plain(values) for key, values in history.items()}
    return AttackResult(images=view(x.detach()).cpu(), labels=None if labels is None else labels.detach().cpu(),
                        history=history, snapshots=snapshots, info=info)


def _record(history: dict[str, list], t: int, lr: float, terms: Mapping) -> None:
    """Append iteration ``t``'s values (tensors kept detached; turned into floats once, at the end)."""
    for key, value in (("iteration", t), ("lr", lr), *terms.items()):
        history.setdefault(key, []).append(value.detach() if isinstance(value, torch.Tensor) else value)


def _plain(values: list) -> list:
    if values and isinstance(values[0], torch.Tensor):
        return [float(v) for v in torch.stack(values).cpu().tolist()]
    return [v if isinstance(v, int) else float(v) for v in values]


def seeded_start(shape: Sequence[int], seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Generator]:
    """``(x_0, generator)``: the common initial noise for ``seed`` and the generator, for later draws."""
    generator = make_generator(seed, device)
    return initial_images(shape, generator), generator
