"""Every recorded page (book/recorded/<notebook>.ipynb + .json) is consistent with itself and the repository.

A recorded page is a chapter executed at a larger budget by ``make record`` (scripts/record.py).
For each one: the notebook is valid and ran without errors; its results record holds the rows the
page shows and a provenance (commit, device, torch version, wall time, command); that commit is in
this repository's history; its profile (and budget) are defined in its chapter package (``gitutor.chapters``).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
from pathlib import Path

import nbformat
import pytest

from gitutor.chapters import NOTEBOOK_MODULES, PROFILES
from gitutor.results import results_table

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "book" / "recorded").glob("*.ipynb"))
PROVENANCE = ("commit", "device", "torch", "wall_seconds", "command")
#: Setting-study records (scripts/setting_study.py): trials and a provenance per phase.
STUDIES = [p for p in sorted((ROOT / "book" / "studies").glob("*.json")) if "phases" in json.loads(p.read_text())]


def _record(page: Path) -> dict:
    path = page.with_suffix(".json")
    assert path.is_file(), f"{page.name} has no results record {path.name} beside it"
    return json.loads(path.read_text())


def _markdown_outputs(notebook) -> str:
    return "\n".join("".join(output.get("data", {}).get("text/markdown", ""))
                     for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs)


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_recorded_notebook_is_valid_complete_and_titled(page):
    notebook = nbformat.read(page, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code), "a code cell was not executed"
    errors = [o for cell in code for o in cell.outputs if o.output_type == "error"]
    assert not errors, f"the recorded run raised {errors[0].ename}: {errors[0].evalue}"
    title = next(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    titles = getattr(importlib.import_module(f"gitutor.chapters.{NOTEBOOK_MODULES[page.stem]}.profile"),
                     "RECORDING_TITLES", {})
    assert any(f" — {what}, recorded on" in title.splitlines()[0]
               for what in ("at a larger budget", *titles.values())), title.splitlines()[0]
    assert f"book/recorded/{page.stem}" in (ROOT / "_toc.yml").read_text(), "the page is not in _toc.yml"
    assert not any("exercise" in cell.metadata.get("tags", []) for cell in notebook.cells), \
        "the chapter's exercise block is on the recorded page (its labels would clash with the chapter's)"


def test_record_drops_the_exercise_block_and_chapter_only_cells():
    spec = importlib.util.spec_from_file_location("record", ROOT / "scripts" / "record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    notebook = {"cells": [{"metadata": {}}, {"metadata": {"tags": ["exercise"]}}, {"metadata": {"tags": ["x"]}},
                          {"metadata": {"tags": ["hide-input", "chapter-only"]}}]}
    module.drop_chapter_cells(notebook)
    assert notebook["cells"] == [{"metadata": {}}, {"metadata": {"tags": ["x"]}}]


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_recorded_results_match_the_page(page):
    record = _record(page)
    assert record["notebook"] == page.stem and record["rows"]
    assert all(key in record["provenance"] for key in PROVENANCE), record["provenance"].keys()
    shown = _markdown_outputs(nbformat.read(page, as_version=4))
    assert results_table(record["rows"]) in shown, "the rows of the record are not the table the page shows"


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_recorded_profile_and_budget_are_defined(page):
    record = _record(page)
    assert record["profile"] in PROFILES
    module = importlib.import_module(f"gitutor.chapters.{NOTEBOOK_MODULES[record['notebook']]}.profile")
    budget = record["provenance"].get("parameters", {}).get("BUDGET")
    assert budget is None or budget in getattr(module, "BUDGETS", {}), f"budget {budget!r} is not defined"


def _check_in_history(commit: str) -> None:
    git = (lambda *args: subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True))
    inside = git("rev-parse", "--is-inside-work-tree")
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        pytest.skip("not a git checkout: the recorded commit cannot be looked up")
    if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("shallow clone: older commits are missing (fetch with full history to check)")
    assert git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0, f"commit {commit} is not in this history"
    assert git("merge-base", "--is-ancestor", commit, "HEAD").returncode == 0, f"{commit} is not an ancestor of HEAD"


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_recorded_commit_is_in_history(page):
    _check_in_history(_record(page)["provenance"]["commit"])


@pytest.mark.parametrize("path", STUDIES, ids=[p.stem for p in STUDIES])
def test_every_phase_of_a_study_record_has_its_provenance_and_trials(path):
    record = json.loads(path.read_text())
    counts = {}
    for trial in record["trials"]:
        counts[trial["phase"]] = counts.get(trial["phase"], 0) + 1
        assert trial["error"] is None, (trial["phase"], trial["trial"])
    assert set(counts) == set(record["phases"]), "trials of a phase without provenance, or the reverse"
    for phase, provenance in record["phases"].items():
        assert all(key in provenance for key in PROVENANCE), (phase, provenance.keys())
        assert provenance["trials"] == counts[phase] and provenance["failed"] == 0, phase
        _check_in_history(provenance["commit"])


def test_a_recording_says_in_its_title_what_it_is():
    spec = importlib.util.spec_from_file_location("record_titles", ROOT / "scripts" / "record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.recording_title("04_stepwise_gradinversion", "cpu_recording") == "at a larger budget"
    assert module.recording_title("08_flower_dp", "recorded").startswith("on Flower's simulation engine")
    notebook = {"cells": [{"cell_type": "markdown", "source": ["# Title\n", "text"]}]}
    module.retitle(notebook, "2026-11-28", "CPU", "on Flower's simulation engine")
    assert "".join(notebook["cells"][0]["source"]).startswith(
        "# Title — on Flower's simulation engine, recorded on 2026-11-28, CPU\ntext")
