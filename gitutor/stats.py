"""Claims with uncertainty: mean and 95 % interval over trials, and comparisons that can say "not resolved".

A chapter that compares two methods runs each on several batches or seeds, summarises each
method's numbers with :func:`interval` and lets :func:`compare` decide: ``"A > B"`` or
``"A < B"`` only when the two 95 % intervals do not overlap, ``"not resolved at this budget"``
otherwise. Overlap of 95 % intervals is a conservative rule (it needs more evidence than a
two-sample test at the 5 % level); it is easy to read off a table and to check by eye.

The interval is the Student-t interval of the mean, mean ± t_{0.975, n−1} · s / √n (s the sample
standard deviation); with a single trial it is unbounded, so nothing is ever claimed from one run.
For success fractions (one 0/1 outcome per trial) :func:`success_interval` gives the Wilson score
interval, which stays inside [0, 1] and is not empty at 0/n or n/n.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from gitutor.tables import markdown_table

NOT_RESOLVED = "not resolved at this budget"
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """Mean and 95 % interval of ``n`` trials (``low``/``high`` are ±inf when n = 1)."""

    mean: float
    low: float
    high: float
    n: int

    def __post_init__(self) -> None:
        """Raises ``TypeError`` for a field that is not a real number (``n``: an int) and
        ``ValueError`` unless low ≤ mean ≤ high, the mean is finite and n ≥ 1."""
        for name in ("mean", "low", "high"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"Interval {name} must be a real number, got {value!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, numbers.Integral):
            raise TypeError(f"Interval n must be an int (the number of trials), got {self.n!r}")
        if not math.isfinite(self.mean) or not self.low <= self.mean <= self.high or self.n < 1:
            raise ValueError(f"an Interval needs low ≤ mean ≤ high with a finite mean and n ≥ 1 trials, got "
                             f"mean={self.mean!r}, low={self.low!r}, high={self.high!r}, n={self.n!r}")

    def __str__(self) -> str:
        return format_interval(self)

    def as_dict(self) -> dict[str, float | int | str]:
        """JSON-able form (an unbounded end written as the string "inf"/"-inf")."""
        plain = (lambda v: v if math.isfinite(v) else str(v))
        return {"mean": self.mean, "low": plain(self.low), "high": plain(self.high), "n": self.n}


def interval(values: Iterable[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean and Student-t confidence interval of ``values`` (one number per trial).

    Raises:
        ValueError: if ``values`` is empty, holds NaN/inf, or ``confidence`` is not in (0, 1).
        TypeError: if a value is not a real number.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    data = np.asarray(list(values))
    if data.size == 0:
        raise ValueError("values is empty: an interval needs at least one trial")
    if data.dtype == object or not np.issubdtype(data.dtype, np.number) or data.dtype == bool:
        raise TypeError(f"values must be real numbers, got dtype {data.dtype}")
    data = data.astype(float)
    if not np.isfinite(data).all():
        raise ValueError("values contain NaN or inf")
    mean = float(data.mean())
    if data.size == 1:
        return Interval(mean, -math.inf, math.inf, 1)
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, data.size - 1) * data.std(ddof=1) / math.sqrt(data.size))
    return Interval(mean, mean - half, mean + half, int(data.size))


def success_interval(outcomes: Iterable[bool], confidence: float = CONFIDENCE) -> Interval:
    """Fraction of successes among ``outcomes`` (one bool or 0/1 per trial) and its Wilson score interval.

    Wilson (1927): centre (p̂ + z²/2n) / (1 + z²/n), half-width z·√(p̂(1−p̂)/n + z²/4n²) / (1 + z²/n).

    Raises:
        ValueError: if ``outcomes`` is empty, holds anything but 0/1/True/False, or ``confidence`` is not in (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    data = [float(v) for v in outcomes]
    if not data or not set(data) <= {0.0, 1.0}:
        raise ValueError(f"outcomes must be a non-empty sequence of 0/1 or bools, got {data!r}")
    n, share = len(data), sum(data) / len(data)
    z = float(scipy_stats.norm.ppf(0.5 + confidence / 2))
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # the Wilson interval holds p̂; min/max only undo rounding (0/n gave a lower bound of 5.6e-17 > p̂)
    return Interval(share, min(share, max(0.0, centre - half)), max(share, min(1.0, centre + half)), n)


def compare(a: Interval | Sequence[float], b: Interval | Sequence[float], names: tuple[str, str] = ("A", "B")) -> str:
    """``"A > B"``, ``"A < B"`` (with the given names) when the 95 % intervals separate, else :data:`NOT_RESOLVED`.

    ``a`` and ``b`` are intervals or the raw per-trial values.

    Raises:
        ValueError/TypeError: as :func:`interval` for raw values.
    """
    a, b = (x if isinstance(x, Interval) else interval(x) for x in (a, b))
    if a.low > b.high:
        return f"{names[0]} > {names[1]}"
    if a.high < b.low:
        return f"{names[0]} < {names[1]}"
    return NOT_RESOLVED


def ordering(results: dict[str, Interval | Sequence[float]]) -> str:
    """``"A > B > C"`` when every neighbouring pair (sorted by mean) separates, else :data:`NOT_RESOLVED`.

    Raises:
        ValueError: for fewer than two entries (and as :func:`interval`).
    """
    if len(results) < 2:
        raise ValueError("ordering needs at least two methods")
    summaries = {k: v if isinstance(v, Interval) else interval(v) for k, v in results.items()}
    ranked = sorted(summaries, key=lambda k: -summaries[k].mean)
    if any(compare(summaries[u], summaries[v]) != "A > B" for u, v in zip(ranked, ranked[1:])):
        return NOT_RESOLVED
    return " > ".join(ranked)


def format_interval(summary: Interval, digits: int = 2, count: bool = True) -> str:
    """``"12.34 [11.90, 12.78] (n = 4)"``; ``"12.34 (n = 1, no interval)"`` for one trial;
    without ``count`` (a table that has its own n column) ``"12.34 [11.90, 12.78]"``."""
    if summary.n == 1:
        return f"{summary.mean:.{digits}f} (n = 1, no interval)"
    text = f"{summary.mean:.{digits}f} [{summary.low:.{digits}f}, {summary.high:.{digits}f}]"
    return text + (f" (n = {summary.n})" if count else "")


def interval_table(summaries: Mapping[str, Mapping[str, Interval | None]], extra: Mapping[str, Sequence[str]] = {},
                   extra_headers: Sequence[str] = (), digits: int = 2) -> str:
    """A Markdown table: one row per name, one column per metric (mean [95 % interval]), then ``extra`` columns.

    ``summaries[name][metric]`` may be None (written "n/a").
    """
    metrics = list(next(iter(summaries.values())))
    header = metrics + list(extra_headers)
    rows = [[name] + ["n/a" if row[m] is None else format_interval(row[m], digits) for m in metrics]
            + list(extra.get(name, ())) for name, row in summaries.items()]
    return markdown_table(["", *header], rows)


def budget_for(budgets: Sequence[float], means: Sequence[float], target: float,
               max_factor: float = 1000.0) -> float | None:
    """The budget at which a log-linear fit of ``means`` against ``budgets`` reaches ``target``.

    Fits mean = a + c · log(budget) by least squares; returns None when c ≤ 0 (no progress) or
    when the predicted budget is more than ``max_factor`` × the largest budget measured (too far
    to extrapolate). An extrapolation, to be reported as such.

    Raises:
        ValueError: for fewer than two budgets, mismatched lengths, non-positive budgets or
            ``max_factor`` ≤ 1.
    """
    if not 1 < max_factor < math.inf:
        raise ValueError(f"max_factor must be a finite number > 1, got {max_factor!r}")
    if len(budgets) != len(means) or len(budgets) < 2:
        raise ValueError(f"need ≥ 2 budgets with one mean each, got {len(budgets)} and {len(means)}")
    if min(budgets) <= 0:
        raise ValueError("budgets must be positive")
    slope, intercept = np.polyfit(np.log(np.asarray(budgets, float)), np.asarray(means, float), 1)
    if slope <= 0 or (target - intercept) / slope > math.log(max_factor * max(budgets)):
        return None
    return float(math.exp((target - intercept) / slope))
