"""Issue 33: each class of bad input is refused before anything is written or run, with a message that
names the argument or path, and what was stored stays byte-identical (sha256) — multi-file writes,
sweep journals (keyed by the trial function, the context and the code), intervals and verdict rows.
The scripts' paths and the library's checks: tests/test_refusals_scripts_library.py."""
import hashlib
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from gitutor import identity
from gitutor.files import atomic_paths, copy_files, write_json
from gitutor.journal import Journal
from gitutor.results import save_results, verdict
from gitutor.stats import interval, success_interval
from gitutor.sweeps import run_trials

ROOT = Path(__file__).resolve().parents[1]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- multi-file writes: every target is checked before any is touched --------------------------------

def test_a_folder_among_the_targets_leaves_every_record_byte_identical(tmp_path):
    record, folder = tmp_path / "record.json", tmp_path / "folder"
    record.write_text('{"old": 1}')
    folder.mkdir()
    before = sha(record)
    with pytest.raises(ValueError, match=rf"{folder} is a folder"):
        with atomic_paths(record, folder) as (a, b):
            a.write_text("new")
            b.write_text("new")
    assert sha(record) == before and sorted(p.name for p in tmp_path.iterdir()) == ["folder", "record.json"]
    beneath = record / "x.json"  # a target beneath a file
    with pytest.raises(ValueError, match="is a file"):
        copy_files({record: beneath})
    assert sha(record) == before


