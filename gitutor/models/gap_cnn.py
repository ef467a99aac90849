"""A small ReLU CNN with a global-average-pooling head: the quick stand-in for ResNet-18.

Li et al. (2023, §3) attack an untrained ResNet-18, whose last layer sees only channel averages
after global average pooling, so the last layer's gradient carries no spatial layout. A LeNet with
a flattened feature map hands that layout to the attacker and makes user-level inversion easy
without any prior; this three-convolution network keeps ResNet-18's pooling head at a CPU cost of
milliseconds.
"""

from __future__ import annotations

from torch import nn

from gitutor.checks import check_sizes


class GapCNN(nn.Sequential):
    """conv3×3(C→w) → ReLU → conv3×3(w→2w, s2) → ReLU → conv3×3(2w→4w, s2) → ReLU → GAP → FC.

    Args:
        num_classes: outputs of the last linear layer (``self.fc``).
        in_channels: image channels.
        width: w, channels of the first convolution.

    Input ``(B, in_channels, H, W)`` of any size; output logits ``(B, num_classes)``.

    Raises:
        ValueError: for non-positive sizes.
    """

    def __init__(self, num_classes: int = 2, in_channels: int = 1, width: int = 16):
        check_sizes(num_classes=num_classes, in_channels=in_channels, width=width)
        super().__init__(
            nn.Conv2d(in_channels, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(2 * width, 4 * width, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(4 * width, num_classes),
        )

    @property
    def fc(self) -> nn.Linear:
        """The last linear layer."""
        return self[-1]
