"""The "paper vs this run" record every notebook ends with, and the book-wide summary.

Each notebook saves ``{RESULTS_DIR}/{notebook}.json``::

    {"notebook", "profile", "rows": [row, ...], "timings": [row, ...]}

A row has the keys :data:`ROW_KEYS` and may add ``"better"`` (``"higher"`` or
``"lower"``: which direction of the number is the better attack), which makes the row
comparable and gives it a :func:`verdict`; ``"low"`` and ``"high"``, the 95 % interval of
this run's number over its trials (a verdict then needs the whole interval on one side of
the paper's value); and ``"headline": true``, which makes it
the row that stands for its chapter on the "Results at a glance" page
(:data:`HEADLINE_RULE`). Wall-clock rows go in ``timings``, apart from the results, so
that two runs with the same seed give identical ``rows``. Recorded runs
(``book/recorded/``) use the same record with an extra ``"provenance"`` dict.

The "Results at a glance" page (``book/results.ipynb``) reads the records with
:func:`collect_results` and shows :func:`glance_table` (one line per record: a chapter
run, or a recorded run of its own) above :func:`chapter_details` (each record's full
:func:`results_table` in a dropdown) and :func:`timings_table`.
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
OPTIONAL_KEYS = ("better", "low", "high", "headline")
DIRECTIONS = ("higher", "lower")
TOLERANCE = 0.05
VERDICT_RULE = (
    "**meets**: this run's number is at least as good as the paper's, allowing "
    f"{TOLERANCE:.0%} of the paper's value (higher or lower is better as the row "
    "states); **falls short**: otherwise. Where the row gives this run's 95 % interval "
    "over its trials, the whole interval must be on one side: an interval that holds "
    "the paper's value (with that allowance) is **not resolved**. **not comparable**: "
    "the row states no direction, or either number is not a finite number."
)
HEADLINE_RULE = (
    'A chapter\'s **headline row** is the row its record marks `"headline": true`; '
    "a chapter that marks none is represented by its first comparable row (a row that "
    "states which direction is better and has two finite numbers), and a chapter with "
    "no comparable row by its first row."
)
OUTCOMES = ("meets", "falls short", "not resolved", "not comparable")
#: Short names of the chapters for tables (a notebook not listed gets its file name).
CHAPTER_NAMES = {
    "01_dlg": "DLG",
    "02_idlg_soft_labels": "iDLG and soft labels",
    "03_cv_batch_labels": "Batch labels (CV)",
    "04_stepwise_gradinversion": "Stepwise GradInversion",
    "05_diffusion_user_level": "User-level diffusion",
    "06_learning_to_invert": "Learning to invert",
    "07_admm_comparison": "DLG against FedADMM",
    "08_flower_dp": "Flower and Opacus DP-SGD",
}
#: Character limits of the glance table's cells; longer text is cut at a word ("…").
GLANCE_LIMITS = {"headline": 60, "value": 32}
_NOTEBOOK_NAME = re.compile(r"^[0-9]{2}_[A-Za-z0-9_]+$")


def _plain(value, where: str):
    """``value`` as a JSON scalar: numpy/torch scalars unwrapped, inf/nan as str."""
    if (
        hasattr(value, "item")
        and callable(value.item)
        and getattr(value, "ndim", 0) == 0
    ):
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        # JSON has no inf/nan; keep them readable
        return value if math.isfinite(value) else str(value)
    raise TypeError(
        f"{where} must be a number, a string or None, got {type(value).__name__}"
    )


def _finite(value) -> bool:
    """A finite real number (not a bool)."""
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def interval_fields(interval, digits: int) -> dict:
    """A row's ``"low"``/``"high"`` from a :class:`gitutor.stats.Interval`, rounded to
    ``digits``; ``{}`` for None or an unbounded interval (one trial)."""
    if interval is None or not (_finite(interval.low) and _finite(interval.high)):
        return {}
    return {"low": round(interval.low, digits), "high": round(interval.high, digits)}


def _check_row(row: Mapping, where: str) -> dict:
    if not isinstance(row, Mapping):
        raise TypeError(
            f"{where} must be a dict with keys {ROW_KEYS}, got {type(row).__name__}"
        )
    missing = [key for key in ROW_KEYS if key not in row]
    extra = [key for key in row if key not in ROW_KEYS + OPTIONAL_KEYS]
    if missing or extra:
        raise ValueError(
            f"{where} {dict(row)!r}: missing keys {missing}, unknown keys {extra}; "
            f"keys are {ROW_KEYS} and optionally {OPTIONAL_KEYS}"
        )
    if "better" in row and row["better"] not in DIRECTIONS:
        raise ValueError(
            f"{where}: 'better' must be one of {DIRECTIONS}, got {row['better']!r}"
        )
    if ("low" in row) != ("high" in row):
        raise ValueError(f"{where}: give both 'low' and 'high' (this run's interval) or neither")
    if "low" in row and not (
        all(_finite(row[key]) for key in ("low", "high")) and row["low"] <= row["high"]
    ):
        raise ValueError(
            f"{where}: 'low' and 'high' must be finite numbers with low ≤ high, "
            f"got {row['low']!r}, {row['high']!r}"
        )
    if "headline" in row and not isinstance(row["headline"], bool):
        raise TypeError(
            f"{where}: 'headline' must be True or False, got {row['headline']!r}"
        )
    return {
        key: _plain(row[key], f"{where}[{key!r}]")
        for key in ROW_KEYS + OPTIONAL_KEYS
        if key in row
    }


def save_results(
    notebook: str,
    profile: str,
    rows: Sequence[Mapping],
    results_dir: str | Path,
    timings: Sequence[Mapping] = (),
) -> Path:
    """Write the notebook's rows to ``{results_dir}/{notebook}.json``; returns the path.

    Args:
        notebook: the chapter's name, e.g. ``"01_dlg"`` (two digits, underscore,
            letters/digits).
        profile: ``"quick"`` or ``"full"`` (any name :mod:`gitutor.profiles` defines).
        rows: the paper-vs-run rows (keys :data:`ROW_KEYS`, optional ``"better"`` and
            ``"headline"``: ``True`` on the one row that stands for the chapter).
        results_dir: the folder of the records (created if missing).
        timings: wall-clock rows (same keys), stored apart from ``rows``.

    Raises:
        ValueError: ``notebook`` is not a plain chapter name (no paths), ``rows`` is
            empty, or a row lacks one of :data:`ROW_KEYS`, has an unknown key or an
            unknown ``better``, or more than
            one row is marked ``"headline": True``.
        TypeError: a row is not a dict, a value is not a number, string or None, or
            ``headline`` is not a bool.
    """
    if not isinstance(notebook, str) or not _NOTEBOOK_NAME.match(notebook):
        raise ValueError(
            "notebook must be a chapter name such as '01_dlg' (no path), "
            f"got {notebook!r}"
        )
    if not isinstance(profile, str) or not profile:
        raise ValueError(
            f"profile must be a non-empty string such as 'quick', got {profile!r}"
        )
    checked = [_check_row(row, f"rows[{i}]") for i, row in enumerate(rows)]
    if not checked:
        raise ValueError(
            "rows is empty: a notebook must report at least one paper-vs-run row"
        )
    marked = [i for i, row in enumerate(checked) if row.get("headline")]
    if len(marked) > 1:
        raise ValueError(
            f"rows {marked} are all marked 'headline': mark one row per chapter"
        )
    timed = [_check_row(row, f"timings[{i}]") for i, row in enumerate(timings)]
    path = Path(results_dir) / f"{notebook}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "notebook": notebook,
        "profile": profile,
        "rows": checked,
        "timings": timed,
    }
    path.write_text(json.dumps(record, indent=2, allow_nan=False))
    return path


def collect_results(*folders: str | Path) -> list[dict]:
    """Every ``*.json`` record in ``folders``, sorted by notebook name.

    A chapter's run comes before its recorded run.

    Raises:
        ValueError: if no folder is given or the first one does not exist (later folders
            may be missing).
    """
    if not folders:
        raise ValueError("collect_results needs at least one results folder")
    if not Path(folders[0]).is_dir():
        raise ValueError(
            f"results folder {folders[0]} does not exist; "
            "run the notebooks first (make notebooks)"
        )
    records = [
        json.loads(path.read_text())
        for folder in folders
        if Path(folder).is_dir()
        for path in sorted(Path(folder).glob("*.json"))
    ]
    return sorted(
        records, key=lambda record: (record["notebook"], "provenance" in record)
    )


def verdict(row: Mapping) -> str:
    """One of :data:`OUTCOMES`: one row's verdict, by :data:`VERDICT_RULE`."""
    paper, run, better = row.get("paper"), row.get("this_run"), row.get("better")
    if better not in DIRECTIONS or not (_finite(paper) and _finite(run)):
        return "not comparable"
    sign = 1 if better == "higher" else -1  # as good as the paper: sign · (x − paper) ≥ −slack
    slack = TOLERANCE * abs(paper)
    worst, best = sorted((row.get("low", run), row.get("high", run)), key=lambda x: sign * x)
    if sign * (worst - paper) >= -slack:
        return "meets"
    if sign * (best - paper) < -slack:
        return "falls short"
    return "not resolved"


