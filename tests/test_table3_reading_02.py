"""Chapter 02's reading of the recorded Table 3 study: cells over images, outcomes against both thresholds,
paired gaps per image, the attacker's pick by objective, the truth's objective, the judged rows."""

import json

import pytest

from gitutor.chapters.idlg_soft_labels import report
from gitutor.chapters.idlg_soft_labels import table3_reading as reading
from gitutor.chapters.idlg_soft_labels import table3_study as study
from gitutor.results import verdict

IMAGES, REPEATS = [0, 1, 2], 2


def _value(psnr, lowest, iterations=300):
    return {"psnr": psnr, "iterations": iterations, "best_iteration": iterations // 2,
            "stopped_early": None, "curve": [[0, 8.0], [112, psnr - 1.0], [iterations, psnr]],
            "loss_curve": [[0, 1.0], [112, lowest]]}  # fmt: skip


def _record(psnr=lambda t: 20.0 + t["image"], lowest=lambda t: 0.5):
    trials = [dict(t, value=_value(psnr(t), lowest(t))) for t in study.study_trials(IMAGES, REPEATS)]
    controls = {kind: [{"control": "thumbnail", "psnr": 15.0 + i} for i in IMAGES] for kind in study.KINDS}
    return {"study": "02_table3", "setting": study.SETTING, "images": IMAGES, "repeats": REPEATS,
            "trials": trials, "controls": controls, "provenance": {}}  # fmt: skip


def _truths(value=0.1):
    return {(k, s, i): value for k in study.KINDS for s in study.SETTINGS for i in IMAGES}


def test_a_cell_counts_runs_against_both_thresholds_and_its_images_controls():
    # image 0: 10 dB (at or below its 15 dB control), 1: 20 dB (between), 2: 35 dB (recognisable)
    record = _record(psnr=lambda t: {0: 10.0, 1: 20.0, 2: 35.0}[t["image"]])
    cells = reading.cells(record, reading.image_controls(record), _truths(), 30.0)
    cell = cells["mixup", "L2 / GT"]
    assert cell.runs == 6 and cell.images == 3
    assert cell.outcomes == {"recognisable": 2, "between": 2, "at or below the controls": 2}
    assert cell.psnr.mean == pytest.approx(65.0 / 3) and cell.psnr.n == 3  # over images, not runs
    assert cell.at_first_decay == pytest.approx(19.0) and cell.median == 20.0
    assert cell.below_truth == 0  # lowest objective 0.5 above the truth's 0.1
    with pytest.raises(ValueError, match="thresholds overlap"):
        reading.cells(record, {key: 31.0 for key in reading.image_controls(record)}, _truths(), 30.0)
    with pytest.raises(KeyError):
        reading.cells(record, reading.image_controls(record), {}, 30.0)


def test_the_attackers_pick_is_the_start_of_lowest_objective_not_of_highest_psnr():
    # repeat 1 has the lower objective but the lower PSNR: the pick follows the objective
    record = _record(psnr=lambda t: 40.0 - 20.0 * t["repeat"], lowest=lambda t: 0.5 - 0.4 * t["repeat"])
    cell = reading.cells(record, reading.image_controls(record), _truths(0.2), 30.0)["smoothing", "cos / GT"]
    assert cell.picked.mean == 20.0 and cell.psnr.mean == 30.0
    assert cell.below_truth == 3  # repeat 1's 0.1 ≤ 0.2 on every image


def test_a_paired_gap_is_taken_per_image_over_the_same_starts():
    gaps = {0: 1.0, 1: 2.0, 2: 3.0}

    def psnr(t):
        return 20.0 + (gaps[t["image"]] if t["setting"] == "L2 / Ours" else 0.0)

    gap = reading.paired_gap(_record(psnr=psnr), "mixup", "L2 / Ours", "L2 / GT")
    assert gap.n == 3 and gap.mean == pytest.approx(2.0) and gap.low < 2.0 < gap.high
    assert report.equivalent(gap) == "not shown equivalent"
    with pytest.raises(ValueError, match="setting"):
        reading.paired_gap(_record(), "mixup", "L1 / Ours", "L2 / GT")


