"""ResNet-18 for 32×32 images with a width parameter: the network on which gradient inversion
recovers photographs (Geiping et al., NeurIPS 2020, §4; ``breaching``'s CIFAR ResNet-18).

He et al.'s (CVPR 2016) ResNet-18 — four stages of two basic blocks, ``width``, 2·``width``,
4·``width``, 8·``width`` channels — with the CIFAR stem: one 3×3 convolution of stride 1 and no
max-pool, so a 32 px image keeps 32×32 features in the first stage. ``width = 64`` is the usual
CIFAR ResNet-18 (11.2 M parameters); ``width = 32`` has a quarter of its parameters and costs
about a third per attack iteration. The blocks are torchvision's ``BasicBlock``.
"""

from __future__ import annotations

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock

from gitutor.seeding import make_generator


class CifarResNet18(nn.Module):
    """CIFAR ResNet-18; input ``(B, in_channels, H, W)`` (H, W ≥ 8), output ``(B, num_classes)``.

    ``self.fc`` is the last linear layer. Convolutions are Kaiming-normal (fan-out, as torchvision)
    and the linear layer Kaiming-normal too, drawn from a generator seeded with ``seed``; the
    BatchNorm layers keep torchvision's defaults (weight 1, bias 0, running mean 0, variance 1).

    Raises:
        ValueError: if ``width``, ``num_classes`` or ``in_channels`` is not a positive int.
    """

    def __init__(
        self,
        num_classes: int = 10,
        width: int = 64,
        in_channels: int = 3,
        seed: int = 0,
    ):
        super().__init__()
        for name, value in (
            ("num_classes", num_classes),
            ("width", width),
            ("in_channels", in_channels),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.conv1 = nn.Conv2d(in_channels, width, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        stages, channels = [], width
        for k, stride in enumerate((1, 2, 2, 2)):
            planes = width * 2**k
            downsample = None
            if stride != 1 or channels != planes:
                downsample = nn.Sequential(
                    nn.Conv2d(channels, planes, 1, stride=stride, bias=False),
                    nn.BatchNorm2d(planes),
                )
            stages.append(
                nn.Sequential(
                    BasicBlock(channels, planes, stride, downsample),
                    BasicBlock(planes, planes),
                )
            )
            channels = planes
        self.layers = nn.Sequential(*stages)
        self.fc = nn.Linear(channels, num_classes)
        generator = make_generator(seed)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(
                    module.weight,
                    mode="fan_out",
                    nonlinearity="relu",
                    generator=generator,
                )
            elif isinstance(module, nn.Linear):
                nn.init.kaiming_normal_(module.weight, generator=generator)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:
            raise ValueError(
                f"CifarResNet18 expects (B, C, H, W) images, got shape {tuple(x.shape)}"
            )
        out = self.layers(torch.relu(self.bn1(self.conv1(x))))
        return self.fc(out.mean(dim=(2, 3)))


def cifar_resnet18(
    num_classes: int = 10, width: int = 64, seed: int = 0
) -> CifarResNet18:
    """A randomly initialised :class:`CifarResNet18`; the same ``seed`` gives the same weights.

    Raises:
        ValueError: as :class:`CifarResNet18`.
    """
    return CifarResNet18(num_classes=num_classes, width=width, seed=seed)
