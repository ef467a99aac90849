"""`make smoke`: every chapter says how to run its full-profile code path briefly and offline."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from gitutor.chapters import NOTEBOOK_MODULES

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import smoke  # noqa: E402


def declared_parameters(notebook: str) -> set[str]:
    """Names assigned in the notebook's cell tagged ``parameters``."""
    cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    source = "".join(next(c for c in cells if "parameters" in c["metadata"].get("tags", []))["source"])
    return {line.split("=")[0].strip() for line in source.splitlines() if "=" in line and not line.startswith("#")}


@pytest.mark.parametrize("notebook", sorted(NOTEBOOK_MODULES))
def test_every_chapter_defines_smoke_parameters_its_notebook_declares(notebook):
    parameters = smoke.smoke_parameters(notebook)
    assert parameters, f"{notebook}: gitutor/chapters/{NOTEBOOK_MODULES[notebook]}/profile.py defines no SMOKE_PARAMETERS"
    assert set(parameters) <= declared_parameters(notebook), \
        f"{notebook}: SMOKE_PARAMETERS names parameters its parameters cell does not declare"
    assert not {"PROFILE", "DEVICE", "RESULTS_DIR"} & set(parameters)  # smoke.py sets those


@pytest.mark.parametrize("notebook", sorted(NOTEBOOK_MODULES))
def test_a_smoke_budget_names_a_budget_of_the_profile_module(notebook):
    module = importlib.import_module(f"gitutor.chapters.{NOTEBOOK_MODULES[notebook]}.profile")
    budget = smoke.smoke_parameters(notebook).get("BUDGET")
    if budget is not None:
        assert budget in module.BUDGETS


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_chapter_07s_smoke_budget_sets_a_budget_for_every_kind_of_either_profile(profile):
    """`make smoke` runs PROFILE=quick by default: its budget must name the quick kinds as well as the full ones."""
    from gitutor import get_profile

    cfg = get_profile("07_admm_comparison", profile, budget="smoke")
    assert set(cfg.kinds) <= set(cfg.iterations) and set(cfg.iterations.values()) == {3}


#: The offline fallback that each chapter's full-profile preflight suggests (issue 47), and the
#: parameters that carry it: SMOKE_PARAMETERS less the budget.
SUGGESTED_FALLBACKS = {
    "04_stepwise_gradinversion": {"PRETRAINED": False, "IMAGE_ROOT": "bundled"},
    "05_diffusion_user_level": {"DATA_ROOT": "bundled", "PRETRAINED": False},
    "07_admm_comparison": {"DATA_ROOT": "bundled"},
}


@pytest.mark.parametrize("notebook", sorted(SUGGESTED_FALLBACKS))
def test_the_suggested_fallback_runs_the_full_profile_at_the_smoke_budget(notebook, tmp_path):
    """What `make smoke` runs: the full profile with the parameters its messages suggest, at the
    chapter's smoke budget, executed through scripts/smoke.py (the test lasts minutes: a
    ResNet34 at 224 px for 04)."""
    parameters = smoke.smoke_parameters(notebook)
    assert {k: v for k, v in parameters.items() if k != "BUDGET"} == SUGGESTED_FALLBACKS[notebook]
    argv = [f"notebooks/{notebook}", "--profile", "full", "--device", "cpu"]
    assert smoke.main(argv + ["--output", str(tmp_path / "smoke")]) == 0
