"""Carry unfinished recordings from one session to the next.

A long study (chapter 04's native recording: hours per trial) runs in a checkout of one commit and keeps
its finished trials in a journal and its running trials' state in checkpoints beside its record
(scripts/journaled.py). A session's machine is gone when the session ends, and a later one starts from
the repository: so the journal, the checkpoints and any record the study wrote there travel in it, under
``runs/<commit>/`` (the commit the study runs at; a journal resumes only with that code).

    python3 scripts/carry_runs.py save ../run        # copy ../run's unfinished study files to runs/<its commit>/
    python3 scripts/carry_runs.py restore ../run     # a checkout of that commit at ../run, the files put back

``save`` copies every file under the study checkout's book/studies/ that git does not track or that differs
from its commit (journals, checkpoint folders, records the study wrote), replacing what runs/<commit>/ held,
and writes ``runs/<commit>/manifest.json`` (commit, date, each file's sha256). ``restore`` checks every
file against the manifest before anything is written, makes the checkout (``git worktree add --detach``)
when the folder does not exist, and refuses a folder that is another commit's checkout. Then rerun the
study's command in that checkout: only the missing trials run, each from its last checkpoint.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from journaled import git

RUNS = ROOT / "runs"
STUDIES = Path("book") / "studies"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def unfinished(checkout: Path) -> list[Path]:
    """The files under ``checkout``'s book/studies/ that git does not track or that differ from its HEAD
    (paths relative to ``checkout``), sorted."""
    listed = git(checkout, "ls-files", "--others", "--modified", "--", str(STUDIES))
    return sorted(Path(line) for line in listed.splitlines() if line)


def save(checkout: Path, runs: Path = RUNS) -> Path:
    """Copy :func:`unfinished` of ``checkout`` to ``runs/<commit>/`` (replacing it) with a manifest.

    Raises:
        ValueError: naming ``checkout`` when it is not a git checkout or holds no unfinished file.
    """
    if not (checkout / ".git").exists():
        raise ValueError(f"checkout {checkout} is not a git checkout")
    files = unfinished(checkout)
    if not files:
        raise ValueError(f"checkout {checkout} holds no unfinished study file under {STUDIES}")
    commit = git(checkout, "rev-parse", "HEAD")
    target = runs / commit
    staged = target.with_name(commit + ".partial")
    shutil.rmtree(staged, ignore_errors=True)
    for name in files:
        (staged / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(checkout / name, staged / name)
    manifest = {"commit": commit,
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "files": {str(name): _sha256(staged / name) for name in files}}

    (staged / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staged.rename(target)
    return target


def restore(checkout: Path, commit: str | None = None, runs: Path = RUNS, repo: Path = ROOT) -> list[Path]:
    """Put the files of ``runs/<commit>/`` back into a checkout of ``commit`` at ``checkout`` (made with
    ``git worktree add --detach`` from ``repo`` when absent). ``commit`` may be omitted when runs/ holds one.

    Raises:
        ValueError: naming ``commit`` when runs/ holds none or several and none is given, or a file whose
            sha256 differs from the manifest; naming ``checkout`` when it exists at another commit.
    """

    saved = sorted(p.name for p in runs.iterdir() if (p / "manifest.json").is_file()) if runs.is_dir() else []
    if commit is None:
        if len(saved) != 1:
            raise ValueError(f"commit must be given: runs/ holds {saved or 'no saved run'}")
        commit = saved[0]
    source = runs / commit
    if not (source / "manifest.json").is_file():
        raise ValueError(f"commit {commit} has no saved run in {runs} (saved: {saved or 'none'})")
    manifest = json.loads((source / "manifest.json").read_text())
    for name, digest in manifest["files"].items():
        if _sha256(source / name) != digest:
            raise ValueError(f"{source / name} differs from its manifest: not restored")
    if checkout.exists():
        head = git(checkout, "rev-parse", "HEAD")
        if head != manifest["commit"]:
            raise ValueError(f"checkout {checkout} is at {head}, not the run's commit {manifest['commit']}")
    else:
        git(repo, "worktree", "add", "--detach", str(checkout), manifest["commit"])
    for name in manifest["files"]:
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / name, checkout / name)
    return [Path(name) for name in manifest["files"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("save", "restore"))
    parser.add_argument("checkout", type=Path, help="the study's checkout (one commit)")
    parser.add_argument("--commit", help="restore: the saved run's commit (when runs/ holds several)")
    args = parser.parse_args(argv)
    try:
        if args.action == "save":
            print(f"saved {len(unfinished(args.checkout))} files -> {save(args.checkout)}")
        else:
            print(f"restored {len(restore(args.checkout, args.commit))} files into {args.checkout}")
    except ValueError as error:
        parser.error(str(error))
    return 0


if __name__ == "__main__":
    sys.exit(main())
