"""Chapter 02's figures (Wang, Liang & He, ICLR 2024): the λ landscape (Fig. 1), the FCN reconstructions
(Table 6) and the reduced Table 3's reconstructions, each readable at page width
(:func:`gitutor.viz.legible`: text at least the body's size, no hidden titles)."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import torch

from gitutor.labels import LambdaProblem
from gitutor.viz import legible, show_grid

#: The landscape's lowest plotted loss: below it a log axis would stretch float64 round-off over decades.
LOSS_FLOOR = 1e-14


def plot_landscapes(
    landscapes: Mapping[str, tuple[LambdaProblem, object, float] | Mapping],
    curve_lambdas,
):
    """Fig. 1: Eq. 5's loss against λ per network, ``{name: (problem, SoftLabelResult, true λ)}`` (or the dicts of
    :func:`~gitutor.chapters.idlg_soft_labels.experiments.landscape_examples`), on a ``curve_lambdas = (low, high, steps)``
    grid widened to 1.3 |recovered λ| (|λ| > 0.5). Returns the figure."""
    landscapes = {
        name: (v["problem"], v["result"], v["lam_star"])
        if isinstance(v, Mapping)
        else v
        for name, v in landscapes.items()
    }
    fig, axes = plt.subplots(
        1, len(landscapes), figsize=(5.5 * len(landscapes), 5.0), squeeze=False
    )
    for ax, (name, (problem, result, lam_star)) in zip(axes[0], landscapes.items()):
        _, high, steps = curve_lambdas
        reach = max(high, 1.3 * abs(result.lam))
        grid = torch.linspace(-reach, reach, steps, dtype=torch.float64)
        # the basins at λ and λ* are narrower than the grid's step: sample them finely, so the curve
        # runs through the recovered λ and the star sits on it
        for centre in (result.lam, lam_star):
            width = 0.02 * abs(centre)
            grid = torch.cat(
                [grid, centre + torch.linspace(-width, width, 401, dtype=grid.dtype)]
            )
        grid = grid[grid.abs() > 0.5].sort().values
        ax.semilogy(grid, problem.loss(grid).clamp_min(LOSS_FLOOR), lw=1)
        ax.axvline(lam_star, color="k", ls=":", label=f"true λ* = {lam_star:.3f}")
        at = problem.loss(torch.tensor([result.lam], dtype=torch.float64))
        ax.plot(
            [result.lam],
            [float(at.clamp_min(LOSS_FLOOR))],
            "r*",
            ms=12,
            label=f"recovered ({result.method}) {result.lam:.3f}",
        )
        ax.set(title=name, xlabel="λ", ylabel="1000 · label variance (Eq. 5)")
        ax.legend(
            loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False
        )  # below: clear of the star
    return legible(fig)


def fcn_grid(runs: Mapping[str, tuple[torch.Tensor, torch.Tensor, object]]):
    """Truth and analytic reconstruction rows per augmentation, ``{kind: (truths (n, C, H, W),
    reconstructions (n, C, H, W), scores)}`` from :func:`~gitutor.chapters.idlg_soft_labels.experiments.fcn_inversion`.
    Returns the figure.

    Raises:
        ValueError: if ``runs`` is empty.
    """
    if not runs:
        raise ValueError("runs must hold at least one augmentation")
    n = len(next(iter(runs.values()))[0])
    images = torch.cat(
        [t for truths, recovered, _ in runs.values() for t in (truths, recovered)]
    )
    titles = [
        f"{kind}\n{what}" if i == 0 else ""
        for kind in runs
        for what in ("truth", "recovered")
        for i in range(n)
    ]  # a row's name on its first image
    return legible(show_grid(images, titles=titles, ncols=n, scale=1.4))


def table3_grid(matching: Mapping, settings, recognisable: float):
    """The reduced Table 3's first run of each augmentation: the truth, then every matching / label setting
    (``settings``, in order) titled with its PSNR (dB) and ✓ at or above ``recognisable`` dB, two lines per
    augmentation when the truth and the settings split evenly; ``matching`` is :func:`~gitutor.chapters.idlg_soft_labels.matching.matching_table`'s dict.
    Returns the figure.

    Raises:
        ValueError: if ``matching`` holds no images.
    """
    if not matching["images"]:
        raise ValueError("matching holds no images")
    titles = []
    for kind in matching["first"]:
        titles += [f"{kind}\ntruth"] + [
            f"{s.replace(' / ', ' ')}\n{matching['scores'][kind, s][0][0]:.1f} dB "
            f"{'✓' if matching['scores'][kind, s][0][0] >= recognisable else '✗'}"
            for s in settings
        ]
    images = torch.cat(matching["images"]).clamp(0, 1)
    columns = (
        (len(settings) + 1) // 2 if len(settings) % 2 else len(settings) + 1
    )  # two lines per kind
    return legible(show_grid(images, titles=titles, ncols=columns, scale=1.8))


def table3_curves(
    curves: Mapping[tuple[str, str], tuple[list[float], list[float]]],
    decays,
    recognisable: float,
):
    """The recorded Table 3 study's median PSNR curves (dB) against the fraction of each attack's budget, one
    panel per augmentation and one line per setting
    (:func:`~gitutor.chapters.idlg_soft_labels.table3_reading.median_curves`), with the learning-rate decays
    (fractions ``decays``, dotted) and the book's ``recognisable`` dB (dashed). Returns the figure.

    Raises:
        ValueError: if ``curves`` is empty.
    """
    if not curves:
        raise ValueError("curves must hold at least one setting")
    kinds = list(dict.fromkeys(kind for kind, _ in curves))
    fig, axes = plt.subplots(1, len(kinds), figsize=(11, 5), sharey=True)
    axes = [axes] if len(kinds) == 1 else list(axes)
    for ax, kind in zip(axes, kinds):
        for (k, setting), (x, y) in curves.items():
            if k == kind:
                style = "-" if setting.startswith("L2") else "--"
                wide = setting.endswith(
                    "GT"
                )  # under the recovered label's line, which it meets
                ax.plot(
                    x,
                    y,
                    style,
                    label=setting,
                    lw=4 if wide else 1.5,
                    alpha=0.45 if wide else 1,
                )
        for at in decays:
            ax.axvline(at, color="grey", ls=":", lw=1)
        ax.axhline(recognisable, color="grey", ls="--", lw=1)
        ax.set(title=kind, xlabel="fraction of the budget")
    axes[0].set_ylabel("median PSNR (dB)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, bbox_to_anchor=(0.5, 0.0))
    legible(fig)
    fig.subplots_adjust(bottom=0.36)
    return fig
