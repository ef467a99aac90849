"""Figures for the notebooks: image grids, iteration strips, curves; several attacks' strips stacked, a truth
row above each method's reconstructions, and means with 95 % intervals as error bars.

Images are ``(B, C, H, W)`` tensors, channels first (a channels-last batch is refused by
:func:`gitutor.checks.check_layout`); values outside [0, 1] (unclamped DLG iterates) are clipped
for display only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from gitutor.checks import check_layout
from gitutor.stats import Interval


def _to_display(image: torch.Tensor):
    image = image.detach().float().cpu().clamp(0, 1)
    if image.dim() != 3:
        raise ValueError(
            f"expected one (C, H, W) image, got shape {tuple(image.shape)}"
        )
    return image[0].numpy() if image.shape[0] == 1 else image.permute(1, 2, 0).numpy()


def show_grid(
    images: torch.Tensor,
    titles: Sequence[str] | None = None,
    ncols: int | None = None,
    scale: float = 1.4,
    suptitle: str | None = None,
):
    """A grid of images with optional per-image titles; returns the matplotlib Figure.

    Raises:
        ValueError: if ``images`` is not ``(B, C, H, W)`` (e.g. channels-last) or ``titles`` has the
            wrong length.
    """
    check_layout(images.shape, "images")
    if titles is not None and len(titles) != len(images):
        raise ValueError(f"{len(titles)} titles for {len(images)} images")
    ncols = ncols or min(len(images), 8)
    nrows = math.ceil(len(images) / ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(scale * ncols, scale * nrows + (0.4 if suptitle else 0)),
        squeeze=False,
    )
    for index, ax in enumerate(axes.flat):
        ax.axis("off")
        if index < len(images):
            ax.imshow(_to_display(images[index]), cmap="gray", vmin=0, vmax=1)
            if titles is not None:
                ax.set_title(titles[index], fontsize=8)
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    fig.tight_layout()
    return fig


def iteration_strip(
    snapshots: Sequence[tuple[int, torch.Tensor]],
    truth: torch.Tensor | None = None,
    columns: int = 10,
    scale: float = 1.2,
    row_labels: Sequence[str] | None = None,
):
    """The DLG figure: reconstructions over iterations, one row per image of the batch.

    Args:
        snapshots: ``(iteration, (B, C, H, W))`` pairs, e.g. ``AttackResult.snapshots``.
        truth: optional ``(B, C, H, W)`` ground truth shown in the last column.
        columns: at most this many evenly spaced snapshots (first and last always included).
        row_labels: optional label per row.

    Raises:
        ValueError: if ``snapshots`` is empty, or its images or ``truth`` are not ``(B, C, H, W)``
            (e.g. channels-last).
    """
    if not snapshots:
        raise ValueError(
            "no snapshots to show (was record_every larger than the iterations?)"
        )
    for _, images in snapshots:
        check_layout(images.shape, "snapshot images")
    if truth is not None:
        check_layout(truth.shape, "truth")
    picks = sorted(
        {round(i * (len(snapshots) - 1) / max(columns - 1, 1)) for i in range(columns)}
    )
    chosen = [snapshots[i] for i in picks]
    batch = chosen[0][1].shape[0]
    ncols = len(chosen) + (truth is not None)
    fig, axes = plt.subplots(
        batch, ncols, figsize=(scale * ncols, scale * batch + 0.3), squeeze=False
    )
    for row in range(batch):
        for col, (iteration, images) in enumerate(chosen):
            axes[row, col].imshow(_to_display(images[row]), cmap="gray", vmin=0, vmax=1)
            if row == 0:
                axes[row, col].set_title(f"it {iteration}", fontsize=8)
        if truth is not None:
            axes[row, -1].imshow(_to_display(truth[row]), cmap="gray", vmin=0, vmax=1)
            if row == 0:
                axes[row, -1].set_title("truth", fontsize=8)
        if row_labels is not None:
            axes[row, 0].set_ylabel(row_labels[row], fontsize=8)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    return fig


def plot_curves(
    curves: Mapping[str, Sequence[float]],
    *,
    xlabel: str = "iteration",
    ylabel: str = "",
    logy: bool = False,
    title: str | None = None,
    x: Mapping[str, Sequence[float]] | None = None,
    ax=None,
):
    """Line plot of named curves (loss, MSE, PSNR, …); returns the Axes.

    Args:
        curves: name → values.
        x: optional name → x values (default 0, 1, 2, …).
        logy: logarithmic y axis (non-positive values are not drawn on it).
        ax: draw into this Axes instead of a new figure.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    for name, values in curves.items():
        xs = x[name] if x is not None and name in x else range(len(values))
        ax.plot(list(xs), list(values), label=name)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if len(curves) > 1:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax


