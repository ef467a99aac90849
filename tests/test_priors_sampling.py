"""Tests for DDPM noising, denoising and sampling through diffusers (gitutor.priors.sampling)."""
from __future__ import annotations

import pytest
import torch

from gitutor.priors import face_ddpm
from gitutor.priors.sampling import add_noise, ddpm_denoise, sample_prior
from gitutor.seeding import make_generator


@pytest.fixture(scope="module")
def prior():
    return face_ddpm()


def test_add_noise_is_eq_9(prior):
    x0 = torch.rand(2, 1, 32, 32, generator=make_generator(0)) * 2 - 1
    noise = torch.randn(x0.shape, generator=make_generator(1))
    a_bar = prior.scheduler.alphas_cumprod[300]
    assert torch.allclose(add_noise(prior, x0, noise, 300), a_bar.sqrt() * x0 + (1 - a_bar).sqrt() * noise, atol=1e-6)
    with pytest.raises(ValueError, match="t must"):
        add_noise(prior, x0, noise, 1000)
    with pytest.raises(ValueError, match="noise"):
        add_noise(prior, x0, noise[:1], 3)


def test_sample_prior_is_seeded_in_range_and_rejects_bad_counts(prior):
    a = sample_prior(prior, 2, seed=3, num_inference_steps=5)
    assert a.shape == (2, 1, 32, 32) and a.min() >= 0 and a.max() <= 1
    assert torch.equal(a, sample_prior(prior, 2, seed=3, num_inference_steps=5))
    assert not torch.equal(a, sample_prior(prior, 2, seed=4, num_inference_steps=5))
    # the pipeline's bar over the timesteps changes no sample
    assert torch.equal(a, sample_prior(prior, 2, seed=3, num_inference_steps=5, progress=True))
    with pytest.raises(ValueError, match="n must"):
        sample_prior(prior, 0)
    with pytest.raises(ValueError, match="num_inference_steps"):
        sample_prior(prior, 1, num_inference_steps=0)
    with pytest.raises(ValueError, match="num_inference_steps"):
        sample_prior(prior, 1, num_inference_steps=1001)


def test_sampling_leaves_the_attack_scheduler_untouched_and_denoising_cleans(prior):
    sample_prior(prior, 1, num_inference_steps=4)
    assert prior.scheduler.num_inference_steps is None  # the T-step grid the attack uses
    face = torch.zeros(1, 1, 32, 32)
    noisy = face + 0.3 * torch.randn(face.shape, generator=make_generator(0))
    assert torch.equal(ddpm_denoise(prior, noisy, 0, make_generator(0)), noisy)
    cleaned = ddpm_denoise(prior, noisy, 20, make_generator(0))
    assert cleaned.shape == noisy.shape and torch.isfinite(cleaned).all()
    with pytest.raises(ValueError, match="t_star"):
        ddpm_denoise(prior, noisy, 1000, make_generator(0))
