"""The results page agrees with the chapters (issue 44, deliverable 4): one verdict per chapter,
the same in the ledger, the table per chapter and the dropdowns, read off the same rows as the
chapter's verdict sentence; "not comparable" only for a row that says how its setting differs;
reasons whole; chapter 08 in the ledger."""

import re

import pytest

from gitutor.results import (
    LEDGER_OUTCOMES,
    OUTCOMES,
    PAPERS,
    chapter_details,
    chapter_record,
    claim_tally,
    claim_verdict,
    glance_rows,
    glance_table,
    headline_row,
    ledger_html,
    ledger_rows,
    ledger_summary,
    ledger_table,
    results_table,
    verdict,
    verdict_sentence,
    verdict_tally,
    verdict_text,
    why_not_judged,
)

BASE = {"setting": "quick", "unit": "dB", "differences": "quick profile"}
LONG_REASON = (
    "16 targets, IG 100 its: sign comp. LTI < IG; prune α=0.99 LTI < IG; Gauss σ=0.1 LTI < IG; "
    "IG's curve flat (iterations): sign comp. by 300, prune α=0.99 by 300, Gauss σ=0.1 by 100; "
    "against IG at its best recorded budget (4 targets): sign comp. not resolved at this budget"
)


def _row(quantity, paper, this_run, **extra):
    return {"quantity": quantity, "paper": paper, "this_run": this_run, **BASE, **extra}


def _record(notebook, rows, recorded=False):
    record = {"notebook": notebook, "profile": "quick", "rows": rows}
    return record | ({"provenance": {"commit": "abc"}} if recorded else {})


def _book():
    """One record per chapter, shaped like the book's own: a headline that meets while the chapter
    judges the paper's claim not resolved (06), a qualitative claim judged consistent (01), a recording
    whose headline quotes no claim beside the build's run (04, 08), a headline marked not comparable
    (08), and an undecided ordering whose numbers are words (04)."""
    words = {"n": 1}
    return [
        _record(
            "01_dlg",
            [
                _row(
                    "seeds recognisable",
                    "pixel-wise accurate",
                    0.6,
                    unit="fraction",
                    n=10,
                    low=0.31,
                    high=0.83,
                    headline=True,
                    claim="the recovery is pixel-wise accurate",
                    claim_outcome="consistent",
                    claim_reason="6 of 10 runs match the gradient",
                ),
                _row(
                    "label accuracy",
                    0.833,
                    0.9,
                    unit="fraction",
                    better="higher",
                    n=10,
                    low=0.6,
                    high=0.98,
                ),
                _row("PSNR, B = 4", "not reported", 12.0, **words),
            ],
        ),
        _record(
            "02_idlg_soft_labels",
            [
                _row(
                    "λ accuracy",
                    99.7,
                    98.9,
                    unit="%",
                    better="higher",
                    n=90,
                    low=94.0,
                    high=99.8,
                    headline=True,
                ),
                _row(
                    "Table 3 PSNR",
                    28.3,
                    17.0,
                    better="higher",
                    n=10,
                    low=15.1,
                    high=18.9,
                    not_comparable="16×16 px, CPU step budget",
                ),
            ],
        ),
        _record(
            "04_stepwise_gradinversion",
            [
                _row(
                    "Table 1 ordering",
                    "yes",
                    "not resolved",
                    unit="",
                    headline=True,
                    claim="best performance",
                ),
                _row(
                    "Table 1 SSIM",
                    0.49,
                    0.23,
                    unit="",
                    better="higher",
                    n=4,
                    low=0.16,
                    high=0.3,
                    not_comparable="96 px, EfficientNet-Lite0",
                ),
            ],
        ),
        _record(
            "04_stepwise_gradinversion",
            [
                _row(
                    "Table 1 SSIM",
                    0.49,
                    0.52,
                    unit="",
                    better="higher",
                    n=5,
                    low=0.4,
                    high=0.64,
                    headline=True,
                    not_comparable="not an ImageNet-trained network",
                )
            ],
            recorded=True,
        ),
        _record(
            "06_learning_to_invert",
            [
                _row(
                    "defenses where LTI < IG",
                    3,
                    3,
                    unit="of 3 defenses",
                    better="higher",
                    n=1,
                    headline=True,
                    claim="LTI outperforms both baselines",
                    claim_outcome="not resolved",
                    claim_reason=LONG_REASON,
                ),
                _row("MSE, LTI, none", 0.01, 0.02, unit="MSE"),
            ],
        ),
        _record(
            "08_flower_dp",
            [
                _row(
                    "MSE, IG on a FedSGD update, B = 1",
                    0.022,
                    0.0002,
                    unit="MSE",
                    better="lower",
                    n=5,
                    low=0.0,
                    high=0.0005,
                    headline=True,
                    not_comparable="Wu et al.'s MSE is on colour CIFAR-10; this run attacks 32 px grey LFW "
                    "faces and non-faces, and an MSE depends on the images",
                ),
                _row(
                    "label accuracy",
                    1.0,
                    1.0,
                    unit="fraction",
                    better="higher",
                    n=5,
                    low=0.57,
                    high=1.0,
                ),
                _row(
                    "SSIM after E = 5 local steps",
                    "multi-step FedAvg updates still leak",
                    0.98,
                    unit="SSIM",
                ),
            ],
        ),
        _record(
            "08_flower_dp",
            [
                _row(
                    "MSE, IG on a FedSGD update, B = 1",
                    0.022,
                    0.0003,
                    unit="MSE",
                    better="lower",
                    n=5,
                    low=0.0,
                    high=0.0006,
                    headline=True,
                    not_comparable="colour CIFAR-10 vs grey LFW",
                )
            ],
            recorded=True,
        ),
    ]


