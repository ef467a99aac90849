"""Chapter 04's results rows for the paper's central claim, judged by paired differences, and the rows of
the recorded Table 1 on the trained network (``book/studies/04_trained_network.json``).

Ye et al. (AAAI 2024), §Experiments, after Table 1 and Fig. 5: "And our stepwise attack method shows the
best performance, both qualitatively and quantitatively", with Yin et al. (2021) GradInversion above
Inverting Gradients and DLG ("it does outperform the other two methods"). The quantitative part is the
ordering of Table 1; every method runs on the same batches, so each neighbouring pair is judged by the
interval of its per-batch differences (:func:`gitutor.paired.paired_ordering`), not by whether two
unpaired intervals overlap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitutor.paired import compare_paired, oriented, paired_difference, paired_ordering
from gitutor.results import interval_fields
from gitutor.stats import BOUNDS, NOT_RESOLVED, format_interval, interval

#: The paper's words (Ye et al., AAAI 2024, §Experiments, the paragraph on Table 1 and Fig. 5).
ORDER_CLAIM = (
    "And our stepwise attack method shows the best performance, both qualitatively and "
    "quantitatively (§Experiments, on Table 1 and Fig. 5)"
)  # quoted where shown (the ledger)
#: The smallest paired difference that counts as an ordering, per metric (PSNR in dB; LPIPS negated).
MARGINS = {"PSNR": 0.5, "SSIM": 0.01, "LPIPS": 0.01}
#: The controls a method must beat (paired, with the metric's margin) before an ordering in that metric is
#: read as a test: a flat image, a thumbnail, and a natural photograph that is not the client's.
GATE_CONTROLS = ("mean colour", "4×4 thumbnail", "different photograph")
#: Ye et al. Table 1 (LPIPS, PSNR dB, SSIM), ImageNet, ResNet34, B = 8.
PAPER_TABLE1 = {
    "Noise N(0, I)": (1.39, 9.82, 0.21),
    "DLG": (1.01, 9.31, 0.25),
    "Inverting Gradients": (0.58, 11.99, 0.31),
    "GradInversion": (0.39, 13.22, 0.44),
    "Stepwise": (0.33, 15.12, 0.49),
}
#: Table 1's methods, best first, as the paper orders them.
PAPER_RANKING = ("Stepwise", "GradInversion", "Inverting Gradients", "DLG")


def pair_phrase(claim: str, verdict: str) -> str:
    """One neighbouring pair of an ordering in words: the claim when the paired difference bears it out
    ("Stepwise > GradInversion"), the resolved opposite as found, else "Stepwise vs GradInversion: not
    resolved" — so that every verdict names its pair."""
    return (
        verdict
        if verdict != NOT_RESOLVED
        else claim.replace(" > ", " vs ") + ": not resolved"
    )


def _pairs_text(found: Mapping[str, Mapping], untested: Sequence[str]) -> str:
    return " | ".join(
        f"{k}{' (not a test: no method above the controls)' if k in untested else ''}: "
        + "; ".join(pair_phrase(c, v) for c, v in f["pairs"].items())
        for k, f in found.items()
    )


def ordering_row(
    scores: Mapping[str, Mapping[str, Sequence[float]]],
    setting: str,
    differences: str,
    not_comparable: str | None = None,
    unjudged: str | None = None,
    untested: Sequence[str] = (),
) -> dict:
    """The results row of the paper's Table 1 ordering, paired over batches, in every metric given.

    Args:
        scores: ``{metric: {method: per-batch values}}`` for :data:`PAPER_RANKING`, batch i the same for
            all, higher is better (:func:`gitutor.paired.oriented` first); each metric is judged
            with its :data:`MARGINS` entry.
        setting, differences: the row's ``setting`` and ``differences`` (what this run changes).
        not_comparable: why this run's setting cannot test the paper's claim (None: it can).
        unjudged: why the evidence cannot judge the claim although the setting could (e.g. no method
            above the controls in any metric); the row then reads "not resolved" and carries no judgement.
        untested: metrics in which no method is above the controls (:func:`above_controls`): their
            pairs are listed, marked, and left out of the judgement.

    Returns:
        A row with ``paper`` "yes", ``this_run`` "yes" (consistent in every judged metric) / "no"
        (refuted in one) / "not resolved", the pairs' verdicts in ``setting``, ``claim``, and — when
        the run can judge it and the orderings are resolved — ``claim_outcome`` (consistent /
        refuted) and ``claim_reason``.

    Raises:
        ValueError: as :func:`gitutor.paired.paired_ordering`, or if ``untested`` names a metric not
            in ``scores``.
    """
    if set(untested) - set(scores):
        raise ValueError(
            f"untested must name metrics of scores {sorted(scores)}, got {list(untested)}"
        )
    found = {
        k: paired_ordering(v, PAPER_RANKING, MARGINS.get(k, 0.0))
        for k, v in scores.items()
    }
    outcomes = [f["outcome"] for k, f in found.items() if k not in untested]
    outcome = (
        "refuted"
        if "refuted" in outcomes
        else "consistent"
        if outcomes and set(outcomes) == {"consistent"}
        else "not resolved"
    )
    if unjudged:
        outcome = "not resolved"
    said = {"consistent": "yes", "refuted": "no"}.get(outcome, "not resolved")
    pairs = _pairs_text(found, untested)
    row = {
        "quantity": "Table 1 ordering "
        + " > ".join(PAPER_RANKING)
        + " (paired over batches)",
        "setting": f"{setting}; {unjudged + '; ' if unjudged else ''}{pairs}",
        "paper": "yes",
        "this_run": said,
        "unit": "",
        "differences": differences,
        "claim": ORDER_CLAIM,
    }
    if not_comparable:
        row["not_comparable"] = not_comparable
    elif outcome in ("consistent", "refuted"):
        n = len(next(iter(next(iter(scores.values())).values())))
        how = (
            "clears its margin in the paper's direction"
            if said == "yes"
            else "is resolved against the paper in at least one pair"
        )
        row["claim_outcome"] = outcome
        row["claim_reason"] = (
            f"each neighbouring pair's difference over the same {n} batches {how}: {pairs}"
        )
    return row


