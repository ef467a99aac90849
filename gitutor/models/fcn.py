"""Bias-free fully connected ReLU network FCN-4 (Wang, Liang & He, ICLR 2024, §4.2 and Table 6).

in → 4096 → 1024 → 256 → C with ReLU after each hidden layer and no bias anywhere. Without biases
the bias attack (Aono et al., 2017) fails, but the λ recovery gives the last-layer feature and the
input follows layer by layer (:func:`gitutor.attacks.invert_fcn`, Eq. 6–7).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from gitutor.checks import check_sizes


class FCN(nn.Module):
    """FCN-4 without biases: flatten → Linear → ReLU → … → Linear(→ C).

    Args:
        num_classes: C.
        image_shape: ``(channels, H, W)`` of the input; the input size is their product
            (3·64·64 = 12288 in the paper, 3·32·32 = 3072 in the quick profile).
        widths: hidden widths, ``(4096, 1024, 256)`` in the paper; smaller for quick runs.

    Input ``(B, *image_shape)``; output logits ``(B, C)``. ``self.hidden`` holds the hidden
    ``nn.Linear`` layers, ``self.fc`` the last one; ``parameters()`` are their weights in order.

    Raises:
        ValueError: for non-positive sizes or an input of the wrong shape.
        TypeError: naming a size (``widths[0]``, ``image_shape[1]``) that is not an int.
    """

    def __init__(
        self,
        num_classes: int = 10,
        image_shape: tuple[int, int, int] = (3, 32, 32),
        widths: tuple[int, ...] = (4096, 1024, 256),
    ):
        super().__init__()
        image_shape = tuple(image_shape)
        check_sizes(
            num_classes=num_classes,
            **{f"image_shape[{i}]": v for i, v in enumerate(image_shape)},
            **{f"widths[{i}]": v for i, v in enumerate(widths)},
        )
        if (
            len(image_shape) != 3
            or min(image_shape) < 1
            or num_classes < 2
            or not widths
            or min(widths) < 1
        ):
            raise ValueError(
                f"need image_shape (C, H, W) > 0, num_classes ≥ 2 and positive widths; got "
                f"{image_shape}, {num_classes}, {widths}"
            )
        self.image_shape = image_shape
        sizes = (math.prod(image_shape), *widths)
        self.hidden = nn.ModuleList(
            nn.Linear(a, b, bias=False) for a, b in zip(sizes[:-1], sizes[1:])
        )
        self.fc = nn.Linear(sizes[-1], num_classes, bias=False)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The input of the last layer, ``(B, widths[-1])``."""
        if tuple(x.shape[1:]) != self.image_shape:
            raise ValueError(
                f"FCN built for inputs (B, {self.image_shape}), got {tuple(x.shape)}"
            )
        h = x.flatten(1)
        for layer in self.hidden:
            h = torch.relu(layer(h))
        return h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))
