"""The "paper vs this run" record every notebook ends with, and the book-wide summary.

Each notebook saves ``{RESULTS_DIR}/{notebook}.json``:
``{"notebook", "profile", "rows": [{"quantity", "setting", "paper", "this_run", "unit", "differences"}]}``.
The "Results at a glance" page reads every such file with :func:`collect_results`.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

ROW_KEYS = ("quantity", "setting", "paper", "this_run", "unit", "differences")


def _check_row(row: Mapping) -> dict:
    if not isinstance(row, Mapping):
        raise TypeError(f"each row must be a dict with keys {ROW_KEYS}, got {type(row).__name__}")
    missing = [key for key in ROW_KEYS if key not in row]
    extra = [key for key in row if key not in ROW_KEYS]
    if missing or extra:
        raise ValueError(f"row {dict(row)!r}: missing keys {missing}, unknown keys {extra}; keys are {ROW_KEYS}")
    this_run = row["this_run"]
    if isinstance(this_run, float) and not math.isfinite(this_run):
        this_run = str(this_run)  # JSON has no inf/nan; keep them readable
    return {key: (this_run if key == "this_run" else row[key]) for key in ROW_KEYS}


def save_results(notebook: str, profile: str, rows: Sequence[Mapping], results_dir: str | Path) -> Path:
    """Write the notebook's paper-vs-run rows to ``{results_dir}/{notebook}.json``; returns the path.

    Raises:
        ValueError / TypeError: if a row lacks one of :data:`ROW_KEYS` or has others, or ``rows`` is empty.
    """
    checked = [_check_row(row) for row in rows]
    if not checked:
        raise ValueError("rows is empty: a notebook must report at least one paper-vs-run row")
    path = Path(results_dir) / f"{notebook}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"notebook": notebook, "profile": profile, "rows": checked}, indent=2))
    return path


def collect_results(results_dir: str | Path) -> list[dict]:
    """Every ``*.json`` record in ``results_dir``, sorted by notebook name.

    Raises:
        ValueError: if ``results_dir`` does not exist.
    """
    folder = Path(results_dir)
    if not folder.is_dir():
        raise ValueError(f"results folder {folder.resolve()} does not exist; run the notebooks first (make notebooks)")
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def results_table(rows: Sequence[Mapping], notebook_column: Sequence[str] | None = None) -> str:
    """A Markdown table of paper-vs-run rows (optionally with a leading notebook column)."""
    header = (["notebook"] if notebook_column else []) + ["quantity", "setting", "paper", "this run", "unit",
                                                           "differences"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for index, row in enumerate(rows):
        cells = ([notebook_column[index]] if notebook_column else []) + [_cell(row[key]) for key in ROW_KEYS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_table(records: Sequence[Mapping]) -> str:
    """One Markdown table of all notebooks' rows (the "Results at a glance" page)."""
    rows = [row for record in records for row in record["rows"]]
    names = [f"{record['notebook']} ({record['profile']})" for record in records for _ in record["rows"]]
    return results_table(rows, notebook_column=names)
