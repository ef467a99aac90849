"""The checks every recorded study's reader makes before a page shows the record: a JSON object, with its
provenance, made for this run's seed, users and settings (chapters 03 and 05's ``scripts/*_study_*.py``
records; their readers add the checks of their own fields)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

#: Provenance a study record must carry (written by its script, never by hand).
PROVENANCE = ("commit", "command", "wall_seconds", "device", "torch", "date")


def read_study_record(
    path: str | Path, what: str, script: str, expected: Mapping[str, object]
) -> dict:
    """The record at ``path`` (``what`` names it in errors), checked: a JSON object, every field of
    :data:`PROVENANCE` present, and every ``expected`` field equal to this run's (a dotted name such as
    ``"settings.t_star"`` reads a nested field).

    Args:
        script: the command that writes the record (named in the error for a missing provenance field).

    Raises:
        FileNotFoundError: naming ``path`` when it does not exist.
        ValueError: naming ``path`` when it is not JSON or not an object, or naming the field that is
            missing (provenance) or other than this run's.
    """
    from gitutor.files import read_json

    record = read_json(path, what)
    if not isinstance(record, dict):
        raise ValueError(
            f"record {path} must be a JSON object, got {type(record).__name__}"
        )
    for field in PROVENANCE:
        if record.get(field) in (None, ""):
            raise ValueError(
                f"record {path} lacks its provenance field {field!r}: rerun {script} (records are "
                "never written by hand)"
            )
    for field, value in expected.items():
        found = record
        for part in field.split("."):
            found = found.get(part) if isinstance(found, dict) else None
        if found != value:
            raise ValueError(
                f"record {path}: field {field!r} is {found!r}, this run's is {value!r}; the record was "
                "made for other users, seeds or settings"
            )
    return record


def provenance(record: Mapping) -> dict:
    """The :data:`PROVENANCE` fields of a checked record."""
    return {field: record[field] for field in PROVENANCE}


def speaks_for(path: str | Path, profile: str, budget: str | None) -> bool:
    """Whether the record at ``path`` can speak for a notebook run: False when the notebook names a
    ``budget`` (``"smoke"``: other sizes), when ``path`` does not exist (e.g. a runtime without the
    repository's records) or when the record was made for another ``profile``; True otherwise (the
    reader then checks it and fails loudly on a stale record)."""
    from gitutor.files import read_json

    if budget is not None or not Path(path).is_file():
        return False
    record = read_json(path, "study record")
    return not (isinstance(record, dict) and record.get("profile") != profile)
