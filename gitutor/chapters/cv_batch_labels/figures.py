"""Chapter 03's figures (Ye et al., AAAI 2024, Stage I): the gradient rows of a batch, Fig. 3's CV of sorted
features, the surface of Eq. 6, the search's progress, Fig. 4(a)'s label distribution, the batch-size sweep
and the effect of M and of the auxiliary images. Every function returns its ``matplotlib`` figure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from gitutor.labels import FeatureCV
from gitutor.viz import legible


def row_size_figure(w: torch.Tensor, classes: torch.Tensor, true_counts: torch.Tensor):
    """Left: the row means of a ``(C, m)`` FC weight gradient; right: −row mean of each coarse class against
    its true count."""
    row_means = w[classes].mean(dim=1)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
    axes[0].plot(w.mean(dim=1).numpy(), lw=0.6)
    axes[0].set(
        xlabel="class (row of ∇W^FC)",
        ylabel="row mean",
        title="negative rows = classes present",
    )
    axes[1].scatter(true_counts.numpy(), -row_means.numpy())
    for count, mean, label in zip(
        true_counts.tolist(), (-row_means).tolist(), classes.tolist()
    ):
        axes[1].annotate(str(label), (count, mean))
    axes[1].set(
        xlabel="true number of images of the class",
        ylabel="− row mean",
        title="row size grows with the count, noisily",
    )
    return legible(fig)


def cv_figure(stats: FeatureCV):
    """Eq. 5 / Fig. 3: the CV of every sorted feature rank with the M selected ranks t, and the mean feature h̄."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
    ranks, chosen = np.arange(len(stats.cv)), stats.indices.numpy()
    finite_cv = stats.cv[torch.isfinite(stats.cv)]
    axes[0].plot(ranks, stats.cv.numpy(), lw=1)
    axes[0].scatter(
        chosen,
        stats.cv[stats.indices].numpy(),
        color="C3",
        s=12,
        zorder=3,
        label=f"t: the M = {len(chosen)} smallest CVs",
    )
    axes[0].set(
        xlabel="sorted feature rank (0 = largest activation)",
        ylabel="CV = std / mean",
        title=f"CV of sorted features over {stats.num_aux} auxiliary images (cf. Fig. 3)",
        ylim=(0, min(float(finite_cv.max()), 3 * float(finite_cv.median())) * 1.05),
    )
    axes[0].legend()
    axes[1].plot(ranks, stats.mean_feature.numpy(), lw=1)
    axes[1].scatter(
        chosen, stats.mean_feature[stats.indices].numpy(), color="C3", s=12, zorder=3
    )
    axes[1].set(xlabel="sorted feature rank", ylabel="h̄", title="mean sorted feature h̄")
    return legible(fig)


def surface_figure(
    v1,
    v2,
    surface,
    integer: torch.Tensor,
    on_line: torch.Tensor,
    truth: tuple[int, int],
):
    """Eq. 6 for two classes: J on the ``(v1, v2)`` grid with the line v₁ + v₂ = N, and J at the integer
    candidates ``integer`` ``(k, 2)`` (values ``on_line``); ``truth`` is starred."""
    total = int(integer[0].sum())
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.8))
    image = axes[0].contourf(
        v1.numpy(), v2.numpy(), surface.numpy(), levels=30, cmap="viridis"
    )
    fig.colorbar(image, ax=axes[0], label="J(v)")
    low, high = float(v1.min()), total - float(v1.min())
    axes[0].plot(
        [low, high], [high, low], color="white", lw=1, label=f"v₁ + v₂ = {total}"
    )
    axes[0].scatter(integer[:, 0], integer[:, 1], color="white", s=12)
    axes[0].scatter(
        [truth[0]], [truth[1]], color="C3", marker="*", s=120, label=f"truth {truth}"
    )
    axes[0].set(xlabel="v₁", ylabel="v₂", title="J is constant along rays")
    axes[0].legend(loc="upper right")
    axes[1].bar([f"({a},{b})" for a, b in integer.tolist()], on_line.numpy())
    axes[1].set(
        xlabel=f"counts (v₁, v₂) with v₁ + v₂ = {total}",
        ylabel="J(v)",
        yscale="log",
        title="the integer candidates",
    )
    return legible(fig)


