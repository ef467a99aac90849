"""What the recording scripts (setting_study.py, defense_study_01.py) share around gitutor.journal: the code a
journal is keyed to, the trials it already holds, the report of failed trials and the cleanup once the record
is written. A journal resumes only with the code that started it, so a study that spans several sessions runs
in a checkout of one commit (``git worktree add --detach DIR COMMIT``), and its journal and checkpoints travel
between sessions with ``scripts/carry_runs.py``.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from gitutor.journal import Journal, trial_key
from gitutor.sweeps import TrialOutcome

#: How each engine's workers are named in a record's provenance.
WORKERS = {"ray": "Ray workers", "processes": "worker processes", "local": "process"}


def git(root: Path, *args: str) -> str:
    """``git args`` in ``root``; its output, stripped (raises CalledProcessError when git fails)."""
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def code_version(root: Path) -> tuple[str, bool, str]:
    """``(commit, dirty, code)``: HEAD, whether gitutor/ has uncommitted changes, and the key a journal is
    named by (the commit's first 12 digits, plus a digest of the uncommitted diff of gitutor/ when dirty):
    a rerun resumes only with the same code."""
    commit, dirty = git(root, "rev-parse", "HEAD"), bool(git(root, "status", "--porcelain", "gitutor"))
    digest = hashlib.sha256(git(root, "diff", "HEAD", "--", "gitutor").encode()).hexdigest()[:8]
    return commit, dirty, commit[:12] + (f"+{digest}" if dirty else "")


def journaled(journal: Path, trials: Sequence[dict], run: dict) -> int:
    """How many of ``trials`` the journal at ``journal`` already holds for ``run``
    (:func:`gitutor.identity.run_identity`); entries of another run are not counted."""
    with warnings.catch_warnings():  # entries of another run are ignored here; run_trials warns about them
        warnings.simplefilter("ignore")
        done = set(Journal(journal, decode=lambda v: v, run=run).read())
    return len({trial_key(t) for t in trials} & done)


def report_failures(outcomes: Sequence[TrialOutcome], what: str, record: Path, journal: Path, command: str) -> bool:
    """Print every failed trial with its error and what to do (rerun ``command`` at the same commit; the
    record is unchanged, the finished trials are in the journal); True when any trial failed."""
    failed = [o for o in outcomes if not o.ok]
    for outcome in failed:
        print(f"  trial {outcome.trial}: {outcome.error}", file=sys.stderr)
    if failed:
        print(f"{what}: {len(failed)} of {len(outcomes)} trials failed (above); {record} is unchanged; the "
              f"{len(outcomes) - len(failed)} finished trials are kept in {journal}: rerun `{command}` (same "
              "commit) to run only the rest", file=sys.stderr)
    return bool(failed)


def remove_journal(journal: Path) -> None:
    """Remove a journal once its record is written, and its checkpoint folder (emptied as each trial was
    journaled) when nothing is left in it."""
    journal.unlink()
    checkpoints = journal.with_name(journal.name + ".checkpoints")
    if checkpoints.is_dir() and not any(checkpoints.iterdir()):
        checkpoints.rmdir()


def record_problem(record: Path) -> str | None:
    """Why ``record`` cannot be a study's record (not a ``.json`` path, or a target
    :func:`gitutor.files.target_problem` refuses), for ``parser.error``; None when it can."""
    from gitutor.files import target_problem

    if record.suffix != ".json":
        return f"{record} is not a .json file"
    return target_problem(record.absolute())


def run_provenance(commit: str, dirty: bool, command: str, wall: float) -> dict:
    """The provenance fields a one-process CPU study record carries (``gitutor.study_records.PROVENANCE``
    and the machine's details): the command, the commit (12 digits) and whether gitutor/ was dirty, the
    device, torch, Python and machine, torch's threads, the wall time (s) and the date (UTC)."""
    import datetime
    import platform

    import torch

    return {
        "command": command,
        "commit": commit[:12],
        "dirty": dirty,
        "device": "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "wall_seconds": round(wall, 1),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
