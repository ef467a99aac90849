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

import torch
from torch import nn

from gitutor.attacks.bn_prior import BatchNormPrior
from gitutor.attacks.loop import (
    check_count,
    check_hyperparameter,
    check_start,
    optimise_images,
    seeded_start,
)
from gitutor.attacks.objectives import (
    CosineToTarget,
    breaching_total_variation,
    check_input_shape,
    check_target_gradients,
    gradient_l2_distance,
    total_variation,
)
from gitutor.attacks.result import AttackResult
from gitutor.attacks.stepwise_options import StepwiseOptions, quantised_sign
from gitutor.attacks.stepwise_schedule import StepwiseSchedule
from gitutor.checkpoints import Checkpoint
from gitutor.federated.client import client_gradients, cross_entropy
from gitutor.seeding import make_generator

DISTANCES = ("cosine", "l2")


def gradient_dropout_masks(
    grads: list[torch.Tensor],
    rate: float,
    generator: torch.Generator,
    *,
    keep_equal: bool = True,
    buffers: list[torch.Tensor] | None = None,
) -> list[torch.Tensor]:
    """Fresh Bernoulli keep-masks for gradient dropout (Ye et al. Eq. 10).

    Each entry is kept (1.0) with probability ``1 − rate`` and dropped (0.0) otherwise,
    independently: a uniform draw u per entry (``torch.rand`` in the tensor's dtype, the stream of the
    authors' ``torch.rand_like``) is kept when u ≥ ``rate`` (``keep_equal``, the book) or u > ``rate``
    (the authors' code, objectives.py:550; the two differ with probability 2⁻²⁴ per entry). No
    1/(1 − rate) rescaling: the cosine distance does not see a common scale. This is the function
    :class:`StepwiseObjective` calls at every step.

    Args:
        grads: the matched gradient tensors (any shapes).
        rate: the dropout rate in [0, 1) (the paper: 0.3).
        generator: the stream of the draws.
        keep_equal: the tie rule above.
        buffers: tensors like ``grads`` to draw into and return (a step reuses its memory); None: new.

    Returns:
        One float mask per tensor of ``grads``, same shape, dtype and device.

    Raises:
        ValueError: if ``rate`` is not in [0, 1) or ``buffers`` do not match ``grads``.
    """
    if not 0 <= rate < 1:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    if buffers is None:
        buffers = [torch.empty_like(g) for g in grads]
    elif [(b.shape, b.dtype) for b in buffers] != [(g.shape, g.dtype) for g in grads]:
        raise ValueError("buffers must match grads in number, shapes and dtypes")
    masks = []
    for buffer in buffers:
        torch.rand(buffer.shape, generator=generator, out=buffer)
        masks.append(
            buffer.ge_(rate) if keep_equal else buffer.gt_(rate)
        )  # 1.0 kept, 0.0 dropped, in place
    return masks