def test_a_target_that_becomes_a_folder_during_the_write_refuses_all(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text("old a")
    with pytest.raises(ValueError, match="b.json is a folder"):
        with atomic_paths(first, second) as (a, b):
            a.write_text("new a")
            b.write_text("new b")
            second.mkdir()  # another process makes it a folder before the renames
    assert first.read_text() == "old a" and not list(tmp_path.glob(".*tmp*"))


def test_stale_files_are_removed_only_after_every_copy(tmp_path):
    source, target, stale = tmp_path / "s", tmp_path / "t", tmp_path / "old"
    source.write_text("new")
    stale.write_text("old")
    with pytest.raises(ValueError, match="cannot remove"):
        copy_files({source: target}, remove=[target])
    assert stale.exists() and not target.exists()
    copy_files({source: target}, remove=[stale])
    assert target.read_text() == "new" and not stale.exists()


# --- sweep journals: keyed by the trial function, a digest of the context and the code ----------------

def psnr_trial(context, seed):
    return float(seed * context["iterations"])


def ssim_trial(context, seed):
    return float(-seed * context["iterations"])


def test_another_trial_function_or_context_runs_the_trials_again(tmp_path):
    journal, trials = tmp_path / "sweep.jsonl", [dict(seed=s) for s in range(3)]
    psnr = run_trials(psnr_trial, trials, context={"iterations": 100}, journal=journal)
    with pytest.warns(UserWarning, match="another run.*function"):
        ssim = run_trials(ssim_trial, trials, context={"iterations": 100}, journal=journal)
    assert [o.value for o in ssim] == [o.value for o in run_trials(ssim_trial, trials, context={"iterations": 100})]
    assert [o.value for o in ssim] == [0.0, -100.0, -200.0]
    with pytest.warns(UserWarning, match="another run.*context"):
        longer = run_trials(psnr_trial, trials, context={"iterations": 1000}, journal=journal)
    assert [o.value for o in longer] == [0.0, 1000.0, 2000.0]  # not the journaled 100-iteration values
    again = run_trials(psnr_trial, trials, context={"iterations": 100}, journal=journal)  # resumes: no rerun
    assert [o.value for o in again] == [o.value for o in psnr]
    assert [o.seconds for o in again] == [o.seconds for o in psnr]  # read back, not run again


def test_other_code_runs_the_trials_again(tmp_path, monkeypatch):
    journal, trials = tmp_path / "sweep.jsonl", [dict(seed=1)]
    first = run_trials(psnr_trial, trials, context={"iterations": 1}, journal=journal)
    monkeypatch.setattr(identity, "code_version", lambda: "f" * 40)  # as after a commit that changed gitutor
    with pytest.warns(UserWarning, match="code differs"):
        second = run_trials(psnr_trial, trials, context={"iterations": 1}, journal=journal)
    assert second[0].value == first[0].value and len(journal.read_text().splitlines()) == 1 + 2


def test_a_changed_helper_of_the_trial_module_or_package_source_changes_the_run(tmp_path, monkeypatch):
    module = tmp_path / "trial_module.py"
    module.write_text("def helper():\n    return 1\n\n\ndef trial(context, a):\n    return helper() + a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    first = identity.function_identity(importlib.import_module("trial_module").trial)
    module.write_text("def helper():\n    return 2\n\n\ndef trial(context, a):\n    return helper() + a\n")
    changed = importlib.reload(importlib.import_module("trial_module"))
    assert identity.function_identity(changed.trial) != first  # same trial source, another helper
    # outside a git checkout (an installed wheel): a digest of the package's sources, not only its version
    package = tmp_path / "package"
    package.mkdir()
    (package / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(identity, "_PACKAGE", package)
    monkeypatch.setattr(identity.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(OSError("no git")))
    before = identity.code_version()
    (package / "a.py").write_text("x = 2\n")
    assert before.startswith("gitutor ") and identity.code_version() != before


def test_a_journal_that_is_a_folder_is_refused_before_any_trial(tmp_path):
    ran = []

    def trial(context, a):
        ran.append(a)
        return a

    with pytest.raises(ValueError, match=rf"journal: {tmp_path} is a folder"):
        run_trials(trial, [dict(a=1)], journal=tmp_path)
    beneath = tmp_path / "file"
    beneath.write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        run_trials(trial, [dict(a=1)], journal=beneath / "sweep.jsonl")
    assert ran == []


def test_the_context_digest_follows_content_not_identity():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    assert identity.digest({"x": torch.ones(2), "n": 1}) == identity.digest({"n": 1, "x": torch.ones(2)})
    assert identity.digest({"x": torch.ones(2)}) != identity.digest({"x": torch.ones(2, dtype=torch.float64)})
    twin = nn.Linear(3, 2)
    twin.load_state_dict(model.state_dict())
    assert identity.digest(model) == identity.digest(twin)
    with torch.no_grad():
        twin.weight[0, 0] += 1e-6
    assert identity.digest(model) != identity.digest(twin)
    assert identity.function_identity(psnr_trial) != identity.function_identity(ssim_trial)
    with pytest.raises(TypeError, match="cannot be digested"):
        identity.digest({"lock": __import__("threading").Lock()})


def test_a_journal_entry_of_another_run_is_never_read_back(tmp_path):
    path = tmp_path / "j.jsonl"
    Journal(path, run={"function": "a", "context": "1", "code": "c"}).append({"s": 1}, 5.0, 0.1)
    with pytest.warns(UserWarning, match="context differs"):
        assert Journal(path, run={"function": "a", "context": "2", "code": "c"}).read() == {}
    assert Journal(path, run={"function": "a", "context": "1", "code": "c"}).read() == {'{"s":1}': (5.0, None, 0.1)}


# --- intervals: one number per trial --------------------------------------------------------------------

@pytest.mark.parametrize("values", [[[30.1, 29.0, 31.2], [28.4, 27.9, 30.0]],   # 2 seeds × 3 images
                                    [[30.1, 29.0], [28.4]],                       # ragged
                                    torch.rand(2, 3), [1.0, [2.0, 3.0]]])
def test_interval_refuses_nested_or_ragged_values(values):
    with pytest.raises(ValueError, match=r"values\[\d\] is a sequence.*average within each trial"):
        interval(values)


def test_interval_of_per_trial_means_still_works_and_success_interval_refuses_nesting():
    assert interval(torch.tensor([1.0, 2.0, 3.0])).n == 3
    assert interval([1.0, 2.0, 3.0]).mean == 2.0
    with pytest.raises(ValueError, match="one 0/1 or bool per trial"):
        success_interval([[1, 0], [1, 1]])


# --- verdict rows that cannot be judged ----------------------------------------------------------------

ROW = {"quantity": "PSNR", "setting": "B = 1", "paper": 20.0, "this_run": 25.0, "unit": "dB",
       "differences": "none", "better": "higher"}


@pytest.mark.parametrize("change, message", [
    ({"low": 26.0, "high": 24.0, "n": 3}, "low ≤ high"),
    ({"low": 24.0, "high": 26.0, "n": 0}, "'n'"),
    ({"n": 0}, "'n'"),
    ({"n": 2.0, "low": 24.0, "high": 26.0}, "'n'"),
    ({"paper": math.nan, "n": 1}, "'paper' is nan"),
    ({"paper": "20.0", "n": 1}, "'paper' is '20.0'"),
    ({"paper": "nan", "n": 1}, "'paper' is 'nan'"),
    ({"this_run": "25.0", "n": 1}, "'this_run' is '25.0'"),
])
def test_rows_that_cannot_be_judged_are_refused_by_verdict_and_save_results(change, message, tmp_path):
    row = dict(ROW, **change)
    with pytest.raises(ValueError, match=rf"PSNR.*{message}"):
        verdict(row)
    with pytest.raises(ValueError, match=rf"rows\[0\].*{message}"):
        save_results("01_dlg", "quick", [row], tmp_path)
    assert not (tmp_path / "01_dlg.json").exists()


@pytest.mark.parametrize("quantity, unit", [("psnr", "db"), ("Psnr (mean)", ""), ("PSNR", "DB"), ("ssim", "")])
def test_the_range_check_applies_whatever_the_spelling(quantity, unit, tmp_path):
    stored = write_json(tmp_path / "01_dlg.json", {"old": True})
    before = sha(stored)
    row = dict(ROW, quantity=quantity, unit=unit, this_run=-3.0, n=1)
    with pytest.raises(ValueError, match="outside the range"):
        save_results("01_dlg", "quick", [row], tmp_path)
    assert sha(stored) == before


def test_words_and_stored_infinities_are_read_not_refused():
    # nothing to judge, and no setting said to differ: not judged (never "not comparable" by the rule)
    assert verdict(dict(ROW, paper="pixel-wise accurate", n=1)) == "not judged"
    assert verdict(dict(ROW, this_run="inf", n=1)) == "not judged"
    assert verdict(dict(ROW, n=1)) == "meets"
