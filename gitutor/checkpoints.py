"""Checkpoints inside a run: the full state of an optimisation, saved every N iterations.

A trial of the paper's budget (15 000 iterations of a 224 px attack, hours of one CPU core) must
survive its process being killed. :class:`Checkpoint` names a file and a period; the loop of
:func:`gitutor.attacks.loop.optimise_images` saves into it, every ``every`` iterations and at the
end, everything the rest of the run depends on — the optimised variables, the optimiser's and the
learning-rate scheduler's state, the objective's own state (e.g. the generator that draws the
gradient-dropout masks), the best iterate, the history and the snapshots — and a rerun with the
same checkpoint starts from there. A resumed run equals an uninterrupted one bit for bit
(``tests/test_checkpoints.py`` kills a run with SIGKILL and compares).

The file is written through :func:`gitutor.files.atomic_path` (a kill leaves the previous
checkpoint whole) with ``torch.save`` and read with ``torch.load(weights_only=True)`` (tensors,
numbers, strings, lists and dicts only; nothing is unpickled that could run code). Every
checkpoint holds a *fingerprint* of the run that wrote it (the loop's arguments, a digest of the
start and the caller's ``key``); a checkpoint of another run is refused by path, never resumed.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pickle
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
import torch

from gitutor.checks import check_int
from gitutor.files import atomic_path, target_problem

#: The first entry of every checkpoint file: what wrote it and in which layout.
FORMAT = "gitutor-loop-checkpoint/1"


@dataclass(frozen=True)
class Checkpoint:
    """Where and how often a loop saves its state (see the module docstring).

    Attributes:
        path: the checkpoint file (e.g. ``<journal>.checkpoints/<trial digest>.pt``).
        every: iterations between two saves (≥ 1); the loop also saves after its last iteration.
        key: what else the saved state must belong to (e.g. the trial's parameters and run); a
            checkpoint whose key differs is refused.

    Raises:
        TypeError: if ``path`` is not a str or path, ``every`` not an int or ``key`` not a str.
        ValueError: if ``every < 1`` or no file can be written at ``path`` (a folder, beneath a
            file, not writable) — checked here, before anything runs.
    """

    path: Path
    every: int = 100
    key: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.path, (str, os.PathLike)):
            raise TypeError(
                f"path must be a str or path, got {type(self.path).__name__}"
            )
        object.__setattr__(self, "every", check_int(self.every, "every", low=1))
        if not isinstance(self.key, str):
            raise TypeError(f"key must be a str, got {type(self.key).__name__}")
        object.__setattr__(self, "path", Path(self.path))
        problem = target_problem(self.path.absolute())
        if problem:
            raise ValueError(f"checkpoint path: {problem}")

    def part(self, name: str) -> "Checkpoint":
        """The checkpoint of one part of a run (e.g. one restart): ``<stem>.part-<name><suffix>``, same
        period and key plus ``name``; :meth:`remove` removes it with the run's."""
        if (
            not isinstance(name, str)
            or not name
            or not all(c.isalnum() or c in "_-" for c in name)
        ):
            raise ValueError(
                f"name must be a non-empty str of letters, digits, '_' or '-', got {name!r}"
            )
        path = self.path.with_name(f"{self.path.stem}.part-{name}{self.path.suffix}")
        return Checkpoint(path, self.every, f"{self.key}/{name}")

    def save(self, fingerprint: dict, state: dict) -> None:
        """Write ``state`` with ``fingerprint`` and this checkpoint's key, atomically."""
        payload = {
            "format": FORMAT,
            "key": self.key,
            "fingerprint": fingerprint,
            "state": state,
        }
        with atomic_path(self.path) as temporary:
            torch.save(payload, temporary)

    def load(self, fingerprint: dict) -> dict | None:
        """The saved state (None when there is no file yet).

        Raises:
            ValueError: naming the file when it is not a checkpoint of this format, or belongs to
                another run (its key or fingerprint differs; the message says which entry) — the
                file is left as it is.
        """
        if not self.path.is_file():
            return None
        try:
            with torch.serialization.safe_globals(
                [Counter]
            ):  # MultiStepLR keeps its milestones in one
                payload = torch.load(self.path, map_location="cpu", weights_only=True)
        except (
            pickle.UnpicklingError,
            RuntimeError,
            EOFError,
            ValueError,
            OSError,
        ) as error:
            raise ValueError(
                f"checkpoint {self.path} is not a gitutor checkpoint ({type(error).__name__}: "
                f"{error}); move it away to start the run afresh"
            ) from None
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            raise ValueError(
                f"checkpoint {self.path} is not a {FORMAT} file; move it away to start afresh"
            )
        if payload.get("key") != self.key:
            raise ValueError(
                f"checkpoint {self.path} belongs to another run (key {payload.get('key')!r}, "
                f"this run's {self.key!r}); move it away to start afresh"
            )
        saved = payload.get("fingerprint", {})
        differs = sorted(
            k
            for k in set(saved) | set(fingerprint)
            if saved.get(k) != fingerprint.get(k)
        )
        if differs:
            raise ValueError(
                f"checkpoint {self.path} belongs to another run (its {', '.join(differs)} "
                "differ); move it away to start afresh"
            )
        return payload["state"]

    def remove(self) -> None:
        """Delete the file and those of its parts (:meth:`part`), once the run's result is kept elsewhere
        (e.g. in a sweep's journal); no other file."""
        pattern = f"{glob.escape(self.path.stem)}.part-*{glob.escape(self.path.suffix)}"
        for path in [self.path, *self.path.parent.glob(pattern)]:
            path.unlink(missing_ok=True)


def tensor_digest(tensor: torch.Tensor) -> str:
    """sha256 (16 hex) of a tensor's dtype, shape and bytes: a fingerprint entry for a start."""
    data = tensor.detach().cpu().contiguous()
    hasher = hashlib.sha256(f"{data.dtype}{tuple(data.shape)}".encode())
    hasher.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return hasher.hexdigest()[:16]
