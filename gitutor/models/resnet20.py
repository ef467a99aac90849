"""ResNet-20 for 32×32 images (He et al., CVPR 2016, §4.2), the larger FL model of Learning To Invert.

Three stages of n = 3 basic blocks (two 3×3 convolutions with BatchNorm and ReLU) with 16, 32 and
64 channels, 6n + 2 = 20 weighted layers, global average pooling and one linear layer. Shortcuts
are "option A" (He et al. §4.2): identity, and where a stage halves the resolution and doubles the
channels, the shortcut subsamples by 2 and pads the new channels with zeros — no extra parameters,
so the model has about 0.27 M parameters (the 270 K of Wu et al. 2022, §4.1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gitutor.checks import check_sizes
from gitutor.seeding import make_generator


class _BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(
            in_channels, out_channels, 3, stride=stride, padding=1, bias=False
        )
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(
            out_channels, out_channels, 3, stride=1, padding=1, bias=False
        )
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.pad = out_channels - in_channels
        self.stride = stride

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        """Option A: subsample by the stride and zero-pad the extra channels (parameter-free)."""
        if self.stride == 1 and self.pad == 0:
            return x
        x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet20(nn.Module):
    """CIFAR ResNet-20 with option-A shortcuts; input ``(B, in_channels, H, W)``, output ``(B, num_classes)``.

    ``width`` is the first stage's channels (16 in He et al.; 64 gives the ResNet-20-4 of Geiping
    et al., NeurIPS 2020, §4); the stages have ``width``, 2·``width``, 4·``width`` channels.
    ``self.fc`` is the last linear layer. Weights are Kaiming-normal drawn from a generator seeded
    with ``seed``; the fc bias starts at 0.

    Raises:
        TypeError: naming ``num_classes``, ``in_channels`` or ``width`` when it is not an int (8.0).
        ValueError: for a non-positive ``num_classes``, ``in_channels`` or ``width``.
    """

    def __init__(
        self,
        num_classes: int = 10,
        in_channels: int = 3,
        seed: int = 0,
        width: int = 16,
    ):
        super().__init__()
        check_sizes(num_classes=num_classes, in_channels=in_channels, width=width)
        self.conv = nn.Conv2d(in_channels, width, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(width)
        blocks, channels = [], width
        for planes, stride in ((width, 1), (2 * width, 2), (4 * width, 2)):
            for index in range(3):
                blocks.append(
                    _BasicBlock(channels, planes, stride if index == 0 else 1)
                )
                channels = planes
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(channels, num_classes)
        generator = make_generator(seed)
        for module in self.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(module.weight, generator=generator)
        nn.init.zeros_(self.fc.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:
            raise ValueError(
                f"ResNet20 expects (B, C, H, W) images, got shape {tuple(x.shape)}"
            )
        out = self.blocks(F.relu(self.bn(self.conv(x))))
        return self.fc(out.mean(dim=(2, 3)))


def resnet20(
    num_classes: int = 10, in_channels: int = 3, seed: int = 0, width: int = 16
) -> ResNet20:
    """A randomly initialised CIFAR ResNet-20 (He et al. 2016, §4.2, option-A shortcuts), as the
    untrained ResNet20 FL model of Wu et al. (2022, §4.1); the same ``seed`` gives the same weights;
    ``width`` as :class:`ResNet20` (64: ResNet-20-4).

    Raises:
        ValueError: for non-positive sizes.
    """
    return ResNet20(
        num_classes=num_classes, in_channels=in_channels, seed=seed, width=width
    )