class StepwiseObjective:
    """L_t(x') of Ye et al. Eq. 10–11 as an objective of :func:`gitutor.attacks.loop.optimise_images`.

    ``objective(z, t)`` takes the optimised variable z ``(B, C, H, W)`` — the image in [0, 1], or
    with ``options.units == "normalised"`` the normalised image, of which the model sees
    ``options.to_pixels(z)`` — and returns ``{"loss", "gradient_distance", "tv", "r_bn",
    "start_index", "parts"}`` at iteration ``t`` (``r_bn`` is 0 when ``bn_weight == 0``; ``parts``:
    the matching term and each prior times its weight, for the loop's ``diagnose_at``). TV is computed on
    z in the form ``options.tv``; R_BN weights its first layers by ``options.bn_layer_weights``.
    Only the tensors ``start_index(t) …`` get a gradient with a graph; priors that are off at ``t``
    are reported but not differentiated; the dropout masks are :func:`gradient_dropout_masks` drawn
    into reused buffers (with the authors' options the same stream as their ``torch.rand_like`` per
    matched tensor from the same seed). Call :meth:`close` to remove the
    R_BN hooks.
    """

    def __init__(
        self,
        model: nn.Module,
        targets: list[torch.Tensor],
        labels: torch.Tensor,
        schedule: StepwiseSchedule,
        *,
        distance: str,
        dropout: float,
        tv_weight: float,
        bn_weight: float,
        generator: torch.Generator,
        options: StepwiseOptions | None = None,
    ) -> None:
        self.model, self.parameters, self.targets, self.labels = (
            model,
            list(model.parameters()),
            targets,
            labels,
        )
        self.schedule, self.distance, self.dropout = schedule, distance, dropout
        self.tv_weight, self.bn_weight, self.generator = tv_weight, bn_weight, generator
        self.options = options or StepwiseOptions()
        self.cosine = CosineToTarget(targets) if distance == "cosine" else None
        self.prior = (
            BatchNormPrior(model, self.options.bn_layer_weights)
            if bn_weight > 0
            else None
        )
        self._uniform: dict[int, torch.Tensor] = {}

    def _candidate(self, x: torch.Tensor, start: int) -> list[torch.Tensor]:
        if self.model.training:  # client_gradients restores the BatchNorm buffers
            return client_gradients(self.model, x, self.labels, create_graph=True)[
                start:
            ]
        loss = cross_entropy(self.model(x), self.labels)
        return list(
            torch.autograd.grad(loss, self.parameters[start:], create_graph=True)
        )

    def _masks(self, start: int) -> list[torch.Tensor]:
        buffers = [
            self._uniform.setdefault(i, torch.empty_like(self.targets[i]))
            for i in range(start, len(self.targets))
        ]
        return gradient_dropout_masks(
            self.targets[start:],
            self.dropout,
            self.generator,
            keep_equal=self.options.dropout_keep_equal,
            buffers=buffers,
        )

    def __call__(self, z: torch.Tensor, t: int) -> dict[str, torch.Tensor | int]:
        start = self.schedule.start_index(t)
        candidate = self._candidate(self.options.to_pixels(z), start)
        masks = self._masks(start) if self.dropout > 0 else None
        if self.cosine is not None:
            grad_term = self.cosine(candidate, start, masks)
        else:
            target = self.targets[start:]
            if masks is not None:
                candidate, target = (
                    [g * m for g, m in zip(candidate, masks)],
                    [g * m for g, m in zip(target, masks)],
                )
            grad_term = gradient_l2_distance(candidate, target)
        tv = (
            total_variation(z, beta=2.0, reduction="sum")
            if self.options.tv == "paper"  # Eq. 11 sums over pixels
            else breaching_total_variation(z)
        )
        r_bn = (
            self.prior.value()
            if self.prior is not None
            else torch.zeros((), device=z.device)
        )
        loss = grad_term
        if self.schedule.tv_active(t):
            loss = loss + self.tv_weight * tv
        if self.schedule.bn_active(t) and self.prior is not None:
            loss = loss + self.bn_weight * r_bn
        parts = {"matching": grad_term, "TV": self.tv_weight * tv}
        if self.prior is not None:
            parts["R_BN"] = self.bn_weight * r_bn
        return {
            "loss": loss,
            "gradient_distance": grad_term,
            "tv": tv,
            "r_bn": r_bn,
            "start_index": start,
            "parts": parts,
        }

    def state_dict(self) -> dict:
        """What a resumed run needs (:mod:`gitutor.checkpoints`): the dropout generator's state."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s generator state."""
        self.generator.set_state(state["generator"])

    def close(self) -> None:
        """Remove the R_BN forward hooks (the model behaves as before)."""
        if self.prior is not None:
            self.prior.remove()


