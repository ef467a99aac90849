"""GradInversion baseline (Yin et al., CVPR 2021), as compared against in Ye et al. (AAAI 2024, Table 1).

Match the gradients of *all* layers at once — cosine distance (or squared L2) — with TV and the
BatchNorm-statistics prior R_BN switched on from the first iteration. Labels are given (Yin et
al. recover them from the last layer when they are distinct; Ye et al. give every method the true
labels of distinct-label batches). The group-consistency term of Yin et al. (several seeds plus
image registration) is left out, as Ye et al. replace it by gradient dropout.
"""

from __future__ import annotations

import torch
from torch import nn

from gitutor.attacks.result import AttackResult
from gitutor.attacks.stepwise import StepwiseSchedule, stepwise_inversion
from gitutor.attacks.stepwise_options import StepwiseOptions
from gitutor.checkpoints import Checkpoint


def gradinversion(
    model: nn.Module,
    target_grads: list[torch.Tensor],
    labels: torch.Tensor,
    input_shape: tuple[int, int, int, int],
    *,
    iterations: int,
    tv_weight: float = 0.01,
    bn_weight: float = 1e-4,
    distance: str = "cosine",
    lr: float = 0.1,
    seed: int = 0,
    record_every: int = 50,
    options: StepwiseOptions | None = None,
    start: torch.Tensor | None = None,
    diagnose_at: tuple[int, ...] = (),
    checkpoint: Checkpoint | None = None,
    progress: bool = False,
) -> AttackResult:
    """GradInversion: all-layer gradient matching + λ_tv R_tv + λ_BN R_BN (Yin et al. 2021, Eq. 2–5).

    Same optimiser as the stepwise attack (Adam on the sign of the image gradient, lr × 0.33 at
    3/8, 5/8, 7/8 of the budget, clamp to [0, 1]) so that Table 1 compares objectives, not
    optimisers: it is :func:`~gitutor.attacks.stepwise.stepwise_inversion` with
    ``StepwiseSchedule.all_tensors`` and no gradient dropout.

    Args:
        model: the attacked network, in eval mode when ``bn_weight > 0``.
        target_grads: the shared gradient, one tensor per ``model.parameters()`` entry.
        labels: ``(B,)`` int64 labels.
        input_shape: ``(B, C, H, W)``.
        iterations: optimisation steps.
        tv_weight, bn_weight: λ_tv and λ_BN (TV with β = 2, Ye et al. Eq. 11).
        distance: ``"cosine"`` or ``"l2"``.
        lr, seed, record_every, options, start, diagnose_at, checkpoint, progress: as in
            ``stepwise_inversion``; ``options=StepwiseOptions.authors()`` with ``tv_weight=5e-3`` applies
            TV and R_BN as Ye et al.'s code applies them (breaching's mean TV in normalised units,
            R_BN's first layers weighted 1.3 and 3), as their code applies them to the stepwise attack.

    Returns:
        :class:`AttackResult` (images ``(B, C, H, W)`` in [0, 1], history, snapshots).

    Raises:
        ValueError: as ``stepwise_inversion`` (shape/count mismatches, NaN gradients, bad labels,
            unknown distance, training-mode model with ``bn_weight > 0``).
    """
    return stepwise_inversion(
        model,
        target_grads,
        labels,
        input_shape,
        iterations=iterations,
        schedule=StepwiseSchedule.all_tensors(iterations),
        dropout=0.0,
        tv_weight=tv_weight,
        bn_weight=bn_weight,
        lr=lr,
        distance=distance,
        seed=seed,
        record_every=record_every,
        options=options,
        start=start,
        diagnose_at=diagnose_at,
        checkpoint=checkpoint,
        progress=progress,
    )
