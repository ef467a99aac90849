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
from gitutor.paired import paired_ordering
from gitutor.results import interval_fields
from gitutor.stats import BOUNDS, interval

#: The paper's words (Ye et al., AAAI 2024, §Experiments, the paragraph on Table 1 and Fig. 5).
ORDER_CLAIM = ('"And our stepwise attack method shows the best performance, both qualitatively and '
               'quantitatively" — Ye et al., §Experiments (Table 1, Fig. 5)')
#: Table 1's methods, best first, as the paper orders them.
PAPER_RANKING = ("Stepwise", "GradInversion", "Inverting Gradients", "DLG")


def ordering_row(psnr: Mapping[str, Sequence[float]], setting: str, differences: str,
                 not_comparable: str | None = None) -> dict:
    """The results row of the paper's ordering on Table 1's PSNR, paired over batches.

    Args:
        psnr: ``{method: per-batch PSNR (dB)}`` for :data:`PAPER_RANKING`, batch i the same for all.
        setting, differences: the row's ``setting`` and ``differences`` (what this run changes).
        not_comparable: why this run's setting cannot test the paper's claim (None: it can).

    Returns:
        A row with ``paper`` "yes", ``this_run`` "yes" / "no" / "not resolved", the pairs' verdicts in
        ``setting``, and — when the run can test the claim and the ordering is resolved — ``claim``,
        ``claim_outcome`` (consistent / refuted) and ``claim_reason``.

    Raises:
        ValueError: as :func:`gitutor.paired.paired_ordering`.
    """
    found = paired_ordering(psnr, PAPER_RANKING)
    said = {"consistent": "yes", "refuted": "no"}.get(found["outcome"], "not resolved")
    pairs = "; ".join(found["pairs"].values())
    row = {"quantity": "Table 1 PSNR ordering " + " > ".join(PAPER_RANKING) + " (paired over batches)",
           "setting": f"{setting}; pairs: {pairs}", "paper": "yes", "this_run": said, "unit": "",
           "differences": differences, "claim": ORDER_CLAIM}
    if not_comparable:
        row["not_comparable"] = not_comparable
    elif found["outcome"] in ("consistent", "refuted"):
        n = len(next(iter(psnr.values())))
        row["claim_outcome"] = found["outcome"]
        how = "excludes 0 in the paper's direction" if said == "yes" else "is resolved, one against the paper"
        row["claim_reason"] = f"each neighbouring pair's PSNR difference over the same {n} batches {how}: {pairs}"
    return row


def order_sentence(psnr: Mapping[str, Sequence[float]]) -> str:
    """The paper's Table 1 ordering judged by paired PSNR differences, as a Markdown phrase: each
    neighbouring pair's verdict, then **consistent**, **refuted** or **not resolved**."""
    found = paired_ordering({m: psnr[m] for m in PAPER_RANKING}, PAPER_RANKING)
    n = len(psnr[PAPER_RANKING[0]])
    return (f"paired over the same {n} batches — {'; '.join(found['pairs'].values())} — the paper's "
            f"ordering {' > '.join(PAPER_RANKING)} is **{found['outcome']}**")


def trained_table_rows(trials: Sequence[Mapping], provenance: Mapping) -> list[dict]:
    """The rows of the recorded Table 1 on the trained network: each method's LPIPS / PSNR / SSIM
    (mean and 95 % interval over the batches, marked not comparable: another network, resolution,
    batch size and budget) and the paired ordering row, which is the chapter's headline.

    Args:
        trials: the ``trained_table`` phase of :func:`...setting_study.trained_summary.load_trained`.
        provenance: that phase's provenance (``iterations``, ``commit``).

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
    psnr = {m: [t["PSNR"] for t in runs] for m, runs in by_method.items()}
    rows.append({**ordering_row(psnr, setting, differences), "headline": True})
    return rows
