"""The "paper vs this run" record every notebook ends with, and the book-wide summary.

Each notebook saves ``{RESULTS_DIR}/{notebook}.json``::

    {"notebook", "profile", "rows": [row, ...], "timings": [row, ...]}

A row has the keys :data:`ROW_KEYS` and may add ``"better"`` (``"higher"`` or
``"lower"``: which direction of the number is the better attack), which makes the row
comparable and gives it a :func:`verdict`; ``"low"`` and ``"high"``, the 95 % interval of
this run's number over its trials, and ``"n"``, how many trials (a judged row needs its
interval, or ``"n": 1`` for a single measurement; :func:`interval_fields` writes all three
from a :class:`gitutor.stats.Interval`); ``"not_comparable"``, why the row's setting differs
from the paper's in a way that matters (its verdict is then *not comparable*, with that
reason); and ``"headline": true``, which makes it the row that stands for its chapter on
the "Results at a glance" page (:data:`HEADLINE_RULE`). No number or interval may lie outside
its quantity's range (:func:`check_bounds`). The ledger (:func:`ledger_table`, :func:`ledger_summary`) reads each paper's central claim
off its chapter's headline row. Wall-clock rows go in ``timings``, apart from the results, so
that two runs with the same seed give identical ``rows``. Recorded runs
(``book/recorded/``) use the same record with an extra ``"provenance"`` dict.

The "Results at a glance" page (``book/results.ipynb``) reads the records with
:func:`collect_results` and shows :func:`glance_table` (one line per record: a chapter
run, or a recorded run of its own) above :func:`chapter_details` (each record's full
:func:`results_table` in a dropdown) and :func:`timings_table`.
"""

from gitutor.results.bounds import check_bounds, row_bounds
from gitutor.results.glance import (
    CHAPTER_NAMES,
    GLANCE_LIMITS,
    chapter_details,
    chapter_name,
    glance_rows,
    glance_table,
    provenance_note,
    record_label,
    run_label,
    timings_table,
)
from gitutor.results.ledger import (
    CLAIM_OUTCOMES,
    LEDGER_OUTCOMES,
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
    HEADLINE_RULE,
    OUTCOMES,
    TOLERANCE,
    VERDICT_RULE,
    headline_row,
    results_table,
    verdict,
    verdict_sentence,
    verdict_tally,
    verdict_text,
)

__all__ = [
    "CHAPTER_NAMES",
    "CLAIM_OUTCOMES",
    "LEDGER_OUTCOMES",
    "PAPERS",
    "DIRECTIONS",
    "GLANCE_LIMITS",
    "HEADLINE_RULE",
    "OPTIONAL_KEYS",
    "OUTCOMES",
    "ROW_KEYS",
    "TOLERANCE",
    "VERDICT_RULE",
    "chapter_details",
    "check_bounds",
    "chapter_name",
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
    "timings_table",
    "verdict",
    "verdict_sentence",
    "verdict_tally",
    "timing_rows",
    "verdict_text",
]
