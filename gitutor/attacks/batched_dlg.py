"""DLG (Zhu et al. 2019, Algorithm 1) on P independent problems at once, for studies that need many seeds
or many images on a CPU (:mod:`gitutor.attacks.stacked_lenet` stacks the P LeNets into one network).

Each problem p is what ``dlg(models[p], targets[p], (1, C, H, W), K, seed=seeds[p], labels=...)`` solves:
the same N(0, 1) dummy image and label logits drawn from ``seeds[p]``, the same squared-L2 gradient
distance, and torch's L-BFGS without line search (the DLG code: lr 1, ``max_iter`` 20, ``max_eval`` 25,
``tolerance_grad`` 1e-7, ``tolerance_change`` 1e-9, ``history_size`` 100), but with one L-BFGS state
per problem: every dot product, curvature pair, step length and stopping test of
``torch.optim.LBFGS.step`` is taken per problem, so the problems do not mix. Only the order of
floating-point sums differs from P separate runs, so iterates agree to rounding at first and may part
later where DLG is chaotic (a seed on the edge between success and failure). Per problem, as
:func:`gitutor.attacks.loop.optimise_images` does: a step that leaves the dummy unchanged is a fixed
point (``info["converged_at"]``, history and snapshots filled), ``stop_loss`` ends a problem
(``info["stopped_at"]``), a NaN/inf loss restores the state before the step (``info["stopped_early"]``).

Only chapter 07 runs it (its comparison attacks 10 images per data kind with five DLG variants, where one
``dlg`` per problem costs several times the CPU budget); chapter 01 runs :func:`gitutor.attacks.dlg`.
In float32 a run here and the same problem in ``dlg`` need not end alike: DLG is chaotic (one ulp on the
target changes the loss after two steps by more than 10 %, ``tests/test_dlg.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from gitutor.attacks import stacked_lenet as stacked
from gitutor.attacks.loop import check_count, check_hyperparameter
from gitutor.attacks.result import AttackResult
from gitutor.checks import check_seeds, check_sizes
from gitutor.seeding import make_generator

MAX_ITER, MAX_EVAL, TOL_GRAD, TOL_CHANGE, HISTORY = 20, 25, 1e-7, 1e-9, 100


class _Problems:
    """The P dummies as one ``(P, D)`` variable and the per-problem distance and its gradient."""

    def __init__(self, models, targets, shape, num_classes, labels, seeds, device):
        self.params = [
            p.to(device).requires_grad_(True)
            for p in stacked.stacked_parameters(models)
        ]
        dtype = self.params[0].dtype
        self.targets = [
            t.to(device, dtype)
            for t in stacked.stack([[g.detach() for g in t] for t in targets])
        ]
        self.P, self.shape, self.K, self.labels = (
            len(models),
            tuple(shape),
            num_classes,
            labels,
        )
        starts = []
        for seed in seeds:
            generator = make_generator(seed, device)
            x = (
                torch.randn((1, *shape), generator=generator, device=device)
                .flatten()
                .to(dtype)
            )
            y = (
                torch.randn((1, num_classes), generator=generator, device=device)
                .flatten()
                .to(dtype)
            )
            starts.append(x if labels is not None else torch.cat([x, y]))
        self.v = torch.stack(starts)
        self.n_pixels = (
            starts[0].numel() if labels is not None else starts[0].numel() - num_classes
        )

    def split(self, v):
        x = v[:, : self.n_pixels].reshape(self.P, *self.shape)
        soft = (
            self.labels
            if self.labels is not None
            else F.softmax(v[:, self.n_pixels :], dim=-1)
        )
        return x, soft

    def evaluate(self, v, rows: torch.Tensor | None = None):
        """``(distance per problem (P,), its gradient (P, D))`` at ``v``. Only the problems in ``rows`` (a
        boolean mask; default all) are computed, in a stack of just those LeNets; the others get 0."""
        loss, flat = v.new_zeros(self.P), torch.zeros_like(v)
        index = (
            torch.arange(self.P, device=v.device)
            if rows is None
            else rows.nonzero().flatten()
        )
        if len(index) == 0:
            return loss, flat
        if len(index) == self.P:
            params, targets = self.params, self.targets
        else:
            params = [
                _rows(p, index, self.P).detach().requires_grad_(True)
                for p in self.params
            ]
            targets = [_rows(t, index, self.P) for t in self.targets]
        live = v[index].detach().requires_grad_(True)
        x = live[:, : self.n_pixels].reshape(len(index), *self.shape)
        soft = (
            self.labels[index]
            if self.labels is not None
            else F.softmax(live[:, self.n_pixels :], dim=-1)
        )
        grads = stacked.gradients(params, x, soft, create_graph=True)
        distance = sum(
            stacked.per_problem((g - t) ** 2, len(index)).sum(1)
            for g, t in zip(grads, targets)
        )
        loss[index] = distance.detach()
        flat[index] = torch.autograd.grad(distance.sum(), live)[0].detach()
        return loss, flat


def _rows(
    stacked_tensor: torch.Tensor, index: torch.Tensor, count: int
) -> torch.Tensor:
    """The problems ``index`` of a stacked tensor (``count`` problems), still in the stacked layout."""
    return (
        stacked_tensor.reshape(count, -1, *stacked_tensor.shape[1:])[index].reshape(
            -1, *stacked_tensor.shape[1:]
        )
        if stacked_tensor.shape[0] != count
        else stacked_tensor[index]
    )


def _dot(a, b):
    return (a * b).sum(1)


def batched_dlg(
    models: Sequence,
    targets: Sequence[Sequence[torch.Tensor]],
    input_shape: Sequence[int],
    num_classes: int,
    *,
    seeds: Sequence[int],
    labels: torch.Tensor | None = None,
    iterations: int = 300,
    record_every: int = 10,
    stop_loss: float | None = None,
    lr: float = 1.0,
) -> list[AttackResult]:
    """DLG on P problems, one :class:`AttackResult` per problem (see the module docstring).

    Args:
        models: P DLG LeNets (Sigmoid, last-layer bias, one architecture), e.g. one per seed or P times
            the same model.
        targets: P observed gradients (or pseudo-gradients such as −Δ/η), each aligned with
            ``LeNet.parameters()``.
        input_shape: ``(C, H, W)`` of one private image (batch size 1 per problem).
        num_classes: K, the LeNets' output width.
        seeds: P seeds of the dummy starts (``dlg``'s ``seed``).
        labels: ``(P,)`` int64 labels to fix (the iDLG setting) or None to optimise dummy label logits.
        iterations: L-BFGS steps; record_every: snapshot period; stop_loss: as ``dlg``; lr: L-BFGS lr.

    Returns:
        One result per problem: ``images`` ``(1, C, H, W)`` (unclamped), ``labels`` ``(1,)``,
        ``history["loss"]`` (distance before every step), snapshots and ``info``.

    Raises:
        TypeError: for ``seeds`` that is not a sequence of ints (``seeds=0``: give ``[0]``) or a
            non-int entry of ``input_shape``.
        ValueError: for mismatched counts, a bad ``input_shape``, labels of the wrong shape or range,
            ``iterations``/``record_every`` < 1, non-positive ``lr``/``stop_loss``, or models that are not
            DLG LeNets of one architecture.
    """
    count = len(models)
    seeds = check_seeds(seeds, count)
    if not len(targets) == count or count < 1:
        raise ValueError(
            f"models and targets must have the same length ≥ 1, got {count}, {len(targets)}"
        )
    if len(input_shape) != 3:
        raise ValueError(
            f"input_shape must be (C, H, W) of one image, got {tuple(input_shape)}"
        )
    check_sizes(**{f"input_shape[{i}]": size for i, size in enumerate(input_shape)})
    if labels is not None and (
        labels.shape != (count,)
        or labels.dtype != torch.int64
        or not ((labels >= 0) & (labels < num_classes)).all()
    ):
        raise ValueError(
            f"labels must be ({count},) int64 in [0, {num_classes}), got {labels}"
        )
    check_count(iterations, "iterations"), check_count(record_every, "record_every")
    lr = check_hyperparameter(lr, "lr", positive=True)
    if stop_loss is not None:
        stop_loss = check_hyperparameter(stop_loss, "stop_loss", positive=True)
    device = next(models[0].parameters()).device
    problems = _Problems(
        models, targets, input_shape, num_classes, labels, seeds, device
    )
    state = _State(problems.v)
    live = torch.ones(count, dtype=torch.bool, device=device)
    history = [[] for _ in range(count)]
    snapshots = [
        [(0, problems.split(problems.v)[0][p : p + 1].detach().cpu().clone())]
        for p in range(count)
    ]
    info = [{} for _ in range(count)]
    for t in range(iterations):
        before = problems.v.clone()
        loss = _lbfgs_step(problems, state, live, lr)
        for p in live.nonzero().flatten().tolist():
            if not torch.isfinite(loss[p]) or not torch.isfinite(problems.v[p]).all():
                problems.v[p] = before[p]
                info[p]["stopped_early"] = (
                    f"non-finite loss or variables at iteration {t}"
                )
                live[p] = False
                continue
            history[p].append(float(loss[p]))
            unchanged = torch.equal(problems.v[p], before[p])
            stop = stop_loss is not None and float(loss[p]) < stop_loss
            if (t + 1) % record_every == 0 or t + 1 == iterations or stop:
                snapshots[p].append(
                    (
                        t + 1,
                        problems.split(problems.v)[0][p : p + 1].detach().cpu().clone(),
                    )
                )
            if stop:
                info[p]["stopped_at"], live[p] = t + 1, False
            elif unchanged:
                info[p]["converged_at"], live[p] = t + 1, False
                fixed = problems.split(problems.v)[0][p : p + 1].detach().cpu().clone()
                if not snapshots[p] or snapshots[p][-1][0] != t + 1:
                    snapshots[p].append(
                        (t + 1, fixed)
                    )  # the iterate from here to the end
                for later in range(t + 1, iterations):
                    history[p].append(history[p][-1])
                    if (later + 1) % record_every == 0 or later + 1 == iterations:
                        snapshots[p].append((later + 1, fixed))
        if not live.any():
            break
    x, soft = problems.split(problems.v)
    found = labels if labels is not None else soft.argmax(dim=-1)
    return [
        AttackResult(
            images=x[p : p + 1].detach().cpu(),
            labels=found[p : p + 1].detach().cpu(),
            history={
                "iteration": list(range(len(history[p]))),
                "lr": [lr] * len(history[p]),
                "loss": history[p],
            },
            snapshots=snapshots[p],
            info=info[p],
        )
        for p in range(count)
    ]


class _State:
    """torch.optim.LBFGS's state, one row per problem (histories as ``(P, HISTORY, D)`` with counts)."""

    def __init__(self, v):
        count, dim = v.shape
        self.n_iter = torch.zeros(count, dtype=torch.long, device=v.device)
        self.d, self.t = torch.zeros_like(v), v.new_zeros(count)
        self.S = v.new_zeros(count, HISTORY, dim)
        self.Y = torch.zeros_like(self.S)
        self.rho = v.new_zeros(count, HISTORY)
        self.size = torch.zeros(count, dtype=torch.long, device=v.device)
        self.h_diag = v.new_ones(count)
        self.prev_grad, self.prev_loss = torch.zeros_like(v), v.new_zeros(count)

    def push(self, mask, s, y, ys):
        """Append the curvature pair (s, y) of the problems in ``mask``, dropping their oldest when full."""
        full = mask & (self.size == HISTORY)
        if full.any():
            self.S[full], self.Y[full], self.rho[full] = (
                self.S[full].roll(-1, 1),
                self.Y[full].roll(-1, 1),
                self.rho[full].roll(-1, 1),
            )
            self.size[full] -= 1
        rows = mask.nonzero().flatten()
        slots = self.size[rows]
        self.S[rows, slots], self.Y[rows, slots], self.rho[rows, slots] = (
            s[rows],
            y[rows],
            1.0 / ys[rows],
        )
        self.size[rows] += 1
        self.h_diag[rows] = ys[rows] / _dot(y, y)[rows]

    def direction(self, grad):
        """The two-loop recursion for every problem: −H·grad with its own history."""
        q, al = -grad, torch.zeros_like(self.rho)
        for i in range(int(self.size.max()) - 1, -1, -1):
            valid = (i < self.size).to(grad.dtype)
            al[:, i] = _dot(self.S[:, i], q) * self.rho[:, i] * valid
            q = q - al[:, i, None] * self.Y[:, i]
        r = q * self.h_diag[:, None]
        for i in range(int(self.size.max())):
            valid = (i < self.size).to(grad.dtype)
            beta = _dot(self.Y[:, i], r) * self.rho[:, i]
            r = r + ((al[:, i] - beta) * valid)[:, None] * self.S[:, i]
        return r


def _lbfgs_step(
    problems: _Problems, state: _State, live: torch.Tensor, lr: float
) -> torch.Tensor:
    """One ``LBFGS.step(closure)`` (no line search) for every live problem; returns the loss at the start."""
    loss, grad = problems.evaluate(problems.v, live)
    orig_loss = loss.clone()
    finite = torch.isfinite(loss) & torch.isfinite(grad).all(1)
    active = live & finite & ~(grad.abs().amax(1) <= TOL_GRAD)
    evals = torch.ones_like(state.n_iter)
    for n_iter in range(1, MAX_ITER + 1):
        if not active.any():
            break
        state.n_iter += active.long()
        first, rest = active & (state.n_iter == 1), active & (state.n_iter > 1)
        if first.any():
            state.d[first], state.size[first], state.h_diag[first] = (
                -grad[first],
                0,
                1.0,
            )
        if rest.any():
            y, s = grad - state.prev_grad, state.d * state.t[:, None]
            ys = _dot(y, s)
            state.push(rest & (ys > 1e-10), s, y, ys)
            state.d[rest] = state.direction(grad)[rest]
        state.prev_grad[active], state.prev_loss[active] = grad[active], loss[active]
        steps = torch.where(
            first,
            torch.clamp(1.0 / grad.abs().sum(1), max=1.0) * lr,
            torch.full_like(loss, lr),
        )
        state.t[active] = steps[active]
        active = active & ~(_dot(grad, state.d) > -TOL_CHANGE)
        problems.v[active] += state.t[active, None] * state.d[active]
        if n_iter == MAX_ITER:
            break
        new_loss, new_grad = problems.evaluate(problems.v, active)
        loss[active], grad[active] = new_loss[active], new_grad[active]
        evals += active.long()
        finite = torch.isfinite(new_loss) & torch.isfinite(new_grad).all(1)
        done = (
            ~finite
            | (evals >= MAX_EVAL)
            | (grad.abs().amax(1) <= TOL_GRAD)
            | ((state.d * state.t[:, None]).abs().amax(1) <= TOL_CHANGE)
            | ((loss - state.prev_loss).abs() < TOL_CHANGE)
        )
        loss[active & ~finite] = float("nan")
        orig_loss[active & ~finite] = float(
            "nan"
        )  # the step is abandoned and restored by the caller
        active = active & ~done
    return orig_loss
