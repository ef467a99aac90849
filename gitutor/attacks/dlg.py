"""Deep Leakage from Gradients (Zhu, Liu, Han, NeurIPS 2019, §3, Algorithm 1).

The attacker holds the model F(·; W) and a client's gradient ∇W. It draws a dummy image
x' ~ N(0, 1) and dummy label logits y' ~ N(0, 1), and minimises the squared-L2 distance between
the dummy gradient ∂ℓ(F(x'), softmax(y'))/∂W and ∇W over (x', y') with L-BFGS (learning rate 1,
as in the public code; each of the 300 steps runs up to 20 inner L-BFGS iterations).
The public code uses torch's L-BFGS without a line search (fixed step ``lr``); ``line_search=
"strong_wolfe"`` switches on torch's strong-Wolfe line search (Nocedal & Wright, Numerical
Optimization, Alg. 3.5–3.6), a beyond-the-paper option that picks each step length so the distance
decreases sufficiently, instead of trusting the fixed step.
Given the labels (e.g. from the iDLG sign rule), only the image is optimised: the iDLG setting
(Zhao et al. 2020).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from gitutor.attacks.objectives import check_input_shape, check_target_gradients, gradient_l2_distance
from gitutor.attacks.result import AttackResult
from gitutor.federated.client import client_gradients
from gitutor.seeding import make_generator

#: ``line_search`` values: the DLG code's fixed step, or torch's strong-Wolfe line search.
LINE_SEARCHES = (None, "strong_wolfe")


def dlg(model: nn.Module, target_grads: Sequence[torch.Tensor], input_shape: Sequence[int],
        num_classes: int, *, labels: torch.Tensor | None = None, iterations: int = 300, seed: int = 0,
        record_every: int = 10, lr: float = 1.0, line_search: str | None = None, progress: bool = False,
        dummy_gradients: Callable[[torch.Tensor, torch.Tensor], list[torch.Tensor]] | None = None) -> AttackResult:
    """DLG (``labels=None``) or iDLG-style image-only DLG (``labels`` given).

    Args:
        model: the shared model, in the same mode (train/eval) as when the client computed
            ``target_grads``; it must be twice differentiable (e.g. Sigmoid LeNet).
        target_grads: the observed gradient, aligned with ``model.parameters()``.
        input_shape: ``(B, C, H, W)`` of the private batch.
        num_classes: C of the dummy label logits.
        labels: ``(B,)`` int64 labels or ``(B, num_classes)`` soft labels (label smoothing, mixup;
            Wang et al. 2024, Table 3) to fix instead of optimising dummy labels.
        iterations: L-BFGS steps (the paper's n = 300).
        seed: seed of the N(0, 1) initialisation.
        record_every: store an image snapshot every this many steps (and at step 0).
        lr: L-BFGS learning rate (1 in the DLG code).
        line_search: ``None`` (the DLG code: fixed steps) or ``"strong_wolfe"`` (torch's strong-Wolfe
            line search; not in the paper).
        progress: show a tqdm progress bar.
        dummy_gradients: ``f(dummy_x, dummy_label) -> list of tensors`` (differentiable) that the
            client would send for that data; default the gradient ``client_gradients(...,
            create_graph=True)``. The ADMM attacks pass a simulated client update here (the
            CLIENTUPDATE of the reproduction report's Algorithm 2).

    Returns:
        :class:`AttackResult` with ``images`` (unclamped, as DLG returns them), ``labels``
        (argmax of the recovered label distribution, or the given labels as passed), ``history["loss"]``
        (gradient distance at the start of every step, so entry 0 is the initial distance) and snapshots. If the loss becomes NaN/inf, the
        attack stops and returns the last finite state, with ``info["stopped_early"]`` set. If a step leaves
        the dummy data exactly unchanged, L-BFGS has reached a fixed point (every later step would repeat
        it): the attack stops computing there, sets ``info["converged_at"]`` and fills history and snapshots
        as the remaining steps would, so the result equals that of the full budget.

    Raises:
        ValueError: for a bad ``input_shape``, ``iterations < 1``, ``record_every < 1``,
            ``labels`` of the wrong shape, outside [0, num_classes) or not finite, a non-positive or non-finite ``lr``, an unknown
            ``line_search``, or gradients that do not match the model (the message names the parameter).
    """
    target_grads = check_target_gradients(model, target_grads)
    shape = check_input_shape(input_shape)
    if iterations < 1 or record_every < 1:
        raise ValueError("iterations and record_every must be >= 1")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    if line_search not in LINE_SEARCHES:
        raise ValueError(f"line_search must be one of {LINE_SEARCHES}, got {line_search!r}")
    if labels is not None and not (
            (labels.shape == (shape[0],) and labels.dtype == torch.int64)
            or (labels.shape == (shape[0], num_classes) and labels.is_floating_point())):
        raise ValueError(f"labels must be int64 of shape ({shape[0]},) or soft labels of shape "
                         f"({shape[0]}, {num_classes}), got {labels.dtype} {tuple(labels.shape)}")
    if labels is not None and not labels.is_floating_point() and not ((labels >= 0) & (labels < num_classes)).all():
        raise ValueError(f"labels must lie in [0, num_classes={num_classes}), got {labels.tolist()}")
    if labels is not None and labels.is_floating_point() and not torch.isfinite(labels).all():
        raise ValueError("soft labels must be finite")
    device = target_grads[0].device
    generator = make_generator(seed, device)
    dummy_x = torch.randn(shape, generator=generator, device=device).requires_grad_(True)
    dummy_y = torch.randn((shape[0], num_classes), generator=generator, device=device).requires_grad_(True)
    variables = [dummy_x] if labels is not None else [dummy_x, dummy_y]
    optimizer = torch.optim.LBFGS(variables, lr=lr, line_search_fn=line_search)

    def current_labels() -> torch.Tensor:
        return labels if labels is not None else F.softmax(dummy_y, dim=-1)

    if dummy_gradients is None:
        def dummy_gradients(images: torch.Tensor, soft_labels: torch.Tensor) -> list[torch.Tensor]:
            return client_gradients(model, images, soft_labels, create_graph=True)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        dummy_grads = dummy_gradients(dummy_x, current_labels())
        loss = gradient_l2_distance(dummy_grads, target_grads)
        loss.backward()
        return loss

    history: dict[str, list[float]] = {"loss": []}
    snapshots = [(0, dummy_x.detach().cpu().clone())]
    last_finite = (dummy_x.detach().clone(), dummy_y.detach().clone())
    info: dict = {}
    for step in tqdm(range(1, iterations + 1), desc="DLG", disable=not progress):
        loss = float(optimizer.step(closure).detach())  # distance at the start of this step
        if not (math.isfinite(loss) and torch.isfinite(dummy_x).all() and torch.isfinite(dummy_y).all()):
            info["stopped_early"] = f"non-finite loss at step {step}; returning step {step - 1}"
            dummy_x.data, dummy_y.data = last_finite
            break
        history["loss"].append(loss)
        if step % record_every == 0:
            snapshots.append((step, dummy_x.detach().cpu().clone()))
        if torch.equal(dummy_x, last_finite[0]) and torch.equal(dummy_y, last_finite[1]):
            # L-BFGS left the dummy unchanged: a fixed point; every later step would repeat this one exactly
            info["converged_at"] = step
            history["loss"] += [loss] * (iterations - step)
            snapshots += [(later, snapshots[-1][1]) for later in range(step + 1, iterations + 1) if later % record_every == 0]
            break
        last_finite = (dummy_x.detach().clone(), dummy_y.detach().clone())
    recovered = labels if labels is not None else dummy_y.detach().argmax(dim=-1)
    return AttackResult(images=dummy_x.detach().cpu(), labels=recovered.cpu(), history=history,
                        snapshots=snapshots, info=info)
