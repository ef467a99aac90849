"""A threat-model case: what the client holds and what the honest-but-curious server observes.

Every chapter attacks the same situation with different details: a client holds a model, a private
batch and its labels and sends an update; the server knows the model and receives the update, and
depending on the paper also knows the labels, the batch size, BatchNorm statistics or the client's
optimiser settings. :class:`Case` keeps the two sides apart (breaching's user/server split, without
its configuration machinery): attacks read :attr:`Case.server_view` and only the scoring looks at
:attr:`Case.inputs` and :attr:`Case.labels`. One builder per chapter setting makes a Case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import torch
from torch import nn

from gitutor.checks import check_images, input_channels
from gitutor.federated.admm import fedadmm_client_update, pseudo_gradient
from gitutor.federated.client import client_gradients, observed_gradient
from gitutor.federated.defenses import Defense, apply_defense
from gitutor.models.buffers import preserved_buffers


@dataclass(frozen=True)
class Case:
    """One client's round as both sides see it.

    Client side (the truth, for scoring only):
        model: the shared model (the server knows it too).
        inputs: ``(B, ...)`` the private batch (images, or penultimate features for a last-layer case).
        labels: ``(B,)`` int64 or ``(B, K)`` soft labels of the private batch.
    Server side:
        update: the list the server receives, aligned with ``model.parameters()``.
        labels_known: whether the server knows the labels (otherwise it must infer them).
        bn_statistics: per BatchNorm layer, the ``(mean, var)`` of its input over the batch, when the
            client shares them; else None.
        public: anything else the server knows (e.g. ``batch_size``, ``defense``, ``rho``, ``lr``).
    """

    model: nn.Module
    inputs: torch.Tensor
    labels: torch.Tensor
    update: list[torch.Tensor]
    labels_known: bool = False
    bn_statistics: list[tuple[torch.Tensor, torch.Tensor]] | None = None
    public: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(
            self,
            "public",
            MappingProxyType(dict(self.public, batch_size=int(self.inputs.shape[0]))),
        )

    @property
    def server_view(self) -> dict[str, object]:
        """What an attack may use: model, update, labels (or None), BN statistics and the public facts."""
        return {
            "model": self.model,
            "update": self.update,
            "labels": self.labels if self.labels_known else None,
            "bn_statistics": self.bn_statistics,
            **self.public,
        }


def _check_private_images(model: nn.Module, images: torch.Tensor) -> None:
    """The client's private batch: a float ``(B, C, H, W)`` tensor in [0, 1] with the model's channels.

    Attacks search the image box [0, 1] and the metrics compare with a truth in [0, 1], so a batch in
    0–255 or normalised with a mean and std would make every number wrong without an error.

    Raises:
        TypeError / ValueError: as :func:`gitutor.checks.check_images`, naming ``images``.
    """
    check_images(images, "images", channels=input_channels(model))


def batchnorm_statistics(
    model: nn.Module, inputs: torch.Tensor
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per BatchNorm layer of ``model``, the batch mean and biased variance of its input (no gradients).

    Args:
        inputs: ``(B, C, H, W)`` images (channels first, as the model's first convolution takes).

    Raises:
        TypeError / ValueError: for inputs that are not finite float ``(B, C, H, W)`` images
            (:func:`gitutor.checks.check_images`; the range is not checked).
    """
    check_images(inputs, "inputs", channels=input_channels(model), in_range=False)
    layers = [
        m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
    ]
    captured = []
    hooks = [
        layer.register_forward_pre_hook(
            lambda m, args: captured.append(args[0].detach())
        )
        for layer in layers
    ]
    try:
        with preserved_buffers(model), torch.no_grad():
            model(inputs)
    finally:
        for hook in hooks:
            hook.remove()
    dims = [[d for d in range(x.dim()) if d != 1] for x in captured]
    return [
        (x.mean(dim=d), x.var(dim=d, unbiased=False)) for x, d in zip(captured, dims)
    ]


def gradient_case(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    labels_known: bool = False,
    defense: Defense | None = None,
    share_bn_statistics: bool = False,
) -> Case:
    """One client sends its batch-mean gradient, optionally defended (chapters 01, 02, 04; DLG Eq. 1).

    Args:
        images: the private batch ``(B, C, H, W)`` in [0, 1]; labels: ``(B,)`` int64 or soft labels.

    Raises:
        ValueError / TypeError: for images not ``(B, C, H, W)`` in [0, 1]
            (:func:`gitutor.checks.check_images`), or as :func:`~gitutor.federated.client_gradients`
            and :func:`~gitutor.federated.apply_defense`.
    """
    _check_private_images(model, images)
    update = apply_defense(defense, client_gradients(model, images, labels))
    stats = batchnorm_statistics(model, images) if share_bn_statistics else None
    public = {} if defense is None else {"defense": defense}
    return Case(model, images, labels, update, labels_known, stats, public)


def last_layer_case(
    fc: nn.Linear, features: torch.Tensor, labels: torch.Tensor
) -> Case:
    """The server reads only the last layer's gradient (∇W^FC, ∇b^FC), which depends on the batch only
    through its penultimate features (chapter 03; Ye et al. 2024, Eq. 2–3). Labels unknown, batch size
    known. In evaluation mode this equals the FC part of the whole model's gradient.

    Raises:
        TypeError: if ``fc`` is not an ``nn.Linear``; as :func:`~gitutor.federated.client_gradients`.
    """
    if not isinstance(fc, nn.Linear):
        raise TypeError(
            f"fc must be the model's last nn.Linear layer, got {type(fc).__name__}"
        )
    return Case(fc, features, labels, client_gradients(fc, features, labels))


def defended_clients_case(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    defense: Defense | None,
) -> Case:
    """B clients with one image each defend their gradients; the server sees the mean (chapter 06;
    Wu et al. 2022, §3.1). The server knows the defense and the labels' count, not the labels.

    Raises:
        ValueError / TypeError: for images not ``(B, C, H, W)`` in [0, 1]
            (:func:`gitutor.checks.check_images`), or as :func:`~gitutor.federated.observed_gradient`.
    """
    _check_private_images(model, images)
    return Case(
        model,
        images,
        labels,
        observed_gradient(model, images, labels, defense),
        public={"defense": defense},
    )


def fedadmm_case(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    global_params: Sequence[torch.Tensor],
    dual: Sequence[torch.Tensor],
    rho: float,
    lr: float,
    local_steps: int,
) -> Case:
    """A FedADMM client sends its increment Δ (chapter 07; Algorithm 2 of the DLG report). The server
    knows z, π, ρ, η and E; ``public["pseudo_gradient"]`` is −Δ/η, what DLG-ADMM attacks.

    Raises:
        ValueError / TypeError: for images not ``(B, C, H, W)`` in [0, 1]
            (:func:`gitutor.checks.check_images`), or as :func:`~gitutor.federated.fedadmm_client_update`.
    """
    _check_private_images(model, images)
    update = fedadmm_client_update(
        model,
        images,
        labels,
        global_params,
        dual,
        rho=rho,
        lr=lr,
        local_steps=local_steps,
    ).delta
    return Case(
        model,
        images,
        labels,
        update,
        public={
            "global_params": list(global_params),
            "dual": list(dual),
            "rho": rho,
            "lr": lr,
            "local_steps": local_steps,
            "pseudo_gradient": pseudo_gradient(update, lr),
        },
    )
