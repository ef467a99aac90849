"""Chapter 04 on the trained network (setting_study.trained and trained_summary)."""
import pytest
import torch

from gitutor.chapters.stepwise_gradinversion.setting_study import trained_reading as tr
from gitutor.chapters.stepwise_gradinversion.setting_study import trained_summary as ts
from gitutor.chapters.stepwise_gradinversion.setting_study.trained import (
    STUDY_PHOTOGRAPHS, TABLE_BATCHES, TrainedSetting, decode_images, encode_images, trained_batch, trial)


def test_settings_refuse_what_they_cannot_run():
    for bad in ({"image_size": 100}, {"split": "all"}, {"options": "breaching"}, {"bn_scale": -1.0}, {"lr": 0.0}):
        with pytest.raises(ValueError, match=next(iter(bad)).split("_")[0]):
            TrainedSetting(**bad)
    assert TrainedSetting().label() == "paper"
    assert TrainedSetting(bn_scale=0.0).label() == "R_BN off"
    assert TrainedSetting(bn_scale=10.0, options="authors").label() == "λ_BN × 10, authors' options"


def test_study_and_table_photographs_are_disjoint_and_labels_true_and_distinct():
    table = [i for batch in TABLE_BATCHES for i in batch]
    assert not set(STUDY_PHOTOGRAPHS) & set(table) and len(set(table)) == len(table) == 16
    setting = TrainedSetting(split="table", image_size=64)
    from gitutor.data import load

    images, labels = load("imagenet", size=64)
    for b in range(setting.batches()):
        x, y = trained_batch(setting, b)
        assert x.shape == (4, 3, 64, 64) and len(set(y.tolist())) == 4
        assert torch.equal(y, labels[list(TABLE_BATCHES[b])])
    with pytest.raises(ValueError, match="index"):
        trained_batch(setting, 4)


def test_images_survive_the_record_to_eight_bits():
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    back = decode_images(encode_images(x))
    assert back.shape == x.shape and float((back - x).abs().max()) <= 0.5 / 255 + 1e-6
    with pytest.raises(ValueError, match="base64 PNG"):
        decode_images(["not a png"])


def test_a_trial_scores_its_run_and_the_authors_options_are_stepwise_only():
    setting = TrainedSetting(image_size=64)
    value = trial({}, setting=setting, method="Stepwise", batch=0, iterations=2, seed=0)
    assert [row[0] for row in value["curve"]] == [0, 2] and value["images"].shape == (1, 3, 64, 64)
    assert len(value["lpips"]) == 1 and 0 < value["lpips"][0] < 2
    with pytest.raises(ValueError, match="Stepwise"):
        trial({}, setting=TrainedSetting(options="authors"), method="GradInversion", batch=0, iterations=2)


def test_paired_rows_pair_batch_by_batch():
    a, b = TrainedSetting(), TrainedSetting(bn_scale=0.0)
    rows = [{"setting": s, "method": "Stepwise", "batch": i, "PSNR": p, "SSIM": 0.1 * p, "LPIPS": 1 - 0.01 * p}
            for s, shift in ((a, 1.0), (b, 0.0)) for i, p in enumerate([10 + shift, 12 + shift, 11 + shift])]
    found = ts.paired_rows(rows, [((a, "Stepwise"), (b, "Stepwise"))])[0]
    assert found["PSNR: better"] == "A" and found["LPIPS: better"] == "A"  # lower LPIPS is better
    with pytest.raises(ValueError, match="same batches"):
        ts.paired_rows(rows[:2] + rows[3:], [((a, "Stepwise"), (b, "Stepwise"))])


def test_rbn_with_imagenet_statistics_prefers_each_study_photograph():
    rows = ts.rbn_controls(TrainedSetting(image_size=64))
    assert len(rows) == len(STUDY_PHOTOGRAPHS)
    for row in rows:
        others = [v for k, v in row.items() if k not in ("batch", "true photograph")]
        assert row["true photograph"] < min(others) and len(others) == 4
    said = tr.rbn_numbers(rows)
    assert said["lowest"] == said["photographs"] == len(rows) and said["stand_ins"] == 4
    assert said["ranges"] == "separate" and said["photo_high"] < said["stand_in_low"]
    overlap = [{"batch": 0, "true photograph": 5, "mean colour": 9}, {"batch": 1, "true photograph": 12, "mean colour": 20}]
    said = tr.rbn_numbers(overlap)  # 12 > 9: not every photograph below every stand-in
    assert (said["lowest"], said["ranges"], said["photo_low"], said["photo_high"], said["stand_in_low"]) == (
        2, "overlap", 5, 12, 9)
    with pytest.raises(ValueError, match="stand-ins"):
        tr.rbn_numbers([{"batch": 0, "true photograph": 5}])


