import math

import pytest
import torch

from gitutor.metrics import LPIPS_NA, label_accuracy, lpips_or_none, match_batch, mse, psnr, ssim


def test_mse_psnr_known_values():
    x = torch.zeros(2, 3, 8, 8)
    y = torch.full((2, 3, 8, 8), 0.1)
    assert torch.allclose(mse(x, y), torch.full((2,), 0.01))
    assert torch.allclose(psnr(x, y), torch.full((2,), 20.0, dtype=torch.float64))
    assert math.isinf(float(psnr(y, y)[0]))


def test_psnr_clips_reconstructions_to_the_data_range():
    truth = torch.full((1, 1, 8, 8), 1.0)
    assert float(psnr(torch.full_like(truth, 3.0), truth)[0]) == math.inf


def test_ssim_identity_and_noise():
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(ssim(x, x), torch.ones(2, dtype=torch.float64))
    noisy = (x + 0.3 * torch.randn(x.shape, generator=torch.Generator().manual_seed(1))).clamp(0, 1)
    assert float(ssim(noisy, x).max()) < 0.8
    assert ssim(torch.rand(1, 1, 5, 5), torch.rand(1, 1, 5, 5)).shape == (1,)


def test_metric_errors():
    with pytest.raises(ValueError, match="equal shape"):
        mse(torch.rand(1, 3, 8, 8), torch.rand(2, 3, 8, 8))
    with pytest.raises(TypeError):
        psnr([0.0], torch.rand(1, 1, 2, 2))


def test_match_batch_recovers_permutation():
    truth = torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    shuffled = truth[torch.tensor([2, 0, 3, 1])] + 0.01
    assert torch.allclose(match_batch(shuffled, truth), truth + 0.01)


def test_lpips_is_a_number_or_none():
    x = torch.rand(1, 3, 32, 32)
    value = lpips_or_none(x, x)
    assert value is None or float(value[0]) < 1e-3
    assert "n/a" in LPIPS_NA


def test_label_accuracy():
    assert label_accuracy(torch.tensor([1, 2, 3]), torch.tensor([1, 0, 3])) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        label_accuracy(torch.tensor([1]), torch.tensor([1, 2]))
