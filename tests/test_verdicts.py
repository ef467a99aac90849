"""One verdict rule for every row, headlines included, and no number outside its quantity's range
(issue 27, deliverables 1 and 4)."""

import json
from pathlib import Path

import pytest

from gitutor.results import (
    VERDICT_RULE,
    check_bounds,
    collect_results,
    glance_rows,
    glance_table,
    interval_fields,
    read_record,
    results_table,
    row_bounds,
    save_results,
    verdict,
)
from gitutor.stats import BOUNDS, interval, success_interval

ROOT = Path(__file__).resolve().parents[1]
# Chapter 01's headline as the issue found it: DLG label accuracy over 2 seeds, both right,
# Wilson interval [0.34, 1.00] in the setting text only, paper 0.833 — marked "meets".
DLG_LABELS = {
    "quantity": "DLG label accuracy",
    "setting": "2 seeds",
    "paper": 0.833,
    "this_run": 1.0,
    "unit": "fraction (iDLG paper, CIFAR-100)",
    "better": "higher",
    "differences": "quick profile",
    "headline": True,
}


def test_the_chapter_01_headline_is_not_resolved_by_its_interval():
    wilson = success_interval([True, True])
    row = dict(DLG_LABELS, **interval_fields(wilson, 2))
    assert (row["n"], row["low"], row["high"]) == (2, 0.34, 1.0)
    assert verdict(row) == "not resolved"  # the interval holds 0.833
    glance = glance_rows([{"notebook": "01_dlg", "profile": "quick", "rows": [row]}])
    assert glance[0]["verdict"] == "not resolved"  # the headline goes by the same rule


def test_a_row_of_several_trials_cannot_be_judged_without_its_interval(tmp_path):
    assert (
        verdict(DLG_LABELS) == "not resolved"
    )  # today's row: how many trials is not stated
    several = dict(DLG_LABELS, n=2)  # its n but no interval: refused, naming the row
    with pytest.raises(ValueError, match="DLG label accuracy.*n = 2.*interval"):
        verdict(several)
    with pytest.raises(ValueError, match=r"rows\[0\].*DLG label accuracy"):
        save_results("01_dlg", "quick", [several], tmp_path)
    with pytest.raises(ValueError, match="one trial has none"):
        save_results(
            "01_dlg", "quick", [dict(DLG_LABELS, n=1, low=0.3, high=1.0)], tmp_path
        )
    with pytest.raises(ValueError, match="'n'"):
        save_results("01_dlg", "quick", [dict(DLG_LABELS, n=0)], tmp_path)
    assert (
        verdict(dict(DLG_LABELS, n=1)) == "meets"
    )  # one measurement: its number decides
    qualitative = dict(
        DLG_LABELS, paper="pixel-wise accurate", n=3
    )  # not judged: needs no interval
    assert verdict(qualitative) == "not judged"  # words, not a setting that differs
    save_results("01_dlg", "quick", [qualitative], tmp_path)
    path = (
        tmp_path / "bad" / "01_dlg.json"
    )  # a record written without the check is refused on reading
    path.parent.mkdir()
    path.write_text(
        json.dumps({"notebook": "01_dlg", "profile": "quick", "rows": [several]})
    )
    with pytest.raises(ValueError, match="interval"):
        read_record(path)


@pytest.mark.parametrize(
    "better, low, high, expected",
    [
        ("higher", 0.80, 0.95, "meets"),  # whole interval within 5 % of 0.833 or above
        ("higher", 0.792, 0.95, "meets"),  # 0.792 ≥ 0.833 · 0.95 = 0.7914
        ("higher", 0.79, 0.95, "not resolved"),  # just below the allowance
        ("higher", 0.10, 0.79, "falls short"),  # whole interval below the allowance
        ("higher", 0.10, 0.80, "not resolved"),
        ("lower", 0.10, 0.87, "meets"),  # lower is better: 0.87 ≤ 0.833 · 1.05
        ("lower", 0.10, 0.88, "not resolved"),
        ("lower", 0.88, 0.95, "falls short"),
    ],
)
def test_rows_on_each_side_of_the_rule(better, low, high, expected):
    row = dict(
        DLG_LABELS,
        better=better,
        this_run=round((low + high) / 2, 3),
        n=5,
        low=low,
        high=high,
    )
    assert verdict(row) == expected


def test_a_setting_that_differs_in_a_way_that_matters_is_not_comparable(tmp_path):
    easier = dict(
        DLG_LABELS,
        n=1,
        not_comparable="16 px on an untrained network, easier than the paper's",
    )
    assert verdict(easier) == "not comparable"  # would "meet" on its numbers
    table = results_table([easier])
    assert "not comparable: 16 px on an untrained network" in table
    save_results("02_idlg_soft_labels", "quick", [easier], tmp_path)
    with pytest.raises(ValueError, match="not_comparable"):
        save_results(
            "02_idlg_soft_labels", "quick", [dict(easier, not_comparable=" ")], tmp_path
        )
    assert "not comparable" in VERDICT_RULE and "says why" in VERDICT_RULE
    glance = glance_table(collect_results(tmp_path))
    assert "**not comparable**" in glance