def test_specificity_asks_whether_a_reconstruction_is_closer_to_its_own_photograph():
    setting = TrainedSetting(image_size=64)
    truths = [trained_batch(setting, i)[0] for i in range(setting.batches())]
    noise = torch.Generator().manual_seed(0)
    near = [(x + 0.05 * torch.randn(x.shape, generator=noise)).clamp(0, 1) for x in truths]
    flat = [torch.full_like(x, 0.5) for x in truths]
    trials = [{"setting": setting, "method": m, "batch": i, "images": images[i]}
              for m, images in (("Stepwise", near), ("GradInversion", flat)) for i in range(len(truths))]
    rows = {r["arm"]: r for r in tr.specificity_rows(trials, setting)}
    assert all(rows["Stepwise"][f"{m}: closer to its own"] == "yes" for m in ("PSNR", "SSIM", "LPIPS", tr.LAYOUT))
    assert rows["GradInversion"]["PSNR: closer to its own"] == "not resolved"  # a flat grey knows no photograph
    assert tr.closer_count(list(rows.values())) == 4  # Stepwise in every score, the flat grey in none
    assert tr.closer_count([rows["GradInversion"]]) == 0
    with pytest.raises(ValueError, match="every batch"):
        tr.specificity_rows(trials[:3], setting)


def test_layout_correlation_ignores_contrast_and_refuses_odd_shapes():
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    faint = 0.5 + 0.05 * (x - 0.5)  # the same layout at a twentieth of the contrast
    assert torch.allclose(tr.layout_correlation(faint, x), torch.ones(2, dtype=torch.float64))
    assert float(tr.layout_correlation(1 - x, x)[0]) == pytest.approx(-1.0)
    assert float(tr.layout_correlation(torch.full_like(x, 0.5), x)[0]) == 0.0  # flat: no layout
    with pytest.raises(ValueError, match="multiples of block"):
        tr.layout_correlation(x[..., :30, :30], x[..., :30, :30])
    with pytest.raises(ValueError, match="equal"):
        tr.layout_correlation(x, x[:1])


def test_the_rbn_effects_read_the_paired_rows():
    def row(a, b, psnr, ssim, lpips):
        return {"A": a, "B": b, "PSNR: better": psnr, "SSIM: better": ssim, "LPIPS: better": lpips}

    rows = [row("GradInversion", "GradInversion (R_BN off)", "not resolved", "not resolved", "A"),
            row("Stepwise", "Stepwise (R_BN off)", "not resolved", "B", "A"),
            row("GradInversion", "Inverting Gradients", "A", "A", "A"),
            row("Stepwise", "Inverting Gradients", "A", "not resolved", "A"),
            row("GradInversion (R_BN off)", "Inverting Gradients", "A", "A", "A"),
            row("Stepwise (R_BN off)", "Inverting Gradients", "not resolved", "not resolved", "A")]
    said = tr.rbn_effects(rows)
    # Stepwise beats IG in PSNR with R_BN but not without it: the lead needs R_BN
    assert said["gap"] == "needs"
    assert (said["PSNR"], said["SSIM"], said["LPIPS"]) == ("not resolved", "mixed", "on")
    both = rows[:4] + [row("GradInversion (R_BN off)", "Inverting Gradients", "A", "A", "A"),
                       row("Stepwise (R_BN off)", "Inverting Gradients", "A", "A", "A")]
    assert tr.rbn_effects(both)["gap"] == "does not need"
    with pytest.raises(ValueError, match="R_BN off"):
        tr.rbn_effects(rows[2:])


def test_study_controls_score_another_photograph_of_the_set():
    from gitutor.metrics import psnr

    setting = TrainedSetting(image_size=64)
    scores = ts.control_scores(setting)
    rows = {r["control"]: r for r in ts.control_rows(scores)}
    assert "another photograph of the set" in rows and "batch mean" not in rows  # B = 1
    photos = [trained_batch(setting, i)[0] for i in range(setting.batches())]
    best = max(float(psnr(photos[(i + 1) % len(photos)], x)) for i, x in enumerate(photos))
    assert rows["another photograph of the set"]["highest batch PSNR (dB)"] == round(best, 1)
    table = ts.control_scores(TrainedSetting(split="table", image_size=64))
    assert "another photograph of the set" not in table and "different photograph" in table


