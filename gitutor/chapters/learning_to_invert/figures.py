"""Chapter 06's figures: the reconstructions of Wu et al.'s Fig. 2, g_θ's training curves, the
auxiliary-set-size ablation of Fig. 3a and the IG baseline against its budget; text at the page's size
(:func:`gitutor.viz.legible`).

``cells`` below is ``{(model, B, defense): Comparison}`` from
:func:`gitutor.chapters.learning_to_invert.experiments.lti_vs_ig`; ``names`` maps the defenses to display names
(:func:`gitutor.chapters.learning_to_invert.report.defense_names`), in the order of the table's columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from gitutor.viz import legible, plot_curves, show_grid


def reconstruction_grid(
    cells: Mapping,
    model: str,
    target_x: torch.Tensor,
    names: Mapping[str, str],
    shown: int,
):
    """Fig. 2: the first ``shown`` true targets ``(N, C, H, W)``, then per defense a row of Inverting
    Gradients' and a row of LTI's reconstructions of them (B = 1, ``model``). Returns the figure.

    Raises:
        ValueError: if ``shown`` exceeds the targets IG attacked.
    """
    first = cells[model, 1, next(iter(names))]
    if not 1 <= shown <= len(first.ig_images):
        raise ValueError(
            f"shown must lie in [1, {len(first.ig_images)}] (the targets IG attacked), got {shown}"
        )
    rows, labels = [target_x[:shown]], ["truth"]
    for defense, name in names.items():
        cell = cells[model, 1, defense]
        rows += [cell.ig_images[:shown, 0], cell.lti_images[:shown, 0]]
        labels += [f"IG, {name}", f"LTI, {name}"]
    fig = show_grid(torch.cat([r.cpu() for r in rows]), ncols=shown, scale=1.2)
    for row, label in enumerate(labels):  # each row named on its left
        ax = fig.axes[row * shown]
        ax.axis("on"), ax.set_xticks([]), ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.set_ylabel(label)
    fig.set_size_inches(
        1.1 * shown + 2.6, 1.05 * len(labels)
    )  # room for the row names, square images
    return legible(fig, horizontal_labels=True)


def training_curves(
    cells: Mapping, model: str, batch_sizes: Sequence[int], names: Mapping[str, str]
):
    """g_θ's validation loss (Eq. 3 on the held-out validation pairs) per epoch, one panel per batch
    size B, one curve per defense. Returns the figure."""
    fig, axes = plt.subplots(
        1, len(batch_sizes), figsize=(5 * len(batch_sizes), 3.2), squeeze=False
    )
    for ax, b in zip(axes[0], batch_sizes):
        curves = {
            name: cells[model, b, d].history["val_loss"] for d, name in names.items()
        }
        plot_curves(
            curves,
            xlabel="epoch",
            ylabel="validation MSE",
            title=f"{model}, B = {b}",
            ax=ax,
        )
    return legible(fig)


def aux_size_figure(
    curves: Mapping[str, Sequence[float]],
    sizes: Sequence[int],
    ig_mse: Mapping[str, float],
):
    """Fig. 3a: LTI's held-out MSE against the auxiliary-set size (log axis), one curve per defense
    (:func:`~gitutor.chapters.learning_to_invert.report.aux_size_curves`), and Inverting Gradients' MSE under the
    same defense as a dashed line of the same colour (``ig_mse`` keyed like ``curves``). Returns the
    Axes."""
    ax = plot_curves(
        curves,
        x={name: sizes for name in curves},
        xlabel="auxiliary images",
        ylabel="MSE (held-out)",
        title="Fig. 3a: LTI vs auxiliary-set size",
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for color, name in zip(colors, curves):
        ax.axhline(ig_mse[name], ls="--", color=color, lw=0.8)
    ax.set_xscale("log")
    legible(ax.figure)
    return ax


def budget_figure(
    errors: Mapping[str, Mapping[int, Sequence[float]]],
    names: Mapping[str, str],
    lti: Mapping[str, float],
    table_budget: int,
    chosen: Mapping[str, int],
):
    """Inverting Gradients' mean MSE on the recorded targets against its budget (log axis), one curve per defense
    (``errors``: :func:`~gitutor.chapters.learning_to_invert.budget.ig_budget_errors`, keyed by defense), the
    budget chosen on auxiliary images (``chosen``) as a large marker, LTI's mean MSE on the same targets as a
    dashed line of the same colour (``lti`` keyed by defense) and Table 1's budget as a grey vertical line.
    Returns the figure."""
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for color, (defense, by_budget) in zip(colors, errors.items()):
        budgets = sorted(by_budget)
        ax.plot(
            budgets,
            [np.mean(by_budget[b]) for b in budgets],
            marker="o",
            color=color,
            label=f"IG, {names[defense]}",
        )
        ax.plot(
            chosen[defense],
            np.mean(by_budget[chosen[defense]]),
            "s",
            ms=11,
            mfc="none",
            color=color,
        )
        ax.axhline(lti[defense], ls="--", color=color, lw=1)
    ax.axvline(table_budget, color="grey", lw=1, ls=":")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="IG iterations (budget)",
        ylabel="mean MSE (dashed: LTI)",
        title=f"IG on {len(next(iter(errors.values()))[table_budget])} targets"
        " (square: budget chosen on aux.)",
    )
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.grid(alpha=0.3)
    return legible(fig)


def controls_figure(
    targets: torch.Tensor,
    cells: Mapping,
    model: str,
    names: Mapping[str, str],
    shown: int = 4,
):
    """The controls beside real reconstructions: the first ``shown`` targets ``(N, C, H, W)``, their flat
    mean-grey image and 4×4 thumbnail (:func:`gitutor.controls.control_images`), and per defense the B = 1
    reconstruction with the highest PSNR among IG, DLG and LTI, each titled with its PSNR (dB). Returns the
    figure."""
    from gitutor.controls import control_images
    from gitutor.metrics import psnr

    x = targets[:shown].cpu()
    controls = control_images(x)
    rows = {
        "truth": (x, [""] * shown),
        **{k: (controls[k], [""] * shown) for k in ("mean colour", "4×4 thumbnail")},
    }
    for d, name in names.items():
        cell = cells[model, 1, d]
        found = {
            m: cell.matched(m)[:shown]
            for m in ("IG", "DLG", "LTI")
            if m != "DLG" or cell.dlg_images is not None
        }
        best = [
            max(found, key=lambda m: float(psnr(found[m][i][0], found[m][i][1])))
            for i in range(shown)
        ]
        rows[f"best, {name}"] = (
            torch.cat([found[m][i][0] for i, m in enumerate(best)]).cpu(),
            [f"{m}, " for m in best],
        )
    titles = [
        ("" if label == "truth" else f"{tag}{float(psnr(r[None], t[None])):.0f} dB")
        for label, (images, tags) in rows.items()
        for r, t, tag in zip(images, x, tags)
    ]
    rows = {label: images for label, (images, _) in rows.items()}
    fig = show_grid(torch.cat(list(rows.values())), titles, ncols=shown, scale=1.2)
    for row, label in enumerate(rows):
        ax = fig.axes[row * shown]
        ax.axis("on"), ax.set_xticks([]), ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.set_ylabel(label)
    fig.set_size_inches(1.3 * shown + 2.8, 1.25 * len(rows))
    return legible(fig, horizontal_labels=True)
