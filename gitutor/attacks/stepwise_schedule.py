"""When stepwise GradInversion matches which tensors, and when its priors and lr steps come in.

Ye et al., AAAI 2024, Stage II (Eq. 9–12) and the authors' schedule for ResNet34, scaled to any
budget and network depth. The numbers come from the authors' code (``MiLab-HITSZ/2023YeHFGradInv``,
``breaching/config/attack/our_res34_pretrained.yaml`` and
``breaching/attacks/auxiliaries/objectives.py:516–560``); the paper states only T1, T2 and T.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from gitutor.attacks.inverting_gradients import step_milestones

#: The authors' schedule for ResNet34 (110 parameter tensors) and 15 000 iterations, 0-based tensor
#: indices: their config's ``start: 100``, ``min_start: 25`` are 1-based (objectives.py:549 tests
#: ``start <= count + 1``), i.e. ``layer4.1.conv2.weight`` (99) and ``layer2.0.conv2.weight`` (24).
PAPER_ITERATIONS = 15_000
PAPER_TENSORS = 110
PAPER_START, PAPER_FLOOR, PAPER_STEP, PAPER_INTERVAL = 99, 24, 10, 500
PAPER_T1, PAPER_T2 = 3_000, 5_000
PAPER_LR_FRACTIONS, PAPER_LR_GAMMA = (3 / 8, 5 / 8, 7 / 8), 0.33
#: The authors' lr steps: ``MultiStepLR`` at ``T // 2.667``, ``T // 1.6``, ``T // 1.142``
#: (breaching/attacks/auxiliaries/common.py:26–28): 5 624, 9 374, 13 134 for T = 15 000 (floor
#: division of floats: 15000 // 1.6 is 9374.0).
AUTHORS_LR_DIVISORS = (2.667, 1.6, 1.142)
#: The authors' floor sits this many tensors into the second residual stage (conv1.weight,
#: bn1.weight, bn1.bias of its first block are never matched).
AUTHORS_FLOOR_OFFSET = 3


def stage_floor(model: nn.Module, offset: int = AUTHORS_FLOOR_OFFSET) -> int:
    """The authors' floor placed by structure: ``offset`` tensors after the start of the second stage.

    The second stage starts at the first parameter of the first convolution with a stride > 1
    that is not the network's first convolution (the stem): ``layer2.0.conv1`` of a torchvision
    ResNet, ``layers.1.0.conv1`` of :func:`gitutor.models.cifar_resnet18`. On ResNet34 this gives
    21 + 3 = 24, the authors' ``min_start: 25`` (1-based); scaling 24 by depth instead (what
    :meth:`StepwiseSchedule.paper` does without ``floor``) lands inside the first residual stage on
    shallower networks (14 on the 62-tensor CIFAR ResNet-18), which the paper never matches
    ("we do not use block 1", §Experiments, Using Different Layers).

    Returns:
        A 0-based index into ``list(model.parameters())``.

    Raises:
        ValueError: if the model has no strided convolution after its first one, or the index
            would pass the last parameter.
    """
    index = {id(p): i for i, p in enumerate(model.parameters())}
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    for conv in convs[1:]:
        if max(conv.stride) > 1:
            floor = index[id(conv.weight)] + offset
            if floor >= len(index):
                break
            return floor
    raise ValueError(
        "stage_floor needs a network with a strided convolution after its stem "
        "(a ResNet's second stage); pass floor= to StepwiseSchedule.paper instead"
    )


@dataclass(frozen=True)
class StepwiseSchedule:
    """When each parameter tensor, each image prior and each learning-rate step comes in.

    Iterations are zero-based, ``t = 0 … iterations − 1``. At iteration ``t`` the matched tensors
    are ``start_index(t) … num_tensors − 1`` (indices into ``list(model.parameters())``), with

        start_index(t) = max(floor, start − step · ⌊(t + offset) / interval⌋),

    TV is on for ``t ≥ t1``, R_BN for ``t ≥ t2`` (Ye et al. λ_tv(t) = 𝕀[t > T1] λ̂_tv, λ_BN likewise;
    the authors' code: ``iter < tv_start`` off, regularizers.py:134), and the learning rate is
    multiplied by ``lr_gamma`` at every milestone passed. ``offset`` shifts the start steps earlier:
    with ``offset = 1`` (the authors' code, objectives.py:541–543, which tests ``(iter + 1) %
    period`` before matching) the start index steps down at t = 499, 999, … instead of 500, 1000, ….

    Build it with :meth:`paper` (the authors' schedule scaled to any budget and network),
    :meth:`all_tensors` (GradInversion: everything from the start) or :meth:`fixed`.

    Raises:
        ValueError: (on construction) if ``0 ≤ floor ≤ start`` fails, ``step < 0``,
            ``interval < 1``, ``t1``/``t2``/milestones lie outside ``[0, iterations]``,
            ``lr_gamma`` is not in (0, 1], or ``offset`` is not in ``[0, interval)``.
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
    offset: int = 0

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ValueError(f"iterations must be ≥ 1, got {self.iterations}")
        if not 0 <= self.floor <= self.start:
            raise ValueError(
                f"need 0 ≤ floor ≤ start, got floor={self.floor}, start={self.start}"
            )
        if self.step < 0 or self.interval < 1:
            raise ValueError(
                f"need step ≥ 0 and interval ≥ 1, got step={self.step}, interval={self.interval}"
            )
        for name, value in (
            ("t1", self.t1),
            ("t2", self.t2),
            *(("lr milestone", m) for m in self.lr_milestones),
        ):
            if not 0 <= value <= self.iterations:
                raise ValueError(
                    f"{name}={value} must lie in [0, iterations={self.iterations}]"
                )
        if not 0 < self.lr_gamma <= 1:
            raise ValueError(f"lr_gamma must be in (0, 1], got {self.lr_gamma}")
        if not 0 <= self.offset < self.interval:
            raise ValueError(
                f"offset must be in [0, interval={self.interval}), got {self.offset}"
            )

    @classmethod
    def paper(
        cls,
        iterations: int = PAPER_ITERATIONS,
        num_tensors: int = PAPER_TENSORS,
        *,
        t1: int = PAPER_T1,
        t2: int = PAPER_T2,
        floor: int | None = None,
        authors_timing: bool = False,
    ) -> "StepwiseSchedule":
        """The authors' schedule, scaled to ``iterations`` and to a network of ``num_tensors``.

        For ResNet34 (110 tensors) and 15 000 iterations it is start 99, 10 tensors shallower
        every 500 iterations, floor 24 (0-based; never the first residual block), TV from
        T1 = 3000, R_BN from T2 = 5000 (paper), lr × 0.33 at 3/8, 5/8, 7/8 of the budget.
        Iteration counts (interval, T1, T2, milestones) scale with ``iterations / 15000`` and
        tensor counts (start, floor, step) with ``num_tensors / 110``, so a short run walks
        through the same phases. ``t1``/``t2`` are given in paper iterations (out of 15 000) and
        scaled likewise. ``floor``: an explicit floor index instead of the scaled one (use
        :func:`stage_floor` on networks other than ResNet34). ``authors_timing``: the authors'
        exact timing — start steps at t = 499, 999, … (``offset = 1``) and lr steps at
        ``T // 2.667``, ``T // 1.6``, ``T // 1.142`` (5 624, 9 374, 13 134 for T = 15 000) instead
        of 5 625, 9 375, 13 125.

        Raises:
            ValueError: if ``iterations < 1``, ``num_tensors < 2`` or ``floor`` is outside
                ``[0, start]`` (the scaled start).
        """
        if iterations < 1 or num_tensors < 2:
            raise ValueError(
                f"need iterations ≥ 1 and num_tensors ≥ 2, got {iterations}, {num_tensors}"
            )
        time_scale, depth_scale = (
            iterations / PAPER_ITERATIONS,
            num_tensors / PAPER_TENSORS,
        )
        start = min(num_tensors - 1, round(PAPER_START * depth_scale))
        floor = min(start, round(PAPER_FLOOR * depth_scale)) if floor is None else floor
        interval = max(1, round(PAPER_INTERVAL * time_scale))
        milestones = (
            tuple(int(iterations // d) for d in AUTHORS_LR_DIVISORS)
            if authors_timing
            else tuple(step_milestones(iterations, PAPER_LR_FRACTIONS))
        )
        return cls(
            iterations=iterations,
            start=start,
            floor=floor,
            step=max(1, round(PAPER_STEP * depth_scale)),
            interval=interval,
            t1=min(iterations, round(t1 * time_scale)),
            t2=min(iterations, round(t2 * time_scale)),
            lr_milestones=milestones,
            offset=1 if authors_timing and interval > 1 else 0,
        )

    @classmethod
    def fixed(
        cls,
        iterations: int,
        start: int,
        *,
        t1: int = 0,
        t2: int = 0,
        lr_fractions: tuple[float, ...] = PAPER_LR_FRACTIONS,
        lr_gamma: float = PAPER_LR_GAMMA,
    ) -> "StepwiseSchedule":
        """Match tensors ``start …`` at every iteration (no stepping), priors from ``t1``/``t2``."""
        return cls(
            iterations=iterations,
            start=start,
            floor=start,
            step=0,
            interval=1,
            t1=t1,
            t2=t2,
            lr_milestones=tuple(step_milestones(iterations, lr_fractions)),
            lr_gamma=lr_gamma,
        )

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
        return max(
            self.floor, self.start - self.step * ((t + self.offset) // self.interval)
        )

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
