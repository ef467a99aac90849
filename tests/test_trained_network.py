"""Chapter 04 on the trained network (setting_study.trained and trained_summary)."""
import pytest
import torch

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
        others = [v for k, v in row.items() if k not in ("batch", "true photograph", "another photograph")]
        assert row["true photograph"] < min(others)


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


def test_natural_counts_compare_each_batch_with_another_photograph():
    a, b = TrainedSetting(), TrainedSetting(bn_scale=0.0)
    natural = {"different photograph": {"LPIPS": [0.5, 0.6, 0.7]}}
    trials = [{"setting": s, "method": "Stepwise", "batch": i, "LPIPS": v}
              for s, values in ((a, [0.4, 0.7, 0.6]), (b, [0.9, 0.9, 0.9])) for i, v in enumerate(values)]
    assert ts.natural_counts(trials, natural) == "Stepwise 2 of 3, Stepwise (R_BN off) 0 of 3"
    with pytest.raises(ValueError, match="scores must hold"):
        ts.natural_counts(trials, {"mean colour": {"LPIPS": [0.1, 0.1, 0.1]}})
    with pytest.raises(ValueError, match="batches"):
        ts.natural_counts(trials, {"different photograph": {"LPIPS": [0.5]}})


def test_effect_phrase_late_change_and_cost_read_the_trials():
    row = {"A": "GradInversion", "B": "GradInversion (R_BN off)", "PSNR: better": "not resolved",
           "SSIM: better": "B", "LPIPS: better": "A"}
    assert ts.effect_phrase(row) == ("GradInversion against GradInversion (R_BN off): PSNR not resolved, "
                                     "SSIM favours GradInversion (R_BN off), LPIPS favours GradInversion")
    a, b = TrainedSetting(), TrainedSetting(bn_scale=0.0)
    trials = [{"setting": a, "method": "Stepwise", "batch": 0, "iterations": 100, "seconds": 50.0,
               "curve": [[0, 5.0], [70, 9.0], [100, 10.0]]},
              {"setting": b, "method": "Stepwise", "batch": 0, "iterations": 100, "seconds": 70.0,
               "curve": [[0, 5.0], [70, 9.0], [100, 6.5]]},
              {"setting": b, "method": "Stepwise", "batch": 1, "iterations": 100, "seconds": 900.0,
               "curve": [[0, 5.0], [70, 9.0], [100, 8.5]]}]
    assert ts.largest_late_change(trials) == pytest.approx(1.5)  # arm b: mean of −2.5 and −0.5
    assert ts.seconds_per_iteration(trials) == pytest.approx(0.7)  # the median, not the mean
    with pytest.raises(ValueError, match="wall time"):
        ts.seconds_per_iteration([{**t, "seconds": None} for t in trials])


def test_trained_table_rows_mark_numbers_not_comparable_and_judge_the_ordering():
    from gitutor.chapters.stepwise_gradinversion.trained_rows import trained_table_rows
    from gitutor.results import verdict_text

    setting = TrainedSetting(split="table")
    base = {"Stepwise": 14.0, "GradInversion": 12.0, "Inverting Gradients": 10.0, "DLG": 7.0}
    trials = [{"setting": setting, "method": m, "batch": b, "PSNR": p + 0.3 * b + 0.1 * (b % 2),
               "SSIM": 0.01 * p, "LPIPS": 1 - 0.01 * p} for m, p in base.items() for b in range(4)]
    thumb = {"mean colour": [8.0, 8.2, 8.4, 8.6], "4×4 thumbnail": [9.0, 9.5, 9.2, 9.9]}
    rows = trained_table_rows(trials, {"iterations": 1000}, thumb)
    assert len(rows) == 4 * 3 + 1 and all("not_comparable" in r for r in rows[:-1])
    order = rows[-1]
    assert order["headline"] and order["this_run"] == "yes" and order["claim_outcome"] == "consistent"
    assert "consistent" in verdict_text(order) and "Ye et al." in order["claim"]
    high = {k: [v + 20 for v in vs] for k, vs in thumb.items()}  # every method below a thumbnail
    gated = trained_table_rows(trials, {"iterations": 1000}, high)[-1]
    assert gated["this_run"] == "not resolved" and "claim_outcome" not in gated and "thumbnail" in gated["setting"]
    with pytest.raises(ValueError, match="same batches"):
        trained_table_rows(trials[:-1], {"iterations": 1000}, thumb)
