"""Argument types for the command lines (``scripts/*.py``, ``python -m gitutor.assignments``).

Each is an ``argparse`` ``type=``: a bad value is refused before anything runs, with argparse's
one-line ``error: argument --x: …`` and exit status 2, never a traceback or a silent default.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

#: The folders of a checkout that hold sources: no output folder may be one of them or contain one.
SOURCE_FOLDERS = ("notebooks", "gitutor", "scripts", "tests", "book", ".git")
_CHAPTER = re.compile(r"^[0-9]{2}_[A-Za-z0-9_]+$")


def positive_int(text: str) -> int:
    """An int ≥ 1 (``--iterations 0`` is refused, not read as "not given")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def positive_float(text: str) -> float:
    """A finite float > 0 (a learning rate, a rate)."""
    value = _number(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def fraction(text: str) -> float:
    """A float in [0, 1) (a decay, a share)."""
    value = _number(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def device(text: str) -> str:
    """A torch device that exists here (:func:`gitutor.seeding.resolve_device`); ``auto`` stays ``auto``."""
    from gitutor.seeding import resolve_device

    try:
        resolve_device(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def notebook(root: str | Path = ".") -> Callable[[str], str]:
    """The type of a notebook argument: a path without ``.ipynb`` (``notebooks/01_dlg``; a trailing
    ``.ipynb`` is dropped) whose ``.ipynb`` exists under ``root`` (or is absolute)."""

    def checked(text: str) -> str:
        stem = text.removesuffix(".ipynb")
        if not (Path(root) / f"{stem}.ipynb").is_file():
            raise argparse.ArgumentTypeError(f"no notebook {stem}.ipynb")
        return stem

    return checked


def _located(text: str, root: Path) -> Path:
    """``text`` (a path, ``.ipynb`` optional) resolved: as given from the working directory when that
    file exists, else under ``root``."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path (an unset shell variable?)")
    stem = text.removesuffix(".ipynb")
    here = Path(f"{stem}.ipynb")
    return (here if here.is_file() else Path(root) / f"{stem}.ipynb").resolve()


def chapter(root: str | Path) -> Callable[[str], str]:
    """The type of a chapter argument: a notebook of ``root/notebooks/`` named like ``04_stepwise…``
    (``notebooks/04_stepwise_gradinversion``, with or without ``.ipynb``, from the working directory or
    ``root``); returns ``notebooks/<name>``. An edited copy elsewhere is refused: the scripts run and
    record the repository's chapter, and name its commit."""
    folder = (Path(root) / "notebooks").resolve()

    def checked(text: str) -> str:
        path = _located(text, Path(root))
        if path.parent != folder or not _CHAPTER.match(path.stem):
            raise argparse.ArgumentTypeError(
                f"{text} is not a chapter of this repository (a notebook "
                f"{folder}/NN_name.ipynb)"
            )
        if not path.is_file():
            raise argparse.ArgumentTypeError(
                f"no notebook notebooks/{path.stem}.ipynb in {Path(root).resolve()}"
            )
        return f"notebooks/{path.stem}"

    return checked


def repository_notebook(root: str | Path) -> Callable[[str], str]:
    """The type of a notebook of this repository (any folder below ``root``): its path relative to
    ``root``, without ``.ipynb``."""

    def checked(text: str) -> str:
        path = _located(text, Path(root))
        if not path.is_relative_to(Path(root).resolve()):
            raise argparse.ArgumentTypeError(
                f"{text} is not a notebook of this repository ({Path(root).resolve()})"
            )
        if not path.is_file():
            raise argparse.ArgumentTypeError(f"no notebook {path}")
        return str(path.relative_to(Path(root).resolve()).with_suffix(""))

    return checked


def output_folder(root: str | Path) -> Callable[[str], Path]:
    """The type of an output folder: not empty, not a file, and neither one of ``root``'s
    :data:`SOURCE_FOLDERS` nor a folder that contains one (``--stage ''``, ``--stage .`` or
    ``--stage notebooks`` would write executed copies over the sources); returns it resolved."""
    sources = [(Path(root) / name).resolve() for name in SOURCE_FOLDERS]

    def checked(text: str) -> Path:
        if not text.strip():
            raise argparse.ArgumentTypeError(
                "empty folder name (an unset shell variable?)"
            )
        path = Path(text).resolve()
        if path.exists() and not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
        hit = [
            source
            for source in sources
            if source.exists() and source.is_relative_to(path)
        ]
        if hit:
            raise argparse.ArgumentTypeError(
                f"{text} ({path}) is or contains the sources {hit[0]}: "
                "write the outputs to a folder of their own (e.g. build/…)"
            )
        return path

    return checked


def existing_file(text: str) -> Path:
    """A path to a file that exists."""
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no file {text}")
    return Path(text)


def commit(text: str) -> str:
    """A git commit id: 7 to 40 hexadecimal digits."""
    if not 7 <= len(text) <= 40 or any(
        c not in "0123456789abcdef" for c in text.lower()
    ):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a commit id (7–40 hex digits)"
        )
    return text


def existing_commit(root: str | Path) -> Callable[[str], str]:
    """The type of a commit of the git repository at ``root``: checked with ``git cat-file -e
    <c>^{commit}`` and returned as its full id. Outside a git checkout (a copied tree) it cannot be
    checked, so the full 40-digit id is required."""

    def checked(text: str) -> str:
        text = commit(text)
        try:
            found = subprocess.run(
                ["git", "rev-parse", "--verify", "--quiet", f"{text}^{{commit}}"],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=60,
            )
            inside = (
                subprocess.run(
                    ["git", "rev-parse", "--git-dir"],
                    cwd=root,
                    capture_output=True,
                    timeout=60,
                ).returncode
                == 0
            )
        except OSError:  # no git at all: a copied tree
            found, inside = None, False
        if inside:
            if found.returncode != 0:
                raise argparse.ArgumentTypeError(
                    f"no commit {text} in the repository at {root}"
                )
            return found.stdout.strip()
        if len(text) != 40:
            raise argparse.ArgumentTypeError(
                f"{text}: outside a git checkout the commit cannot be checked; "
                "give its full 40-digit id"
            )
        return text.lower()

    return checked
