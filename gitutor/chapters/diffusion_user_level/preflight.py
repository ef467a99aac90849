"""Chapter 05 before its long work: the inputs its profile lacks, and its time on this machine.

:func:`check` is the chapter's call to :func:`gitutor.preflight.preflight`: CelebA under
``DATA_ROOT`` and the hub diffusion prior
(:func:`~gitutor.chapters.diffusion_user_level.profile.missing_inputs`), listed at once; the run's
time is estimated from a few steps of the chapter's own attack
(:func:`~gitutor.chapters.diffusion_user_level.experiments.diffula`, Algorithm 1, on one random
user of the profile's size, on the notebook's device) times :func:`planned_steps`, and a
full-profile run longer than :data:`gitutor.preflight.LONG_RUN_S` stops unless
``ALLOW_SLOW = True``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from gitutor.chapters.diffusion_user_level.experiments import (
    attack_schedules,
    diffula,
    load_prior,
    shared_model,
    untrained_face_ddpm,
)
from gitutor.chapters.diffusion_user_level.profile import missing_inputs
from gitutor.federated.case import gradient_case
from gitutor.preflight import estimate_seconds, preflight
from gitutor.priors import hub_prior_cached


def planned_steps(cfg) -> int:
    """A lower bound on the steps of Algorithm 1 the chapter runs at ``cfg``: ``cfg.steps`` per
    user (``cfg.users``: a list of users or a count), and per each of the first
    ``cfg.weight_users`` users twice more (λ = 1 and the no-prior control). The Inverting
    Gradients baselines (``cfg.ig_steps`` per user, twice), the final denoising from t*, the
    prior's samples and the GapCNN comparison come on top."""
    users = len(cfg.users) if isinstance(cfg.users, list) else cfg.users
    return cfg.steps * (users + 2 * cfg.weight_users)


def _probe(cfg, device: torch.device):
    """A random user of the profile's size, its gradient on the chapter's untrained model, and the
    profile's prior (an untrained DDPM of the shipped architecture when the hub prior is not
    cached: the estimate is then a lower bound)."""
    model = shared_model(cfg.model, cfg).to(device)
    shape = (cfg.batch_size, cfg.channels, cfg.image_size, cfg.image_size)
    x = torch.rand(shape, device=device)
    y = torch.zeros(cfg.batch_size, dtype=torch.long, device=device)
    case = gradient_case(model, x, y, labels_known=True)
    hub = cfg.prior not in ("lfw32", "untrained")
    if hub and not hub_prior_cached(cfg.prior):
        prior = untrained_face_ddpm(cfg.image_size, cfg.channels, device=device)
    else:
        prior = load_prior(cfg, device)
    return case, prior


def check(cfg, data_root: str | Path, device, *, allow_slow: bool = False) -> None:
    """Stop before the long work when ``cfg`` needs inputs this machine lacks or the full profile
    would run longer than :data:`gitutor.preflight.LONG_RUN_S` here without ``allow_slow``.

    Args:
        cfg: the chapter's settings (``chapter_settings``).
        data_root: the notebook's ``DATA_ROOT``.
        device: the notebook's resolved device (the probe runs there).
        allow_slow: the notebook's ``ALLOW_SLOW``.

    Raises:
        gitutor.preflight.PreflightError: listing what is missing (each with the parameter or
            command that supplies it) and the estimate.
        TypeError: naming ``allow_slow`` when it is not True or False.
    """
    device = torch.device(device)

    def estimate() -> float:
        # the chapter's random streams stay as they were
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            case, prior = _probe(cfg, device)
            schedules = attack_schedules(cfg)

            def run(k: int) -> None:  # no final denoising: its cost is not per step
                diffula(case, prior, cfg.replace(steps=k), schedules, seed=0, t_star=0)

            return estimate_seconds(run, planned_steps(cfg), probe_steps=3)

    preflight(
        missing_inputs(cfg, data_root),
        profile=cfg.profile,
        device=device,
        allow_slow=allow_slow,
        estimate=estimate,
    )
