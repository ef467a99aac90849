"""The journal of a sweep: one JSON line per finished trial, so that an interrupted sweep resumes.

A journal file opens with a header line, ``{"gitutor_journal": 1}`` (:data:`HEADER`), written atomically
when the first trial finishes. A file without it — a results record, a notebook, a model given by
mistake, or a journal of the format before the header — is refused by path before anything is read
or written, and is never changed: only a file that is a journal has its last, cut-short line dropped.

:func:`gitutor.sweeps.run_trials` with ``journal=path`` appends every trial that finishes without an
error to ``path`` as soon as it finishes (written, flushed and fsynced: a kill, a reboot or a
machine taken back loses at most the trials still running) and skips, on a rerun, every trial the
journal already holds. A line is ``{"run": {...}, "trial": {...}, "value": ..., "seconds": s}``; a trial is
identified by its parameters as canonical JSON (:func:`trial_key`: sorted keys, dataclasses as
dicts) *and* by its run (:func:`gitutor.identity.run_identity`: the trial function, a digest of the
shared context and the code's commit), so the same command finds its own trials, and a changed
parameter (e.g. more iterations), another trial function (an SSIM sweep after a PSNR sweep over the
same seeds), a changed context or other code runs anew: entries of another run are ignored (with a
warning), never handed back. Failed trials are not journaled: a rerun tries them again.

Values are stored by :func:`to_json`, which keeps what a trial usually returns exactly: JSON values,
tuples, and torch tensors (safetensors bytes in base64, bit-exact, any dtype); :func:`from_json`
turns them back. A sweep may pass its own ``encode``/``decode`` instead.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def _parameter(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def trial_key(trial: Mapping[str, Any]) -> str:
    """The canonical JSON of a trial's parameters (sorted keys, dataclasses as dicts, tuples as lists).

    Raises:
        TypeError: naming the trial when a parameter is neither JSON nor a dataclass of JSON values.
        ValueError: for a NaN or infinite parameter.
    """
    try:
        return json.dumps(
            dict(trial),
            sort_keys=True,
            separators=(",", ":"),
            default=_parameter,
            allow_nan=False,
        )
    except (TypeError, ValueError) as error:
        raise type(error)(
            f"trial {dict(trial)!r} cannot be journaled (its parameters must be JSON "
            f"numbers, strings, lists, dicts or dataclasses of them): {error}"
        ) from None


def to_json(value: Any) -> Any:
    """``value`` as JSON: dicts with str keys, lists, str, numbers, bools and None as they are;
    tuples as ``{"__tuple__": [...]}``; torch tensors as ``{"__tensor__": base64 safetensors}``.

    Raises:
        TypeError: naming the type of a part that is none of these (or a dict key that is not a str).
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        items = [to_json(item) for item in value]
        return items if isinstance(value, list) else {"__tuple__": items}
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise TypeError(
                f"dict keys must be str to be journaled, got {sorted(map(repr, value))}"
            )
        return {key: to_json(item) for key, item in value.items()}
    import torch

    if isinstance(value, torch.Tensor):
        from safetensors.torch import save

        data = save({"tensor": value.detach().cpu().contiguous()})
        return {"__tensor__": base64.b64encode(data).decode("ascii")}
    raise TypeError(
        f"a {type(value).__name__} cannot be journaled (JSON, tuples and tensors can)"
    )


def from_json(value: Any) -> Any:
    """The inverse of :func:`to_json`."""
    if isinstance(value, list):
        return [from_json(item) for item in value]
    if isinstance(value, dict):
        if set(value) == {"__tuple__"}:
            return tuple(from_json(item) for item in value["__tuple__"])
        if set(value) == {"__tensor__"}:
            from safetensors.torch import load

            return load(base64.b64decode(value["__tensor__"]))["tensor"]
        return {key: from_json(item) for key, item in value.items()}
    return value


#: The first line of every journal file (its format version).
HEADER = {"gitutor_journal": 1}


