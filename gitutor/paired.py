"""Paired comparisons: two methods run on the *same* batches, seeds or users.

When the design is paired, the evidence that A beats B is the interval of the per-trial
differences a_i − b_i, not whether A's and B's own intervals overlap (which ignores that a hard
batch is hard for both). :func:`paired_difference` gives that interval (:func:`gitutor.stats.interval`
over the differences: Student-t below 20 pairs, BCa bootstrap from 20) and :func:`compare_paired`
reads it: "A > B" when the whole interval is above 0, "A < B" when below, else
:data:`gitutor.stats.NOT_RESOLVED`. With one pair there is no interval and nothing is claimed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from gitutor.checks import check_choice, check_real
from gitutor.stats import NOT_RESOLVED, Interval, interval

#: Metrics of reconstructions where a lower value is a better reconstruction.
LOWER_IS_BETTER = frozenset({"LPIPS", "MSE"})
#: Metrics where a higher value is better: PSNR, SSIM and a correlation with the truth ("layout r",
#: chapter 04's layout correlation).
HIGHER_IS_BETTER = frozenset({"PSNR", "SSIM", "layout r"})
#: Every metric :func:`oriented` knows, in any letter case (as :mod:`gitutor.results.bounds` reads
#: "psnr", "Ssim"; :func:`gitutor.metrics.score_batch` names them in lower case).
METRICS = tuple(sorted(HIGHER_IS_BETTER | LOWER_IS_BETTER))


def oriented(metric: str, values: Sequence[float]) -> list[float]:
    """``values`` of ``metric`` turned so that higher is better (negated for
    :data:`LOWER_IS_BETTER`), so that "A > B" of :func:`compare_paired` reads "A better".

    ``metric`` is one of :data:`METRICS` in any letter case (``"lpips"`` is LPIPS, lower is better).

    Raises:
        TypeError: naming ``metric`` when it is not a string, or ``values`` when a value is not a real
            number (``"0.3"``, ``True``).
        ValueError: naming ``metric`` and :data:`METRICS` when it is none of them (a name it does not know
            could be either way up).
    """
    metric = check_choice(metric, "metric", METRICS, ignore_case=True)
    if isinstance(values, (str, bytes)):
        raise TypeError(f"values must be a sequence of real numbers, got {values!r}")
    sign = -1.0 if metric in LOWER_IS_BETTER else 1.0
    return [
        sign * check_real(v, f"values[{i}]", finite=False) for i, v in enumerate(values)
    ]


def paired_difference(a: Sequence[float], b: Sequence[float]) -> Interval:
    """Mean and 95 % interval of a_i − b_i over pairs i (same units as a and b; unbounded).

    Args:
        a, b: one real number per trial, trial i of ``a`` run on the same batch / seed / user as
            trial i of ``b`` (equal lengths ≥ 1).

    Raises:
        ValueError: if the lengths differ or are 0, or a value is NaN/inf (as :func:`interval`).
        TypeError: naming ``a`` or ``b`` when it is not a sequence, or ``a[i]``/``b[i]`` when a value is
            not a real number (a number as text such as ``"0.5"``, a bool, a nested list).
    """
    for name, values in (("a", a), ("b", b)):
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise TypeError(
                f"{name} must be a sequence of real numbers, one per trial, got {type(values).__name__}"
            )
    a, b = list(a), list(b)
    for name, values in (("a", a), ("b", b)):
        for i, value in enumerate(values):
            if not (
                isinstance(value, np.ndarray) and value.ndim
            ):  # nested: refused by shape below
                check_real(value, f"{name}[{i}]", finite=False)
    a_values, b_values = (np.asarray(v, dtype=float) for v in (a, b))
    if (
        a_values.ndim != 1
        or b_values.ndim != 1
        or len(a_values) != len(b_values)
        or not len(a_values)
    ):
        raise ValueError(
            f"a and b must be equal-length flat sequences of ≥ 1 paired value, got "
            f"shapes {a_values.shape} and {b_values.shape}"
        )
    return interval((a_values - b_values).tolist())


def compare_paired(
    a: Sequence[float],
    b: Sequence[float],
    names: tuple[str, str] = ("A", "B"),
    margin: float = 0.0,
) -> str:
    """``"A > B"`` / ``"A < B"`` (with ``names``) when the paired difference's 95 % interval lies wholly
    above ``margin`` / below −``margin``, else :data:`~gitutor.stats.NOT_RESOLVED` (also for a single
    pair). ``margin`` ≥ 0 is the smallest difference that counts (e.g. 0.5 dB of PSNR): a difference
    resolved from 0 but inside it is not called an ordering.

    Raises:
        ValueError/TypeError: as :func:`paired_difference`; naming ``margin`` when it is not a finite
            number ≥ 0 (``"0.5"``, NaN, inf), or ``names`` when it is not two strings.
    """
    margin = check_real(margin, "margin", low=0.0)
    if (
        isinstance(names, str)
        or len(names) != 2
        or not all(isinstance(name, str) for name in names)
    ):
        raise ValueError(f"names must be two strings (A's and B's), got {names!r}")
    difference = paired_difference(a, b)
    if difference.low > margin:
        return f"{names[0]} > {names[1]}"
    if difference.high < -margin:
        return f"{names[0]} < {names[1]}"
    return NOT_RESOLVED


def paired_ordering(
    results: Mapping[str, Sequence[float]], expected: Sequence[str], margin: float = 0.0
) -> dict:
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
        ValueError: if ``expected`` has fewer than two names, names a key not in ``results`` or one twice
            (and as :func:`paired_difference`, and ``margin`` as :func:`compare_paired`).
        TypeError: if ``expected`` is a string (a sequence of names is needed).
    """
    if isinstance(expected, str):
        raise TypeError(
            f"expected must be a sequence of names of results, got the string {expected!r}"
        )
    if (
        len(expected) < 2
        or any(name not in results for name in expected)
        or len(set(expected)) != len(expected)
    ):
        raise ValueError(
            f"expected must name ≥ 2 keys of results {sorted(results)}, got {list(expected)}"
        )
    pairs = {
        f"{a} > {b}": compare_paired(results[a], results[b], (a, b), margin)
        for a, b in zip(expected, expected[1:])
    }
    claimed = [f"{a} > {b}" for a, b in zip(expected, expected[1:])]
    if any(
        verdict not in (claim, NOT_RESOLVED)
        for claim, verdict in zip(claimed, pairs.values())
    ):
        outcome = "refuted"
    elif all(verdict == claim for claim, verdict in zip(claimed, pairs.values())):
        outcome = "consistent"
    else:
        outcome = "not resolved"
    return {"pairs": pairs, "outcome": outcome}
