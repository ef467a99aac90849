"""LPIPS with its real ImageNet backbone offline (gitutor.models.lpips_net, gitutor.metrics.lpips_distance): the LPIPS
repository's example images give its README's distances, and nothing is downloaded."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from gitutor.metrics import lpips_distance, lpips_or_none, score_batch
from gitutor.models.lpips_net import lpips_heads_difference, lpips_network

DATA = Path(__file__).parent / "data"


def _image(name: str) -> torch.Tensor:
    """One of richzhang/PerceptualSimilarity's imgs/ex_*.png (BSD-2-Clause), (1, 3, 64, 64) in [0, 1]."""
    from PIL import Image

    with Image.open(DATA / f"lpips_{name}.png") as image:
        return torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.float32) / 255).permute(2, 0, 1)[None]


@pytest.fixture(autouse=True)
def _no_download(monkeypatch):
    """Any attempt to fetch weights (torchvision / torch.hub) fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"download attempted: {args}")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(torch.hub, "download_url_to_file", refuse)


def test_example_images_give_the_readme_distances():
    reference, p0, p1 = _image("ex_ref"), _image("ex_p0"), _image("ex_p1")
    assert float(lpips_distance(p0, reference)) == pytest.approx(0.722, abs=1e-3)
    assert float(lpips_distance(p1, reference)) == pytest.approx(0.138, abs=1e-3)


def test_linear_heads_equal_lpips_own():
    assert lpips_heads_difference(lpips_network("alex"), "alex") == 0.0


def test_lpips_in_tables_is_a_number():
    truth = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    noisy = (truth + 0.2 * torch.randn(truth.shape, generator=torch.Generator().manual_seed(1))).clamp(0, 1)
    assert 0.01 < score_batch(noisy, truth, lpips=True)["lpips"] < 1
    assert float(lpips_or_none(truth, truth).max()) < 1e-6


def test_small_grey_images_are_upsampled_not_refused():
    x = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(2))
    assert lpips_distance(x, x.flip(0)).shape == (3,)


def test_unknown_network():
    with pytest.raises(ValueError, match="alex"):
        lpips_network("squeeze")
