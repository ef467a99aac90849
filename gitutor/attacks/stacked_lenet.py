"""P DLG LeNets as one network, so that P independent gradient-matching problems cost one evaluation.

On a CPU one DLG evaluation of the DLG LeNet (Zhu et al. 2019, §4.1) costs about 3 ms, mostly
interpreter overhead, whatever the image size; P = 10 of them stacked cost about 6 ms at 16×16 and
17 ms at 32×32. The stack keeps the problems independent: problem p's weights only ever see problem
p's image (grouped convolutions, ``groups=P``, and one fully connected matrix per problem), so the
gradient of the summed loss with respect to the stacked weights holds each problem's own gradient.

Stacked parameters are the LeNet's parameters of the P models concatenated along the first axis
(convolutions: ``(P·12, C, 5, 5)``, biases ``(P·12,)``) or stacked (fully connected weight
``(P, K, D)``, bias ``(P, K)``); ``per_problem(t)`` views any of them as ``(P, -1)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from gitutor.models import LeNet

_STRIDES = (2, 2, 1)


def _check(models: Sequence[LeNet]) -> None:
    if not models or not all(isinstance(m, LeNet) for m in models):
        raise ValueError("models must be a non-empty sequence of gitutor.models.LeNet")
    body = models[0].body
    if not isinstance(body[1], torch.nn.Sigmoid) or models[0].fc.bias is None:
        raise ValueError(
            "models must be Sigmoid LeNets with a last-layer bias (the DLG LeNet)"
        )
    shapes = [tuple(p.shape) for p in models[0].parameters()]
    if any([tuple(p.shape) for p in m.parameters()] != shapes for m in models):
        raise ValueError(
            "every model must have the same architecture (classes, channels, image size)"
        )


def stack(tensor_lists: Sequence[Sequence[torch.Tensor]]) -> list[torch.Tensor]:
    """Stack P lists of LeNet-shaped tensors (parameters, gradients, targets; aligned with
    ``LeNet.parameters()``) into the stacked layout of the module docstring.

    Raises:
        ValueError: if the lists do not all hold 8 tensors (3 convolutions and the FC, with biases).
    """
    if not tensor_lists or any(len(t) != 8 for t in tensor_lists):
        raise ValueError(
            "every list must hold the 8 tensors of a DLG LeNet's parameters"
        )
    return [
        torch.cat([t[j] for t in tensor_lists])
        if j < 6
        else torch.stack([t[j] for t in tensor_lists])
        for j in range(8)
    ]


def stacked_parameters(models: Sequence[LeNet]) -> list[torch.Tensor]:
    """The stacked (detached) parameters of ``models``, P DLG LeNets of one architecture.

    Raises:
        ValueError: for anything but Sigmoid LeNets with a last-layer bias, all of one shape.
    """
    _check(models)
    return stack([[p.detach() for p in m.parameters()] for m in models])


def per_problem(tensor: torch.Tensor, count: int) -> torch.Tensor:
    """A stacked tensor viewed as ``(count, -1)``: one row per problem."""
    return tensor.reshape(count, -1)


def forward(params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Logits ``(P, K)`` of P stacked LeNets on ``x`` ``(P, C, H, W)``, one image per problem."""
    count, channels, height, width = x.shape
    h = x.reshape(1, count * channels, height, width)
    for layer, stride in enumerate(_STRIDES):
        h = torch.sigmoid(
            F.conv2d(
                h,
                params[2 * layer],
                params[2 * layer + 1],
                stride=stride,
                padding=2,
                groups=count,
            )
        )
    return torch.einsum("pkd,pd->pk", params[6], h.reshape(count, -1)) + params[7]


def gradients(
    params: Sequence[torch.Tensor],
    x: torch.Tensor,
    labels: torch.Tensor,
    *,
    create_graph: bool = False,
) -> list[torch.Tensor]:
    """Every problem's client gradient (DLG Eq. 1: cross-entropy of one image) in the stacked layout.

    Args:
        params: stacked parameters (:func:`stacked_parameters`), requiring grad.
        x: ``(P, C, H, W)`` one image per problem.
        labels: ``(P,)`` int64 labels or ``(P, K)`` soft labels (rows summing to 1).
        create_graph: keep the graph (attacks differentiate the gradient again).
    """
    logits = forward(params, x)
    log_p = F.log_softmax(logits, dim=-1)
    if labels.dim() == 1:
        loss = -log_p.gather(1, labels[:, None]).sum()
    else:
        loss = -(labels * log_p).sum()
    return list(torch.autograd.grad(loss, params, create_graph=create_graph))
