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

from gitutor.chapters.stepwise_gradinversion.experiments import PAPER_TABLE1
from gitutor.paired import compare_paired, oriented, paired_ordering
from gitutor.results import interval_fields
from gitutor.stats import BOUNDS, interval

#: The paper's words (Ye et al., AAAI 2024, §Experiments, the paragraph on Table 1 and Fig. 5).
ORDER_CLAIM = ('"And our stepwise attack method shows the best performance, both qualitatively and '
               'quantitatively" — Ye et al., §Experiments (Table 1, Fig. 5)')
#: The smallest paired difference that counts as an ordering, per metric (PSNR in dB; LPIPS negated).
MARGINS = {"PSNR": 0.5, "SSIM": 0.01, "LPIPS": 0.01}
#: The controls a method must beat (paired PSNR, with the margin) before an ordering is read as a test.
GATE_CONTROLS = ("mean colour", "4×4 thumbnail")
#: Table 1's methods, best first, as the paper orders them.
PAPER_RANKING = ("Stepwise", "GradInversion", "Inverting Gradients", "DLG")


def ordering_row(scores: Mapping[str, Mapping[str, Sequence[float]]], setting: str, differences: str,
                 not_comparable: str | None = None, unjudged: str | None = None) -> dict:
    """The results row of the paper's Table 1 ordering, paired over batches, in every metric given.

    Args:
        scores: ``{metric: {method: per-batch values}}`` for :data:`PAPER_RANKING`, batch i the same for
            all, higher is better (:func:`gitutor.paired.oriented` first); each metric is judged
            with its :data:`MARGINS` entry.
        setting, differences: the row's ``setting`` and ``differences`` (what this run changes).
        not_comparable: why this run's setting cannot test the paper's claim (None: it can).
        unjudged: why the evidence cannot judge the claim although the setting could (e.g. no method
            above the controls); the row then reads "not resolved" and carries no judgement.

    Returns:
        A row with ``paper`` "yes", ``this_run`` "yes" (consistent in every metric) / "no" (refuted in
        one) / "not resolved", the pairs' verdicts in ``setting``, ``claim``, and — when the run can
        judge it and the orderings are resolved — ``claim_outcome`` (consistent / refuted) and
        ``claim_reason``.

    Raises:
        ValueError: as :func:`gitutor.paired.paired_ordering`.
    """
    found = {k: paired_ordering(v, PAPER_RANKING, MARGINS.get(k, 0.0)) for k, v in scores.items()}
    outcomes = [f["outcome"] for f in found.values()]
    outcome = ("refuted" if "refuted" in outcomes else
               "consistent" if set(outcomes) == {"consistent"} else "not resolved")
    if unjudged:
        outcome = "not resolved"
    said = {"consistent": "yes", "refuted": "no"}.get(outcome, "not resolved")
    pairs = " | ".join(f"{k}: " + "; ".join(f["pairs"].values()) for k, f in found.items())
    row = {"quantity": "Table 1 ordering " + " > ".join(PAPER_RANKING) + " (paired over batches)",
           "setting": f"{setting}; {unjudged + '; ' if unjudged else ''}{pairs}", "paper": "yes",
           "this_run": said, "unit": "", "differences": differences, "claim": ORDER_CLAIM}
    if not_comparable:
        row["not_comparable"] = not_comparable
    elif outcome in ("consistent", "refuted"):
        n = len(next(iter(next(iter(scores.values())).values())))
        how = ("clears its margin in the paper's direction" if said == "yes"
               else "is resolved against the paper in at least one pair")
        row["claim_outcome"] = outcome
        row["claim_reason"] = f"each neighbouring pair's difference over the same {n} batches {how}: {pairs}"
    return row


def order_sentence(psnr: Mapping[str, Sequence[float]]) -> str:
    """The paper's Table 1 ordering judged by paired PSNR differences (margin :data:`MARGINS`), as a
    Markdown phrase: each neighbouring pair's verdict, then **consistent**, **refuted** or **not resolved**."""
    found = paired_ordering({m: psnr[m] for m in PAPER_RANKING}, PAPER_RANKING, MARGINS["PSNR"])
    n = len(psnr[PAPER_RANKING[0]])
    return (f"paired over the same {n} batches — {'; '.join(found['pairs'].values())} — the paper's "
            f"ordering {' > '.join(PAPER_RANKING)} is **{found['outcome']}**")


