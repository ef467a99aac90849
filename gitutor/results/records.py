"""A chapter's results record: ``{RESULTS_DIR}/{notebook}.json``, written by :func:`save_results`
(checked rows, written atomically) and read back by :func:`collect_results` (see :mod:`gitutor.results`)."""

from __future__ import annotations

import decimal
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from gitutor.checks import check_choice, check_int, check_real
from gitutor.files import read_json, write_json
from gitutor.results.bounds import check_bounds

ROW_KEYS = ("quantity", "setting", "paper", "this_run", "unit", "differences")
OPTIONAL_KEYS = (
    "better",
    "low",
    "high",
    "n",
    "headline",
    "not_comparable",
    "claim",
    "claim_outcome",
    "claim_reason",
)
#: What a chapter may judge a paper's qualitative claim from its own evidence (``claim_outcome``, with ``claim_reason``):
#: consistent / refuted; reproduced / not reproduced (an observation of the paper's experiment seen again, or not,
#: in the paper's kind of setting); or not resolved (n too small: say which n would settle it) / not comparable
#: (say how the setting differs) when the evidence cannot decide the quoted claim.
CLAIM_JUDGEMENTS = (
    "consistent",
    "refuted",
    "reproduced",
    "not reproduced",
    "not resolved",
    "not comparable",
)
DIRECTIONS = ("higher", "lower")
#: The profiles a record may name: those of :mod:`gitutor.chapters.settings` (``PROFILES``; this layer
#: sits below the chapters, and ``tests/test_careless_user.py`` checks that the two agree).
PROFILES = ("quick", "full")
_NOTEBOOK_NAME = re.compile(r"^[0-9]{2}_[A-Za-z0-9_]+$")


def scalar(value):
    """A 0-d NumPy or torch value as the Python number it holds (anything else as it is)."""
    if (
        hasattr(value, "item")
        and callable(value.item)
        and getattr(value, "ndim", None) == 0
    ):
        return value.item()
    return value


def _plain(value, where: str):
    """``value`` as a JSON scalar: numpy/torch scalars unwrapped, inf/nan as str."""
    value = scalar(value)
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
    """A row's ``"n"``, ``"low"`` and ``"high"`` from a :class:`gitutor.stats.Interval`, the
    ends rounded to ``digits`` (outwards, so the rounded interval still holds the exact one);
    only ``{"n": 1}`` for one trial (no interval), ``{}`` for None.

    Raises:
        TypeError: naming ``digits`` when it is not an int.
        ValueError: naming ``digits`` when it is negative.
    """
    check_int(digits, "digits", low=0)
    if interval is None:
        return {}
    if interval.n == 1 or not (_finite(interval.low) and _finite(interval.high)):
        return {"n": int(interval.n)}
    scale = 10**digits
    return {
        "n": int(interval.n),
        "low": math.floor(interval.low * scale + 1e-9) / scale,
        "high": math.ceil(interval.high * scale - 1e-9) / scale,
    }


def judged(row: Mapping) -> bool:
    """Whether ``row`` gets a meets / falls short / not resolved verdict: it states which
    direction is better, both numbers are finite and it is not marked ``not_comparable``."""
    return (
        row.get("better") in DIRECTIONS
        and not row.get("not_comparable")
        and _finite(row.get("paper"))
        and _finite(row.get("this_run"))
    )


def sample_problem(row: Mapping) -> str | None:
    """Why ``row`` cannot be judged as it stands (None: it can): a judged row
    (:func:`judged`) of n > 1 trials needs its 95 % interval (``low``/``high``), and a row
    with n = 1 has no interval. (A judged row that states neither is *not resolved*:
    :func:`gitutor.results.verdict`.)"""
    n, has_interval = row.get("n"), "low" in row
    if n == 1 and has_interval:
        return "'n' is 1 but the row has an interval: one trial has none (n = 1, no interval)"
    if judged(row) and not has_interval and n is not None and n > 1:
        return (
            f"it is judged against the paper and summarises n = {n} trials but carries no "
            "interval: give its 95 % interval as 'low'/'high' "
            "(gitutor.results.interval_fields(gitutor.stats.interval(values, bounds=...)))"
        )
    return None