def above_controls(
    scores: Mapping[str, Mapping[str, Sequence[float]]],
    controls: Mapping[str, Mapping[str, Sequence[float]]],
    names: Sequence[str] = GATE_CONTROLS,
) -> dict[str, list[str]]:
    """Per metric, the methods whose paired difference against *every* control in ``names`` clears the
    metric's margin in the better direction (:data:`MARGINS`; LPIPS lower is better): the methods that
    know more of the photographs than a reconstruction that knows nothing of them.

    Args:
        scores: ``{metric: {method: per-batch values}}``, as measured (not oriented).
        controls: ``{control: {metric: per-batch values}}`` on the same batches
            (:func:`gitutor.controls.batch_controls`).
        names: the controls to clear.

    Returns:
        ``{metric: [method, …]}`` for each metric of ``scores`` (an empty list: none above).

    Raises:
        ValueError: naming a control of ``names`` or a metric that ``controls`` lacks.
    """
    missing = [(c, k) for c in names for k in scores if k not in controls.get(c, {})]
    if missing:
        raise ValueError(f"controls lack {missing[:3]} (have {sorted(controls)})")
    return {
        k: [
            m
            for m, values in by_method.items()
            if all(
                compare_paired(
                    oriented(k, values), oriented(k, controls[c][k]), margin=MARGINS[k]
                )
                == "A > B"
                for c in names
            )
        ]
        for k, by_method in scores.items()
    }


def gate_reason(
    above: Mapping[str, Sequence[str]],
    metric: str = "PSNR",
    names: Sequence[str] = GATE_CONTROLS,
) -> str | None:
    """Why the ordering in ``metric`` is no test of the paper's claim — no method above the controls
    ``names`` in it (``above`` from :func:`above_controls` with the same ``names``) — or None if some is."""
    if above.get(metric):
        return None
    return f"no method's {metric} is above the {_and(names)} (paired over the batches)"


def _and(names: Sequence[str]) -> str:
    return (
        names[0]
        if len(names) == 1
        else ", the ".join(names[:-1]) + " and the " + names[-1]
    )


def _by_method(trials: Sequence[Mapping]) -> dict[str, list[Mapping]]:
    by_method = {
        m: sorted((t for t in trials if t["method"] == m), key=lambda t: t["batch"])
        for m in PAPER_RANKING
    }
    batches = {m: [t["batch"] for t in runs] for m, runs in by_method.items()}
    if any(not b or b != batches["Stepwise"] for b in batches.values()):
        raise ValueError(f"every method needs the same batches, got {batches}")
    return by_method


def _gated(
    by_method: Mapping[str, Sequence[Mapping]], controls: Mapping
) -> tuple[dict, list[str], str | None]:
    """The measured per-batch scores, the metrics in which no method clears the gate controls, and why
    the claim is not judged at all (None if some metric is a test)."""
    measured = {
        k: {m: [t[k] for t in runs] for m, runs in by_method.items()}
        for k in ("PSNR", "SSIM", "LPIPS")
    }
    untested = [
        k for k, found in above_controls(measured, controls).items() if not found
    ]
    unjudged = (
        None
        if len(untested) < len(measured)
        else (
            f"in no metric is any method above the {_and(GATE_CONTROLS)} (paired over batches): an ordering "
            "among reconstructions that know less of a photograph than these controls does not test the claim"
        )
    )
    return measured, untested, unjudged


