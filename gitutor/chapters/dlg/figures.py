"""Chapter 01's figures: the recognisability ladder, the attack's curves, the seed study's reconstructions
and PSNR curves, the batch grids and the recorded defense study (Zhu et al. 2019, §4–5). Every figure is made
readable at page width (:func:`gitutor.viz.legible`: text at least the body's size, no hidden titles)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from gitutor.chapters.dlg.defense_study import NAMES
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


#: How the study's figures mark a run's outcome (:data:`.defense_reading.OUTCOMES`).
OUTCOME_MARKS = {"recovered": "✓", "not resolved": "~", "stopped": "✗"}
_STYLE = {
    "recovered": {"marker": "o", "color": "C2"},
    "not resolved": {"marker": "s", "color": "C1"},
    "stopped": {"marker": "x", "color": "C3"},
}
_SHORT = {"none": "none", "prune": "prune", "gaussian": "Gauss", "laplacian": "Laplace"}


def defense_study_figure(
    summary: Mapping, controls: Sequence[float], recognisable: float
):
    """The defense study (:func:`~gitutor.chapters.dlg.defense_reading.summarise`): one panel per defense, the
    PSNR (dB) of every image's reconstruction at no defense and at each level, marked by its outcome
    (green dot: recovered, orange square: not resolved, red cross: stopped), with ``recognisable`` dB dotted and
    the range of the images' best know-nothing ``controls`` (dB) shaded. Returns the figure.

    Raises:
        KeyError: if ``summary`` lacks the undefended level ``("none", 0.0)``.
        ValueError: if ``controls`` is empty.
    """
    if not controls:
        raise ValueError("controls must hold each image's best control score (dB)")
    kinds = [k for k in dict.fromkeys(kind for kind, _ in summary) if k != "none"]
    fig, axes = plt.subplots(
        1, len(kinds), figsize=(8, 3.8), sharey=True, squeeze=False
    )
    for ax, kind in zip(axes[0], kinds):
        levels = [summary["none", 0.0]] + [
            row for (k, _), row in summary.items() if k == kind
        ]
        for x, row in enumerate(levels):
            offsets = torch.linspace(-0.25, 0.25, len(row.psnr)).tolist()
            for dx, value, found in zip(offsets, row.psnr, row.outcomes):
                ax.plot(x + dx, min(value, 80.0), ls="none", ms=5, **_STYLE[found])
        ax.axhspan(min(controls), max(controls), color="grey", alpha=0.2, lw=0)
        ax.axhline(recognisable, color="grey", ls=":", lw=1)
        ax.set_xticks(range(len(levels)))
        ax.set_xticklabels(
            ["none"] + [f"{row.level:g}" for row in levels[1:]], rotation=90
        )
        ax.set(
            title=NAMES[kind],
            xlabel="variance" if kind != "prune" else "fraction pruned",
        )
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("PSNR (dB)")
    handles = [
        plt.Line2D([], [], ls="none", label=name, **style)
        for name, style in _STYLE.items()
    ]
    fig.legend(handles=handles, loc="upper center", ncol=3, bbox_to_anchor=(0.5, 1.02))
    legible(fig)
    fig.subplots_adjust(top=0.82)
    return fig


def defense_examples(
    truth: torch.Tensor, reconstructions: Mapping, summary: Mapping, image: int
):
    """The ``(C, H, W)`` ``truth`` of sample ``image`` and its reconstruction at no defense and at every level
    of the study, one row per defense (``reconstructions[(kind, level)]``: ``(C, H, W)`` in [0, 1]), titled
    with the level, the PSNR (dB) and the outcome's mark (:data:`OUTCOME_MARKS`). Returns the figure.

    Raises:
        ValueError: if ``image`` is not one of the study's images.
        KeyError: if a reconstruction of ``summary``'s levels is missing.
    """
    first = summary["none", 0.0]
    if image not in first.images:
        raise ValueError(
            f"image must be one of the study's images {first.images}, got {image}"
        )
    at = first.images.index(image)
    kinds = [k for k in dict.fromkeys(kind for kind, _ in summary) if k != "none"]
    ncols = 2 + max(sum(k == kind for k, _ in summary) for kind in kinds)
    fig, axes = plt.subplots(len(kinds), ncols, figsize=(1.0 * ncols, 1.0 * len(kinds)))
    for axes_row, kind in zip(axes, kinds):
        cells = [("none", 0.0)] + [key for key in summary if key[0] == kind]
        axes_row[0].imshow(truth.permute(1, 2, 0).numpy())
        axes_row[0].set_title(f"{_SHORT[kind]}\ntruth")
        for ax, key in zip(axes_row[1:], cells):
            row = summary[key]
            ax.imshow(reconstructions[key].permute(1, 2, 0).numpy())
            name = "none" if key[0] == "none" else f"{key[1]:g}"
            ax.set_title(
                f"{name}\n{row.psnr[at]:.0f} dB {OUTCOME_MARKS[row.outcomes[at]]}"
            )
        for ax in axes_row:
            ax.axis("off")
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
