"""Chapter 08's figures, tables and paper-vs-run rows.

Paper numbers: Wu et al. 2023, Table 1 (Inverting Gradients on LeNet, B = 1, CIFAR-10: MSE 0.022
without defense, 0.150 under Gaussian noise σ = 0.1); Zhu et al. 2019 §5 (noise of variance 1e-2
stops DLG); Wang et al. 2024, Table 5 (label accuracy 100 % under noise of variance ≤ 1e-2 on the
last layer's gradient); Ye et al. 2024 §2 (strict DP guarantees need noise that significantly
hurts utility). Geiping et al. 2020 (§5) attack multi-step FedAvg updates; their numbers are not
restated here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from gitutor.results import interval_fields
from gitutor.stats import format_interval
from gitutor.viz import interval_errorbars
from gitutor.tables import markdown_table


def eps_text(value: float) -> str:
    """ε for a table: ``"∞"``, or 3 significant digits."""
    return "∞" if math.isinf(value) else f"{value:.3g}"


def reconstruction_grid(truth: torch.Tensor, rows: Mapping[str, torch.Tensor], title: str = "",
                        columns: Sequence[str] | None = None):
    """Rows of images (first row: the clients' private photographs), optional column titles;
    returns the figure."""
    grids = {"private": truth, **rows}
    cols = len(truth)
    fig, axes = plt.subplots(len(grids), cols, figsize=(1.3 * cols + 1.4, 1.35 * len(grids)),
                             squeeze=False)
    for r, (name, images) in enumerate(grids.items()):
        for c in range(cols):
            ax = axes[r, c]
            ax.imshow(images[c, 0].detach().cpu(), cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([]), ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(name, fontsize=8, rotation=0, ha="right", va="center")
            if r == 0 and columns is not None:
                ax.set_title(columns[c], fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def degradation_figure(epochs: Mapping[int, dict], batches: Mapping[int, dict], success: float):
    """SSIM (mean, 95 % interval over clients) against local steps E and images per client B."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
    for ax, study, label in ((axes[0], epochs, "local steps E (FedAvg, B = 1)"),
                             (axes[1], batches, "images per client B (FedSGD)")):
        keys = list(study)
        interval_errorbars(ax, keys, [study[k]["ssim"] for k in keys])
        ax.axhline(success, color="grey", ls="--", lw=1)
        ax.set_xlabel(label)
        ax.set_xticks(keys)
    axes[0].set_ylabel("SSIM of the reconstruction")
    axes[0].set_ylim(-0.05, 1.05)
    fig.tight_layout()
    return fig


def epsilon_figure(points: Sequence[dict], success: float, chance: float):
    """Attack SSIM and test accuracy against ε (log axis; ε = ∞ drawn at the right)."""
    finite = [p["epsilon"] for p in points if math.isfinite(p["epsilon"])]
    far = max(finite) * 10
    xs = [p["epsilon"] if math.isfinite(p["epsilon"]) else far for p in points]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    interval_errorbars(ax, xs, [p["ssim"] for p in points],
                       label="attack SSIM (95 % interval)", color="C3")
    ax.plot(xs, [p["accuracy"] for p in points], "s-", color="C0",
            label="test accuracy after the rounds")
    ax.axhline(success, color="C3", ls=":", lw=1)
    ax.axhline(chance, color="C0", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_xticks(xs, [eps_text(p["epsilon"]) for p in points], fontsize=8)
    ax.minorticks_off()
    ax.invert_xaxis()
    ax.set_xlabel("ε (Opacus RDP accountant) — more privacy to the right")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=8, loc="center left")
    fig.tight_layout()
    return fig


def sweep_table(points: Sequence[dict], delta: float) -> str:
    """σ, ε, attack PSNR/SSIM (intervals), label accuracy and test accuracy, one line per σ."""
    header = ["σ", f"ε (δ = {delta:g})", "PSNR (dB)", "SSIM", "labels", "test accuracy"]
    lines = [[f"{p['sigma']:g}", eps_text(p["epsilon"]), format_interval(p["psnr"], 1, False),
              format_interval(p["ssim"], 2, False), f"{p['label_rate']:.0%}",
              f"{p['accuracy']:.2f}"] for p in points]
    return markdown_table(header, lines)


def regime_table(studies: Mapping[str, dict]) -> str:
    """One line per regime: PSNR and SSIM intervals over the attacked clients, labels."""
    header = ["what the client ran", "PSNR (dB)", "SSIM", "labels recovered"]
    lines = [[name, format_interval(s["psnr"], 1, False), format_interval(s["ssim"], 2, False),
              f"{s['label_rate']:.0%}"] for name, s in studies.items()]
    return markdown_table(header, lines)


def breaking_point(points: Sequence[dict], success: float) -> dict | None:
    """The point of largest ε whose whole SSIM interval lies below ``success`` (None if none)."""
    broken = [p for p in points if p["ssim"].high < success]
    return max(broken, key=lambda p: p["epsilon"]) if broken else None


def at_sweep_edge(points: Sequence[dict], point: dict) -> bool:
    """Whether ``point`` is the smallest σ > 0 of the sweep (a threshold found there is a bound)."""
    noisy = [p for p in points if p["sigma"] > 0]
    return bool(noisy) and point is min(noisy, key=lambda p: p["sigma"])


def break_sentence(points: Sequence[dict], success: float, attack: str) -> str:
    """Where ``attack`` stops being able to recover the photographs, in words that say whether the sweep
    resolves it: the largest ε whose whole SSIM interval lies below ``success``, written as a bound
    (ε ≥ …) when that point is the smallest σ > 0 tried — the threshold then lies between σ = 0 and it,
    outside the sweep — or "no ε tried" when none lies below."""
    broken = breaking_point(points, success)
    if broken is None:
        return f"No σ tried stops {attack}: every SSIM interval reaches {success:g} or above."
    if at_sweep_edge(points, broken):
        return (f"{attack} is stopped (whole SSIM interval below {success:g}) already at the smallest σ tried, "
                f"σ = {broken['sigma']:g} (ε = {eps_text(broken['epsilon'])}): the threshold lies between σ = 0 "
                f"and {broken['sigma']:g}, so this sweep bounds it — **ε ≥ {eps_text(broken['epsilon'])}** for "
                "this attack — and does not locate it.")
    return (f"The largest ε whose whole SSIM interval lies below {success:g} is **ε = "
            f"{eps_text(broken['epsilon'])}** (σ = {broken['sigma']:g}) for {attack}.")


def chapter_rows(cfg, *, fedsgd: dict, handwritten: dict, points: Sequence[dict],
                 epochs: Mapping[int, dict]) -> list[dict]:
    """The paper-vs-run rows of chapter 08 (see :mod:`gitutor.results`)."""
    differences = (f"{cfg.profile} profile: LFW subset faces at {cfg.image_size}×{cfg.image_size} "
                   "grey, LeNet (tanh, default init), "
                   f"{cfg.attack_iterations} Inverting Gradients steps, "
                   f"{cfg.attacked_clients} attacked Flower clients")
    mse = [r["mse"] for r in fedsgd["rows"]]
    noisy = [r["mse"] for r in handwritten["rows"]]
    broken = breaking_point(points, cfg.success_ssim)
    smallest = min(points, key=lambda p: p["epsilon"])
    none = points[0]

    def row(quantity, setting, paper, this_run, unit, **extra):
        return {"quantity": quantity, "setting": setting, "paper": paper, "this_run": this_run,
                "unit": unit, "differences": differences, **extra}

    from gitutor.stats import BOUNDS, interval

    fed, hand = interval(mse, bounds=BOUNDS["MSE"]), interval(noisy, bounds=BOUNDS["MSE"])
    other_data = (f"Wu et al.'s MSE is on colour CIFAR-10; this run attacks {cfg.image_size} px grey LFW faces, "
                  "and an MSE depends on the images")
    return [
        row("MSE, IG on a FedSGD update, B = 1", "Flower client's update, no defense",
            0.022, round(fed.mean, 4), "MSE (Wu et al. 2023, Tab. 1, LeNet)",
            better="lower", headline=True, not_comparable=other_data, **interval_fields(fed, 4)),
        row("MSE, IG under Gaussian noise σ = 0.1, no clipping",
            f"noise of variance {cfg.handwritten_variance:g} on the gradient (chapter 01)",
            0.150, round(hand.mean, 4), "MSE (Wu et al. 2023, Tab. 1)", better="lower",
            not_comparable=other_data, **interval_fields(hand, 4)),
        row("label accuracy under noise of variance 1e-2", "bias-gradient sign rule, B = 1",
            1.0, round(handwritten["label_rate"], 3), "fraction (Wang et al. 2024, Tab. 5)",
            better="higher"),
        row("largest ε whose attack SSIM stays below "
            f"{cfg.success_ssim:g}", f"Opacus DP-SGD, C = {cfg.max_grad_norm:g}, "
            f"δ = {cfg.delta:g}, {cfg.rounds} rounds, q = 1",
            "noise of variance ≥ 1e-2 stops DLG (Zhu et al. 2019 §5; no ε)",
            "none tried" if broken is None else ("≥ " if at_sweep_edge(points, broken) else "")
            + eps_text(broken["epsilon"]), "ε"),
        row("test accuracy at the smallest ε", f"ε = {eps_text(smallest['epsilon'])}, "
            f"no DP: {none['accuracy']:.2f}",
            "strict DP costs utility significantly (Ye et al. 2024 §2)",
            round(smallest["accuracy"], 3), "fraction"),
        row(f"SSIM after E = {max(epochs)} local steps", "FedAvg, B = 1, −Δ/(η·E) as gradient",
            "multi-step FedAvg updates still leak (Geiping et al. 2020 §5)",
            round(epochs[max(epochs)]["ssim"].mean, 3), "SSIM"),
    ]


def budget_figure(curves: Mapping[str, Mapping[int, object]], success: float):
    """SSIM (95 % interval over clients) against attack steps, one line per candidate."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for name, curve in curves.items():
        interval_errorbars(ax, list(curve), list(curve.values()), label=name)
    ax.axhline(success, color="grey", ls="--", lw=1)
    ax.set_xlabel("Inverting Gradients steps")
    ax.set_ylabel("SSIM")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def budget_table(curves: Mapping[str, Mapping[int, object]]) -> str:
    """One line per candidate network, one column per step count (mean [95 % interval])."""
    steps = list(next(iter(curves.values())))
    lines = [[name] + [format_interval(curve[s], 2, False) for s in steps]
             for name, curve in curves.items()]
    return markdown_table(["network"] + [f"{s} steps" for s in steps], lines)
