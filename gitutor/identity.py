"""What determines a trial's result besides its parameters: the trial function, the shared context and
the code, each as a short digest (:func:`run_identity`), so that a sweep journal
(:mod:`gitutor.journal`) never hands back a value computed by another function, on another context or
by other code.

* :func:`function_identity`: ``module.qualname``, a digest of the function's source (a closure's
  or a lambda's too; a ``functools.partial`` adds its arguments; a callable object its type and state)
  and a digest of the whole file it is defined in, so that a change to a helper the trial calls from its
  own module runs the trial anew.
* :func:`digest`: sha256 over the *content* of a value: JSON scalars, lists, tuples, dicts (sorted
  keys), dataclasses, paths, numpy arrays and torch tensors (dtype, shape, bytes), ``nn.Module``
  (class, structure, ``training`` flags and ``state_dict``); anything else by its pickle.
* :func:`code_version`: the git commit of the checkout ``gitutor`` is imported from, plus a digest of
  uncommitted changes under ``gitutor/``; outside a git checkout (an installed wheel), the version and a
  digest of every source file of the package — the package's own modules a trial calls.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import inspect
import os
import pickle
import subprocess
from pathlib import Path, PurePath
from typing import Any

_PACKAGE = Path(__file__).resolve().parent


def _feed(hasher, value: Any, seen: set[int]) -> None:
    """Feed a type-tagged, canonical encoding of ``value`` into ``hasher``."""
    import numpy as np

    add = hasher.update
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        add(f"{type(value).__name__}:{value!r};".encode())
        return
    if isinstance(value, (PurePath, enum.Enum)):
        add(f"{type(value).__name__}:{value};".encode())
        return
    if id(value) in seen:
        add(b"<cycle>;")
        return
    seen = seen | {id(value)}
    if isinstance(value, (list, tuple)):
        add(f"{type(value).__name__}[{len(value)}](".encode())
        for item in value:
            _feed(hasher, item, seen)
        add(b");")
    elif isinstance(
        value, (set, frozenset)
    ):  # by content, in an order that is the same in every process
        add(f"{type(value).__name__}[{len(value)}](".encode())
        for item in sorted(value, key=repr):
            _feed(hasher, item, seen)
        add(b");")
    elif isinstance(value, dict):
        add(f"dict[{len(value)}](".encode())
        for key in sorted(value, key=repr):
            _feed(hasher, key, seen)
            _feed(hasher, value[key], seen)
        add(b");")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        add(f"{type(value).__qualname__}(".encode())
        for field in dataclasses.fields(value):
            _feed(hasher, field.name, seen)
            _feed(hasher, getattr(value, field.name), seen)
        add(b");")
    elif isinstance(value, np.ndarray):
        add(f"ndarray {value.dtype} {value.shape}:".encode())
        add(np.ascontiguousarray(value).tobytes())
    elif _is_tensor(value):
        import torch

        data = value.detach().cpu().contiguous()
        add(f"tensor {data.dtype} {tuple(data.shape)}:".encode())
        add(
            data.reshape(-1).view(torch.uint8).numpy().tobytes()
            if data.numel()
            else b""
        )
    elif _is_module(value):
        add(
            f"module {type(value).__module__}.{type(value).__qualname__} {value!r} "
            f"{[m.training for m in value.modules()]}:".encode()
        )
        _feed(hasher, dict(value.state_dict()), seen)
    elif callable(value) and (
        inspect.isfunction(value) or inspect.ismethod(value) or inspect.isbuiltin(value)
    ):
        add(f"function {function_identity(value)};".encode())
    else:
        try:
            add(
                f"pickle {type(value).__qualname__}:".encode()
                + pickle.dumps(value, protocol=4)
            )
        except Exception as error:
            raise TypeError(
                f"a {type(value).__name__} in the context cannot be digested (it is none of "
                f"JSON, containers, dataclasses, arrays, tensors or modules, and cannot be "
                f"pickled: {error})"
            ) from None


def _is_tensor(value) -> bool:
    return (
        type(value).__module__.startswith("torch")
        and hasattr(value, "detach")
        and hasattr(value, "dtype")
    )


def _is_module(value) -> bool:
    try:
        from torch import nn
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    return isinstance(value, nn.Module)


def digest(value: Any) -> str:
    """sha256 (hex) of the content of ``value`` (see the module docstring): equal content, equal digest.

    Raises:
        TypeError: naming the type of a part that is none of the kinds listed and cannot be pickled.
    """
    hasher = hashlib.sha256()
    _feed(hasher, value, set())
    return hasher.hexdigest()


def function_identity(function: Any) -> str:
    """``module.qualname#<sha256 of its source, 12 hex>@<sha256 of its file, 12 hex>`` of a trial function
    (see the module docstring).

    Raises:
        TypeError: if ``function`` is not callable.
    """
    if not callable(function):
        raise TypeError(f"function must be callable, got {type(function).__name__}")
    if isinstance(function, functools.partial):
        return (
            f"partial({function_identity(function.func)}, "
            f"{digest([list(function.args), dict(function.keywords)])[:12]})"
        )
    target = (
        function
        if (
            inspect.isfunction(function)
            or inspect.ismethod(function)
            or inspect.isbuiltin(function)
        )
        else type(function)
    )
    name = f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(target).__name__)}"
    try:
        source = inspect.getsource(target)
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        source = repr((code.co_code, code.co_consts)) if code is not None else ""
    state = (
        ""
        if target is function
        else digest(vars(function))[:12]
        if hasattr(function, "__dict__")
        else ""
    )
    try:
        module = hashlib.sha256(
            Path(inspect.getsourcefile(target)).read_bytes()
        ).hexdigest()[:12]
    except (OSError, TypeError):
        module = ""
    return (
        f"{name}#{hashlib.sha256(source.encode()).hexdigest()[:12]}{'+' + state if state else ''}"
        f"{'@' + module if module else ''}"
    )


def code_version() -> str:
    """The commit of the git checkout ``gitutor`` runs from, ``+<sha256 of git diff, 8 hex>`` when
    ``gitutor/`` has uncommitted changes; ``gitutor <version>+<sha256 of the package's sources, 12 hex>``
    outside a git checkout."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args],
            cwd=_PACKAGE,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        ).stdout

    try:
        commit = git("rev-parse", "HEAD").strip()
        untracked = git(
            "ls-files",
            "--others",
            "--exclude-standard",
            "--full-name",
            "--",
            str(_PACKAGE),
        )
        top = Path(git("rev-parse", "--show-toplevel").strip())
        changes = git(
            "diff", "HEAD", "--", str(_PACKAGE)
        ) + "".join(  # untracked files: name and content
            f"{name}\n{(top / name).read_text(errors='replace')}"
            for name in untracked.splitlines()
        )
    except (OSError, subprocess.SubprocessError):
        from gitutor import __version__

        sources = hashlib.sha256()
        for path in sorted(_PACKAGE.rglob("*.py")):
            sources.update(f"{path.relative_to(_PACKAGE)}\n".encode())
            sources.update(path.read_bytes())
        return f"gitutor {__version__}+{sources.hexdigest()[:12]}"
    return commit + (
        f"+{hashlib.sha256(changes.encode()).hexdigest()[:8]}" if changes else ""
    )


def run_identity(function: Any, context: Any) -> dict[str, str]:
    """``{"function": function_identity, "context": digest (16 hex), "code": code_version}``: what,
    besides its parameters, determines a trial's result.

    Raises:
        TypeError: if ``function`` is not callable or a part of ``context`` cannot be digested.
    """
    return {
        "function": function_identity(function),
        "context": digest(context)[:16],
        "code": code_version(),
    }
