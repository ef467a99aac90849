"""Tests for the user-level attack with a diffusion prior (Li et al. 2023): schedules, augmentations,
the attack, its scores, the prior's sampling and checksum, and the users."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch

from gitutor.attacks.user_level import (Augmentation, LayerWindow, TauSchedule, ZetaSchedule,
                                        clip_matching_gradient, diffula_gradient, user_level_inversion,
                                        user_level_inverting_gradients)
from gitutor.face_detection import face_detection_rate
from gitutor.federated.client import client_gradients
from gitutor.federated.users import celeba_missing, lfw_user
from gitutor.models import GapCNN, LeNet
from gitutor.priors import FACE_DDPM_SHA256, WEIGHTS_DIR, WEIGHTS_FILE, PriorChecksumError, face_ddpm
from gitutor.seeding import make_generator


@pytest.fixture(scope="module")
def prior():
    return face_ddpm()


def test_tau_schedule_endpoints_monotone_and_noise_bounds():
    schedule = TauSchedule(t_max=999, t_min=500, noise=50)
    mean = schedule.mean(200)
    assert mean[0] == 999 and mean[-1] == 500
    assert np.all(np.diff(mean) <= 1e-9)
    tau = schedule.sample(200, make_generator(0))
    assert tau.dtype == torch.int64 and tau.min() >= 500 and tau.max() <= 999
    assert torch.equal(tau, schedule.sample(200, make_generator(0)))
    assert (tau.float() - torch.as_tensor(mean).float()).abs().max() <= 50.5


@pytest.mark.parametrize("kwargs, name", [(dict(t_max=2000), "t_max"), (dict(t_max=400, t_min=500), "t_min"),
                                          (dict(t_max=-1, t_min=0), "t_max"), (dict(noise=-1), "noise"),
                                          (dict(t_max=999.5), "t_max"), (dict(num_timesteps=0), "num_timesteps")])
def test_tau_schedule_rejects_bad_settings_by_name(kwargs, name):
    with pytest.raises(ValueError, match=name):
        TauSchedule(**kwargs)


def test_zeta_schedule_is_cosine_ramp_from_1_5_to_1():
    zeta = ZetaSchedule().values(101)
    assert zeta[0] == pytest.approx(1.5) and zeta[-1] == pytest.approx(1.0) and zeta[50] == pytest.approx(1.25)
    assert np.all(np.diff(zeta) <= 0)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="start"):
            ZetaSchedule(start=bad)
    with pytest.raises(ValueError, match="steps"):
        ZetaSchedule().values(0)


def test_layer_window_starts_deep_and_widens():
    window = LayerWindow(width=2.0, open_at=0.5)
    start, middle, end = (window.weights(8, f) for f in (0.0, 0.25, 1.0))
    assert start[-1] == 1 and start[:5].sum() == 0
    assert torch.all(end == 1)
    assert torch.all(middle >= start) and torch.all(end >= middle)
    assert torch.all(torch.diff(middle) >= 0)  # deeper tensors never weigh less
    with pytest.raises(ValueError, match="open_at"):
        LayerWindow(open_at=1.5)
    with pytest.raises(ValueError, match="width"):
        LayerWindow(width=math.nan)
    with pytest.raises(ValueError, match="fraction"):
        window.weights(8, 1.5)


def test_clipping_caps_norm_at_zeta_times_prior_norm():
    g_prior = torch.full((1, 1, 4, 4), 0.5)  # norm 2
    big = torch.full((1, 1, 4, 4), 10.0)
    clipped = clip_matching_gradient(big, g_prior, zeta=1.5)
    assert clipped.norm() == pytest.approx(3.0, rel=1e-5)
    assert torch.allclose(clipped / clipped.norm(), big / big.norm())
    small = torch.full((1, 1, 4, 4), 0.1)
    assert torch.equal(clip_matching_gradient(small, g_prior, zeta=1.5), small)
    for bad in (0, math.nan):
        with pytest.raises(ValueError, match="zeta"):
            clip_matching_gradient(big, g_prior, zeta=bad)


@pytest.mark.parametrize("channels", [1, 3])
def test_augmentation_keeps_shape_range_and_is_seeded(channels):
    image = torch.rand(1, channels, 16, 16, generator=make_generator(1))
    augment = Augmentation(p=0.5)
    out = augment(image, 12, make_generator(0))
    assert out.shape == (12, channels, 16, 16) and out.min() >= 0 and out.max() <= 1
    assert torch.equal(out, augment(image, 12, make_generator(0)))
    assert not torch.equal(out[0], out[1])
    assert torch.equal(Augmentation(p=0.0)(image, 3, make_generator(0)), image.expand(3, -1, -1, -1))
    with pytest.raises(ValueError, match=r"\(1, C, H, W\)"):
        augment(image.expand(2, -1, -1, -1), 3, make_generator(0))


def test_augmentation_is_differentiable_and_rejects_bad_settings():
    image = torch.rand(1, 3, 16, 16, generator=make_generator(2), requires_grad=True)
    Augmentation(p=1.0)(image, 4, make_generator(0)).sum().backward()
    assert image.grad is not None and image.grad.abs().sum() > 0
    for name, value in (("p", 1.5), ("noise_std", -0.1), ("jitter", 1.0), ("blur_sigma", 0.0), ("distortion", math.nan)):
        with pytest.raises(ValueError, match=name):
            Augmentation(**{name: value})


def test_lfw_user_rejects_faces_the_prior_was_trained_on():
    images, labels = lfw_user(85, 6)
    assert images.shape == (6, 1, 32, 32) and labels.unique().numel() == 1
    with pytest.raises(ValueError, match="held-out"):
        lfw_user(3, 6)
    with pytest.raises(ValueError, match="batch_size"):
        lfw_user(85, 1)


def test_celeba_missing_lists_every_file(tmp_path):
    missing = celeba_missing(tmp_path)
    assert len(missing) == 6 and any("identity_CelebA.txt" in m for m in missing)
    (tmp_path / "celeba").mkdir()
    (tmp_path / "celeba" / "identity_CelebA.txt").write_text("")
    assert len(celeba_missing(tmp_path)) == 5


def _tiny_problem(face=85, batch=4):
    torch.manual_seed(0)
    model = LeNet(num_classes=2, in_channels=1, image_size=32, activation="relu")
    images, labels = lfw_user(face, batch)
    return model, client_gradients(model, images, labels), labels


def test_diffusion_attack_lowers_matching_loss_end_to_end(prior):
    model, target, labels = _tiny_problem()
    result = user_level_inversion(model, target, labels, prior, batch_size=4, steps=20, t_star=5, record_every=10,
                                  lr=0.1, seed=0, matching_weight=1e4)
    distance = result.history["gradient_distance"]
    assert result.images.shape == (1, 1, 32, 32) and 0 <= result.images.min() and result.images.max() <= 1
    assert np.mean(distance[-5:]) < np.mean(distance[:5])
    assert [i for i, _ in result.snapshots] == [0, 10, 20]
    assert all(s <= 1 for s in result.history["clip_scale"])
    json.dumps(result.info)  # info holds only JSON-able values


def test_unweighted_matching_is_negligible_and_weight_makes_the_clip_bind(prior):
    """The diagnosis of the chapter: with Eq. 14 as written the matching gradient is orders of magnitude
    below the prior's, so two users get the same image; a large λ makes the clip bind and separates them."""
    model = GapCNN(num_classes=2, in_channels=1)
    outputs = {}
    for weight in (1.0, 1e6):
        for face in (81, 90):
            images, labels = lfw_user(face, 4)
            target = client_gradients(model, images, labels)
            result = user_level_inversion(model, target, labels, prior, batch_size=4, steps=8, t_star=0, lr=0.1,
                                          matching_weight=weight, tau_schedule=TauSchedule(999, 200, 50))
            outputs[weight, face] = result
    assert max(outputs[1.0, 81].history["grad_ratio"]) < 0.1
    assert all(s < 1 for s in outputs[1e6, 81].history["clip_scale"])
    same = (outputs[1.0, 81].images - outputs[1.0, 90].images).abs().max()
    different = (outputs[1e6, 81].images - outputs[1e6, 90].images).abs().max()
    assert different > 10 * same


