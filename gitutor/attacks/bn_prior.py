"""R_BN: the BatchNorm-statistics image prior of DeepInversion (Yin et al., CVPR 2020).

Ye et al. (AAAI 2024) use it as the second image prior of stepwise GradInversion (Eq. 11):

    R_BN(x') = Σ_l ‖μ_l(x') − μ̄_l‖₂ + Σ_l ‖σ_l²(x') − σ̄_l²‖₂,

where μ_l(x'), σ_l²(x') are the per-channel batch mean and (biased) variance of the input of the
l-th BatchNorm layer when the model sees the candidate batch x', and μ̄_l, σ̄_l² are that layer's
running statistics (ImageNet statistics of a pretrained model, or statistics calibrated on
auxiliary images with :func:`gitutor.models.calibrate_batchnorm`).

The statistics are read by forward hooks, so R_BN comes for free from the forward pass that also
produces the candidate gradients.
"""

from __future__ import annotations

import torch
from torch import nn

from gitutor.checks import check_layout, input_channels


def _batchnorm_layers(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    layers = [
        m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
    ]
    if not layers:
        raise ValueError(
            "R_BN needs a model with BatchNorm layers; this model has none"
        )
    if any(m.running_mean is None or m.running_var is None for m in layers):
        raise ValueError(
            "R_BN needs running statistics; build the BatchNorm layers with "
            "track_running_stats=True (and calibrate them, see calibrate_batchnorm)"
        )
    return layers


def _layer_term(
    layer: nn.modules.batchnorm._BatchNorm, features: torch.Tensor
) -> torch.Tensor:
    """‖μ(features) − μ̄‖₂ + ‖σ²(features) − σ̄²‖₂ for one BatchNorm input ``(B, C, ...)``."""
    flat = features.transpose(0, 1).reshape(features.shape[1], -1)
    mean = flat.mean(dim=1)
    var = flat.var(dim=1, unbiased=False)
    return torch.linalg.vector_norm(
        mean - layer.running_mean
    ) + torch.linalg.vector_norm(var - layer.running_var)


class BatchNormPrior:
    """Forward hooks that compute R_BN (Ye et al. Eq. 11; Yin et al. 2020 Eq. 4) on every forward.

    Usage::

        with BatchNormPrior(model) as prior:
            logits = model(x)        # x: (B, C, H, W)
            r_bn = prior.value()     # scalar tensor, differentiable w.r.t. x

    Works in train and eval mode: the hooks read the batch statistics of each BatchNorm input
    themselves, whatever the layer normalises with. Unit: same as the features (no averaging over
    layers, as in Eq. 11).

    Args:
        model: the network whose BatchNorm layers are hooked.
        layer_weights: multipliers of the terms of the first ``len(layer_weights)`` BatchNorm layers,
            in ``model.modules()`` order; the others keep weight 1. Default ``()``: Eq. 11's plain
            sum (paper). The authors' code uses ``(1.3, 3.0)`` (breaching ``DeepInversion``,
            regularizers.py:266–269, ``first_bn_multiplier``/``second_bn_multiplier`` of
            ``our_res34_pretrained.yaml``): on ResNet34 the stem's BatchNorm and that of
            ``layer1.0.bn1``.

    Raises:
        ValueError: if the model has no BatchNorm layer, a layer keeps no running statistics, a
            weight is negative or not finite, or there are more weights than BatchNorm layers.
    """

    def __init__(self, model: nn.Module, layer_weights: tuple[float, ...] = ()) -> None:
        layers = _batchnorm_layers(model)
        weights = tuple(float(w) for w in layer_weights)
        if len(weights) > len(layers) or not all(
            torch.isfinite(torch.tensor(w)) and w >= 0 for w in weights
        ):
            raise ValueError(
                f"layer_weights must be at most {len(layers)} finite numbers ≥ 0, got {layer_weights!r}"
            )
        self._weights = {id(layer): w for layer, w in zip(layers, weights)}
        self._terms: list[torch.Tensor] = []
        self._handles = [layer.register_forward_hook(self._hook) for layer in layers]

    def _hook(
        self, layer: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor
    ) -> None:
        term = _layer_term(layer, inputs[0])
        weight = self._weights.get(id(layer))
        self._terms.append(term if weight is None else term * weight)

    def reset(self) -> None:
        """Forget the terms recorded so far (done automatically by :meth:`value`)."""
        self._terms = []

    def value(self) -> torch.Tensor:
        """R_BN of the forward passes since the last call (normally exactly one), then reset.

        Raises:
            RuntimeError: if no forward pass ran through the model since the last call.
        """
        if not self._terms:
            raise RuntimeError(
                "no forward pass recorded: call model(x) inside the BatchNormPrior first"
            )
        total = torch.stack(self._terms).sum()
        self.reset()
        return total

    def remove(self) -> None:
        """Unregister the hooks; the model behaves as before."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __enter__(self) -> "BatchNormPrior":
        return self

    def __exit__(self, *exc_info) -> None:
        self.remove()


def bn_statistics_loss(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """R_BN of ``images`` ``(B, C, H, W)`` under ``model`` (Ye et al. Eq. 11), as a scalar tensor.

    One forward pass of ``model`` (in its current train/eval mode) with temporary hooks.

    Raises:
        ValueError: if ``images`` is not ``(B, C, H, W)`` with the model's input channels (e.g.
            channels-last; :func:`gitutor.checks.check_layout`), or the model has no BatchNorm with
            running statistics.
    """
    check_layout(images.shape, "images", channels=input_channels(model))
    with BatchNormPrior(model) as prior:
        model(images)
        return prior.value()
