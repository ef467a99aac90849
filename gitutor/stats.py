"""Claims with uncertainty: mean and 95 % interval over trials, and comparisons that can say "not resolved".

A chapter that compares two methods runs each on several batches or seeds, summarises each
method's numbers with :func:`interval` and lets :func:`compare` decide: ``"A > B"`` or
``"A < B"`` only when the two 95 % intervals do not overlap, ``"not resolved at this budget"``
otherwise. Overlap of 95 % intervals is a conservative rule (it needs more evidence than a
two-sample test at the 5 % level); it is easy to read off a table and to check by eye.

Every interval respects its quantity's range (:data:`BOUNDS`: SSIM in [−1, 1], PSNR and MSE
≥ 0, rates in [0, 1]); the caller names it with ``bounds=``. :func:`interval` gives, for
n ≥ :data:`BOOTSTRAP_MIN_N` trials, the BCa bootstrap interval of the mean
(``scipy.stats.bootstrap``, :data:`N_RESAMPLES` resamples, seed :data:`BOOTSTRAP_SEED`, so the
same values give the same interval); a bootstrap interval lies inside the range of the data, so
inside the bounds. Below that n the bootstrap covers less than its nominal 95 % (Efron &
Tibshirani 1993, §14.3), so small samples get the Student-t interval
mean ± t_{0.975, n−1} · s / √n intersected with the bounds: the true mean lies inside the bounds,
so the intersection misses it exactly when the t interval does and keeps the t interval's
coverage. With a single trial there is no interval (``low``/``high`` are ±inf, printed
"n = 1, no interval"), so nothing is ever claimed from one run. For success fractions (one 0/1
outcome per trial) :func:`success_interval` gives the Wilson score interval, inside [0, 1].

:func:`budget_for` extrapolates a log-linear trend of a metric over budgets, and only from
points whose intervals pin the answer down (see there).
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from gitutor.tables import markdown_table

NOT_RESOLVED = "not resolved at this budget"
CONFIDENCE = 0.95
#: From this many trials :func:`interval` is the BCa bootstrap interval; below, Student-t in the bounds.
BOOTSTRAP_MIN_N = 20
#: Bootstrap resamples and seed (fixed: the same values give the same interval).
N_RESAMPLES = 9999
BOOTSTRAP_SEED = 0
UNBOUNDED = (-math.inf, math.inf)
#: The range of each quantity the book reports (pass it as ``bounds=``): PSNR in dB of images in
#: [0, 1] is ≥ 0 (finite: identical images are excluded by the caller), MSE and LPIPS ≥ 0.
BOUNDS = {
    "SSIM": (-1.0, 1.0),
    "PSNR": (0.0, math.inf),
    "MSE": (0.0, math.inf),
    "LPIPS": (0.0, math.inf),
    "fraction": (0.0, 1.0),
    "percent": (0.0, 100.0),
}


def _bounds(bounds) -> tuple[float, float]:
    """``bounds`` checked: a pair of real numbers (or None for an open end) with low < high."""
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise TypeError(f"bounds must be a pair (low, high), got {bounds!r}")
    pair = tuple(
        -math.inf if b is None and i == 0 else math.inf if b is None else b
        for i, b in enumerate(bounds)
    )
    if any(
        isinstance(b, bool) or not isinstance(b, numbers.Real) or math.isnan(b)
        for b in pair
    ):
        raise TypeError(f"bounds must hold real numbers or None, got {bounds!r}")
    if not pair[0] < pair[1]:
        raise ValueError(f"bounds must have low < high, got {bounds!r}")
    return float(pair[0]), float(pair[1])


@dataclass(frozen=True)
class Interval:
    """Mean and 95 % interval of ``n`` trials, inside ``bounds`` (the quantity's range).

    ``low``/``high`` are −inf/+inf when n = 1: one trial has no interval.
    """

    mean: float
    low: float
    high: float
    n: int
    bounds: tuple[float, float] = UNBOUNDED

    def __post_init__(self) -> None:
        """Raises ``TypeError`` for a field that is not a real number (``n``: an int) and
        ``ValueError`` unless low ≤ mean ≤ high, the mean is finite, n ≥ 1, and (for n > 1)
        the interval lies inside ``bounds``."""
        for name in ("mean", "low", "high"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"Interval {name} must be a real number, got {value!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, numbers.Integral):
            raise TypeError(
                f"Interval n must be an int (the number of trials), got {self.n!r}"
            )
        if (
            not math.isfinite(self.mean)
            or not self.low <= self.mean <= self.high
            or self.n < 1
        ):
            raise ValueError(
                f"an Interval needs low ≤ mean ≤ high with a finite mean and n ≥ 1 trials, got "
                f"mean={self.mean!r}, low={self.low!r}, high={self.high!r}, n={self.n!r}"
            )
        lo, hi = _bounds(self.bounds)
        ends = (self.mean,) if self.n == 1 else (self.low, self.high)
        if not all(lo <= end <= hi for end in ends):
            raise ValueError(
                f"Interval [{self.low!r}, {self.high!r}] (mean {self.mean!r}, n = {self.n}) "
                f"lies outside its quantity's bounds [{lo!r}, {hi!r}]"
            )

    @property
    def has_interval(self) -> bool:  # False for one trial
        return self.n > 1

    def __str__(self) -> str:
        return format_interval(self)

    def as_dict(self) -> dict[str, float | int | str]:
        """JSON-able form (an unbounded end written as the string "inf"/"-inf")."""
        plain = lambda v: v if math.isfinite(v) else str(v)
        return {
            "mean": self.mean,
            "low": plain(self.low),
            "high": plain(self.high),
            "n": self.n,
        }


def interval(
    values: Iterable[float],
    confidence: float = CONFIDENCE,
    bounds: tuple[float | None, float | None] = UNBOUNDED,
) -> Interval:
    """Mean and confidence interval of ``values`` (one number per trial), inside ``bounds``.

    Args:
        values: one real number per trial (n of them).
        confidence: the interval's confidence level, in (0, 1).
        bounds: the quantity's range ``(low, high)``, None or ±inf for an open end; e.g.
            ``BOUNDS["SSIM"]`` = (−1, 1). Default: unbounded.

    Returns:
        n = 1: no interval (``low``/``high`` ±inf). 2 ≤ n < :data:`BOOTSTRAP_MIN_N`: the
        Student-t interval intersected with ``bounds``. n ≥ :data:`BOOTSTRAP_MIN_N`: the BCa
        bootstrap interval of the mean (seeded, :data:`N_RESAMPLES` resamples), widened to
        hold the mean when BCa's skew correction moved both ends past it. Identical values
        give a zero-width interval.

    Raises:
        ValueError: if ``values`` is empty, nested or ragged (e.g. per-seed lists of per-image
            values: average within each trial first, the interval is over trials), holds NaN/inf or
            a value outside ``bounds``, ``confidence`` is not in (0, 1), or ``bounds`` has low ≥ high.
        TypeError: if a value is not a real number or ``bounds`` is not a pair of numbers.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    lo, hi = _bounds(bounds)
    data = _flat_values(values, "values")
    if not np.isfinite(data).all():
        raise ValueError("values contain NaN or inf")
    if data.min() < lo or data.max() > hi:
        raise ValueError(
            f"values must lie inside bounds [{lo}, {hi}], got min {data.min()!r}, "
            f"max {data.max()!r}"
        )
    mean = float(
        np.clip(data.mean(), lo, hi)
    )  # clip: only rounding can move the mean out
    if data.size == 1:
        return Interval(mean, -math.inf, math.inf, 1, (lo, hi))
    if np.ptp(data) == 0:
        return Interval(mean, mean, mean, int(data.size), (lo, hi))
    if data.size >= BOOTSTRAP_MIN_N:
        low, high = _bootstrap(data, confidence)
    else:
        half = float(
            scipy_stats.t.ppf(0.5 + confidence / 2, data.size - 1)
            * data.std(ddof=1)
            / math.sqrt(data.size)
        )
        low, high = mean - half, mean + half
    low, high = max(lo, min(low, mean)), min(hi, max(high, mean))
    return Interval(mean, low, high, int(data.size), (lo, hi))


def _flat_values(values, name: str) -> np.ndarray:
    """``values`` as a 1-D float array of one number per trial.

    Raises:
        ValueError: if ``values`` is empty or holds sequences (nested or ragged).
        TypeError: if a value is not a real number (bools and strings included).
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(
            f"{name} must be a sequence of real numbers (one per trial), got {type(values).__name__}"
        )
    items = list(values)
    nested = [
        i
        for i, v in enumerate(items)
        if isinstance(v, (Iterable, np.ndarray))
        and not isinstance(v, str)
        and np.ndim(v) > 0
    ]
    if nested:
        raise ValueError(
            f"{name} must hold one number per trial, but {name}[{nested[0]}] is a sequence "
            f"({len(nested)} of {len(items)} items are): average within each trial first "
            "(e.g. the mean over a batch's images), the interval is over trials"
        )
    data = np.asarray(items)
    if data.size == 0:
        raise ValueError(f"{name} is empty: an interval needs at least one trial")
    if (
        data.dtype == object
        or not np.issubdtype(data.dtype, np.number)
        or data.dtype == bool
    ):
        raise TypeError(f"{name} must be real numbers, got dtype {data.dtype}")
    return data.astype(float).ravel()


def _bootstrap(data: np.ndarray, confidence: float) -> tuple[float, float]:
    """BCa bootstrap interval of the mean of ``data`` (percentile when BCa is undefined)."""
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = scipy_stats.bootstrap(
                (data,),
                np.mean,
                confidence_level=confidence,
                n_resamples=N_RESAMPLES,
                method=method,
                vectorized=True,
                rng=np.random.default_rng(BOOTSTRAP_SEED),
            )
        low, high = (
            float(x)
            for x in (result.confidence_interval.low, result.confidence_interval.high)
        )
        if math.isfinite(low) and math.isfinite(high):
            return low, high
    raise ValueError(
        "the bootstrap interval is undefined for these values"
    )  # pragma: no cover


def success_interval(
    outcomes: Iterable[bool], confidence: float = CONFIDENCE
) -> Interval:
    """Fraction of successes among ``outcomes`` (one bool or 0/1 per trial) and its Wilson score interval
    (bounds [0, 1]; one outcome: no interval).

    Wilson (1927): centre (p̂ + z²/2n) / (1 + z²/n), half-width z·√(p̂(1−p̂)/n + z²/4n²) / (1 + z²/n).

    Raises:
        ValueError: if ``outcomes`` is empty, holds anything but 0/1/True/False (a nested list, a
            string), or ``confidence`` is not in (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    items = list(outcomes)
    if any(isinstance(v, (str, bytes)) or np.ndim(v) > 0 for v in items):
        raise ValueError(
            f"outcomes must hold one 0/1 or bool per trial, not sequences or strings, got {items!r}"
        )
    data = [float(v) for v in items]
    if not data or not set(data) <= {0.0, 1.0}:
        raise ValueError(
            f"outcomes must be a non-empty sequence of 0/1 or bools, got {data!r}"
        )
    n, share = len(data), sum(data) / len(data)
    if (
        n == 1
    ):  # one outcome: no interval (the Wilson interval of 1/1 would still claim [0.21, 1])
        return Interval(share, -math.inf, math.inf, 1, (0.0, 1.0))
    z = float(scipy_stats.norm.ppf(0.5 + confidence / 2))
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = (
        z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    )
    # the Wilson interval holds p̂; min/max only undo rounding (0/n gave a lower bound of 5.6e-17 > p̂)
    return Interval(
        share,
        min(share, max(0.0, centre - half)),
        max(share, min(1.0, centre + half)),
        n,
        (0.0, 1.0),
    )


def compare(
    a: Interval | Sequence[float],
    b: Interval | Sequence[float],
    names: tuple[str, str] = ("A", "B"),
) -> str:
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
    summaries = {
        k: v if isinstance(v, Interval) else interval(v) for k, v in results.items()
    }
    ranked = sorted(summaries, key=lambda k: -summaries[k].mean)
    if any(
        compare(summaries[u], summaries[v]) != "A > B"
        for u, v in zip(ranked, ranked[1:])
    ):
        return NOT_RESOLVED
    return " > ".join(ranked)


def format_interval(summary: Interval, digits: int = 2, count: bool = True) -> str:
    """``"12.34 [11.90, 12.78] (n = 4)"``; ``"12.34 (n = 1, no interval)"`` for one trial;
    without ``count`` (a table that has its own n column) ``"12.34 [11.90, 12.78]"``."""
    if summary.n == 1:
        return f"{summary.mean:.{digits}f} (n = 1, no interval)"
    text = f"{summary.mean:.{digits}f} [{summary.low:.{digits}f}, {summary.high:.{digits}f}]"
    return text + (f" (n = {summary.n})" if count else "")


def interval_table(
    summaries: Mapping[str, Mapping[str, Interval | None]],
    extra: Mapping[str, Sequence[str]] = {},
    extra_headers: Sequence[str] = (),
    digits: int = 2,
) -> str:
    """A Markdown table: one row per name, one column per metric (mean [95 % interval]), then ``extra`` columns.

    ``summaries[name][metric]`` may be None (written "n/a").
    """
    metrics = list(next(iter(summaries.values())))
    header = metrics + list(extra_headers)
    rows = [
        [name]
        + [
            "n/a" if row[m] is None else format_interval(row[m], digits)
            for m in metrics
        ]
        + list(extra.get(name, ()))
        for name, row in summaries.items()
    ]
    return markdown_table(["", *header], rows)


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign (McNemar) test of ``wins`` against ``losses`` discordant pairs: the probability of a
    split at least this uneven when each discordant pair is a fair coin (1.0 with none).

    Raises:
        ValueError: if a count is not an int ≥ 0.
    """
    for name, count in (("wins", wins), ("losses", losses)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"{name} must be an int ≥ 0, got {count!r}")
    n, k = wins + losses, max(wins, losses)
    return (
        min(1.0, 2 * sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n) if n else 1.0
    )
