"""Stepwise GradInversion (Ye et al. 2024, Stage II): schedule, dropout, priors, BN calibration, attack."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from gitutor.attacks import (BatchNormPrior, StepwiseSchedule, bn_statistics_loss, gradient_dropout_masks,
                             gradinversion, stepwise_inversion, total_variation)
from gitutor.federated import client_gradients
from gitutor.metrics import psnr
from gitutor.models import calibrate_batchnorm


def tiny_net() -> nn.Module:
    """A 10-tensor conv net with BatchNorm: small enough for a fast attack test."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4))


def smooth_images(n: int, size: int = 12) -> torch.Tensor:
    """Smooth, distinct test images in [0, 1]: colour gradients with different orientations."""
    ramp = torch.linspace(0, 1, size)
    out = []
    for i in range(n):
        horizontal, vertical = ramp.view(1, -1).expand(size, size), ramp.view(-1, 1).expand(size, size)
        out.append(torch.stack([horizontal, vertical, (horizontal + vertical) / 2]).roll(i, dims=0))
    return torch.stack(out)


# --- schedule -------------------------------------------------------------------------------------

def test_paper_schedule_start_index_over_time_and_floor():
    schedule = StepwiseSchedule.paper()  # ResNet34: 110 tensors, 15 000 iterations
    assert [schedule.start_index(t) for t in (0, 499, 500, 1000, 3500, 3999, 4000, 14_999)] == \
        [99, 99, 89, 79, 29, 29, 24, 24]
    assert not schedule.tv_active(2_999) and schedule.tv_active(3_000)
    assert not schedule.bn_active(4_999) and schedule.bn_active(5_000)
    assert schedule.lr_factor(0) == 1.0
    assert schedule.lr_factor(5_625) == pytest.approx(0.33)
    assert schedule.lr_factor(14_999) == pytest.approx(0.33 ** 3)


def test_schedule_scales_with_budget_and_depth():
    short = StepwiseSchedule.paper(300, 110)
    assert (short.interval, short.t1, short.t2) == (10, 60, 100)
    assert short.lr_milestones == (112, 187, 262)
    # the same phase of the run matches the same tensors
    full = StepwiseSchedule.paper()
    for fraction in (0.0, 0.05, 0.1, 0.2, 0.9):
        assert short.start_index(int(fraction * 300)) == full.start_index(int(fraction * 15_000))
    shallow = StepwiseSchedule.paper(300, 11)
    assert (shallow.start, shallow.floor, shallow.step) == (10, 2, 1)


def test_schedule_rejects_bad_settings():
    with pytest.raises(ValueError, match="floor"):
        StepwiseSchedule(iterations=10, start=2, floor=5, step=1, interval=1, t1=0, t2=0)
    with pytest.raises(ValueError, match="t1"):
        StepwiseSchedule(iterations=10, start=5, floor=2, step=1, interval=1, t1=11, t2=0)
    with pytest.raises(ValueError, match="outside"):
        StepwiseSchedule.paper(100).start_index(101)


# --- gradient dropout and priors ------------------------------------------------------------------

def test_dropout_masks_keep_seventy_percent_and_are_fresh_each_call():
    grads = [torch.zeros(200, 250), torch.zeros(50_000)]
    generator = torch.Generator().manual_seed(0)
    first = gradient_dropout_masks(grads, 0.3, generator)
    second = gradient_dropout_masks(grads, 0.3, generator)
    kept = torch.cat([m.flatten() for m in first])
    assert set(kept.unique().tolist()) == {0.0, 1.0}
    assert kept.mean().item() == pytest.approx(0.7, abs=0.005)
    agreement = (torch.cat([m.flatten() for m in second]) == kept).float().mean().item()
    assert agreement == pytest.approx(0.7 ** 2 + 0.3 ** 2, abs=0.01)  # independent draws
    again = gradient_dropout_masks(grads, 0.3, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    with pytest.raises(ValueError, match="dropout"):
        gradient_dropout_masks(grads, 1.0, generator)


def test_total_variation_beta_two_on_a_ramp():
    ramp = torch.arange(6, dtype=torch.float32).mul(0.1).expand(2, 3, 6, 6)  # Δ_h = 0.1, Δ_v = 0
    # every pixel counts, the last column's missing Δ_h as 0: 6 rows × 5 steps of 0.01 per channel
    assert total_variation(ramp, beta=2.0).item() == pytest.approx(0.01 * 5 / 6)
    assert total_variation(ramp, beta=2.0, reduction="sum").item() == pytest.approx(0.01 * 2 * 3 * 6 * 5)
    assert total_variation(torch.ones(1, 3, 5, 5), beta=2.0).item() == 0.0


def test_r_bn_on_known_statistics():
    layer = nn.BatchNorm2d(2).eval()  # running mean 0, running var 1
    x = torch.zeros(2, 2, 2, 2)
    x[:, 0] = 3.0                                              # mean 3, var 0
    x[:, 1] = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])         # mean 0, var 1
    # ‖(3, 0) − (0, 0)‖ + ‖(0, 1) − (1, 1)‖ = 3 + 1
    assert bn_statistics_loss(layer, x).item() == pytest.approx(4.0)
    with BatchNormPrior(layer) as prior:
        with pytest.raises(RuntimeError, match="forward"):
            prior.value()
    assert not layer._forward_hooks
    with pytest.raises(ValueError, match="BatchNorm"):
        bn_statistics_loss(nn.Conv2d(3, 3, 1), torch.zeros(1, 3, 2, 2))


