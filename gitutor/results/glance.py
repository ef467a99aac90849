"""The "Results at a glance" page: one short line per chapter with its one verdict on the paper's
central claim, each record's full table in a dropdown, recorded runs' provenance, and the timings.

A chapter may have two records, its run in this build and a recorded run (``book/recorded/``, a
larger budget). :func:`chapter_record` picks the one that speaks for the chapter's paper on the
results page — in its glance line here and in its ledger line (:mod:`gitutor.results.ledger`) alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitutor.results.verdicts import (
    OUTCOMES,
    _number,
    claim_verdict,
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


def chapter_record(records: Sequence[Mapping], notebook: str) -> Mapping | None:
    """The record that speaks for ``notebook``'s chapter on the results page, or None.

    Its recorded run (a record with ``"provenance"``) when that run's headline row quotes the
    paper's claim (``"claim"``): it was recorded under the rules the chapters follow now, at a
    larger budget than the book build. Otherwise the chapter's run of this build: a recording
    made before its chapter quoted the paper was judged by older rules, and a record is never
    edited, so the build's run speaks until the chapter is recorded again. A chapter with only
    an older recording is represented by it.

    Raises:
        TypeError: if ``notebook`` is not a string.
        ValueError: as :func:`~gitutor.results.headline_row`, for a recorded run without rows.
    """
    if not isinstance(notebook, str):
        raise TypeError(
            f"notebook must be a chapter name such as '01_dlg', got {type(notebook).__name__}"
        )
    found = [r for r in records if r["notebook"] == notebook]
    current = [
        r for r in found if "provenance" in r and "claim" in headline_row(r["rows"])
    ]
    chapter = [r for r in found if "provenance" not in r]
    return (current or chapter or found or [None])[0]


def glance_rows(records: Sequence[Mapping]) -> list[dict]:
    """One summary per chapter, from the record that speaks for it (:func:`chapter_record`).

    Each dict has ``notebook``, ``chapter`` (:func:`chapter_name`), ``record`` (the record that
    speaks), ``run`` (its :func:`run_label`), ``recorded`` (bool: that record is a recorded
    run), ``others`` (the chapter's other records, e.g. an older recording, shown in their own
    dropdowns), ``headline`` (the :func:`headline_row`), ``row_verdict`` (that row's
    :func:`verdict`), ``verdict`` (the chapter's one verdict on its paper's central claim,
    :func:`~gitutor.results.claim_verdict`: the ledger's), ``tally`` (:func:`verdict_tally`
    of all the record's rows: the counts of the chapter page's
    :func:`~gitutor.results.verdict_sentence`) and ``rows`` (how many rows the record has).
    Chapters come in the order of ``records`` (:func:`collect_results` sorts them).

    Raises:
        ValueError: if a record has no rows.
    """
    for record in records:
        if not record["rows"]:
            raise ValueError(f"record {record['notebook']} has no rows")
    notebooks = list(dict.fromkeys(record["notebook"] for record in records))
    summaries = []
    for notebook in notebooks:
        record = chapter_record(records, notebook)
        rows = record["rows"]
        headline = headline_row(rows)
        summaries.append(
            {
                "notebook": notebook,
                "chapter": chapter_name(notebook),
                "record": record,
                "run": run_label(record),
                "recorded": "provenance" in record,
                "others": [
                    r for r in records if r["notebook"] == notebook and r is not record
                ],
                "headline": headline,
                "row_verdict": verdict(headline),
                "verdict": claim_verdict(rows),
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
    """The "Results at a glance" table (Markdown): one line per chapter, short cells.

    Columns: chapter (a link when ``chapter_dir``/``recorded_dir`` give the folder of the
    chapter pages / recorded pages relative to the page, then the :func:`run_label` of the
    record that speaks for it, a recorded run marked **recorded**, and a link to any other
    run of the chapter); headline (what the :func:`headline_row` measures, cut to
    ``GLANCE_LIMITS["headline"]`` characters); paper and this run (cut to
    ``GLANCE_LIMITS["value"]``); the chapter's verdict on the paper's central claim
    (:func:`~gitutor.results.claim_verdict`, the ledger's); how many of all the record's
    rows get each verdict of :data:`~gitutor.results.OUTCOMES` (``"2 / 5 / 1 / 0 / 3"``, the
    counts of the chapter page's verdict sentence). The full rows are in
    :func:`chapter_details`.

    Raises:
        ValueError: as :func:`glance_rows`.
    """
    header = [
        "chapter",
        "headline",
        "paper",
        "this run",
        "verdict on the central claim",
        "all rows: " + " / ".join(OUTCOMES),
    ]
    lines, folders = [], (chapter_dir, recorded_dir)
    for summary in glance_rows(records):
        record, row = summary["record"], summary["headline"]
        what = row["quantity"] + (f" · {row['setting']}" if row["setting"] else "")
        run = summary["run"].replace("recorded", "**recorded**", 1)
        also = "".join(
            "; " + _link(f"{run_label(other).partition(':')[0]} run", other, *folders)
            for other in summary["others"]
        )
        lines.append(
            [
                f"{_link(summary['chapter'], record, *folders)} ({run}{also})",
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
    inside are the headline row (:data:`HEADLINE_RULE`) and, for the record that speaks for
    the chapter (:func:`chapter_record`), the chapter's verdict on the paper's central claim
    (the glance table's and the ledger's); a record that does not speak says so instead. Then
    a link to the page (see :func:`glance_table`), a recorded run's :func:`provenance_note`,
    and the table. Render it with ``{glue:md}`` and ``:format: myst`` (it holds directives).

    Raises:
        ValueError: as :func:`glance_rows`.
    """
    speaking = {id(summary["record"]): summary for summary in glance_rows(records)}
    blocks = []
    for record in records:
        row = headline_row(record["rows"])
        page = _link(
            "the recorded page" if "provenance" in record else "the chapter",
            record,
            chapter_dir,
            recorded_dir,
        )
        title = f"{record_label(record)}: {verdict_sentence(record['rows'])}"
        summary = speaking.get(id(record))
        claim = (
            f"The paper's central claim: **{summary['verdict']}**."
            if summary
            else "Not the run that speaks for the paper on this page (see *What "
            "reproduced*)."
        )
        lines = [
            f"````{{dropdown}} {title}",
            f"Headline row: {row['quantity']} ({row['setting']}). {claim} Open {page}.",
        ]
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
