"""The server unrolls the clients' local steps: matching a FedAvg update, not a gradient.

A FedAvg client (McMahan et al. 2017, Alg. 1, ClientUpdate) runs E epochs of SGD over its data in
mini-batches of size b, in order, from the global model w_0, and sends Δ = w_K − w_0 after
K = E·⌈N/b⌉ steps. Reading −Δ/(ηK) as one gradient at w_0 is exact only for K = 1. The server chose
η, E and b itself, so it can simulate the client's K steps on a candidate batch x' and compare the
simulated update with the one it received (Geiping et al. 2020, §5, "multiple local updates"):

    Δ(x') = w_K(x') − w_0,   w_{k+1} = w_k − η ∇_w ℓ(F(x'_{B_k}; w_k), y_{B_k}),

differentiable in x' through every step. :func:`simulated_update` is that simulation;
:func:`update_distance` the cosine distance (Geiping et al. Eq. 4's matching term) between Δ(x') and
the observed Δ; :func:`rounds_distance` the mean of that distance over several rounds, each at its
own round's global model w_0^{(r)} — the adversary that watches R rounds of a client whose data do
not change. Each plugs into :func:`gitutor.attacks.inverting_gradients` as ``matching_distance``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.func import functional_call

from gitutor.attacks.objectives import cosine_gradient_distance
from gitutor.checks import check_flag, check_int, check_real
from gitutor.federated.client import check_parameter_list, cross_entropy


def check_schedule(lr, epochs, batch_size, count: int) -> tuple[float, int, int]:
    """``(lr, epochs, batch_size)`` after checking them against a batch of ``count`` images
    (:func:`gitutor.checks.check_real` / :func:`~gitutor.checks.check_int`).

    Raises:
        TypeError: naming ``lr``, ``epochs`` or ``batch_size`` when not a real number / an int.
        ValueError: naming it when ``lr`` is not finite and > 0, ``epochs < 1`` or ``batch_size`` is
            not in [1, count].
    """
    return (
        check_real(lr, "lr", low=0.0, low_open=True),
        check_int(epochs, "epochs", low=1),
        check_int(batch_size, "batch_size", low=1, high=count),
    )


def simulated_update(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    lr: float,
    epochs: int,
    batch_size: int,
    start: Sequence[torch.Tensor] | None = None,
    create_graph: bool = True,
) -> list[torch.Tensor]:
    """Δ = w_K − w_0 of the client's local SGD (the module docstring) on ``(images, labels)``.

    The same steps as :func:`gitutor.federated.flower.local_training` (plain SGD, mini-batches in
    order, the batch-mean cross-entropy), evaluated through ``torch.func.functional_call`` so that
    Δ is differentiable in ``images``; the model's parameters and buffers are left as they were.

    Args:
        model: the network, in the mode the client trains it (BatchNorm: its running statistics are copied, the model's own left alone).
        images: ``(N, C, H, W)`` the client's images (or a candidate x').
        labels: ``(N,)`` int64 labels or ``(N, classes)`` soft labels.
        lr: η, the client's learning rate.
        epochs: E, passes over the N images.
        batch_size: b, images per step (N: one full-batch step per epoch).
        start: w_0, aligned with ``model.parameters()`` (default: the model's parameters).
        create_graph: keep the graph through the K steps (what an attack needs).

    Returns:
        Δ, one tensor per parameter.

    Raises:
        TypeError/ValueError: as :func:`check_schedule`; for ``images`` that are not a finite
            ``(N, C, H, W)`` float tensor, a ``create_graph`` that is not a bool, or a ``start`` that does
            not match the model.
    """
    check_images(images)
    create_graph = check_flag(create_graph, "create_graph")
    lr, epochs, batch_size = check_schedule(lr, epochs, batch_size, images.shape[0])
    w0 = [
        t.detach()
        for t in (
            model.parameters()
            if start is None
            else check_parameter_list(model, start, "start")
        )
    ]
    w = local_steps(model, w0, images, labels, lr, epochs, batch_size)
    delta = [wi - w0i for wi, w0i in zip(w, w0)]
    return delta if create_graph else [d.detach() for d in delta]


def local_steps(
    model, w0, images, labels, lr, epochs, batch_size
) -> list[torch.Tensor]:
    """w_K of the client's K = E·⌈N/b⌉ SGD steps from ``w0`` (checked arguments; the module docstring),
    each step's gradient by ``torch.func.grad`` so that w_K is differentiable in ``images`` and ``w0``
    through every step, and the function vectorises over a stack of starts (``torch.func.vmap``,
    :func:`rounds_distance`). A model's buffers (BatchNorm's running statistics) enter as copies that the
    steps update as the client's training does; the model's own are not touched."""
    names = [name for name, _ in model.named_parameters()]
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}

    def loss(params, state, x, y):
        return cross_entropy(functional_call(model, {**params, **state}, (x,)), y)

    step = torch.func.grad(loss)
    w = dict(zip(names, w0))
    for _ in range(epochs):
        for first in range(0, images.shape[0], batch_size):
            batch = slice(first, first + batch_size)
            grads = step(w, buffers, images[batch], labels[batch])
            w = {name: w[name] - lr * grads[name] for name in names}
    return [w[name] for name in names]


def update_distance(
    model: nn.Module,
    observed: Sequence[torch.Tensor],
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    lr: float,
    epochs: int,
    batch_size: int,
    start: Sequence[torch.Tensor] | None = None,
) -> torch.Tensor:
    """1 − cos(Δ(x'), Δ) over all parameters (Geiping et al. 2020, Eq. 4's matching term, with the
    simulated update of :func:`simulated_update` in place of the gradient).

    Args:
        observed: Δ, the update the server received, one tensor per parameter.
        images, labels: the candidate x' ``(N, C, H, W)`` and its labels ``(N,)`` (or soft ``(N, classes)``).
        lr, epochs, batch_size, start: the client's round, as in :func:`simulated_update`.

    Returns:
        A scalar tensor in [0, 2] on the graph of ``images``.

    Raises:
        ValueError: if ``observed`` is all zeros (a cosine to it is undefined: no attack can match it)
            or does not match the model, and as :func:`simulated_update`.
    """
    observed = check_parameter_list(model, observed, "observed")
    if all(not bool(t.any()) for t in observed):
        raise ValueError(
            "observed is an all-zero update: its direction, which the cosine matches, is undefined"
        )
    return cosine_gradient_distance(
        simulated_update(
            model,
            images,
            labels,
            lr=lr,
            epochs=epochs,
            batch_size=batch_size,
            start=start,
        ),
        list(observed),
    )


def rounds_distance(
    model: nn.Module,
    rounds: Sequence[tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]]],
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    lr: float,
    epochs: int,
    batch_size: int,
) -> torch.Tensor:
    """The mean of :func:`update_distance` over ``rounds`` = ``[(w_0 of round r, Δ of round r), …]``: each
    round's update matched at its own round's global model, jointly (one candidate for every round).

    The R simulations run as one vectorised computation over the stacked starts (``torch.func.vmap``
    of :func:`local_steps`), so a model whose buffers change in training mode (BatchNorm) is refused.

    Raises:
        ValueError: if ``rounds`` is empty or an entry is not a ``(start, update)`` pair, if a start or an
            update does not match the model or an update is all zeros, if the model has buffers, and as
            :func:`simulated_update` for ``images`` and the schedule.
    """
    if isinstance(rounds, torch.Tensor) or not rounds:
        raise ValueError("rounds must hold at least one (start, update) pair")
    if not all(isinstance(pair, (tuple, list)) and len(pair) == 2 for pair in rounds):
        raise ValueError("rounds must hold (start, update) pairs, one per round")
    if any(True for _ in model.buffers()):
        raise ValueError(
            "model has buffers: rounds_distance vectorises over rounds and needs a model without them"
        )
    check_images(images)
    lr, epochs, batch_size = check_schedule(lr, epochs, batch_size, images.shape[0])
    starts, observed = [], []
    for r, (start, delta) in enumerate(rounds):
        starts.append(
            [
                t.detach()
                for t in check_parameter_list(model, start, f"rounds[{r}] start")
            ]
        )
        delta = check_parameter_list(model, delta, f"rounds[{r}] update")
        if all(not bool(t.any()) for t in delta):
            raise ValueError(
                f"rounds[{r}] update is all zeros: its direction, which the cosine matches, is undefined"
            )
        observed.append(list(delta))
    stacked = [torch.stack(parts) for parts in zip(*starts)]
    trained = torch.func.vmap(
        lambda w0: local_steps(model, w0, images, labels, lr, epochs, batch_size)
    )(stacked)
    total = sum(
        cosine_gradient_distance(
            [wk[r] - w0[r] for wk, w0 in zip(trained, stacked)], observed[r]
        )
        for r in range(len(rounds))
    )
    return total / len(rounds)


def check_images(images) -> None:
    """Refuse ``images`` that are not a finite ``(N, C, H, W)`` float tensor (``ValueError``)."""
    if (
        not isinstance(images, torch.Tensor)
        or images.dim() != 4
        or not images.is_floating_point()
    ):
        raise ValueError("images must be a (N, C, H, W) float tensor")
    if not torch.isfinite(images).all():
        raise ValueError("images hold NaN or inf")