def _counts(sentence: str) -> dict:
    """The verdict counts a chapter's verdict sentence states, by outcome."""
    met = re.match(r"(\d+) of \d+ rows? meets? the paper", sentence)
    counts = dict.fromkeys(OUTCOMES, 0) | {"meets": int(met.group(1))}
    for count, outcome in re.findall(
        r"(\d+) (?:falls? short|(?:is|are) (not resolved|not comparable|not judged))",
        sentence,
    ):
        counts[outcome or "falls short"] = int(count)
    return counts


def test_each_chapter_has_one_verdict_in_every_table_and_it_is_the_chapters():
    records = _book()
    lines = {line["notebook"]: line for line in ledger_rows(records)}
    table = glance_table(records)
    details = chapter_details(records)
    for summary in glance_rows(records):
        rows = summary["record"]["rows"]
        chapter = claim_verdict(
            rows
        )  # what the chapter's page states of the paper's claim
        assert summary["verdict"] == lines[summary["notebook"]]["outcome"] == chapter
        line = next(
            line
            for line in table.splitlines()
            if line.startswith(f"| {summary['chapter']}")
        )
        assert f"| **{chapter}** |" in line
        others = set(LEDGER_OUTCOMES) - {chapter}
        assert not any(f"**{other}**" in line for other in others)
        # the counts are those of the chapter page's verdict sentence, from the same rows
        assert (
            summary["tally"] == verdict_tally(rows) == _counts(verdict_sentence(rows))
        )
        assert line.endswith(
            " / ".join(str(summary["tally"][o]) for o in OUTCOMES) + " |"
        )
        assert f"The paper's central claim: **{chapter}**." in details
    assert (
        lines["06_learning_to_invert"]["outcome"] == "not resolved"
    )  # not the headline row's "meets"
    assert verdict(headline_row(_book()[4]["rows"])) == "meets"
    assert "**meets**" not in table
    assert lines["01_dlg"]["outcome"] == "consistent"
    assert (
        details.count("The paper's central claim: **") == len(glance_rows(records)) == 5
    )
    # a recording that does not speak for its chapter states no second verdict for it
    assert details.count("Not the run that speaks for the paper") == 2


def test_the_ledger_and_the_glance_table_read_the_same_record():
    records = _book()
    for notebook in ("04_stepwise_gradinversion", "08_flower_dp"):
        speaking = chapter_record(records, notebook)
        assert (
            "provenance" not in speaking
        )  # the recordings quote no claim of the paper
        line = next(
            line for line in ledger_rows(records) if line["notebook"] == notebook
        )
        assert line["run"] == "chapter" and line["passed_over"]
        summary = next(s for s in glance_rows(records) if s["notebook"] == notebook)
        assert summary["record"] is speaking and len(summary["others"]) == 1
    assert (
        "[04 (this build)](../notebooks/04_stepwise_gradinversion.ipynb)"
        in ledger_table(records, "../notebooks", "recorded")
    )
    quoting = _book()
    quoting[3]["rows"][0]["claim"] = (
        "best performance"  # recorded again, quoting the claim
    )
    line = next(
        line
        for line in ledger_rows(quoting)
        if line["notebook"] == "04_stepwise_gradinversion"
    )
    assert (
        line["run"] == "recorded"
        and not line["passed_over"]
        and line["outcome"] == "not comparable"
    )
    summary = next(
        s for s in glance_rows(quoting) if s["notebook"] == "04_stepwise_gradinversion"
    )
    assert summary["recorded"] and summary["verdict"] == "not comparable"


