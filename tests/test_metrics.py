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
    # An unclamped reconstruction (DLG's dummy image) overshooting [0, 1] is clipped to the data
    # range before PSNR; a truth outside [0, 1] is refused instead (tests/test_bad_inputs.py).
    truth = torch.zeros(1, 1, 8, 8)
    truth[..., 4:] = 1.0
    overshoot = torch.where(truth > 0.5, 1.5, -0.5)
    assert float(psnr(overshoot, truth)[0]) == math.inf
    assert float(psnr(torch.full_like(truth, 1.5), torch.ones_like(truth))[0]) == math.inf
    # all values ≥ 0 and some above 2 reads as 0–255 pixels: refused, not clipped
    with pytest.raises(ValueError, match=r"reconstruction images .*\[0, 1\] scale.*divide by 255"):
        psnr(torch.full_like(truth, 3.0), torch.ones_like(truth))


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


def test_score_batch_matches_each_batch_and_subsumes_the_scorers():
    from gitutor.metrics import hungarian_assignment, score_batch

    truth = torch.rand(2, 3, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    shuffled = truth[:, [2, 0, 1]]
    matched = score_batch(shuffled, truth)
    assert matched["mse"] == 0 and matched["psnr"] == float("inf") and matched["ssim"] == pytest.approx(1.0)
    unmatched = score_batch(shuffled, truth, match=False)
    assert unmatched["mse"] > 0.01 and unmatched["ssim"] < 0.5
    noisy = (truth[0] + 0.1).clamp(0, 1)
    single = score_batch(noisy, truth[0])
    assert single["mse"] == pytest.approx(float(mse(noisy, truth[0]).mean()))
    assert single["psnr"] == pytest.approx(float(psnr(noisy, truth[0]).mean()))
    assert "lpips" in score_batch(noisy, truth[0], lpips=True)
    cost = torch.tensor([[[5.0, 1.0], [1.0, 5.0]], [[0.0, 9.0], [9.0, 0.0]]])
    assert hungarian_assignment(cost).tolist() == [[1, 0], [0, 1]]
    with pytest.raises(ValueError, match="cost"):
        hungarian_assignment(torch.zeros(2, 3))
    with pytest.raises(TypeError, match="cost"):
        hungarian_assignment([[0.0, 1.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match=r"\(N, B, C, H, W\)"):
        score_batch(truth, truth[:, :2])


def test_metrics_reject_tiny_and_non_finite_images():
    with pytest.raises(ValueError, match="3×3"):
        ssim(torch.rand(1, 1, 2, 2), torch.rand(1, 1, 2, 2))
    nan = torch.full((1, 1, 4, 4), float("nan"))
    with pytest.raises(ValueError, match="reconstruction images contain NaN"):
        psnr(nan, torch.rand(1, 1, 4, 4))
    with pytest.raises(TypeError, match=r"truth images must be a float tensor.*float\(\) / 255"):
        mse(torch.rand(1, 1, 4, 4), torch.ones(1, 1, 4, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        label_accuracy(torch.tensor([1.0]), torch.tensor([1]))
