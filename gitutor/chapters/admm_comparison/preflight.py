"""Chapter 07 before its long work: the data sets its profile lacks, and its time on this machine.

:func:`check` is the chapter's call to :func:`gitutor.preflight.preflight`: every torchvision
data set of the profile's kinds missing under ``DATA_ROOT`` (:func:`gitutor.preflight.torchvision_missing`,
each with its download command; none with ``DATA_ROOT = "bundled"``), listed at once; the run's
time is estimated per kind from a step of the chapter's own comparison
(:func:`~gitutor.chapters.admm_comparison.compare.compare_kind` on one random image of the kind,
its cosine matching scaled to the same share of the steps, on the notebook's device) times
:func:`planned_steps`, and a full-profile run longer than :data:`gitutor.preflight.LONG_RUN_S`
stops unless ``ALLOW_SLOW = True``. The estimate waits until no data set is missing: a step on
LFW's 5 749 classes takes seconds, and a run that cannot start needs its data first.
"""

from __future__ import annotations

from pathlib import Path

import torch

from gitutor.chapters.admm_comparison.compare import compare_kind
from gitutor.chapters.admm_comparison.rounds import BUNDLED_ROOT, chapter_model
from gitutor.preflight import estimate_seconds, preflight, torchvision_missing


def planned_steps(cfg) -> dict[str, int]:
    """A lower bound on the L-BFGS steps of every attack of the comparison, per kind of
    ``cfg.kinds``: ``cfg.iterations[kind]`` per attacked image (``cfg.images_per_kind``), and for
    the ablation kind as many again per setting of ``cfg.ablation_settings``. Round two, the
    cosine grid and the adaptive attack's further starts come on top."""
    steps = {kind: cfg.images_per_kind * cfg.iterations[kind] for kind in cfg.kinds}
    if cfg.ablation_kind in steps:
        steps[cfg.ablation_kind] *= 1 + len(cfg.ablation_settings)
    return steps


def check(cfg, data_root: str | Path, device, *, allow_slow: bool = False) -> None:
    """Stop before the long work when ``cfg`` needs data sets this machine lacks or the full
    profile would run longer than :data:`gitutor.preflight.LONG_RUN_S` here without
    ``allow_slow``.

    Args:
        cfg: the chapter's settings (``chapter_settings``).
        data_root: the notebook's ``DATA_ROOT`` (``"bundled"``: the offline stand-ins).
        device: the notebook's resolved device (the probe runs there).
        allow_slow: the notebook's ``ALLOW_SLOW``.

    Raises:
        gitutor.preflight.PreflightError: listing every missing data set (with its download
            command), or else the estimate.
        TypeError: naming ``allow_slow`` when it is not True or False.
    """
    device = torch.device(device)
    bundled = str(data_root) == BUNDLED_ROOT
    missing = [] if bundled else torchvision_missing(cfg.kinds, data_root)

    def seconds(kind: str, steps: int) -> float:
        side, channels = cfg.image_size, cfg.channels[kind]
        x = torch.rand(1, channels, side, side, device=device)
        y = torch.zeros(1, dtype=torch.long, device=device)
        model = chapter_model(cfg, kind, seed=0, device=device)
        share = (
            cfg.cosine_iterations / cfg.iterations[kind]
        )  # Adam steps per L-BFGS step

        def run(k: int) -> None:
            compare_kind(
                model,
                x,
                y,
                rho=cfg.rho,
                lr=cfg.lr,
                local_steps=cfg.local_steps,
                iterations=k,
                seed=0,
                record_every=k,
                cosine_iterations=max(1, round(share * k)),
                tv_weight=cfg.tv_weight,
            )

        return estimate_seconds(run, steps, probe_steps=1)

    def estimate() -> float:
        # the chapter's random streams stay as they were
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            return sum(seconds(kind, n) for kind, n in planned_steps(cfg).items())

    preflight(
        missing,
        profile=cfg.profile,
        device=device,
        allow_slow=allow_slow,
        estimate=None if missing else estimate,
    )
