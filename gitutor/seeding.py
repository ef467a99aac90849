"""Seeds, generators and device selection: the same seed gives the same numbers."""
from __future__ import annotations

import random

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


def resolve_device(device: str = "auto") -> torch.device:
    """Turn the notebooks' ``DEVICE`` parameter into a ``torch.device``.

    ``"auto"`` picks CUDA when available, else the CPU; anything else is passed to
    ``torch.device``.

    Raises:
        ValueError: if a CUDA device is requested but none is available.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"DEVICE={device!r} but CUDA is not available; use DEVICE='auto' or 'cpu'")
    return resolved
