"""Chapter 04's study code: settings with budgets, the ResNet34 set-up, summaries, figures and rows."""
import math

import matplotlib
import pytest
import torch

import gitutor
from gitutor.chapters.stepwise_gradinversion.trials import SETTINGS, trial_settings
from gitutor.models import resnet34
from gitutor.chapters.stepwise_gradinversion.profile import MODEL_BLOCKS, chapter_settings
from gitutor.results import save_results, verdict
from gitutor.stats import interval
from gitutor.chapters.stepwise_gradinversion import experiments as study
from gitutor.viz import comparison_grid, interval_errorbars

matplotlib.use("Agg")


#: Per-batch PSNR of Table 1's methods on three batches: stepwise best on every batch, by a clear margin.
PSNR = {"Stepwise": [20.0, 21.0, 22.0], "GradInversion": [18.0, 19.2, 19.9], "Inverting Gradients": [15.0, 16.1, 17.2],
        "DLG": [10.0, 11.0, 12.1], "Noise N(0, I)": [6.0, 6.5, 7.0]}

def test_block_starts_find_each_residual_block_of_resnet34():
    names = [name for name, _ in resnet34(num_classes=10).named_parameters()]
    starts = study.block_starts(names, MODEL_BLOCKS["resnet34"])
    assert list(starts.values()) == sorted(starts.values()) and len(names) == 110
    assert all(names[i].startswith(block + ".0.") for block, i in starts.items())
    assert not any(block in names[starts[block] - 1] for block in starts)
    with pytest.raises(ValueError, match="layer9"):
        study.block_starts(names, {"layer9": "layer9"})


def test_skip_blocks_place_the_floor_against_the_first_skip_connection():
    from gitutor.attacks.stepwise_schedule import stage_floor
    from gitutor.models import cifar_resnet18, resnet34

    net = resnet34()
    names = [n for n, _ in net.named_parameters()]
    name, first, last = study.skip_blocks(net)[0]
    assert name == "layer1.0" and names[first] == "layer1.0.conv1.weight" and names[last] == "layer1.0.bn2.bias"
    assert stage_floor(net) == 24 > study.skip_blocks(net)[2][2]  # the authors' floor: layer1 is never matched
    small = cifar_resnet18(width=32)
    assert study.skip_blocks(small)[0][1:] == (3, 8) and stage_floor(small) == 18
    with pytest.raises(ValueError, match="skip connection"):
        study.skip_blocks(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)))


def test_skip_blocks_of_efficientnet_lite0_begin_above_the_floor():
    from gitutor.attacks.stepwise_schedule import stage_floor
    from gitutor.chapters.stepwise_gradinversion.setting_study.trained import trained_model

    net = trained_model()
    name, first, last = study.skip_blocks(net)[0]  # the first block whose has_skip is true
    assert name == "network.blocks.1.1" and (first, last) == (18, 26)
    assert stage_floor(net) == 15 < first  # the floor lies below it: that block is matched too


def test_block_starts_of_the_resnet20_substitute():
    model = study.substitute_network("resnet20")
    names = [name for name, _ in model.named_parameters()]
    starts = study.block_starts(names, MODEL_BLOCKS["resnet20"])
    assert list(starts) == ["stage1", "stage2", "stage3"]
    assert names[starts["stage3"]].startswith("1.blocks.6.") and starts["stage1"] == 3


def test_summarise_gives_intervals_and_keeps_missing_lpips_missing():
    values = [{"PSNR": 10.0, "SSIM": 0.1, "LPIPS": None}, {"PSNR": 12.0, "SSIM": 0.3, "LPIPS": None}]
    summary = study.summarise(values, ("PSNR", "SSIM", "LPIPS"))
    assert summary["PSNR"].mean == 11.0 and summary["PSNR"].low < 11.0 < summary["PSNR"].high
    assert summary["LPIPS"] is None
    with pytest.raises(ValueError, match="empty"):
        study.summarise([])


