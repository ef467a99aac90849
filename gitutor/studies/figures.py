"""Figures the chapters share beyond :mod:`gitutor.viz`: several attacks' iteration strips stacked."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gitutor.viz import iteration_strip


def stacked_strip(snapshots: Mapping[str, Sequence[tuple[int, torch.Tensor]]], truth: torch.Tensor,
                  columns: int = 9, title: str = ""):
    """One row per attack (the report's Fig. 1): each attack's ``(iteration, (1, C, H, W))`` snapshots side
    by side at the same positions, the ``(1, C, H, W)`` truth in the last column. Returns the figure.

    Raises:
        ValueError: if ``snapshots`` is empty or an attack has no snapshots.
    """
    if not snapshots or not all(snapshots.values()):
        raise ValueError("snapshots must map every attack name to a non-empty list of (iteration, images)")
    count = max(len(s) for s in snapshots.values())
    stacked = []
    for index in range(count):
        rows = [s[min(index, len(s) - 1)] for s in snapshots.values()]
        stacked.append((rows[0][0], torch.cat([images for _, images in rows])))
    fig = iteration_strip(stacked, truth=truth.cpu().repeat(len(snapshots), 1, 1, 1), columns=columns,
                          row_labels=list(snapshots))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
