"""The breaching audit on the setting-study page: our Inverting Gradients and GradInversion next
to breaching's ``invertinggradients`` and ``seethroughgradients`` on the study's base case, from
the record ``book/studies/04_breaching_audit.json`` of ``benchmarks/breaching_audit.py``.

A record is ``{"runs": [{"key": [method, implementation, B, batch, iterations], "PSNR": dB,
"SSIM": …, "seconds": wall seconds, …}], "provenance": [...]}``; the implementations are
``"ours"``, ``"breaching"`` and ``"ours at breaching's scale"``.
"""
from __future__ import annotations

from collections.abc import Mapping

from gitutor.stats import format_interval, interval
from gitutor.tables import markdown_table

REFERENCE = "ours"
HEADER = ("method", "B", "iterations", "implementation", "batches", "PSNR (dB)", "SSIM",
          "SSIM − ours, paired", "s per run")


def audit_runs(record: Mapping) -> dict[tuple, dict[int, Mapping]]:
    """``{(method, B, iterations, implementation): {batch: run}}`` from a record, in record order.

    Raises:
        ValueError: if ``record`` has no ``"runs"`` list or a run's ``"key"`` is not
            ``[method, implementation, B, batch, iterations]``, or lacks PSNR, SSIM or seconds.
    """
    runs = record.get("runs") if isinstance(record, Mapping) else None
    if not isinstance(runs, list):
        raise ValueError(f"record must be a mapping with a 'runs' list, got {type(record).__name__}")
    grouped: dict[tuple, dict[int, Mapping]] = {}
    for run in runs:
        key = run.get("key")
        if not (isinstance(key, list) and len(key) == 5) or not {"PSNR", "SSIM", "seconds"} <= set(run):
            raise ValueError(f"record run {key!r} needs key [method, implementation, B, batch, iterations] "
                             "and PSNR, SSIM, seconds")
        method, implementation, batch_size, batch, iterations = key
        grouped.setdefault((method, batch_size, iterations, implementation), {})[batch] = run
    return grouped


def audit_table(record: Mapping) -> str:
    """A Markdown table, one row per (method, B, iterations, implementation): final PSNR (dB)
    and SSIM as mean [95 % interval] over the batches (:func:`gitutor.stats.interval`), the SSIM
    difference to ours on the same batches (mean [95 % interval] of the per-batch differences;
    "—" for ours or where ours lacks those batches) and the mean wall seconds per run.

    Raises:
        ValueError: as :func:`audit_runs`, or for a record without runs.
    """
    grouped = audit_runs(record)
    if not grouped:
        raise ValueError("record holds no runs")
    rows = []
    for (method, batch_size, iterations, implementation), runs in sorted(
            grouped.items(), key=lambda item: (item[0][:3], _order(item[0][3]))):
        ours = grouped.get((method, batch_size, iterations, REFERENCE), {})
        paired = "—"
        if implementation != REFERENCE and set(runs) <= set(ours):
            paired = format_interval(interval([runs[b]["SSIM"] - ours[b]["SSIM"] for b in runs]), 3, count=False)
        rows.append([method, batch_size, iterations, implementation, len(runs),
                     format_interval(interval([r["PSNR"] for r in runs.values()]), 2, count=False),
                     format_interval(interval([r["SSIM"] for r in runs.values()]), 3, count=False),
                     paired, f"{sum(r['seconds'] for r in runs.values()) / len(runs):.0f}"])
    return markdown_table(HEADER, rows)


def _order(implementation: str) -> tuple[int, str]:
    """Ours first, then breaching, then the rest by name."""
    return ({REFERENCE: 0, "breaching": 1}.get(implementation, 2), implementation)