def test_chapter_rows_carry_table1_table2_and_the_ordering(tmp_path):
    cfg = chapter_settings(gitutor.get_profile("04_stepwise_gradinversion", "quick"))
    table1 = {m: {"PSNR": interval([20.0, 20.5, 21.0]), "SSIM": interval([0.6, 0.7], bounds=(-1, 1)), "LPIPS": None}
              for m in study.PAPER_TABLE1}
    table2 = {row: {"PSNR": interval([9.0, 9.5])} for row in study.ABLATION}
    rows = study.chapter_rows(cfg, table1, table2, PSNR)
    save_results("04_stepwise_gradinversion", "quick", rows, tmp_path)
    assert len(rows) == 4 * 3 + 4 + 1 and rows[-1]["this_run"] == "yes"  # PSNR: a clean ordering
    assert "not_comparable" in rows[-1] and "claim_outcome" not in rows[-1]  # a random network cannot judge it
    psnr_stepwise = next(r for r in rows if r["quantity"].startswith("Table 1 PSNR") and r["setting"] == "Stepwise")
    assert psnr_stepwise["this_run"] == 20.5 and psnr_stepwise["low"] < 20.5 < psnr_stepwise["high"]
    assert verdict(psnr_stepwise) == "not comparable"
    assert "not an ImageNet-trained network" in psnr_stepwise["not_comparable"]
    ssim_stepwise = next(r for r in rows if r["quantity"].startswith("Table 1 SSIM") and r["setting"] == "Stepwise")
    assert [r for r in rows if r.get("headline")] == [ssim_stepwise]  # the chapter's line on the results page
    assert next(r for r in rows if r["quantity"].startswith("Table 1 LPIPS"))["this_run"] == "n/a"
    schedule = next(r for r in rows if r["setting"].startswith("+ schedule"))
    assert f"({cfg.ablation_iterations} iterations)" in schedule["setting"] and verdict(schedule) == "not comparable"
    assert len({r["differences"] for r in rows}) == 1  # stated once above the table
    full2 = {row: {"LPIPS": interval([0.3, 0.4]), "PSNR": interval([9.0, 9.5]), "SSIM": interval([0.2, 0.3])}
             for row in study.ABLATION}
    rows2 = [r for r in study.chapter_rows(cfg, table1, full2, PSNR) if r["quantity"].startswith("Table 2")]
    assert len(rows2) == 3 * 4  # Table 2 reports LPIPS, PSNR and SSIM per row, as the paper does
    assert next(r for r in rows2 if "SSIM" in r["quantity"] and r["setting"].startswith("+ schedule"))["paper"] == 0.55
    pretrained = cfg.__class__(**{**vars(cfg), "pretrained": True, "image_size": 224})
    comparable = study.chapter_rows(pretrained, table1, table2, PSNR)
    assert "not_comparable" not in comparable[3] and comparable[-1]["claim_outcome"] == "consistent"
    assert verdict(next(r for r in comparable if r["setting"].startswith("+ schedule"))) == "falls short"


def test_the_ordering_is_judged_by_paired_differences():
    from gitutor.chapters.stepwise_gradinversion.trained_rows import ordering_row, pair_rows

    row = ordering_row({"PSNR": PSNR}, "s", "d")
    assert row["claim_outcome"] == "consistent" and "Stepwise > GradInversion" in row["setting"]
    swapped = {**PSNR, "Stepwise": PSNR["GradInversion"], "GradInversion": PSNR["Stepwise"]}
    assert ordering_row({"PSNR": swapped}, "s", "d")["claim_outcome"] == "refuted"
    both = ordering_row({"PSNR": PSNR, "SSIM": swapped}, "s", "d")  # refuted in one metric: refuted
    assert both["claim_outcome"] == "refuted" and both["this_run"] == "no"
    gated = ordering_row({"PSNR": PSNR}, "s", "d", unjudged="below the controls")
    assert gated["this_run"] == "not resolved" and "claim_outcome" not in gated
    noisy = {**PSNR, "DLG": [16.0, 9.0, 12.0]}
    unresolved = ordering_row({"PSNR": noisy}, "s", "d")
    assert unresolved["this_run"] == "not resolved" and "claim_outcome" not in unresolved
    assert "Inverting Gradients vs DLG: not resolved" in unresolved["setting"]  # each verdict names its pair
    table = pair_rows({"PSNR": PSNR, "LPIPS": {m: [-v for v in PSNR[m]] for m in PSNR}})
    assert [(r["A"], r["B"]) for r in table] == [
        ("Stepwise", "GradInversion"), ("GradInversion", "Inverting Gradients"), ("Inverting Gradients", "DLG")]
    assert all(r["PSNR: better"] == "A" for r in table)  # higher PSNR is better
    assert all(r["LPIPS: better"] == "A" for r in table)  # lower LPIPS is better
    assert table[0]["ΔPSNR (A − B)"].startswith(f"{sum(PSNR['Stepwise']) / 3 - sum(PSNR['GradInversion']) / 3:.2f}")
    assert pair_rows({"PSNR": noisy})[-1]["PSNR: better"] == "not resolved"
    with pytest.raises(ValueError, match="scores lack"):
        pair_rows({"PSNR": {"Stepwise": PSNR["Stepwise"]}})
    untested = ordering_row({"PSNR": PSNR, "SSIM": swapped}, "s", "d", untested=["SSIM"])
    assert untested["claim_outcome"] == "consistent" and "SSIM (not a test" in untested["setting"]
    with pytest.raises(ValueError, match="untested"):
        ordering_row({"PSNR": PSNR}, "s", "d", untested=["LPIPS"])


