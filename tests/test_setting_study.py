"""Chapter 04's setting study (gitutor.studies.setting_study): settings, trials, summaries."""
import pytest
import torch

from gitutor.models.substitute import substitute_path
from gitutor.studies import setting_study as study


def test_settings_change_one_factor_each_and_refuse_bad_values():
    for factor, settings in study.FACTORS.items():
        for setting in settings:
            assert setting != study.BASE and "," not in setting.label(study.BASE), factor
    assert study.BASE.label(study.BASE) == "base"
    with pytest.raises(ValueError, match="weights"):
        study.Setting(weights="imagenet")
    with pytest.raises(ValueError, match="bn_mode"):
        study.Setting(bn_mode="frozen")


def test_a_trial_scores_its_snapshots_and_improves_on_noise():
    context = {"weights": {"resnet20": str(substitute_path("resnet20"))}}
    out = study.trial(context, setting=study.BASE, method="Inverting Gradients", batch=1,
                      iterations=30)
    times = [row[0] for row in out["curve"]]
    assert times == [0, 10, 30] and out["images"].shape == (1, 3, 32, 32)
    assert out["curve"][-1][1] > out["curve"][0][1]  # PSNR rises above the noise start


def test_curves_average_over_batches_at_common_checkpoints():
    def outcome(batch, ssim):
        return {"trial": {"setting": study.BASE, "method": "Stepwise", "iterations": 10,
                          "batch": batch},
                "value": {"curve": [[0, 5.0, 0.0], [10, 10.0, ssim]]}}
    summary = study.curves([outcome(0, 0.2), outcome(1, 0.4), outcome(2, 0.3)])
    curve = summary[(study.BASE, "Stepwise", 10)]
    assert curve["t"] == [0, 10] and curve["n"] == 3
    assert curve["SSIM"][1].mean == pytest.approx(0.3) and curve["SSIM"][1].low < 0.3
    (key, best) = study.best_setting(summary)
    assert key == (study.BASE, "Stepwise", 10) and best.mean == pytest.approx(0.3)
    rows = study.summary_rows(summary, at=(10,))
    assert rows[0]["SSIM at 10"].startswith("0.30") and rows[0]["batches"] == 3
    assert len(study.study_trials([study.BASE], 10, batches=3)) == 3 * len(study.METHODS)
    with pytest.raises(ValueError, match="empty"):
        study.best_setting({})