@pytest.mark.parametrize(
    "quantity, unit, bounds",
    [
        ("Table 1 SSIM (mean of 3 batches)", "", BOUNDS["SSIM"]),
        ("PSNR, DLG, B = 1", "dB", BOUNDS["PSNR"]),
        ("MSE IG (Table 1)", "MSE", BOUNDS["MSE"]),
        ("own-user match rate", "fraction", BOUNDS["fraction"]),
        ("label accuracy (Table 2)", "%", BOUNDS["percent"]),
        ("Δ log MSE, ADMM − SGD", "", None),  # a transformed metric may be negative
        ("PSNR gap stepwise − IG", "dB", None),
        ("spread of the representatives / spread of the photos", "ratio", None),
        ("generations to converge", "generations", None),
    ],
)
def test_each_quantity_has_its_range(quantity, unit, bounds):
    assert row_bounds({"quantity": quantity, "unit": unit}) == bounds


@pytest.mark.parametrize(
    "quantity, unit, low, high",
    [  # the intervals (Student-t, n = 3-5)
        ("Table 1 SSIM (mean of 3 batches)", "", -1.31, 0.66),
        ("PSNR, IG", "dB", -3.05, 27.66),
        ("MSE, IG", "MSE", -0.0092, 0.137),
        ("label accuracy", "fraction", 0.4, 1.2),
    ],
)
def test_an_interval_outside_its_range_fails_loudly(
    tmp_path, quantity, unit, low, high
):
    run = min(
        max(0.05, low), high
    )  # inside its own interval (save_results refuses a run outside it)
    row = dict(
        DLG_LABELS, quantity=quantity, unit=unit, this_run=run, n=4, low=low, high=high
    )
    record = {"notebook": "06_learning_to_invert", "rows": [row]}
    with pytest.raises(
        ValueError, match=r"06_learning_to_invert rows\[0\].*outside the range"
    ):
        check_bounds(record)
    with pytest.raises(ValueError, match="outside the range"):
        save_results("06_learning_to_invert", "quick", [row], tmp_path)
    values = [
        low,
        high,
        0.05,
        0.05,
    ]  # the same spread through the shared helper stays in range
    lo, hi = row_bounds(row)
    inside = [min(max(v, lo), hi) for v in values]
    fixed = dict(
        row,
        this_run=round(sum(inside) / 4, 4),
        **interval_fields(interval(inside, bounds=(lo, hi)), 4),
    )
    assert check_bounds({"rows": [fixed]}) and lo <= fixed["low"] <= fixed["high"] <= hi


def test_no_interval_on_any_recorded_page_lies_outside_its_range():
    """The recorded runs (book/recorded/*.json) and the study records (book/studies/) as
    stored: read_record checks each row's numbers and interval against its range."""
    records = sorted((ROOT / "book" / "recorded").glob("*.json"))
    for path in records:
        record = read_record(path)  # raises naming the row out of range
        for row in record["rows"]:
            bounds = row_bounds(row)
            if bounds and "low" in row:
                assert bounds[0] <= row["low"] <= row["high"] <= bounds[1], (
                    path.name,
                    row,
                )
    study = ROOT / "book" / "studies" / "04_setting_study.json"
    if (
        study.exists()
    ):  # its intervals are computed on the page: the same helper, with bounds
        from gitutor.chapters.stepwise_gradinversion.setting_study.summary import (
            curves,
            load_record,
        )

        for curve in curves(load_record(study)[0]).values():
            for metric in ("PSNR", "SSIM"):
                for summary in curve[metric]:
                    low, high = BOUNDS[metric]
                    assert summary.n == 1 or low <= summary.low <= summary.high <= high


def _record(notebook, row, recorded=False):
    record = {
        "notebook": notebook,
        "profile": "quick",
        "rows": [dict(row, headline=True)],
    }
    return record | ({"provenance": {"commit": "abc"}} if recorded else {})