def test_the_rows_are_judged_against_the_papers_table3(tmp_path):
    record = _record(psnr=lambda t: 28.0 + 0.1 * t["image"] + 0.05 * t["repeat"])
    cells = reading.cells(record, reading.image_controls(record), _truths(), 30.0)
    rows = reading.result_rows(cells, report.PAPER_TABLE3, record)
    assert len(rows) == len(report.PAPER_TABLE3) and all("not_comparable" not in r for r in rows)
    by_setting = {r["setting"].split(", ")[3].split(";")[0]: r for r in rows if ", mixup," in r["setting"]}
    assert verdict(dict(by_setting["L2 / iDLG"], differences="d")) == "meets"  # 28 dB against 10.70
    assert "3 images × 2 starts" in rows[0]["setting"] and rows[0]["n"] == 3
    path = tmp_path / "02_table3.json"
    assert reading.read_study(path) is None  # no record: the page says so
    path.write_text(json.dumps(record))
    assert reading.read_study(path)["repeats"] == REPEATS
    path.write_text(json.dumps({k: v for k, v in record.items() if k != "controls"}))
    with pytest.raises(ValueError, match="not a Table 3 study record"):
        reading.read_study(path)


def test_the_tables_and_curves_hold_every_cell():
    record = _record()
    cells = reading.cells(record, reading.image_controls(record), _truths(), 30.0)
    table = reading.paper_table(cells, report.PAPER_TABLE3)
    assert table.count("\n") == 1 + len(cells) and "28.27" in table
    assert reading.strength_table(cells).count("\n") == 1 + len(cells)
    curves = reading.median_curves(record)
    assert set(curves) == set(cells) and curves["mixup", "L2 / GT"][0] == [0.0, 112 / 300, 1.0]


def test_the_truths_objective_is_the_prior_alone_for_the_true_label():
    # with the true label the client's gradient is matched exactly: only TV is left
    l2 = study.truth_objective(study.SETTING, kind="mixup", setting="L2 / GT", image=0)
    cos = study.truth_objective(study.SETTING, kind="mixup", setting="cos / GT", image=0)
    wrong = study.truth_objective(study.SETTING, kind="mixup", setting="L2 / iDLG", image=0)
    assert l2 == pytest.approx(cos, rel=1e-4) and 0 < l2 < wrong
    with pytest.raises(ValueError, match="setting"):
        study.truth_objective(study.SETTING, kind="mixup", setting="L1 / GT", image=0)


def test_the_sanity_cells_read_the_start_the_end_and_the_truths_objective(tmp_path):
    trials = [dict(t, value=dict(_value(25.0 + t["image"], 0.05), start_psnr=34.0 + t["image"]))
              for t in study.sanity_trials(IMAGES)]  # fmt: skip
    sanity = {"study": "02_table3_sanity", "setting": study.SETTING, "images": IMAGES, "trials": trials,
              "controls": {}, "provenance": {}}  # fmt: skip
    cells = reading.sanity_cells(sanity, _truths(0.1), 26.0)
    cell = cells["mixup", "cos / GT"]
    assert set(cells) == {(k, s) for k in study.KINDS for s in study.SANITY_SETTINGS}
    assert cell.runs == 3 and cell.start == 35.0 and cell.psnr.mean == 26.0
    assert cell.recognisable == 2 and cell.below_truth == 3 and cell.unmoved == 0
    assert reading.sanity_table(cells).count("\n") == 1 + len(cells)
    # a run that returned its start (best_iteration 0) is the start's image, not the attack's
    trials[-1]["value"]["best_iteration"] = 0  # image 2 of the last setting, 27 dB ≥ 26
    last = reading.sanity_cells(sanity, _truths(0.1), 26.0)[trials[-1]["kind"], trials[-1]["setting"]]
    assert (last.recognisable, last.unmoved) == (1, 1)
    path = tmp_path / "02_table3_sanity.json"
    assert reading.read_sanity_arm(path) is None
    path.write_text(json.dumps(sanity))
    assert reading.read_sanity_arm(path)["images"] == IMAGES


def test_discordant_pairs_are_counted_and_the_concordant_gap_kept_apart():
    # Ours fails where GT succeeds on image 0, repeat 0; elsewhere both succeed, Ours 0.1 dB higher
    def psnr(t):
        if t["setting"] == "L2 / Ours":
            return 10.0 if (t["image"], t["repeat"]) == (0, 0) else 40.1 + 0.01 * t["image"]
        return 40.0 + 0.01 * t["repeat"]

    split = reading.discordance(_record(psnr=psnr), "mixup", "L2 / Ours", "L2 / GT", 30.0)
    assert split["pairs"] == 6 and split["discordant"] == 1 and split["both"].n == 5
    assert split["both"].mean == pytest.approx(0.106)  # 0.09, 0.11, 0.10, 0.12, 0.11
    record = _record()
    for t in record["trials"]:
        t["value"]["label_l1"] = None if t["setting"].endswith("DLG") else 1e-7 * (1 + t["image"])
    assert reading.label_error(record, "smoothing", "L2 / Ours") == pytest.approx(2e-7)
    with pytest.raises(ValueError, match="no fixed label"):
        reading.label_error(record, "smoothing", "L2 / DLG")
