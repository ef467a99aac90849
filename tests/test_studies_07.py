"""Chapter 07's rounds and summaries (gitutor.chapters.admm_comparison.rounds, admm_report) on tiny cases."""
import pytest
import torch

from gitutor import stats

from gitutor.attacks import AttackResult
from gitutor.data import digits
from gitutor.federated import client_gradients
from gitutor.models import LeNet, init_uniform_
from gitutor.chapters import get_profile
from gitutor.chapters.admm_comparison.profile import SMOKE_PARAMETERS
from gitutor.results import save_results, verdict
from gitutor.chapters.admm_comparison import compare as admm_compare
from gitutor.chapters.admm_comparison import report as admm_report
from gitutor.chapters.admm_comparison.rounds import (PHOTOGRAPHS, alignment, alignment_grid, chapter_model, closed_form_errors,
                                         first_round, load_kinds, naive_and_adaptive_psnr)


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
    side = cfg.image_size
    assert photos(torch.rand(1, 3, side, side)).shape == (1, 100)
    assert chapter_model(cfg, "digits", 3)(torch.rand(1, 1, side, side)).shape == (1, 10)


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


def test_compare_kind_runs_every_attack_on_every_image_and_the_diagnostics_recover_it():
    cfg = get_profile("07_admm_comparison", "quick")
    assert cfg.images_per_kind >= 10
    data = load_kinds(["digits"], 2, 8, 0, "data", {"digits": 10}, {"digits": 1})
    images, labels = data["digits"]
    model = init_uniform_(LeNet(10, in_channels=1, image_size=8), generator=torch.Generator().manual_seed(1))
    runs = admm_compare.compare_kind(model, images, labels, rho=0.01, lr=0.1, local_steps=1, iterations=15, seed=0,
                                     record_every=5, cosine_iterations=150, tv_weight=1e-4)
    assert len(runs) == 2 and all(list(r) == list(admm_compare.ATTACKS) for r in runs)
    table = admm_compare.scores(runs, images)
    rates = admm_compare.recovered(table, 15.0)
    assert rates["DLG-ADMM"].mean == 0 and rates["cosine on −Δ/η"].mean == 1.0   # blind to the factor 2
    assert [p >= 15 for _, p in table["DLG"]] == [p >= 15 for _, p in table["DLG on −Δ/(2η)"]]
    with pytest.raises(ValueError, match="images and labels"):
        admm_compare.compare_kind(model, images, labels[:1], rho=0.01, lr=0.1, local_steps=1, iterations=1, seed=0,
                                  record_every=1, cosine_iterations=1, tv_weight=0.0)


def test_photographs_are_real_and_limited_to_those_bundled():
    data = load_kinds(["photos"], 11, 16, 0, "data", {"photos": 100}, {"photos": 3})
    assert data["photos"][0].shape == (11, 3, 16, 16)
    assert "horse" not in PHOTOGRAPHS and "logo" not in PHOTOGRAPHS
    with pytest.raises(ValueError, match="photographs"):
        load_kinds(["photos"], 13, 16, 0, "data", {"photos": 100}, {"photos": 3})