@pytest.mark.parametrize("kwargs, name", [(dict(lr=math.nan), "lr"), (dict(lr=-1.0), "lr"),
                                          (dict(matching_weight=0.0), "matching_weight"),
                                          (dict(prior_weight=-1.0), "prior_weight"),
                                          (dict(prior_weight=math.inf), "prior_weight"),
                                          (dict(t_star=1000), "t_star"), (dict(steps=0), "steps"),
                                          (dict(record_every=0), "record_every"),
                                          (dict(tau_schedule=TauSchedule(1500, 200, 0, num_timesteps=2000)),
                                           "tau_schedule")])
def test_diffusion_attack_rejects_bad_arguments_by_name(prior, kwargs, name):
    model, target, labels = _tiny_problem()
    settings = dict(batch_size=4, steps=2, t_star=0) | kwargs
    with pytest.raises(ValueError, match=name):
        user_level_inversion(model, target, labels, prior, **settings)
    with pytest.raises(ValueError, match="labels"):
        user_level_inversion(model, target, labels[:2], prior, batch_size=4, steps=2)


def test_diffula_gradient_is_the_prior_gradient_plus_the_clipped_matching_gradient(prior):
    """Algorithm 1, lines 4-8, against the formulas written out: g = w_p g_p + g_gm / max(1, ||g_gm|| / (ζ ||g_p||))."""
    from gitutor.priors.sampling import add_noise

    gen = make_generator(0)
    x = torch.randn(1, 1, 32, 32, generator=gen).requires_grad_(True)
    eps, target = torch.randn(1, 1, 32, 32, generator=gen), torch.randn(1, 1, 32, 32, generator=gen)

    def match(image):  # a stand-in distance with a known gradient 2 (x − target)
        return ((image - target) ** 2).sum()

    loss = (prior.unet(add_noise(prior, x, eps, 600), torch.tensor([600])).sample - eps).pow(2).sum()
    (g_p,) = torch.autograd.grad(loss, x)
    g_gm = 10.0 * 2 * (x - target).detach()
    clipped = g_gm / max(1.0, float(g_gm.norm() / (1.2 * g_p.norm())))
    for weight in (1.0, 0.0):
        step = diffula_gradient(x, eps, 600, 1.2, prior=prior, match=match, matching_weight=10.0,
                                prior_weight=weight)
        assert torch.allclose(step["grad"], weight * g_p + clipped, rtol=1e-4, atol=1e-5)
    assert step["clip_scale"] < 1 and step["grad_ratio"] == pytest.approx(float(g_gm.norm() / g_p.norm()), rel=1e-4)
    assert float(step["grad"].norm()) == pytest.approx(1.2 * float(g_p.norm()), rel=1e-4)  # w_p = 0: the clip's norm
    with pytest.raises(ValueError, match="zeta"):
        diffula_gradient(x, eps, 600, 0.0, prior=prior, match=match)


