"""Seeds, generators and device selection: the same seed gives the same numbers."""

from __future__ import annotations

import random
import zlib

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators.

    Library code in gitutor never relies on the global state (it takes explicit generators);
    this is for notebook cells that call third-party code which does.

    Raises:
        TypeError: if ``seed`` is not an int.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def make_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A fresh ``torch.Generator`` on ``device`` seeded with ``seed``.

    Raises:
        TypeError: if ``seed`` is not an int.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def trial_seeds(seed: int, count: int, purpose: str) -> list[int]:
    """``count`` independent seeds (ints in [0, 2³¹)) for pooled trials — one per user, batch,
    restart or client — drawn from ``numpy.random.SeedSequence`` of ``seed`` and ``purpose`` (e.g.
    ``"users"``, ``"attack starts"``), so that trials share no noise and two purposes share no stream.
    The same arguments give the same seeds.

    Raises:
        TypeError: if ``seed`` or ``count`` is not an int or ``purpose`` not a str.
        ValueError: if ``seed`` < 0 or ``count`` < 1.
    """
    for name, value in (("seed", seed), ("count", count)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not isinstance(purpose, str):
        raise TypeError(f"purpose must be a str, got {type(purpose).__name__}")
    if seed < 0 or count < 1:
        raise ValueError(
            f"seed must be ≥ 0 and count ≥ 1, got seed={seed}, count={count}"
        )
    sequence = np.random.SeedSequence([seed, zlib.crc32(purpose.encode())])
    return [
        int(value) >> 1 for value in sequence.generate_state(count, dtype=np.uint32)
    ]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Turn the notebooks' ``DEVICE`` parameter into a ``torch.device`` that exists on this machine.

    ``"auto"`` picks CUDA when available, else the CPU; ``"cpu"``, ``"cuda"``, ``"cuda:N"`` and
    ``"mps"`` are accepted when that device is present.

    Raises:
        TypeError: if ``device`` is not a str or ``torch.device``.
        ValueError: naming ``device`` for a string torch does not know, a device type gitutor does not
            run on, or a CUDA / MPS device that this machine does not have.
    """
    if not isinstance(device, (str, torch.device)):
        raise TypeError(
            f"device must be a str such as 'auto', 'cpu' or 'cuda', got {type(device).__name__}"
        )
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as error:
        raise ValueError(
            f"device={device!r} is not a device name; use 'auto', 'cpu', 'cuda' or 'mps'"
        ) from error
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} but CUDA is not available here; use 'auto' or 'cpu'"
            )
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ValueError(
                f"device={device!r} but this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    elif resolved.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(
                f"device={device!r} but Apple's MPS backend is not available here; use 'auto' or 'cpu'"
            )
    elif resolved.type != "cpu":
        raise ValueError(
            f"device={device!r}: gitutor runs on 'cpu', 'cuda' or 'mps', not {resolved.type!r}"
        )
    return resolved
