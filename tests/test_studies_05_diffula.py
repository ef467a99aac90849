"""Chapter 05's DiffULA budget study (scripts/diffula_study_05.py) and its reader
(gitutor.chapters.diffusion_user_level.diffula_budget)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitutor.chapters import get_profile
from gitutor.chapters.diffusion_user_level import diffula_budget as db
from gitutor.chapters.diffusion_user_level import report

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cfg():
    return get_profile("05_diffusion_user_level", "quick")


def _user(lpips, mse=0.03):
    return {"mse": mse, "psnr": 15.0, "ssim": 0.4, "lpips": lpips, "face_rate": 1.0}


def _record(cfg, budgets=(100, 200, 400), lpips=None):
    n = len(cfg.users)
    lpips = lpips or {b: 0.1 - 0.01 * i for i, b in enumerate(budgets)}
    return {
        "study": "05_diffula_budget", "profile": "quick", "seed": 0,
        "settings": {k: getattr(cfg, k) for k in db.SETTINGS}, "users": list(cfg.users),
        "budgets": list(budgets), "table_budget": cfg.steps,
        "scores": {str(b): {"final": [_user(lpips[b] + 0.001 * k) for k in range(n)],
                            "t_star_0": [_user(lpips[b] + 0.02) for _ in range(n)]} for b in budgets},
        "notebook_check": {"budget": cfg.steps, "max_difference": 0.0},
        "command": "python3 scripts/diffula_study_05.py", "commit": "0123456789ab", "wall_seconds": 1.0,
        "device": "cpu", "torch": "2.4.0", "date": "2026-12-08 03:00 UTC",
    }


def _write(tmp_path, record):
    path = tmp_path / "05_diffula_budget.json"
    path.write_text(json.dumps(record))
    return path


def _page(cfg):
    return [_user(0.1 + 0.001 * k) for k in range(len(cfg.users))]  # the page's own 100-step DiffULA rows


def test_the_reader_returns_every_budget_and_both_readings_and_the_rows_pair_with_the_page(cfg, tmp_path):
    study = db.read_record(_write(tmp_path, _record(cfg)), cfg, 0, _page(cfg))
    assert study["budgets"] == [100, 200, 400] and study["table_budget"] == 100
    rows = db.budget_rows(study)
    assert set(rows) == {db.row_name(b, r) for b in (100, 200, 400) for r in db.READINGS}
    assert db.row_name(400) == "DiffULA, 400 steps" and db.row_name(400, "t_star_0") == "DiffULA, 400 steps, t* = 0"
    means = db.mean_scores(study)
    assert means[400]["lpips"] == pytest.approx(0.08 + 0.001 * (len(cfg.users) - 1) / 2)
    # paired with a baseline user by user, as the page pairs its arms
    baseline = [_user(0.1) for _ in cfg.users]
    arms = report.arm_differences(rows | {"IG": baseline}, {"at400": (db.row_name(400), "IG")})
    assert arms["values"]["at400_lpips"] == pytest.approx(means[400]["lpips"] - 0.1)
    assert arms["values"]["at400_lpips_word"] == "better"
    with pytest.raises(ValueError, match="reading"):
        db.row_name(400, "halfway")


def test_a_stale_or_foreign_record_is_refused_naming_the_field(cfg, tmp_path):
    page = _page(cfg)
    stale = _page(cfg)
    stale[3] = _user(0.5)  # the page's own runs moved: the record was made with other code
    with pytest.raises(ValueError, match="differ from this page's"):
        db.read_record(_write(tmp_path, _record(cfg)), cfg, 0, stale)
    with pytest.raises(ValueError, match="seed"):
        db.read_record(_write(tmp_path, _record(cfg)), cfg, 1, page)
    other = _record(cfg)
    other["settings"]["t_star"] = 0
    with pytest.raises(ValueError, match="t_star"):
        db.read_record(_write(tmp_path, other), cfg, 0, page)
    unsourced = _record(cfg)
    del unsourced["commit"]
    with pytest.raises(ValueError, match="commit"):
        db.read_record(_write(tmp_path, unsourced), cfg, 0, page)
    with pytest.raises(ValueError, match="budgets"):
        db.read_record(_write(tmp_path, _record(cfg, budgets=(200, 400))), cfg, 0, page)
    short = _record(cfg)
    short["scores"]["200"]["t_star_0"] = short["scores"]["200"]["t_star_0"][:3]
    with pytest.raises(ValueError, match="scores"):
        db.read_record(_write(tmp_path, short), cfg, 0, page)
    with pytest.raises(ValueError, match="page_rows"):
        db.read_record(_write(tmp_path, _record(cfg)), cfg, 0, page[:4])


def test_the_page_reads_the_record_only_where_it_speaks_for_the_run(cfg, tmp_path):
    path = _write(tmp_path, _record(cfg))
    assert db.recorded_study(path, cfg, 0, None, _page(cfg))["budgets"] == [100, 200, 400]
    assert db.recorded_study(path, cfg, 0, "smoke", _page(cfg)) is None
    assert db.recorded_study(tmp_path / "absent.json", cfg, 0, None, _page(cfg)) is None
    full = get_profile("05_diffusion_user_level", "full")
    assert db.recorded_study(path, full, 0, None, _page(cfg)) is None


def test_the_books_record_is_the_quick_profiles_and_passes_its_checks(cfg):
    """book/studies/05_diffula_budget.json: made for the profile's users, seed and settings, with provenance,
    its page-budget runs scored as evaluate_users scores them (max difference 0)."""
    record = json.loads((ROOT / "book" / "studies" / "05_diffula_budget.json").read_text())
    assert record["notebook_check"] == {"budget": cfg.steps, "max_difference": 0}
    assert record["dirty"] is False and cfg.steps in record["budgets"] and max(record["budgets"]) >= 4 * cfg.steps
    page = record["scores"][str(cfg.steps)]["final"]  # the page compares its own runs with these
    study = db.read_record(ROOT / "book" / "studies" / "05_diffula_budget.json", cfg, 0, page)
    assert study["budgets"] == record["budgets"]
