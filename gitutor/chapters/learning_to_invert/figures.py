"""Chapter 06's figures: the reconstructions of Wu et al.'s Fig. 2, g_θ's training curves, and the
auxiliary-set-size ablation of Fig. 3a.

``cells`` below is ``{(model, B, defense): Comparison}`` from
:func:`gitutor.chapters.learning_to_invert.experiments.lti_vs_ig`; ``names`` maps the defenses to display names
(:func:`gitutor.chapters.learning_to_invert.report.defense_names`), in the order of the table's columns.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from gitutor.viz import plot_curves, show_grid


def reconstruction_grid(cells: Mapping, model: str, target_x: torch.Tensor, names: Mapping[str, str],
                        shown: int):
    """Fig. 2: the first ``shown`` true targets ``(N, C, H, W)``, then per defense a row of Inverting
    Gradients' and a row of LTI's reconstructions of them (B = 1, ``model``). Returns the figure.

    Raises:
        ValueError: if ``shown`` exceeds the targets IG attacked.
    """
    first = cells[model, 1, next(iter(names))]
    if not 1 <= shown <= len(first.ig_images):
        raise ValueError(f"shown must lie in [1, {len(first.ig_images)}] (the targets IG attacked), got {shown}")
    rows, titles = [target_x[:shown]], ["truth"] * shown
    for defense, name in names.items():
        cell = cells[model, 1, defense]
        rows += [cell.ig_images[:shown, 0], cell.lti_images[:shown, 0]]
        titles += [f"IG {name}"] * shown + [f"LTI {name}"] * shown
    return show_grid(torch.cat([r.cpu() for r in rows]), titles, ncols=shown, scale=1.6)


def training_curves(cells: Mapping, model: str, batch_sizes: Sequence[int], names: Mapping[str, str]):
    """g_θ's validation loss (Eq. 3 on the held-out validation pairs) per epoch, one panel per batch
    size B, one curve per defense. Returns the figure."""
    fig, axes = plt.subplots(1, len(batch_sizes), figsize=(5 * len(batch_sizes), 3.2), squeeze=False)
    for ax, b in zip(axes[0], batch_sizes):
        curves = {name: cells[model, b, d].history["val_loss"] for d, name in names.items()}
        plot_curves(curves, xlabel="epoch", ylabel="validation MSE", title=f"{model}, B = {b}", ax=ax)
    fig.tight_layout()
    return fig


def aux_size_figure(curves: Mapping[str, Sequence[float]], sizes: Sequence[int],
                    ig_mse: Mapping[str, float]):
    """Fig. 3a: LTI's held-out MSE against the auxiliary-set size (log axis), one curve per defense
    (:func:`~gitutor.chapters.learning_to_invert.report.aux_size_curves`), and Inverting Gradients' MSE under the
    same defense as a dashed line of the same colour (``ig_mse`` keyed like ``curves``). Returns the
    Axes."""
    ax = plot_curves(curves, x={name: sizes for name in curves}, xlabel="auxiliary images",
                     ylabel="MSE (held-out)", title="Fig. 3a: LTI vs auxiliary-set size")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for color, name in zip(colors, curves):
        ax.axhline(ig_mse[name], ls="--", color=color, lw=0.8)
    ax.set_xscale("log")
    return ax
