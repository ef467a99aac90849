"""The verdict of a paper-vs-run row (:data:`VERDICT_RULE`), a chapter's headline row, its verdict
sentence and its one verdict on the paper's central claim (:func:`claim_verdict`), and the Markdown
table of rows."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

from gitutor.checks import check_flag
from gitutor.results.records import (
    ROW_KEYS,
    check_row_keys,
    judged,
    number_problem,
    sample_problem,
    scalar,
)
from gitutor.tables import markdown_table

TOLERANCE = 0.05
VERDICT_RULE = (
    "**meets**: this run's number is at least as good as the paper's, allowing "
    f"{TOLERANCE:.0%} of the paper's value (higher or lower is better as the row "
    "states); **falls short**: otherwise. A number summarising several trials is judged "
    "by its 95 % interval over them, never by its mean alone: the whole interval must be "
    "on one side, and an interval that holds the paper's value (with that allowance) is "
    "**not resolved**; a row of several trials without its interval is refused, and a "
    "row that gives neither its interval nor n = 1 (a single measurement) is **not "
    "resolved**, its uncertainty unknown. A row in the paper's kind of setting is judged "
    "so. **not comparable**: the row's setting differs from the paper's in a way that "
    "matters, and the row says how it differs and says why that matters (its verdict "
    "gives that reason); the rule never makes a row not comparable on its own. **not "
    "judged**: the row holds nothing to set "
    "against the paper's number — the paper states its result in words or reports no "
    "number, this run's number is not a finite number, or the row does not say whether "
    "higher or lower is the better attack; its verdict says which, and its chapter reads "
    "it against its figures (or judges the paper's claim from it, as the ledger shows)."
)
HEADLINE_RULE = (
    'A chapter\'s **headline row** is the row its record marks `"headline": true`; '
    "a chapter that marks none is represented by its first judged row (meets, falls "
    "short or not resolved: a row that states which direction is better, has two finite "
    "numbers and is not marked not comparable), and a chapter with no judged row by its "
    "first row."
)
#: Every verdict a row can get, in the order tables count them.
OUTCOMES = ("meets", "falls short", "not resolved", "not comparable", "not judged")
#: The verdicts of a row the rule judges against the paper's number.
JUDGED_OUTCOMES = OUTCOMES[:3]
#: How a results record stores a run's NaN or infinite float (JSON has none).
STORED_FLOATS = ("nan", "inf", "-inf")
#: Why a row is *not judged* (:func:`why_not_judged`), each said in these words.
NOT_JUDGED_REASONS = (
    "the paper states no number",
    "the paper's number is not finite",
    "this run reports no number",
    "this run's number is not finite",
    "the row does not say whether higher or lower is better",
)
#: How a headline row's :func:`verdict` reads as the paper's central claim.
CLAIM_OUTCOMES = {
    "meets": "reproduced",
    "falls short": "not reproduced",
    "not resolved": "not resolved",
    "not comparable": "not comparable",
    "not judged": "not judged",
}
#: Every reading of a paper's central claim (:func:`claim_verdict`), in the order a summary lists them
#: (``consistent`` / ``refuted``: a chapter's judgement of a qualitative claim from its own evidence,
#: the headline row's ``claim_outcome``).
LEDGER_OUTCOMES = (
    "reproduced",
    "consistent",
    "not reproduced",
    "refuted",
    "not comparable",
    "not resolved",
    "not judged",
)


def verdict(row: Mapping) -> str:
    """One of :data:`OUTCOMES`: one row's verdict, by :data:`VERDICT_RULE`.

    *not comparable* only for a row marked ``not_comparable`` (which says how its setting
    differs); a row the rule cannot set against the paper and that is not so marked is *not
    judged* (:func:`why_not_judged` says why).

    Raises:
        TypeError: if ``row`` is not a mapping.
        ValueError: naming the missing or unknown key of a row that is not a paper-vs-run row (no
            ``quantity``, ``setting``, ``unit``, …; :func:`~gitutor.results.records.check_row_keys`) or
            ``'better'`` when it is not ``"higher"`` or ``"lower"`` (``"Higher"``); naming the row, for a
            row whose numbers cannot be judged (:func:`gitutor.results.records.number_problem`: low > high,
            n < 1, a run outside its own interval, a paper value that is NaN or a number spelled as a
            string where a direction is stated), or a judged row that summarises n > 1 trials without its
            interval (:func:`~gitutor.results.records.sample_problem`).
    """
    check_row_keys(row, "row")
    row = {
        key: scalar(value) for key, value in row.items()
    }  # a torch or NumPy number is that number
    problem = number_problem(row)
    if problem:
        raise ValueError(
            f"row {row.get('quantity')!r} ({row.get('setting')!r}): {problem}"
        )
    if not judged(row):
        return "not comparable" if row.get("not_comparable") else "not judged"
    problem = sample_problem(row)
    if problem:
        raise ValueError(
            f"row {row.get('quantity')!r} ({row.get('setting')!r}): {problem}"
        )
    if "low" not in row and row.get("n") != 1:
        return "not resolved"  # how many trials, and so how uncertain, is not stated
    paper, run = row["paper"], row["this_run"]
    sign = (
        1 if row["better"] == "higher" else -1
    )  # as good as the paper: sign · (x − paper) ≥ −slack
    slack = TOLERANCE * abs(paper)
    worst, best = sorted(
        (row.get("low", run), row.get("high", run)), key=lambda x: sign * x
    )
    if sign * (worst - paper) >= -slack:
        return "meets"
    if sign * (best - paper) < -slack:
        return "falls short"
    return "not resolved"


def why_not_judged(row: Mapping) -> str | None:
    """Why the verdict rule cannot set ``row`` against the paper, one of
    :data:`NOT_JUDGED_REASONS` (None: it can, or the row is marked ``not_comparable``, which
    says why itself): "the paper states no number", "the paper's number is not finite", "this
    run reports no number", "this run's number is not finite" or "the row does not say whether
    higher or lower is better".

    Raises:
        TypeError: if ``row`` is not a mapping.
        ValueError: as :func:`verdict`, for a row that is not a paper-vs-run row.
    """
    if verdict(row) != "not judged":
        return None
    row = {key: scalar(value) for key, value in row.items()}
    no_number = {"paper": NOT_JUDGED_REASONS[0], "this_run": NOT_JUDGED_REASONS[2]}
    not_finite = {"paper": NOT_JUDGED_REASONS[1], "this_run": NOT_JUDGED_REASONS[3]}
    for key in ("paper", "this_run"):
        value = row.get(key)
        if key == "this_run" and isinstance(value, str) and value in STORED_FLOATS:
            return not_finite[key]  # a float as a record stores it
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            return no_number[key]
        if not math.isfinite(value):
            return not_finite[key]
    return NOT_JUDGED_REASONS[4]


def verdict_text(row: Mapping) -> str:
    """The :func:`verdict` as a table shows it: with the reason after a marked
    ``not_comparable`` row's verdict ("not comparable: 16 px, untrained network") and after a
    *not judged* one (:func:`why_not_judged`: "not judged: the paper states no number"), and
    then the chapter's judgement of the paper's qualitative claim when the row carries one
    ("; the paper's claim: **refuted** by this chapter's evidence", as the ledger reads it).
    A row that carries the claim's judgement but compares no number shows that judgement as its
    only verdict, the reason in brackets ("the paper's claim: **refuted** by this chapter's
    evidence (no number compared: the report gives no number)"): one verdict per claim.

    Raises:
        TypeError: if ``row`` is not a mapping.
        ValueError: as :func:`verdict`.
    """
    outcome = verdict(row)
    judged = row.get("claim_outcome")
    claim = f"the paper's claim: **{judged}** by this chapter's evidence"
    if outcome == "not comparable":
        reason = row["not_comparable"]
    elif outcome == "not judged":
        reason = why_not_judged(row)
    elif judged:
        return f"{outcome}; {claim}"
    else:
        return outcome
    if judged:  # one verdict for the claim; why no number is compared in brackets
        return f"{claim} (no number compared: {reason})"
    return f"{outcome}: {reason}"


def verdict_tally(rows: Sequence[Mapping]) -> dict[str, int]:
    """How many of ``rows`` get each verdict: ``{"meets": k, "falls short": m, ...}``.

    Every outcome of :data:`OUTCOMES` is a key (0 when no row has it).
    """
    found = [verdict(row) for row in rows]
    return {outcome: found.count(outcome) for outcome in OUTCOMES}


def headline_row(rows: Sequence[Mapping]) -> Mapping:
    """The row that stands for a chapter, by :data:`HEADLINE_RULE`.

    The row marked ``"headline": True``; else the first row whose :func:`verdict` is
    one of :data:`JUDGED_OUTCOMES`; else the first row.

    Raises:
        TypeError: naming ``rows[i]`` when a row is not a mapping.
        ValueError: if ``rows`` is empty, or as :func:`verdict` for a row that is not a
            paper-vs-run row.
    """
    if not rows:
        raise ValueError(
            "rows is empty: a chapter reports at least one paper-vs-run row"
        )
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(
                f"rows[{i}] must be a dict (a paper-vs-run row), got {type(row).__name__}"
            )
    marked = [row for row in rows if row.get("headline")]
    judged_rows = [row for row in rows if verdict(row) in JUDGED_OUTCOMES]
    return (marked or judged_rows or list(rows))[0]


def claim_verdict(rows: Sequence[Mapping]) -> str:
    """One of :data:`LEDGER_OUTCOMES`: a chapter's one verdict on its paper's central claim.

    It is read off the chapter's :func:`headline_row`: the chapter's own judgement of the claim
    when the row carries one (``claim_outcome``: consistent, refuted, …, with its
    ``claim_reason``), else the row's :func:`verdict` read as a claim (:data:`CLAIM_OUTCOMES`:
    *meets* is *reproduced*, *falls short* *not reproduced*, the others keep their words). The
    chapter's page, its line on the results page and its line in the ledger all state this one
    verdict; a row's own verdict stays in the full table.

    Raises:
        TypeError: naming ``rows[i]`` when a row is not a mapping.
        ValueError: if ``rows`` is empty, or as :func:`verdict` for a row that is not a
            paper-vs-run row.
    """
    row = headline_row(rows)
    outcome = verdict(row)
    return row.get("claim_outcome") or CLAIM_OUTCOMES[outcome]


def verdict_sentence(rows: Sequence[Mapping]) -> str:
    """The sentence a chapter ends with: how many of its ``rows`` meet the paper.

    And how many fall short, are not resolved, are not comparable or are not judged, by
    :data:`VERDICT_RULE` (e.g. ``"2 of 5 rows meet the paper, 3 fall short."``, ``"1 of 8 rows
    meets …"``): the counts that :func:`verdict_tally` gives the results page. Rows that compare
    no number (not comparable, not judged) but carry the chapter's judgement of the paper's
    qualitative claim show that judgement as their verdict (:func:`verdict_text`), so the
    sentence says how many they are and what they judge ("; 2 of these carry the chapter's
    judgement of the paper's claim instead (refuted 1, not resolved 1).").

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
        "not judged": ("is not judged", "are not judged"),
    }
    met, n = counts["meets"], len(rows)
    parts = [
        f"{met} of {n} row{'s' * (n != 1)} {'meets' if met == 1 else 'meet'} the paper"
    ]
    parts += [f"{counts[o]} {verbs[o][counts[o] != 1]}" for o in verbs if counts[o]]
    claims = claim_tally(rows)
    if not claims:
        return ", ".join(parts) + "."
    total = sum(claims.values())
    judged = ", ".join(f"{claim} {k}" for claim, k in claims.items())
    carry = "carries" if total == 1 else "carry"
    return (
        ", ".join(parts) + f"; {total} of these {carry} the chapter's "
        f"judgement of the paper's claim instead ({judged})."
    )


def claim_tally(rows: Sequence[Mapping]) -> dict[str, int]:
    """How many of ``rows`` compare no number (*not comparable*, *not judged*) but carry the
    chapter's judgement of the paper's claim, by that judgement (``{"refuted": 1, ...}``, in the
    order they first appear; empty when none): the rows whose table verdict is the claim's
    (:func:`verdict_text`) while :func:`verdict_tally` counts them by their number.

    Raises:
        TypeError: if a row is not a mapping.
        ValueError: as :func:`verdict`.
    """
    claims = [
        row["claim_outcome"]
        for row in rows
        if row.get("claim_outcome") and verdict(row) not in JUDGED_OUTCOMES
    ]
    return {claim: claims.count(claim) for claim in dict.fromkeys(claims)}


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
    printed once above the table instead of in every row — and when at least half of them
    share it, it is printed once and those rows say "as above"; likewise a ``not_comparable``
    reason that three or more rows share ("not comparable: the reason above").

    Raises:
        TypeError: naming ``verdicts`` when it is not True or False (``"False"`` would read as true).
        ValueError: naming ``notebook_column`` when it does not hold one entry per row, or naming a
            row's missing or unknown keys or its ``better`` (as :func:`verdict`).
    """
    verdicts = check_flag(verdicts, "verdicts")
    if notebook_column is not None and len(notebook_column) != len(rows):
        raise ValueError(
            f"notebook_column must hold one entry per row: {len(notebook_column)} for {len(rows)} rows"
        )
    for i, row in enumerate(rows):
        check_row_keys(row, f"rows[{i}]")
    differences = [row["differences"] for row in rows]
    usual = max(set(differences), key=differences.count) if differences else None
    once = notebook_column is None and differences.count(usual) >= max(
        2, len(rows) // 2
    )
    reasons = [row["not_comparable"] for row in rows if row.get("not_comparable")]
    common = max(set(reasons), key=reasons.count) if reasons else None
    if notebook_column is not None or reasons.count(common) < 3:
        common = None  # a reason shared by three rows or more is stated once, above the table
    mixed = (
        once and len(set(differences)) > 1
    )  # the usual text once above, the others in a column
    keys = [
        key for key in ROW_KEYS if not (once and not mixed and key == "differences")
    ]
    names = {"this_run": "this run"}
    header = (
        (["notebook"] if notebook_column else [])
        + [names.get(key, key) for key in keys]
        + (["verdict"] if verdicts else [])
    )
    lines = [
        ([notebook_column[index]] if notebook_column else [])
        + [
            (
                "as above"
                if mixed and key == "differences" and row[key] == usual
                else _number(row[key])
            )
            for key in keys
        ]
        + (
            [
                verdict_text(
                    {**row, "not_comparable": "the reason above"}
                    if common and row.get("not_comparable") == common
                    else row
                )
            ]
            if verdicts
            else []
        )
        for index, row in enumerate(rows)
    ]
    preface = (
        f"**Differences from the paper ({'rows that say as above' if mixed else 'every row'}):** {usual}\n\n"
        if once
        else ""
    ) + (
        f"**Not comparable (rows that say so):** {common}\n\n"
        if common and verdicts
        else ""
    )
    return preface + markdown_table(header, lines)