def test_photograph_rows_count_recovered_photographs_and_compare_with_another_photograph():
    a, b = TrainedSetting(image_size=64), TrainedSetting(image_size=64, bn_scale=0.0)
    truths = [trained_batch(a, i)[0] for i in range(3)]
    natural = {"different photograph": {"LPIPS": [0.5, 0.6, 0.7]}}
    trials = [{"setting": s, "method": "Stepwise", "batch": i, "LPIPS": v, "images": image(i)}
              for s, values, image in ((a, [0.4, 0.7, 0.6], lambda i: truths[i]),
                                       (b, [0.9, 0.9, 0.9], lambda i: torch.full_like(truths[i], 0.5)))
              for i, v in enumerate(values)]
    rows = {r["arm"]: r for r in ts.photograph_rows(trials, a, 30.0, natural)}
    assert rows["Stepwise"]["PSNR ≥ 30 dB"] == 3 and rows["Stepwise"]["above its own thumbnail"] == 3
    assert rows["Stepwise (R_BN off)"]["PSNR ≥ 30 dB"] == 0  # flat grey: no photograph
    assert rows["Stepwise"]["batches with LPIPS below another photograph's"] == 2
    assert rows["Stepwise (R_BN off)"]["batches with LPIPS below another photograph's"] == 0
    with pytest.raises(ValueError, match="scores must hold"):
        ts.photograph_rows(trials, a, 30.0, {"mean colour": {"LPIPS": [0.1, 0.1, 0.1]}})
    with pytest.raises(ValueError, match="batches"):
        ts.photograph_rows(trials, a, 30.0, {"different photograph": {"LPIPS": [0.5]}})


def test_late_change_and_cost_read_the_trials():
    a, b = TrainedSetting(), TrainedSetting(bn_scale=0.0)
    trials = [{"setting": a, "method": "Stepwise", "batch": 0, "iterations": 100, "seconds": 50.0,
               "curve": [[0, 5.0, 0.1], [70, 9.0, 0.2], [100, 10.0, 0.3]]},
              {"setting": b, "method": "Stepwise", "batch": 0, "iterations": 100, "seconds": 70.0,
               "curve": [[0, 5.0, 0.1], [70, 9.0, 0.2], [100, 6.5, 0.25]]},
              {"setting": b, "method": "Stepwise", "batch": 1, "iterations": 100, "seconds": 900.0,
               "curve": [[0, 5.0, 0.1], [70, 9.0, 0.2], [100, 8.5, 0.252]]}]
    assert ts.late_change(trials[1]["curve"]) == pytest.approx(-2.5)  # PSNR: 6.5 − 9.0
    assert ts.late_change(trials[1]["curve"], column=2) == pytest.approx(0.05)  # SSIM
    said = tr.late_changes(trials)
    assert said["PSNR"] == pytest.approx(1.5)  # arm b: mean of −2.5 and −0.5
    assert said["SSIM"] == pytest.approx(0.1) and said["arms"] == 2
    assert said["PSNR rising"] == 0 and said["SSIM rising"] == 1  # arm b's SSIM: +0.05 and +0.052
    with pytest.raises(ValueError, match="at least one"):
        tr.late_changes([])
    assert ts.seconds_per_iteration(trials) == pytest.approx(0.7)  # the median, not the mean
    with pytest.raises(ValueError, match="wall time"):
        ts.seconds_per_iteration([{**t, "seconds": None} for t in trials])


