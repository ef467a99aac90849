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
import textwrap
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from gitutor.chapters.flower_dp.accuracy import smallest_accuracy_row
from gitutor.controls import RECOGNISABLE_PSNR
from gitutor.results import interval_fields
from gitutor.results.verdicts import verdict
from gitutor.stats import format_interval, success_interval
from gitutor.tables import markdown_table
from gitutor.viz import interval_errorbars, legible


def eps_text(value: float) -> str:
    """ε for a table: ``"∞"``, or 3 significant digits."""
    return "∞" if math.isinf(value) else f"{value:.3g}"


#: inches: every figure of the chapter is this wide (640 px at the page's 100 dpi), so the page shows it at
#: about its own size in a 612 px column (a 1 200 px window) and its text, at ≥ :data:`gitutor.viz.BODY_PT`
#: (:func:`gitutor.viz.legible`), reads at about 15 px.
FIGURE_WIDTH = 6.4


def _wrapped(text: str, width: int) -> str:
    """``text`` broken at spaces into lines of at most ``width`` characters (a longer word stays whole)."""
    return textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False)


def reconstruction_grid(
    truth: torch.Tensor,
    rows: Mapping[str, torch.Tensor],
    title: str = "",
    columns: Sequence[str] | None = None,
):
    """Rows of images (first row: the clients' private photographs), optional column titles;
    returns the figure, :data:`FIGURE_WIDTH` wide: row names and the title are wrapped so that the
    images, not the words, take the width."""
    grids = {"private": truth, **rows}
    names = {name: _wrapped(name, 14) for name in grids}
    cols = len(truth)
    label = 0.1 * max(len(line) for n in names.values() for line in n.splitlines())
    cell = min(1.3, (FIGURE_WIDTH - label - 0.3) / cols)
    top = 0.3 * (bool(title) + (columns is not None))
    fig, axes = plt.subplots(
        len(grids),
        cols,
        figsize=(
            min(FIGURE_WIDTH, label + 0.3 + cell * cols),
            (cell + 0.1) * len(grids) + top,
        ),
        squeeze=False,
    )
    for r, (name, images) in enumerate(grids.items()):
        for c in range(cols):
            ax = axes[r, c]
            ax.imshow(images[c, 0].detach().cpu().numpy(), cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([]), ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(names[name], rotation=0, ha="right", va="center")
            if r == 0 and columns is not None:
                ax.set_title(columns[c])
    if title:
        fig.suptitle(_wrapped(title, 55))
    fig.tight_layout()
    return legible(fig, width=FIGURE_WIDTH)


def degradation_figure(
    epochs: Mapping[int, dict],
    batches: Mapping[int, dict],
    success: float,
    one_gradient: Mapping[int, dict] | None = None,
):
    """PSNR (dB; mean, 95 % interval over clients) against local steps E (the unrolled attack; and, when
    given, ``one_gradient``: the same updates read as one gradient, dashed, with a legend above the
    panels) and images per client B, with the line ``success`` (the book's recognisable, dB)."""
    fig, axes = plt.subplots(1, 2, figsize=(FIGURE_WIDTH, 3.6), sharey=True)
    for ax, study, label in (
        (axes[0], epochs, "local steps E\n(FedAvg, B = 1)"),
        (axes[1], batches, "images per client B\n(FedSGD)"),
    ):
        keys = list(study)
        bars = interval_errorbars(ax, keys, [study[k]["psnr"] for k in keys])
        ax.axhline(success, color="grey", ls="--", lw=1)
        ax.set_xlabel(label)
        ax.set_xticks(keys)
        if ax is axes[0]:
            bars.set_label("unrolled (the server's attack)")
    if one_gradient is not None:
        keys = list(one_gradient)
        interval_errorbars(
            axes[0],
            keys,
            [one_gradient[k]["psnr"] for k in keys],
            ls=":",
            color="tab:red",
            label="read as one gradient −Δ/(ηE)",
        )
        # above the panels: a legend inside would cover the intervals
        axes[0].legend(
            loc="lower left", bbox_to_anchor=(0, 1.02), borderaxespad=0, frameon=False
        )
    axes[0].set_ylabel("PSNR (dB)")
    fig.tight_layout()
    return legible(fig, width=FIGURE_WIDTH)


def label_text(summary: dict) -> str:
    """Label recovery for a table cell: the sign rule's rate beside chance (the majority-class guess
    over the same clients), or "given" where the attack was told the labels (B > 1)."""
    if summary["label_chance"] is None:
        return "given"
    return f"{summary['label_rate']:.0%} (chance {summary['label_chance']:.0%})"


def regime_table(studies: Mapping[str, dict]) -> str:
    """One line per regime: PSNR and SSIM intervals over the attacked clients, labels (sign rule
    beside chance, or given)."""
    header = ["what the client ran", "PSNR (dB)", "SSIM", "labels recovered"]
    lines = [
        [
            name,
            format_interval(s["psnr"], 1, False),
            format_interval(s["ssim"], 2, False),
            label_text(s),
        ]
        for name, s in studies.items()
    ]
    return markdown_table(header, lines)


def chapter_rows(
    cfg,
    *,
    fedsgd: dict,
    handwritten: dict,
    points: Sequence[dict],
    threshold: str,
    epochs: Mapping[int, dict],
) -> list[dict]:
    """The paper-vs-run rows of chapter 08 (see :mod:`gitutor.results`); ``threshold``: the DP row's ε,
    :func:`~gitutor.chapters.flower_dp.curve.threshold_text` of the attacker's envelope along the sweep."""
    differences = (
        f"{cfg.profile} profile: LFW subset faces and non-faces at "
        f"{cfg.image_size}×{cfg.image_size} "
        "grey, LeNet (tanh, default init), "
        f"{cfg.attack_iterations} Inverting Gradients steps, "
        f"{cfg.attacked_clients} attacked Flower clients"
    )
    mse = [r["mse"] for r in fedsgd["rows"]]
    noisy = [r["mse"] for r in handwritten["rows"]]

    def row(quantity, setting, paper, this_run, unit, **extra):
        return {
            "quantity": quantity,
            "setting": setting,
            "paper": paper,
            "this_run": this_run,
            "unit": unit,
            "differences": differences,
            **extra,
        }

    from gitutor.stats import BOUNDS, interval

    fed, hand = (
        interval(mse, bounds=BOUNDS["MSE"]),
        interval(noisy, bounds=BOUNDS["MSE"]),
    )
    labels = success_interval([r["label_ok"] for r in handwritten["rows"]])
    other_data = (
        f"Wu et al.'s MSE is on colour CIFAR-10; this run attacks {cfg.image_size} px grey LFW "
        "faces and non-faces, and an MSE depends on the images"
    )
    return [
        row(
            "MSE, IG on a FedSGD update, B = 1",
            "Flower client's update, no defense",
            0.022,
            round(fed.mean, 4),
            "MSE (Wu et al. 2023, Tab. 1, LeNet)",
            better="lower",
            not_comparable=other_data,
            **interval_fields(fed, 4),
        ),
        row(
            "MSE, IG under Gaussian noise σ = 0.1, no clipping",
            f"noise of variance {cfg.handwritten_variance:g} on the gradient (chapter 01)",
            0.150,
            round(hand.mean, 4),
            "MSE (Wu et al. 2023, Tab. 1)",
            better="lower",
            not_comparable=other_data,
            **interval_fields(hand, 4),
        ),
        row(
            "label accuracy under noise of variance 1e-2",
            "bias-gradient sign rule, B = 1; a constant "
            f"guess of the commoner class gets {handwritten['label_chance']:.0%} of these clients; "
            f"{labels.n} clients (Wilson interval): every label right resolves ≥ 95 % from "
            f"n = {clients_to_resolve(0.95)} clients",
            1.0,
            round(labels.mean, 3),
            "fraction (Wang et al. 2024, Tab. 5)",
            better="higher",
            not_comparable=(
                "Wang et al. recover labels by a λ search over a data set's many classes; here the "
                "iDLG sign rule reads one of 2 classes (face / not face), where guessing the commoner "
                "class is already right on many clients"
            ),
            **interval_fields(labels, 3),
        ),
        row(
            f"ε at which the strongest adversary stops recognising any photograph (PSNR ≥ "
            f"{RECOGNISABLE_PSNR:g} dB; attacker's envelope of IG one start, restarts, every round, LTI)",
            f"Opacus DP-SGD, C = {cfg.max_grad_norm:g}, "
            f"δ = {cfg.delta:g}, {cfg.rounds} rounds, q = 1",
            "noise of variance ≥ 1e-2 stops DLG (Zhu et al. 2019 §5; no ε)",
            threshold,
            "ε",
        ),
        row("test accuracy at the smallest ε", **smallest_accuracy_row(points)),
        row(
            f"SSIM after E = {max(epochs)} local steps",
            "FedAvg, B = 1, the server unrolls the E local steps it configured",
            "multi-step FedAvg updates still leak (Geiping et al. 2020 §5)",
            round(epochs[max(epochs)]["ssim"].mean, 3),
            "SSIM",
            headline=True,
            claim=GEIPING_CLAIM,
            **leak_judgement(epochs[max(epochs)], max(epochs)),
            **interval_fields(epochs[max(epochs)]["ssim"], 3),
        ),
    ]


#: Geiping et al.'s claim on averaged updates, in their words (NeurIPS 2020, abstract; §5): the chapter's
#: headline, judged by :func:`leak_judgement` on the unrolled attack at the largest E.
GEIPING_CLAIM = (
    "even averaging gradients over several iterations or several images does not protect the user's "
    "privacy in federated learning applications (Geiping et al. 2020, abstract)"
)


def leak_judgement(summary: Mapping, local_steps: int) -> dict:
    """``claim_outcome`` and ``claim_reason`` of :data:`GEIPING_CLAIM` from the unrolled attack on
    E = ``local_steps`` FedAvg updates (``summary``: :func:`~gitutor.chapters.flower_dp.experiments.summarise`
    of its rows, one photograph per client): *consistent* when the 95 % Wilson interval of the photographs
    recognisable (PSNR ≥ :data:`~gitutor.controls.RECOGNISABLE_PSNR` dB) lies above ½ — most updates
    leak their photograph —, *refuted* when it lies below ½, else *not resolved* (too few clients).

    Raises:
        ValueError: naming ``summary`` when it holds no photograph.
    """
    flags = [v >= RECOGNISABLE_PSNR for r in summary["rows"] for v in r["psnrs"]]
    if not flags:
        raise ValueError("summary must hold at least one attacked photograph")
    share = success_interval(flags)
    outcome = (
        "consistent"
        if share.low > 0.5
        else "refuted"
        if share.high < 0.5
        else "not resolved"
    )
    reason = (
        f"{sum(flags)} of {len(flags)} photographs recognisable (≥ {RECOGNISABLE_PSNR:g} dB) from "
        f"E = {local_steps} updates, 95 % Wilson [{share.low:.2f}, {share.high:.2f}] against ½"
    )
    return {"claim_outcome": outcome, "claim_reason": reason}


def clients_to_resolve(level: float, limit: int = 10_000) -> int:
    """The fewest trials n for which n successes out of n have a Wilson interval
    (:func:`gitutor.stats.success_interval`) whose lower end reaches ``level``: how many clients an
    all-correct label count needs before it shows a rate ≥ ``level``.

    Raises:
        ValueError: for ``level`` outside (0, 1), or if no n ≤ ``limit`` reaches it.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    n = next(
        (n for n in range(2, limit + 1) if success_interval([True] * n).low >= level),
        None,
    )
    if n is None:
        raise ValueError(f"no n ≤ {limit} resolves {level}")
    return n


def budget_figure(curves: Mapping[str, Mapping[int, object]], success: float):
    """PSNR (dB; 95 % interval over clients) against attack steps, one line per candidate; the legend
    above the axes, where it covers no interval."""
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.6))
    for name, curve in curves.items():
        interval_errorbars(ax, list(curve), list(curve.values()), label=name)
    ax.axhline(success, color="grey", ls="--", lw=1)
    steps = sorted({s for curve in curves.values() for s in curve})
    if len(steps) <= 6:  # each step a tick; more would crowd: matplotlib's own then
        ax.set_xticks(steps)
    ax.set_xlabel("Inverting Gradients steps")
    ax.set_ylabel("PSNR (dB)")
    ax.legend(
        loc="lower left", bbox_to_anchor=(0, 1.02), borderaxespad=0, frameon=False
    )
    fig.tight_layout()
    return legible(fig, width=FIGURE_WIDTH)


def budget_table(curves: Mapping[str, Mapping[int, object]]) -> str:
    """One line per candidate network, one column per step count (mean [95 % interval])."""
    steps = list(next(iter(curves.values())))
    lines = [
        [name] + [format_interval(curve[s], 1, False) for s in steps]
        for name, curve in curves.items()
    ]
    return markdown_table(["network"] + [f"{s} steps" for s in steps], lines)


def flat_words(curve: Mapping[int, object]) -> str:
    """Where ``curve`` flattens (:func:`flat_step`) for a table cell: "150 of 200", or "not flat by 200"."""
    step, last = flat_step(curve), max(curve)
    return f"{step} of {last}" if step < last else f"not flat by {last}"


def flat_step(curve: Mapping[int, object], tolerance: float = 1.0) -> int:
    """The first step from which every later mean of ``curve`` ({step: Interval}) lies within
    ``tolerance`` (dB) of the last one: where the budget curve flattens."""
    steps = sorted(curve)
    last = curve[steps[-1]].mean
    return next(
        s
        for i, s in enumerate(steps)
        if all(abs(curve[t].mean - last) < tolerance for t in steps[i:])
    )


def control_table(scores: Mapping[str, torch.Tensor]) -> str:
    """One line per control of :func:`gitutor.controls.control_scores`: PSNR (dB), mean [95 %
    interval] over the images, and the highest."""
    from gitutor.stats import BOUNDS, interval

    lines = [
        [
            name,
            format_interval(interval(values.tolist(), bounds=BOUNDS["PSNR"]), 1, False),
            f"{float(values.max()):.1f}",
        ]
        for name, values in scores.items()
    ]
    return markdown_table(["control", "PSNR (dB)", "highest (dB)"], lines)


def recording_table(
    rows: Sequence[Mapping], recording: Mapping | None, budget: str | None
) -> str:
    """The chapter's recording beside this run: for every row of ``recording`` (its results record,
    ``book/recorded/08_flower_dp.json``, run at the decisive sizes, budget ``"recorded"``), its number and
    verdict (:func:`gitutor.results.verdicts.verdict`) and this run's number for the same ``quantity``
    ("—" where this run has no such row). A Markdown table; one row saying why there is nothing to set
    beside this run where this page is the recording (``budget == "recorded"``) or where there is no
    recording. No tolerance is applied: the two runs have different sizes, so their numbers differ."""
    header = ["quantity", "recording", "its verdict", "this run"]
    why = (
        "this page is the recording"
        if budget == "recorded"
        else "no recording in this checkout"
        if recording is None
        else None
    )
    if why is not None:
        return markdown_table(header, [["—", "—", "—", why]])
    mine = {r["quantity"]: r for r in rows}
    lines = [
        [
            theirs["quantity"],
            theirs["this_run"],
            verdict(theirs),
            mine[theirs["quantity"]]["this_run"] if theirs["quantity"] in mine else "—",
        ]
        for theirs in recording["rows"]
    ]
    return markdown_table(header, lines)