class Journal:
    """The finished trials of one sweep in the JSON-lines file ``path`` (created when the first
    trial finishes).

    Args:
        path: the journal file, e.g. beside the record the sweep makes.
        encode: turns a trial's value into JSON (default: :func:`to_json`).
        decode: turns the stored JSON back into the value (default: :func:`from_json`).
        run: what else determines a trial's value (:func:`gitutor.identity.run_identity`); only the
            entries of this run are read back (None: the entries that name no run).

    Raises:
        TypeError: if ``path`` is not a str or path, ``encode``/``decode`` are not callable, or
            ``run`` is not a dict of str.
        ValueError: naming ``path`` when no file can be written there (a folder, beneath a file, not
            writable) or when it exists and is not a journal (no header line): checked here, before any
            trial runs; the file is left unchanged.
    """

    def __init__(
        self,
        path: str | Path,
        encode: Callable[[Any], Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
        run: Mapping[str, str] | None = None,
    ) -> None:
        from gitutor.files import target_problem

        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"journal must be a str or path, got {type(path).__name__}")
        for name, function in (("encode", encode), ("decode", decode)):
            if function is not None and not callable(function):
                raise TypeError(
                    f"{name} must be callable or None, got {type(function).__name__}"
                )
        if run is not None and not (
            isinstance(run, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in run.items())
        ):
            raise TypeError(
                f"run must be a dict of str (gitutor.identity.run_identity), got {run!r}"
            )
        problem = target_problem(Path(path).absolute())
        if problem:
            raise ValueError(
                f"journal: {problem}; give the path of a journal file (e.g. sweep.jsonl)"
            )
        self.path = Path(path)
        self.encode = encode or to_json
        self.decode = decode or from_json
        self.run = None if run is None else dict(run)
        if self.path.exists():
            self._checked(
                whole=False
            )  # a file that is not a journal is refused here, before any trial runs

    def read(self) -> dict[str, tuple[Any, None, float]]:
        """``{trial_key: (value, None, seconds)}`` of every journaled trial of this run (the value
        decoded; None: no error, the fields of a :class:`gitutor.sweeps.TrialOutcome`).

        A last line cut short by a kill is dropped from the file (its trial runs again) — once the
        file's header says it is a journal. Entries of another run (another trial function, context
        or code) are skipped with a warning that says what differs.

        Raises:
            ValueError: naming the file when it is not a journal (no :data:`HEADER` line; the file is
                left as it is), and the file and line when a complete line is not a journal entry.
        """
        if not self.path.exists():
            return {}
        data = self._checked()
        complete = data.rfind(b"\n") + 1
        if complete < len(
            data
        ):  # the last write was interrupted: drop its partial line
            os.truncate(self.path, complete)
        finished, others = {}, {}
        try:
            lines = data[:complete].decode("utf-8").splitlines()
        except UnicodeDecodeError as error:
            raise ValueError(
                f"journal {self.path} holds bytes that are not UTF-8 ({error}); move the file "
                "away to start the sweep afresh"
            ) from None
        for number, line in enumerate(lines[1:], start=2):
            try:
                entry = json.loads(line)
                key, value, seconds = (
                    trial_key(entry["trial"]),
                    entry["value"],
                    float(entry["seconds"]),
                )
                run = entry.get("run")
            except (ValueError, TypeError, KeyError, AttributeError) as error:
                raise ValueError(
                    f"journal {self.path}, line {number}, is not a journal entry "
                    f"({type(error).__name__}: {error}); move the file away to start the "
                    "sweep afresh"
                ) from None
            if run != self.run:
                differs = sorted(
                    k
                    for k in set(run or {}) | set(self.run or {})
                    if (run or {}).get(k) != (self.run or {}).get(k)
                )
                others[", ".join(differs) or "run"] = (
                    others.get(", ".join(differs) or "run", 0) + 1
                )
                continue
            finished[key] = (self.decode(value), None, seconds)
        if others:
            warnings.warn(
                f"journal {self.path}: ignored "
                + "; ".join(
                    f"{count} trial(s) of another run (its {what} differs)"
                    for what, count in others.items()
                )
                + ": they run again",
                stacklevel=3,
            )
        return finished

    def _checked(self, whole: bool = True) -> bytes:
        """The file's bytes (``whole``; else its first line only) after checking that its first line is
        :data:`HEADER` (ValueError naming the file)."""
        if not self.path.is_file():
            raise ValueError(
                f"journal {self.path} is not a file; give the path of a journal file"
            )
        if whole:
            data = self.path.read_bytes()
        else:
            with open(self.path, "rb") as file:
                data = file.readline(4096)
        first = data.split(b"\n", 1)[0]
        try:
            header = json.loads(first) if b"\n" in data else None
        except ValueError:
            header = None
        if header != HEADER:
            raise ValueError(
                f"{self.path} is not a gitutor journal (its first line is not {json.dumps(HEADER)}); "
                "it was left unchanged: give the path of a journal, or a new file"
            )
        return data

    def append(self, trial: Mapping[str, Any], value: Any, seconds: float) -> None:
        """Add one finished trial and force it to disk before returning (the file, with its header, is
        created atomically by the first).

        Raises:
            TypeError, ValueError: if the encoded value is not JSON (nothing is written); ValueError
                naming the file if it exists and is not a journal (it is left unchanged).
        """
        from gitutor.files import write_text

        entry = {
            "trial": json.loads(trial_key(trial)),
            "value": self.encode(value),
            "seconds": round(float(seconds), 3),
        }
        line = (
            json.dumps(entry if self.run is None else {"run": self.run, **entry}) + "\n"
        )
        if self.path.exists():
            self._checked(
                whole=False
            )  # the header only: a journal of many trials is not read again
        else:
            write_text(self.path, json.dumps(HEADER) + "\n")
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(line)
            file.flush()
            os.fsync(file.fileno())
