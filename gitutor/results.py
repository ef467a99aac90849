"""The "paper vs this run" record every notebook ends with, and the book-wide summary.

Each notebook saves ``{RESULTS_DIR}/{notebook}.json``::

    {"notebook", "profile", "rows": [row, ...], "timings": [row, ...]}

A row has the keys :data:`ROW_KEYS` and may add ``"better"`` (``"higher"`` or ``"lower"``: which
direction of the number is the better attack), which makes the row comparable and gives it a
:func:`verdict`. Wall-clock rows go in ``timings``, apart from the results, so that two runs with the
same seed give identical ``rows``. Recorded runs (``book/recorded/``) use the same record with an
extra ``"provenance"`` dict. The "Results at a glance" page reads the records with
:func:`collect_results`.
"""
from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from gitutor.tables import markdown_table

ROW_KEYS = ("quantity", "setting", "paper", "this_run", "unit", "differences")
OPTIONAL_KEYS = ("better",)
DIRECTIONS = ("higher", "lower")
TOLERANCE = 0.05
VERDICT_RULE = (f"**meets**: this run's number is at least as good as the paper's, allowing {TOLERANCE:.0%} of "
                "the paper's value (higher or lower is better as the row states); **falls short**: otherwise; "
                "**not comparable**: the row states no direction, or either number is not a finite number.")
_NOTEBOOK_NAME = re.compile(r"^[0-9]{2}_[A-Za-z0-9_]+$")


def _plain(value, where: str):
    """``value`` as a JSON-able Python scalar: numpy/torch scalars unwrapped, inf/nan as strings."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else str(value)  # JSON has no inf/nan; keep them readable
    raise TypeError(f"{where} must be a number, a string or None, got {type(value).__name__}")


def _check_row(row: Mapping, where: str) -> dict:
    if not isinstance(row, Mapping):
        raise TypeError(f"{where} must be a dict with keys {ROW_KEYS}, got {type(row).__name__}")
    missing = [key for key in ROW_KEYS if key not in row]
    extra = [key for key in row if key not in ROW_KEYS + OPTIONAL_KEYS]
    if missing or extra:
        raise ValueError(f"{where} {dict(row)!r}: missing keys {missing}, unknown keys {extra}; "
                         f"keys are {ROW_KEYS} and optionally {OPTIONAL_KEYS}")
    if "better" in row and row["better"] not in DIRECTIONS:
        raise ValueError(f"{where}: 'better' must be one of {DIRECTIONS}, got {row['better']!r}")
    return {key: _plain(row[key], f"{where}[{key!r}]") for key in ROW_KEYS + OPTIONAL_KEYS if key in row}


def save_results(notebook: str, profile: str, rows: Sequence[Mapping], results_dir: str | Path,
                 timings: Sequence[Mapping] = ()) -> Path:
    """Write the notebook's paper-vs-run rows to ``{results_dir}/{notebook}.json``; returns the path.

    Args:
        notebook: the chapter's name, e.g. ``"01_dlg"`` (two digits, underscore, letters/digits).
        profile: ``"quick"`` or ``"full"`` (any name :mod:`gitutor.profiles` defines).
        rows: the paper-vs-run rows (keys :data:`ROW_KEYS`, optional ``"better"``).
        results_dir: the folder of the records (created if missing).
        timings: wall-clock rows (same keys), stored apart from ``rows``.

    Raises:
        ValueError: ``notebook`` is not a plain chapter name (no paths), ``rows`` is empty, or a row lacks
            one of :data:`ROW_KEYS`, has an unknown key or an unknown ``better``.
        TypeError: a row is not a dict or a value is not a number, string or None.
    """
    if not isinstance(notebook, str) or not _NOTEBOOK_NAME.match(notebook):
        raise ValueError(f"notebook must be a chapter name such as '01_dlg' (no path), got {notebook!r}")
    if not isinstance(profile, str) or not profile:
        raise ValueError(f"profile must be a non-empty string such as 'quick', got {profile!r}")
    checked = [_check_row(row, f"rows[{i}]") for i, row in enumerate(rows)]
    if not checked:
        raise ValueError("rows is empty: a notebook must report at least one paper-vs-run row")
    timed = [_check_row(row, f"timings[{i}]") for i, row in enumerate(timings)]
    path = Path(results_dir) / f"{notebook}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"notebook": notebook, "profile": profile, "rows": checked, "timings": timed}
    path.write_text(json.dumps(record, indent=2, allow_nan=False))
    return path


def collect_results(*folders: str | Path) -> list[dict]:
    """Every ``*.json`` record in ``folders``, sorted by notebook name (a record keeps the folder order).

    Raises:
        ValueError: if no folder is given or the first one does not exist (later folders may be missing).
    """
    if not folders:
        raise ValueError("collect_results needs at least one results folder")
    if not Path(folders[0]).is_dir():
        raise ValueError(f"results folder {folders[0]} does not exist; run the notebooks first (make notebooks)")
    records = [json.loads(path.read_text()) for folder in folders if Path(folder).is_dir()
               for path in sorted(Path(folder).glob("*.json"))]
    return sorted(records, key=lambda record: (record["notebook"], "provenance" in record))


def verdict(row: Mapping) -> str:
    """``"meets"``, ``"falls short"`` or ``"not comparable"`` for one row, by :data:`VERDICT_RULE`."""
    paper, run, better = row.get("paper"), row.get("this_run"), row.get("better")
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (paper, run))
    if better not in DIRECTIONS or not numeric:
        return "not comparable"
    slack = TOLERANCE * abs(paper)
    ok = run >= paper - slack if better == "higher" else run <= paper + slack
    return "meets" if ok else "falls short"


def _number(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def results_table(rows: Sequence[Mapping], notebook_column: Sequence[str] | None = None,
                  verdicts: bool = True) -> str:
    """A Markdown table of paper-vs-run rows (optionally with a leading notebook column and a verdict column).

    When every row states the same ``differences`` (and there is no notebook column), that text is
    printed once above the table instead of in every row.
    """
    shared = {row["differences"] for row in rows}
    once = notebook_column is None and len(shared) == 1
    keys = [key for key in ROW_KEYS if not (once and key == "differences")]
    names = {"this_run": "this run"}
    header = (["notebook"] if notebook_column else []) + [names.get(key, key) for key in keys] + (
        ["verdict"] if verdicts else [])
    lines = [([notebook_column[index]] if notebook_column else []) + [_number(row[key]) for key in keys]
             + ([verdict(row)] if verdicts else []) for index, row in enumerate(rows)]
    preface = f"**Differences from the paper (every row):** {shared.pop()}\n\n" if once else ""
    return preface + markdown_table(header, lines)


def record_label(record: Mapping) -> str:
    """``"01_dlg (quick)"``, or ``"04_… (recorded, full)"`` for a recorded run."""
    kind = "recorded, " if "provenance" in record else ""
    return f"{record['notebook']} ({kind}{record['profile']})"


def summary_table(records: Sequence[Mapping]) -> str:
    """One Markdown table of all notebooks' rows (the "Results at a glance" page)."""
    rows = [row for record in records for row in record["rows"]]
    names = [record_label(record) for record in records for _ in record["rows"]]
    return results_table(rows, notebook_column=names)


