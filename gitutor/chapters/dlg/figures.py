"""Chapter 01's figures: the recognisability ladder, the attack's curves, the seed study's reconstructions
and PSNR curves, the batch grids and the defense sweep (Zhu et al. 2019, §4–5). Every figure is made
readable at page width (:func:`gitutor.viz.legible`: text at least the body's size, no hidden titles)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from gitutor.metrics import mse
from gitutor.viz import iteration_strip, legible, plot_curves, show_grid


def _mark(value: float, success: float, recognisable: float | None = None) -> str:
    """✓ at or above ``success`` dB, ~ at or above ``recognisable`` dB (when given), else ✗."""
    return (
        "✓"
        if value >= success
        else "~"
        if recognisable is not None and value >= recognisable
        else "✗"
    )


def seed_grid(
    rows: Sequence[dict], success: float, recognisable: float, suptitle: str = ""
):
    """Truth and reconstruction (clipped to [0, 1]) of every :func:`~gitutor.chapters.dlg.sweeps.seed_study`
    row side by side, titled with the seed and the PSNR: ✓ at or above ``success`` dB, ~ at or above
    ``recognisable`` dB, ✗ below. Returns the figure.

    Raises:
        ValueError: if ``rows`` is empty.
    """
    if not rows:
        raise ValueError("rows must hold at least one seed_study row")
    images = torch.cat(
        [torch.cat([row["truth"], row["result"].images.clamp(0, 1)]) for row in rows]
    )
    titles = [
        t
        for row in rows
        for t in (
            f"seed {row['seed']}\ntruth",
            f"DLG\n{row['psnr']:.1f} dB {_mark(row['psnr'], success, recognisable)}",
        )
    ]
    return legible(
        show_grid(
            images,
            titles=titles,
            ncols=2 * min(len(rows), 3),
            scale=1.6,
            suptitle=suptitle,
        )
    )


def ladder(
    rungs: Mapping[str, Sequence[tuple[float, torch.Tensor]]],
    truths: Mapping[str, torch.Tensor],
    recognisable: float,
    columns: Sequence[str] | None = None,
    suptitle: str | None = None,
):
    """The recognisability yardstick: per image one row, the ``(1, C, H, W)`` truth then its rungs (the
    :func:`~gitutor.chapters.dlg.sweeps.controls` and :func:`~gitutor.chapters.dlg.sweeps.noise_ladder`
    images), each titled with its column name (``columns``, optional) and PSNR, ✓ at or above
    ``recognisable`` dB and ✗ below; smaller images are shown enlarged (nearest neighbour). Returns the
    figure.

    Raises:
        ValueError: if ``rungs`` is empty, an image has no truth or ``columns`` does not fit the rungs.
    """
    if not rungs or set(rungs) - set(truths):
        raise ValueError("rungs must be non-empty and every image needs its truth")
    ncols = 1 + len(next(iter(rungs.values())))
    if columns is not None and len(columns) != ncols - 1:
        raise ValueError(f"{len(columns)} column names for {ncols - 1} rungs")
    head = (
        [f"{name}\n" for name in columns] if columns is not None else [""] * (ncols - 1)
    )
    images, titles = [], []
    for index, (name, row) in enumerate(
        rungs.items()
    ):  # column names on the first row only
        images += [truths[name].cpu()] + [image for _, image in row]
        titles += [f"{name}\ntruth"] + [
            f"{top if index == 0 else ''}{value:.1f} dB "
            f"{'✓' if value >= recognisable else '✗'}"
            for top, (value, _) in zip(head, row)
        ]
    side = max(
        image.shape[-1] for image in images
    )  # smaller images shown enlarged, pixels as blocks
    images = [
        torch.nn.functional.interpolate(image, size=(side, side), mode="nearest")
        for image in images
    ]
    fig = show_grid(
        torch.cat(images),
        titles=titles,
        ncols=ncols,
        scale=1.6,
        suptitle=suptitle
        or f"pixel noise at a given PSNR: ✓ recognisable (≥ {recognisable:.0f} dB)",
    )
    if ncols > 4:  # many rungs: page width, and room for an image under every title
        fig.set_size_inches(8.0, 1.6 * len(rungs) + 1.0)
    return legible(fig)


def defense_curves(
    sweep: Mapping[tuple[str, float], tuple[float, torch.Tensor]],
    success: float,
    recognisable: float,
):
    """PSNR (dB) against the pruned fraction and the noise variance (log axis) of a
    :func:`~gitutor.chapters.dlg.sweeps.defense_sweep`, with the undefended run and both criteria as lines.

    Raises:
        KeyError: if the sweep has no undefended run ``("none", 0.0)``.
    """
    undefended = sweep["none", 0.0][0]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    for ax, kind, label in (
        (axes[0], "prune", "pruned fraction"),
        (axes[1], "noise", "noise variance"),
    ):
        points = [(0.0, undefended)] * (kind == "prune") + [
            (s, v[0]) for (k, s), v in sweep.items() if k == kind
        ]
        ax.plot(*zip(*points), "o-")
        ax.set(
            xlabel=label,
            ylabel="PSNR (dB)",
            title=f"gradient {kind}",
            xscale="log" if kind == "noise" else "linear",
        )
        for level, style in ((success, "--"), (recognisable, ":")):
            ax.axhline(level, color="grey", ls=style, lw=1)
        ax.axhline(undefended, color="C1", lw=1, label="no defense")
        ax.legend()
        ax.grid(alpha=0.3)
    return legible(fig)


def defense_grid(
    truth: torch.Tensor,
    sweep: Mapping[tuple[str, float], tuple[float, torch.Tensor]],
    success: float,
    recognisable: float,
):
    """The ``(1, C, H, W)`` truth, then every defended reconstruction titled with its strength, PSNR and mark."""
    titles = ["truth"] + [
        f"{'no defense' if k == 'none' else f'{k} {s:g}'}\n{v:.1f} dB {_mark(v, success, recognisable)}"
        for (k, s), (v, _) in sweep.items()
    ]
    fig = show_grid(
        torch.cat([truth.cpu()] + [images for _, images in sweep.values()]),
        titles=titles,
        ncols=min(len(sweep) + 1, 4),
        scale=1.8,
        suptitle=f"✓ ≥ {success:.0f} dB (near pixel-exact); "
        f"~ ≥ {recognisable:.0f} dB (recognisable); ✗ below",
    )
    return legible(fig)


def attack_curves(result, truth: torch.Tensor):
    """Two panels of one DLG run (DLG Alg. 1): the gradient distance ``||g' - g||²`` at every L-BFGS step
    (``result.history["loss"]``, log axis) and the MSE of each recorded snapshot to the ``(B, C, H, W)``
    ``truth`` (images in [0, 1]). Returns the figure.

    Raises:
        ValueError: if the result has no loss history or no snapshots.
    """
    if not result.history.get("loss") or not result.snapshots:
        raise ValueError(
            "result needs a loss history and snapshots (run dlg with record_every > 0)"
        )
    truth = truth.cpu()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    plot_curves(
        {"gradient distance": result.history["loss"]},
        ylabel="||g' - g||^2",
        logy=True,
        ax=axes[0],
    )
    steps = [step for step, _ in result.snapshots]
    errors = [float(mse(images, truth).mean()) for _, images in result.snapshots]
    plot_curves(
        {"MSE": errors},
        x={"MSE": steps},
        ylabel="MSE to the private image",
        logy=True,
        ax=axes[1],
    )
    return legible(fig)


def psnr_curves(
    curves: Mapping[str, tuple[Sequence[int], Sequence[float]]],
    success: float,
    recognisable: float | None = None,
):
    """PSNR (dB) against the L-BFGS step of every seed-study run, from
    :func:`~gitutor.chapters.dlg.sweeps.psnr_curves` (``name → (steps, values)``; a run stopped early ends
    early), with the criteria ``success`` (dashed) and ``recognisable`` (dotted) dB. Returns the figure.

    Raises:
        ValueError: if ``curves`` is empty.
    """
    if not curves:
        raise ValueError("curves must hold at least one run")
    ax = plot_curves(
        {k: v for k, (_, v) in curves.items()},
        x={k: s for k, (s, _) in curves.items()},
        xlabel="L-BFGS step",
        ylabel="PSNR (dB)",
        title=f"PSNR along the attack (dashed: {success:.0f} dB"
        + ("" if recognisable is None else f", dotted: {recognisable:.0f} dB")
        + ")",
    )
    ax.axhline(success, color="grey", ls="--", lw=1)
    if recognisable is not None:
        ax.axhline(recognisable, color="grey", ls=":", lw=1)
    if len(curves) > 6:
        ax.legend(ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.figure.set_size_inches(8.0, 4.0)
    return legible(ax.figure)


def batch_grids(batch_rows: Sequence[Mapping]) -> list:
    """One figure per :func:`~gitutor.chapters.dlg.sweeps.batch_sweep` row (DLG Fig. 4): the ``B`` private
    images on top, the matched reconstructions below, titled with the mean PSNR (dB). Returns the figures.

    Raises:
        ValueError: if ``batch_rows`` is empty.
    """
    if not batch_rows:
        raise ValueError("batch_rows must hold at least one batch_sweep row")
    return [
        legible(
            show_grid(
                row["images"],
                ncols=row["B"],
                scale=1.6,
                suptitle=f"B = {row['B']}: truth (top), DLG (bottom)\nmean PSNR {row['psnr']:.1f} dB",
            )
        )
        for row in batch_rows
    ]


def strip(
    snapshots,
    truth: torch.Tensor,
    columns: int = 7,
    row_labels: Sequence[str] | None = None,
):
    """:func:`gitutor.viz.iteration_strip` of ``(iteration, (B, C, H, W))`` snapshots with the truth last,
    readable at page width (:func:`gitutor.viz.legible`). Returns the figure.

    Raises:
        ValueError: as :func:`gitutor.viz.iteration_strip`.
    """
    return legible(
        iteration_strip(snapshots, truth=truth, columns=columns, row_labels=row_labels)
    )
