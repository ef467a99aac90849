"""Chapter 06's baseline at its own budget: Inverting Gradients' MSE against its number of iterations.

Geiping et al. run Inverting Gradients for thousands of iterations (24 000 on ImageNet); Wu et al. do not
state IG's budget. Table 1 of the chapter runs ``cfg.ig_iterations``; :func:`ig_budget_errors` reruns the
defense-aware IG (:meth:`~gitutor.chapters.learning_to_invert.experiments.Setup.ig`) on the same observed
gradients of the first targets at each budget of ``cfg.ig_budgets`` — a fresh run per budget, because its
step-size schedule is set by the budget. ``scripts/ig_study_06.py`` records it with IG's budget chosen on
auxiliary images (:func:`recorded_study` reads the record, :func:`against_recorded` sets it beside this run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from gitutor.metrics import mse


def ig_budget_errors(
    setup,
    model: nn.Module,
    observed: Mapping[str, Sequence[list[torch.Tensor]]],
    images: torch.Tensor,
    labels: torch.Tensor,
    budgets: Sequence[int],
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
    if (
        not budgets
        or any(b < 1 for b in budgets)
        or list(budgets) != sorted(set(budgets))
    ):
        raise ValueError(
            f"budgets must be increasing iteration counts ≥ 1, got {budgets}"
        )
    if any(len(grads) != len(images) for grads in observed.values()):
        raise ValueError(
            f"observed must hold one gradient per target ({len(images)}) for every defense"
        )
    errors = {}
    for defense, grads in observed.items():
        errors[defense] = {}
        for budget in budgets:
            run = dataclasses.replace(
                setup, cfg=setup.cfg.replace(ig_iterations=budget)
            )
            errors[defense][budget] = [
                float(
                    mse(
                        run.ig(model, g, images[i : i + 1], labels[i : i + 1], defense)[
                            0
                        ],
                        images[i : i + 1],
                    ).mean()
                )
                for i, g in enumerate(grads)
            ]
    return errors


def recorded_study(
    path, profile: str, seed: int, overrides: Mapping, budget: str | None = None
) -> dict | None:
    """The recorded budget study at ``path`` (``book/studies/06_ig_budget.json``, written by
    ``scripts/ig_study_06.py``) when it exists and was run for this run's targets — the same ``profile``
    and ``seed``, no ``overrides`` of the profile and no named ``budget`` (the notebook's ``BUDGET``, e.g.
    ``"smoke"``: other targets) — else None (the page says so); its per-budget errors keyed by int budgets
    again.

    Raises:
        ValueError: naming ``path`` if it is not JSON (as :func:`gitutor.files.read_json`).
    """
    from pathlib import Path

    from gitutor.files import read_json

    if overrides or budget is not None or not Path(path).is_file():
        return None
    record = read_json(path, "IG budget record")
    if (
        "chosen_budget" not in record
    ):  # a record of the older study (no budget chosen on auxiliary images)
        return None
    for part in (record["errors"], record["choice"]["errors"]):
        for d, by_budget in list(part.items()):
            part[d] = {int(b): v for b, v in by_budget.items()}
    return record if (record["profile"], record["seed"]) == (profile, seed) else None


def against_recorded(
    record: Mapping, cells: Mapping, model: str, names: Mapping[str, str]
) -> dict:
    """The recorded IG on Table 1's B = 1 targets (the first ``record["targets"]``) beside this run.

    Returns ``best`` ``{defense: IG's budget, chosen on auxiliary images}`` (``record["chosen_budget"]``),
    ``ig_errors`` ``{defense: per-target MSE of IG at that budget}`` (what the chapter scores LTI against),
    ``agreement`` (the largest |MSE difference| between the recorded IG at Table 1's budget and this run's IG on
    the same targets and observed gradients: 0 when the record matches this run) and ``table`` (Markdown: per
    defense, IG's mean MSE per budget on the budget-choice images and on the targets, and this run's LTI).

    Raises:
        KeyError: when the record lacks Table 1's budget or a defense of ``names``.
    """
    from gitutor.tables import markdown_table

    n, errors, choice = record["targets"], record["errors"], record["choice"]["errors"]
    best = {d: int(record["chosen_budget"][d]) for d in names}
    ig_errors = {d: list(errors[d][best[d]]) for d in names}
    gaps, rows = [], []
    for d in names:
        ours = cells[model, 1, d].per_batch_mse("IG")[:n]
        gaps += [abs(a - b) for a, b in zip(ours, errors[d][record["table_budget"]])]
        lti = float(np.mean(cells[model, 1, d].per_batch_mse("LTI")[:n]))
        for where, by_budget in (("auxiliary", choice[d]), ("targets", errors[d])):
            rows.append(
                [
                    names[d],
                    where,
                    *(
                        (
                            f"**{np.mean(by_budget[b]):.4f}**"
                            if b == best[d]
                            else f"{np.mean(by_budget[b]):.4f}"
                        )
                        for b in record["budgets"]
                    ),
                    f"{lti:.4f}" if where == "targets" else "",
                ]
            )
    headers = [
        "defense",
        "images",
        *(f"IG, {b} its" for b in record["budgets"]),
        "LTI (this run)",
    ]
    return {
        "best": best,
        "ig_errors": ig_errors,
        "agreement": max(gaps) if gaps else float("nan"),
        "table": markdown_table(headers, rows),
    }
