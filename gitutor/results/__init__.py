"""The "paper vs this run" record every notebook ends with, and the book-wide summary.

Each notebook saves ``{RESULTS_DIR}/{notebook}.json``::

    {"notebook", "profile", "rows": [row, ...], "timings": [row, ...]}

A row has the keys :data:`ROW_KEYS` and may add ``"better"`` (``"higher"`` or
``"lower"``: which direction of the number is the better attack), which lets the rule judge the
row against the paper's number (:func:`verdict`: meets, falls short or not resolved; a row the
rule cannot judge is *not judged*, :func:`why_not_judged`); ``"low"`` and ``"high"``, the 95 % interval of
this run's number over its trials, and ``"n"``, how many trials (a judged row needs its
interval, or ``"n": 1`` for a single measurement; :func:`interval_fields` writes all three
from a :class:`gitutor.stats.Interval`); ``"not_comparable"``, why the row's setting differs
from the paper's in a way that matters (its verdict is then *not comparable*, with that
reason); and ``"headline": true``, which makes it the row that stands for its chapter on
the "Results at a glance" page (:data:`HEADLINE_RULE`). No number or interval may lie outside
its quantity's range (:func:`check_bounds`). A chapter's one verdict on its paper's central claim
is :func:`claim_verdict` of its rows (its headline row, or the chapter's own judgement of the
claim, ``claim_outcome``); the glance table and the ledger (:func:`ledger_table`,
:func:`ledger_summary`) both state it, read off the same record (:func:`chapter_record`). Wall-clock rows go in ``timings``, apart from the results, so
that two runs with the same seed give identical ``rows``. Recorded runs
(``book/recorded/``) use the same record with an extra ``"provenance"`` dict.

The "Results at a glance" page (``book/results.ipynb``) reads the records with
:func:`collect_results` and shows the ledger, :func:`glance_table` (one line per chapter,
from the record that speaks for it) above :func:`chapter_details` (each record's full
:func:`results_table` in a dropdown, recorded runs included) and :func:`timings_table`.
"""

from gitutor.results.bounds import check_bounds, row_bounds
from gitutor.results.glance import (
    CHAPTER_NAMES,
    GLANCE_LIMITS,
    chapter_details,
    chapter_name,
    chapter_record,
    glance_rows,
    glance_table,
    provenance_note,
    record_label,
    run_label,
    timings_table,
)
from gitutor.results.ledger import (
    PAPERS,
    ledger_html,
    ledger_rows,
    ledger_summary,
    ledger_table,
)
from gitutor.results.records import (
    DIRECTIONS,
    OPTIONAL_KEYS,
    ROW_KEYS,
    collect_results,
    interval_fields,
    judged,
    read_record,
    sample_problem,
    save_results,
    timing_rows,
)
from gitutor.results.verdicts import (
    CLAIM_OUTCOMES,
    HEADLINE_RULE,
    JUDGED_OUTCOMES,
    LEDGER_OUTCOMES,
    NOT_JUDGED_REASONS,
    OUTCOMES,
    TOLERANCE,
    VERDICT_RULE,
    claim_tally,
    claim_verdict,
    headline_row,
    results_table,
    verdict,
    verdict_sentence,
    verdict_tally,
    verdict_text,
    why_not_judged,
)

__all__ = [
    "CHAPTER_NAMES",
    "CLAIM_OUTCOMES",
    "DIRECTIONS",
    "GLANCE_LIMITS",
    "HEADLINE_RULE",
    "JUDGED_OUTCOMES",
    "LEDGER_OUTCOMES",
    "NOT_JUDGED_REASONS",
    "OPTIONAL_KEYS",
    "OUTCOMES",
    "PAPERS",
    "ROW_KEYS",
    "TOLERANCE",
    "VERDICT_RULE",
    "chapter_details",
    "chapter_name",
    "chapter_record",
    "check_bounds",
    "claim_tally",
    "claim_verdict",
    "collect_results",
    "glance_rows",
    "glance_table",
    "headline_row",
    "interval_fields",
    "judged",
    "ledger_html",
    "ledger_rows",
    "ledger_summary",
    "ledger_table",
    "provenance_note",
    "read_record",
    "record_label",
    "results_table",
    "row_bounds",
    "run_label",
    "sample_problem",
    "save_results",
    "timing_rows",
    "timings_table",
    "verdict",
    "verdict_sentence",
    "verdict_tally",
    "verdict_text",
    "why_not_judged",
]
