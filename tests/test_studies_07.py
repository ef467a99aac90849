"""Chapter 07's rounds and summaries (gitutor.studies.admm_rounds, admm_report) on tiny cases."""
import pytest
import torch

from gitutor import stats

from gitutor.attacks import AttackResult
from gitutor.data import digits
from gitutor.federated import client_gradients
from gitutor.models import LeNet, init_uniform_
from gitutor.profiles import get_profile
from gitutor.profiles.admm_comparison import SMOKE_PARAMETERS
from gitutor.studies import admm_report
from gitutor.studies.admm_rounds import (alignment, alignment_grid, chapter_model, closed_form_errors, first_round,
                                         load_kinds, naive_and_adaptive_psnr)


def _case(seed=0):
    model = init_uniform_(LeNet(10, in_channels=1, image_size=8), generator=torch.Generator().manual_seed(seed))
    images, labels = digits(size=8)
    return model, images[:1], labels[:1], (images[1:2], labels[1:2])


def test_first_round_is_the_servers_view_of_twice_the_gradient():
    model, x, y, _ = _case()
    case = first_round(model, x, y, rho=0.01, lr=0.1, local_steps=1)
    view = case.server_view
    assert view["labels"] is None and view["rho"] == 0.01 and view["batch_size"] == 1
    assert all(torch.equal(z, p) for z, p in zip(view["global_params"], model.parameters()))
    twice = [2 * g for g in client_gradients(model, x, y)]
    assert all(torch.allclose(s, t, rtol=1e-2, atol=1e-4) for s, t in zip(view["pseudo_gradient"], twice))
    errors = closed_form_errors(model, x, y, rho=0.01, lr=0.1)
    assert errors["float64"] < 1e-9 < errors["float32"] < 1e-2


def test_alignment_is_one_and_twice_in_round_one_and_tilted_in_round_two():
    model, x, y, earlier = _case()
    cosine, ratio = alignment(model, x, y, earlier, rho=0.01, lr=0.1, local_steps=1, round_number=1)
    assert cosine == pytest.approx(1, abs=1e-3) and ratio == pytest.approx(2, rel=1e-2)
    cosine2, _ = alignment(model, x, y, earlier, rho=0.01, lr=0.1, local_steps=1, round_number=2)
    assert cosine2 < 0.999   # the earlier image's gradient (in the dual) tilts the target
    with pytest.raises(ValueError, match="round_number"):
        alignment(model, x, y, earlier, rho=0.01, lr=0.1, local_steps=1, round_number=3)
    cosines, ratios = alignment_grid(model, x, y, earlier, rhos=[0.01], local_steps=[1], lr=0.1)
    assert set(cosines) == set(ratios) == {(1, 0.01, 1), (2, 0.01, 1)}
    assert cosines[1, 0.01, 1] == pytest.approx(cosine) and cosines[2, 0.01, 1] == pytest.approx(cosine2)


def test_chapter_model_is_the_seeded_dlg_lenet_of_each_kind():
    cfg = get_profile("07_admm_comparison", "quick")
    photos, again = chapter_model(cfg, "photos", 3), chapter_model(cfg, "photos", 3)
    assert all(torch.equal(a, b) for a, b in zip(photos.parameters(), again.parameters()))
    assert float(max(p.detach().abs().max() for p in photos.parameters())) <= 0.5
    assert photos(torch.rand(1, 3, 32, 32)).shape == (1, 100)
    assert chapter_model(cfg, "digits", 3)(torch.rand(1, 1, 32, 32)).shape == (1, 10)


def test_adaptive_attack_recovers_the_first_round_image_where_dlg_admm_does_not():
    model, x, y, earlier = _case(1)
    naive, adaptive = naive_and_adaptive_psnr(model, x, y, earlier, 10, rho=0.01, lr=0.1, local_steps=1,
                                              round_number=1, iterations=15, seed=0, record_every=15)
    assert adaptive > 20 and adaptive > naive + 5


def test_bundled_root_gives_stand_ins_for_the_full_kinds():
    full = get_profile("07_admm_comparison", "full", budget=SMOKE_PARAMETERS["BUDGET"])
    data = load_kinds(full.kinds, 2, 16, 0, SMOKE_PARAMETERS["DATA_ROOT"], full.num_classes, full.channels)
    assert [tuple(images.shape) for images, _ in data.values()] == [(2, 1, 16, 16), (2, 3, 16, 16), (2, 3, 16, 16)]
    assert int(data["lfw_people"][1].max()) < full.num_classes["lfw_people"]


def _result(images, losses):
    return AttackResult(images=images, labels=None, history={"loss": losses}, snapshots=[(0, images + 0.5), (1, images)])