def _real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _numeric_text(value) -> bool:
    """A string that spells a number ("20.0", "nan", " 1e3"): a number given as text by mistake."""
    try:
        return isinstance(value, str) and (float(value) or True)
    except ValueError:
        return False


def _rounding(value: float) -> float:
    """Half a unit in the last decimal place ``value`` is written with (0.35 → 0.005, 20 → 0.5):
    how far a rounded number may lie from the exact one it stands for."""
    exponent = decimal.Decimal(repr(value)).as_tuple().exponent
    return 0.5 * 10.0**exponent if isinstance(exponent, int) else 0.0


def interval_problem(row: Mapping) -> str | None:
    """Why this run's number does not fit its own interval (None: it does, or the row has none): a
    NaN or infinite ``this_run`` (a float, or as a record stores it, ``"nan"``/``"inf"``) beside a
    finite interval, or a ``this_run`` outside ``[low, high]`` by more than its own rounding
    (:func:`_rounding`: 0.35 may stand for anything in [0.345, 0.355])."""
    if (
        "low" not in row
        or "high" not in row
        or not (_finite(row["low"]) and _finite(row["high"]))
    ):
        return None
    run = row.get("this_run")
    if run in ("nan", "inf", "-inf") or _real(run) and not _finite(run):
        return (
            f"'this_run' is {run!r} but the row gives the interval [{row['low']!r}, {row['high']!r}]: an "
            "interval over trials has a finite mean; give that mean, or drop the interval"
        )
    if _real(run):
        slack = _rounding(float(run)) + 1e-9 * max(1.0, abs(float(run)))
        if not row["low"] - slack <= run <= row["high"] + slack:
            return (
                f"'this_run' = {run!r} lies outside its own interval [{row['low']!r}, {row['high']!r}]: the "
                "interval must be of the number the row reports (its mean over the n trials)"
            )
    return None


def number_problem(row: Mapping) -> str | None:
    """Why the numbers of ``row`` cannot be judged (None: they can): an interval given by half,
    not finite or with low > high, or that does not hold this run's number (:func:`interval_problem`);
    ``n`` not an int ≥ 1; or, on a row that states which direction
    is better (and is not marked ``not_comparable``), a paper value that is NaN or inf, or a paper
    or run value that spells a number as a string ("20.0"; a run's "inf", "-inf" or "nan", which is
    how a record stores those floats, is allowed). Words ("pixel-wise accurate") stay: such a row is *not
    judged* by :data:`gitutor.results.VERDICT_RULE` (or *not comparable*, when it is marked so)."""
    if ("low" in row) != ("high" in row):
        return "give both 'low' and 'high' (this run's interval) or neither"
    if "low" in row and not (
        all(_finite(row[key]) for key in ("low", "high")) and row["low"] <= row["high"]
    ):
        return f"'low' and 'high' must be finite numbers with low ≤ high, got {row['low']!r}, {row['high']!r}"
    problem = interval_problem(row)
    if problem:
        return problem
    if "n" in row and (
        isinstance(row["n"], bool)
        or not isinstance(row["n"], numbers.Integral)
        or row["n"] < 1
    ):
        return f"'n' (trials behind this run's number) must be an int ≥ 1, got {row['n']!r}"
    if row.get("better") in DIRECTIONS and not row.get("not_comparable"):
        for key in ("paper", "this_run"):
            value, stored = (
                row.get(key),
                key == "this_run" and row.get(key) in ("inf", "-inf", "nan"),
            )
            if (
                _numeric_text(value)
                and not stored
                or key == "paper"
                and _real(value)
                and not _finite(value)
            ):
                return (
                    f"{key!r} is {value!r} ({type(value).__name__}) but the row states better = "
                    f"{row['better']!r}: give it as a finite number (or, for a paper without a number, "
                    "its words; or mark the row 'not_comparable' saying why)"
                )
    return None