def test_gaps_are_paired_log_ratios_with_intervals_and_the_headline_row_follows_them(tmp_path):
    # per image: MSE of DLG 1e-6, of DLG-ADMM 0.1 (gap 5); iDLG the same except image 2 (gap 1)
    table = {"DLG": [(1e-6, 60.0)] * 3, "DLG-ADMM": [(0.1, 10.0)] * 3,
             "iDLG": [(1e-6, 60.0), (1e-6, 60.0), (0.01, 20.0)], "iDLG-ADMM": [(0.1, 10.0)] * 3,
             "DLG on −Δ/(2η)": [(1e-6, 60.0)] * 3, "cosine on −Δ/η": [(1e-3, 30.0)] * 3}
    gaps = admm_compare.log_gaps(table)
    assert gaps["DLG"] == pytest.approx([5.0] * 3) and gaps["both"] == pytest.approx([5.0, 5.0, 1.0])
    assert admm_compare.log_gaps({**table, "DLG": [(0.0, 99.0)] * 3})["DLG"][0] == pytest.approx(11.0)  # floored
    intervals = admm_compare.gap_intervals(gaps)
    rates = admm_compare.recovered(table, 15.0)
    cfg = get_profile("07_admm_comparison", "quick")
    rows = admm_report.results_rows({"digits": table}, cfg, gaps=intervals, rates=rates, closed_form_error=3e-4,
                                    lowest_cosine=0.91234)
    save_results("07_admm_comparison", "quick", rows, tmp_path)
    headline = [r for r in rows if r.get("headline")]
    assert len(headline) == 1 and "better" not in headline[0] and "§4" in headline[0]["claim"]
    # cosine matching on −Δ/η recovers 3 of 3 (30 dB ≥ 15): Wilson low end 0.44, not above ½: not judged
    assert "claim_outcome" not in headline[0] and verdict(headline[0]) == "not comparable"
    many = admm_compare.recovered({k: v * 10 for k, v in table.items()}, 15.0)   # 30 of 30: low end > ½
    judged = admm_report.results_rows({"digits": table}, cfg, gaps=intervals, rates=many, closed_form_error=3e-4,
                                      lowest_cosine=0.9)[0]
    assert judged["claim_outcome"] == "refuted" and "2∇f" in judged["claim_reason"]
    none = admm_compare.recovered({**table, "cosine on −Δ/η": [(0.1, 10.0)] * 30}, 15.0)
    kept = admm_report.results_rows({"digits": table}, cfg, gaps=intervals, rates=none, closed_form_error=3e-4,
                                    lowest_cosine=0.9)[0]
    assert kept["claim_outcome"] == "consistent"
    gap = next(r for r in rows if r["quantity"].startswith("log10(MSE of DLG-ADMM"))
    assert gap["paper"].startswith("clear vs noise") and verdict(gap) == "not comparable"  # no number of the report's
    assert all(0 <= r["low"] <= r["high"] <= 1 for r in rows if "recognisable" in r["quantity"])
    assert rows[-1]["this_run"] == 0.912
    assert "not resolved" in admm_report.gap_sentence(intervals["both"])
    assert "beyond image-to-image variation" in admm_report.gap_sentence(intervals["DLG"])
    assert admm_report.chapter_verdict(intervals["DLG"], rates, 15.0).startswith("Over 3 paired images")
    assert "In round 1 with E = 3, that gap is not privacy" in admm_report.chapter_verdict(intervals["DLG"], rates,
                                                                                            15.0, 3)
    assert "| digits (MNIST stand-in) | 3 / 3 (60 dB) | 0 / 3 (10 dB) | 3 / 3 (60 dB) | 0 / 3 (10 dB) |" in \
        admm_report.rate_table({"digits": table}, 15.0)
    assert "| all kinds |" in admm_report.gap_table({"digits": intervals}, intervals)


def test_summaries_follow_the_final_images_clipped_to_the_image_range():
    truth = torch.full((1, 1, 4, 4), 0.5)
    noise = _result(truth + 3.0, [1.0, 4.0])
    runs = {("digits", 0): {"DLG-ADMM": noise}}
    assert admm_report.loss_growth(noise) == 4.0 and admm_report.snapshot_curve(noise, truth) == [0.25, 0.25]
    assert admm_report.pixel_range(runs, "DLG-ADMM") == (3.5, 3.5)
    assert admm_report.loss_growth_note(runs, {"digits": None}) == "4 on digits (MNIST stand-in)"
    cfg = get_profile("07_admm_comparison", "quick")
    assert admm_report.iterations_note(cfg).startswith(f"{cfg.iterations['digits']} L-BFGS steps on digits")


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
    facts = admm_report.local_steps_summary({(1, 0.01, 1): 1.0, (1, 0.01, 3): 0.99, (2, 0.01, 3): 0.5},
                                            {(1, 0.01, 1): 2.0, (1, 0.01, 3): 5.9, (2, 0.01, 3): 1.0})
    assert facts == {"lowest": 0.99, "steps": 3, "ratio_low": 5.9, "ratio_high": 5.9, "twice_steps": 6}
