"""What chapter 02 reports: the λ-landscape figure (Wang, Liang & He, ICLR 2024, Fig. 1), the FCN
reconstructions (Table 6), the Markdown tables its prose pastes in (myst-nb ``glue``) and the
paper-vs-run rows of its results record (Tables 2, 3, 5 and 6 of the paper)."""
from __future__ import annotations

import inspect
import math
import textwrap
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from gitutor.labels import LambdaProblem
from gitutor.results import interval_fields
from gitutor.stats import format_interval, interval, success_interval
from gitutor.tables import markdown_table
from gitutor.viz import show_grid

#: Table 2 (label accuracy %, mean L1 error L_r) per (network, augmentation), Wang et al. 2024.
PAPER_TABLE2 = {("untrained LeNet", "smoothing"): (99.7, 5.32e-5), ("untrained LeNet", "mixup"): (99.7, 3.62e-5),
                ("untrained ResNet18", "smoothing"): (100.0, 8.78e-5), ("untrained ResNet18", "mixup"): (100.0, 7.50e-5),
                ("trained LeNet", "smoothing"): (99.9, 2.39e-4), ("trained LeNet", "mixup"): (100.0, 1.51e-4)}
#: Table 6: analytic FCN-4 inversion (PSNR dB, SSIM) at 64×64.
PAPER_TABLE6 = {"smoothing": (51.30, 0.999), "mixup": (66.80, 1.000)}
#: Table 3: reconstruction PSNR (dB) of a LeNet per (augmentation, matching / label).
PAPER_TABLE3 = {("mixup", "cos / GT"): 25.76, ("mixup", "cos / iDLG"): 23.01, ("mixup", "cos / Ours"): 25.81,
                ("mixup", "L2 / GT"): 28.27, ("mixup", "L2 / Ours"): 28.24,
                ("mixup", "L2 / iDLG"): 10.70, ("mixup", "L2 / DLG"): 24.26,
                ("smoothing", "cos / GT"): 23.13, ("smoothing", "cos / iDLG"): 22.89, ("smoothing", "cos / Ours"): 23.06,
                ("smoothing", "L2 / GT"): 21.33, ("smoothing", "L2 / Ours"): 20.94,
                ("smoothing", "L2 / iDLG"): 10.64, ("smoothing", "L2 / DLG"): 18.98}
#: Table 5: (accuracy %, L_s = |λ − λ*|) per noise variance 1e-4, 1e-3, 1e-2, 1e-1.
PAPER_TABLE5 = ((100, 1.02e-4), (100, 1.13e-3), (100, 1.14e-2), (45, 5.82e-1))


