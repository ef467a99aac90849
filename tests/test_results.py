import json

import pytest

from gitutor.results import (
    GLANCE_LIMITS,
    chapter_details,
    chapter_record,
    collect_results,
    glance_rows,
    glance_table,
    headline_row,
    results_table,
    run_label,
    save_results,
    timings_table,
    verdict_sentence,
)

ROW = {
    "quantity": "PSNR",
    "setting": "B=1",
    "paper": "n/a",
    "this_run": 31.25,
    "unit": "dB",
    "differences": "quick profile",
    "n": 1,
}


def test_save_and_collect_round_trip(tmp_path):
    path = save_results(
        "01_dlg", "quick", [ROW, dict(ROW, this_run=float("inf"))], tmp_path
    )
    record = json.loads(path.read_text())
    assert record["notebook"] == "01_dlg" and record["profile"] == "quick"
    assert record["rows"][0] == ROW and record["rows"][1]["this_run"] == "inf"
    save_results("02_x", "quick", [ROW], tmp_path)
    records = collect_results(tmp_path)
    assert [r["notebook"] for r in records] == ["01_dlg", "02_x"]
    table = glance_table(records)
    assert table.count("\n") == 3 and "01 · DLG (quick)" in table and "31.25" in table


def test_row_validation(tmp_path):
    with pytest.raises(ValueError, match="missing keys"):
        save_results("01_dlg", "quick", [{"quantity": "PSNR"}], tmp_path)
    with pytest.raises(ValueError, match="empty"):
        save_results("01_dlg", "quick", [], tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        collect_results(tmp_path / "nope")


def test_results_table_escapes_pipes():
    assert "a \\| b" in results_table([dict(ROW, setting="a | b")])


def test_verdicts_follow_the_stated_rule():
    from gitutor.results import verdict

    assert (
        verdict(dict(ROW, paper=30.0, this_run=29.0, better="higher")) == "meets"
    )  # within 5 %
    assert (
        verdict(dict(ROW, paper=30.0, this_run=28.0, better="higher")) == "falls short"
    )
    assert verdict(dict(ROW, paper=0.10, this_run=0.104, better="lower")) == "meets"
    assert verdict(dict(ROW, paper=0.10, this_run=0.2, better="lower")) == "falls short"
    # the rule gives nothing it cannot judge "not comparable" of its own accord
    assert (
        verdict(dict(ROW, paper=30.0, this_run=40.0)) == "not judged"
    )  # no direction stated
    assert (
        verdict(dict(ROW, paper="n/a", this_run=40.0, better="higher")) == "not judged"
    )
    assert (
        verdict(dict(ROW, paper=30.0, this_run="nan", better="higher")) == "not judged"
    )
    marked = dict(ROW, paper=30.0, this_run=40.0, not_comparable="16 px, not 32")
    assert verdict(marked) == "not comparable"  # only a row that says how it differs


def test_a_row_with_an_interval_needs_all_of_it_on_one_side_of_the_paper(tmp_path):
    from gitutor.results import save_results, verdict

    row = dict(ROW, paper=0.49, this_run=0.20, better="higher", n=4)
    assert verdict(dict(row, low=0.10, high=0.30)) == "falls short"
    assert verdict(dict(row, low=-0.3, high=0.66)) == "not resolved"  # holds 0.49
    assert (
        verdict(dict(row, this_run=0.6, low=0.47, high=0.7)) == "meets"
    )  # 0.47 within 5 %
    lower = dict(ROW, paper=0.10, this_run=0.12, better="lower", n=4)
    assert verdict(dict(lower, low=0.06, high=0.18)) == "not resolved"
    assert verdict(dict(lower, low=0.11, high=0.13)) == "falls short"
    assert verdict_sentence([dict(row, low=-0.3, high=0.66), MEETS]) == (
        "1 of 2 rows meets the paper, 1 is not resolved."
    )
    for bad in ({"low": 0.1}, {"low": 0.3, "high": 0.1}, {"low": "a", "high": 0.2}):
        with pytest.raises(ValueError, match="low"):
            save_results("01_dlg", "quick", [dict(row, **bad)], tmp_path)


def test_save_rejects_paths_unknown_directions_and_objects_and_unwraps_numpy(tmp_path):
    import numpy as np

    with pytest.raises(ValueError, match="notebook"):
        save_results("../x", "quick", [ROW], tmp_path)
    with pytest.raises(ValueError, match="better"):
        save_results("01_dlg", "quick", [dict(ROW, better="up")], tmp_path)
    with pytest.raises(TypeError, match="this_run"):
        save_results("01_dlg", "quick", [dict(ROW, this_run=[1, 2])], tmp_path)
    path = save_results(
        "01_dlg",
        "quick",
        [dict(ROW, this_run=np.float32(2.5), paper=np.float64("nan"))],
        tmp_path,
        timings=[dict(ROW, quantity="wall time", this_run=np.int64(3), unit="s")],
    )
    text = path.read_text()
    assert "NaN" not in text
    record = json.loads(text)
    assert record["rows"][0]["this_run"] == 2.5 and record["rows"][0]["paper"] == "nan"
    assert record["timings"][0]["this_run"] == 3


def test_shared_differences_are_stated_once_above_the_table():
    rows = [ROW, dict(ROW, quantity="SSIM", unit="")]
    table = results_table(rows)
    assert table.startswith(
        "**Differences from the paper (every row):** quick profile\n\n"
    )
    assert table.count("quick profile") == 1 and "| differences |" not in table
    mixed = results_table([ROW, dict(ROW, differences="full profile")])
    assert "| differences |" in mixed and mixed.startswith("|")


LONG = "quick profile: " + "sixty L-BFGS steps on bundled photographs, " * 4


def _row(quantity, paper, this_run, better=None, **extra):
    row = dict(ROW, quantity=quantity, paper=paper, this_run=this_run, **extra)
    return row | ({"better": better} if better else {})


QUALITATIVE = _row(
    "PSNR ordering Stepwise > GradInversion > IG > DLG",
    "yes",
    "not resolved at this budget",
    setting="95 % intervals separate",
)
FALLS_SHORT = _row("PSNR, B = 4", 15.0, 9.0, "higher", differences=LONG)
MEETS = _row("label accuracy", 0.8, 0.9, "higher")


def _records(tmp_path):
    """Three chapter runs and one recorded run (a record with provenance)."""
    save_results("01_dlg", "quick", [QUALITATIVE, FALLS_SHORT, MEETS], tmp_path)
    save_results(
        "02_idlg_soft_labels",
        "quick",
        [FALLS_SHORT, dict(MEETS, headline=True)],
        tmp_path,
    )
    save_results("07_admm_comparison", "quick", [QUALITATIVE], tmp_path)
    recorded = tmp_path / "recorded"
    path = save_results(
        "01_dlg",
        "full",
        [MEETS, FALLS_SHORT],
        recorded,
        timings=[dict(ROW, quantity="wall time", unit="s")],
    )
    record = json.loads(path.read_text())
    record["provenance"] = {
        "commit": "0123456789abcdef",
        "torch": "2.5.0",
        "device": "NVIDIA H100 80GB HBM3",
        "wall_seconds": 1200,
        "command": "python3 scripts/record.py notebooks/01_dlg",
        "parameters": {"BUDGET": "gpu_recording"},
    }
    path.write_text(json.dumps(record))
    return collect_results(tmp_path, recorded)


def test_headline_row_is_the_marked_row_else_the_first_judged_else_the_first():
    marked = dict(MEETS, headline=True)
    assert headline_row([FALLS_SHORT, marked]) is marked
    assert headline_row([QUALITATIVE, FALLS_SHORT, MEETS]) is FALLS_SHORT
    assert headline_row([QUALITATIVE, dict(QUALITATIVE, quantity="x")]) is QUALITATIVE
    with pytest.raises(ValueError, match="empty"):
        headline_row([])


def test_headline_key_is_stored_and_checked(tmp_path):
    path = save_results("01_dlg", "quick", [ROW, dict(ROW, headline=True)], tmp_path)
    assert json.loads(path.read_text())["rows"][1]["headline"] is True
    with pytest.raises(ValueError, match="headline"):
        save_results("01_dlg", "quick", [dict(ROW, headline=True)] * 2, tmp_path)
    with pytest.raises(TypeError, match="headline"):
        save_results("01_dlg", "quick", [dict(ROW, headline="yes")], tmp_path)


def test_glance_has_one_line_per_chapter_from_the_run_that_speaks_for_it(tmp_path):
    records = _records(tmp_path)
    summaries = glance_rows(records)
    # the recording of 01 quotes no claim of the paper: the build's run speaks for 01
    assert [(s["notebook"], s["recorded"]) for s in summaries] == [
        ("01_dlg", False),
        ("02_idlg_soft_labels", False),
        ("07_admm_comparison", False),
    ]
    assert [other["notebook"] for other in summaries[0]["others"]] == ["01_dlg"]
    assert (
        run_label(summaries[0]["others"][0])
        == "recorded: full, budget gpu_recording, NVIDIA H100 80GB HBM3"
    )
    lines = glance_table(records, "../notebooks", "recorded").splitlines()
    assert len(lines) == 2 + 3  # header, rule, one line per chapter
    assert lines[2].startswith(
        "| [01 · DLG](../notebooks/01_dlg.ipynb) (quick; "
        "[recorded run](recorded/01_dlg.ipynb)) |"
    )
    assert "recorded" not in " ".join(lines[3:])


def test_a_recording_that_quotes_the_claim_speaks_for_its_chapter(tmp_path):
    records = _records(tmp_path)
    quoting = json.loads(
        json.dumps(records[1])
    )  # the recording of 01, quoting the claim
    quoting["rows"][0] |= {"headline": True, "claim": "pixel-wise accurate"}
    records = [records[0], quoting, *records[2:]]
    assert chapter_record(records, "01_dlg") is quoting
    summary = glance_rows(records)[0]
    assert summary["recorded"] and summary["others"] == [records[0]]
    line = glance_table(records, "../notebooks", "recorded").splitlines()[2]
    assert line.startswith("| [01 · DLG](recorded/01_dlg.ipynb) (**recorded**: full,")
    assert "[quick run](../notebooks/01_dlg.ipynb)" in line
    assert chapter_record(records, "05_diffusion_user_level") is None
    with pytest.raises(TypeError, match="notebook"):
        chapter_record(records, 1)


def test_glance_verdict_is_the_chapters_claim_verdict_plus_a_count_of_all_rows(
    tmp_path,
):
    table = glance_table(_records(tmp_path))
    header, _, dlg, idlg, admm = table.splitlines()
    assert "verdict on the central claim" in header
    assert "meets / falls short / not resolved / not comparable / not judged" in header
    assert (
        "PSNR, B = 4" in dlg
        and "**not reproduced**" in dlg  # falls short, read as the paper's claim
        and dlg.endswith("| 1 / 1 / 0 / 0 / 1 |")
    )
    assert (
        "label accuracy" in idlg and "**reproduced**" in idlg
    )  # marked, not first judged
    assert idlg.endswith("| 1 / 1 / 0 / 0 / 0 |")
    # a qualitative row says what was checked, what the paper claims and what this run found
    assert "PSNR ordering" in admm and "| yes |" in admm and "not resolved" in admm
    assert "**not judged**" in admm and "not comparable" not in admm


def test_glance_keeps_long_text_out(tmp_path):
    long_quantity = "mean PSNR over every attacked batch of every seed " * 3
    save_results(
        "03_cv_batch_labels",
        "quick",
        [_row(long_quantity, LONG, 1.0, "higher")],
        tmp_path,
    )
    table = glance_table(_records(tmp_path))
    assert LONG.strip()[:40] not in table  # the differences stay in the detail
    line = next(line for line in table.splitlines() if "03 ·" in line)
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[1].endswith("…") and len(cells[1]) <= GLANCE_LIMITS["headline"]
    assert cells[2].endswith("…") and len(cells[2]) <= GLANCE_LIMITS["value"]
    assert max(len(cell) for cell in cells[1:]) <= GLANCE_LIMITS["headline"]


def test_chapter_details_hold_each_records_full_table_in_a_dropdown(tmp_path):
    records = _records(tmp_path)
    details = chapter_details(records, "../notebooks", "recorded")
    assert (
        details.count("````{dropdown}") == len(records) == 4
    )  # every run, recorded too
    assert details.count("\n````\n") + details.endswith("````") == 4
    for record in records:
        assert results_table(record["rows"]) in details
    assert "01 · DLG (quick): 1 of 3 rows meets the paper" in details
    assert details.count("The paper's central claim: **") == 3  # one per chapter
    assert "The paper's central claim: **not reproduced**" in details  # 01, this build
    assert details.count("Not the run that speaks for the paper") == 1  # 01's recording
    assert "Recorded by `python3 scripts/record.py notebooks/01_dlg`" in details
    assert (
        "commit 0123456" in details
        and "[the recorded page](recorded/01_dlg.ipynb)" in details
    )


def test_timings_are_labelled_by_chapter_and_run(tmp_path):
    table = timings_table(_records(tmp_path))
    assert "01 · DLG (recorded: full, budget gpu_recording" in table
    assert timings_table(
        [{"notebook": "01_dlg", "profile": "quick", "rows": [ROW]}]
    ) == ("No timings were recorded.")


def test_verdict_sentence_counts_and_agrees_in_number():
    assert verdict_sentence([MEETS, FALLS_SHORT, QUALITATIVE]) == (
        "1 of 3 rows meets the paper, 1 falls short, 1 is not judged."
    )
    assert verdict_sentence([FALLS_SHORT, FALLS_SHORT, QUALITATIVE, QUALITATIVE]) == (
        "0 of 4 rows meet the paper, 2 fall short, 2 are not judged."
    )
    other = dict(MEETS, not_comparable="16 px, untrained network")
    assert verdict_sentence([other, other, QUALITATIVE]) == (
        "0 of 3 rows meet the paper, 2 are not comparable, 1 is not judged."
    )


def test_results_table_states_shared_differences_and_reasons_once():
    from gitutor.results import results_table

    row = {
        "quantity": "q",
        "setting": "s",
        "paper": 1.0,
        "this_run": 1.0,
        "unit": "",
        "differences": "D",
        "better": "higher",
        "n": 1,
        "not_comparable": "R",
    }
    rows = [dict(row, setting=f"s{i}") for i in range(4)] + [
        dict(row, differences="E", not_comparable="Q")
    ]
    table = results_table(rows)
    assert "**Differences from the paper (rows that say as above):** D" in table
    assert "**Not comparable (rows that say so):** R" in table
    assert (
        table.count("| as above |") == 4
        and "| E |" in table
        and "not comparable: Q" in table
    )
    assert table.count("not comparable: the reason above") == 4
    single = results_table(rows[:2])
    assert (
        "(every row)" in single and "Not comparable (rows" not in single
    )  # two rows: said in each
