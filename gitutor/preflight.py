"""Before a chapter's long work: everything its profile lacks on this machine, said at once.

A chapter's setup cell gathers what its profile needs and this machine lacks — data sets, weight
files, folders, packages — one line each with the command or the notebook parameter that supplies
it (:func:`torchvision_missing`, :func:`weights_missing`, :func:`assets_missing`,
:func:`folder_missing`, :func:`packages_missing`), and hands the lines to :func:`preflight`, which raises one
:class:`PreflightError` listing all of them before any long loop starts (instead of one failure
per run).

The full profile is sized for a GPU workstation. Given an ``estimate`` of the run's time here
(:func:`estimate_seconds`: a few timed steps of the chapter's own loop, on the device it runs on,
times the steps its profile plans), :func:`preflight` also stops a full-profile run that would take
longer than :data:`LONG_RUN_S` (:func:`stops_for_time`), saying the estimate and the parameter
that goes on anyway (``ALLOW_SLOW = True``); with that parameter it prints the estimate and
returns.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import torch

from gitutor.checks import check_flag
from gitutor.data.folders import TORCHVISION_DATASETS
from gitutor.errors import OfflineDataError

#: Seconds beyond which a full-profile run stops unless ``ALLOW_SLOW = True`` (a policy:
#: longer than a chapter of the quick book by far, short enough to wait for).
LONG_RUN_S = 15 * 60


class PreflightError(OfflineDataError):
    """A profile needs inputs this machine lacks, or a device it does not have (the message lists
    each, with its command or parameter)."""


def torchvision_missing(names: Iterable[str], root: str | Path) -> list[str]:
    """One line per torchvision data set of ``names`` that is not under ``root``.

    Args:
        names: data-set names; those not in :data:`gitutor.data.folders.TORCHVISION_DATASETS`
            (e.g. the bundled ``"cifar100_samples"``) are skipped.
        root: the folder given to torchvision (the notebook's ``DATA_ROOT``).

    Returns:
        Each line names the data set, the folder, the command that downloads it (both splits
        are checked with torchvision's own integrity check, ``download=False``) and the offline
        substitute ``DATA_ROOT = "bundled"`` (every chapter that calls this takes it).
    """
    import torchvision

    missing = []
    for name in dict.fromkeys(names):
        if name not in TORCHVISION_DATASETS:
            continue
        cls = TORCHVISION_DATASETS[name]
        split = {"split": "test"} if name == "lfw_people" else {"train": False}
        try:
            getattr(torchvision.datasets, cls)(root=str(root), download=False, **split)
        except Exception:  # noqa: BLE001 — torchvision raises RuntimeError or others per set
            missing.append(
                f"{cls} is not in {Path(root).resolve()}: on a machine with network run "
                f'`python -c "import torchvision; torchvision.datasets.{cls}'
                f'(root={str(root)!r}, download=True)"` and copy the folder here, set '
                'DATA_ROOT to the folder that holds it, or DATA_ROOT = "bundled" for the '
                "offline substitute (the bundled samples)"
            )
    return missing


def weights_missing(weights: str, fallback: str, *, fetch: bool = True) -> list[str]:
    """One line when torchvision's weight file ``weights`` is not in torch's hub cache and cannot be
    fetched there.

    With ``fetch``, a file not in the cache is first fetched into it with torch's own loader
    (``torch.hub.load_state_dict_from_url``, hash-checked; the way torchvision's ``weights=`` argument
    fetches it): on an online machine (Colab) it downloads once, offline it fails at once and the line
    says why.

    Args:
        weights: a torchvision weights enum member, e.g. ``"ResNet34_Weights.IMAGENET1K_V1"``.
        fallback: the notebook parameter that runs without them, e.g. ``"PRETRAINED = False"``.
        fetch: try the download before reporting the file missing.

    Raises:
        ValueError: naming ``weights`` when torchvision has no such enum member.
    """
    import torchvision

    enum, _, member = weights.partition(".")
    entry = getattr(getattr(torchvision.models, enum, None), member, None)
    if entry is None:
        raise ValueError(
            f"weights must name a torchvision weights enum, got {weights!r}"
        )
    path = Path(torch.hub.get_dir()) / "checkpoints" / Path(entry.url).name
    if path.is_file():
        return []
    reason = ""
    if fetch:
        try:
            torch.hub.load_state_dict_from_url(
                entry.url, progress=True, check_hash=True
            )
        except (
            OSError,
            RuntimeError,
        ) as error:  # offline (URLError), refused, or a bad hash
            reason = f" (fetching it failed: {error})"
        else:
            return []
    line = (
        f"torchvision's {enum} weights {path.name} are not in {path.parent}{reason}: on a machine "
        f'with network run `python -c "import torch; torch.hub.load_state_dict_from_url('
        f"'{entry.url}')\"` and copy {path.name} there, or set {fallback}"
    )
    return [line]


def folder_missing(path: str | Path | None, parameter: str, what: str) -> list[str]:
    """One line when ``path`` (the notebook parameter ``parameter``) is not a folder.

    ``"bundled"`` (the offline substitute) and None (not used) are never missing; ``what`` says
    what the folder holds, e.g. ``"ImageNet validation images, one sub-folder per class"``.
    """
    if path is None or str(path) == "bundled" or Path(path).is_dir():
        return []
    line = (
        f"{parameter} = {str(path)!r} is not a folder ({Path(path).resolve()}): put {what} "
        f'there, set {parameter} to the folder that holds them, or {parameter} = "bundled" '
        "for the offline substitute"
    )
    return [line]


def assets_missing(names: Iterable[str]) -> list[str]:
    """One line per asset of ``names`` (keys of :data:`gitutor.assets.ASSETS`, e.g.
    ``"efficientnet_lite0"``) that is not installed or fails its sha256 check, with its install command.

    Raises:
        ValueError: naming ``names`` for a name that is not a book asset, before anything is checked.
    """
    from gitutor.assets import (
        ASSETS,
        AssetChecksumError,
        MissingAssetError,
        asset_files,
    )

    names = list(names)
    unknown = [name for name in names if name not in ASSETS]
    if unknown:
        raise ValueError(f"names holds {unknown}, not assets of {sorted(ASSETS)}")
    lines = []
    for name in dict.fromkeys(names):
        try:
            asset_files(name)
        except (MissingAssetError, AssetChecksumError) as error:
            lines.append(
                f"the asset {name!r} is missing or damaged ({error}): `{ASSETS[name].install}`"
            )
    return lines


def packages_missing(modules: Mapping[str, str]) -> list[str]:
    """One line per module of ``modules`` (module name → install command) that is not installed
    (found without importing it)."""
    return [
        f"the package {module!r} is not installed: `{command}`"
        for module, command in modules.items()
        if importlib.util.find_spec(module) is None
    ]


def estimate_seconds(
    run: Callable[[int], object], planned_steps: int, probe_steps: int = 10
) -> float:
    """Seconds of ``planned_steps`` steps, from ``run(probe_steps)`` timed after ``run(1)``.

    Args:
        run: ``run(k)`` does k steps of the chapter's own loop on this machine.
        planned_steps: the steps the profile plans (a count, e.g. attack iterations).
        probe_steps: how many steps to time.

    Raises:
        ValueError: naming ``planned_steps`` or ``probe_steps`` when not a positive int.
    """
    for name, value in (("planned_steps", planned_steps), ("probe_steps", probe_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    run(1)  # first-call costs (allocations, kernels) are not per-step costs
    start = time.perf_counter()
    run(probe_steps)
    return (time.perf_counter() - start) / probe_steps * planned_steps


def stops_for_time(profile: str, seconds: float, allow_slow: bool) -> bool:
    """Whether a run stops before its long work: the full profile, estimated longer than
    :data:`LONG_RUN_S` seconds on this machine, without ``allow_slow``.

    Raises:
        TypeError: naming ``allow_slow`` when it is not True or False.
        ValueError: naming ``seconds`` when it is negative or not a number.
    """
    allow_slow = check_flag(allow_slow, "allow_slow")
    if not isinstance(seconds, (int, float)) or not seconds >= 0:
        raise ValueError(f"seconds must be a number ≥ 0, got {seconds!r}")
    return profile == "full" and seconds > LONG_RUN_S and not allow_slow


def duration(seconds: float) -> str:
    """``"40 min"`` or ``"3.2 h"``: a run time as the message gives it."""
    if seconds < 3600:
        return f"{max(1, round(seconds / 60))} min"
    return f"{seconds / 3600:.1f} h"


def preflight(
    missing: list[str],
    *,
    profile: str,
    device: str | torch.device,
    allow_slow: bool = False,
    estimate: Callable[[], float] | None = None,
    smaller: str = "",
) -> None:
    """Stop before the long work when anything is ``missing`` or the run is too slow here.

    Args:
        missing: lines from the ``*_missing`` functions (empty: nothing missing).
        profile: the notebook's ``PROFILE``.
        device: the resolved device (named in the message).
        allow_slow: the notebook's ``ALLOW_SLOW``: go on however long the run takes here.
        estimate: seconds the run takes on this machine (:func:`estimate_seconds`); called only
            for the full profile. None: no time check.
        smaller: the chapter's own smaller run, offered beside ``PROFILE = 'quick'`` when the run
            is too slow (e.g. ``"BUDGET = 'recorded' (the decisive sizes)"``); empty: none.

    Raises:
        PreflightError: listing every missing line and, when :func:`stops_for_time`, the
            estimate with what to do (``ALLOW_SLOW = True`` or ``PROFILE = "quick"``).
        TypeError: naming ``allow_slow`` when it is not True or False.
    """
    allow_slow = check_flag(allow_slow, "allow_slow")
    lines = list(missing)
    if estimate is not None and profile == "full":
        seconds = estimate()
        if stops_for_time(profile, seconds, allow_slow):
            lines.append(
                f"time: this run would take an estimated {duration(seconds)} here (at least; "
                f"device {torch.device(device)}). Set ALLOW_SLOW = True to go on (papermill "
                "-p ALLOW_SLOW True), or use "
                + (f"{smaller} or " if smaller else "")
                + "PROFILE = 'quick'"
            )
        else:
            print(f"PROFILE = 'full': an estimated {duration(seconds)} here")
    if lines:
        needs = "\n- ".join(lines)
        raise PreflightError(
            f"PROFILE = {profile!r} needs what this machine lacks:\n- {needs}"
        )
