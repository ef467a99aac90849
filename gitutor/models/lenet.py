"""The LeNet of the DLG paper's public code (Zhu et al., NeurIPS 2019, §4.1 and its repository).

Three 5×5 convolutions of 12 channels with strides 2, 2, 1 and padding 2, each followed by a
Sigmoid, then one fully connected layer to the classes. Sigmoid (not ReLU) keeps the network twice
differentiable everywhere, which DLG's second-order optimisation needs (DLG §3).
"""

from __future__ import annotations

import torch
from torch import nn

from gitutor.checks import check_sizes

ACTIVATIONS = {"sigmoid": nn.Sigmoid, "relu": nn.ReLU, "tanh": nn.Tanh}


class LeNet(nn.Module):
    """DLG LeNet: conv(12, 5×5, s2) → conv(12, s2) → conv(12, s1) → FC.

    Args:
        num_classes: output classes (100 for CIFAR-100 as in DLG, 10 for digits).
        in_channels: 3 for colour, 1 for grey.
        image_size: input side H = W in pixels; the FC input is 12 · ⌈⌈H/2⌉/2⌉² (768 at 32).
        activation: ``"sigmoid"`` (DLG), ``"relu"`` or ``"tanh"``.
        fc_bias: False gives the bias-free last layer z = W h needed by the λ recovery of
            Wang et al. (ICLR 2024, Eq. 2).

    Input ``(B, in_channels, image_size, image_size)``; output logits ``(B, num_classes)``.
    ``self.fc`` is the last linear layer.

    Raises:
        ValueError: for an unknown activation or non-positive sizes.
        TypeError: naming a size that is not an int (``image_size=32.0``).
    """

    def __init__(
        self,
        num_classes: int = 100,
        in_channels: int = 3,
        image_size: int = 32,
        activation: str = "sigmoid",
        fc_bias: bool = True,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}"
            )
        check_sizes(
            num_classes=num_classes, in_channels=in_channels, image_size=image_size
        )
        act = ACTIVATIONS[activation]
        self.image_size = image_size
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, 12, kernel_size=5, padding=2, stride=2),
            act(),
            nn.Conv2d(12, 12, kernel_size=5, padding=2, stride=2),
            act(),
            nn.Conv2d(12, 12, kernel_size=5, padding=2, stride=1),
            act(),
        )
        side = -(-(-(-image_size // 2)) // 2)  # ⌈⌈H/2⌉/2⌉
        self.fc = nn.Linear(12 * side * side, num_classes, bias=fc_bias)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The input of the last layer, ``(B, 12·side²)``."""
        return self.body(x).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.image_size or x.shape[-2] != self.image_size:
            raise ValueError(
                f"LeNet built for {self.image_size}×{self.image_size} inputs, got {tuple(x.shape)}"
            )
        return self.fc(self.features(x))