def verdict_counts(records: Sequence[Mapping]) -> str:
    """A Markdown table: per record, how many rows meet / fall short / are not comparable."""
    outcomes = ("meets", "falls short", "not comparable")
    counts = [[verdict(row) for row in record["rows"]] for record in records]
    return markdown_table(["chapter", *outcomes], [[record_label(record), *(str(found.count(o)) for o in outcomes)]
                                                   for record, found in zip(records, counts)])


def timings_table(records: Sequence[Mapping]) -> str:
    """A Markdown table of every record's wall-clock rows (they vary run to run)."""
    rows = [row for record in records for row in record.get("timings", [])]
    names = [record_label(record) for record in records for _ in record.get("timings", [])]
    return results_table(rows, notebook_column=names, verdicts=False) if rows else "No timings were recorded."


def verdict_sentence(rows: Sequence[Mapping]) -> str:
    """One sentence a chapter ends with: how many of its paper-vs-run ``rows`` meet, fall short or are
    not comparable by :data:`VERDICT_RULE` (e.g. ``"2 of 5 rows meet the paper, 3 fall short."``).

    Raises:
        ValueError: if ``rows`` is empty.
    """
    if not rows:
        raise ValueError("rows is empty: a chapter reports at least one paper-vs-run row")
    found = [verdict(row) for row in rows]
    counts = {outcome: found.count(outcome) for outcome in ("meets", "falls short", "not comparable")}
    parts = [f"{counts['meets']} of {len(found)} rows meet the paper"]
    parts += [f"{counts[o]} {'fall short' if o == 'falls short' else 'are not comparable'}"
              for o in ("falls short", "not comparable") if counts[o]]
    return ", ".join(parts) + "."
