"""Chapter 01's figures: the seed study's reconstructions and the defense sweep (Zhu et al. 2019, §4–5)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from gitutor.viz import show_grid


def _mark(value: float, success: float, recognisable: float | None = None) -> str:
    """✓ at or above ``success`` dB, ~ at or above ``recognisable`` dB (when given), else ✗."""
    return "✓" if value >= success else "~" if recognisable is not None and value >= recognisable else "✗"


def seed_grid(rows: Sequence[dict], success: float, suptitle: str = ""):
    """Truth and reconstruction of every :func:`~gitutor.studies.dlg_sweeps.seed_study` row side by side,
    titled with the seed and the PSNR (✓ at or above ``success`` dB). Returns the figure.

    Raises:
        ValueError: if ``rows`` is empty.
    """
    if not rows:
        raise ValueError("rows must hold at least one seed_study row")
    images = torch.cat([torch.cat([row["truth"], row["result"].images]) for row in rows])
    titles = [t for row in rows for t in (f"seed {row['seed']}\ntruth", f"{row['psnr']:.1f} dB {_mark(row['psnr'], success)}")]
    return show_grid(images, titles=titles, ncols=2 * min(len(rows), 4), suptitle=suptitle)


def defense_curves(sweep: Mapping[tuple[str, float], tuple[float, torch.Tensor]], success: float, recognisable: float):
    """PSNR (dB) against the pruned fraction and the noise variance (log axis) of a
    :func:`~gitutor.studies.dlg_sweeps.defense_sweep`, with the undefended run and both criteria as lines.

    Raises:
        KeyError: if the sweep has no undefended run ``("none", 0.0)``.
    """
    undefended = sweep["none", 0.0][0]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
    for ax, kind, label in ((axes[0], "prune", "pruned fraction"), (axes[1], "noise", "noise variance")):
        points = [(0.0, undefended)] * (kind == "prune") + [(s, v[0]) for (k, s), v in sweep.items() if k == kind]
        ax.plot(*zip(*points), "o-")
        ax.set(xlabel=label, ylabel="PSNR (dB)", title=f"gradient {kind}", xscale="log" if kind == "noise" else "linear")
        for level, style in ((success, "--"), (recognisable, ":")):
            ax.axhline(level, color="grey", ls=style, lw=1)
        ax.axhline(undefended, color="C1", lw=1, label="no defense")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def defense_grid(truth: torch.Tensor, sweep: Mapping[tuple[str, float], tuple[float, torch.Tensor]], success: float,
                 recognisable: float):
    """The ``(1, C, H, W)`` truth, then every defended reconstruction titled with its strength, PSNR and mark."""
    titles = ["truth"] + [f"{k} {s:g}\n{v:.1f} dB {_mark(v, success, recognisable)}" for (k, s), (v, _) in sweep.items()]
    return show_grid(torch.cat([truth.cpu()] + [images for _, images in sweep.values()]), titles=titles,
                     ncols=len(sweep) + 1, suptitle=f"✓ success (PSNR ≥ {success:.0f} dB); ~ recognisable "
                     f"(≥ {recognisable:.0f} dB); ✗ below")