def plot_landscapes(landscapes: Mapping[str, tuple[LambdaProblem, object, float] | Mapping], curve_lambdas):
    """Fig. 1: Eq. 5's loss against λ per network, ``{name: (problem, SoftLabelResult, true λ)}`` (or the dicts of
    :func:`~gitutor.chapters.idlg_soft_labels.experiments.landscape_examples`), on a ``curve_lambdas = (low, high, steps)``
    grid widened to 1.3 |recovered λ| (|λ| > 0.5). Returns the figure."""
    landscapes = {name: (v["problem"], v["result"], v["lam_star"]) if isinstance(v, Mapping) else v
                  for name, v in landscapes.items()}
    fig, axes = plt.subplots(1, len(landscapes), figsize=(5.5 * len(landscapes), 3.4), squeeze=False)
    for ax, (name, (problem, result, lam_star)) in zip(axes[0], landscapes.items()):
        _, high, steps = curve_lambdas
        reach = max(high, 1.3 * abs(result.lam))
        grid = torch.linspace(-reach, reach, steps, dtype=torch.float64)
        grid = grid[grid.abs() > 0.5]
        ax.semilogy(grid, problem.loss(grid).clamp_min(1e-14), lw=1)
        ax.axvline(lam_star, color="k", ls=":", label=f"true λ* = {lam_star:.3f}")
        ax.plot([result.lam], [max(result.loss, 1e-14)], "r*", ms=12, label=f"recovered ({result.method}) {result.lam:.3f}")
        ax.set(title=name, xlabel="λ", ylabel="1000 · label variance (Eq. 5)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def show_source(*functions, width: int = 88) -> str:
    """The source code of ``functions`` (the few lines that carry an idea, printed on the page), one after
    the other, with docstring lines longer than ``width`` characters re-wrapped so the text fits the column.

    Raises:
        TypeError: if a function's source is not available (a builtin).
    """
    parts = []
    for function in functions:
        lines, in_docstring = [], False
        for line in textwrap.dedent(inspect.getsource(function)).splitlines():
            quotes = line.count('"""')
            starts = not in_docstring and quotes > 0
            if (in_docstring or starts) and len(line) > width:
                indent = line[:len(line) - len(line.lstrip())]
                lines += textwrap.wrap(line.strip(), width, initial_indent=indent, subsequent_indent=indent)
            else:
                lines.append(line)
            if quotes == 1:
                in_docstring = not in_docstring
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def rule_table(rates: Mapping[str, tuple[float, float]]) -> str:
    """Markdown table of :func:`~gitutor.chapters.idlg_soft_labels.experiments.idlg_rule_accuracy`: per label kind, the %
    of samples where iDLG's sign rule names the label's largest class and where its one-hot answer is the label."""
    return markdown_table(["label", "iDLG names the largest class", "iDLG label within L1 ≤ 1e-3 of the truth"],
                          [(kind, f"{top:.0f} %", f"{exact:.0f} %") for kind, (top, exact) in rates.items()])


def recovery_table(table2: Mapping, methods: Mapping) -> str:
    """Markdown Table 2: per (network, augmentation) the accuracy (%), the mean L1 error L_r and how often each
    λ search was used (:func:`~gitutor.chapters.idlg_soft_labels.experiments.label_recovery_table`)."""
    used = lambda counts: ", ".join(f"{method} {count}" for method, count in counts.items())
    return markdown_table(["network", "augmentation", "accuracy", "mean L_r", "search used"],
                          [(n, k, f"{a:.1f} %", f"{e:.2e}", used(methods[n, k])) for (n, k), (a, e) in table2.items()])


def lowest_accuracy(table2: Mapping[tuple[str, str], tuple[float, float]]) -> tuple[float, str]:
    """The lowest label accuracy (%) of Table 2 (:func:`~gitutor.chapters.idlg_soft_labels.experiments.label_recovery_table`,
    ``{(network, augmentation): (accuracy %, mean L_r)}``) and where it occurs, as the words the chapter's
    sentence pastes in: ``"in every cell"`` when all cells tie, else ``"for the untrained LeNet with
    smoothing"`` (cells joined by "and").

    Raises:
        ValueError: if ``table2`` is empty.
    """
    if not table2:
        raise ValueError("table2 must hold at least one (network, augmentation) cell")
    low = min(accuracy for accuracy, _ in table2.values())
    cells = [cell for cell, (accuracy, _) in table2.items() if accuracy == low]
    if len(cells) == len(table2) > 1:
        return low, "in every cell"
    return low, "for " + " and ".join(f"the {network} with {kind}" for network, kind in cells)


def landscape_table(examples: Mapping[str, Mapping]) -> str:
    """Markdown table of Fig. 1's examples (:func:`~gitutor.chapters.idlg_soft_labels.experiments.landscape_examples`): the
    samples scanned, the local minima of Eq. 5 in the plotted range, the true λ* and the λ the search found."""
    return markdown_table(["network", "samples scanned", "local minima", "true λ*", "λ found", "search"],
                          [(name, e["scanned"], len(e["minima"]), f"{e['lam_star']:.3f}", f"{e['result'].lam:.3f}",
                            e["result"].method) for name, e in examples.items()])


def fcn_table(fcn: Mapping[str, tuple[float, float, float | None]]) -> str:
    """Markdown Table 6: per augmentation the mean SSIM, PSNR (dB) and LPIPS (``None`` → "n/a", its AlexNet
    weights are not on disk) of :func:`~gitutor.chapters.idlg_soft_labels.experiments.fcn_inversion`."""
    return markdown_table(["augmentation", "SSIM", "PSNR (dB)", "LPIPS"],
                          [(k, f"{s:.4f}", f"{p:.2f}", "n/a (weights unavailable offline)" if l is None else f"{l:.4f}")
                           for k, (s, p, l) in fcn.items()])


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
    images = torch.cat([t for truths, recovered, _ in runs.values() for t in (truths, recovered)])
    titles = [f"{kind}: {what}" for kind in runs for what in ("truth", "recovered") for _ in range(n)]
    return show_grid(images, titles=titles, ncols=n)


def matching_markdown(scores: Mapping[tuple[str, str], Sequence[tuple[float, float]]]) -> str:
    """Markdown reduced Table 3: per (augmentation, matching / label) the number of runs, the mean PSNR (dB) with
    its 95 % interval over the runs, and the mean SSIM (``scores``: :func:`matching_table`'s per-run lists)."""
    lines = []
    for (kind, setting), runs in scores.items():
        psnrs = interval([p for p, _ in runs])
        lines.append((kind, setting, len(runs), format_interval(psnrs, count=False) if psnrs.n > 1
                      else f"{psnrs.mean:.2f}", f"{np.mean([q for _, q in runs]):.3f}"))
    return markdown_table(["augmentation", "matching / label", "runs", "PSNR (dB) [95 % interval]", "SSIM"], lines)


def diagnosis_markdown(diagnosis: Mapping[str, Mapping[str, float]], success: float) -> str:
    """Markdown table of :func:`~gitutor.chapters.idlg_soft_labels.experiments.cosine_diagnosis`: per augmentation the PSNR
    (dB) as run and with each change, and which changes reach ``success`` dB ("none"); a sentence when empty."""
    if not diagnosis:
        return "No cosine run with the true label fell short; nothing to diagnose."
    names = list(next(iter(diagnosis.values())))
    lines = [[kind] + [f"{runs[name]:.1f}" for name in names]
             + [", ".join(n for n in names[1:] if runs[n] >= success) or "none"] for kind, runs in diagnosis.items()]
    return markdown_table(["cos / GT", *(f"{name} (dB)" for name in names), f"reaches {success:.0f} dB"], lines)


def noise_markdown(table5: Mapping[float, tuple[float, float, float]]) -> str:
    """Markdown Table 5: per noise variance, % of λ in the true basin, mean L_s = |λ − λ*|, mean L_r."""
    return markdown_table(["noise variance", "λ in the right basin", "mean L_s = |λ − λ*|", "mean L_r (label L1)"],
                          [(f"{v:.0e}", f"{a:.0f} %", f"{g:.2e}", f"{e:.2e}") for v, (a, g, e) in table5.items()])


def _row(quantity, setting, paper, this_run, unit, differences, better=None, spread=None, **extra) -> dict:
    return {"quantity": quantity, "setting": setting, "paper": paper, "this_run": this_run, "unit": unit,
            **({"better": better} if better else {}), "differences": differences, **(spread or {}), **extra}


def bounded(values, digits: int, *, low: float = -math.inf, high: float = math.inf, scale: float = 1.0) -> dict:
    """A row's ``n``/``low``/``high``: the 95 % interval of the mean of ``values`` (×``scale``) inside the
    quantity's range [``low``, ``high``] (an L1 error is ≥ 0, an SSIM ≤ 1; :func:`gitutor.stats.interval`);
    only ``n`` for a single value."""
    bounds = (low if math.isfinite(low) else None, high if math.isfinite(high) else None)
    values = [min(max(scale * float(v), low), high) for v in values]  # float rounding (SSIM 1 + 1e-7)
    return interval_fields(interval(values, bounds=bounds), digits)


def share(flags, digits: int = 1) -> dict:
    """``low``/``high`` in % of a success share: the Wilson 95 % interval (:func:`~gitutor.stats.success_interval`,
    inside [0, 100] %) of one 0/1 flag per trial."""
    summary = success_interval(flags)
    return {"n": summary.n, "low": round(100 * summary.low, digits), "high": round(100 * summary.high, digits)}


#: Why the chapter's headline is the pooled λ-recovery accuracy (the sentence the page shows).
HEADLINE_REASON = ("Wang et al.'s central claim is that the λ search recovers *soft* labels — label smoothing and "
                   "mixup, where the iDLG sign rule cannot — so the headline is the λ recovery accuracy on those "
                   "labels, pooled over the networks of Table 2; one-hot iDLG is the trivial case.")
#: Why Table 3's and Table 5's rows are not comparable (their differences column says it).
TABLE3_NOT_COMPARABLE = ("not comparable: {side}×{side} images and a CPU step budget make another matching problem "
                         "than the paper's 32×32 runs; the page compares the label settings with each other")
TABLE5_REASON = "noise variance relative to a gradient scale that differs and is not reported"
TABLE5_NOT_COMPARABLE = ("not comparable: a noise variance means something only relative to the gradient's scale, "
                         "which differs here (the page gives σ / RMS) and which the paper does not report")


def paper_rows(cfg, idlg_one_hot: Sequence[bool], table2: Mapping, errors: Mapping, fcn: Mapping, table3: Mapping,
               table5: Mapping) -> list[dict]:
    """The results record's rows (see :mod:`gitutor.results`), in the chapter's order: the headline (λ recovery
    accuracy on smoothed and mixup labels, all Table 2 networks pooled, ``"headline": True``), iDLG one-hot
    accuracy, Table 2 (accuracy, mean L_r; Table 1's one-hot row), Table 6, Table 3 and Table 5.

    Rows computed from several trials carry this run's 95 % interval (``low``/``high``; a Wilson interval for
    an accuracy, a Student-t interval cut to the quantity's range otherwise). Table 3's and Table 5's rows state
    no direction: their differences column says why they are not comparable.

    Args:
        cfg: the chapter's profile (it names the scale in ``differences``).
        idlg_one_hot: one flag per one-hot sample: the sign rule's label was right.
        table2, errors: :func:`~gitutor.chapters.idlg_soft_labels.experiments.label_recovery_table`'s first and fourth dicts
            (per (network, kind): (accuracy %, mean L_r) and the list of L_r).
        fcn: kind → (per-image SSIM list, per-image PSNR list) of Table 6.
        table3: (kind, setting) → list of (PSNR dB, SSIM) per run (:func:`matching_table`'s ``scores``).
        table5: variance → {"hits": [...], "gaps": [...]} (:func:`noise_table`'s third value).
    """
    quick, tolerance = cfg.profile == "quick", cfg.tolerance
    scale = f"{cfg.profile} profile: {cfg.table2_samples} labels per cell (paper: count not stated for Table 2)"
    soft = [e <= tolerance for (_, kind), values in errors.items() if kind != "one-hot" for e in values]
    rows = [_row("λ recovery accuracy, smoothing and mixup (headline)",
                 "Table 2's networks pooled: untrained LeNet, untrained ResNet18, trained LeNet", 99.7,
                 round(100 * float(np.mean(soft)), 1), "%",
                 f"{len(soft)} labels, L1 error ≤ {tolerance:g}; paper: 99.7–100.0 % in these six cells (the row "
                 "takes the lowest). The search sees an image only through its last-layer feature, so "
                 + ("photo crops with random classes and a trained LeNet on 8×8 digits instead of CIFAR-10 "
                    "change what is tested little" if quick else "CIFAR-10 as the paper"),
                 "higher", share(soft), headline=True)]
    rows.append(_row("iDLG label accuracy, one-hot", "untrained LeNet", 100.0,
                     round(100 * float(np.mean(idlg_one_hot)), 1), "%",
                     f"{len(idlg_one_hot)} samples, " + ("photo crops, random classes" if quick else "CIFAR-10"),
                     "higher", share(idlg_one_hot)))
    for key, (accuracy, l1) in PAPER_TABLE2.items():
        trained = "; digits 8×8, ReLU LeNet, few epochs" if key[0] == "trained LeNet" and quick else ""
        flags = [e <= tolerance for e in errors[key]]
        rows.append(_row("label accuracy (Table 2)", f"{key[0]}, {key[1]}", accuracy, round(table2[key][0], 1), "%",
                         scale + trained, "higher", share(flags)))
        rows.append(_row("mean L_r (Table 2)", f"{key[0]}, {key[1]}", l1, float(f"{table2[key][1]:.3g}"), "L1", scale,
                         "lower", bounded(errors[key], 9, low=0.0)))
    one_hot = [e <= tolerance for e in errors["untrained ResNet18", "one-hot"]]
    rows.append(_row("label accuracy, one-hot (Table 1)", "untrained ResNet18", "100.0 (ResNet50, CIFAR-100)",
                     round(table2["untrained ResNet18", "one-hot"][0], 1), "%",
                     scale + "; Table 1 uses ResNet50 on 1000 CIFAR-100 images", spread=share(one_hot)))
    size = f"{cfg.fcn_image_size}×{cfg.fcn_image_size}"
    for kind, (paper_psnr, paper_ssim) in PAPER_TABLE6.items():
        ssims, psnrs = fcn[kind]
        rows.append(_row("FCN-4 analytic inversion PSNR (Table 6)", kind, paper_psnr, round(float(np.mean(psnrs)), 2),
                         "dB", f"{cfg.fcn_images} images at {size} (paper 100 at 64×64); analytic, so the image size "
                         "changes only the float rounding", "higher", bounded(psnrs, 2)))
        rows.append(_row("FCN-4 analytic inversion SSIM (Table 6)", kind, paper_ssim, round(float(np.mean(ssims)), 4),
                         "", "as above", "higher", bounded(ssims, 4, low=-1.0, high=1.0)))
    side = cfg.table3_image_size
    for key, value in PAPER_TABLE3.items():
        paper_count = "45 class pairs" if key[0] == "mixup" else "30 images"
        psnrs = [p for p, _ in table3[key]]
        rows.append(_row("reconstruction PSNR (Table 3)", f"untrained LeNet, {key[0]}, {key[1]}", value,
                         round(float(np.mean(psnrs)), 2), "dB",
                         TABLE3_NOT_COMPARABLE.format(side=side) + f"; {len(psnrs)} runs "
                         f"({cfg.table3_samples[key[0]]} images × {cfg.table3_repeats} starts; paper: "
                         f"{paper_count} × 10)", "higher", bounded(psnrs, 2),
                         not_comparable=f"{side}×{side} px and a CPU step budget: another matching problem"))
    for variance, (paper_acc, paper_gap) in zip(cfg.noise_variances, PAPER_TABLE5):
        hits, gaps = table5[variance]["hits"], table5[variance]["gaps"]
        where = (f"{TABLE5_NOT_COMPARABLE}; {len(hits)} samples (paper 100); PSO only, as the paper; noise on the "
                 "whole last-layer gradient; basin criterion |λ−λ*| < 0.1|λ*|")
        rows.append(_row("accuracy under Gaussian noise (Table 5)", f"variance {variance:.0e}", paper_acc,
                         round(100 * float(np.mean(hits)), 1), "%", where, "higher", share(hits),
                         not_comparable=TABLE5_REASON))
        rows.append(_row("L_s = |λ − λ*| under noise (Table 5)", f"variance {variance:.0e}", paper_gap,
                         float(f"{np.mean(gaps):.3g}"), "", "not comparable: as above", "lower",
                         bounded(gaps, 4, low=0.0), not_comparable=TABLE5_REASON))
    return rows