def check_row_keys(row: Mapping, where: str = "row", *, unknown: bool = True) -> None:
    """Check that ``row`` is a mapping with every key of :data:`ROW_KEYS`, (``unknown``) no key outside
    :data:`ROW_KEYS` and :data:`OPTIONAL_KEYS`, and a ``better`` (if any) of :data:`DIRECTIONS`,
    spelled as they are (``"Higher"`` is no direction).

    Raises:
        TypeError: naming ``where`` when ``row`` is not a mapping.
        ValueError: naming ``where`` and the missing or unknown keys, or ``'better'`` and its value.
    """
    if not isinstance(row, Mapping):
        raise TypeError(
            f"{where} must be a dict with keys {ROW_KEYS}, got {type(row).__name__}"
        )
    missing = [key for key in ROW_KEYS if key not in row]
    extra = (
        [key for key in row if key not in ROW_KEYS + OPTIONAL_KEYS] if unknown else []
    )
    if missing or extra:
        raise ValueError(
            f"{where} {dict(row)!r}: missing keys {missing}, unknown keys {extra}; "
            f"keys are {ROW_KEYS} and optionally {OPTIONAL_KEYS}"
        )
    if "better" in row and row["better"] not in DIRECTIONS:
        raise ValueError(
            f"{where}: 'better' must be one of {DIRECTIONS}, got {row['better']!r}"
        )


