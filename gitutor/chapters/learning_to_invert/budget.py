"""Chapter 06's baseline at its own budget: Inverting Gradients' MSE against its number of iterations.

Geiping et al. run Inverting Gradients for thousands of iterations (24 000 on ImageNet); Wu et al. do not
state IG's budget. Table 1 of the chapter runs ``cfg.ig_iterations``; :func:`ig_budget_errors` reruns the
defense-aware IG (:meth:`~gitutor.chapters.learning_to_invert.experiments.Setup.ig`) on the same observed
gradients of the first targets at each budget of ``cfg.ig_budgets`` — a fresh run per budget, because its
step-size schedule is set by the budget — and :func:`flattened` reads where the mean MSE stops falling.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from gitutor.metrics import mse


def ig_budget_errors(setup, model: nn.Module, observed: Mapping[str, Sequence[list[torch.Tensor]]],
                     images: torch.Tensor, labels: torch.Tensor, budgets: Sequence[int]
                     ) -> dict[str, dict[int, list[float]]]:
    """Per defense and budget, the MSE of every target of IG run for that many iterations.

    Args:
        setup: the chapter's :class:`~gitutor.chapters.learning_to_invert.experiments.Setup`.
        observed: ``{defense name: [observed gradient of target i]}`` (B = 1, one per target).
        images, labels: the targets ``(n, C, H, W)`` in [0, 1] and ``(n,)``, in the order of ``observed``.
        budgets: iteration counts, increasing, each ≥ 1.

    Returns:
        ``{defense: {budget: [MSE of target i]}}``.

    Raises:
        ValueError: for budgets that are not increasing positive ints, or an observed list whose length is
            not the number of targets.
    """
    if not budgets or any(b < 1 for b in budgets) or list(budgets) != sorted(set(budgets)):
        raise ValueError(f"budgets must be increasing iteration counts ≥ 1, got {budgets}")
    if any(len(grads) != len(images) for grads in observed.values()):
        raise ValueError(f"observed must hold one gradient per target ({len(images)}) for every defense")
    errors = {}
    for defense, grads in observed.items():
        errors[defense] = {}
        for budget in budgets:
            run = dataclasses.replace(setup, cfg=setup.cfg.replace(ig_iterations=budget))
            errors[defense][budget] = [float(mse(run.ig(model, g, images[i:i + 1], labels[i:i + 1], defense)[0],
                                                 images[i:i + 1]).mean()) for i, g in enumerate(grads)]
    return errors


def flattened(errors: Mapping[str, Mapping[int, Sequence[float]]], tolerance: float = 0.1) -> dict[str, int | None]:
    """Per defense, the first budget after which the next one lowers the mean MSE by less than ``tolerance``
    (a fraction of it): where IG's curve has flattened. None when it still falls by more at the largest step
    (the curve has not flattened within the budgets tried: its flat point is a lower bound beyond them)."""
    found = {}
    for defense, by_budget in errors.items():
        budgets = sorted(by_budget)
        means = [float(np.mean(by_budget[b])) for b in budgets]
        found[defense] = next((b for b, m, nxt in zip(budgets, means, means[1:]) if m - nxt < tolerance * m), None)
    return found


def budget_sentence(found: Mapping[str, int | None], names: Mapping[str, str], table_budget: int,
                    budgets: Sequence[int]) -> str:
    """Where the curves flatten, and whether Table 1's budget ``table_budget`` lies at or beyond that, in words."""
    late = [names[d] for d, b in found.items() if b is None or b > table_budget]
    where = "; ".join(f"{names[d]}: {'beyond ' + str(max(budgets)) if b is None else f'by {b}'}"
                      for d, b in found.items())
    if not late:
        return (f"Every curve has flattened by {table_budget} iterations ({where}), so Table 1's IG runs at a "
                "budget where more iterations no longer lower its MSE by much on these targets.")
    return (f"Under {', '.join(late)} IG's curve is still falling at Table 1's {table_budget} iterations ({where}): "
            "there Table 1 understates the baseline, and LTI's lead is read against the larger budgets below.")
