"""The ledger: per chapter, its paper's central claim (the chapter's headline row, in the paper's
words when the row quotes them: ``claim``) with the chapter's one verdict on it
(:func:`~gitutor.results.claim_verdict`: the headline row read by the one verdict rule as
*reproduced*, *not reproduced*, *not resolved*, *not comparable* or *not judged*, or, where the
chapter judges a qualitative claim from its own evidence — ``claim_outcome`` with ``claim_reason``
—, that judgement: *consistent*, *refuted*, …), the reason in full, and a sentence that sums the
ledger up. Built from the results records, never typed.

:data:`PAPERS` maps each chapter's claim to its source. A line comes from the record that speaks
for the chapter on the results page (:func:`~gitutor.results.chapter_record`): its recorded run
when that run's headline row quotes the paper's claim, else the chapter's run of this build — the
same record, and so the same verdict, as the chapter's line in the glance table. The results page
shows :func:`ledger_table` and :func:`ledger_summary`; the introduction, a Markdown page, pastes
:func:`ledger_html` and the summary from the results page (myst-nb pastes only plain text, HTML
and images across pages).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from gitutor.results.glance import _glance_value, chapter_record
from gitutor.results.verdicts import (
    CLAIM_OUTCOMES,
    LEDGER_OUTCOMES,
    claim_verdict,
    headline_row,
    verdict,
    why_not_judged,
)
from gitutor.tables import markdown_table

__all__ = [
    "CLAIM_OUTCOMES",
    "LEDGER_OUTCOMES",
    "NOT_RUN",
    "PAPERS",
    "ledger_html",
    "ledger_rows",
    "ledger_summary",
    "ledger_table",
]

#: (the claim's paper or study, its source, the chapter whose headline row carries the claim), in
#: book order: one line per chapter. Chapter 07's source is a reproduction report, not a paper, and
#: chapter 08 sets its Flower client's update against Table 1 of Wu et al., whose central claim is
#: chapter 06's.
PAPERS = (
    ("DLG", "Zhu, Liu & Han 2019", "01_dlg"),
    ("iDLG and soft labels", "Wang, Liang & He 2024", "02_idlg_soft_labels"),
    ("CV batch labels (Stage I)", "Ye et al. 2024", "03_cv_batch_labels"),
    (
        "Stepwise GradInversion (Stage II)",
        "Ye et al. 2024",
        "04_stepwise_gradinversion",
    ),
    ("User-level inversion", "Li et al. 2023", "05_diffusion_user_level"),
    ("Learning To Invert", "Wu et al. 2023", "06_learning_to_invert"),
    ("DLG against FedADMM", "anonymous reproduction report (§5)", "07_admm_comparison"),
    (
        "Inverting Gradients on a Flower client's update",
        "Wu et al. 2023 (Table 1, its Inverting Gradients baseline)",
        "08_flower_dp",
    ),
)
NOT_RUN = "not run in this build"
#: The ledger's columns (Markdown and HTML alike).
COLUMNS = (
    "paper",
    "source",
    "chapter",
    "verdict on the central claim",
    "why (headline row)",
)


def _whole(value, unit: str) -> str:
    """A number with its short unit (as the glance table shows it), or a statement in full."""
    return value if isinstance(value, str) else _glance_value(value, unit)


def _reason(row: Mapping) -> str:
    """One line, whole: what the headline measures, the paper's and this run's numbers, why."""
    outcome = verdict(row)
    value, spread = _whole(row["this_run"], row["unit"]), "low" in row
    if spread:
        value += f" [{row['low']:g}, {row['high']:g}]" + (
            f", n = {row['n']}" if "n" in row else ""
        )
    elif row.get("n") == 1:
        value += ", n = 1"
    whole = " over its whole interval" if spread else ""
    why = {
        "meets": f"at least the paper's{whole}",
        "falls short": f"below the paper's{whole}",
        "not resolved": (
            "its interval holds the paper's value"
            if spread
            else "how many trials is not stated"
        ),
        "not comparable": f"not comparable: {row.get('not_comparable')}",
        "not judged": f"not judged: {why_not_judged(row)}",
    }[outcome]
    paper = _whole(row["paper"], row["unit"])
    return f"{row['quantity']}: paper {paper}, this run {value} — {why}"


def ledger_rows(records: Sequence[Mapping]) -> list[dict]:
    """One dict per chapter of :data:`PAPERS`: ``paper``, ``source``, ``notebook``, ``run``
    (``"recorded"``, ``"chapter"`` or None), ``passed_over`` (True when the chapter has a
    recorded run that does not speak for it: :func:`~gitutor.results.chapter_record`),
    ``claim`` (the paper's words, or the headline's quantity), ``outcome``
    (:func:`~gitutor.results.claim_verdict`, one of :data:`LEDGER_OUTCOMES`, or :data:`NOT_RUN`
    when no record of its chapter is given) and ``reason`` (whole, never cut: the chapter's
    ``claim_reason`` where it judged the claim, else the headline row's numbers and verdict).

    Raises:
        ValueError: as :func:`~gitutor.results.verdict`, for a headline row that is not a
            paper-vs-run row.
    """
    lines = []
    for paper, source, notebook in PAPERS:
        record = chapter_record(records, notebook)
        line = {
            "paper": paper,
            "source": source,
            "notebook": notebook,
            "run": None,
            "passed_over": False,
            "claim": "",
            "outcome": NOT_RUN,
            "reason": "no results record of its chapter",
        }
        if record is not None:
            row = headline_row(record["rows"])
            judged = row.get("claim_outcome")
            line |= {
                "run": "recorded" if "provenance" in record else "chapter",
                "passed_over": any(
                    "provenance" in other and other is not record
                    for other in records
                    if other["notebook"] == notebook
                ),
                "quoted": "claim" in row,
                "claim": row.get("claim", row["quantity"]),
                "outcome": claim_verdict(record["rows"]),
                "reason": " ".join(str(row["claim_reason"]).split())
                if judged
                else _reason(row),
            }
        lines.append(line)
    return lines


def _why(line: Mapping) -> str:
    """The reason, after the paper's own words when the headline row quotes them."""
    return (
        f"“{line['claim']}” — {line['reason']}"
        if line.get("quoted")
        else line["reason"]
    )


def _where(
    line: Mapping, chapter_dir: str | None, recorded_dir: str | None
) -> tuple[str, str]:
    """(link target or "", link text) of the run a ledger line comes from."""
    if line["run"] is None:
        return "", line["notebook"].replace("_", " ")
    folder = recorded_dir if line["run"] == "recorded" else chapter_dir
    text = line["notebook"][:2] + (
        " (recorded)"
        if line["run"] == "recorded"
        else " (this build)"
        if line.get("passed_over")
        else ""
    )
    return ("" if folder is None else f"{folder}/{line['notebook']}"), text


def ledger_table(
    records: Sequence[Mapping],
    chapter_dir: str | None = None,
    recorded_dir: str | None = None,
) -> str:
    """The ledger as a Markdown table (:data:`COLUMNS`): paper, source, chapter (a link to
    ``.ipynb`` pages when the folders are given, relative to the page; "(recorded)" when the
    recorded run speaks, "(this build)" when a recorded run exists but does not), the chapter's
    verdict on the central claim, the reason in full.

    Raises:
        ValueError: as :func:`ledger_rows`.
    """
    body = []
    for line in ledger_rows(records):
        target, text = _where(line, chapter_dir, recorded_dir)
        chapter = f"[{text}]({target}.ipynb)" if target else text
        body.append(
            [
                line["paper"],
                line["source"],
                chapter,
                f"**{line['outcome']}**",
                _why(line),
            ]
        )
    return markdown_table(list(COLUMNS), body)


def ledger_html(
    records: Sequence[Mapping],
    chapter_dir: str | None = None,
    recorded_dir: str | None = None,
) -> str:
    """The ledger as an HTML table (for pages that paste it from another page: myst-nb pastes
    HTML, not Markdown, across pages); links point at the built ``.html`` pages.

    Raises:
        ValueError: as :func:`ledger_rows`.
    """
    head = "".join(f"<th>{h}</th>" for h in COLUMNS)
    body = []
    for line in ledger_rows(records):
        target, text = _where(line, chapter_dir, recorded_dir)
        chapter = (
            f'<a href="{html.escape(target)}.html">{html.escape(text)}</a>'
            if target
            else html.escape(text)
        )
        cells = [
            html.escape(line["paper"]),
            html.escape(line["source"]),
            chapter,
            f"<strong>{html.escape(line['outcome'])}</strong>",
            html.escape(_why(line)),
        ]
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (
        f'<table class="table gitutor-ledger"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def ledger_summary(records: Sequence[Mapping]) -> str:
    """One sentence: of the chapters' central claims (one per chapter of :data:`PAPERS`), how many
    reproduced, did not, are not resolved, … (and were not run), naming them, e.g. "Of the 8
    chapters' central claims, 1 reproduced (DLG), 2 did not reproduce (…) and 5 are not resolved
    at this budget (…)."."""
    lines = ledger_rows(records)
    groups = {
        outcome: [line["paper"] for line in lines if line["outcome"] == outcome]
        for outcome in (*LEDGER_OUTCOMES, NOT_RUN)
    }
    words = {
        "reproduced": ("reproduced", "reproduced"),
        "consistent": (
            "is consistent with this book's runs",
            "are consistent with this book's runs",
        ),
        "not reproduced": ("did not reproduce", "did not reproduce"),
        "refuted": (
            "is refuted by this book's own evidence",
            "are refuted by this book's own evidence",
        ),
        "not comparable": (
            "is not comparable in this setting",
            "are not comparable in this setting",
        ),
        "not resolved": (
            "is not resolved at this budget",
            "are not resolved at this budget",
        ),
        "not judged": (
            "is not judged by the verdict rule",
            "are not judged by the verdict rule",
        ),
        NOT_RUN: ("was not run in this build", "were not run in this build"),
    }
    parts = [
        f"{len(names)} {words[o][len(names) != 1]} ({', '.join(names)})"
        for o, names in groups.items()
        if names
    ]
    listed = (
        parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    )
    return f"Of the {len(lines)} chapters' central claims, {listed}."
