"""Chapter 05's Inverting Gradients budget study (scripts/ig_study_05.py) and its reader
(gitutor.chapters.diffusion_user_level.ig_budget)."""

import importlib.util
import json
from pathlib import Path

import pytest

from gitutor.chapters import get_profile
from gitutor.chapters.diffusion_user_level import ig_budget
from gitutor.chapters.diffusion_user_level.ig_budget import BASELINES

ROOT = Path(__file__).resolve().parents[1]
SAMPLE, USER = BASELINES


def _script():
    spec = importlib.util.spec_from_file_location("ig_study_05", ROOT / "scripts" / "ig_study_05.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cfg():
    return get_profile("05_diffusion_user_level", "quick")


def _user(lpips, mse=0.05, ssim=0.3):
    return {"mse": mse, "psnr": 13.0, "ssim": ssim, "lpips": lpips, "face_rate": 0.0, "distance": 0.1}


def _record(cfg, choice_lpips, table_lpips, budgets=(100, 300, 600)):
    """A synthetic record: per baseline, per budget, the selection users' and the table's users' LPIPS."""
    n, m = len(cfg.users), 3
    record = {
        "study": "05_ig_budget", "profile": "quick", "seed": 0,
        "settings": {k: getattr(cfg, k) for k in ig_budget.SETTINGS},
        "users": list(cfg.users), "selection_users": ig_budget.selection_users(cfg),
        "budgets": list(budgets), "table_budget": cfg.ig_steps,
        "choice": {name: {str(b): [_user(choice_lpips[name][i]) for _ in range(m)]
                          for i, b in enumerate(budgets)} for name in BASELINES},
        "scores": {name: {str(b): [_user(table_lpips[name][i] + 0.01 * k) for k in range(n)]
                          for i, b in enumerate(budgets)} for name in BASELINES},
        "notebook_check": {"budget": cfg.ig_steps, "max_difference": 0.0},
        "command": "python3 scripts/ig_study_05.py", "commit": "0123456789ab", "wall_seconds": 12.5,
        "device": "cpu", "torch": "2.4.0", "date": "2026-12-07 23:00 UTC",
    }
    record["chosen_budget"] = {name: ig_budget.choose_budget(
        {int(b): u for b, u in record["choice"][name].items()}) for name in BASELINES}
    return record


def _write(tmp_path, record):
    path = tmp_path / "05_ig_budget.json"
    path.write_text(json.dumps(record))
    return path


def test_selection_users_are_held_out_faces_the_table_does_not_score(cfg):
    chosen = ig_budget.selection_users(cfg)
    assert chosen == [80, 82, 83] and not set(chosen) & set(cfg.users)
    assert ig_budget.selection_users(cfg.replace(users=[80, 81]), 2) == [82, 83]
    with pytest.raises(ValueError, match="count"):
        ig_budget.selection_users(cfg, 11)  # 20 held-out faces, 10 in the table
    with pytest.raises(ValueError, match="cfg.users"):
        ig_budget.selection_users(get_profile("05_diffusion_user_level", "full"))


def test_reader_returns_the_budget_chosen_on_the_selection_users_and_the_table(cfg, tmp_path):
    # the selection users prefer 300 (sample level) and 600 (user level); the table's users would prefer
    # 600 and 100: the choice must follow the selection users only
    choice = {SAMPLE: [0.30, 0.20, 0.25], USER: [0.30, 0.28, 0.20]}
    table = {SAMPLE: [0.40, 0.35, 0.30], USER: [0.10, 0.20, 0.30]}
    study = ig_budget.read_record(_write(tmp_path, _record(cfg, choice, table)), cfg, 0)
    assert study["chosen"] == {SAMPLE: 300, USER: 600}
    assert study["budgets"] == [100, 300, 600] and study["table_budget"] == cfg.ig_steps == 100
    lpips = study["scores"][SAMPLE][300]["lpips"]
    assert len(lpips) == len(cfg.users) and lpips[0] == pytest.approx(0.35) and lpips[-1] == pytest.approx(0.44)
    assert [row["lpips"] for row in study["rows"][USER]] == study["scores"][USER][600]["lpips"]
    assert study["choice"][USER][600]["lpips"] == [0.20] * 3 and study["selection_users"] == [80, 82, 83]
    assert ig_budget.spread(lpips) == pytest.approx((0.395, 0.35, 0.44))
    table_md = ig_budget.budget_table(study)
    assert "| **300** |" in table_md and "100 (page)" in table_md
    assert "LPIPS ↓, table users: median [lowest, highest]" in table_md  # not a 95 % interval
    assert "**0.395 [0.350, 0.440]**" in table_md and table_md.count("\n") == 1 + 1 + 2 * 3 - 1
    import matplotlib.pyplot as plt

    fig = ig_budget.budget_curves(study)
    assert len(fig.axes) == 3 and fig.axes[0].get_xscale() == "log"
    plt.close(fig)


def test_ties_choose_the_smaller_budget_and_bad_scores_are_refused():
    assert ig_budget.choose_budget({300: [_user(0.2)], 100: [_user(0.2)], 600: [_user(0.3)]}) == 100
    with pytest.raises(ValueError, match="lpips"):
        ig_budget.choose_budget({100: [_user(None)]})
    with pytest.raises(ValueError, match="scores"):
        ig_budget.choose_budget({100: []})


@pytest.mark.parametrize("field, change", [
    ("commit", lambda r: r.pop("commit")),
    ("wall_seconds", lambda r: r.pop("wall_seconds")),
    ("device", lambda r: r.update(device="")),
    ("torch", lambda r: r.pop("torch")),
    ("users", lambda r: r.update(users=r["users"][::-1])),
    ("seed", lambda r: r.update(seed=1)),
    ("settings.ig_tv_weight", lambda r: r["settings"].update(ig_tv_weight=1e-4)),
    ("selection_users", lambda r: r.update(selection_users=[81, 82, 83])),
    ("budgets", lambda r: r.update(budgets=[300, 600])),
    ("chosen_budget", lambda r: r["chosen_budget"].update({SAMPLE: 600})),
    ("notebook_check", lambda r: r["notebook_check"].update(max_difference=1e-3)),
    ("scores", lambda r: r["scores"][USER]["300"].pop()),
])
def test_reader_refuses_a_record_without_provenance_or_of_other_users_naming_the_field(
        cfg, tmp_path, field, change):
    record = _record(cfg, {SAMPLE: [0.3, 0.2, 0.25], USER: [0.3, 0.2, 0.25]},
                     {SAMPLE: [0.3, 0.2, 0.25], USER: [0.3, 0.2, 0.25]})
    change(record)
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        ig_budget.read_record(_write(tmp_path, record), cfg, 0)
    with pytest.raises(FileNotFoundError):
        ig_budget.read_record(tmp_path / "absent.json", cfg, 0)


def test_one_task_of_the_script_equals_the_notebooks_own_baselines(cfg):
    """The study's per-user runs (baseline_scores) are evaluate_users' own: the same seeds, scores and code
    path (two users, B = 4, 3 steps; the script asserts the same at the page's budget on its users)."""
    script = _script()
    tiny = script.settings().replace(users=[81, 86], batch_size=4, ig_steps=3)
    augment, phases = script.setup(tiny)
    faces, cases, starts = phases["table"]
    assert faces == [81, 86] and phases["choice"][0] == [80, 82, 83]
    own = script.notebook_rows(tiny, cases, augment)
    for k, case in enumerate(cases):
        ours = ig_budget.baseline_scores(case, tiny, augment, starts[k], 3)
        for name in BASELINES:
            assert {s: ours[name][s] for s in own[name][k]} == own[name][k]
    longer = ig_budget.baseline_scores(cases[0], tiny, augment, starts[0], 6)
    assert longer[USER]["mse"] != own[USER][0]["mse"]  # the budget is the run's own
    with pytest.raises(ValueError, match="budget"):
        ig_budget.baseline_scores(cases[0], tiny, augment, starts[0], 0)


def test_the_books_record_is_the_quick_profiles_and_passes_its_checks(cfg):
    """book/studies/05_ig_budget.json: made for the profile's users, seed and settings, with provenance, its
    100-step runs equal to the notebook's, each budget chosen on the selection users."""
    study = ig_budget.read_record(ROOT / "book" / "studies" / "05_ig_budget.json", cfg, 0)
    assert study["table_budget"] in study["budgets"] and 6 * cfg.steps in study["budgets"]
    assert set(study["chosen"]) == set(BASELINES) and study["notebook_check"]["max_difference"] == 0
    assert not set(study["selection_users"]) & set(cfg.users)


def test_the_page_reads_the_record_only_where_it_speaks_for_the_run(cfg, tmp_path):
    record = _record(cfg, {SAMPLE: [0.3, 0.2, 0.25], USER: [0.3, 0.2, 0.25]},
                     {SAMPLE: [0.3, 0.2, 0.25], USER: [0.3, 0.2, 0.25]})
    path = _write(tmp_path, record)
    assert ig_budget.recorded_study(path, cfg, 0)["chosen"] == {SAMPLE: 300, USER: 300}
    assert ig_budget.recorded_study(path, cfg, 0, "smoke") is None
    assert ig_budget.recorded_study(tmp_path / "absent.json", cfg, 0) is None
    full = get_profile("05_diffusion_user_level", "full")
    assert ig_budget.recorded_study(path, full, 0) is None
    with pytest.raises(ValueError, match="seed"):  # a record of this profile for another run: loud
        ig_budget.recorded_study(path, cfg, 1)


def test_table_1_gets_a_row_only_for_a_baseline_whose_chosen_budget_is_not_the_pages(cfg, tmp_path):
    # the selection users choose 100 (the page's) at sample level and 600 at user level
    choice = {SAMPLE: [0.20, 0.30, 0.25], USER: [0.30, 0.28, 0.20]}
    table = {SAMPLE: [0.40, 0.35, 0.30], USER: [0.10, 0.20, 0.30]}
    study = ig_budget.read_record(_write(tmp_path, _record(cfg, choice, table)), cfg, 0)
    assert ig_budget.chosen_name(SAMPLE, study) == SAMPLE
    name = ig_budget.chosen_name(USER, study)
    assert name == f"{USER}, 600 steps (chosen; recorded)"
    rows = ig_budget.chosen_rows(study)
    assert list(rows) == [name] and len(rows[name]) == len(cfg.users)
    # user k's scores at 600 steps, in the table's user order (paired with the page's runs)
    assert [r["lpips"] for r in rows[name]] == pytest.approx([0.30 + 0.01 * k for k in range(len(cfg.users))])
    assert ig_budget.chosen_rows(None) == {} and ig_budget.chosen_name(USER, None) == USER
    rows[name][0]["lpips"] = -1.0  # a copy: the study is not changed through the rows
    assert study["rows"][USER][0]["lpips"] == pytest.approx(0.30)
    with pytest.raises(KeyError):
        ig_budget.chosen_name("DiffULA", study)
