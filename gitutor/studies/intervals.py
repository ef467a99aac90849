"""A 95 % confidence interval for a mean or a success fraction over independent runs (seeds, images).

One small helper until the book-wide ``gitutor.stats`` lands: a comparison is claimed only when the
intervals of the two sides do not overlap.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats


def confidence_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)`` of ``values`` at confidence ``level``.

    Values that are all 0/1 (bools: success per run) get the Wilson score interval of the fraction,
    which stays inside [0, 1] and is not empty at 0/n or n/n; other values the Student-t interval of
    the mean (a single value gives an unbounded interval).

    Raises:
        ValueError: for no values, a non-finite value or ``level`` outside (0, 1).
    """
    values = [float(v) for v in values]
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError(f"values must be a non-empty sequence of finite numbers, got {values!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    n, mean = len(values), sum(values) / len(values)
    if set(values) <= {0.0, 1.0}:
        z = float(stats.norm.ppf(0.5 + level / 2))
        centre = (mean + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(mean * (1 - mean) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return mean, max(0.0, centre - half), min(1.0, centre + half)
    if n == 1:
        return mean, -math.inf, math.inf
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * stats.tstd(values)) / math.sqrt(n)
    return mean, mean - half, mean + half
