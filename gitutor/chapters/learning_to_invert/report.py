"""Chapter 06's tables: Wu et al.'s numbers (Table 1, Table 2), the Markdown tables and short strings
the chapter's prose pastes in (myst-nb ``glue``), the IG-vs-LTI comparisons with 95 % intervals, and
this run's paper-vs-run rows.

``table1`` below is ``{(model, B, defense): scores}``, where ``scores`` is
:attr:`gitutor.chapters.learning_to_invert.experiments.Comparison.scores`; defenses are in the order of
:func:`~gitutor.federated.paper_defenses` (none, sign, prune, gauss). The paired IG-vs-LTI
comparisons, the input-scale check and Table 2's reference are in :mod:`gitutor.chapters.learning_to_invert.checks`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from gitutor.metrics import LPIPS_NA, score_batch
from gitutor.stats import Interval
from gitutor.tables import markdown_table

#: Wu et al. 2022, Table 1: MSE on CIFAR-10 per (model, B), method, defense (none, sign, prune, gauss).
PAPER_MSE = {
    ("lenet", 1): {
        "IG": [0.022, 0.116, 0.138, 0.150],
        "LTI": [0.004, 0.014, 0.029, 0.012],
    },
    ("lenet", 4): {
        "IG": [0.105, 0.265, 0.169, 0.206],
        "LTI": [0.015, 0.023, 0.031, 0.026],
    },
    ("resnet20", 1): {
        "IG": [0.120, 0.154, 0.171, 0.133],
        "LTI": [0.018, 0.013, 0.023, 0.021],
    },
    ("resnet20", 4): {
        "IG": [0.125, 0.272, 0.195, 0.123],
        "LTI": [0.038, 0.035, 0.038, 0.039],
    },
}
#: Wu et al. 2022, Table 2: LTI-OOD MSE (LeNet, B = 1) per defense.
PAPER_OOD = [0.015, 0.036, 0.045, 0.029]
METHODS = ("IG", "DLG", "LTI", "LTI (all held-out)")  # DLG: B = 1 only
#: The defended settings of Table 1 (the comparisons the paper's claim is about).
DEFENDED = ("sign", "prune", "gauss")
#: The paper's data set; MSE rows are comparable with the paper only on it.
PAPER_DATASET = "cifar10"


#: Wu et al.'s central claim, in their words (§4.1.1, on Table 1).
CLAIM = (
    "LTI outperforms both baselines significantly and consistently across all three defense mechanisms "
    "(§4.1.1)"
)


#: The claim's reason in the results record: numbers and verdict words only are filled in.
CLAIM_REASON = (
    "paired LTI − IG over {n} targets, IG tuned on auxiliary images at its budget chosen on "
    "auxiliary images ({budgets} iterations): sign compression {sign}; pruning {prune}; "
    "Gaussian noise {gauss}"
)


def claim_judgement(
    verdicts: Mapping[str, str],
    n: int,
    best: Mapping[str, int] | None,
) -> dict:
    """The row fields ``claim``, ``claim_outcome``, ``claim_reason`` of :data:`CLAIM` (against IG, the baseline
    this book runs) from the paired comparisons.

    Args:
        verdicts: ``{defense: "LTI < IG" | "LTI > IG" | not resolved}`` over ``n`` targets, IG at its best budget
            (:func:`~gitutor.chapters.learning_to_invert.checks.paired_comparison` with the recorded IG).
        best: ``{defense: IG's budget chosen on auxiliary images}``; None when no budget study is recorded for
            this run: IG then ran only at Table 1's budget, so nothing better than *not resolved* is claimed.

    *refuted* when IG beats LTI under a defense of :data:`DEFENDED`; *consistent* when LTI is below IG under all
    of them and IG ran at its chosen budget; else *not resolved*. The reason is :data:`CLAIM_REASON`.
    """
    if any(verdicts[d] == "LTI > IG" for d in DEFENDED):
        outcome = "refuted"
    elif best is not None and all(verdicts[d] == "LTI < IG" for d in DEFENDED):
        outcome = "consistent"
    else:
        outcome = "not resolved"
    budgets = "/".join(str(best[d]) for d in DEFENDED) if best else "unchecked"
    reason = CLAIM_REASON.format(
        n=n, budgets=budgets, **{d: verdicts[d] for d in DEFENDED}
    )
    return {"claim": CLAIM, "claim_outcome": outcome, "claim_reason": reason}


def defense_names(prune_rate: float, sigma: float) -> dict[str, str]:
    """Display names of the four defenses of §4.1, keyed like :func:`~gitutor.federated.paper_defenses`."""
    return {
        "none": "none",
        "sign": "sign comp.",
        "prune": f"prune α={prune_rate}",
        "gauss": f"Gauss σ={sigma}",
    }


def table1_markdown(
    table1: Mapping,
    model: str,
    batch_size: int,
    names: Mapping[str, str],
    n_ig: int,
    n_targets: int,
    ig_iterations: int | None = None,
    chosen: Mapping[str, tuple[int, Sequence[float]]] | None = None,
) -> str:
    """Table 1 for one model and B as Markdown: a row per method, ``MSE / PSNR / SSIM / LPIPS`` per defense
    (LPIPS :data:`~gitutor.metrics.LPIPS_NA` when its backbone is not installed).

    Args:
        ig_iterations: this run's IG iterations; given, IG's row is labelled "IG, <n> iterations (not
            its chosen budget)".
        chosen: ``{defense: (iterations, per-target MSE)}`` of IG at its chosen budget on the same
            targets (the recorded study); given, a row "IG at its chosen budget" follows IG's with the
            mean MSE and the mean per-target PSNR (dB) and "–" for SSIM/LPIPS (not recorded).

    Raises:
        ValueError: naming ``chosen`` when a defense's per-target MSE is empty or not in (0, 1].
    """

    def lpips(c):
        return LPIPS_NA if c.get("lpips") is None else f"{c['lpips']:.3f}"

    methods = [m for m in METHODS if m in table1[model, batch_size, next(iter(names))]]
    rows = [
        [method]
        + [
            f"{c['mse']:.4f} / {c['psnr']:.1f} / {c['ssim']:.2f} / {lpips(c)}"
            for c in (table1[model, batch_size, d][method] for d in names)
        ]
        for method in methods
    ]
    if ig_iterations is not None and "IG" in methods:
        rows[methods.index("IG")][0] = (
            f"IG, {ig_iterations} iterations (not its chosen budget)"
        )
    if chosen is not None and "IG" in methods:
        cells = []
        for d in names:
            steps, errors = chosen[d]
            errors = [float(e) for e in errors]
            if not errors or not all(0.0 < e <= 1.0 for e in errors):
                raise ValueError(
                    f"chosen[{d!r}] must hold per-target MSE in (0, 1], got {errors!r}"
                )
            mean_psnr = sum(-10 * math.log10(e) for e in errors) / len(errors)
            cells.append(
                f"{sum(errors) / len(errors):.4f} / {mean_psnr:.1f} / – / – "
                f"({steps} its)"
            )
        rows.insert(methods.index("IG") + 1, ["IG at its chosen budget", *cells])
    attacked = (
        " and ".join([", ".join(methods[:-2]), "LTI"])
        if len(methods) > 3
        else "IG and LTI"
    )
    return (
        f"**{model}, B = {batch_size}** ({attacked} on the same {n_ig} target batch(es); LTI also on all "
        f"{n_targets // batch_size})\n\n"
        + markdown_table(
            ["method"]
            + [f"{name}: MSE / PSNR / SSIM / LPIPS" for name in names.values()],
            rows,
        )
    )


def same_data(cfg, data_root: str = "data") -> bool:
    """Whether this run attacks the paper's data (CIFAR-10 through torchvision): only then are its
    MSE values on the paper's scale. The quick profile's digits, and the full profile's code path on
    the bundled digits (``data_root="bundled"``), are not."""
    return cfg.dataset == PAPER_DATASET and str(data_root) != "bundled"


def results_rows(
    table1: Mapping,
    table2: Mapping[str, Interval],
    names: Mapping[str, str],
    *,
    scale: str,
    n_ig: Mapping[int, int],
    ood_model: str,
    wins: int,
    smallest: tuple[int, ...],
    comparable: bool,
    intervals: Mapping | None = None,
    claim: Mapping | None = None,
    broken: Sequence[tuple] = (),
    reversal: Interval | None = None,
) -> list[dict]:
    """The paper-vs-run rows of the results record (:func:`gitutor.results.save_results`).

    Args:
        table1: ``{(model, B, defense): scores}``; table2: ``{defense: Interval}`` of LTI-OOD's
            per-target MSE (the row's number is its mean; low/high its 95 % interval).
        names: :func:`defense_names`; scale: how this run differs from the paper.
        n_ig: target batches attacked by both methods per B; ood_model: the model of Table 2.
        wins: defenses (of :data:`DEFENDED`) under which LTI's MSE lies below IG's beyond noise,
            paired over the targets both attacked (:func:`gitutor.chapters.learning_to_invert.checks.paired_comparison`);
            the paper: all three. This row is the chapter's headline.
        smallest: ``(size, auxiliary images in all, wins[, unresolved])`` of Fig. 3a's smallest
            auxiliary set (the paper: 500 of 50 000 images beat IG under every defense); only resolved
            comparisons count: with ``unresolved`` > 0 the row carries the bounds wins … wins +
            unresolved and reads *not resolved* where the paper's count lies inside.
        comparable: :func:`same_data`; when False the MSE rows carry no ``better`` (no verdict):
            MSE on other images is on another scale.
        intervals: ``{(model, B, defense, method): Interval}`` of the per-batch MSE of IG and LTI on the
            batches both attacked; a row's number is then the interval's mean, with its low/high.
        claim: :func:`claim_judgement`'s fields for the headline row (None: it quotes no claim).
        broken: ``(model, B, defense)`` whose IG is a broken run (worse than the mean image): no IG row.
        reversal: the paired LTI − IG MSE differences without a defense (B = 1): a row against the paper's
            0.004 − 0.022 (LTI ahead), judged on any data (the sign of a difference is not a scale).

    Raises:
        KeyError: for a (model, B) or defense the paper does not report.
        ValueError: naming ``smallest`` when its unresolved count is not an int in [0, 3 − wins].
    """
    from gitutor.results import interval_fields

    order, intervals = list(names), intervals or {}
    same = (
        "as the first row" if scale != "paper settings" else scale
    )  # the run's setting, stated once
    direction = {"better": "lower"} if comparable else {}

    def mse_row(model, batch_size, defense, method, scores):
        summary = intervals.get((model, batch_size, defense, method))
        value = scores[method]["mse"] if summary is None else summary.mean
        return {
            "quantity": f"MSE {method} (Table 1)",
            "setting": f"{model}, B={batch_size}, {names[defense]}",
            "paper": PAPER_MSE[model, batch_size][method][order.index(defense)],
            "this_run": round(value, 4),
            "unit": "MSE",
            **direction,
            **interval_fields(summary, 4),
            "differences": f"{same}; {n_ig[batch_size]} target batch(es)",
        }

    rows = [
        mse_row(model, batch_size, defense, method, scores)
        for (model, batch_size, defense), scores in table1.items()
        for method in ("IG", "LTI")
        if method == "LTI" or (model, batch_size, defense) not in broken
    ]
    if reversal is not None:
        paper = PAPER_MSE[ood_model, 1]
        rows.append(
            {
                "quantity": "MSE LTI − IG without a defense, paired (Table 1)",
                "setting": f"{ood_model}, B=1, none",
                "paper": round(paper["LTI"][0] - paper["IG"][0], 4),
                "this_run": round(reversal.mean, 4),
                "unit": "MSE difference",
                "better": "lower",
                **interval_fields(reversal, 4),
                "differences": f"{same}; {n_ig[1]} targets; the paper's value derived from "
                "Table 1 (LTI − IG means), the paper states no difference or interval",
            }
        )
    rows += [
        {
            "quantity": "MSE LTI-OOD (Table 2)",
            "setting": f"{ood_model}, B=1, {names[defense]}",
            "paper": PAPER_OOD[order.index(defense)],
            "this_run": round(table2[defense].mean, 4),
            "unit": "MSE",
            **direction,
            **interval_fields(table2[defense], 4),
            "differences": f"{same}; OOD = other digit classes",
        }
        for defense in order
    ]
    rows.insert(
        0,
        {
            "quantity": "defenses under which LTI's MSE is below IG's beyond noise (Table 1)",
            "setting": f"{ood_model}, B=1, IG at its budget chosen on auxiliary images, 95 % intervals of "
            f"the paired differences over {n_ig[1]} targets (one trained g_θ, IG's starts fixed: the "
            "targets vary)",
            "paper": len(DEFENDED),
            "this_run": wins,
            "unit": f"of {len(DEFENDED)} defenses",
            "better": "higher",
            "headline": True,
            "n": 1,  # one count of comparisons, each judged by its interval
            "differences": f"{scale}; paper: means over 1 000 targets",
            **(claim or {}),
        },
    )
    size, total, small_wins, *rest = smallest
    unresolved = rest[0] if rest else 0
    if (
        not isinstance(unresolved, int)
        or not 0 <= unresolved <= len(DEFENDED) - small_wins
    ):
        raise ValueError(
            f"smallest's unresolved count must be an int in [0, {len(DEFENDED) - small_wins}], "
            f"got {unresolved!r}"
        )
    # only resolved comparisons count: with any unresolved, the count lies between the wins
    # and the wins plus the unresolved ones (the record reads it not resolved where 3 is inside)
    count = (
        {"n": 1}
        if unresolved == 0
        else {"low": small_wins, "high": small_wins + unresolved}
    )
    rows.append(
        {
            "quantity": "defenses under which LTI on the smallest auxiliary set beats IG (Fig. 3a)",
            "setting": f"{ood_model}, B=1, {size} of {total} auxiliary images (paper: 500 of 50 000)",
            "paper": len(DEFENDED),
            "this_run": small_wins,
            "unit": f"of {len(DEFENDED)} defenses",
            "better": "higher",
            **count,
            "differences": f"{same}; 95 % intervals of the paired differences over "
            f"{n_ig[1]} targets; {unresolved} not resolved (counted as neither); auxiliary "
            f"fraction {size / total:.0%} (paper: 500 / 50 000 = 1 %)",
        }
    )
    return rows


def data_summary(aux_x: torch.Tensor, target_x: torch.Tensor, cfg) -> dict:
    """Glue-ready facts of the split: ``n_aux``, ``n_targets`` (ints), ``shape`` (``"1×16×16"``) and
    ``models`` (``"lenet"``), from the auxiliary and target images ``(N, C, H, W)``."""
    return {
        "n_aux": len(aux_x),
        "n_targets": len(target_x),
        "shape": "×".join(map(str, target_x.shape[1:])),
        "models": ", ".join(cfg.models),
    }


def mean_image_scores(aux_x: torch.Tensor, target_x: torch.Tensor) -> dict[str, float]:
    """The reference a useful inverse must beat: MSE, PSNR and SSIM (:func:`~gitutor.metrics.score_batch`)
    of predicting the mean auxiliary image for every target (``(N, C, H, W)`` images in [0, 1])."""
    mean = aux_x.mean(0, keepdim=True).expand_as(target_x)
    return score_batch(mean[:, None], target_x[:, None])


def table1_section(
    table1: Mapping,
    cfg,
    n_ig: Mapping[int, int],
    n_targets: int,
    names: Mapping[str, str],
    chosen: Mapping[str, tuple[int, Sequence[float]]] | None = None,
) -> str:
    """Every (model, B) block of Table 1 (:func:`table1_markdown`) as one Markdown text. IG's rows are
    labelled with this run's iterations (``cfg.ig_iterations``, not its chosen budget); ``chosen``
    (``{defense: (iterations, per-target MSE)}``, the recorded study at IG's chosen budget on the same
    targets) adds, for the first model at B = 1, the row of IG at its chosen budget."""
    return "\n\n".join(
        table1_markdown(
            table1,
            model,
            b,
            names,
            n_ig[b],
            n_targets,
            ig_iterations=cfg.ig_iterations,
            chosen=chosen if (model, b) == (cfg.models[0], 1) else None,
        )
        for model in cfg.models
        for b in cfg.batch_sizes
    )


def aux_size_curves(
    errors: Mapping[str, Sequence[Sequence[float]]],
    table1: Mapping,
    model: str,
    names: Mapping[str, str],
) -> dict[str, list[float]]:
    """Fig. 3a's curves: per defense name, the mean held-out MSE of g_θ for each smaller auxiliary set
    (``errors`` from :func:`~gitutor.chapters.learning_to_invert.experiments.aux_size_errors`) and, last, Table 1's
    g_θ trained on the whole set."""
    return {
        names[d]: [float(torch.tensor(e).mean()) for e in errors[d]]
        + [table1[model, 1, d]["LTI (all held-out)"]["mse"]]
        for d in errors
    }