def test_reasons_are_whole_in_the_ledger():
    records = _book()
    assert len(LONG_REASON) > 150
    lines = {line["notebook"]: line for line in ledger_rows(records)}
    assert lines["06_learning_to_invert"]["reason"] == LONG_REASON
    long_why = _book()[5]["rows"][0]["not_comparable"]
    assert long_why in lines["08_flower_dp"]["reason"]
    table, page = ledger_table(records), ledger_html(records)
    assert LONG_REASON in table and "…" not in table
    assert "Gauss σ=0.1 LTI &lt; IG; IG&#x27;s curve flat" in page and "…" not in page


def test_chapter_08_is_in_the_ledger_with_its_claim_and_the_count_is_of_chapters():
    assert [notebook for *_, notebook in PAPERS][-1] == "08_flower_dp" and len(
        PAPERS
    ) == 8
    records = _book()
    line = next(
        line for line in ledger_rows(records) if line["notebook"] == "08_flower_dp"
    )
    assert (
        line["claim"] == "MSE, IG on a FedSGD update, B = 1"
    )  # its headline: the FedSGD MSE row
    assert line["outcome"] == "not comparable" and "colour CIFAR-10" in line["reason"]
    assert "Wu et al. 2023" in line["source"]
    summary = ledger_summary(records)
    assert (
        summary.startswith("Of the 8 chapters' central claims, ")
        and "papers'" not in summary
    )
    assert (
        "1 is not comparable in this setting (Inverting Gradients on a Flower client's update)"
        in summary
    )
    assert "3 were not run in this build" in summary  # 03, 05, 07: no record given
    assert (
        "1 is not judged by the verdict rule (Stepwise GradInversion (Stage II))"
        in summary
    )


@pytest.mark.parametrize(
    "row, why",
    [
        (
            _row("PSNR ordering", "yes", "not resolved", unit=""),
            "the paper states no number",
        ),
        (_row("PSNR", "not reported", 12.0), "the paper states no number"),
        (_row("PSNR", 28.3, "n/a"), "this run reports no number"),
        (_row("PSNR", 28.3, "nan", better="higher"), "this run's number is not finite"),
        (_row("PSNR", float("inf"), 17.0), "the paper's number is not finite"),
        (
            _row("MSE, LTI", 0.01, 0.02, unit="MSE"),
            "the row does not say whether higher or lower is better",
        ),
    ],
)
def test_the_rule_never_makes_an_unmarked_row_not_comparable(row, why):
    assert verdict(row) == "not judged" and why_not_judged(row) == why
    assert verdict_text(row) == f"not judged: {why}"
    assert "not judged: " + why in results_table([row])
    marked = dict(row, not_comparable="16×16 px, CPU step budget")
    assert verdict(marked) == "not comparable" and why_not_judged(marked) is None
    assert verdict_text(marked) == "not comparable: 16×16 px, CPU step budget"
    claimed = dict(marked, claim_outcome="refuted")
    assert verdict_text(claimed) == (
        "the paper's claim: **refuted** by this chapter's evidence "
        "(no number compared: 16×16 px, CPU step budget)"
    )
    assert "not comparable" not in verdict_text(claimed)
    unmarked = dict(row, claim_outcome="consistent")
    assert verdict_text(unmarked).startswith("the paper's claim: **consistent**")
    assert why in verdict_text(unmarked) and "not judged" not in verdict_text(unmarked)
    # the closing sentence says the claim rows are counted by their number's verdict
    judged = _row("PSNR", 28.3, 30.0, better="higher", n=1)
    assert verdict_sentence([judged, marked]) == (
        "1 of 2 rows meets the paper, 1 is not comparable."
    )
    assert verdict_sentence([judged, claimed, unmarked]) == (
        "1 of 3 rows meets the paper, 1 is not comparable, 1 is not judged; 2 of these "
        "carry the chapter's judgement of the paper's claim instead (refuted 1, "
        "consistent 1)."
    )
    assert claim_tally([judged, claimed, unmarked]) == {"refuted": 1, "consistent": 1}
    assert claim_tally([judged, marked]) == {}
    assert _counts(verdict_sentence([judged, claimed, unmarked])) == verdict_tally(
        [judged, claimed, unmarked]
    )


def test_a_row_in_the_papers_kind_of_setting_is_judged():
    table3 = _row(
        "Table 3 PSNR", 28.3, 17.0, better="higher", n=10, low=15.1, high=18.9
    )
    assert verdict(table3) == "falls short" and why_not_judged(table3) is None
    assert verdict(dict(table3, low=15.1, high=29.0, this_run=20.0)) == "not resolved"
    assert verdict(dict(table3, this_run=28.0, low=27.5, high=28.5)) == "meets"


def test_a_claim_verdict_needs_rows():
    with pytest.raises(ValueError, match="rows is empty"):
        claim_verdict([])
    with pytest.raises(TypeError, match=r"rows\[0\] must be a dict"):
        claim_verdict(["PSNR"])