def test_trained_table_rows_mark_numbers_not_comparable_and_judge_the_ordering():
    from gitutor.chapters.stepwise_gradinversion.trained_rows import claim_test, trained_table_rows
    from gitutor.results import verdict_text
    from gitutor.results.verdicts import claim_verdict

    setting = TrainedSetting(split="table")
    base = {"Stepwise": 14.0, "GradInversion": 12.0, "Inverting Gradients": 10.0, "DLG": 7.0}
    trials = [{"setting": setting, "method": m, "batch": b, "PSNR": p + 0.3 * b + 0.1 * (b % 2),
               "SSIM": 0.01 * p, "LPIPS": 1 - 0.01 * p} for m, p in base.items() for b in range(4)]
    low = {"mean colour": [8.0, 8.2, 8.4, 8.6], "4×4 thumbnail": [9.0, 9.5, 9.2, 9.9],
           "different photograph": [7.0, 7.1, 7.3, 7.0]}
    thumb = {c: {"PSNR": v, "SSIM": [0.5] * 4, "LPIPS": [0.1] * 4} for c, v in low.items()}  # only PSNR clears
    rows = trained_table_rows(trials, {"iterations": 1000}, thumb)
    assert len(rows) == 4 * 3 + 1 and all("not_comparable" in r for r in rows[:-1])
    order = rows[-1]
    assert order["headline"] and order["this_run"] == "yes" and order["claim_outcome"] == "consistent"
    assert "consistent" in verdict_text(order) and "§Experiments" in order["claim"]
    assert not order["claim"].startswith('"')  # the ledger adds the quotes
    assert "SSIM (not a test: no method above the controls)" in order["setting"]  # judged in PSNR only
    said = claim_test(trials, thumb)
    assert (said["tested"], said["metrics"]) == (1, 3) and said["above"]["PSNR"][:2] == ["Stepwise", "GradInversion"]
    assert [(r["A"], r["PSNR: better"]) for r in said["pairs"]] == [
        ("Stepwise", "A"), ("GradInversion", "A"), ("Inverting Gradients", "A")]
    assert claim_verdict(rows) == "consistent"  # the page's verdict is the ledger's
    high = {c: {**v, "PSNR": [p + 20 for p in v["PSNR"]]} for c, v in thumb.items()}  # every method below
    gated = trained_table_rows(trials, {"iterations": 1000}, high)[-1]
    assert gated["this_run"] == "not resolved" and "claim_outcome" not in gated and "thumbnail" in gated["setting"]
    assert claim_test(trials, high)["tested"] == 0
    assert claim_verdict(trained_table_rows(trials, {"iterations": 1000}, high)) == "not judged"
    with pytest.raises(ValueError, match="controls lack"):
        trained_table_rows(trials, {"iterations": 1000}, {c: v for c, v in thumb.items() if c != "mean colour"})
    with pytest.raises(ValueError, match="same batches"):
        trained_table_rows(trials[:-1], {"iterations": 1000}, thumb)


def test_control_rows_under_table1_and_the_run_curves_are_legible():
    import matplotlib

    matplotlib.use("Agg")
    from gitutor.chapters.stepwise_gradinversion.setting_study.figures import run_curves
    from gitutor.viz import BODY_PT

    scores = {"mean colour": {"PSNR": [10.0, 12.0], "SSIM": [0.1, 0.2], "LPIPS": [0.8, 0.9]}}
    like = {"method": "Stepwise", "setting": "paper", "batches": 2, "PSNR": "", "SSIM": "", "LPIPS": "",
            "PSNR change, last 30 %": "0.1"}
    row = ts.control_table_rows(scores, like)[0]
    assert list(row) == list(like) and row["method"] == "control: mean colour" and row["batches"] == 2
    assert row["PSNR change, last 30 %"] == "—" and row["PSNR"].startswith("11.00 [")
    assert ts.PAPER_ROW["control: noise N(0, 1), normalised units"] == "Noise N(0, I)"
    a = TrainedSetting()
    trials = [{"setting": a, "method": "Stepwise", "batch": i, "iterations": 10,
               "curve": [[0, 5.0, 0.1], [10, 6.0 + i, 0.2]]}
              for i in range(2)]
    summary = ts.curve_summary(trials)
    fig = run_curves(summary, {k: "Stepwise" for k in summary}, "t")
    assert fig.get_size_inches()[0] <= 8.0 and len(fig.legends) == 1
    assert all(t.get_fontsize() >= BODY_PT for t in fig.legends[0].get_texts())
    assert fig.axes[0].get_ylabel() == "PSNR (dB)"
    with pytest.raises(ValueError, match="labels"):
        run_curves(summary, {}, "t")


def test_command_list_keeps_each_command_verbatim_in_code():
    provenance = {"trained": {"command": "python3 scripts/setting_study.py --phase trained --cpus 1"},
                  "trained_table": {"command": "python3 scripts/setting_study.py --phase trained_table"}}
    assert ts.command_list(provenance) == (
        "- `trained`: `python3 scripts/setting_study.py --phase trained --cpus 1`\n"
        "- `trained_table`: `python3 scripts/setting_study.py --phase trained_table`")
