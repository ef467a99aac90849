"""scripts/carry_runs.py: an unfinished study's journal and checkpoints travel through runs/<commit>/."""
import subprocess

import pytest
from conftest import load_script


def _module():
    return load_script("carry_runs")


def _git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_save_then_restore_puts_the_unfinished_files_back_in_a_checkout_of_the_same_commit(tmp_path):
    carry = _module()
    repo = tmp_path / "repo"
    studies = repo / "book" / "studies"
    studies.mkdir(parents=True)
    (studies / "record.json").write_text("{}\n")
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "add", ".")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "one")
    commit = _git(repo, "rev-parse", "HEAD")
    runs = tmp_path / "runs"
    with pytest.raises(ValueError, match="no unfinished study file"):
        carry.save(repo, runs)
    (studies / "x.journal.jsonl").write_text('{"gitutor_journal": 1}\n')
    (studies / "x.journal.jsonl.checkpoints").mkdir()
    (studies / "x.journal.jsonl.checkpoints" / "a.pt").write_bytes(b"\x00\x01state")
    (studies / "record.json").write_text('{"phases": {}}\n')  # a record the study rewrote
    target = carry.save(repo, runs)
    assert target == runs / commit and not (runs / f"{commit}.partial").exists()
    names = {"book/studies/record.json", "book/studies/x.journal.jsonl",
             "book/studies/x.journal.jsonl.checkpoints/a.pt"}
    assert set(carry.json.loads((target / "manifest.json").read_text())["files"]) == names
    other = tmp_path / "other"
    restored = carry.restore(other, runs=runs, repo=repo)
    assert {str(p) for p in restored} == names and _git(other, "rev-parse", "HEAD") == commit
    assert (other / "book/studies/x.journal.jsonl.checkpoints/a.pt").read_bytes() == b"\x00\x01state"
    assert (other / "book/studies/record.json").read_text() == '{"phases": {}}\n'
    (target / "book/studies/x.journal.jsonl").write_text("changed\n")  # a file that no longer matches
    with pytest.raises(ValueError, match="differs from its manifest"):
        carry.restore(other, runs=runs, repo=repo)
    with pytest.raises(ValueError, match="no saved run"):
        carry.restore(other, commit="0" * 40, runs=runs, repo=repo)