def stepwise_inversion(
    model: nn.Module,
    target_grads: list[torch.Tensor],
    labels: torch.Tensor,
    input_shape: tuple[int, int, int, int],
    *,
    iterations: int,
    schedule: StepwiseSchedule | None = None,
    dropout: float = 0.3,
    tv_weight: float = 0.01,
    bn_weight: float = 1e-4,
    lr: float = 0.1,
    distance: str = "cosine",
    seed: int = 0,
    record_every: int = 50,
    options: StepwiseOptions | None = None,
    start: torch.Tensor | None = None,
    diagnose_at: tuple[int, ...] = (),
    checkpoint: Checkpoint | None = None,
    progress: bool = False,
) -> AttackResult:
    """Stepwise gradient inversion (Ye et al., AAAI 2024, Stage II, Eq. 10–12).

    Minimises, over a candidate batch x' in [0, 1],

        1 − cos(M_t ⊙ ∇W'_{≥s(t)}, M_t ⊙ ∇W_{≥s(t)}) + 𝕀[t ≥ T1] λ_tv R_tv(x') + 𝕀[t ≥ T2] λ_BN R_BN(x'),

    where s(t) is ``schedule.start_index(t)``, M_t a fresh dropout mask (keep probability
    1 − ``dropout``, the same mask on both gradients), R_tv the TV of Eq. 11 with β = 2 (every
    pixel, the bottom-right one included) and R_BN the BatchNorm-statistics prior. ``options``
    switches each choice the authors' code makes differently (TV form, quantised sign,
    normalised units, R_BN layer weights, best iterate); with ``StepwiseOptions.authors()``,
    ``tv_weight=5e-3`` and ``StepwiseSchedule.paper(..., authors_timing=True)`` the objective and
    its gradient equal the authors' code (``benchmarks/authors_equivalence.py``). The update is Adam on sign(∇_x') with learning rate
    η(t) = ``lr`` · ``schedule.lr_factor(t)``, then x' is clamped to [0, 1] (Eq. 12).

    The model is used as is (the paper attacks a pretrained ResNet34 in eval mode, so the shared
    gradient and R_BN both use the stored running statistics).

    Args:
        model: the attacked network; its parameters are not changed.
        target_grads: the shared gradient, one tensor per ``model.parameters()`` entry.
        labels: ``(B,)`` int64 labels of the batch (recovered in Stage I, or known).
        input_shape: ``(B, C, H, W)`` of the batch, channels first.
        iterations: number of optimisation steps T.
        schedule: a :class:`StepwiseSchedule` with ``iterations`` steps; default
            ``StepwiseSchedule.paper(iterations, num_tensors)``.
        dropout: gradient dropout rate in [0, 1) (paper: 0.3; 0 switches it off).
        tv_weight: λ̂_tv (paper: 0.01 on Eq. 11's sum; the authors' code: 5e-3 on breaching's mean TV,
            ``options.tv == "authors"``).
        bn_weight: λ̂_BN (paper: 1e-4); 0 switches R_BN off (and needs no BatchNorm).
        lr: base learning rate η (paper: 0.1).
        distance: ``"cosine"`` (Eq. 10) or ``"l2"`` (squared Euclidean, DLG/Yin et al. option).
        seed: seeds the initial noise x'_0 = clamp(N(0, 1), 0, 1) (the same draw as
            ``inverting_gradients`` with this seed; N(0, 1) unclamped in normalised units) and then
            the dropout masks.
        record_every: snapshot period (snapshots also at T1, T2 and the end).
        options: the choices the paper leaves open (:class:`~gitutor.attacks.stepwise_options.StepwiseOptions`):
            default the paper as written (TV of Eq. 11, Sign, pixels, plain R_BN, last iterate);
            ``StepwiseOptions.authors()`` the authors' code (then ``lr`` is in normalised units,
            and ``tv_weight`` should be their 5e-3 on their TV).
        start: ``(B, C, H, W)`` images in [0, 1] to start from instead of the seeded noise (the
            sanity arm: the truth plus small noise), converted to the optimised units; the seed
            still draws the dropout masks.
        diagnose_at: iterations at which each prior's image gradient is weighed against the matching
            term's (``info["prior_gradients"]``, :func:`gitutor.attacks.loop.optimise_images`), e.g.
            ``(schedule.t1, schedule.t2, iterations - 1)``.
        checkpoint: save and resume the run there (:class:`gitutor.checkpoints.Checkpoint`).
        progress: show a tqdm progress bar.

    Returns:
        :class:`AttackResult` with ``images`` ``(B, C, H, W)`` in [0, 1] (detached, CPU),
        ``labels``, ``history`` (one entry per iteration, :mod:`gitutor.attacks.loop`) keys
        ``iteration``, ``lr``, ``loss``, ``gradient_distance``, ``tv``, ``r_bn``, ``start_index``, and
        ``snapshots`` ``[(iteration, images)]`` (iteration 0 is the initial noise).

    Raises:
        TypeError: for non-float gradients or non-numeric hyper-parameters.
        ValueError: on mismatched gradient shapes or counts, NaN gradients, a ``start`` that is not
            finite images in [0, 1] of ``input_shape``, an ``input_shape`` that
            is not ``(B, C, H, W)`` with the model's input channels (e.g. channels-last), labels that do not
            match the batch size, a schedule for another budget or deeper than the model, an
            unknown distance, a dropout rate outside [0, 1), ``iterations < 1``, ``record_every < 1``,
            a NaN/inf/negative ``tv_weight`` or ``bn_weight``, a NaN/inf/non-positive ``lr``, or
            ``bn_weight > 0`` with a model in training mode (R_BN would then corrupt the running
            statistics it is compared with).
    """
    parameters = list(model.parameters())
    targets = check_target_gradients(model, target_grads)
    input_shape = check_input_shape(input_shape, model)
    if labels.shape != (input_shape[0],) or labels.dtype != torch.int64:
        raise ValueError(
            f"labels must be int64 of shape ({input_shape[0]},), got {labels.dtype} {tuple(labels.shape)}"
        )
    iterations = check_count(iterations, "iterations")
    tv_weight, bn_weight = (
        check_hyperparameter(tv_weight, "tv_weight"),
        check_hyperparameter(bn_weight, "bn_weight"),
    )
    dropout = check_hyperparameter(dropout, "dropout")
    schedule = schedule or StepwiseSchedule.paper(iterations, len(parameters))
    if schedule.iterations != iterations:
        raise ValueError(
            f"schedule is for {schedule.iterations} iterations, the attack runs {iterations}; "
            "build it with StepwiseSchedule.paper(iterations, ...)"
        )
    if schedule.start >= len(parameters):
        raise ValueError(
            f"schedule starts at tensor {schedule.start} but the model has {len(parameters)} tensors"
        )
    if distance not in DISTANCES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    if bn_weight > 0 and model.training:
        raise ValueError(
            "R_BN needs the model in eval mode (model.eval()), as in Ye et al.; "
            "or pass bn_weight=0"
        )
    if not dropout < 1:
        raise ValueError(f"dropout rate must be in [0, 1), got {dropout}")

    options = options or StepwiseOptions()
    if options.units == "normalised" and len(options.mean) != input_shape[1]:
        raise ValueError(
            f"options.mean has {len(options.mean)} channels, the images {input_shape[1]}"
        )
    device = parameters[0].device
    if (
        options.units == "normalised"
    ):  # base_attack.py:228–229: randn in normalised units, no clamp
        generator = make_generator(
            seed, device
        )  # the stream their torch.manual_seed(seed) gives, on the CPU
        x0 = torch.randn(
            input_shape, generator=generator, device=device, dtype=parameters[0].dtype
        )
    else:
        x0, generator = seeded_start(input_shape, seed, device)
    if start is not None:
        x0 = options.from_pixels(
            check_start(start, input_shape).to(device=device, dtype=x0.dtype)
        )
    labels = labels.to(device)
    objective = StepwiseObjective(
        model,
        [g.to(device) for g in targets],
        labels,
        schedule,
        distance=distance,
        dropout=dropout,
        tv_weight=tv_weight,
        bn_weight=bn_weight,
        generator=generator,
        options=options,
    )
    resets = None
    if options.keep == "best":

        def resets(t: int) -> bool:
            return (t + schedule.offset) % schedule.interval == 0 or t in (
                schedule.t1,
                schedule.t2,
            )

    try:
        return optimise_images(
            objective,
            x0,
            iterations=iterations,
            lr=lr,
            labels=labels,
            lr_schedule=lambda opt: torch.optim.lr_scheduler.LambdaLR(
                opt, schedule.lr_factor
            ),
            signed=quantised_sign if options.step == "quantised" else True,
            box=options.box(device, x0.dtype),
            view=options.to_pixels,
            best_resets=resets,
            record_every=record_every,
            snapshot_at={t for t in (schedule.t1, schedule.t2) if t > 0},
            diagnose_at=diagnose_at,
            checkpoint=checkpoint,
            progress=progress,
            desc="stepwise inversion",
        )
    finally:
        objective.close()
