"""The range each row's quantity can take, and the check that no number or interval of a
results record lies outside it (:func:`check_bounds`; :func:`~gitutor.results.save_results`
and :func:`~gitutor.results.read_record` run it on every record).

A row's range is read off its ``unit`` and ``quantity`` (:func:`row_bounds`, in any letter case:
"psnr", "Ssim" and a unit "db" are the same quantities, so no spelling escapes the check): SSIM in [−1, 1];
PSNR (or unit dB), MSE and LPIPS ≥ 0; a fraction, accuracy or rate in [0, 1]; a percentage
(unit %) in [0, 100]. A quantity that transforms a metric (a log, a difference, a ratio, a
gain: "Δ log MSE", "PSNR gap") can be negative or above 1 and gets no range; so does a row
that names no metric or more than one.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping

from gitutor.stats import BOUNDS

_METRICS = ("SSIM", "PSNR", "MSE", "LPIPS")
_TRANSFORMED = re.compile(
    r"\blog|Δ|\bdelta\b|differen|ratio|\bgap\b|\bgain\b|change|improve|\beffect\b| − |×|/",
    re.IGNORECASE,
)
_RATE = re.compile(r"\b(accuracy|rate|fraction|share)\b", re.IGNORECASE)


def row_bounds(row: Mapping) -> tuple[float, float] | None:
    """``(low, high)``: the range of ``row``'s quantity, or None when none is known.

    Raises:
        KeyError: if ``row`` lacks ``quantity`` or ``unit``.
    """
    quantity, unit = str(row["quantity"]), str(row["unit"]).strip()
    if _TRANSFORMED.search(quantity) or _TRANSFORMED.search(unit):
        return None
    if unit.lower() in ("%", "percent", "per cent"):
        return BOUNDS["percent"]
    if unit.lower() == "db":
        return BOUNDS["PSNR"]
    named = {
        m
        for m in _METRICS
        if re.search(rf"\b{m}\b", f"{quantity} {unit}", re.IGNORECASE)
    }
    if len(named) == 1:
        return BOUNDS[named.pop()]
    if not named and (
        unit.lower().startswith("fraction") or _RATE.search(quantity) and not unit
    ):
        return BOUNDS["fraction"]
    return None


def _real(value) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def bounds_problem(row: Mapping) -> str | None:
    """What of ``row`` lies outside :func:`row_bounds` (None: nothing)."""
    bounds = row_bounds(row)
    if bounds is None:
        return None
    outside = [
        f"{key} = {row[key]!r}"
        for key in ("this_run", "low", "high")
        if _real(row.get(key)) and not bounds[0] <= row[key] <= bounds[1]
    ]
    if not outside:
        return None
    return (
        f"{', '.join(outside)} lies outside the range [{bounds[0]:g}, {bounds[1]:g}] of "
        f"{row['quantity']!r} (unit {row['unit']!r}); compute its interval with "
        "gitutor.stats.interval(values, bounds=...)"
    )


def check_bounds(record: Mapping) -> Mapping:
    """``record`` unchanged, after checking that no row's number or interval lies outside
    its quantity's range (:func:`row_bounds`).

    Raises:
        ValueError: naming the record's notebook, the row and the value out of range.
    """
    for key in ("rows", "timings"):
        for index, row in enumerate(record.get(key, [])):
            problem = bounds_problem(row)
            if problem:
                raise ValueError(
                    f"{record.get('notebook', 'record')} {key}[{index}]: {problem}"
                )
    return record
