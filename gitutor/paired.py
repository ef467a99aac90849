"""Paired comparisons: two methods run on the *same* batches, seeds or users.

When the design is paired, the evidence that A beats B is the interval of the per-trial
differences a_i − b_i, not whether A's and B's own intervals overlap (which ignores that a hard
batch is hard for both). :func:`paired_difference` gives that interval (:func:`gitutor.stats.interval`
over the differences: Student-t below 20 pairs, BCa bootstrap from 20) and :func:`compare_paired`
reads it: "A > B" when the whole interval is above 0, "A < B" when below, else
:data:`gitutor.stats.NOT_RESOLVED`. With one pair there is no interval and nothing is claimed.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from gitutor.stats import NOT_RESOLVED, Interval, interval

#: Metrics of reconstructions where a lower value is a better reconstruction.
LOWER_IS_BETTER = frozenset({"LPIPS", "MSE"})


def oriented(metric: str, values: Sequence[float]) -> list[float]:
    """``values`` of ``metric`` turned so that higher is better (negated for
    :data:`LOWER_IS_BETTER`), so that "A > B" of :func:`compare_paired` reads "A better"."""
    sign = -1.0 if metric in LOWER_IS_BETTER else 1.0
    return [sign * float(v) for v in values]


def paired_difference(a: Sequence[float], b: Sequence[float]) -> Interval:
    """Mean and 95 % interval of a_i − b_i over pairs i (same units as a and b; unbounded).

    Args:
        a, b: one real number per trial, trial i of ``a`` run on the same batch / seed / user as
            trial i of ``b`` (equal lengths ≥ 1).

    Raises:
        ValueError: if the lengths differ or are 0, or a value is NaN/inf (as :func:`interval`).
        TypeError: if a value is not a real number.
    """
    a_values, b_values = (np.asarray(list(v), dtype=float) for v in (a, b))
    if a_values.ndim != 1 or b_values.ndim != 1 or len(a_values) != len(b_values) or not len(a_values):
        raise ValueError(f"a and b must be equal-length flat sequences of ≥ 1 paired value, got "
                         f"shapes {a_values.shape} and {b_values.shape}")
    return interval((a_values - b_values).tolist())


def compare_paired(a: Sequence[float], b: Sequence[float], names: tuple[str, str] = ("A", "B"),
                   margin: float = 0.0) -> str:
    """``"A > B"`` / ``"A < B"`` (with ``names``) when the paired difference's 95 % interval lies wholly
    above ``margin`` / below −``margin``, else :data:`~gitutor.stats.NOT_RESOLVED` (also for a single
    pair). ``margin`` ≥ 0 is the smallest difference that counts (e.g. 0.5 dB of PSNR): a difference
    resolved from 0 but inside it is not called an ordering.

    Raises:
        ValueError/TypeError: as :func:`paired_difference`.
    """
    if not margin >= 0:
        raise ValueError(f"margin must be ≥ 0, got {margin!r}")
    difference = paired_difference(a, b)
    if difference.low > margin:
        return f"{names[0]} > {names[1]}"
    if difference.high < -margin:
        return f"{names[0]} < {names[1]}"
    return NOT_RESOLVED


def paired_ordering(results: Mapping[str, Sequence[float]], expected: Sequence[str], margin: float = 0.0) -> dict:
    """Judge an expected ordering (best first) by paired differences between neighbours.

    Args:
        results: ``{name: per-trial values}``, trial i of every name on the same batch / seed (higher
            is better; negate a lower-is-better metric first).
        expected: the names in the claimed order, best first (≥ 2, each a key of ``results``).
        margin: the smallest difference that counts (:func:`compare_paired`).

    Returns:
        ``{"pairs": {"A > B": verdict of compare_paired, …}, "outcome": "consistent" (every neighbour pair
        resolved in the claimed direction) | "refuted" (at least one resolved against it) |
        "not resolved"}``.

    Raises:
        ValueError: if ``expected`` has fewer than two names or names a key not in ``results`` (and as
            :func:`paired_difference`).
    """
    if len(expected) < 2 or any(name not in results for name in expected):
        raise ValueError(f"expected must name ≥ 2 keys of results {sorted(results)}, got {list(expected)}")
    pairs = {f"{a} > {b}": compare_paired(results[a], results[b], (a, b), margin)
             for a, b in zip(expected, expected[1:])}
    claimed = [f"{a} > {b}" for a, b in zip(expected, expected[1:])]
    if any(verdict not in (claim, NOT_RESOLVED) for claim, verdict in zip(claimed, pairs.values())):
        outcome = "refuted"
    elif all(verdict == claim for claim, verdict in zip(claimed, pairs.values())):
        outcome = "consistent"
    else:
        outcome = "not resolved"
    return {"pairs": pairs, "outcome": outcome}
