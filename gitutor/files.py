"""Record files: written atomically, read with errors that name the file.

A record (a results JSON, a recorded notebook, a safetensors file) is either the old one or the
complete new one, never half of either: every writer writes a temporary file in the record's own
folder (same file system, so the rename is atomic) and renames it over the record only when the
whole content was written and flushed to disk (``os.replace``). A run that fails, or is killed,
before that leaves the old record byte-identical and at most a ``.<name>.tmp-*`` file beside it.

    with atomic_paths("model.safetensors", "model.json") as (weights, log):
        save_file(state, weights)          # the library writes to the temporary paths …
        log.write_text(json.dumps(...))    # … and both records are replaced only if both succeed

:func:`read_json` reads a record and raises a ``ValueError`` naming the file when it is truncated or
not JSON (``json.loads`` alone says neither which file nor that it is cut short).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _temporary(path: Path) -> Path:
    """A fresh, empty temporary file beside ``path`` (hidden name, same folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    os.close(handle)
    return Path(name)


def target_problem(path: Path) -> str | None:
    """Why a file could not be written at ``path`` (None: it can): ``path`` is a folder or another
    non-file, a folder above it is a file, or the place it goes is not writable."""
    if path.exists() and not path.is_file():
        return (
            f"{path} is a folder, not a file"
            if path.is_dir()
            else f"{path} is not a regular file"
        )
    above = path.parent
    while not above.exists():
        above = above.parent
    if not above.is_dir():
        return f"{above} is a file, so {path} cannot be created beneath it"
    if not os.access(above, os.W_OK | os.X_OK) or (
        path.exists() and not os.access(path, os.W_OK)
    ):
        return f"{path if path.exists() else above} is not writable"
    return None


def check_targets(paths) -> list[Path]:
    """``paths`` as absolute Paths, after checking that every one can be written (:func:`target_problem`)
    and that no two name the same file (also through a symbolic link).

    Raises:
        TypeError: if a path is not a str or :class:`os.PathLike`.
        ValueError: naming the path that is a folder, lies beneath a file, is not writable, or is given
            twice.
    """
    for path in paths:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"paths must be str or os.PathLike, got {type(path).__name__}"
            )
    targets = [Path(path).absolute() for path in paths]
    resolved = [target.resolve() for target in targets]
    if len(set(resolved)) != len(resolved):
        raise ValueError(
            f"paths must name different files, got {[str(p) for p in paths]}"
        )
    problems = [problem for problem in map(target_problem, targets) if problem]
    if problems:
        raise ValueError(f"cannot write {', '.join(problems)}; nothing was written")
    return targets


def _flush_to_disk(path: Path) -> None:
    with open(path, "rb+") as file:
        os.fsync(file.fileno())


@contextlib.contextmanager
def atomic_paths(*paths: str | Path) -> Iterator[tuple[Path, ...]]:
    """Temporary paths beside ``paths`` that replace them when the ``with`` block succeeds.

    The block writes each file to its temporary path (any writer that takes a file name). On a
    normal exit every temporary file is flushed to disk and renamed over its target (``os.replace``,
    atomic per file; all targets are replaced one after another only once every file has been
    written). On an exception the temporary files are removed, the targets are untouched, and the
    exception propagates. Missing folders are created. Every target is checked before the block
    runs and again before the first rename (:func:`check_targets`), so a target that is a folder
    refuses the whole write instead of failing after the others were replaced.

    Yields:
        One temporary :class:`~pathlib.Path` per target, in the order given.

    Raises:
        ValueError: if no path is given, a path is given twice, or naming a path that cannot be
            written (a folder, beneath a file, not writable): before anything is written.
        TypeError: if a path is not a str or :class:`os.PathLike`.
    """
    if not paths:
        raise ValueError("atomic_paths needs at least one path")
    targets = check_targets(paths)
    temporaries: list[Path] = []
    try:
        for target in targets:
            temporaries.append(_temporary(target))
        yield tuple(temporaries)
        for temporary in temporaries:
            _flush_to_disk(temporary)
            os.chmod(
                temporary, 0o644
            )  # mkstemp makes 0600; a record is an ordinary file
        check_targets(
            targets
        )  # nothing became a folder meanwhile: all are replaced, or none
        for temporary, target in zip(temporaries, targets):
            os.replace(temporary, target)
    finally:
        for temporary in temporaries:
            temporary.unlink(missing_ok=True)


def atomic_path(path: str | Path) -> contextlib.AbstractContextManager[Path]:
    """:func:`atomic_paths` for one file: ``with atomic_path(p) as tmp: save_file(state, tmp)``."""

    @contextlib.contextmanager
    def one() -> Iterator[Path]:
        with atomic_paths(path) as (temporary,):
            yield temporary

    return one()


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``path`` as a Path.

    Raises:
        TypeError: if ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: str | Path, value, **dumps) -> Path:
    """Write ``json.dumps(value, **dumps)`` plus a newline to ``path`` atomically.

    Raises:
        TypeError, ValueError: as :func:`json.dumps` (an object it cannot encode, NaN with
            ``allow_nan=False``), before anything is written.
    """
    return write_text(path, json.dumps(value, **dumps) + "\n")


def copy_files(pairs: dict[str | Path, str | Path], remove=()) -> list[Path]:
    """Copy each ``source`` to its ``target`` (``{source: target}``), all targets replaced together
    (see :func:`atomic_paths`), then delete the files ``remove`` (e.g. what a previous run of the
    same record wrote and this one did not); returns the targets.

    Raises:
        FileNotFoundError: naming a missing source (no target is touched).
        ValueError: naming a target that cannot be written, or a path of ``remove`` that is a
            target or not a file (no target is touched).
    """
    sources = [Path(source) for source in pairs]
    missing = [str(source) for source in sources if not source.is_file()]
    if missing:
        raise FileNotFoundError(f"cannot copy {missing}: no such file")
    stale = [Path(path).absolute() for path in remove]
    targets = check_targets(list(pairs.values()))
    wrong = [
        str(path)
        for path in stale
        if path in targets or path.exists() and not path.is_file()
    ]
    if wrong:
        raise ValueError(
            f"cannot remove {wrong}: a target or not a file; nothing was written"
        )
    with atomic_paths(*targets) as temporaries:
        for source, temporary in zip(sources, temporaries):
            shutil.copyfile(source, temporary)
    for path in stale:
        path.unlink(missing_ok=True)
    return [Path(target) for target in pairs.values()]


def read_json(path: str | Path, what: str = "record"):
    """The JSON value in ``path``.

    Raises:
        FileNotFoundError: naming ``path`` (and ``what`` it should hold) when it does not exist.
        ValueError: naming ``path`` when it is empty, truncated or not JSON (with the position).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{what} {path} is not UTF-8 text: {error.reason} at byte {error.start}"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        if not text.strip():
            raise ValueError(
                f"{what} {path} is not valid JSON: the file is empty"
            ) from None
        cut = (
            " (truncated?)"
            if error.pos >= len(text.rstrip()) or error.msg.startswith("Unterminated")
            else ""
        )
        raise ValueError(
            f"{what} {path} is not valid JSON{cut}: {error.msg} at line {error.lineno}, "
            f"column {error.colno}"
        ) from None
