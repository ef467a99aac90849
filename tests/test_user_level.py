"""Tests for the user-level attack with a diffusion prior (Li et al. 2023) and its helpers."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from gitutor.attacks.user_level import (Augmentation, LayerWindow, TauSchedule, ZetaSchedule,
                                        clip_matching_gradient, user_level_inversion,
                                        user_level_inverting_gradients)
from gitutor.face_detection import face_detection_rate
from gitutor.federated.client import client_gradients
from gitutor.models import LeNet
from gitutor.priors import (FACE_DDPM_SHA256, WEIGHTS_DIR, WEIGHTS_FILE, PriorChecksumError,
                            face_ddpm)
from gitutor.seeding import make_generator
from gitutor.user_batches import lfw_user


def test_tau_schedule_endpoints_monotone_and_noise_bounds():
    schedule = TauSchedule(t_max=999, t_min=500, noise=50)
    mean = schedule.mean(200)
    assert mean[0] == 999 and mean[-1] == 500
    assert np.all(np.diff(mean) <= 1e-9)
    tau = schedule.sample(200, make_generator(0))
    assert tau.dtype == torch.int64 and tau.min() >= 500 and tau.max() <= 999
    assert torch.equal(tau, schedule.sample(200, make_generator(0)))
    assert (tau.float() - torch.as_tensor(mean).float()).abs().max() <= 50.5
    with pytest.raises(ValueError, match="t_min"):
        TauSchedule(t_max=400, t_min=500)


def test_zeta_schedule_is_cosine_ramp_from_1_5_to_1():
    zeta = ZetaSchedule().values(101)
    assert zeta[0] == pytest.approx(1.5) and zeta[-1] == pytest.approx(1.0) and zeta[50] == pytest.approx(1.25)
    assert np.all(np.diff(zeta) <= 0)


def test_layer_window_starts_deep_and_widens():
    window = LayerWindow(width=2.0, open_at=0.5)
    start, middle, end = (window.weights(8, f) for f in (0.0, 0.25, 1.0))
    assert start[-1] == 1 and start[:5].sum() == 0
    assert torch.all(end == 1)
    assert torch.all(middle >= start) and torch.all(end >= middle)
    assert torch.all(torch.diff(middle) >= 0)  # deeper tensors never weigh less


def test_clipping_caps_norm_at_zeta_times_prior_norm():
    g_prior = torch.full((1, 1, 4, 4), 0.5)  # norm 2
    big = torch.full((1, 1, 4, 4), 10.0)
    clipped = clip_matching_gradient(big, g_prior, zeta=1.5)
    assert clipped.norm() == pytest.approx(3.0, rel=1e-5)
    assert torch.allclose(clipped / clipped.norm(), big / big.norm())
    small = torch.full((1, 1, 4, 4), 0.1)
    assert torch.equal(clip_matching_gradient(small, g_prior, zeta=1.5), small)
    with pytest.raises(ValueError, match="zeta"):
        clip_matching_gradient(big, g_prior, zeta=0)


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


def test_shipped_prior_loads_offline_and_is_checksummed(tmp_path):
    prior = face_ddpm()
    assert prior.image_size == 32 and prior.channels == 1 and prior.num_timesteps == 1000
    weights = WEIGHTS_DIR / WEIGHTS_FILE
    assert weights.stat().st_size < 10 * 2**20
    x = torch.zeros(1, 1, 32, 32)
    assert prior.unet(x, torch.tensor([10])).sample.shape == x.shape
    with pytest.raises(PriorChecksumError, match="sha256"):
        face_ddpm(expected_sha256="0" * 64)
    corrupted = tmp_path / "prior"
    shutil.copytree(WEIGHTS_DIR, corrupted)
    with open(corrupted / WEIGHTS_FILE, "r+b") as handle:
        handle.seek(-1, 2)
        handle.write(b"\x00" if handle.read(1) != b"\x00" else b"\x01")
    with pytest.raises(PriorChecksumError, match=FACE_DDPM_SHA256):
        face_ddpm(weights_dir=corrupted)
    with pytest.raises(FileNotFoundError, match="train_face_ddpm"):
        face_ddpm(weights_dir=tmp_path / "missing")


def test_lfw_user_rejects_faces_the_prior_was_trained_on():
    images, labels = lfw_user(85, 6)
    assert images.shape == (6, 1, 32, 32) and labels.unique().numel() == 1
    with pytest.raises(ValueError, match="held-out"):
        lfw_user(3, 6)


def _tiny_problem():
    torch.manual_seed(0)
    model = LeNet(num_classes=2, in_channels=1, image_size=32, activation="relu")
    images, labels = lfw_user(85, 4)
    return model, client_gradients(model, images, labels), labels


def test_diffusion_attack_lowers_matching_loss_end_to_end():
    model, target, labels = _tiny_problem()
    prior = face_ddpm()
    result = user_level_inversion(model, target, labels, prior, batch_size=4, steps=20, t_star=5, record_every=10,
                                  lr=0.1, seed=0)
    distance = result.history["gradient_distance"]
    assert result.images.shape == (1, 1, 32, 32) and 0 <= result.images.min() and result.images.max() <= 1
    assert np.mean(distance[-5:]) < np.mean(distance[:5])
    assert [i for i, _ in result.snapshots] == [0, 10, 20]
    assert all(s <= 1 for s in result.history["clip_scale"])
    with pytest.raises(ValueError, match="labels"):
        user_level_inversion(model, target, labels[:2], prior, batch_size=4, steps=2)


def test_user_level_inverting_gradients_lowers_matching_loss():
    model, target, labels = _tiny_problem()
    result = user_level_inverting_gradients(model, target, labels, (1, 32, 32), batch_size=4, steps=20)
    distance = result.history["gradient_distance"]
    assert np.mean(distance[-5:]) < np.mean(distance[:5])


def test_face_detection_rate_separates_faces_from_noise():
    from gitutor.data import lfw_faces

    assert face_detection_rate(lfw_faces(32)[:20]) >= 0.9
    assert face_detection_rate(torch.rand(10, 1, 32, 32, generator=make_generator(0))) == 0.0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        face_detection_rate(torch.full((1, 1, 32, 32), 2.0))
