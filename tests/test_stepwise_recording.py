"""Chapter 04's recorded Table 1: its reconstructions file, the table and sentences read from it, the
along-the-run figure, and a budget that runs Table 1 only."""
import matplotlib
import pytest
import torch

import gitutor
from gitutor.chapters.stepwise_gradinversion.trials import chapter_trials, score
from gitutor.chapters.stepwise_gradinversion.profile import chapter_settings
from gitutor.stats import interval
from gitutor.chapters.stepwise_gradinversion import experiments as study
from gitutor.chapters.stepwise_gradinversion.figures import along_run
from gitutor.chapters.stepwise_gradinversion.recording import (load_reconstructions, recorded_table1,
                                                recognisable_counts, save_reconstructions)

matplotlib.use("Agg")


def _run(truth: torch.Tensor, noise: torch.Tensor, shift: float) -> dict:
    final = (truth + shift).clamp(0, 1)
    return {"images": final, "snapshots": [(0, noise), (50, (noise + final) / 2), (100, final)]}


def _recording(tmp_path, batches: int = 3):
    g = torch.Generator().manual_seed(0)
    truths = [torch.rand(2, 3, 8, 8, generator=g) for _ in range(batches)]
    noises = [torch.rand(2, 3, 8, 8, generator=g) for _ in range(batches)]
    runs = {m: [_run(t, x, 0.05 * (k + 1)) for t, x in zip(truths, noises)]
            for k, m in enumerate(study.TABLE1_METHODS)}
    return save_reconstructions(tmp_path / "r.safetensors", truths, runs), truths, noises, runs


def test_reconstructions_round_trip_with_curves_scored_against_the_truth(tmp_path):
    path, truths, noises, runs = _recording(tmp_path)
    recording = load_reconstructions(path)
    assert all(torch.equal(a, b) for a, b in zip(recording["truth"], truths))
    assert set(recording["images"]) == set(study.TABLE1_METHODS)
    assert torch.equal(recording["images"]["Stepwise"][1], runs["Stepwise"][1]["images"])
    curve = recording["curves"]["GradInversion"][2]
    assert curve.shape == (3, 3) and curve[:, 0].tolist() == [0.0, 50.0, 100.0]
    assert curve[0, 1].item() == pytest.approx(score(noises[2], truths[2])["PSNR"])


def test_save_reconstructions_refuses_what_it_cannot_store(tmp_path):
    truth = torch.rand(1, 3, 4, 4)
    run = {"images": truth, "snapshots": [(0, truth)]}
    with pytest.raises(ValueError, match="truths"):
        save_reconstructions(tmp_path / "a.safetensors", [], {})
    with pytest.raises(ValueError, match="one run per batch"):
        save_reconstructions(tmp_path / "a.safetensors", [truth, truth], {"DLG": [run]})
    with pytest.raises(ValueError, match="'/'"):
        save_reconstructions(tmp_path / "a.safetensors", [truth], {"a/b": [run]})
    with pytest.raises(FileNotFoundError):
        load_reconstructions(tmp_path / "missing.safetensors")


def test_recorded_table1_puts_noise_first_and_scores_each_final_reconstruction(tmp_path):
    path, truths, noises, runs = _recording(tmp_path)
    table = recorded_table1(load_reconstructions(path))
    assert list(table) == list(study.PAPER_TABLE1)  # the paper's row order, noise first
    noise = [score(x, t)["SSIM"] for x, t in zip(noises, truths)]
    assert table["Noise N(0, I)"]["SSIM"].mean == pytest.approx(sum(noise) / len(noise))
    assert table["DLG"]["PSNR"].mean > 20  # a shift of 0.05 from the truth
    assert table["Stepwise"]["PSNR"].mean < table["Inverting Gradients"]["PSNR"].mean  # larger shift
    assert table["Stepwise"]["SSIM"].n == 3
    assert table["Noise N(0, I)"]["LPIPS"] is None  # the start's images are not kept
    lpips = [score(r["images"], t)["LPIPS"] for r, t in zip(runs["Stepwise"], truths)]
    assert table["Stepwise"]["LPIPS"].mean == pytest.approx(sum(lpips) / len(lpips))


def test_recognisable_counts_photographs_at_the_books_threshold(tmp_path):
    truth = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    close = (truth + 0.001).clamp(0, 1)  # ≈ 60 dB
    recording = {"truth": [truth, truth], "images": {"A": [close, truth.flip(0)], "B": [truth.flip(0)] * 2}}
    assert recognisable_counts(recording) == {"A": (2, 4), "B": (0, 4)}
    with pytest.raises(ValueError, match="no method"):
        recognisable_counts({"truth": [truth], "images": {}})


def test_along_run_draws_each_method_and_refuses_mismatched_snapshots(tmp_path):
    path, *_ = _recording(tmp_path)
    curves = load_reconstructions(path)["curves"]
    fig = along_run({m: curves[m] for m in ("Inverting Gradients", "Stepwise")})
    assert len(fig.axes) == 2 and len(fig.axes[0].get_lines()) == 2
    assert fig.axes[0].get_ylabel() == "PSNR (dB)" and fig.get_size_inches()[0] <= 8.0  # legible at page width
    assert fig.axes[0].get_xscale() == "log" and fig.axes[0].get_lines()[0].get_xdata()[0] == 50
    with pytest.raises(ValueError, match="different iterations"):
        along_run({"IG": [curves["Stepwise"][0], curves["Stepwise"][1][:2]]})
    with pytest.raises(ValueError, match="curves"):
        along_run({})


def test_a_budget_without_curve_ablation_and_studies_runs_table1_only():
    cfg = chapter_settings(gitutor.get_profile("04_stepwise_gradinversion", "full"), "cpu_recording",
                           pretrained=False, image_root="bundled")
    assert cfg.budgets == [] and cfg.ablation_iterations is None and cfg.study_iterations is None
    trials = chapter_trials(cfg, {}, seed=0)
    assert sorted({t["method"] for t in trials}) == sorted(study.TABLE1_METHODS)
    assert len(trials) == 4 * cfg.n_batches and {t["iterations"] for t in trials} == {1500}
    assert {t["batch"][0] for t in trials} == {4} and cfg.model == "cifar_resnet18" and not cfg.substitute
    table1 = {m: {"PSNR": interval([10.0, 11.0]), "SSIM": interval([0.1, 0.2]), "LPIPS": None}
              for m in study.PAPER_TABLE1}
    psnr = {m: [10.0, 11.0] for m in study.PAPER_TABLE1}
    rows = study.chapter_rows(cfg, table1, None, psnr)
    assert not [r for r in rows if r["quantity"].startswith("Table 2")] and len(rows) == 4 * 3 + 1
