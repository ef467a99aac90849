"""The "Results at a glance" page: one short line per record, each record's full table in a
dropdown, recorded runs' provenance, and the timings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitutor.results.verdicts import (
    OUTCOMES,
    _number,
    headline_row,
    results_table,
    verdict,
    verdict_sentence,
    verdict_tally,
)
from gitutor.tables import markdown_table

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