def _number(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def results_table(
    rows: Sequence[Mapping],
    notebook_column: Sequence[str] | None = None,
    verdicts: bool = True,
) -> str:
    """A Markdown table of paper-vs-run rows.

    Optionally with a leading notebook column and a verdict column. When every row
    states the same ``differences`` (and there is no notebook column), that text is
    printed once above the table instead of in every row.
    """
    shared = {row["differences"] for row in rows}
    once = notebook_column is None and len(shared) == 1
    keys = [key for key in ROW_KEYS if not (once and key == "differences")]
    names = {"this_run": "this run"}
    header = (
        (["notebook"] if notebook_column else [])
        + [names.get(key, key) for key in keys]
        + (["verdict"] if verdicts else [])
    )
    lines = [
        ([notebook_column[index]] if notebook_column else [])
        + [_number(row[key]) for key in keys]
        + ([verdict(row)] if verdicts else [])
        for index, row in enumerate(rows)
    ]
    preface = (
        f"**Differences from the paper (every row):** {shared.pop()}\n\n"
        if once
        else ""
    )
    return preface + markdown_table(header, lines)


def verdict_tally(rows: Sequence[Mapping]) -> dict[str, int]:
    """How many of ``rows`` get each verdict: ``{"meets": k, "falls short": m, ...}``.

    Every outcome of :data:`OUTCOMES` is a key (0 when no row has it).
    """
    found = [verdict(row) for row in rows]
    return {outcome: found.count(outcome) for outcome in OUTCOMES}


def headline_row(rows: Sequence[Mapping]) -> Mapping:
    """The row that stands for a chapter, by :data:`HEADLINE_RULE`.

    The row marked ``"headline": True``; else the first row whose :func:`verdict` is
    not "not comparable"; else the first row.

    Raises:
        ValueError: if ``rows`` is empty.
    """
    if not rows:
        raise ValueError(
            "rows is empty: a chapter reports at least one paper-vs-run row"
        )
    marked = [row for row in rows if row.get("headline")]
    comparable = [row for row in rows if verdict(row) != "not comparable"]
    return (marked or comparable or list(rows))[0]


def chapter_name(notebook: str) -> str:
    """``"01 · DLG"``: the chapter's number and short name (:data:`CHAPTER_NAMES`)."""
    number, _, rest = notebook.partition("_")
    return f"{number} · {CHAPTER_NAMES.get(notebook, rest.replace('_', ' '))}"


def run_label(record: Mapping) -> str:
    """How a record was run, in a few words.

    ``"quick"`` (the profile) for a chapter run; for a recorded run (a record with
    ``"provenance"``) ``"recorded: full, budget cpu_recording, CPU"``: profile, the
    ``BUDGET`` parameter when one was given, and the device's name without details.
    """
    provenance = record.get("provenance")
    if provenance is None:
        return str(record["profile"])
    parts = [str(record["profile"])]
    budget = provenance.get("parameters", {}).get("BUDGET")
    if budget:
        parts.append(f"budget {budget}")
    device = str(provenance.get("device") or provenance.get("device_parameter") or "")
    if device:
        parts.append(_shorten(device.split(":")[0].split(",")[0], 24))
    return "recorded: " + ", ".join(parts)


def record_label(record: Mapping) -> str:
    """``"01 · DLG (quick)"``: the :func:`chapter_name` and :func:`run_label`."""
    return f"{chapter_name(record['notebook'])} ({run_label(record)})"


def _shorten(text: str, limit: int) -> str:
    """``text`` cut after the last whole word within ``limit`` characters, with "…".

    A dangling short word without digits ("B", "=", "of") is dropped with the rest.
    """
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    kept: list[str] = []
    for word in text.split(" "):
        if len(" ".join([*kept, word])) > limit - 1:
            break
        kept.append(word)
    while (
        len(kept) > 1 and len(kept[-1]) <= 2 and not any(c.isdigit() for c in kept[-1])
    ):
        kept.pop()
    cut = " ".join(kept) if kept else text[: limit - 1]
    return cut.rstrip(" ,;:·(") + "…"


def _glance_value(value, unit: str) -> str:
    """A number with its unit when the unit is short, or a statement cut to size."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        short_unit = (
            unit if unit and len(unit) <= 4 else ""
        )  # dB, %, MSE; not "fraction"
        return (
            f"{_number(value)}\u00a0{short_unit}".strip()
        )  # no line break before the unit
    return _shorten(str(value), GLANCE_LIMITS["value"])


def _link(
    text: str, record: Mapping, chapter_dir: str | None, recorded_dir: str | None
) -> str:
    folder = recorded_dir if "provenance" in record else chapter_dir
    return text if folder is None else f"[{text}]({folder}/{record['notebook']}.ipynb)"


def glance_rows(records: Sequence[Mapping]) -> list[dict]:
    """One summary per record (a chapter run, or a recorded run of its own).

    Each dict has ``notebook``, ``chapter`` (:func:`chapter_name`), ``run``
    (:func:`run_label`), ``recorded`` (bool), ``headline`` (the :func:`headline_row`),
    ``verdict`` (that row's :func:`verdict`), ``tally`` (:func:`verdict_tally` of all
    rows) and ``rows`` (how many rows the record has).

    Raises:
        ValueError: if a record has no rows.
    """
    summaries = []
    for record in records:
        rows = record["rows"]
        if not rows:
            raise ValueError(f"record {record['notebook']} has no rows")
        headline = headline_row(rows)
        summaries.append(
            {
                "notebook": record["notebook"],
                "chapter": chapter_name(record["notebook"]),
                "run": run_label(record),
                "recorded": "provenance" in record,
                "headline": headline,
                "verdict": verdict(headline),
                "tally": verdict_tally(rows),
                "rows": len(rows),
            }
        )
    return summaries


def glance_table(
    records: Sequence[Mapping],
    chapter_dir: str | None = None,
    recorded_dir: str | None = None,
) -> str:
    """The "Results at a glance" table (Markdown): one line per record, short cells.

    Columns: chapter (a link when ``chapter_dir``/``recorded_dir`` give the folder of
    the chapter pages / recorded pages relative to the page, then the
    :func:`run_label`, a recorded run marked **recorded**); headline (what the
    :func:`headline_row` measures, cut to ``GLANCE_LIMITS["headline"]`` characters);
    paper and this run (cut to ``GLANCE_LIMITS["value"]``); the headline row's
    :func:`verdict`; how many of all the record's rows meet / fall short / are not
    comparable (``"2 / 5 / 1"``). The full rows are in :func:`chapter_details`.
    """
    header = [
        "chapter",
        "headline",
        "paper",
        "this run",
        "verdict",
        "all rows: meets / falls short / not resolved / not comparable",
    ]
    lines, folders = [], (chapter_dir, recorded_dir)
    for record, summary in zip(records, glance_rows(records)):
        row = summary["headline"]
        what = row["quantity"] + (f" · {row['setting']}" if row["setting"] else "")
        run = summary["run"].replace("recorded", "**recorded**", 1)
        lines.append(
            [
                f"{_link(summary['chapter'], record, *folders)} ({run})",
                _shorten(what, GLANCE_LIMITS["headline"]),
                _glance_value(row["paper"], row["unit"]),
                _glance_value(row["this_run"], row["unit"]),
                f"**{summary['verdict']}**",
                " / ".join(str(summary["tally"][outcome]) for outcome in OUTCOMES),
            ]
        )
    return markdown_table(header, lines)


def provenance_note(record: Mapping) -> str:
    """One Markdown sentence: how a recorded run was made ("" for a chapter run)."""
    provenance = record.get("provenance")
    if provenance is None:
        return ""
    facts = [
        f"commit {str(provenance.get('commit', '?'))[:7]}",
        str(provenance.get("device", "unknown device")),
        f"torch {provenance.get('torch', '?')}",
    ]
    if "wall_seconds" in provenance:
        facts.append(f"{provenance['wall_seconds']} s wall time")
    date = f" on {provenance['date']}" if provenance.get("date") else ""
    command = provenance.get("command")
    how = f" by `{command}`" if command else ""
    return f"Recorded{date}{how} ({', '.join(facts)})."


def chapter_details(
    records: Sequence[Mapping],
    chapter_dir: str | None = None,
    recorded_dir: str | None = None,
) -> str:
    """One MyST ``{dropdown}`` per record holding its full :func:`results_table`.

    The dropdown's title names the chapter, the run and its :func:`verdict_sentence`;
    inside are the headline row (:data:`HEADLINE_RULE`), a link to the page (see
    :func:`glance_table`), a recorded run's :func:`provenance_note`, and the table.
    Render it with ``{glue:md}`` and ``:format: myst`` (it holds directives).
    """
    blocks = []
    for record, summary in zip(records, glance_rows(records)):
        row = summary["headline"]
        page = _link(
            "the chapter" if not summary["recorded"] else "the recorded page",
            record,
            chapter_dir,
            recorded_dir,
        )
        title = f"{record_label(record)}: {verdict_sentence(record['rows'])}"
        headline = f"{row['quantity']} ({row['setting']}), **{summary['verdict']}**"
        lines = [f"````{{dropdown}} {title}", f"Headline row: {headline}. Open {page}."]
        note = provenance_note(record)
        if note:
            lines.append(note)
        lines += ["", results_table(record["rows"]), "````"]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def timings_table(records: Sequence[Mapping]) -> str:
    """A Markdown table of every record's wall-clock rows (they vary run to run)."""
    rows = [row for record in records for row in record.get("timings", [])]
    names = [
        record_label(record) for record in records for _ in record.get("timings", [])
    ]
    return (
        results_table(rows, notebook_column=names, verdicts=False)
        if rows
        else "No timings were recorded."
    )


def verdict_sentence(rows: Sequence[Mapping]) -> str:
    """The sentence a chapter ends with: how many of its ``rows`` meet the paper.

    And how many fall short, are not resolved or are not comparable, by :data:`VERDICT_RULE`
    (e.g. ``"2 of 5 rows meet the paper, 3 fall short."``, ``"1 of 8 rows meets …"``).

    Raises:
        ValueError: if ``rows`` is empty.
    """
    if not rows:
        raise ValueError(
            "rows is empty: a chapter reports at least one paper-vs-run row"
        )
    counts = verdict_tally(rows)
    verbs = {
        "falls short": ("falls short", "fall short"),
        "not resolved": ("is not resolved", "are not resolved"),
        "not comparable": ("is not comparable", "are not comparable"),
    }
    met, n = counts["meets"], len(rows)
    parts = [f"{met} of {n} row{'s' * (n != 1)} {'meets' if met == 1 else 'meet'} the paper"]
    parts += [f"{counts[o]} {verbs[o][counts[o] != 1]}" for o in verbs if counts[o]]
    return ", ".join(parts) + "."
