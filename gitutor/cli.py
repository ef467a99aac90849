"""Argument types for the command lines (``scripts/*.py``, ``python -m gitutor.assignments``).

Each is an ``argparse`` ``type=``: a bad value is refused before anything runs, with argparse's
one-line ``error: argument --x: …`` and exit status 2, never a traceback or a silent default.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path


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


def existing_file(text: str) -> Path:
    """A path to a file that exists."""
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no file {text}")
    return Path(text)


def commit(text: str) -> str:
    """A git commit id: 7 to 40 hexadecimal digits."""
    if not 7 <= len(text) <= 40 or any(c not in "0123456789abcdef" for c in text.lower()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a commit id (7–40 hex digits)")
    return text
