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


def flattened(
    errors: Mapping[str, Mapping[int, Sequence[float]]], tolerance: float = 0.1
) -> dict[str, int | None]:
    """Per defense, the first budget after which the next one lowers the mean MSE by less than ``tolerance``
    (a fraction of it): where IG's curve has flattened. None when it still falls by more at the largest step
    (the curve has not flattened within the budgets tried: its flat point is a lower bound beyond them)."""
    found = {}
    for defense, by_budget in errors.items():
        budgets = sorted(by_budget)
        means = [float(np.mean(by_budget[b])) for b in budgets]
        found[defense] = next(
            (
                b
                for b, m, nxt in zip(budgets, means, means[1:])
                if m - nxt < tolerance * m
            ),
            None,
        )
    return found


def budget_sentence(
    found: Mapping[str, int | None],
    names: Mapping[str, str],
    table_budget: int,
    budgets: Sequence[int],
    errors: Mapping[str, Mapping[int, Sequence[float]]] | None = None,
) -> str:
    """Where the curves flatten, and whether Table 1's budget ``table_budget`` lies at or beyond that, in words;
    with ``errors`` (:func:`ig_budget_errors`) also whether the largest budget's mean MSE is no lower than Table
    1's under every defense, or, where some curve still falls, under which defenses it rises."""
    late = [names[d] for d, b in found.items() if b is None or b > table_budget]
    where = "; ".join(
        f"{names[d]}: {'still falling at ' + str(max(budgets)) if b is None else f'flat by {b}'}"
        for d, b in found.items()
    )
    if not late:
        rises = errors is not None and all(
            np.mean(e[max(budgets)]) >= np.mean(e[table_budget])
            for e in errors.values()
        )
        return (
            f"Every curve has flattened by {table_budget} iterations ({where}), so Table 1's IG runs at a "
            "budget where more iterations no longer lower its MSE by much on these targets"
            + (
                f"; at {max(budgets)} iterations its mean MSE is no lower than at {table_budget} under any "
                "defense."
                if rises
                else "."
            )
        )
    rising = [
        names[d]
        for d, e in (errors or {}).items()
        if np.mean(e[max(budgets)]) > np.mean(e[table_budget])
    ]
    return (
        f"Under {', '.join(late)} IG's curve is still falling at Table 1's {table_budget} iterations ({where}): "
        "there Table 1 understates the baseline, and LTI is also compared with IG at its best recorded budget "
        "(the lowest mean MSE of its curve; the table's last column)."
        + (
            f" Under {', '.join(rising)} IG's mean MSE at {max(budgets)} iterations "
            f"is above its mean at {table_budget}: more iterations do not help it "
            "there."
            if rising
            else ""
        )
    )


def recorded_study(path, profile: str, seed: int, overrides: Mapping) -> dict | None:
    """The recorded budget study at ``path`` (``book/studies/06_ig_budget.json``, written by
    ``benchmarks/ig_budget_06.py``) when it exists and was run for this run's targets — the same ``profile``
    and ``seed``, no ``overrides`` of the profile — else None (the page says so); its per-budget errors keyed
    by int budgets again.

    Raises:
        ValueError: naming ``path`` if it is not JSON (as :func:`gitutor.files.read_json`).
    """
    from pathlib import Path

    from gitutor.files import read_json

    if overrides or not Path(path).is_file():
        return None
    record = read_json(path, "IG budget record")
    record["errors"] = {
        d: {int(b): v for b, v in by_budget.items()}
        for d, by_budget in record["errors"].items()
    }
    return record if (record["profile"], record["seed"]) == (profile, seed) else None


def against_recorded(
    record: Mapping, cells: Mapping, model: str, names: Mapping[str, str]
) -> dict:
    """This run's LTI against the recorded IG on the recorded targets (the first ``record["targets"]``, B = 1).

    Returns ``lti`` ``{defense: mean MSE}``, ``best`` ``{defense: the recorded budget with IG's lowest mean MSE}``
    (IG at its best: under some defenses its MSE rises again at larger budgets), ``at_budget`` ``{defense: "LTI <
    IG" | "LTI > IG" | not resolved}`` (paired over the targets, :func:`gitutor.paired.compare_paired`, IG at
    its ``best`` budget),
    ``agreement`` (the largest |MSE difference| between the recorded IG at Table 1's budget and this run's IG
    on the same targets, over the deterministic defenses none / sign / prune: 0 when the record matches this
    run) and ``table`` (Markdown: per defense, IG's mean MSE per budget, LTI's, and the paired reading).

    Raises:
        KeyError: when the record lacks Table 1's budget or a defense of ``names``.
    """
    from gitutor.paired import compare_paired
    from gitutor.tables import markdown_table

    n, errors = record["targets"], record["errors"]
    lti, best, at_budget, rows, gaps = {}, {}, {}, [], []
    for d in names:
        mine = cells[model, 1, d].per_batch_mse("LTI")[:n]
        lti[d] = float(np.mean(mine))
        best[d] = min(
            record["budgets"], key=lambda b, d=d: float(np.mean(errors[d][b]))
        )
        at_budget[d] = compare_paired(mine, errors[d][best[d]], ("LTI", "IG"))
        if d != "gauss":
            ours = cells[model, 1, d].per_batch_mse("IG")[:n]
            gaps.append(
                max(abs(a - b) for a, b in zip(ours, errors[d][record["table_budget"]]))
            )
        rows.append(
            [
                names[d],
                *(f"{np.mean(errors[d][b]):.4f}" for b in record["budgets"]),
                f"{lti[d]:.4f}",
                f"{at_budget[d]} (IG at {best[d]})",
            ]
        )
    headers = [
        "defense",
        *(f"IG, {b} its" for b in record["budgets"]),
        "LTI (this run)",
        f"LTI vs IG at its best budget (paired, {n} targets)",
    ]
    return {
        "lti": lti,
        "best": best,
        "at_budget": at_budget,
        "agreement": max(gaps) if gaps else float("nan"),
        "table": markdown_table(headers, rows),
    }
