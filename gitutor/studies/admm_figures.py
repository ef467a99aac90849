"""Chapter 07's figures: the attacked image of each data kind, the report's Fig. 1 strips (every
attack's dummy image over the L-BFGS steps) and Fig. 2 curves (MSE to the true image and matching
loss per step).

``runs`` below is ``{(kind, image index): {attack: AttackResult}}`` from
:func:`gitutor.studies.admm_rounds.attack_first_round`; ``data`` is ``{kind: (images, labels)}`` from
:func:`~gitutor.studies.admm_rounds.load_kinds`. Images are shown clipped to [0, 1].
"""
from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt

from gitutor.metrics import mse
from gitutor.studies.admm_report import snapshot_curve
from gitutor.studies.admm_rounds import NAMES
from gitutor.studies.figures import stacked_strip
from gitutor.viz import plot_curves


def data_figure(data: Mapping):
    """The first image of every data kind with its label, side by side. Returns the figure.

    Raises:
        ValueError: if ``data`` is empty.
    """
    if not data:
        raise ValueError("data must hold at least one kind")
    fig, axes = plt.subplots(1, len(data), figsize=(2.2 * len(data), 2.4), squeeze=False)
    for ax, (kind, (images, labels)) in zip(axes[0], data.items()):
        ax.imshow(images[0].permute(1, 2, 0).squeeze(-1).clamp(0, 1), cmap="gray", vmin=0, vmax=1)
        ax.set_title(f"{NAMES[kind]}\nlabel {int(labels[0])}", fontsize=8)
        ax.axis("off")
    fig.tight_layout()
    return fig


def reconstruction_strips(runs: Mapping, data: Mapping, columns: int = 9) -> list:
    """Fig. 1 per data kind: one row per attack on the kind's first image, its snapshots over the
    L-BFGS steps, the true image last (:func:`gitutor.studies.figures.stacked_strip`). Returns the
    figures, one per kind."""
    figures = []
    for kind, (images, _) in data.items():
        snapshots = {name: result.snapshots for name, result in runs[kind, 0].items()}
        figures.append(stacked_strip(snapshots, images[:1], columns=columns,
                                     title=f"{NAMES[kind]}: reconstructions over L-BFGS steps"))
    return figures


def attack_curves(runs: Mapping, data: Mapping):
    """Fig. 2 per data kind (one row each, first image): the MSE of every attack's snapshots to the
    true image (clipped to [0, 1], :func:`~gitutor.studies.admm_report.snapshot_curve`) and its
    matching loss (gradient or increment distance) per L-BFGS step, both on log axes. Returns the
    figure."""
    fig, axes = plt.subplots(len(data), 2, figsize=(10, 3.1 * len(data)), squeeze=False)
    for row, (kind, (images, _)) in enumerate(data.items()):
        results, truth = runs[kind, 0], images[:1]
        steps = {name: [s for s, _ in r.snapshots] for name, r in results.items()}
        plot_curves({name: snapshot_curve(r, truth, mse) for name, r in results.items()}, x=steps, logy=True,
                    xlabel="L-BFGS step", ylabel="MSE to the true image", title=f"{NAMES[kind]}: MSE",
                    ax=axes[row, 0])
        plot_curves({name: r.history["loss"] for name, r in results.items()}, logy=True, xlabel="L-BFGS step",
                    ylabel="matching loss D", title=f"{NAMES[kind]}: loss (gradient or increment distance)",
                    ax=axes[row, 1])
    fig.tight_layout()
    return fig
