"""Nothing recorded is ever lost: a recording or a study that fails, or is interrupted, leaves every
existing record byte-identical, exits non-zero with the reason, and resumes; bad arguments are
refused at the door (issue 28)."""
import subprocess
import hashlib
import importlib.util
import json
from pathlib import Path

import nbformat
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
BOOK_RECORDS = [ROOT / "book" / "recorded", ROOT / "book" / "studies"]
FAKE_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def checksums(*folders: Path) -> dict[str, str]:
    """sha256 of every file under ``folders``, journals aside."""
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest() for folder in folders
            for path in sorted(folder.rglob("*")) if path.is_file()
            and not any(".journal" in part for part in path.relative_to(folder).parts)}


def script(name: str, monkeypatch):
    """``scripts/<name>.py`` as a module, with a clean committed tree pretended (``_git``, or
    ``code_version`` for the studies that key a journal by it)."""
    spec = importlib.util.spec_from_file_location(f"script_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if hasattr(module, "code_version"):
        monkeypatch.setattr(module, "code_version", lambda root: (FAKE_COMMIT, False, FAKE_COMMIT[:12]))
    else:
        monkeypatch.setattr(module, "_git", lambda *args: FAKE_COMMIT if args[0] == "rev-parse" else "")
    return module


@pytest.fixture
def book_untouched():
    """The book's own records are byte-identical after the test."""
    before = checksums(*BOOK_RECORDS)
    yield
    assert checksums(*BOOK_RECORDS) == before


# --- scripts/record.py ------------------------------------------------------------------------------

TINY = [
    nbformat.v4.new_markdown_cell("# Tiny chapter"),
    nbformat.v4.new_code_cell('PROFILE = "quick"\nDEVICE = "cpu"\nRESULTS_DIR = "results"\nMARKS = "."',
                              metadata={"tags": ["parameters"]}),
    nbformat.v4.new_code_cell(
        "import json, pathlib\n"
        "from gitutor.sweeps import run_trials\n"
        "def trial(context, a):\n"
        "    with open(pathlib.Path(MARKS) / 'ran.txt', 'a') as f:\n"
        "        f.write(f'{a}\\n')\n"
        "    return a * a\n"
        "outcomes = run_trials(trial, [dict(a=a) for a in range(3)])\n"
        "out = pathlib.Path(RESULTS_DIR); out.mkdir(parents=True, exist_ok=True)\n"
        "row = dict(quantity='q', setting='s', paper=1, this_run=sum(o.value for o in outcomes), unit='',"
        " differences='none')\n"
        "(out / '00_tiny.json').write_text(json.dumps({'notebook': '00_tiny', 'profile': PROFILE, 'rows': [row],"
        " 'timings': []}))\n"
        "(out / '00_tiny.safetensors').write_bytes(b'new images')\n"
        "if (pathlib.Path(MARKS) / 'fail').exists():\n"
        "    raise RuntimeError('boom after the sweep')\n"),
]


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A tiny chapter (a sweep of 3 trials, a record, a kept file) of a checkout in ``tmp_path/repo``
    and a recorded folder holding an older recording of it."""
    notebook = tmp_path / "repo" / "notebooks" / "00_tiny.ipynb"
    notebook.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=TINY, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}), notebook)
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    for suffix, content in ((".ipynb", "{}"), (".json", '{"old": 1}'), (".safetensors", "old images")):
        (recorded / f"00_tiny{suffix}").write_text(content)
    marks = tmp_path / "marks"
    marks.mkdir()
    return notebook, recorded, marks


def test_a_failed_recording_leaves_the_recorded_folder_byte_identical_and_resumes(tiny, monkeypatch, capsys,
                                                                                  book_untouched):
    notebook, recorded, marks = tiny
    record = script("record", monkeypatch)
    monkeypatch.setattr(record, "CHAPTERS", notebook.parents[1])
    argv = [str(notebook.with_suffix("")), "--profile", "quick", "--device", "cpu", "--recorded", str(recorded),
            "-p", "MARKS", str(marks)]
    (recorded / "00_tiny.old-run.png").write_text("a file only the earlier recording wrote")
    before = checksums(recorded)
    (marks / "fail").touch()
    assert record.main(argv) == 1
    message = capsys.readouterr().err.strip()
    assert len(message.splitlines()) == 1 and "RuntimeError: boom after the sweep" in message
    assert "nothing in" in message and "rerun the same command" in message
    assert checksums(recorded) == before
    assert (marks / "ran.txt").read_text().split() == ["0", "1", "2"]

    (marks / "fail").unlink()  # the cause is fixed: the same command resumes without rerunning the trials
    assert record.main(argv) == 0
    assert (marks / "ran.txt").read_text().split() == ["0", "1", "2"]
    assert (recorded / "00_tiny.safetensors").read_bytes() == b"new images"
    assert not (recorded / "00_tiny.old-run.png").exists()  # the recording does not mix two runs
    stored = json.loads((recorded / "00_tiny.json").read_text())
    assert stored["rows"][0]["this_run"] == 5 and stored["provenance"]["commit"] == FAKE_COMMIT
    assert "recorded on" in json.loads((recorded / "00_tiny.ipynb").read_text())["cells"][0]["source"][0]
    assert not list(recorded.glob("*.journal")) and not list(recorded.glob(".*tmp*"))


@pytest.mark.parametrize("arguments, message", [
    (["notebooks/99_nope"], "no notebook notebooks/99_nope.ipynb"),
    (["notebooks/04_stepwise_gradinversion", "-p", "BUDGET", "cpu_recordng"], "BUDGET must be None or one of"),
    (["notebooks/04_stepwise_gradinversion", "-p", "BUDGETT", "cpu_recording"], "has no parameter BUDGETT"),
    (["notebooks/04_stepwise_gradinversion", "--device", "gpu"], "'gpu' is not a device name"),
    (["notebooks/04_stepwise_gradinversion", "--profile", "ful"], "invalid choice: 'ful'"),
])
def test_record_refuses_bad_arguments_in_one_line_before_running(arguments, message, monkeypatch, capsys,
                                                                  book_untouched):
    record = script("record", monkeypatch)
    monkeypatch.setattr(record, "record", lambda *a, **k: pytest.fail("nothing may run"))
    with pytest.raises(SystemExit) as stop:
        record.main(arguments)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# --- scripts/setting_study.py -----------------------------------------------------------------------

def cheap_trial(broken: set, ran: list):
    def trial(context, *, setting, method, batch, iterations, seed=0):
        ran.append((method, batch))
        if method in broken:
            raise RuntimeError(f"{method} diverged")
        value = float(batch + len(method))
        return {"curve": [[0, value, 0.1], [iterations, value + 1, 0.2]],
                "images": torch.full((setting.batch_size, 3, 2, 2), 0.5), "seconds": 0.01}
    return trial


def study_record(tmp_path: Path) -> Path:
    """A copy of the book's setting-study record to run phases into."""
    path = tmp_path / "studies" / "04_setting_study.json"
    path.parent.mkdir(parents=True)
    path.write_bytes((ROOT / "book" / "studies" / "04_setting_study.json").read_bytes())
    return path


def test_failed_trials_fail_the_study_and_never_replace_stored_ones_and_a_rerun_runs_only_them(
        tmp_path, monkeypatch, capsys, book_untouched):
    study = script("setting_study", monkeypatch)
    path = study_record(tmp_path)
    before = checksums(path.parent)
    argv = ["--phase", "base", "--engine", "local", "--iterations", "3", "--record", str(path)]
    ran: list = []
    monkeypatch.setattr(study.study, "trial", cheap_trial({"GradInversion"}, ran))
    assert study.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("RuntimeError: GradInversion diverged") == 3 and "setting_study (phase base): 3 of 9 trials failed" in err
    assert checksums(path.parent) == before
    (journal,) = path.parent.glob("*.journal.jsonl")
    assert len(journal.read_text().splitlines()) == 1 + 6  # the header, then the finished trials

    ran.clear()
    monkeypatch.setattr(study.study, "trial", cheap_trial(set(), ran))
    assert study.main(argv) == 0
    assert sorted(ran) == [("GradInversion", b) for b in range(3)]  # only the missing trials ran
    assert not journal.exists()
    resumed = json.loads(path.read_text())

    again = study_record(tmp_path / "again")  # the same phase without interruption
    assert study.main(["--phase", "base", "--engine", "local", "--iterations", "3", "--record", str(again)]) == 0
    whole = json.loads(again.read_text())
    assert resumed["trials"] == whole["trials"]
    assert resumed["phases"]["base"]["resumed_trials"] == 6 and whole["phases"]["base"]["resumed_trials"] == 0
    stored = json.loads((ROOT / "book" / "studies" / "04_setting_study.json").read_text())
    others = [t for t in stored["trials"] if t["phase"] != "base"]
    assert [t for t in resumed["trials"] if t["phase"] != "base"] == others  # other phases untouched
    assert [t["trial"]["iterations"] for t in resumed["trials"] if t["phase"] == "base"] == [3] * 9


@pytest.mark.parametrize("arguments, message", [
    (["--iterations", "0"], "--iterations: must be at least 1, got 0"),
    (["--device", "gpu"], "'gpu' is not a device name"),
    (["--device", "cuda:3"], "cuda:3"),
    (["--cpus", "0"], "--cpus: must be at least 1"),
    (["--engine", "spark"], "invalid choice: 'spark'"),
    (["--commit", "0123abc"], "no commit 0123abc"),  # issue 33: a commit that does not exist
    (["--commit", "0123abc", "--iterations", "2"], "no commit 0123abc"),
    (["--record", "notebooks/01_dlg.ipynb"], "not a .json file"),
    (["--record", "book"], "not a .json file"),
])
def test_the_study_refuses_bad_arguments_and_devices_before_any_trial(arguments, message, monkeypatch, capsys,
                                                                     book_untouched):
    study = script("setting_study", monkeypatch)
    monkeypatch.setattr(study.study, "trial", lambda *a, **k: pytest.fail("no trial may start"))
    with pytest.raises(SystemExit) as stop:
        study.main(["--phase", "base", *arguments])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_truncated_study_record_is_named_and_not_overwritten(tmp_path, monkeypatch, capsys):
    study = script("setting_study", monkeypatch)
    path = study_record(tmp_path)
    path.write_bytes(path.read_bytes()[:1000])
    before = checksums(path.parent)
    monkeypatch.setattr(study.study, "trial", lambda *a, **k: pytest.fail("no trial may start"))
    with pytest.raises(SystemExit):
        study.main(["--phase", "base", "--engine", "local", "--record", str(path)])
    assert f"{path} is not valid JSON (truncated?)" in capsys.readouterr().err
    assert checksums(path.parent) == before



def test_merge_adds_the_other_records_phases_unchanged_and_refuses_bad_records(tmp_path, monkeypatch, capsys,
                                                                               book_untouched):
    study = script("setting_study", monkeypatch)
    monkeypatch.setattr(study.study, "trial", lambda *a, **k: pytest.fail("merging runs no trial"))
    def provenance(commit, trials):
        return {"commit": commit, "device": "CPU", "torch": "2", "command": "python3 scripts/setting_study.py",
                "wall_seconds": 7, "iterations": 10, "trials": trials, "failed": 0, "date": "2026-12-06 10:00 UTC"}

    ours = {"trials": [{"phase": "trained", "trial": {"batch": 0}, "value": {"lpips": [0.5]}, "error": None}],
            "phases": {"trained": provenance("a" * 40, 1)}}
    theirs = {"trials": [{"phase": "trained_table", "trial": {"batch": b}, "value": {"lpips": [0.4]}, "error": None}
                         for b in range(2)], "phases": {"trained_table": provenance("b" * 40, 2)}}
    target, other = tmp_path / "ours.json", tmp_path / "theirs.json"
    target.write_text(json.dumps(ours))
    other.write_text(json.dumps(theirs))
    assert study.main(["--merge", str(other), "--record", str(target)]) == 0
    merged = json.loads(target.read_text())
    assert merged["trials"] == ours["trials"] + theirs["trials"]
    assert merged["phases"] == {**ours["phases"], **theirs["phases"]}
    assert study.main(["--merge", str(other), "--record", str(target)]) == 0  # again: replaced, not doubled
    assert json.loads(target.read_text()) == merged
    before = target.read_bytes()
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"trials": theirs["trials"], "phases": {}}))  # trials without provenance
    partial = tmp_path / "partial.json"  # a phase whose provenance lacks most of what a recorded phase holds
    partial.write_text(json.dumps({"trials": theirs["trials"], "phases": {"trained_table": {"commit": "c" * 40}}}))
    short = tmp_path / "short.json"  # a phase whose provenance counts more trials than the record holds
    short.write_text(json.dumps({"trials": theirs["trials"][:1], "phases": theirs["phases"]}))
    for argv, message in ([["--merge", str(broken)], "without provenance"],
                          [["--merge", str(partial)], "not a whole recorded phase (provenance lacks command"],
                          [["--merge", str(short)], "not a whole recorded phase (provenance counts other trials"],
                          [["--merge", str(target)], "the record itself"],
                          [["--merge", str(tmp_path / "none.json")], "none.json"],
                          [["--phase", "trained", "--merge", str(other)], "either --phase"], [[], "either --phase"],
                          [["--merge", str(other), "--iterations", "3"], "--merge runs nothing"]):
        with pytest.raises(SystemExit) as stop:
            study.main([*argv, "--record", str(target)])
        assert stop.value.code == 2 and message in capsys.readouterr().err
    assert target.read_bytes() == before
    bogus = tmp_path / "bogus.json"  # a phase no study records, and one of another record
    for phases in ({"bogus": theirs["phases"]["trained_table"]}, {"base": theirs["phases"]["trained_table"]}):
        name = next(iter(phases))
        bogus.write_text(json.dumps({"trials": [{**t, "phase": name} for t in theirs["trials"]], "phases": phases}))
        with pytest.raises(SystemExit) as stop:
            study.main(["--merge", str(bogus), "--record", str(target)])
        assert stop.value.code == 2 and "not phases of one study record" in capsys.readouterr().err
    assert target.read_bytes() == before
    with pytest.raises(SystemExit) as stop:  # no default record: a merge writes only what it is asked to
        study.main(["--merge", str(other)])
    assert stop.value.code == 2 and "--merge needs --record" in capsys.readouterr().err


