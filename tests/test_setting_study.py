"""Chapter 04's setting study (gitutor.chapters.stepwise_gradinversion.setting_study): settings, trials, summaries."""
import pytest
import torch

from gitutor.models.substitute import substitute_path
from gitutor.chapters.stepwise_gradinversion import setting_study as study


def test_settings_refuse_bad_and_inconsistent_values():
    for factor, settings in study.FACTORS.items():
        for setting in settings:
            assert setting != study.BASE, factor
    assert study.BASE.label(study.BASE) == "base"
    assert study.Setting(width=64).label(study.BASE) == "width=64"
    for bad, match in [(dict(weights="imagenet"), "weights"), (dict(bn_mode="frozen"), "bn_mode"),
                       (dict(bn_statistics="ema"), "bn_statistics"),
                       (dict(weights="trained"), "bn_statistics"),  # trained weights, default stats
                       (dict(weights="trained", bn_statistics="trained"), "ResNet-20 of width 16"),
                       (dict(architecture="resnet34", width=32), "width"),
                       (dict(architecture="vgg"), "architecture"), (dict(width=0), "width"),
                       (dict(prior_scale=-1.0), "prior_scale"), (dict(batch_size=23), "batch_size"),
                       (dict(architecture="resnet20", width=16, weights="trained",
                             bn_statistics="trained", batch_size=7), "batch_size")]:
        with pytest.raises(ValueError, match=match):
            study.Setting(**bad)


def test_random_networks_keep_default_statistics_unless_calibrated():
    default = study.study_model("cifar_resnet18", 8, "random", "default", 32, None)
    calibrated = study.study_model("cifar_resnet18", 8, "random", "calibrated", 32, None)
    bn = [m for m in default.modules() if isinstance(m, torch.nn.BatchNorm2d)][0]
    bn_cal = [m for m in calibrated.modules() if isinstance(m, torch.nn.BatchNorm2d)][0]
    assert torch.equal(bn.running_mean, torch.zeros_like(bn.running_mean))
    assert torch.equal(bn.running_var, torch.ones_like(bn.running_var))
    assert not torch.allclose(bn_cal.running_var, torch.ones_like(bn_cal.running_var))
    assert not default.training and not calibrated.training


def test_a_trial_scores_its_snapshots_and_improves_on_noise():
    context = {"weights": str(substitute_path("resnet20"))}
    narrow = study.Setting(architecture="resnet20", width=16)
    out = study.trial(context, setting=narrow, method="Inverting Gradients", batch=1,
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


def test_recorded_table_puts_the_noise_start_first_and_names_what_is_missing():
    def outcome(method, batch, start, end):
        return {"trial": {"setting": study.BASE, "method": method, "iterations": 10,
                          "batch": batch},
                "value": {"curve": [[0, start, 0.01], [10, end, end / 100]]}}
    outcomes = [outcome(m, b, 5.0 + b, 10.0 + b + i) for i, m in enumerate(study.METHODS)
                for b in range(3)]
    table = study.recorded_table(study.curves(outcomes), study.BASE, 10)
    assert list(table) == ["Noise N(0, I)", *study.METHODS]
    assert table["Noise N(0, I)"]["PSNR"].mean == pytest.approx(6.0)
    assert table["Stepwise"]["PSNR"].mean == pytest.approx(13.0)
    with pytest.raises(KeyError, match="1000 iterations"):
        study.recorded_table(study.curves(outcomes), study.BASE, 1000)


def test_factor_figure_has_one_row_per_setting_run():
    from gitutor.stats import Interval

    run = {"t": [0, 10], "n": 3, "SSIM": [Interval(0.0, -0.1, 0.1, 3)] * 2}
    calibrated = study.FACTORS["BatchNorm statistics"][0]
    summary = {(study.BASE, "Stepwise", 10): run, (calibrated, "Stepwise", 10): run}
    fig = study.factor_figure(summary, 10)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["base", "bn_statistics=calibrated"]
    with pytest.raises(ValueError, match="no setting"):
        study.factor_figure(summary, 1000)


def _summary(values_by_key):
    from gitutor.stats import Interval

    return {key: {"t": [0, 100, 1000], "n": 3,
                  "SSIM": [Interval(v, v - 0.05, v + 0.05, 3) for v in values]}
            for key, values in values_by_key.items()}


def test_effect_rows_claim_a_change_only_beyond_the_intervals():
    from gitutor.chapters.stepwise_gradinversion.setting_study.summary import effect_rows

    wide, calibrated = study.Setting(width=64), study.Setting(bn_statistics="calibrated")
    summary = _summary({(study.BASE, "Stepwise", 1000): [0.0, 0.2, 0.5],
                        (wide, "Stepwise", 1000): [0.0, 0.4, 0.8],
                        (calibrated, "Stepwise", 1000): [0.0, 0.0, 0.47]})
    rows = effect_rows(summary, {"width": [wide], "statistics": [calibrated]}, 1000)
    assert [(r["setting"], r["vs base"]) for r in rows] == [("width=64", "higher"),
                                                           ("bn_statistics=calibrated", "not resolved at this budget")]