def test_a_method_is_above_the_controls_only_when_it_clears_every_one_paired():
    from gitutor.chapters.stepwise_gradinversion.trained_rows import (
        GATE_CONTROLS, above_controls, gate_reason, pair_phrase)

    scores = {"PSNR": {"A": [20.0, 21.0, 22.0], "B": [15.0, 15.5, 16.0]},
              "LPIPS": {"A": [0.2, 0.21, 0.22], "B": [0.5, 0.5, 0.5]}}
    controls = {c: {"PSNR": [16.0, 16.2, 16.1], "LPIPS": [0.4, 0.41, 0.42]} for c in GATE_CONTROLS}
    above = above_controls(scores, controls)
    assert above == {"PSNR": ["A"], "LPIPS": ["A"]}  # B is below the controls in PSNR, above them in LPIPS
    controls["different photograph"]["LPIPS"] = [0.1, 0.1, 0.1]  # a natural photograph beats A in LPIPS
    above = above_controls(scores, controls)
    assert above["LPIPS"] == [] and gate_reason(above) is None
    assert gate_reason(above, "LPIPS") == ("no method's LPIPS is above the mean colour, the 4×4 thumbnail and "
                                          "the different photograph (paired over the batches)")
    with pytest.raises(ValueError, match="controls lack"):
        above_controls(scores, {"mean colour": controls["mean colour"]})
    assert pair_phrase("A > B", "A > B") == "A > B" and pair_phrase("A > B", "A < B") == "A < B"
    assert pair_phrase("A > B", "not resolved at this budget") == "A vs B: not resolved"


def test_control_summary_and_a_gated_ordering_row_in_the_chapter_rows():
    summary = study.control_summary({"mean colour": {"PSNR": [10.0, 12.0], "SSIM": [0.1, 0.3]}})
    assert summary["mean colour"]["PSNR"].mean == 11.0 and summary["mean colour"]["SSIM"].high <= 1.0
    cfg = chapter_settings(gitutor.get_profile("04_stepwise_gradinversion", "quick"))
    table1 = {m: {"PSNR": interval([20.0, 20.5, 21.0]), "SSIM": interval([0.6, 0.7]), "LPIPS": None}
              for m in study.PAPER_TABLE1}
    row = study.chapter_rows(cfg, table1, None, PSNR, "below the controls")[-1]
    assert row["this_run"] == "not resolved" and "below the controls" in row["setting"]


def test_trial_settings_and_the_model_setup():
    cfg = chapter_settings(gitutor.get_profile("04_stepwise_gradinversion", "quick"))
    assert set(trial_settings(cfg)) == set(SETTINGS) and trial_settings(cfg)["dropout"] == 0.3
    small = cfg.__class__(**{**vars(cfg), "substitute": False, "calibrate_bn_images": 4,
                             "image_size": 16, "num_classes": 10})
    model = study.chapter_model(small, 0)
    assert not model.training and model(torch.rand(2, 3, 16, 16)).shape == (2, 10)
    bn = next(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
    assert not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))  # calibrated, not the reset zeros
    quick = study.chapter_model(cfg, 0)  # the quick profile: a random CIFAR ResNet-18, width 32
    assert not cfg.substitute and quick(torch.rand(2, 3, 32, 32)).shape == (2, cfg.num_classes)
    bn = next(m for m in quick.modules() if isinstance(m, torch.nn.BatchNorm2d))
    assert bn.num_features == cfg.width and torch.equal(bn.running_var, torch.ones_like(bn.running_var))
    assert "default BatchNorm statistics" in study.describe_model(cfg)
    trained = study.chapter_model(cfg.__class__(**{**vars(cfg), "substitute": True, "model": "resnet20",
                                                   "num_classes": 16}), 0)
    assert trained(torch.rand(2, 3, 32, 32)).shape == (2, 16)
    batches = study.chapter_batches(cfg, quick, 0)
    x, y, shared = batches[(cfg.batch_size, 0)]
    assert x.shape == (cfg.batch_size, 3, 32, 32) and len(set(y.tolist())) == cfg.batch_size
    assert len(shared) == len(list(quick.parameters()))


def test_shared_figures_check_their_inputs():
    truth = torch.rand(2, 3, 8, 8)
    fig = comparison_grid(truth, {"a": truth, "b": truth.flip(0)}, "t")
    assert len(fig.axes) == 6 and fig.axes[2].get_title(loc="left") == "a"
    with pytest.raises(ValueError, match="'a'"):
        comparison_grid(truth, {"a": truth[:1]})
    _, ax = matplotlib.pyplot.subplots()
    with pytest.raises(ValueError, match="intervals"):
        interval_errorbars(ax, [1, 2], [interval([1.0, 2.0])])
    bars = interval_errorbars(ax, [1], [interval([1.0, 3.0])])
    assert not math.isnan(bars.lines[0].get_ydata()[0])


def test_chapter_figures_are_legible_at_page_width():
    from gitutor.attacks import StepwiseSchedule
    from gitutor.chapters.stepwise_gradinversion.figures import loss_curves, schedule_figure
    from gitutor.viz import BODY_PT, PAGE_WIDTH

    blocks = {"layer1": 3, "layer2": 15}
    schedules = {"a": StepwiseSchedule.paper(100, 62, floor=18), "b": StepwiseSchedule.paper(15_000, 110)}
    for fig in (schedule_figure(schedules, blocks), loss_curves({"DLG": [2.0, 1.0], "Stepwise": [1.0] * 40}, 20)):
        fig.canvas.draw()
        texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_text()]
        assert fig.get_size_inches()[0] <= PAGE_WIDTH and min(t.get_fontsize() for t in texts) >= BODY_PT
    with pytest.raises(ValueError, match="schedules"):
        schedule_figure({}, blocks)
