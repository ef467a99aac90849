"""Chapter 07's figures: the attacked image of each data kind, the report's Fig. 1 strips (every
attack's dummy image over the L-BFGS steps) and Fig. 2 curves (MSE to the true image and matching
loss per step).

``runs`` below is ``{(kind, image index): {attack: AttackResult}}`` from
:func:`gitutor.chapters.admm_comparison.rounds.attack_first_round`; ``data`` is ``{kind: (images, labels)}`` from
:func:`~gitutor.chapters.admm_comparison.rounds.load_kinds`. Images are shown clipped to [0, 1].
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt

from gitutor.metrics import mse
from gitutor.chapters.admm_comparison.report import snapshot_curve
from gitutor.chapters.admm_comparison.rounds import NAMES
from gitutor.viz import BODY_PT, legible, plot_curves, stacked_strip

#: The attacks whose loss is DLG's squared gradient distance (the loss panel of :func:`attack_curves`).
MATCHING_LOSS = ("DLG", "iDLG", "DLG-ADMM", "iDLG-ADMM", "DLG on −Δ/(2η)")
#: Points: every text of the chapter's figures (figures ≤ 10 inches wide: as large as the body at page width).
TEXT_SIZE = BODY_PT


def _short(kind: str) -> str:
    return NAMES[kind].split(" (")[0]


def data_figure(data: Mapping, count: int):
    """The first ``count`` images of every data kind, one row per kind, each titled with its label.
    Returns the figure.

    Raises:
        ValueError: if ``data`` is empty or ``count`` < 1.
    """
    if not data or count < 1:
        raise ValueError("data must hold at least one kind and count must be ≥ 1")
    fig, axes = plt.subplots(
        len(data), count, figsize=(0.85 * count + 1.4, 1.45 * len(data)), squeeze=False
    )
    for row, (kind, (images, labels)) in enumerate(data.items()):
        for col in range(count):
            ax = axes[row, col]
            ax.imshow(
                images[col].permute(1, 2, 0).squeeze(-1).clamp(0, 1),
                cmap="gray",
                vmin=0,
                vmax=1,
            )
            ax.set_title(f"{int(labels[col])}", fontsize=TEXT_SIZE)
            ax.set_xticks([]), ax.set_yticks([])
        axes[row, 0].set_ylabel(_short(kind))
    fig.suptitle("the attacked images (titles: labels)")
    return legible(fig, horizontal_labels=True)


def final_grid(runs: Mapping, data: Mapping, kind: str, count: int):
    """The report's comparison on every attacked image of one kind: the true images on top, then one row
    per attack with its final reconstruction (clipped to [0, 1]), each row named on its left. Returns the
    figure."""
    names = ["truth", *runs[kind, 0]]
    fig, axes = plt.subplots(
        len(names),
        count,
        figsize=(0.7 * count + 2.6, 0.75 * len(names) + 0.6),
        squeeze=False,
    )
    for row, name in enumerate(names):
        for col in range(count):
            image = (
                data[kind][0][col]
                if name == "truth"
                else runs[kind, col][name].images[0].clamp(0, 1)
            )
            axes[row, col].imshow(
                image.permute(1, 2, 0).squeeze(-1).cpu(), cmap="gray", vmin=0, vmax=1
            )
            axes[row, col].set_xticks([]), axes[row, col].set_yticks([])
        axes[row, 0].set_ylabel(name)
    fig.suptitle(f"{_short(kind)}: final reconstructions")
    return legible(fig, horizontal_labels=True)


def reconstruction_strips(runs: Mapping, data: Mapping, columns: int = 6) -> list:
    """Fig. 1 per data kind: one row per L-BFGS attack (:data:`MATCHING_LOSS`) on the kind's first image,
    its snapshots over the L-BFGS steps, the true image last (:func:`gitutor.viz.stacked_strip`). Returns the
    figures, one per kind."""
    figures = []
    for kind, (images, _) in data.items():
        snapshots = {
            name: result.snapshots
            for name, result in runs[kind, 0].items()
            if name in MATCHING_LOSS
        }
        fig = stacked_strip(
            snapshots,
            images[:1],
            columns=columns,
            title=f"{_short(kind)}: over L-BFGS steps",
        )
        fig.set_size_inches(1.1 * (columns + 1) + 2.6, 1.1 * len(snapshots) + 0.8)
        figures.append(legible(fig, horizontal_labels=True))
    return figures


def attack_curves(runs: Mapping, data: Mapping):
    """Fig. 2 per data kind (one row each, first image): the MSE of every attack's snapshots to the
    true image (clipped to [0, 1], :func:`~gitutor.chapters.admm_comparison.report.snapshot_curve`) and the squared
    gradient distance of the L-BFGS attacks (:data:`MATCHING_LOSS`; cosine matching runs Adam steps and
    minimises another loss) per step, both on log axes. Returns the figure."""
    fig, axes = plt.subplots(len(data), 2, figsize=(10, 3.6 * len(data)), squeeze=False)
    for row, (kind, (images, _)) in enumerate(data.items()):
        matched, truth = (
            {name: r for name, r in runs[kind, 0].items() if name in MATCHING_LOSS},
            images[:1],
        )
        steps = {name: [s for s, _ in r.snapshots] for name, r in matched.items()}
        plot_curves(
            {name: snapshot_curve(r, truth, mse) for name, r in matched.items()},
            x=steps,
            logy=True,
            xlabel="L-BFGS step",
            ylabel="MSE to the truth",
            title=f"{_short(kind)}: MSE",
            ax=axes[row, 0],
        )
        plot_curves(
            {name: r.history["loss"] for name, r in matched.items()},
            logy=True,
            xlabel="L-BFGS step",
            ylabel="matching loss D",
            title=f"{_short(kind)}: loss",
            ax=axes[row, 1],
        )
    handles, labels = axes[0, 0].get_legend_handles_labels()
    for ax in axes.flat:
        if ax.get_legend() is not None:
            ax.get_legend().remove()  # one legend for the figure, above it (clear of the curves)
    legible(fig)
    fig.legend(
        handles,
        labels,
        loc="lower center",
        ncol=3,
        bbox_to_anchor=(0.5, 1.0),
        fontsize=TEXT_SIZE,
    )
    return fig
