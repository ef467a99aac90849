"""The ledger: per paper, its central claim (the chapter's headline row, in the paper's words when the
row quotes them: ``claim``) read as *reproduced*, *not reproduced*, *not resolved* or *not comparable*
by the one verdict rule — or, where the chapter judges a qualitative claim from its own evidence
(``claim_outcome`` with ``claim_reason``), as *consistent* or *refuted* — with the reason in one line,
and a sentence that sums the ledger up. Built from the results records, never typed.

:data:`PAPERS` maps each paper to the chapter whose headline row carries its central claim. A
paper's line comes from that chapter's recorded run when one exists and quotes the paper's claim (a
larger budget than the book build, recorded under the current rules), else from the chapter's run. The results page shows :func:`ledger_table` and
:func:`ledger_summary`; the introduction, a Markdown page, pastes :func:`ledger_html` and the
summary from the results page (myst-nb pastes only plain text, HTML and images across pages).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from gitutor.results.glance import _glance_value, _shorten
from gitutor.results.verdicts import headline_row, verdict
from gitutor.tables import markdown_table

#: (paper, its source, the chapter whose headline is the paper's central claim), in book order.
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
)
#: How the headline row's :func:`~gitutor.results.verdict` reads as the paper's claim.
CLAIM_OUTCOMES = {
    "meets": "reproduced",
    "falls short": "not reproduced",
    "not resolved": "not resolved",
    "not comparable": "not comparable",
}
#: Every outcome a ledger line can read, in the summary's order (``consistent`` / ``refuted``: a chapter's
#: judgement of a qualitative claim from its own evidence, the row's ``claim_outcome``).
LEDGER_OUTCOMES = (
    "reproduced",
    "consistent",
    "not reproduced",
    "refuted",
    "not comparable",
    "not resolved",
)
NOT_RUN = "not run in this build"
REASON_LIMIT = 150


def _record_for(records: Sequence[Mapping], notebook: str) -> Mapping | None:
    """The recorded run of ``notebook`` if there is one whose headline row quotes the paper's claim, else
    its chapter run, else None. A recording made before its chapter quoted the paper (its headline row has
    no ``claim``) was judged by older rules; a record is never edited, so the chapter run speaks until the
    chapter is recorded again."""
    found = [r for r in records if r["notebook"] == notebook]
    current = [
        r for r in found if "provenance" in r and "claim" in headline_row(r["rows"])
    ]
    chapter = [r for r in found if "provenance" not in r]
    return (current or chapter or found or [None])[0]


def _reason(row: Mapping, outcome: str) -> str:
    """One line: what the headline measures, the paper's and this run's numbers, why."""
    value, spread = _glance_value(row["this_run"], row["unit"]), "low" in row
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
        "not comparable": "no number to set against the paper's",
    }[outcome]
    if row.get("not_comparable"):
        why = f"not comparable: {row['not_comparable']}"
    text = (
        f"{row['quantity']}: paper {_glance_value(row['paper'], row['unit'])}, "
        f"this run {value} — {why}"
    )
    return _shorten(text, REASON_LIMIT)


def ledger_rows(records: Sequence[Mapping]) -> list[dict]:
    """One dict per paper of :data:`PAPERS`: ``paper``, ``source``, ``notebook``, ``run``
    (``"recorded"``, ``"chapter"`` or None), ``claim`` (the paper's words, or the headline's quantity),
    ``outcome`` (:data:`LEDGER_OUTCOMES`, or :data:`NOT_RUN` when no record of its chapter is given) and
    ``reason`` (one line)."""
    lines = []
    for paper, source, notebook in PAPERS:
        record = _record_for(records, notebook)
        line = {
            "paper": paper,
            "source": source,
            "notebook": notebook,
            "run": None,
            "claim": "",
            "outcome": NOT_RUN,
            "reason": "no results record of its chapter",
        }
        if record is not None:
            row = headline_row(record["rows"])
            judged = row.get("claim_outcome")
            reason = (
                _shorten(row["claim_reason"], REASON_LIMIT)
                if judged
                else _reason(row, verdict(row))
            )
            line |= {
                "run": "recorded" if "provenance" in record else "chapter",
                "quoted": "claim" in row,
                "claim": row.get("claim", row["quantity"]),
                "outcome": judged or CLAIM_OUTCOMES[verdict(row)],
                "reason": reason,
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
    text = line["notebook"][:2] + (" (recorded)" if line["run"] == "recorded" else "")
    return ("" if folder is None else f"{folder}/{line['notebook']}"), text


def ledger_table(
    records: Sequence[Mapping],
    chapter_dir: str | None = None,
    recorded_dir: str | None = None,
) -> str:
    """The ledger as a Markdown table: paper, source, chapter (a link to ``.ipynb`` pages
    when the folders are given, relative to the page), the claim's outcome, the reason."""
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
    return markdown_table(
        ["paper", "source", "chapter", "central claim", "why (headline row)"], body
    )


def ledger_html(
    records: Sequence[Mapping],
    chapter_dir: str | None = None,
    recorded_dir: str | None = None,
) -> str:
    """The ledger as an HTML table (for pages that paste it from another page: myst-nb pastes
    HTML, not Markdown, across pages); links point at the built ``.html`` pages."""
    head = "".join(
        f"<th>{h}</th>"
        for h in ("paper", "source", "chapter", "central claim", "why (headline row)")
    )
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
    """One sentence: how many papers' central claims reproduced, did not, are not resolved
    (and were not run), naming them, e.g. "Of 7 papers' central claims, 1 reproduced (DLG),
    2 did not reproduce (…) and 4 are not resolved at this budget (…)."."""
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
    return f"Of the {len(lines)} papers' central claims, {listed}."
