"""What the native recording (``book/studies/04_native.json``, :mod:`.native`) says, as table rows.

* :func:`sanity_rows` — per method and learning rate, the sanity arm (start: the truth plus σ = 0.01
  noise): PSNR at the start and the end, how many photographs it keeps at ≥ 30 dB (the book's
  "recognisable", :data:`gitutor.controls.RECOGNISABLE_PSNR`), and its final matching distance over the
  truth-plus-noise distance (above 1: the run moved to images whose gradient matches worse than the
  photograph's own with a little noise).
* :func:`prior_rows` — each prior's image gradient over the matching term's, and the fraction of pixels
  whose update keeps the matching term's sign, at T1, T2 and the end (median over photographs).
* :func:`score_rows` / :func:`paired_rows` — the attack's final scores per method and the paired
  differences behind the paper's ordering (the same photographs for every method).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from gitutor.controls import RECOGNISABLE_PSNR
from gitutor.paired import compare_paired, oriented, paired_difference
from gitutor.stats import BOUNDS, format_interval, interval

#: The columns of a curve entry of a native trial (:func:`.native.trial`).
CURVE = ("iteration", "PSNR", "SSIM", "LPIPS", "layout r")
DIGITS = {"PSNR": 2, "SSIM": 3, "LPIPS": 3, "layout r": 3}
#: The paper's ordering, best first, for the paired rows.
ORDERING = ("Stepwise", "GradInversion", "Inverting Gradients")


def load_native(path: str | Path) -> tuple[dict[str, list[dict]], dict]:
    """``({phase: [trial entries]}, {phase: provenance})`` of a native record.

    Raises:
        ValueError: naming ``path`` when it is not a setting-study record.
    """
    record = json.loads(Path(path).read_text())
    if not (
        isinstance(record, dict)
        and isinstance(record.get("trials"), list)
        and isinstance(record.get("phases"), dict)
    ):
        raise ValueError(
            f"{path} is not a setting-study record (a 'trials' list and a 'phases' dict)"
        )
    phases: dict[str, list[dict]] = {}
    for entry in record["trials"]:
        phases.setdefault(entry["phase"], []).append(entry)
    return phases, record["phases"]


def _arms(entries: Sequence[Mapping]) -> dict[tuple[str, float | None], list[Mapping]]:
    """``{(method, lr): [entries sorted by photograph]}`` (lr None: the authors')."""
    arms: dict[tuple, list] = {}
    for entry in entries:
        trial = entry["trial"]
        arms.setdefault((trial["method"], trial["setting"].get("lr")), []).append(entry)
    return {
        key: sorted(value, key=lambda e: e["trial"]["batch"])
        for key, value in arms.items()
    }


def _lr(lr: float | None) -> str:
    return "0.1 (the authors')" if lr is None else f"{lr:g}"


def _final(entry: Mapping, column: str) -> float:
    return entry["value"]["curve"][-1][CURVE.index(column)]


def sanity_rows(entries: Sequence[Mapping]) -> list[dict]:
    """One row per (method, lr) of a sanity phase (see the module docstring)."""
    rows = []
    for (method, lr), arm in _arms(entries).items():
        start = [e["value"]["curve"][0][1] for e in arm]
        end = [_final(e, "PSNR") for e in arm]
        ratios = [
            e["value"]["distance"]["final"] / e["value"]["distance"]["truth+noise"]
            for e in arm
        ]
        rows.append(
            {
                "method": method,
                "lr": _lr(lr),
                "photographs": len(arm),
                "PSNR at the start (dB)": f"{statistics.mean(start):.1f}",
                "PSNR at the end (dB)": format_interval(
                    interval(end, bounds=BOUNDS["PSNR"]), 1, count=False
                ),
                f"kept ≥ {RECOGNISABLE_PSNR:g} dB": f"{sum(v >= RECOGNISABLE_PSNR for v in end)} of {len(end)}",
                "matching distance, end / truth + noise": f"{statistics.median(ratios):.2f}",
            }
        )
    return rows


def prior_rows(entries: Sequence[Mapping]) -> list[dict]:
    """One row per (method, lr, diagnosed iteration): the medians over photographs of each prior's
    gradient norm over the matching term's and of the sign agreement (see the module docstring)."""
    rows = []
    for (method, lr), arm in _arms(entries).items():
        points = sorted({int(t) for e in arm for t in e["value"]["prior_gradients"]})
        for t in points:
            found = [
                e["value"]["prior_gradients"][str(t)]
                for e in arm
                if str(t) in e["value"]["prior_gradients"]
            ]
            row = {"method": method, "lr": _lr(lr), "iteration": t}
            for key in ("TV/matching", "R_BN/matching", "sign_agreement"):
                values = [f[key] for f in found if key in f]
                row[key] = f"{statistics.median(values):.3g}" if values else "—"
            rows.append(row)
    return rows


def score_rows(entries: Sequence[Mapping]) -> list[dict]:
    """Per (method, lr): the final PSNR, SSIM, LPIPS and layout r, mean [95 % interval] over photographs."""
    rows = []
    for (method, lr), arm in _arms(entries).items():
        row = {"method": method, "lr": _lr(lr), "photographs": len(arm)}
        for column in CURVE[1:]:
            values = [_final(e, column) for e in arm]
            row[column] = format_interval(
                interval(values, bounds=BOUNDS.get(column, (-1.0, 1.0))),
                DIGITS[column],
                count=False,
            )
        rows.append(row)
    return rows


def paired_rows(entries: Sequence[Mapping], margins: Mapping[str, float]) -> list[dict]:
    """The paired differences A − B for the neighbours of :data:`ORDERING` (same lr), per metric the
    mean [95 % interval] and the better arm by :func:`gitutor.paired.compare_paired` with ``margins``
    (``"not resolved"`` when the interval holds the margin).

    Raises:
        ValueError: if two arms do not hold the same photographs.
    """
    arms, rows = _arms(entries), []
    for lr in sorted({lr for _, lr in arms}, key=lambda v: -1 if v is None else v):
        for a, b in zip(ORDERING, ORDERING[1:]):
            if (a, lr) not in arms or (b, lr) not in arms:
                continue
            runs_a, runs_b = arms[(a, lr)], arms[(b, lr)]
            if [e["trial"]["batch"] for e in runs_a] != [
                e["trial"]["batch"] for e in runs_b
            ]:
                raise ValueError(
                    f"{a} and {b} at lr {_lr(lr)} do not hold the same photographs"
                )
            row = {"A": a, "B": b, "lr": _lr(lr), "pairs": len(runs_a)}
            for m in ("PSNR", "SSIM", "LPIPS"):
                va, vb = [_final(e, m) for e in runs_a], [_final(e, m) for e in runs_b]
                row[f"Δ{m} (A − B)"] = format_interval(
                    paired_difference(va, vb), DIGITS[m], count=False
                )
                found = compare_paired(
                    oriented(m, va), oriented(m, vb), ("A", "B"), margins.get(m, 0.0)
                )
                row[f"{m}: better"] = {"A > B": a, "A < B": b}.get(
                    found, "not resolved"
                )
            rows.append(row)
    return rows