def test_prior_weight_zero_keeps_the_clipped_matching_step_and_drops_the_prior(prior):
    """The no-prior control: same x_T, same first step's matching gradient and clip (g_p still sets its
    scale), but the prior no longer moves x̂, so the runs part after the first step."""
    model, target, labels = _tiny_problem()
    settings = dict(batch_size=4, steps=6, t_star=0, lr=0.1, seed=3, matching_weight=1e4)
    runs = {w: user_level_inversion(model, target, labels, prior, prior_weight=w, **settings)
            for w in (0.0, 1.0)}
    for key in ("grad_ratio", "clip_scale", "gradient_distance", "prior_loss"):
        assert runs[0.0].history[key][0] == pytest.approx(runs[1.0].history[key][0])
    assert all(s < 1 for s in runs[0.0].history["clip_scale"])  # the clip binds: ζ ||g_p|| sets the step
    assert (runs[0.0].images - runs[1.0].images).abs().max() > 0.05


def test_final_snapshot_is_the_image_before_the_final_denoising(prior):
    """t* = 0 as an arm of the same run: the last snapshot equals a run with t* = 0 and the same seed."""
    model, target, labels = _tiny_problem()
    settings = dict(batch_size=4, steps=5, lr=0.1, seed=1, matching_weight=1e4, record_every=5)
    denoised = user_level_inversion(model, target, labels, prior, t_star=20, **settings)
    plain = user_level_inversion(model, target, labels, prior, t_star=0, **settings)
    assert torch.equal(denoised.snapshots[-1][1], plain.images)
    assert (denoised.images - plain.images).abs().max() > 0.01


def test_user_level_inverting_gradients_lowers_matching_loss():
    model, target, labels = _tiny_problem()
    result = user_level_inverting_gradients(model, target, labels, (1, 32, 32), batch_size=4, steps=20)
    distance = result.history["gradient_distance"]
    assert np.mean(distance[-5:]) < np.mean(distance[:5])


def test_shipped_prior_loads_offline_and_checksums_weights_and_config(tmp_path, prior):
    assert prior.image_size == 32 and prior.channels == 1 and prior.num_timesteps == 1000
    assert (WEIGHTS_DIR / WEIGHTS_FILE).stat().st_size < 10 * 2**20
    x = torch.zeros(1, 1, 32, 32)
    assert prior.unet(x, torch.tensor([10])).sample.shape == x.shape
    with pytest.raises(PriorChecksumError, match="sha256"):
        face_ddpm(expected_sha256="0" * 64)
    corrupted = tmp_path / "weights"
    shutil.copytree(WEIGHTS_DIR, corrupted)
    with open(corrupted / WEIGHTS_FILE, "r+b") as handle:
        handle.seek(-1, 2)
        handle.write(b"\x00" if handle.read(1) != b"\x00" else b"\x01")
    with pytest.raises(PriorChecksumError, match=FACE_DDPM_SHA256):
        face_ddpm(weights_dir=corrupted)
    changed = tmp_path / "config"
    shutil.copytree(WEIGHTS_DIR, changed)
    config = json.loads((changed / "config.json").read_text())
    (changed / "config.json").write_text(json.dumps(config | {"act_fn": "mish"}, indent=2))
    with pytest.raises(PriorChecksumError, match="config.json"):
        face_ddpm(weights_dir=changed)
    with pytest.raises(FileNotFoundError, match="train_face_ddpm"):
        face_ddpm(weights_dir=tmp_path / "missing")


def test_face_detection_rate_separates_faces_from_noise():
    from gitutor.data import lfw_faces

    assert face_detection_rate(lfw_faces(32)[:20]) >= 0.9
    assert face_detection_rate(torch.rand(10, 1, 32, 32, generator=make_generator(0))) == 0.0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        face_detection_rate(torch.full((1, 1, 32, 32), 2.0))