def stacked_strip(
    snapshots: Mapping[str, Sequence[tuple[int, torch.Tensor]]],
    truth: torch.Tensor,
    columns: int = 9,
    title: str = "",
):
    """One row per attack (the report's Fig. 1): each attack's ``(iteration, (1, C, H, W))`` snapshots side
    by side at the same positions, the ``(1, C, H, W)`` truth in the last column. Returns the figure.

    Raises:
        ValueError: if ``snapshots`` is empty or an attack has no snapshots.
    """
    if not snapshots or not all(snapshots.values()):
        raise ValueError(
            "snapshots must map every attack name to a non-empty list of (iteration, images)"
        )
    count = max(len(s) for s in snapshots.values())
    stacked = []
    for index in range(count):
        rows = [s[min(index, len(s) - 1)] for s in snapshots.values()]
        stacked.append((rows[0][0], torch.cat([images for _, images in rows])))
    fig = iteration_strip(
        stacked,
        truth=truth.cpu().repeat(len(snapshots), 1, 1, 1),
        columns=columns,
        row_labels=list(snapshots),
    )
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def comparison_grid(
    truth: torch.Tensor, reconstructions: Mapping[str, torch.Tensor], title: str = ""
):
    """The ``(B, C, H, W)`` truth as the first row, then one row per method (label → ``(B, C, H, W)``
    reconstruction, matched to the truth), each row labelled on its left. Returns the figure.

    Raises:
        ValueError: if a reconstruction's shape differs from the truth's.
    """
    truth = truth.cpu()
    for label, images in reconstructions.items():
        if tuple(images.shape) != tuple(truth.shape):
            raise ValueError(
                f"reconstruction {label!r} has shape {tuple(images.shape)}, truth {tuple(truth.shape)}"
            )
    fig = show_grid(
        torch.cat([truth, *reconstructions.values()]),
        ncols=len(truth),
        scale=1.5,
        suptitle=title,
    )
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
    return ax.errorbar(
        list(xs),
        [v.mean for v in intervals],
        yerr=errors,
        marker="o",
        capsize=3,
        **style,
    )


#: inches: a figure this wide shows on the book's page at its own size (about 800 px at 100 dpi); a wider
#: one is shrunk to the page, and its text with it.
PAGE_WIDTH = 8.0
#: pt: at 100 dpi and :data:`PAGE_WIDTH` this is about 16 px, the size of the page's body text.
BODY_PT = 11.5


def legible(
    fig,
    width: float = PAGE_WIDTH,
    fontsize: float = BODY_PT,
    horizontal_labels: bool = False,
):
    """Make ``fig`` readable at page width: shrink it to at most ``width`` inches (aspect kept), raise every
    text (titles, labels, ticks, legends, suptitle) to at least ``fontsize`` pt and lay it out again, so
    no title overlaps an image; with ``horizontal_labels`` the y labels (row names of an image grid) are
    turned horizontal, left of their row. Returns ``fig``.

    Raises:
        ValueError: if ``width`` or ``fontsize`` is not positive.
    """
    if not (width > 0 and fontsize > 0):
        raise ValueError(
            f"width and fontsize must be positive, got {width!r} and {fontsize!r}"
        )
    from matplotlib.text import Text

    current, height = fig.get_size_inches()
    if current > width:
        fig.set_size_inches(width, height * width / current)
    for text in fig.findobj(Text):
        if text.get_text() and text.get_fontsize() < fontsize:
            text.set_fontsize(fontsize)
    for ax in fig.axes:  # tick labels are made at draw time: set their size on the axes
        ax.tick_params(which="both", labelsize=fontsize)
        if horizontal_labels:
            ax.yaxis.label.set(rotation=0, ha="right", va="center")
    fig.tight_layout()
    return fig