def test_summaries_and_rows_follow_the_final_images_clipped_to_the_image_range():
    truth = torch.full((1, 1, 4, 4), 0.5)
    # the ADMM dummy left [0, 1] far on the positive side (raw values up to 3.5: gitutor.metrics would
    # refuse them as 0–255 pixels); it is scored as the image it estimates, clipped to [0, 1]
    exact, noise = _result(truth.clone(), [1.0, 0.1]), _result(truth + 3.0, [1.0, 4.0])
    runs = {("digits", 0): {"DLG": exact, "iDLG": exact, "DLG-ADMM": noise, "iDLG-ADMM": noise,
                            "adaptive ADMM": exact}}
    data = {"digits": (truth, torch.tensor([3]))}
    finals = admm_report.final_scores(runs, data, 1)
    assert finals["digits"]["DLG-ADMM"][0] == pytest.approx(0.25) and finals["digits"]["DLG"][0] == 0
    assert finals["digits"]["DLG-ADMM"][1] == pytest.approx(6.0206, abs=1e-3)   # 10 log10(1 / 0.25)
    ok = admm_report.outcomes(finals, 20.0)
    assert ok["sgd"] == ok["adaptive"] == ok["reproduced"] == ["digits (MNIST stand-in)"] and ok["admm"] == []
    assert admm_report.loss_growth(noise) == 4.0 and admm_report.snapshot_curve(noise, truth) == [0.25, 0.25]
    assert admm_report.pixel_range(runs, "DLG-ADMM") == (3.5, 3.5)
    assert admm_report.loss_growth_note(runs, data) == "4 on digits (MNIST stand-in)"
    assert admm_report.iterations_note(cfg := get_profile("07_admm_comparison", "quick")).startswith(
        f"{cfg.iterations['digits']} L-BFGS steps on digits (MNIST stand-in), ")
    cfg = get_profile("07_admm_comparison", "quick")
    gaps = {"DLG": stats.interval([3.0, 3.5, 2.5]), "iDLG": stats.interval([3.0, 3.1, 2.9])}
    rows = admm_report.results_rows(finals, runs, cfg, closed_form_error=3e-4, lowest_cosine=0.91234, gaps=gaps)
    assert [r["this_run"] for r in rows if r["quantity"] == "DLG-ADMM final MSE"] == [0.25]
    assert rows[-1]["this_run"] == 0.912 and len(rows) == 4 + 2 + 2 + 3
    assert [r["quantity"] for r in rows if r.get("headline")] == ["DLG and iDLG ≥ 100× below their ADMM variants in MSE"]
    with pytest.raises(ValueError, match="images_per_kind"):
        admm_report.final_scores(runs, data, 0)


def test_the_admm_gap_is_paired_per_image_and_claimed_only_when_both_intervals_clear_two_orders():
    truth = torch.full((1, 1, 4, 4), 0.5)
    near = lambda offset: _result(truth + offset, [1.0])  # noqa: E731 - MSE = offset² while |offset| <= 0.5
    # per image i: DLG off by 1e-3 (i + 1), DLG-ADMM by 0.1 (i + 1): a gap of exactly 4 orders each time
    runs = {("digits", i): {"DLG": near(1e-3 * (i + 1)), "iDLG": near(1e-3), "DLG-ADMM": near(0.1 * (i + 1)),
                            "iDLG-ADMM": near(-0.1)} for i in range(3)}
    data = {"digits": (truth.repeat(3, 1, 1, 1), torch.tensor([1, 2, 3]))}
    gaps = admm_report.admm_gap(runs, data, 3)
    assert gaps["DLG"].n == 3 and gaps["DLG"].mean == pytest.approx(4.0, abs=1e-3)
    assert gaps["DLG"].high - gaps["DLG"].low < 1e-2
    assert admm_report.gap_verdict(gaps) == "reproduced"
    values = admm_report.summary(admm_report.final_scores(
        {**runs, **{k: {**v, "adaptive ADMM": v["DLG"]} for k, v in runs.items()}}, data, 3), gaps, 20.0)
    assert values["gap_verdict"] == "reproduced" and values["gap_n"] == 3 and values["kinds"] == 1
    assert "holds beyond run-to-run noise" in admm_report.chapter_verdict(values)
    runs[("digits", 2)]["iDLG-ADMM"] = near(1e-3)   # one image where ADMM does not hurt: the interval widens
    assert admm_report.gap_verdict(admm_report.admm_gap(runs, data, 3)) == stats.NOT_RESOLVED
    # a dummy far outside [0, 1] is scored clipped (not refused as 0–255 pixels): MSE 0.25, a finite gap
    runs[("digits", 0)]["DLG-ADMM"] = near(2.0)
    assert admm_report.admm_gap(runs, data, 3)["DLG"].n == 3


def test_glue_tables_and_cosine_summary():
    cosines = {(1, 0.01, 1): 0.9999, (1, 0.01, 3): 0.98, (2, 0.01, 1): 0.7, (2, 0.01, 3): -0.2}
    ratios = {key: 2.0 for key in cosines}
    table = admm_report.cosine_table(cosines, ratios)
    assert "| round | ρ | E = 1 | E = 3 |" in table and "-0.200 / ×2" in table
    summary = admm_report.cosine_summary(cosines)
    assert summary["round1_low"] == summary["round1_high"] == 0.9999
    assert (summary["round2_low"], summary["lowest_rho"], summary["lowest_steps"]) == (-0.2, 0.01, 3)
    assert summary["round2_sign"].startswith("Some are negative")
    with pytest.raises(ValueError, match="round 2"):
        admm_report.cosine_summary({(1, 0.01, 1): 1.0})
    assert "| 0.01 | 1 | 2 | 12.0 dB | 30.5 dB |" in admm_report.ablation_table([(0.01, 1, 2, 12.0, 30.5)])