def pair_rows(
    scores: Mapping[str, Mapping[str, Sequence[float]]],
    ranking: Sequence[str] = PAPER_RANKING,
) -> list[dict]:
    """The table under an ordering: one row per neighbouring pair of ``ranking`` (A above B in the
    paper), per metric the paired difference A − B over the batches (mean [95 % interval], LPIPS as
    measured, lower is better) and which side it favours beyond the metric's :data:`MARGINS` entry
    ("A", "B" or "not resolved").

    Args:
        scores: ``{metric: {method: per-batch values}}`` as measured (not oriented), batch i the same
            for every method.
        ranking: the methods, best first as the paper orders them.

    Raises:
        ValueError: as :func:`gitutor.paired.paired_difference` (batches of unequal length, NaN), or
            naming a method of ``ranking`` a metric lacks.
    """
    missing = [(k, m) for k, v in scores.items() for m in ranking if m not in v]
    if missing:
        raise ValueError(f"scores lack {missing[:3]}")
    rows = []
    for a, b in zip(ranking, ranking[1:]):
        row = {"A": a, "B": b}
        for k, values in scores.items():
            found = compare_paired(
                oriented(k, values[a]), oriented(k, values[b]), ("A", "B"), MARGINS[k]
            )
            difference = paired_difference(values[a], values[b])
            row[f"Δ{k} (A − B)"] = format_interval(
                difference, 2 if k == "PSNR" else 3, False
            )
            row[f"{k}: better"] = {"A > B": "A", "A < B": "B"}.get(
                found, "not resolved"
            )
        rows.append(row)
    return rows


def claim_test(
    trials: Sequence[Mapping], controls: Mapping[str, Mapping[str, Sequence[float]]]
) -> dict:
    """What the recorded Table 1 on the trained network says about the paper's ordering claim, as
    numbers and words for the page: ``tested`` (how many of PSNR, SSIM, LPIPS have some method above
    every :data:`GATE_CONTROLS` entry, :func:`above_controls`), ``metrics`` (3), ``above``
    (``{metric: [methods above the controls]}``) and ``pairs`` (:func:`pair_rows` of the measured
    scores). The claim's verdict is the headline row's (:func:`trained_table_rows`, read by
    :func:`gitutor.results.claim_verdict`), not this.

    Raises:
        ValueError: as :func:`trained_table_rows`.
    """
    by_method = _by_method(trials)
    measured, untested, _ = _gated(by_method, controls)
    return {
        "tested": len(measured) - len(untested),
        "metrics": len(measured),
        "above": above_controls(measured, controls),
        "pairs": pair_rows(measured),
    }


def trained_table_rows(
    trials: Sequence[Mapping],
    provenance: Mapping,
    controls: Mapping[str, Mapping[str, Sequence[float]]],
) -> list[dict]:
    """The rows of the recorded Table 1 on the trained network: each method's LPIPS / PSNR / SSIM
    (mean and 95 % interval over the batches, marked not comparable: another network, resolution,
    batch size and budget) and the paired ordering row, which is the chapter's headline.

    Args:
        trials: the ``trained_table`` phase of :func:`...setting_study.trained_summary.load_trained`.
        provenance: that phase's provenance (``iterations``, ``commit``).
        controls: ``{control: {"PSNR", "SSIM", "LPIPS": per-batch values}}`` on the same batches
            (:func:`gitutor.controls.batch_controls`); the ordering in a metric is judged only if some
            method is above each of :data:`GATE_CONTROLS` in it (:func:`above_controls`).

    Raises:
        ValueError: if a method of :data:`PAPER_RANKING` is missing or the methods' batches differ, or
            ``controls`` lack a gate control or metric.
    """
    by_method = _by_method(trials)
    batches = {m: [t["batch"] for t in runs] for m, runs in by_method.items()}
    first = by_method["Stepwise"][0]["setting"]
    n, iterations = len(batches["Stepwise"]), provenance["iterations"]
    setting = (
        f"recorded: ImageNet-trained EfficientNet-Lite0 (ImageNet BatchNorm statistics), {n} batches "
        f"of {first.batch_size} ImageNet photographs with true labels, {first.image_size} px"
    )
    differences = (
        f"EfficientNet-Lite0 not ResNet34, {first.image_size} px not 224, B = {first.batch_size} "
        f"not 8, {iterations} iterations not 15 000, {n} batches"
    )
    reason = f"{first.image_size} px, B = {first.batch_size}, {iterations} iterations, EfficientNet-Lite0"
    rows = []
    for m in PAPER_RANKING:
        for j, k in enumerate(("LPIPS", "PSNR", "SSIM")):
            summary = interval([t[k] for t in by_method[m]], bounds=BOUNDS[k])
            rows.append(
                {
                    "quantity": f"Table 1 {k}, trained network (mean of {n} batches)",
                    "setting": m,
                    "paper": PAPER_TABLE1[m][j],
                    "this_run": round(summary.mean, 3),
                    "unit": "dB" if k == "PSNR" else "",
                    "differences": differences,
                    "better": "lower" if k == "LPIPS" else "higher",
                    **interval_fields(summary, 3),
                    "not_comparable": f"{reason}: not the paper's setting, its numbers not on the paper's scale",
                }
            )
    measured, untested, unjudged = _gated(by_method, controls)
    scores = {
        k: {m: oriented(k, v) for m, v in values.items()}
        for k, values in measured.items()
    }
    rows.append(
        {
            **ordering_row(
                scores, setting, differences, unjudged=unjudged, untested=untested
            ),
            "headline": True,
        }
    )
    return rows
