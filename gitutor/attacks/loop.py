"""The one image-optimisation loop behind every optimisation attack of the book.

DLG (Zhu et al. 2019, Alg. 1), Inverting Gradients (Geiping et al. 2020, §4), GradInversion
(Yin et al. 2021), stepwise GradInversion (Ye et al. 2024, Eq. 12), the defense-aware Inverting
Gradients of Learning To Invert (Wu et al. 2022, App. A) and DiffULA (Li et al. 2023, Alg. 1) all
run the same loop over a candidate batch x (and, for DLG, further variables such as label logits):

    for t = 0 … T − 1:
        terms = objective(x, t)                 # {"loss": scalar, other named terms}
        g = ∇_x terms["loss"]                   # or terms["grad"], a gradient the attack built itself
        g = sign(g)                             # "signed" step rule (Geiping et al.; Ye et al. Eq. 12)
        x = step of x with g, lr(t)             # Adam, or L-BFGS (DLG), lr(t) from a torch lr_scheduler
        x = clamp(x, box)                       # the pixel box [0, 1] (Truncate in Eq. 12)

and return one :class:`AttackResult` with one history format: ``history[key][t]`` is the value at
iteration ``t`` (before that step) for ``"iteration"``, ``"loss"``, ``"lr"`` and every other term
the objective returns; snapshots at 0, every ``record_every`` steps, at ``snapshot_at`` and at the end.
Every step goes through ``optimizer.step(closure)``: Adam calls the closure once, L-BFGS up to
``max_iter`` times (its first call is what the history records).
"""

from __future__ import annotations

import hashlib
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence

import torch
from tqdm.auto import tqdm

from gitutor.attacks.result import AttackResult
from gitutor.checkpoints import Checkpoint, tensor_digest
from gitutor.checks import check_int, check_real
from gitutor.seeding import make_generator

Objective = Callable[[torch.Tensor, int], Mapping[str, torch.Tensor | float | int]]
SchedulerFactory = Callable[
    [torch.optim.Optimizer], torch.optim.lr_scheduler.LRScheduler
]

#: Step rules: Adam (Geiping et al. 2020; Ye et al. 2024), or torch's L-BFGS (20 function evaluations
#: per step) with the DLG code's fixed step or with a strong-Wolfe line search (Nocedal & Wright, Alg. 3.5–3.6).
STEP_RULES = {
    "adam": lambda variables, lr: torch.optim.Adam(variables, lr=lr),
    "lbfgs": lambda variables, lr: torch.optim.LBFGS(variables, lr=lr),
    "lbfgs_strong_wolfe": lambda variables, lr: torch.optim.LBFGS(
        variables, lr=lr, line_search_fn="strong_wolfe"
    ),
}


class _NonFiniteLoss(Exception):
    """Raised by the step's closure to abandon a step whose objective is NaN/inf."""


def check_hyperparameter(value, name: str, *, positive: bool = False) -> float:
    """``value`` as a float after checking that it is a finite real number ≥ 0 (> 0 if ``positive``):
    :func:`gitutor.checks.check_real` with that range.

    Raises:
        TypeError: if ``value`` is not a real number (bools and tensors with more than one entry too).
        ValueError: if it is NaN, infinite, negative, or zero when ``positive``; the message names ``name``.
    """
    return check_real(value, name, low=0.0, low_open=positive)


def check_count(value, name: str) -> int:
    """``value`` as an int ≥ 1 (:func:`gitutor.checks.check_int`). Raises TypeError (not an int) or
    ValueError (< 1), naming ``name``."""
    return check_int(value, name, low=1)


