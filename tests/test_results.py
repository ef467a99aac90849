import json

import pytest

from gitutor.results import collect_results, results_table, save_results, summary_table

ROW = {"quantity": "PSNR", "setting": "B=1", "paper": "n/a", "this_run": 31.25, "unit": "dB",
       "differences": "quick profile"}


def test_save_and_collect_round_trip(tmp_path):
    path = save_results("01_dlg", "quick", [ROW, dict(ROW, this_run=float("inf"))], tmp_path)
    record = json.loads(path.read_text())
    assert record["notebook"] == "01_dlg" and record["profile"] == "quick"
    assert record["rows"][0] == ROW and record["rows"][1]["this_run"] == "inf"
    save_results("02_x", "quick", [ROW], tmp_path)
    records = collect_results(tmp_path)
    assert [r["notebook"] for r in records] == ["01_dlg", "02_x"]
    table = summary_table(records)
    assert table.count("\n") == 4 and "01_dlg (quick)" in table and "31.25" in table


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
    assert verdict(dict(ROW, paper=30.0, this_run=29.0, better="higher")) == "meets"  # within 5 %
    assert verdict(dict(ROW, paper=30.0, this_run=28.0, better="higher")) == "falls short"
    assert verdict(dict(ROW, paper=0.10, this_run=0.104, better="lower")) == "meets"
    assert verdict(dict(ROW, paper=0.10, this_run=0.2, better="lower")) == "falls short"
    assert verdict(dict(ROW, paper=30.0, this_run=40.0)) == "not comparable"  # no direction stated
    assert verdict(dict(ROW, paper="n/a", this_run=40.0, better="higher")) == "not comparable"
    assert verdict(dict(ROW, paper=30.0, this_run="nan", better="higher")) == "not comparable"


def test_save_rejects_paths_unknown_directions_and_objects_and_unwraps_numpy(tmp_path):
    import numpy as np
    with pytest.raises(ValueError, match="notebook"):
        save_results("../x", "quick", [ROW], tmp_path)
    with pytest.raises(ValueError, match="better"):
        save_results("01_dlg", "quick", [dict(ROW, better="up")], tmp_path)
    with pytest.raises(TypeError, match="this_run"):
        save_results("01_dlg", "quick", [dict(ROW, this_run=[1, 2])], tmp_path)
    path = save_results("01_dlg", "quick", [dict(ROW, this_run=np.float32(2.5), paper=np.float64("nan"))], tmp_path,
                        timings=[dict(ROW, quantity="wall time", this_run=np.int64(3), unit="s")])
    text = path.read_text()
    assert "NaN" not in text
    record = json.loads(text)
    assert record["rows"][0]["this_run"] == 2.5 and record["rows"][0]["paper"] == "nan"
    assert record["timings"][0]["this_run"] == 3


def test_shared_differences_are_stated_once_above_the_table():
    rows = [ROW, dict(ROW, quantity="SSIM", unit="")]
    table = results_table(rows)
    assert table.startswith("**Differences from the paper (every row):** quick profile\n\n")
    assert table.count("quick profile") == 1 and "| differences |" not in table
    mixed = results_table([ROW, dict(ROW, differences="full profile")])
    assert "| differences |" in mixed and mixed.startswith("|")