def test_calibrate_batchnorm_uses_the_auxiliary_statistics():
    model = tiny_net().eval()
    momentum = model[1].momentum
    aux = torch.rand(16, 3, 12, 12, generator=torch.Generator().manual_seed(1))
    calibrate_batchnorm(model, aux)
    features = model[0](aux).detach()
    assert torch.allclose(model[1].running_mean, features.mean(dim=(0, 2, 3)), atol=1e-5)
    assert torch.allclose(model[1].running_var, features.var(dim=(0, 2, 3), unbiased=True), atol=1e-5)
    assert not model.training and model[1].momentum == momentum
    # calibrated on aux, R_BN of the aux images themselves is (almost) only the biased/unbiased gap
    assert bn_statistics_loss(model, aux).item() < 0.1 * bn_statistics_loss(model, aux * 3).item()
    with pytest.raises(ValueError, match="BatchNorm"):
        calibrate_batchnorm(nn.Linear(2, 2), aux)
    with pytest.raises(ValueError, match="N, C, H, W"):
        calibrate_batchnorm(model, aux[0])


# --- the attack -----------------------------------------------------------------------------------

@pytest.fixture()
def victim():
    model = tiny_net()
    calibrate_batchnorm(model, torch.rand(32, 3, 12, 12, generator=torch.Generator().manual_seed(2)))
    model.eval()
    x = smooth_images(2)
    y = torch.tensor([0, 3])
    return model, x, y, client_gradients(model, x, y)


def test_stepwise_inversion_improves_psnr_over_its_start(victim):
    model, x, y, grads = victim
    result = stepwise_inversion(model, grads, y, x.shape, iterations=120, tv_weight=0.01, bn_weight=1e-4,
                                record_every=40)
    start = psnr(result.snapshots[0][1], x).mean().item()
    end = psnr(result.images, x).mean().item()
    assert end > start + 4.0
    assert result.images.min() >= 0 and result.images.max() <= 1
    schedule = StepwiseSchedule.paper(120, len(list(model.parameters())))
    assert result.history["start_index"][0] == schedule.start == 9
    assert result.history["start_index"][-1] == schedule.floor == 2
    assert {schedule.t1, schedule.t2, 120} <= {t for t, _ in result.snapshots}
    assert not any(m._forward_hooks for m in model.modules())  # R_BN hooks removed


def test_same_seed_same_reconstruction(victim):
    model, x, y, grads = victim
    a = stepwise_inversion(model, grads, y, x.shape, iterations=5, seed=3)
    b = stepwise_inversion(model, grads, y, x.shape, iterations=5, seed=3)
    assert torch.equal(a.images, b.images)


def test_errors_on_mismatched_inputs(victim):
    model, x, y, grads = victim
    with pytest.raises(ValueError, match="shape"):
        stepwise_inversion(model, grads[:-1] + [grads[-1][:2]], y, x.shape, iterations=2)
    with pytest.raises(ValueError, match="parameters"):
        stepwise_inversion(model, grads[:-1], y, x.shape, iterations=2)
    with pytest.raises(ValueError, match="labels"):
        stepwise_inversion(model, grads, y[:1], x.shape, iterations=2)
    with pytest.raises(ValueError, match="schedule"):
        stepwise_inversion(model, grads, y, x.shape, iterations=2, schedule=StepwiseSchedule.paper(3, 10))
    with pytest.raises(ValueError, match="eval"):
        stepwise_inversion(model.train(), grads, y, x.shape, iterations=2)
    with pytest.raises(ValueError, match="distance"):
        gradinversion(model.eval(), grads, y, x.shape, iterations=2, distance="l1")
    with pytest.raises(ValueError, match="input_shape"):
        gradinversion(model, grads, y, (2, 3, 12), iterations=2)


def test_gradinversion_matches_every_tensor_from_the_start(victim):
    model, x, y, grads = victim
    for distance in ("cosine", "l2"):
        result = gradinversion(model, grads, y, x.shape, iterations=4, distance=distance, record_every=1)
        assert result.history["start_index"] == [0, 0, 0, 0]
        assert all(v > 0 for v in result.history["r_bn"])


