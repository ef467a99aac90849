"""Summaries of a setting-study record (``scripts/setting_study.py``): curves with intervals
over batches, tables and final images, for chapter 04 and ``book/trained_network``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gitutor.files import read_json
from gitutor.stats import BOUNDS, format_interval, interval
from gitutor.chapters.stepwise_gradinversion.setting_study.settings import (
    BASE,
    METHODS,
    Setting,
    study_batch,
)


def curves(outcomes: Sequence[Mapping]) -> dict[tuple[Setting, str, int], dict]:
    """``{(setting, method, iterations): {"t": [...], "PSNR": [Interval…], "SSIM": [...]}}``:
    mean and 95 % interval over batches at each checkpoint common to the batches.

    ``outcomes``: stored trials, each ``{"trial": {...}, "value": trial(...) output}``.
    """
    grouped: dict[tuple, list[list]] = {}
    for outcome in outcomes:
        t = outcome["trial"]
        grouped.setdefault((t["setting"], t["method"], t["iterations"]), []).append(
            outcome["value"]["curve"]
        )
    summary = {}
    for key, runs in grouped.items():
        times = sorted(set.intersection(*({row[0] for row in run} for run in runs)))
        rows = [{row[0]: row for row in run} for run in runs]
        summary[key] = {
            "t": times,
            "n": len(runs),
            "PSNR": [
                interval([r[t][1] for r in rows], bounds=BOUNDS["PSNR"]) for t in times
            ],
            "SSIM": [
                interval([r[t][2] for r in rows], bounds=BOUNDS["SSIM"]) for t in times
            ],
        }
    return summary


def load_record(path) -> tuple[list[dict], dict]:
    """The stored trials of a setting-study record (``scripts/setting_study.py``) with their
    ``setting`` turned back into :class:`Setting`, and the record's per-phase provenance.

    Raises:
        FileNotFoundError: if there is no record at ``path``.
        ValueError: naming ``path`` if it is truncated or not JSON.
    """
    record = read_json(path, "setting-study record")
    outcomes = [
        {**o, "trial": {**o["trial"], "setting": Setting(**o["trial"]["setting"])}}
        for o in record["trials"]
        if o["value"] is not None
    ]
    return outcomes, record["phases"]


def summary_rows(
    summary: Mapping[tuple, Mapping], at: Sequence[int] = (1000, 5000)
) -> list[dict]:
    """One row per (setting, method): SSIM and PSNR means with 95 % intervals at the
    iterations ``at`` (``"—"`` where the run was shorter), batches, and the factor changed."""
    rows = []
    for (setting, method, iterations), curve in summary.items():
        row = {
            "setting": setting.label(BASE),
            "method": method,
            "budget": iterations,
            "batches": curve["n"],
        }
        for t in at:
            k = curve["t"].index(t) if t in curve["t"] else None
            row[f"SSIM at {t}"] = (
                "—" if k is None else format_interval(curve["SSIM"][k], count=False)
            )
        row["PSNR at end (dB)"] = format_interval(curve["PSNR"][-1], count=False)
        rows.append(row)
    return rows


def best_setting(summary: Mapping[tuple, Mapping]) -> tuple[tuple, object]:
    """The (setting, method, iterations) key whose final mean SSIM is highest, and that
    :class:`~gitutor.stats.Interval`.

    Raises:
        ValueError: if ``summary`` is empty.
    """
    if not summary:
        raise ValueError("summary is empty: no trials were recorded")
    key = max(summary, key=lambda k: summary[k]["SSIM"][-1].mean)
    return key, summary[key]["SSIM"][-1]


def final_images(
    outcomes: Sequence[Mapping], key: tuple
) -> tuple[torch.Tensor, torch.Tensor]:
    """The truth and the final reconstructions of every batch of ``key`` = (setting, method,
    iterations), each ``(n · B, 3, S, S)`` in [0, 1], batches in order."""
    setting, method, iterations = key
    found = sorted(
        (
            o
            for o in outcomes
            if (o["trial"]["setting"], o["trial"]["method"], o["trial"]["iterations"])
            == key
        ),
        key=lambda o: o["trial"]["batch"],
    )
    truth = torch.cat([study_batch(setting, o["trial"]["batch"])[0] for o in found])
    images = torch.cat(
        [torch.tensor(o["value"]["images"], dtype=torch.float32) / 255 for o in found]
    )
    return truth, images


def recorded_table(
    summary: Mapping[tuple, Mapping], setting: Setting, iterations: int
) -> dict[str, dict]:
    """Table 1 of a recorded setting: ``{method: {"PSNR": Interval, "SSIM": Interval}}`` at the
    end of each method's ``iterations``-long runs, preceded by the noise baseline (every run's
    starting point, iteration 0 of the Inverting Gradients runs), methods in :data:`METHODS`
    order. Intervals are 95 % over the batches (:func:`curves`).

    Raises:
        KeyError: naming the (setting, method, iterations) the summary lacks.
    """
    table = {}
    for method in METHODS:
        key = (setting, method, iterations)
        if key not in summary:
            raise KeyError(
                f"the record holds no runs of {method} in setting "
                f"{setting.label(BASE)!r} at {iterations} iterations"
            )
        curve = summary[key]
        if method == METHODS[0] and curve["t"][0] == 0:
            table["Noise N(0, I)"] = {m: curve[m][0] for m in ("PSNR", "SSIM")}
        table[method] = {m: curve[m][-1] for m in ("PSNR", "SSIM")}
    return table


def seconds_per_iteration(outcomes: Sequence[Mapping]) -> dict[tuple[str, str], float]:
    """Mean wall seconds per iteration of each (setting label, method) in a record: what a trial
    cost on the recording machine (one Ray worker, one thread), scoring included."""
    costs: dict[tuple[str, str], list[float]] = {}
    for outcome in outcomes:
        t = outcome["trial"]
        costs.setdefault((t["setting"].label(BASE), t["method"]), []).append(
            outcome["value"]["seconds"] / t["iterations"]
        )
    return {key: sum(v) / len(v) for key, v in costs.items()}


def effect_rows(
    summary: Mapping[tuple, Mapping],
    factors: Mapping[str, Sequence[Setting]],
    budget: int,
) -> list[dict]:
    """One row per (factor setting, method) run for ``budget`` iterations: its final SSIM, the
    base's, and whether it ends higher or lower than the base beyond run-to-run noise
    (:func:`gitutor.stats.compare`: the 95 % intervals must not overlap) or "not resolved"."""
    from gitutor.stats import compare

    rows = []
    for factor, settings in factors.items():
        for setting in settings:
            for method in METHODS:
                key, base = (setting, method, budget), (BASE, method, budget)
                if key not in summary or base not in summary:
                    continue
                mine, reference = summary[key]["SSIM"][-1], summary[base]["SSIM"][-1]
                verdict = compare(mine, reference, ("setting", "base"))
                effect = {"setting > base": "higher", "setting < base": "lower"}.get(
                    verdict, verdict
                )
                rows.append(
                    {
                        "factor": factor,
                        "setting": setting.label(BASE),
                        "method": method,
                        "SSIM": format_interval(mine, count=False),
                        "base": format_interval(reference, count=False),
                        "vs base": effect,
                    }
                )
    return rows