def test_commit_other_than_head_is_refused_in_a_checkout(tmp_path, monkeypatch, capsys, book_untouched):
    study = script("setting_study", monkeypatch)
    monkeypatch.setattr(study.study, "trial", lambda *a, **k: pytest.fail("no trial may start"))
    with pytest.raises(SystemExit) as stop:
        older = subprocess.run(["git", "rev-parse", "HEAD~3"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.strip()
        study.main(["--phase", "base", "--engine", "local", "--commit", older, "--record",
                    str(tmp_path / "r.json")])
    assert stop.value.code == 2 and "--commit names the commit of a tree copied without .git" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("name", ["PROFILE", "DEVICE", "RESULTS_DIR"])
def test_record_refuses_a_parameter_that_its_own_options_set(monkeypatch, capsys, name):
    record = script("record", monkeypatch)
    with pytest.raises(SystemExit) as stop:
        record.main(["notebooks/04_stepwise_gradinversion", "--profile", "quick", "-p", name, "full"])
    assert stop.value.code == 2 and f"-p {name} is set by" in capsys.readouterr().err


# --- the other command lines ------------------------------------------------------------------------

@pytest.mark.parametrize("name, arguments, message", [
    ("smoke", ["notebooks/99_nope"], "no notebook notebooks/99_nope.ipynb"),
    ("smoke", ["notebooks/04_stepwise_gradinversion", "--device", "cuda:7"], "cuda:7"),
    ("smoke", ["notebooks/04_stepwise_gradinversion", "--profile", "huge"], "invalid choice: 'huge'"),
    ("execute_notebooks", ["notebooks/01_dlg", "--stage", "s", "--results", "r", "--jobs", "0"],
     "--jobs: must be at least 1"),
    ("execute_notebooks", ["notebooks/99_nope", "--stage", "s", "--results", "r"], "no notebook notebooks/99_nope"),
    # issue 33: output folders that are, or hold, the sources (an unset shell variable, '.', notebooks/)
    ("execute_notebooks", ["notebooks/02_idlg_soft_labels", "--stage", "", "--results", "r"], "--stage: empty"),
    ("execute_notebooks", ["notebooks/02_idlg_soft_labels", "--stage", ".", "--results", "r"], "is or contains the sources"),
    ("execute_notebooks", ["notebooks/02_idlg_soft_labels", "--stage", "s", "--results", "notebooks"],
     "is or contains the sources"),
    ("smoke", ["notebooks/04_stepwise_gradinversion", "--output", ""], "--output: empty"),
    ("smoke", ["notebooks/04_stepwise_gradinversion", "--output", "."], "is or contains the sources"),
    ("train_face_ddpm", ["--out", "gitutor"], "is or contains the sources"),
    ("train_face_ddpm", ["--steps", "0"], "--steps: must be at least 1"),
    ("train_face_ddpm", ["--lr=-1e-3"], "--lr: must be a finite number > 0"),
    ("train_face_ddpm", ["--ema-decay", "1.5"], "--ema-decay: must be in [0, 1)"),
])
def test_every_command_line_refuses_bad_arguments_in_one_line(name, arguments, message, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    spec = importlib.util.spec_from_file_location(f"script_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as stop:
        module.main(arguments)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("arguments, message", [
    (["grade", "out", "notebooks/01_dlg.ipynb"], "invalid choice: 'grade'"),
    (["build", ".", "notebooks/01_dlg.ipynb"], "is or contains the sources"),
    (["build", "notebooks", "notebooks/01_dlg.ipynb"], "is or contains the sources"),
    (["build", "out", "notebooks/99_nope.ipynb"], "no file notebooks/99_nope.ipynb"),
    (["build", "out", "README.md"], "not notebooks (.ipynb): README.md"),
])
def test_the_assignments_command_line_refuses_bad_arguments(arguments, message, monkeypatch, capsys):
    from gitutor.assignments import main

    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as stop:
        main(arguments)
    assert stop.value.code == 2 and message in capsys.readouterr().err
