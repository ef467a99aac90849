"""Chapter 03's view-bank study (scripts/bank_study_03.py) and its reader
(gitutor.chapters.cv_batch_labels.view_banks)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitutor.chapters.cv_batch_labels import view_banks as vb
from gitutor.chapters.settings import get_profile

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cfg():
    return get_profile("03_cv_batch_labels", "quick")


def _flags(exact: int, n: int) -> list[float]:
    return [1.0] * exact + [0.0] * (n - exact)


def _record(cfg, exact=(18, 22, 8)):
    n = cfg.imagenet_trials
    return {
        "study": "03_view_banks", "profile": "quick", "seed": 0,
        "settings": {k: getattr(cfg, k) for k in vb.SETTINGS},
        "banks": [{"bank_seed": s, "ours": _flags(k, n), "exhaustive": _flags(k, n), "premise": _flags(90, n)}
                  for s, k in enumerate(exact)],
        "command": "python3 scripts/bank_study_03.py", "commit": "0123456789ab", "wall_seconds": 1.0,
        "device": "cpu", "torch": "2.4.0", "date": "2026-12-08 03:00 UTC",
    }


def _write(tmp_path, record):
    path = tmp_path / "03_view_banks.json"
    path.write_text(json.dumps(record))
    return path


def test_summary_gives_each_banks_rate_and_an_interval_over_banks(cfg, tmp_path):
    page = _flags(18, cfg.imagenet_trials)
    study = vb.read_record(_write(tmp_path, _record(cfg)), cfg, 0, page)
    found = vb.summary(study)
    assert found["rates"] == pytest.approx([0.18, 0.22, 0.08]) and found["banks"] == 3
    assert (found["lowest"], found["highest"]) == pytest.approx((0.08, 0.22))
    over = found["over_banks"]
    assert over.mean == pytest.approx(0.16) and over.n == 3 and over.low < 0.08 < 0.22 < over.high
    assert vb.summary(study, "premise")["rates"] == pytest.approx([0.9] * 3)
    with pytest.raises(ValueError, match="name"):
        vb.summary(study, "bias count")


def test_a_record_that_is_not_the_pages_run_is_refused_naming_the_field(cfg, tmp_path):
    n = cfg.imagenet_trials
    page = _flags(18, n)
    with pytest.raises(ValueError, match="bank 0"):  # the page's own flags differ: other code
        vb.read_record(_write(tmp_path, _record(cfg)), cfg, 0, _flags(17, n))
    other = _record(cfg)
    other["settings"]["iterations"] = 2000
    with pytest.raises(ValueError, match="iterations"):
        vb.read_record(_write(tmp_path, other), cfg, 0, page)
    unsourced = _record(cfg)
    del unsourced["date"]
    with pytest.raises(ValueError, match="date"):
        vb.read_record(_write(tmp_path, unsourced), cfg, 0, page)
    with pytest.raises(ValueError, match="two banks"):
        vb.read_record(_write(tmp_path, _record(cfg, exact=(18,))), cfg, 0, page)
    short = _record(cfg)
    short["banks"][1]["premise"] = short["banks"][1]["premise"][:10]
    with pytest.raises(ValueError, match="flags"):
        vb.read_record(_write(tmp_path, short), cfg, 0, page)
    assert vb.recorded_study(tmp_path / "absent.json", cfg, 0, None, page) is None
    assert vb.recorded_study(_write(tmp_path, _record(cfg)), cfg, 0, "smoke", page) is None


def test_the_books_record_has_the_pages_bank_first_and_its_provenance(cfg):
    path = ROOT / "book" / "studies" / "03_view_banks.json"
    record = json.loads(path.read_text())
    assert record["dirty"] is False and len(record["banks"]) >= 10 and record["banks"][0]["bank_seed"] == 0
    study = vb.read_record(path, cfg, 0, record["banks"][0]["ours"])
    assert vb.summary(study)["banks"] == len(record["banks"])


def test_the_row_over_banks_is_judged_against_every_batch_exact(cfg, tmp_path):
    from gitutor.results import verdict

    page = _flags(18, cfg.imagenet_trials)
    found = vb.summary(vb.read_record(_write(tmp_path, _record(cfg)), cfg, 0, page))
    row = vb.bank_row(found, cfg, "quick profile")
    assert row["this_run"] == pytest.approx(0.16) and row["n"] == 3 and row["low"] < row["high"] < 1
    assert verdict(row) == "falls short" and "lowest 0.08, highest 0.22" in row["differences"]