def trained_table_rows(trials: Sequence[Mapping], provenance: Mapping,
                       control_psnr: Mapping[str, Sequence[float]]) -> list[dict]:
    """The rows of the recorded Table 1 on the trained network: each method's LPIPS / PSNR / SSIM
    (mean and 95 % interval over the batches, marked not comparable: another network, resolution,
    batch size and budget) and the paired ordering row, which is the chapter's headline.

    Args:
        trials: the ``trained_table`` phase of :func:`...setting_study.trained_summary.load_trained`.
        provenance: that phase's provenance (``iterations``, ``commit``).
        control_psnr: per-batch PSNR of the controls (:func:`gitutor.controls.batch_controls`) on the
            same batches; the claim is judged only if some method is above each of :data:`GATE_CONTROLS`.

    Raises:
        ValueError: if a method of :data:`PAPER_RANKING` is missing or the methods' batches differ.
    """
    by_method = {m: sorted((t for t in trials if t["method"] == m), key=lambda t: t["batch"])
                 for m in PAPER_RANKING}
    batches = {m: [t["batch"] for t in runs] for m, runs in by_method.items()}
    if any(not b or b != batches["Stepwise"] for b in batches.values()):
        raise ValueError(f"every method needs the same batches, got {batches}")
    first = by_method["Stepwise"][0]["setting"]
    n, iterations = len(batches["Stepwise"]), provenance["iterations"]
    setting = (f"recorded: ImageNet-trained EfficientNet-Lite0 (ImageNet BatchNorm statistics), {n} batches "
               f"of {first.batch_size} ImageNet photographs with true labels, {first.image_size} px")
    differences = (f"EfficientNet-Lite0 not ResNet34, {first.image_size} px not 224, B = {first.batch_size} "
                   f"not 8, {iterations} iterations not 15 000, {n} batches")
    reason = f"{first.image_size} px, B = {first.batch_size}, {iterations} iterations, EfficientNet-Lite0"
    rows = []
    for m in PAPER_RANKING:
        for j, k in enumerate(("LPIPS", "PSNR", "SSIM")):
            summary = interval([t[k] for t in by_method[m]], bounds=BOUNDS[k])
            rows.append({"quantity": f"Table 1 {k}, trained network (mean of {n} batches)", "setting": m,
                         "paper": PAPER_TABLE1[m][j], "this_run": round(summary.mean, 3),
                         "unit": "dB" if k == "PSNR" else "", "differences": differences,
                         "better": "lower" if k == "LPIPS" else "higher", **interval_fields(summary, 3),
                         "not_comparable": f"{reason}: not the paper's setting, its numbers not on the paper's scale"})
    scores = {k: {m: oriented(k, [t[k] for t in runs]) for m, runs in by_method.items()}
              for k in ("PSNR", "SSIM", "LPIPS")}
    above = [m for m in PAPER_RANKING if all(
        compare_paired(scores["PSNR"][m], control_psnr[c], margin=MARGINS["PSNR"]) == "A > B"
        for c in GATE_CONTROLS)]
    unjudged = None if above else ("no method's PSNR is above the mean-colour and 4×4-thumbnail controls "
                                   "(paired over batches): an ordering among reconstructions that know less "
                                   "than a thumbnail does not test the claim")
    rows.append({**ordering_row(scores, setting, differences, unjudged=unjudged), "headline": True})
    return rows


def verdict_phrase(row: Mapping) -> str:
    """A results row's reading as a Markdown phrase: its ``this_run`` in bold, then its ``setting``."""
    return f"**{row['this_run']}** ({row['setting']})"


def above_sentence(names: Sequence[str], control: str) -> str:
    """Which methods are above ``control`` by paired PSNR, as a Markdown phrase (or that none is)."""
    if names:
        return f"above the {control} by paired PSNR: {', '.join(names)}"
    return (f"no method is above the {control} by paired PSNR over the batches: at this budget no attack on "
            "this network knows more of a photograph than that control")