# --- chapter 04's trials (gitutor.chapters.stepwise_gradinversion.trials) and settings ---------------------------------

def test_chapter_trials_share_runs_and_start_every_method_from_the_same_noise():
    import gitutor
    from gitutor.chapters.stepwise_gradinversion.trials import chapter_trials
    from gitutor.chapters.stepwise_gradinversion.profile import chapter_settings

    cfg = chapter_settings(gitutor.get_profile("04_stepwise_gradinversion", "quick"))
    trials = chapter_trials(cfg, {"layer2": 4, "layer4": 40}, seed=5)
    keys = [(t["method"], t["batch"], t["iterations"], t["first_tensor"]) for t in trials]
    assert len(keys) == len(set(keys))  # the Table 1, Table 2 and budget-curve runs are shared, not repeated
    assert {t["seed"] for t in trials if t["batch"][1] == 1} == {6}
    assert ("Stepwise", (cfg.batch_size, 0), cfg.iterations, None) in keys
    assert ("Stepwise", (cfg.batch_size, 2), cfg.study_iterations, 4) in keys
    assert {t["method"] for t in trials} == {"DLG", "Inverting Gradients", "GradInversion", "Stepwise", "ℓ_grad",
                                            "+ ℓ̃_grad", "Stepwise, no dropout"}


def test_chapter_settings_budgets_and_offline_checks(tmp_path, monkeypatch):
    import gitutor
    from gitutor.chapters.stepwise_gradinversion.trials import offline_problems
    from gitutor.chapters.stepwise_gradinversion.profile import chapter_settings

    full = gitutor.get_profile("04_stepwise_gradinversion", "full")
    cfg = chapter_settings(full, "cpu_recording", pretrained=False, image_root="bundled")
    assert (cfg.iterations, cfg.batch_size, cfg.n_batches, cfg.model, cfg.width) == (1500, 4, 5, "cifar_resnet18", 32)
    assert not cfg.substitute and cfg.calibrate_bn_images == 0  # random weights, default statistics
    assert (cfg.tv_weight, cfg.bn_weight) == (1e-4, 1e-6)  # a hundredth of the paper's (Eq. 11 sums)
    paper = chapter_settings(full, pretrained=False, image_root="bundled")
    assert (paper.tv_weight, paper.bn_weight, paper.model) == (0.01, 1e-4, "resnet34")
    # the offline fallback's batches hold distinct bundled photographs: Fig. 7 stops at B = 16
    assert paper.batch_sizes == [1, 2, 4, 8, 16] and paper.batch_size == 8
    with pytest.raises(ValueError, match="IMAGE_ROOT"):  # 6 held-out photographs < B = 8
        chapter_settings(full, pretrained=False, substitute=True, image_root="bundled")
    with pytest.raises(ValueError, match="BUDGET"):
        chapter_settings(full, "huge")
    with pytest.raises(ValueError, match="unknown settings"):
        chapter_settings(full, iterationz=3)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # an empty hub cache, and no network:
    monkeypatch.setattr(torch.hub, "_hub_dir", None)

    def offline(url, **kwargs):
        raise OSError("no network")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", offline)
    problems = offline_problems(True, None)
    assert len(problems) == 2 and "PRETRAINED = False" in problems[0] and "IMAGE_ROOT is not set" in problems[1]
    assert "is not a folder" in offline_problems(False, tmp_path / "missing")[0]
    assert offline_problems(False, "bundled") == [] and offline_problems(False, tmp_path) == []


def test_a_trial_scores_the_attack_on_its_batch(victim):
    from gitutor.chapters.stepwise_gradinversion.trials import run_attack, trial

    model, x, y, grads = victim
    settings = dict(dropout=0.3, tv_weight=0.01, bn_weight=1e-4, lr=0.1, t1=3000, t2=5000, ig_tv_weight=0.01,
                    dlg_inner_steps=20, num_classes=4, record_every=5)
    context = {"model": model, "batches": {(2, 0): (x, y, grads)}, "settings": settings}
    value = trial(context, method="Stepwise", batch=(2, 0), iterations=60, seed=0, first_tensor=2)
    start = psnr(value["snapshots"][0][1], x).mean().item()
    assert value["PSNR"] > start + 2 and len(value["loss"]) == 60 and value["images"].shape == x.shape
    with pytest.raises(ValueError, match="first_tensor"):
        run_attack(context, "GradInversion", (2, 0), 2, 0, first_tensor=3)
    with pytest.raises(ValueError, match="batch"):
        run_attack(context, "Stepwise", (4, 0), 2, 0)
