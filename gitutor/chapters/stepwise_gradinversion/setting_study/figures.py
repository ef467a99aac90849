"""Figures of the setting study: curves along the budget and the one-factor-at-a-time chart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitutor.chapters.stepwise_gradinversion.setting_study.settings import (
    BASE,
    FACTORS,
    METHODS,
)


def curve_figure(
    summary: Mapping[tuple, Mapping],
    keys: Sequence[tuple],
    metric: str = "SSIM",
    title: str = "",
    labels: Mapping[tuple, str] | None = None,
    ax=None,
):
    """``metric`` (``"SSIM"`` or ``"PSNR"``) against iterations (log axis) for each key of
    ``summary`` in ``keys``: the mean over batches as a line, the 95 % interval as a band
    (clipped to the axes where a single batch makes it unbounded). ``labels``: the legend entry of
    each key (default: method · the setting's difference from :data:`BASE`); ``ax``: draw into it
    instead of a new figure. Returns the figure."""
    import matplotlib.pyplot as plt

    if metric not in ("SSIM", "PSNR"):
        raise ValueError(f"metric must be 'SSIM' or 'PSNR', got {metric!r}")
    fig, ax = plt.subplots(figsize=(6.4, 3.6)) if ax is None else (ax.figure, ax)
    for key in keys:
        curve = summary[key]
        ts = [max(t, 1) for t in curve["t"]]
        means = [v.mean for v in curve[metric]]
        (line,) = ax.plot(
            ts,
            means,
            marker="o",
            ms=3,
            label=labels[key] if labels else f"{key[1]} · {key[0].label(BASE)}",
        )
        ax.fill_between(
            ts,
            [v.low for v in curve[metric]],
            [v.high for v in curve[metric]],
            color=line.get_color(),
            alpha=0.15,
        )
    ax.set(
        xscale="log",
        xlabel="iteration (1 = start)",
        ylabel=metric + (" (dB)" if metric == "PSNR" else ""),
        title=title,
    )
    low, high = (
        min(v.mean for k in keys for v in summary[k][metric]),
        max(v.mean for k in keys for v in summary[k][metric]),
    )
    pad = 0.25 * (high - low or 1)
    ax.set_ylim(low - pad, high + pad)
    ax.legend(fontsize=9, loc="upper left")
    fig.tight_layout()
    return fig


def factor_figure(summary: Mapping[tuple, Mapping], budget: int):
    """Final SSIM (mean, 95 % interval) of every setting run for ``budget`` iterations, one row
    per setting (the base first, then :data:`FACTORS` order) and one marker colour per method:
    the whole one-factor-at-a-time study in one figure. Returns the figure.

    Raises:
        ValueError: if no setting was run for ``budget`` iterations.
    """
    import matplotlib.pyplot as plt

    order = [BASE, *(s for group in FACTORS.values() for s in group)]
    settings = [s for s in order if any((s, m, budget) in summary for m in METHODS)]
    if not settings:
        raise ValueError(f"no setting was run for {budget} iterations")
    fig, ax = plt.subplots(figsize=(9.5, 0.45 * len(settings) + 1.2))
    for k, method in enumerate(METHODS):
        rows = [
            (i, summary[(s, method, budget)]["SSIM"][-1])
            for i, s in enumerate(settings)
            if (s, method, budget) in summary
        ]
        if not rows:
            continue
        ys = [i + 0.2 * (k - 1) for i, _ in rows]
        means = [v.mean for _, v in rows]
        errors = [
            [v.mean - max(v.low, -1.0) for _, v in rows],
            [min(v.high, 1.0) - v.mean for _, v in rows],
        ]
        ax.errorbar(means, ys, xerr=errors, fmt="o", ms=4, capsize=2, label=method)
    ax.set_yticks(range(len(settings)), [s.label(BASE) for s in settings], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="grey", lw=0.5)
    ax.set(xlabel=f"SSIM after {budget} iterations (mean, 95 % interval)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def run_curves(
    summary: Mapping[tuple, Mapping], labels: Mapping[tuple, str], title: str
):
    """PSNR (dB) and SSIM along the runs side by side (:func:`curve_figure` on each, one shared legend
    below both panels, clear of their axis labels), readable at page width (:func:`gitutor.viz.legible`).
    ``labels``: each key of ``summary`` → its legend entry, in drawing order. Returns the figure.

    Raises:
        ValueError: if ``labels`` is empty (and as :func:`curve_figure`).
    """
    import matplotlib.pyplot as plt

    from gitutor.viz import BODY_PT, legible

    if not labels:
        raise ValueError("labels must name at least one curve")
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    for ax, metric in zip(axes, ("PSNR", "SSIM")):
        curve_figure(summary, list(labels), metric, labels=labels, ax=ax)
        ax.get_legend().remove()
    fig.suptitle(title)
    legible(fig)
    rows = -(-len(labels) // 2)  # legend rows, two entries each
    width, height = fig.get_size_inches()
    extra = 0.24 * rows + 0.05  # inches for the legend under the x labels
    fig.set_size_inches(width, height + extra)
    fig.subplots_adjust(
        bottom=(extra + 0.6) / (height + extra), top=1 - 0.45 / (height + extra)
    )
    fig.legend(
        *axes[0].get_legend_handles_labels(),
        loc="lower center",
        ncol=2,
        frameon=False,
        fontsize=BODY_PT,
        borderaxespad=0.1,
    )
    return fig
