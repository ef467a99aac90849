"""Stepwise GradInversion (Ye et al., AAAI 2024, Stage II, Eq. 9–12).

The attacker knows the model, the labels (Stage I, or given) and the shared gradient of one
batch. It optimises a candidate batch x' so that its gradient matches the shared one, but

* matches only the parameter tensors from a *start index* to the last one (Eq. 9: the gradient
  of a layer depends only on that layer's input, so deep features can be fitted first); the
  start index moves from the deepest tensors towards the input at a fixed interval and stops at a
  floor that never reaches the first residual block (:class:`StepwiseSchedule`);
* drops a fresh random 30 % of the matched gradient entries every step, the same entries in the
  candidate and the shared gradient (Eq. 10, "gradient dropout" against content offset);
* adds the image priors late: TV with β = 2 from iteration T1 and R_BN from T2 (Eq. 11);
* updates x' with Adam on the sign of its gradient, a step learning rate, and clamps to the
  pixel box after each step (Eq. 12).

:func:`stepwise_inversion` is also the loop behind GradInversion (all tensors, no dropout, priors
from the start; see :mod:`gitutor.attacks.gradinversion`) and the ablations of Table 2.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from tqdm.auto import tqdm

from gitutor.attacks.bn_prior import BatchNormPrior
from gitutor.attacks.inverting_gradients import step_milestones
from gitutor.attacks.objectives import (check_input_shape, check_target_gradients, cosine_gradient_distance,
                                        gradient_l2_distance, total_variation)
from gitutor.attacks.result import AttackResult
from gitutor.federated.client import cross_entropy
from gitutor.seeding import make_generator

#: The authors' schedule for ResNet34 (110 parameter tensors) and 15 000 iterations.
PAPER_ITERATIONS = 15_000
PAPER_TENSORS = 110
PAPER_START, PAPER_FLOOR, PAPER_STEP, PAPER_INTERVAL = 100, 25, 10, 500
PAPER_T1, PAPER_T2 = 3_000, 5_000
PAPER_LR_FRACTIONS, PAPER_LR_GAMMA = (3 / 8, 5 / 8, 7 / 8), 0.33
DISTANCES = ("cosine", "l2")


@dataclass(frozen=True)
class StepwiseSchedule:
    """When each parameter tensor, each image prior and each learning-rate step comes in.

    Iterations are zero-based, ``t = 0 … iterations − 1``. At iteration ``t`` the matched tensors
    are ``start_index(t) … num_tensors − 1`` (indices into ``list(model.parameters())``), with

        start_index(t) = max(floor, start − step · ⌊t / interval⌋),

    TV is on for ``t ≥ t1``, R_BN for ``t ≥ t2`` (Ye et al. λ_tv(t) = 𝕀[t > T1] λ̂_tv, λ_BN likewise),
    and the learning rate is multiplied by ``lr_gamma`` at every milestone passed.

    Build it with :meth:`paper` (the authors' schedule scaled to any budget and network),
    :meth:`all_tensors` (GradInversion: everything from the start) or :meth:`fixed`.

    Raises:
        ValueError: (on construction) if ``0 ≤ floor ≤ start`` fails, ``step < 0``,
            ``interval < 1``, ``t1``/``t2``/milestones lie outside ``[0, iterations]``, or
            ``lr_gamma`` is not in (0, 1].
    """

    iterations: int
    start: int
    floor: int
    step: int
    interval: int
    t1: int
    t2: int
    lr_milestones: tuple[int, ...] = ()
    lr_gamma: float = PAPER_LR_GAMMA

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ValueError(f"iterations must be ≥ 1, got {self.iterations}")
        if not 0 <= self.floor <= self.start:
            raise ValueError(f"need 0 ≤ floor ≤ start, got floor={self.floor}, start={self.start}")
        if self.step < 0 or self.interval < 1:
            raise ValueError(f"need step ≥ 0 and interval ≥ 1, got step={self.step}, interval={self.interval}")
        for name, value in (("t1", self.t1), ("t2", self.t2), *(("lr milestone", m) for m in self.lr_milestones)):
            if not 0 <= value <= self.iterations:
                raise ValueError(f"{name}={value} must lie in [0, iterations={self.iterations}]")
        if not 0 < self.lr_gamma <= 1:
            raise ValueError(f"lr_gamma must be in (0, 1], got {self.lr_gamma}")

    @classmethod
    def paper(cls, iterations: int = PAPER_ITERATIONS, num_tensors: int = PAPER_TENSORS, *,
              t1: int = PAPER_T1, t2: int = PAPER_T2) -> "StepwiseSchedule":
        """The authors' schedule, scaled to ``iterations`` and to a network of ``num_tensors``.

        For ResNet34 (110 tensors) and 15 000 iterations it is start 100, 10 tensors shallower
        every 500 iterations, floor 25 (never the first residual block), TV from T1 = 3000,
        R_BN from T2 = 5000, lr × 0.33 at 3/8, 5/8, 7/8 of the budget. Iteration counts
        (interval, T1, T2, milestones) scale with ``iterations / 15000`` and tensor counts
        (start, floor, step) with ``num_tensors / 110``, so a short run walks through the same
        phases. ``t1``/``t2`` are given in paper iterations (out of 15 000) and scaled likewise.

        Raises:
            ValueError: if ``iterations < 1`` or ``num_tensors < 2``.
        """
        if iterations < 1 or num_tensors < 2:
            raise ValueError(f"need iterations ≥ 1 and num_tensors ≥ 2, got {iterations}, {num_tensors}")
        time_scale, depth_scale = iterations / PAPER_ITERATIONS, num_tensors / PAPER_TENSORS
        start = min(num_tensors - 1, round(PAPER_START * depth_scale))
        return cls(iterations=iterations, start=start,
                   floor=min(start, round(PAPER_FLOOR * depth_scale)),
                   step=max(1, round(PAPER_STEP * depth_scale)),
                   interval=max(1, round(PAPER_INTERVAL * time_scale)),
                   t1=min(iterations, round(t1 * time_scale)), t2=min(iterations, round(t2 * time_scale)),
                   lr_milestones=tuple(step_milestones(iterations, PAPER_LR_FRACTIONS)))

    @classmethod
    def fixed(cls, iterations: int, start: int, *, t1: int = 0, t2: int = 0,
              lr_fractions: tuple[float, ...] = PAPER_LR_FRACTIONS,
              lr_gamma: float = PAPER_LR_GAMMA) -> "StepwiseSchedule":
        """Match tensors ``start …`` at every iteration (no stepping), priors from ``t1``/``t2``."""
        return cls(iterations=iterations, start=start, floor=start, step=0, interval=1, t1=t1, t2=t2,
                   lr_milestones=tuple(step_milestones(iterations, lr_fractions)), lr_gamma=lr_gamma)

    @classmethod
    def all_tensors(cls, iterations: int, **kwargs) -> "StepwiseSchedule":
        """Every tensor and both priors from iteration 0 (GradInversion, Yin et al. 2021)."""
        return cls.fixed(iterations, 0, **kwargs)

    def start_index(self, t: int) -> int:
        """First matched parameter-tensor index at iteration ``t`` (see the class docstring).

        Raises:
            ValueError: if ``t`` is outside ``[0, iterations]``.
        """
        self._check_time(t)
        return max(self.floor, self.start - self.step * (t // self.interval))

    def tv_active(self, t: int) -> bool:
        """Whether TV (Eq. 11) is on at iteration ``t``."""
        self._check_time(t)
        return t >= self.t1

    def bn_active(self, t: int) -> bool:
        """Whether R_BN (Eq. 11) is on at iteration ``t``."""
        self._check_time(t)
        return t >= self.t2

    def lr_factor(self, t: int) -> float:
        """Multiplier of the base learning rate η at iteration ``t`` (step schedule of Eq. 12)."""
        self._check_time(t)
        return self.lr_gamma ** sum(t >= m for m in self.lr_milestones)

    def _check_time(self, t: int) -> None:
        if not 0 <= t <= self.iterations:
            raise ValueError(f"iteration t={t} is outside [0, {self.iterations}]")


def gradient_dropout_masks(grads: list[torch.Tensor], rate: float,
                           generator: torch.Generator) -> list[torch.Tensor]:
    """Fresh Bernoulli keep-masks for gradient dropout (Ye et al. Eq. 10).

    Each entry is kept (1.0) with probability ``1 − rate`` and dropped (0.0) otherwise,
    independently; the notebook and tests check the statistics. No 1/(1 − rate) rescaling: the
    cosine distance does not see a common scale.

    Returns:
        One float mask per tensor of ``grads``, same shape, dtype and device.

    Raises:
        ValueError: if ``rate`` is not in [0, 1).
    """
    if not 0 <= rate < 1:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    return [(torch.rand(g.shape, generator=generator, device=g.device) >= rate).to(g.dtype) for g in grads]


def stepwise_inversion(model: nn.Module, target_grads: list[torch.Tensor], labels: torch.Tensor,
                       input_shape: tuple[int, int, int, int], *, iterations: int,
                       schedule: StepwiseSchedule | None = None, dropout: float = 0.3,
                       tv_weight: float = 0.01, bn_weight: float = 1e-4, lr: float = 0.1,
                       distance: str = "cosine", seed: int = 0, record_every: int = 50,
                       progress: bool = False) -> AttackResult:
    """Stepwise gradient inversion (Ye et al., AAAI 2024, Stage II, Eq. 10–12).

    Minimises, over a candidate batch x' in [0, 1],

        1 − cos(M_t ⊙ ∇W'_{≥s(t)}, M_t ⊙ ∇W_{≥s(t)}) + 𝕀[t ≥ T1] λ_tv R_tv(x') + 𝕀[t ≥ T2] λ_BN R_BN(x'),

    where s(t) is ``schedule.start_index(t)``, M_t a fresh dropout mask (keep probability
    1 − ``dropout``, the same mask on both gradients), R_tv the TV of Eq. 11 with β = 2 and R_BN
    the BatchNorm-statistics prior. The update is Adam on sign(∇_x') with learning rate
    η(t) = ``lr`` · ``schedule.lr_factor(t)``, then x' is clamped to [0, 1] (Eq. 12).

    The model is used as is (the paper attacks a pretrained ResNet34 in eval mode, so the shared
    gradient and R_BN both use the stored running statistics).

    Args:
        model: the attacked network; its parameters are not changed.
        target_grads: the shared gradient, one tensor per ``model.parameters()`` entry.
        labels: ``(B,)`` int64 labels of the batch (recovered in Stage I, or known).
        input_shape: ``(B, C, H, W)`` of the batch.
        iterations: number of optimisation steps T.
        schedule: a :class:`StepwiseSchedule` with ``iterations`` steps; default
            ``StepwiseSchedule.paper(iterations, num_tensors)``.
        dropout: gradient dropout rate in [0, 1) (paper: 0.3; 0 switches it off).
        tv_weight: λ̂_tv (paper: 0.01).
        bn_weight: λ̂_BN (paper: 1e-4); 0 switches R_BN off (and needs no BatchNorm).
        lr: base learning rate η (paper: 0.1).
        distance: ``"cosine"`` (Eq. 10) or ``"l2"`` (squared Euclidean, DLG/Yin et al. option).
        seed: seeds the initial noise x'_0 = clamp(N(0, 1), 0, 1) (the same draw as
            ``inverting_gradients`` with this seed) and then the dropout masks.
        record_every: history and snapshot period (snapshots also at T1, T2 and the end).
        progress: show a tqdm progress bar.

    Returns:
        :class:`AttackResult` with ``images`` ``(B, C, H, W)`` in [0, 1] (detached, CPU),
        ``labels``, ``history`` keys ``iteration``, ``loss``, ``gradient_distance``, ``tv``,
        ``r_bn``, ``start_index``, ``lr`` and ``snapshots`` ``[(iteration, images)]``
        (iteration 0 is the initial noise).

    Raises:
        ValueError: on mismatched gradient shapes or counts, NaN gradients, labels that do not
            match the batch size, a schedule for another budget or deeper than the model, an
            unknown distance, a dropout rate outside [0, 1), ``iterations < 1`` or
            ``record_every < 1``, or
            ``bn_weight > 0`` with a model in training mode (R_BN would then corrupt the running
            statistics it is compared with).
    """
    parameters = list(model.parameters())
    targets = check_target_gradients(model, target_grads)
    input_shape = check_input_shape(input_shape)
    if labels.shape != (input_shape[0],) or labels.dtype != torch.int64:
        raise ValueError(f"labels must be int64 of shape ({input_shape[0]},), got {labels.dtype} {tuple(labels.shape)}")
    if iterations < 1:
        raise ValueError(f"iterations must be ≥ 1, got {iterations}")
    schedule = schedule or StepwiseSchedule.paper(iterations, len(parameters))
    if schedule.iterations != iterations:
        raise ValueError(f"schedule is for {schedule.iterations} iterations, the attack runs {iterations}; "
                         "build it with StepwiseSchedule.paper(iterations, ...)")
    if schedule.start >= len(parameters):
        raise ValueError(f"schedule starts at tensor {schedule.start} but the model has {len(parameters)} tensors")
    if distance not in DISTANCES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    if bn_weight > 0 and model.training:
        raise ValueError("R_BN needs the model in eval mode (model.eval()), as in Ye et al.; "
                         "or pass bn_weight=0")
    if not 0 <= dropout < 1:
        raise ValueError(f"dropout rate must be in [0, 1), got {dropout}")
    if record_every < 1:
        raise ValueError(f"record_every must be ≥ 1, got {record_every}")

    device = parameters[0].device
    generator = make_generator(seed, device=device)
    x = torch.randn(input_shape, generator=generator, device=device).clamp(0, 1).requires_grad_(True)
    labels = labels.to(device)
    targets = [g.to(device) for g in targets]
    optimizer = torch.optim.Adam([x], lr=lr)
    prior = BatchNormPrior(model) if bn_weight > 0 else None
    match = cosine_gradient_distance if distance == "cosine" else gradient_l2_distance
    history: dict[str, list] = {k: [] for k in ("iteration", "loss", "gradient_distance", "tv", "r_bn",
                                                "start_index", "lr")}
    snapshots = [(0, x.detach().cpu().clone())]
    snapshot_times = {schedule.t1, schedule.t2, iterations}
    try:
        for t in tqdm(range(iterations), disable=not progress, desc="stepwise inversion"):
            start = schedule.start_index(t)
            selected = parameters[start:]
            optimizer.zero_grad(set_to_none=True)
            candidate = torch.autograd.grad(cross_entropy(model(x), labels), selected, create_graph=True)
            target = targets[start:]
            if dropout > 0:
                masks = gradient_dropout_masks(target, dropout, generator)
                candidate = [g * m for g, m in zip(candidate, masks)]
                target = [g * m for g, m in zip(target, masks)]
            grad_term = match(list(candidate), target)
            tv = total_variation(x, beta=2.0)
            r_bn = prior.value() if prior is not None else torch.zeros((), device=device)
            loss = grad_term + tv_weight * schedule.tv_active(t) * tv + bn_weight * schedule.bn_active(t) * r_bn
            loss.backward(inputs=[x])
            x.grad.sign_()
            for group in optimizer.param_groups:
                group["lr"] = lr * schedule.lr_factor(t)
            optimizer.step()
            with torch.no_grad():
                x.clamp_(0.0, 1.0)
            if t % record_every == 0 or t == iterations - 1:
                for key, value in (("iteration", t), ("loss", loss.item()), ("gradient_distance", grad_term.item()),
                                   ("tv", tv.item()), ("r_bn", r_bn.item()), ("start_index", start),
                                   ("lr", lr * schedule.lr_factor(t))):
                    history[key].append(value)
            if (t + 1) % record_every == 0 or (t + 1) in snapshot_times:
                snapshots.append((t + 1, x.detach().cpu().clone()))
    finally:
        if prior is not None:
            prior.remove()
    return AttackResult(images=x.detach().cpu(), labels=labels.cpu(), history=history,
                        snapshots=snapshots)
