"""The CIFAR networks of chapter 04's setting study: ResNet-18 of any width, ResNet-20(-4)."""
import pytest
import torch

from gitutor.models import CifarResNet18, cifar_resnet18, resnet20


def test_cifar_resnet18_keeps_the_resolution_in_its_first_stage_and_scales_with_width():
    model = cifar_resnet18(10, width=64).eval()
    assert sum(p.numel() for p in model.parameters()) == 11_173_962  # the usual CIFAR ResNet-18
    features = model.bn1(model.conv1(torch.rand(1, 3, 32, 32)))
    assert features.shape == (1, 64, 32, 32)  # 3×3 stem of stride 1, no max-pool
    assert model(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    half = cifar_resnet18(10, width=32)
    ratio = sum(p.numel() for p in model.parameters()) / sum(p.numel() for p in half.parameters())
    assert ratio == pytest.approx(4, rel=0.01)  # convolutions scale with width²
    assert len(list(model.parameters())) == 62


def test_cifar_resnet18_is_seeded_and_refuses_bad_sizes():
    a, b, c = cifar_resnet18(10, 8, seed=1), cifar_resnet18(10, 8, seed=1), cifar_resnet18(10, 8, seed=2)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.conv1.weight, c.conv1.weight)
    for bad in (dict(width=0), dict(width=2.5), dict(num_classes=0), dict(in_channels=True)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            CifarResNet18(**bad)
    with pytest.raises(ValueError, match="B, C, H, W"):
        a(torch.rand(3, 32, 32))


def test_resnet20_width_gives_resnet20_4_and_leaves_the_default_unchanged():
    assert sum(p.numel() for p in resnet20(10).parameters()) == 269_722
    wide = resnet20(10, width=64)
    assert wide.fc.in_features == 256 and wide(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(ValueError, match="width"):
        resnet20(10, width=0)
