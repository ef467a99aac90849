"""Figures the chapters share beyond :mod:`gitutor.viz`: several attacks' iteration strips stacked, a truth row
above each method's reconstructions, and means with 95 % intervals as error bars."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gitutor.stats import Interval
from gitutor.viz import iteration_strip, show_grid


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


def comparison_grid(truth: torch.Tensor, reconstructions: Mapping[str, torch.Tensor], title: str = ""):
    """The ``(B, C, H, W)`` truth as the first row, then one row per method (label → ``(B, C, H, W)``
    reconstruction, matched to the truth), each row labelled on its left. Returns the figure.

    Raises:
        ValueError: if a reconstruction's shape differs from the truth's.
    """
    truth = truth.cpu()
    for label, images in reconstructions.items():
        if tuple(images.shape) != tuple(truth.shape):
            raise ValueError(f"reconstruction {label!r} has shape {tuple(images.shape)}, truth {tuple(truth.shape)}")
    fig = show_grid(torch.cat([truth, *reconstructions.values()]), ncols=len(truth), scale=1.5, suptitle=title)
    for row, label in enumerate(["truth", *reconstructions]):
        fig.axes[row * len(truth)].set_title(label, fontsize=8, loc="left")
    return fig


def interval_errorbars(ax, xs: Sequence, intervals: Sequence[Interval], **style):
    """Means at ``xs`` with their 95 % intervals as asymmetric error bars on ``ax`` (``style`` to ``errorbar``).

    Raises:
        ValueError: if ``xs`` and ``intervals`` differ in length.
    """
    if len(xs) != len(intervals):
        raise ValueError(f"{len(xs)} xs for {len(intervals)} intervals")
    errors = [[v.mean - v.low for v in intervals], [v.high - v.mean for v in intervals]]
    return ax.errorbar(list(xs), [v.mean for v in intervals], yerr=errors, marker="o", capsize=3, **style)
