"""torchvision ResNets with the options the papers need (random init offline, bias-free fc)."""

from __future__ import annotations

import torch
import torchvision
from torch import nn

from gitutor.checks import check_sizes
from gitutor.errors import OfflineDataError


def resnet18(num_classes: int = 10, fc_bias: bool = True) -> nn.Module:
    """Randomly initialised torchvision ResNet-18 with a ``num_classes``-way ``fc``.

    ``fc_bias=False`` gives the bias-free last layer of Wang et al. (ICLR 2024, Table 2, untrained
    ResNet18). Input ``(B, 3, H, W)`` with H, W ≥ 32; output ``(B, num_classes)``.

    Raises:
        TypeError, ValueError: naming ``num_classes`` when it is not an int ≥ 1.
    """
    check_sizes(num_classes=num_classes)
    model = torchvision.models.resnet18(weights=None, num_classes=num_classes)
    if not fc_bias:
        model.fc = nn.Linear(model.fc.in_features, num_classes, bias=False)
    return model


def resnet34(num_classes: int = 1000, pretrained: bool = False) -> nn.Module:
    """torchvision ResNet-34 (Ye et al., AAAI 2024, §Experiments), random or ImageNet-pretrained.

    Args:
        num_classes: classes of ``fc``; must be 1000 with ``pretrained=True``.
        pretrained: load ``ResNet34_Weights.IMAGENET1K_V1`` from the torch hub cache.

    Raises:
        TypeError, ValueError: naming ``num_classes`` when it is not an int ≥ 1.
        ValueError: if ``pretrained`` and ``num_classes != 1000``.
        OfflineDataError: if the pretrained weights are not in the torch hub cache and cannot be
            downloaded (the message says where to put the file, or to set ``PRETRAINED=False``).
    """
    check_sizes(num_classes=num_classes)
    if not pretrained:
        return torchvision.models.resnet34(weights=None, num_classes=num_classes)
    if num_classes != 1000:
        raise ValueError(
            "pretrained ResNet-34 has 1000 ImageNet classes; set num_classes=1000"
        )
    weights = torchvision.models.ResNet34_Weights.IMAGENET1K_V1
    try:
        return torchvision.models.resnet34(weights=weights)
    except Exception as error:  # URLError / RuntimeError when offline
        raise OfflineDataError(
            f"could not load {weights.url}: download it on a machine with internet into "
            "$TORCH_HOME/hub/checkpoints/ (default ~/.cache/torch/hub/checkpoints/), or run with "
            f"PRETRAINED=False ({error})"
        ) from error


#: ImageNet channel mean and standard deviation that torchvision's pretrained weights expect.
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def imagenet_resnet34(
    num_classes: int = 1000, pretrained: bool = False, seed: int = 0
) -> nn.Sequential:
    """ResNet-34 behind ImageNet normalisation, taking images in [0, 1] (Ye et al., AAAI 2024 setting).

    A random initialisation is drawn from torch's global generator seeded with ``seed`` inside
    ``torch.random.fork_rng``, so the same seed gives the same weights and the global generator is
    left as it was. The last layer is ``model[1].fc`` (found by :func:`gitutor.models.last_linear`).

    Raises:
        ValueError / OfflineDataError: as :func:`resnet34`.
        TypeError: if ``seed`` is not an int.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(
            seed
        )  # torchvision's initialisers draw from the global generator
        network = resnet34(num_classes=num_classes, pretrained=pretrained)
    return nn.Sequential(
        torchvision.transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD), network
    )
