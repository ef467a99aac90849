"""The small object every attack returns, so notebooks can plot and tests can assert."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import torch


@dataclass
class AttackResult:
    """Outcome of a reconstruction attack.

    Attributes:
        images: ``(B, C, H, W)`` reconstructed images (detached, on the CPU); an attack that inverts
            N observations at once (Learning To Invert) returns ``(N, B, C, H, W)``.
        labels: ``(B,)`` int64 labels, ``(B, C)`` soft labels, or None when the attack does not
            reconstruct labels.
        history: per-iteration curves, e.g. ``{"loss": [...]}`` (one float per iteration).
        snapshots: ``(iteration, images)`` pairs recorded every ``record_every`` iterations,
            starting with the initialisation at iteration 0.
        info: anything else worth reporting, JSON-able values only (str, int, float, bool, None,
            lists and dicts of them), e.g. ``{"stopped_early": "non-finite loss"}``; tensors go in
            ``images``, ``labels`` or ``history``.
    """

    images: torch.Tensor
    labels: torch.Tensor | None
    history: dict[str, list[float]] = field(default_factory=dict)
    snapshots: list[tuple[int, torch.Tensor]] = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            json.dumps(self.info, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise TypeError(
                f"AttackResult info must hold JSON-able values only (no tensors, NaN or inf): {error}"
            ) from None