def _iterations(values, name: str, low: int, high: int) -> set[int]:
    """``values`` as a set of iterations in [low, high] (ValueError/TypeError naming ``name``)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(
            f"{name} must be a list of iterations, got {type(values).__name__}"
        )
    values = set(values)
    if not all(
        isinstance(t, numbers.Integral) and not isinstance(t, bool) and low <= t <= high
        for t in values
    ):
        raise ValueError(
            f"{name} must hold iterations (ints in [{low}, {high}]), got {sorted(map(repr, values))}"
        )
    return {int(t) for t in values}


def check_start(start, shape: Sequence[int]) -> torch.Tensor:
    """``start`` after checking that it is a float tensor of ``shape`` with finite values in [0, 1].

    Raises:
        TypeError: if ``start`` is not a float tensor.
        ValueError: naming ``start`` for another shape, a NaN/inf value or a value outside [0, 1].
    """
    if not isinstance(start, torch.Tensor) or not start.is_floating_point():
        raise TypeError(
            f"start must be a float tensor of images, got {type(start).__name__}"
        )
    if tuple(start.shape) != tuple(shape):
        raise ValueError(
            f"start must have the batch's shape {tuple(shape)}, got {tuple(start.shape)}"
        )
    if not torch.isfinite(start).all() or start.min() < 0 or start.max() > 1:
        raise ValueError("start must hold finite images in [0, 1]")
    return start.detach()


def initial_images(shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    """The common start x_0 = clamp(N(0, I), 0, 1) of shape ``(B, C, H, W)`` drawn from ``generator``."""
    return torch.randn(
        tuple(shape), generator=generator, device=generator.device
    ).clamp(0, 1)


def step_schedule(milestones: Iterable[int], gamma: float) -> SchedulerFactory:
    """A factory of ``MultiStepLR(optimizer, milestones, gamma)``: lr × ``gamma`` at each milestone.

    Raises:
        ValueError: if a milestone is not an int ≥ 0 or ``gamma`` is not a finite number > 0.
    """
    milestones = list(milestones)
    if not all(
        isinstance(m, int) and not isinstance(m, bool) and m >= 0 for m in milestones
    ):
        raise ValueError(
            f"milestones must be iterations (ints ≥ 0), got {milestones!r}"
        )
    check_hyperparameter(gamma, "gamma", positive=True)
    return lambda optimizer: torch.optim.lr_scheduler.MultiStepLR(
        optimizer, milestones, gamma=gamma
    )


def optimise_images(
    objective: Objective,
    x0: torch.Tensor,
    *,
    iterations: int,
    lr: float,
    lr_schedule: SchedulerFactory | None = None,
    step_rule: str = "adam",
    signed: bool | Callable[[torch.Tensor, int], torch.Tensor] = True,
    box: tuple[float, float] | None = (0.0, 1.0),
    record_every: int = 50,
    snapshot_at: Iterable[int] = (),
    view: Callable[[torch.Tensor], torch.Tensor] | None = None,
    labels: torch.Tensor | None = None,
    extra_variables: Sequence[torch.Tensor] = (),
    stop_loss: float | None = None,
    best_resets: Callable[[int], bool] | None = None,
    diagnose_at: Iterable[int] = (),
    checkpoint: Checkpoint | None = None,
    progress: bool = False,
    desc: str = "attack",
    best_at: str = "after",
) -> AttackResult:
    """Run the loop of the module docstring from ``x0`` and return the result.

    Args:
        objective: ``objective(x, t) -> {"loss": scalar tensor, name: scalar tensor or number, …}``;
            it may add ``"grad"``, a tensor like ``x`` used as the image gradient instead of
            ∇_x loss (attacks that combine gradients themselves, e.g. Li et al. 2023, Alg. 1).
        x0: ``(B, C, H, W)`` start (not modified).
        iterations: number of steps T ≥ 1.
        lr: the step rule's base learning rate (> 0).
        lr_schedule: ``optimizer -> torch.optim.lr_scheduler`` (default: constant lr); stepped
            once after every step, so iteration t runs with the scheduler's lr after t steps.
        step_rule: a key of :data:`STEP_RULES`. With an L-BFGS rule, a step that leaves every variable
            exactly unchanged is a fixed point (each later step would repeat it), so the loop stops
            computing there, sets ``info["converged_at"]`` (steps done), adds a snapshot of the fixed point
            at that step and fills history and snapshots (with the fixed point) as the remaining steps
            would; the result equals that of the full budget.
        signed: step on sign(g) (Geiping et al. 2020; Ye et al. 2024 Eq. 12) instead of g (Adam only);
            or a function ``(g, t) -> g'`` applied to the image gradient instead (e.g. the authors'
            quantised sign, :func:`gitutor.attacks.stepwise_options.quantised_sign`).
        box: ``(low, high)`` clamp after each step, or None.
        record_every: snapshot period in steps (≥ 1).
        snapshot_at: further step counts at which to snapshot.
        view: maps x to the image stored in snapshots and ``images`` (default: x itself).
        labels: stored in the result as they are (moved to the CPU).
        extra_variables: further leaf tensors optimised with x (modified in place), e.g. DLG's dummy
            label logits; the objective reads them itself. Not allowed with a ``"grad"`` term.
        stop_loss: stop after the first step whose recorded loss (the objective before the step) is
            below this value (None: run every step). History and snapshots end there, with a
            snapshot at the stop; ``info["stopped_at"]`` holds the steps done. A study's budget
            rule (e.g. DLG has found the image, the remaining steps only polish it), not the paper's.
        best_resets: None (default) returns the last iterate. Otherwise ``images`` is the iterate
            after the step whose recorded loss was the lowest so far, where a step ``t`` with
            ``best_resets(t)`` true is taken whatever its loss (the authors' code keeps this
            "best" iterate and resets it every 500 iterations, optimization_based_attack.py:228–232);
            ``info["best_iteration"]`` holds the steps done when it was taken.
        best_at: with ``best_resets``, which iterate a step's recorded loss selects: ``"after"`` (default)
            the iterate after that step (Ye et al.'s code); ``"scored"`` the iterate the loss was scored at
            (the one before the step), and the final iterate, scored once more after the last step, is a
            candidate too — Wang et al.'s ``pick_best("loss")`` (ICLR 2024 code, ``recovering.py``), which
            returns the start rather than a step that blew up. Only x is kept; ``extra_variables`` end at
            their last iterate.
        diagnose_at: iterations t at which the loop weighs the objective's parts against each other:
            an objective that returns ``"parts"`` (a dict of scalar tensors: ``"matching"``, the
            gradient-matching term, and each prior *times its weight*, whether or not it is on at t)
            gets, in ``info["prior_gradients"][str(t)]``, the L2 norm of each part's image gradient,
            each prior's norm over the matching term's (``"<prior>/matching"``) and the fraction of
            pixels where the sign of the whole objective's image gradient equals the matching term's
            (``"sign_agreement"``) — the check that a prior is not what sets the update (DESIGN.md,
            "Attack strength"). ``"parts"`` never enters the history.
        checkpoint: a :class:`~gitutor.checkpoints.Checkpoint`: the loop saves its whole state there
            every ``checkpoint.every`` iterations and after the last, and, when the file exists,
            resumes from it (a finished run's checkpoint returns its result at once). The resumed
            result equals the uninterrupted one bit for bit, provided that an objective which draws
            random numbers exposes ``state_dict()``/``load_state_dict(state)`` for its generator (as
            :class:`~gitutor.attacks.stepwise.StepwiseObjective` does). A checkpoint of another run
            (other arguments, start, learning-rate schedule, objective — its loss at the start, evaluated
            once more to fingerprint it, with its state restored — or key) is refused with a ValueError
            naming the file.
        progress: show a tqdm bar labelled ``desc``.

    Returns:
        :class:`AttackResult`: ``images`` (CPU), ``history`` (one entry per iteration, see the
        module docstring), ``snapshots`` ``[(steps done, images)]``, and ``info["stopped_early"]``
        (a string) when the loss or a variable became NaN/inf (also inside a step: an L-BFGS inner
        iterate that left the finite numbers ends the step before the objective sees it); x and
        ``extra_variables`` are then those before the failing step, and the snapshots end with that x
        (at the steps done).

    Raises:
        ValueError/TypeError: for ``iterations``/``record_every`` < 1, a non-positive or non-finite
            ``lr``, an unknown ``step_rule``, ``signed`` with L-BFGS, an ``x0`` that is not a finite 4-D
            float tensor, ``extra_variables`` that are not finite float leaf tensors requiring grad,
            or an objective without "loss".
    """
    iterations, record_every = (
        check_count(iterations, "iterations"),
        check_count(record_every, "record_every"),
    )
    lr = check_hyperparameter(lr, "lr", positive=True)
    if stop_loss is not None:
        stop_loss = check_hyperparameter(stop_loss, "stop_loss", positive=True)
    if step_rule not in STEP_RULES:
        raise ValueError(
            f"step_rule must be one of {sorted(STEP_RULES)}, got {step_rule!r}"
        )
    if best_at not in ("after", "scored"):
        raise ValueError(f"best_at must be 'after' or 'scored', got {best_at!r}")
    if (callable(signed) or signed) and step_rule != "adam":
        raise ValueError(
            f"signed steps are an Adam rule; pass signed=False with step_rule={step_rule!r}"
        )
    if not isinstance(x0, torch.Tensor) or x0.dim() != 4 or not x0.is_floating_point():
        raise ValueError("x0 must be a (B, C, H, W) float tensor")
    if not torch.isfinite(x0).all():
        raise ValueError("x0 contains NaN or inf")
    for v in extra_variables:
        if not (
            isinstance(v, torch.Tensor)
            and v.is_leaf
            and v.requires_grad
            and torch.isfinite(v).all()
        ):
            raise ValueError(
                "extra_variables must be finite float leaf tensors with requires_grad=True"
            )
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        raise TypeError(
            f"checkpoint must be a gitutor.checkpoints.Checkpoint or None, got {type(checkpoint).__name__}"
        )
    diagnose_at = _iterations(diagnose_at, "diagnose_at", 0, iterations - 1)
    snapshot_at = _iterations(snapshot_at, "snapshot_at", 1, iterations)
    if not (isinstance(signed, bool) or callable(signed)):
        raise TypeError(
            f"signed must be True, False or a function (g, t) -> g', got {signed!r}"
        )
    if box is not None:
        if not (isinstance(box, (tuple, list)) and len(box) == 2):
            raise ValueError(f"box must be (low, high) or None, got {box!r}")
        low, high = (torch.as_tensor(b, dtype=torch.float64) for b in box)
        if not (
            torch.isfinite(low).all()
            and torch.isfinite(high).all()
            and (low < high).all()
        ):
            raise ValueError(
                f"box must hold finite bounds with low < high, got {box!r}"
            )
    view = view or (lambda images: images)
    x = x0.detach().clone().requires_grad_(True)
    variables = [x, *extra_variables]
    optimizer = STEP_RULES[step_rule](variables, lr)
    scheduler = lr_schedule(optimizer) if lr_schedule else None
    snapshot_times = set(snapshot_at) | {iterations}
    history: dict[str, list] = {}
    snapshots, info = [(0, view(x.detach()).cpu().clone())], {}
    best, best_loss = None, math.inf
    fingerprint = _fingerprint(
        x0,
        extra_variables,
        iterations=iterations,
        lr=lr,
        step_rule=step_rule,
        signed=signed,
        box=box,
        record_every=record_every,
        snapshots=snapshot_times,
        stop_loss=stop_loss,
        best=(best_resets is not None)
        if best_at == "after"
        else "scored",  # the old fingerprint unless scored
        diagnose=diagnose_at,
    )
    if (
        checkpoint is not None
    ):  # what else the saved state must belong to: the schedule and the objective
        fingerprint["schedule"] = _schedule_digest(lr_schedule, lr, iterations)
        fingerprint["objective at the start"] = _objective_at(
            objective, x0, extra_variables
        )
    state = checkpoint.load(fingerprint) if checkpoint is not None else None
    first, done = 0, False
    if state is not None:
        with torch.no_grad():
            for v, saved in zip(variables, state["variables"]):
                v.copy_(saved)
        optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(state["scheduler"])
        if state["objective"] is not None:
            objective.load_state_dict(state["objective"])
        history, info = state["history"], state["info"]
        snapshots = [(int(t), images) for t, images in state["snapshots"]]
        best, best_loss, first, done = (
            state["best"],
            state["best_loss"],
            state["t"],
            state["done"],
        )
        best = None if best is None else best.to(x.device)

    def save(steps: int, finished: bool) -> None:
        for key, values in history.items():
            history[key] = _plain(values)
        checkpoint.save(
            fingerprint,
            {
                "t": steps,
                "done": finished,
                "variables": [v.detach().cpu() for v in variables],
                "optimizer": optimizer.state_dict(),
                "scheduler": None if scheduler is None else scheduler.state_dict(),
                "objective": objective.state_dict()
                if hasattr(objective, "state_dict")
                else None,
                "history": history,
                "info": info,
                "snapshots": [[t, images] for t, images in snapshots],
                "best": best,
                "best_loss": best_loss,
            },
        )

    for t in tqdm(
        range(first, first if done else iterations),
        desc=desc,
        disable=not progress,
        initial=first,
        total=iterations,
    ):
        before = [v.detach().clone() for v in variables]
        recorded: dict = {}
        try:
            optimizer.step(
                _closure(
                    objective,
                    x,
                    t,
                    variables,
                    signed,
                    recorded,
                    info.setdefault("prior_gradients", {})
                    if t in diagnose_at
                    else None,
                )
            )
        except _NonFiniteLoss:
            info["stopped_early"] = f"non-finite loss at iteration {t}"
        if "stopped_early" not in info and not all(
            torch.isfinite(v).all() for v in variables
        ):
            info["stopped_early"] = f"non-finite variables after iteration {t}"
        if "stopped_early" in info:
            with torch.no_grad():
                for v, old in zip(variables, before):
                    v.copy_(old)
            if (
                snapshots[-1][0] != t
            ):  # the iterate the run holds: the one after t steps
                snapshots.append((t, view(x.detach()).cpu().clone()))
            break
        _record(history, t, optimizer.param_groups[0]["lr"], recorded)
        if scheduler is not None:
            scheduler.step()
        if box is not None:
            with torch.no_grad():
                x.clamp_(*box)
        loss = float(
            torch.as_tensor(recorded["loss"]).detach()
        )  # the step's objective, once
        if best_resets is not None and (loss < best_loss or best_resets(t)):
            if best_at == "after":
                best, best_loss, info["best_iteration"] = (
                    x.detach().clone(),
                    loss,
                    t + 1,
                )
            else:  # the iterate the loss was scored at: the one before this step
                best, best_loss, info["best_iteration"] = before[0], loss, t
        stop = stop_loss is not None and loss < stop_loss
        if (t + 1) % record_every == 0 or (t + 1) in snapshot_times or stop:
            snapshots.append((t + 1, view(x.detach()).cpu().clone()))
        if stop:
            info["stopped_at"] = t + 1
            break
        if step_rule != "adam" and all(
            torch.equal(v, old) for v, old in zip(variables, before)
        ):
            info["converged_at"] = t + 1
            fixed = view(x.detach()).cpu().clone()  # the iterate from here to the end
            if not snapshots or snapshots[-1][0] != t + 1:
                snapshots.append((t + 1, fixed))
            for later in range(t + 1, iterations):
                _record(history, later, optimizer.param_groups[0]["lr"], recorded)
                if (later + 1) % record_every == 0 or (later + 1) in snapshot_times:
                    snapshots.append((later + 1, fixed))
            break
        if (
            checkpoint is not None
            and (t + 1) % checkpoint.every == 0
            and t + 1 < iterations
        ):
            save(t + 1, False)
    if (
        checkpoint is not None and not done
    ):  # done: a finished run's checkpoint, nothing ran
        save(iterations, True)
    history = {key: _plain(values) for key, values in history.items()}
    if (
        best_resets is not None and best_at == "scored"
    ):  # the final iterate is scored too
        with torch.enable_grad():
            last = float(
                torch.as_tensor(objective(x.detach(), iterations - 1)["loss"]).detach()
            )
        info["final_objective"] = last
        if math.isfinite(last) and last <= best_loss:
            best, info["best_iteration"] = (
                x.detach().clone(),
                len(history.get("loss", [])),
            )
    final = x.detach() if best is None else best
    return AttackResult(
        images=view(final).cpu(),
        labels=None if labels is None else labels.detach().cpu(),
        history=history,
        snapshots=snapshots,
        info=info,
    )


def _closure(
    objective: Objective,
    x: torch.Tensor,
    t: int,
    variables: list[torch.Tensor],
    signed: bool,
    recorded: dict,
    diagnostics: dict | None,
) -> Callable[[], torch.Tensor]:
    """The step's closure: evaluate the objective, set each variable's ``.grad``, return the loss.

    The first evaluation's terms (without ``"grad"`` and ``"parts"``) go into ``recorded``; a NaN/inf
    variable (before the objective runs) or loss raises :class:`_NonFiniteLoss` before any gradient is set. With ``diagnostics`` (a dict), the
    first evaluation's parts are weighed (:func:`prior_gradients`) into ``diagnostics[str(t)]``.
    """

    def closure() -> torch.Tensor:
        if not all(
            torch.isfinite(v).all() for v in variables
        ):  # e.g. an L-BFGS inner iterate
            raise _NonFiniteLoss
        terms = dict(objective(x, t))
        if "loss" not in terms:
            raise ValueError(
                f"objective must return a dict with a 'loss' entry, got keys {sorted(terms)}"
            )
        if not torch.isfinite(terms["loss"]):
            raise _NonFiniteLoss
        grad, parts = terms.pop("grad", None), terms.pop("parts", None)
        if grad is not None and len(variables) > 1:
            raise ValueError(
                "an objective's 'grad' term cannot be combined with extra_variables"
            )
        if diagnostics is not None and str(t) not in diagnostics:
            if parts is None:
                raise ValueError(
                    "diagnose_at needs an objective that returns 'parts' (see optimise_images)"
                )
            diagnostics[str(t)] = prior_gradients(x, terms["loss"], parts)
        grads = (
            [grad.detach()]
            if grad is not None
            else torch.autograd.grad(terms["loss"], variables)
        )
        for v, g in zip(variables, grads):
            v.grad = (
                signed(g, t)
                if callable(signed) and v is x
                else torch.sign(g)
                if signed
                else g.clone()
            )
        if not recorded:
            recorded.update(terms)
        return terms["loss"].detach()

    return closure


def prior_gradients(
    x: torch.Tensor, loss: torch.Tensor, parts: Mapping[str, torch.Tensor]
) -> dict[str, float]:
    """How each part of an objective pulls on the image ``x`` (DESIGN.md, "Attack strength", item 3).

    Args:
        x: the optimised image ``(B, C, H, W)`` (a leaf requiring grad).
        loss: the whole objective (its graph is kept for the step).
        parts: ``{"matching": the gradient-matching term, prior name: prior × its weight, …}``,
            scalar tensors on the graph of ``x`` (a part without a graph counts 0).

    Returns:
        ``{"<part>": ‖∇_x part‖₂, "<prior>/matching": ‖∇_x prior‖₂ / ‖∇_x matching‖₂,
        "sign_agreement": fraction of entries where sign ∇_x loss = sign ∇_x matching}``.

    Raises:
        ValueError: if ``parts`` has no ``"matching"`` entry.
    """
    if "matching" not in parts:
        raise ValueError(f"parts must hold a 'matching' entry, got {sorted(parts)}")

    def gradient(value: torch.Tensor) -> torch.Tensor:
        if not value.requires_grad:
            return torch.zeros_like(x)
        g = torch.autograd.grad(value, x, retain_graph=True, allow_unused=True)[0]
        return torch.zeros_like(x) if g is None else g

    grads = {name: gradient(value) for name, value in parts.items()}
    norms = {name: float(g.norm()) for name, g in grads.items()}
    out = dict(norms)
    for name in parts:
        if name != "matching":
            out[f"{name}/matching"] = (
                norms[name] / norms["matching"] if norms["matching"] > 0 else math.inf
            )
    total = gradient(loss)
    out["sign_agreement"] = float(
        (torch.sign(total) == torch.sign(grads["matching"])).float().mean()
    )
    return out


def _fingerprint(
    x0: torch.Tensor, extra_variables: Sequence[torch.Tensor], **arguments
) -> dict:
    """What a checkpoint of this call must match: the loop's arguments and digests of its start."""

    def plain(value):
        if isinstance(value, torch.Tensor):
            return tensor_digest(value)
        if isinstance(value, (set, frozenset)):
            return sorted(value)
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if callable(value):
            return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__name__)}"
        return value

    return {
        "start": tensor_digest(x0),
        "extra": [tensor_digest(v) for v in extra_variables],
        **{name: plain(value) for name, value in arguments.items()},
    }