def _check_row(row: Mapping, where: str, results: bool = True) -> dict:
    """``row`` checked (``results``: a paper-vs-run row, not a timing) as a JSON-able dict. A torch or
    NumPy scalar is read as the number it holds before the checks, so that they see what is written."""
    check_row_keys(row, where)
    row = {key: scalar(value) for key, value in row.items()}
    problem = number_problem(row)
    if problem:
        raise ValueError(f"{where}: {problem}")
    for key in (
        "not_comparable",
        "claim",
        "claim_reason",
    ):  # why it differs / the paper's words / the evidence
        if key in row and not (isinstance(row[key], str) and row[key].strip()):
            raise ValueError(
                f"{where}: {key!r} must say why (a non-empty string), got {row[key]!r}"
            )
    if ("claim_outcome" in row) != ("claim_reason" in row) or row.get(
        "claim_outcome", "refuted"
    ) not in CLAIM_JUDGEMENTS:
        raise ValueError(
            f"{where}: 'claim_outcome' must be one of {CLAIM_JUDGEMENTS} and come with its "
            f"'claim_reason', got {row.get('claim_outcome')!r}, {row.get('claim_reason')!r}"
        )
    problem = sample_problem(row) if results else None
    if problem:
        raise ValueError(
            f"{where} ({row['quantity']!r}, {row['setting']!r}): {problem}"
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
        profile: ``"quick"`` or ``"full"`` (:data:`PROFILES`, the names :mod:`gitutor.chapters` defines).
        rows: the paper-vs-run rows (keys :data:`ROW_KEYS`; optional :data:`OPTIONAL_KEYS`:
            ``"better"``, this run's interval ``"low"``/``"high"`` and its trials ``"n"``,
            ``"headline"``: ``True`` on the one row that stands for the chapter, and
            ``"not_comparable"``: why the setting's differences matter; see
            :mod:`gitutor.results`).
        results_dir: the folder of the records (created if missing).
        timings: wall-clock rows (same keys), stored apart from ``rows``.

    Every check runs before the file is written: a refused call leaves an existing record as it was.

    Raises:
        ValueError: ``notebook`` is not a plain chapter name (no paths), ``profile`` is not one
            of :data:`PROFILES` (``"qiuck"``), ``rows`` is empty, or a row lacks one of
            :data:`ROW_KEYS`, has an unknown key or an unknown ``better`` (``"Higher"``), reports a
            ``this_run`` outside its own interval or a NaN/inf ``this_run`` beside an interval
            (:func:`interval_problem`), or more than
            one row is marked ``"headline": True``; naming the row, when a judged row
            (:func:`judged`) of n > 1 trials has no interval or a row of n = 1 has one
            (:func:`sample_problem`), or a number or interval lies outside its
            quantity's range (:func:`gitutor.results.bounds.check_bounds`).
        TypeError: a row is not a dict, a value is not a number, string or None,
            ``headline`` is not a bool, or ``profile`` is not a string.
    """
    if not isinstance(notebook, str) or not _NOTEBOOK_NAME.match(notebook):
        raise ValueError(
            "notebook must be a chapter name such as '01_dlg' (no path), "
            f"got {notebook!r}"
        )
    check_choice(profile, "profile", PROFILES)
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
    timed = [_check_row(row, f"timings[{i}]", False) for i, row in enumerate(timings)]
    path = Path(results_dir) / f"{notebook}.json"
    record = {
        "notebook": notebook,
        "profile": profile,
        "rows": checked,
        "timings": timed,
    }
    return write_json(path, check_bounds(record), indent=2, allow_nan=False)


def collect_results(*folders: str | Path) -> list[dict]:
    """Every ``*.json`` record in ``folders``, sorted by notebook name.

    A chapter's run comes before its recorded run.

    Raises:
        ValueError: if no folder is given or the first one does not exist (later folders
            may be missing), or naming the file of a record that is truncated, not JSON, or not
            a results record (no ``notebook`` name, no ``rows`` list, a row :func:`save_results`
            would refuse).
    """
    if not folders:
        raise ValueError("collect_results needs at least one results folder")
    if not Path(folders[0]).is_dir():
        raise ValueError(
            f"results folder {folders[0]} does not exist; "
            "run the notebooks first (make notebooks)"
        )
    records = [
        read_record(path)
        for folder in folders
        if Path(folder).is_dir()
        for path in sorted(Path(folder).glob("*.json"))
    ]
    return sorted(
        records, key=lambda record: (record["notebook"], "provenance" in record)
    )


def read_record(path: str | Path) -> dict:
    """The results record at ``path``, checked as :func:`save_results` checks what it writes.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: naming ``path`` when it is truncated, not JSON, or not a results record.
    """
    record = read_json(path, "results record")
    problem = _record_problem(record)
    if problem:
        raise ValueError(f"results record {path} is not a results record: {problem}")
    return record


def _record_problem(record) -> str | None:
    """What is wrong with a parsed results record (None: nothing)."""
    if not isinstance(record, dict) or not isinstance(record.get("notebook"), str):
        return "it has no 'notebook' name"
    if not isinstance(record.get("rows"), list) or not record["rows"]:
        return "it has no list of 'rows'"
    try:
        for key in ("rows", "timings"):
            for i, row in enumerate(record.get(key, [])):
                _check_row(row, f"{key}[{i}]", key == "rows")
        check_bounds(record)
    except (TypeError, ValueError) as error:
        return str(error)
    if record.get("profile") not in PROFILES:
        return f"its 'profile' is {record.get('profile')!r}, not one of {PROFILES}"
    return None


def timing_rows(profile: str, device: str, wall_s: float, cpu_s: float) -> list[dict]:
    """Wall-clock and CPU time (s) of a notebook's run, for ``save_results(..., timings=...)``.

    Raises:
        TypeError: naming ``profile`` when not a string, ``device`` when neither a string nor a
            ``torch.device``, ``wall_s`` or ``cpu_s`` when not a real number.
        ValueError: naming ``profile`` when not one of :data:`PROFILES`, ``wall_s`` or ``cpu_s`` when
            NaN, infinite or negative.
    """
    check_choice(profile, "profile", PROFILES)
    if type(device).__name__ == "device" and type(device).__module__ == "torch":
        device = str(device)  # a torch.device reads as its name
    if not isinstance(device, str):
        raise TypeError(
            f"device must be a string such as 'cpu' or a torch.device, got {type(device).__name__}"
        )
    wall_s, cpu_s = (
        check_real(wall_s, "wall_s", low=0.0),
        check_real(cpu_s, "cpu_s", low=0.0),
    )
    return [
        {
            "quantity": "notebook wall time",
            "setting": f"{profile} profile, {device}",
            "paper": "not reported",
            "this_run": round(wall_s),
            "unit": "s",
            "differences": "shared machine; varies run to run",
        },
        {
            "quantity": "notebook CPU time",
            "setting": "summed over threads",
            "paper": "not reported",
            "this_run": round(cpu_s),
            "unit": "s",
            "differences": "as above",
        },
    ]