def test_the_ledger_reads_each_papers_claim_off_its_headline_row():
    from gitutor.results import (
        PAPERS,
        ledger_html,
        ledger_rows,
        ledger_summary,
        ledger_table,
    )

    unresolved = dict(DLG_LABELS, **interval_fields(success_interval([True, True]), 2))
    shorter = dict(
        DLG_LABELS,
        quantity="SSIM, stepwise",
        unit="",
        paper=0.49,
        this_run=0.04,
        n=3,
        low=0.02,
        high=0.07,
    )
    records = [
        _record("01_dlg", unresolved),
        _record(
            "04_stepwise_gradinversion",
            dict(shorter, this_run=0.6, low=0.55, high=0.65),
        ),
        _record(
            "04_stepwise_gradinversion", dict(shorter, claim="“best”"), recorded=True
        ),
        _record("02_idlg_soft_labels", dict(DLG_LABELS, n=1)),
        _record("01_dlg", dict(DLG_LABELS, n=1), recorded=True),
    ]  # recorded before claims were quoted
    lines = {line["notebook"]: line for line in ledger_rows(records)}
    assert len(lines) == len(PAPERS) == 8  # one per chapter, 08 included
    assert (
        lines["01_dlg"]["outcome"] == "not resolved"
        and "[0.34, 1]" in lines["01_dlg"]["reason"]
    )
    assert (
        lines["04_stepwise_gradinversion"]["run"] == "recorded"
    )  # the larger budget decides
    assert (
        lines["01_dlg"]["run"] == "chapter"
    )  # an older recording (no quoted claim) does not
    assert lines["04_stepwise_gradinversion"]["outcome"] == "not reproduced"
    assert lines["02_idlg_soft_labels"]["outcome"] == "reproduced"
    assert lines["05_diffusion_user_level"]["outcome"] == "not run in this build"
    assert (
        "ADMM" in lines["07_admm_comparison"]["paper"]
        and "anonymous" in lines["07_admm_comparison"]["source"]
    )
    summary = ledger_summary(records)
    assert summary.startswith(
        "Of the 8 chapters' central claims, 1 reproduced (iDLG and soft labels), "
    )
    assert "1 did not reproduce (Stepwise GradInversion (Stage II))" in summary
    table = ledger_table(records, "../notebooks", "recorded")
    assert (
        "[04 (recorded)](recorded/04_stepwise_gradinversion.ipynb)" in table
        and table.count("\n") == 9
    )
    assert (
        "[01 (this build)](../notebooks/01_dlg.ipynb)" in table
    )  # its recording quotes no claim
    page = ledger_html(records, "../notebooks", "recorded")
    assert (
        '<a href="../notebooks/01_dlg.html">01 (this build)</a>' in page
        and page.count("<tr>") == 9
    )


def test_a_difference_of_two_methods_may_be_negative_but_a_metric_may_not():
    from gitutor.results.bounds import bounds_problem

    effect = {
        "quantity": "PSNR, DiffULA − IG user level without prior (the prior's effect)",
        "unit": "dB",
        "this_run": -0.54,
        "low": -0.62,
        "high": -0.46,
        "n": 10,
    }
    assert bounds_problem(effect) is None
    assert "outside the range" in bounds_problem(
        {**effect, "quantity": "PSNR, DiffULA"}
    )


def test_the_ledger_reads_a_chapters_judgement_of_a_qualitative_claim_and_not_comparable_rows():
    """refuted / consistent come from the headline's claim_outcome (with its reason, after the paper's words);
    a not comparable headline reads not comparable, never not resolved."""
    from gitutor.results import (
        LEDGER_OUTCOMES,
        ledger_rows,
        ledger_summary,
        ledger_table,
    )

    words = dict(
        DLG_LABELS,
        paper="DLG-ADMM stays noise (Fig. 1)",
        this_run=1.0,
        n=30,
        low=0.89,
        high=1.0,
        unit="fraction",
        not_comparable="the report gives no number",
    )
    words.pop("better", None)
    refuted = dict(
        words,
        claim="ADMM may be an effective privacy-protection technique (§5)",
        claim_outcome="refuted",
        claim_reason="cosine matching recovers 30 of 30 images",
    )
    consistent = dict(
        words, claim_outcome="consistent", claim_reason="the attack recovers none"
    )
    open_claim = dict(
        words,
        claim="a representative image reveals the user (§1)",
        claim_outcome="not resolved",
        claim_reason="10 users: the interval holds chance; about 40 would settle it",
    )
    records = [
        _record("07_admm_comparison", refuted),
        _record("06_learning_to_invert", consistent),
        _record("05_diffusion_user_level", words),
        _record("04_stepwise_gradinversion", open_claim),
    ]
    lines = {line["notebook"]: line for line in ledger_rows(records)}
    assert (
        lines["07_admm_comparison"]["outcome"] == "refuted"
        and "30 of 30" in lines["07_admm_comparison"]["reason"]
    )
    assert lines["06_learning_to_invert"]["outcome"] == "consistent"
    assert lines["05_diffusion_user_level"]["outcome"] == "not comparable"
    assert lines["04_stepwise_gradinversion"]["outcome"] == "not resolved"
    assert "about 40 would settle it" in lines["04_stepwise_gradinversion"]["reason"]
    assert {line["outcome"] for line in lines.values()} <= set(LEDGER_OUTCOMES) | {
        "not run in this build"
    }
    assert (
        "“ADMM may be an effective privacy-protection technique (§5)” — cosine"
        in ledger_table(records)
    )
    summary = ledger_summary(records)
    assert "1 is refuted by this book's own evidence (DLG against FedADMM)" in summary
    assert "1 is not comparable in this setting (User-level inversion)" in summary


@pytest.mark.parametrize(
    "extra, name",
    [
        ({"claim_outcome": "refuted"}, "claim_outcome"),
        ({"claim_outcome": "proven", "claim_reason": "x"}, "claim_outcome"),
        ({"claim_reason": "x"}, "claim_outcome"),
        ({"claim": ""}, "claim"),
    ],
)
def test_a_claim_judgement_needs_a_known_outcome_and_its_reason(tmp_path, extra, name):
    with pytest.raises(ValueError, match=name):
        save_results(
            "07_admm_comparison", "quick", [dict(DLG_LABELS, n=1, **extra)], tmp_path
        )