def _schedule_digest(
    lr_schedule: SchedulerFactory | None, lr: float, iterations: int
) -> str:
    """sha256 (16 hex) of the learning rate at every iteration that ``lr_schedule`` gives (run on a
    throwaway optimiser): two factories with the same rates are the same schedule."""
    probe = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([probe], lr=lr)
    scheduler = lr_schedule(optimizer) if lr_schedule else None
    rates = []
    for _ in range(iterations):
        rates.append(optimizer.param_groups[0]["lr"])
        if scheduler is not None:
            optimizer.step()
            scheduler.step()
    return hashlib.sha256(repr(rates).encode()).hexdigest()[:16]


def _objective_at(
    objective: Objective, x0: torch.Tensor, extra_variables: Sequence[torch.Tensor]
) -> str:
    """The objective's loss at the start (6 significant digits): a checkpoint of another objective,
    target or model is refused. The objective's own state (e.g. its dropout generator) is restored after."""
    saved = objective.state_dict() if hasattr(objective, "state_dict") else None
    try:
        with torch.enable_grad():
            terms = objective(x0.detach().clone().requires_grad_(True), 0)
        return f"{float(torch.as_tensor(terms['loss']).detach()):.6g}"
    finally:
        if saved is not None:
            objective.load_state_dict(saved)


def _record(history: dict[str, list], t: int, lr: float, terms: Mapping) -> None:
    """Append iteration ``t``'s values (tensors kept detached; turned into floats once, at the end)."""
    for key, value in (("iteration", t), ("lr", lr), *terms.items()):
        history.setdefault(key, []).append(
            value.detach() if isinstance(value, torch.Tensor) else value
        )


def _plain(values: list) -> list:
    """Floats (ints kept) from a history list whose entries may be detached scalar tensors."""
    if values and all(isinstance(v, torch.Tensor) for v in values):
        return [float(v) for v in torch.stack(values).cpu().tolist()]
    return [
        float(v)
        if isinstance(v, torch.Tensor)
        else v
        if isinstance(v, int)
        else float(v)
        for v in values
    ]


def seeded_start(
    shape: Sequence[int], seed: int, device: torch.device
) -> tuple[torch.Tensor, torch.Generator]:
    """``(x_0, generator)``: the common initial noise for ``seed`` and the generator, for later draws."""
    generator = make_generator(seed, device)
    return initial_images(shape, generator), generator