def history_figure(histories: Mapping[str, Sequence[float]], budget: int | None = None):
    """Best J of the population against the generation, one curve per search (generation axis logarithmic
    above 10), with a dotted line at ``budget`` generations (the paper's "fewer than 200")."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for name, history in histories.items():
        ax.plot(history, label=name)
    if budget is not None:
        ax.axvline(budget, color="0.3", linestyle=":", label=f"{budget} generations")
    ax.set_xscale("symlog", linthresh=10)
    ax.set(
        xlabel="generation",
        ylabel="best J(v) in the population",
        yscale="log",
        title="objective vs generation",
    )
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    return legible(fig)


def distribution_figure(labelings: Mapping[str, torch.Tensor], num_classes: int):
    """Fig. 4(a): images per class of each ``(N,)`` labelling, side by side, over the classes of the first
    labelling (the truth), so that every class label stays readable; the legend says how many images a
    labelling puts in other classes."""
    shown = torch.unique(next(iter(labelings.values())))
    positions, width = np.arange(len(shown)), 0.8 / len(labelings)
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for index, (name, labels) in enumerate(labelings.items()):
        counts = torch.bincount(labels, minlength=num_classes)
        other = int(counts.sum() - counts[shown].sum())
        ax.bar(
            positions + (index - (len(labelings) - 1) / 2) * width,
            counts[shown].numpy(),
            width=width,
            label=name + (f" ({other} in other classes)" if other else ""),
        )
    ax.set_xticks(positions, [str(c) for c in shown.tolist()], rotation=90)
    batch = len(next(iter(labelings.values())))
    ax.set(
        xlabel="class (those of the batch)",
        ylabel="images in the batch",
        title=f"label distribution of a batch of {batch}",
    )
    ax.legend()
    return legible(fig)


#: Marker and line style per curve of :func:`curves_figure`, so that overlapping curves stay visible.
MARKERS, STYLES = ("o", "s", "^", "D", "v", "P"), ("-", "--", ":", "-.")


def curves_figure(
    panels: Sequence[tuple[str, str, Sequence, Mapping[str, Sequence[float]]]],
    ylim=None,
):
    """One log-x panel per ``(xlabel, ylabel, xs, {curve name: values at xs})``, the first panel's legend to the
    right of the last."""
    fig, axes = plt.subplots(1, len(panels), figsize=(8, 3.4), squeeze=False)
    for ax, (xlabel, ylabel, xs, curves) in zip(axes[0], panels):
        for j, (name, values) in enumerate(
            curves.items()
        ):  # offset, marked, dashed: no curve hides another
            shift = 1.04 ** (j - (len(curves) - 1) / 2)
            ax.plot(
                [x * shift for x in xs],
                values,
                marker=MARKERS[j % len(MARKERS)],
                linestyle=STYLES[j % len(STYLES)],
                label=name,
            )
        ax.set(
            xscale="log",
            xlabel=xlabel,
            ylabel=ylabel,
            **({"ylim": ylim} if ylim else {}),
        )
        if not ylim:
            ax.set_ylim(
                bottom=0
            )  # a rate or a time from 0: a small drift does not look large
        ax.set_xticks(list(xs), [str(x) for x in xs])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    handles, names = axes[0][
        0
    ].get_legend_handles_labels()  # the first panel's curves, right of the last
    axes[0][-1].legend(
        handles, names, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False
    )
    return legible(fig)


def sweep_figure(
    sweep: Mapping[str, Mapping[str, Sequence[float]]],
    seconds: Sequence[float],
    batch_sizes: Sequence[int],
):
    """Per-label accuracy and exact-batch rate of every method, and ours' ms per recovery, against the batch
    size (:func:`curves_figure` of :func:`~gitutor.chapters.cv_batch_labels.experiments.batch_size_sweep`)."""
    n = "batch size N"
    return curves_figure(
        [
            (
                n,
                "per-label accuracy",
                batch_sizes,
                {k: v["accuracy"] for k, v in sweep.items()},
            ),
            (
                n,
                "exact-batch rate",
                batch_sizes,
                {k: v["exact"] for k, v in sweep.items()},
            ),
            (
                n,
                "ms per recovery (ours)",
                batch_sizes,
                {"ours": [1000 * s for s in seconds]},
            ),
        ]
    )


def effects_figure(
    by_m: Mapping[int, tuple[float, float]], by_aux: Mapping[int, tuple[float, float]]
):
    """Per-label accuracy and exact-batch rate of Eq. 6's minimum against M and against the number of auxiliary
    images (:func:`~gitutor.chapters.cv_batch_labels.experiments.aux_and_m_effects`)."""
    panels = [
        (
            xlabel,
            "",
            list(results),
            {
                "per-label accuracy": [r[0] for r in results.values()],
                "exact batches": [r[1] for r in results.values()],
            },
        )
        for results, xlabel in (
            (by_m, "M (ranks with the smallest CV)"),
            (by_aux, "auxiliary images"),
        )
    ]
    return curves_figure(panels, ylim=(0, 1.02))
