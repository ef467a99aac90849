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
