"""The budget a log-linear trend of a metric reaches a target at (:func:`budget_for`, re-exported by
:mod:`gitutor.stats`), extrapolated only from points whose intervals pin the answer down."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from gitutor.stats import Interval


def budget_for(
    budgets: Sequence[float],
    means: Sequence[float | Interval],
    target: float,
    max_factor: float = 1000.0,
    max_spread: float = 3.0,
) -> float | None:
    """The budget at which a log-linear fit of ``means`` against ``budgets`` reaches ``target``.

    Fits mean = a + c · log(budget) by least squares; returns None when c ≤ 0 (no progress) or
    when the predicted budget is more than ``max_factor`` × the largest budget measured (too far
    to extrapolate). An extrapolation, to be reported as such.

    When ``means`` are :class:`Interval` s (pass them: plain numbers are taken as exact), the
    answer must also survive the points' uncertainty: the same fit through the intervals' lower
    ends and through their upper ends must both reach ``target`` within ``max_factor`` and agree
    within a factor ``max_spread``; otherwise (or when a point has n = 1, no interval) the
    intervals are too wide to extrapolate from and the result is None.

    Raises:
        ValueError: for fewer than two budgets, mismatched lengths, non-positive budgets,
            ``max_factor`` ≤ 1 or ``max_spread`` < 1.
        TypeError: for ``means`` that mix :class:`Interval` s and numbers.
    """
    if not 1 < max_factor < math.inf:
        raise ValueError(f"max_factor must be a finite number > 1, got {max_factor!r}")
    if not 1 <= max_spread < math.inf:
        raise ValueError(f"max_spread must be a finite number ≥ 1, got {max_spread!r}")
    if len(budgets) != len(means) or len(budgets) < 2:
        raise ValueError(
            f"need ≥ 2 budgets with one mean each, got {len(budgets)} and {len(means)}"
        )
    if min(budgets) <= 0:
        raise ValueError("budgets must be positive")
    kinds = {isinstance(m, Interval) for m in means}
    if len(kinds) > 1:
        raise TypeError("means must be all Intervals or all numbers, not a mix")
    if kinds == {False}:
        return _log_linear_budget(budgets, means, target, max_factor)
    if any(not m.has_interval for m in means):
        return None
    central = _log_linear_budget(budgets, [m.mean for m in means], target, max_factor)
    ends = [
        _log_linear_budget(
            budgets, [getattr(m, end) for m in means], target, max_factor
        )
        for end in ("low", "high")
    ]
    if central is None or None in ends or max(ends) > max_spread * min(ends):
        return None
    return central


def _log_linear_budget(
    budgets, means, target, max_factor
) -> float | None:  # budget_for, numbers
    slope, intercept = np.polyfit(
        np.log(np.asarray(budgets, float)), np.asarray(means, float), 1
    )
    if slope <= 0 or (target - intercept) / slope > math.log(max_factor * max(budgets)):
        return None
    return float(math.exp((target - intercept) / slope))
