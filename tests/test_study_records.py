"""The checks shared by the recorded studies' readers (gitutor.study_records)."""
from __future__ import annotations

import json

import pytest

from gitutor.study_records import PROVENANCE, provenance, read_study_record


def _write(tmp_path, record):
    path = tmp_path / "study.json"
    path.write_text(json.dumps(record))
    return path


def test_a_record_with_its_provenance_for_this_run_is_read_and_others_are_refused(tmp_path):
    record = {field: "x" for field in PROVENANCE} | {"seed": 0, "settings": {"steps": 100}}
    path = _write(tmp_path, record)
    read = read_study_record(path, "study", "scripts/s.py", {"seed": 0, "settings.steps": 100})
    assert read == record and provenance(read) == {field: "x" for field in PROVENANCE}
    with pytest.raises(ValueError, match="'settings.steps' is 100, this run's is 200"):
        read_study_record(path, "study", "scripts/s.py", {"settings.steps": 200})
    with pytest.raises(ValueError, match="'settings.lr' is None"):  # a missing nested field
        read_study_record(path, "study", "scripts/s.py", {"settings.lr": 0.1})
    for field in PROVENANCE:
        with pytest.raises(ValueError, match=f"provenance field '{field}': rerun scripts/s.py"):
            read_study_record(_write(tmp_path, {k: v for k, v in record.items() if k != field}),
                              "study", "scripts/s.py", {})
    with pytest.raises(ValueError, match="JSON object"):
        read_study_record(_write(tmp_path, [1, 2]), "study", "scripts/s.py", {})
    with pytest.raises(FileNotFoundError):
        read_study_record(tmp_path / "absent.json", "study", "scripts/s.py", {})


def test_a_record_speaks_only_for_its_profile_without_a_budget(tmp_path):
    from gitutor.study_records import speaks_for

    path = _write(tmp_path, {"profile": "quick"})
    assert speaks_for(path, "quick", None)
    assert not speaks_for(path, "full", None) and not speaks_for(path, "quick", "smoke")
    assert not speaks_for(tmp_path / "absent.json", "quick", None)
