"""Chapter 04 before its long work: the inputs its settings lack, and its time on this machine.

:func:`check` is the chapter's call to :func:`gitutor.preflight.preflight`: the ImageNet ResNet34
weights and the ImageNet image folder (:func:`~gitutor.chapters.stepwise_gradinversion.trials.offline_problems`)
and Ray for a sweep on Ray, all listed at once; the run's time is estimated from a few steps of
the chapter's own attack (Stepwise GradInversion through
:func:`~gitutor.chapters.stepwise_gradinversion.trials.run_attack`, on a batch of the settings' size
and resolution, on the notebook's device) times :func:`planned_steps`, and a full-profile run
longer than :data:`gitutor.preflight.LONG_RUN_S` stops unless ``ALLOW_SLOW = True``.
"""

from __future__ import annotations

import types

import torch

from gitutor.chapters.stepwise_gradinversion.experiments import (
    block_starts,
    chapter_model,
)
from gitutor.chapters.stepwise_gradinversion.profile import MODEL_BLOCKS
from gitutor.chapters.stepwise_gradinversion.trials import (
    chapter_trials,
    offline_problems,
    run_attack,
    trial_settings,
)
from gitutor.federated.case import gradient_case
from gitutor.preflight import estimate_seconds, packages_missing, preflight

#: What a sweep on Ray (``sweep_engine == "ray"``) imports, and the command that installs it.
RAY_PACKAGES = {"ray": 'pip install -e ".[sweeps]" (in the checkout)'}


def planned_steps(cfg, block_start: dict[str, int]) -> int:
    """The image updates of every trial the chapter runs at ``cfg``
    (:func:`~gitutor.chapters.stepwise_gradinversion.trials.chapter_trials`; DLG's L-BFGS steps
    counted as the gradient evaluations they make).

    Args:
        cfg: the chapter's settings (``chapter_settings``).
        block_start: first parameter tensor of each residual block of ``cfg.first_blocks``
            (:func:`~gitutor.chapters.stepwise_gradinversion.experiments.block_starts`).

    Every step is counted at ``cfg.batch_size``: the Fig. 7 runs at larger batches take longer.
    """
    return sum(t["iterations"] for t in chapter_trials(cfg, block_start, seed=0))


def _probe(cfg, device: torch.device):
    """The settings' network with random weights (the time of a step does not depend on them) and
    a context holding one random batch of ``cfg.batch_size`` images with its shared gradient."""
    weights = {"pretrained": False, "substitute": False, "calibrate_bn_images": 0}
    random = types.SimpleNamespace(**(vars(cfg) | weights))
    model = chapter_model(random, seed=0, device=device)
    shape = (cfg.batch_size, 3, cfg.image_size, cfg.image_size)
    x = torch.rand(shape, device=device)
    y = torch.arange(cfg.batch_size, device=device) % cfg.num_classes
    case = gradient_case(model, x, y, labels_known=True)
    batch = (case.inputs, case.labels, case.server_view["update"])
    context = {
        "model": model,
        "batches": {(cfg.batch_size, 0): batch},
        "settings": trial_settings(cfg),
    }
    return model, context


def check(cfg, device, *, allow_slow: bool = False) -> None:
    """Stop before the long work when ``cfg`` needs inputs this machine lacks or the full profile
    would run longer than :data:`gitutor.preflight.LONG_RUN_S` here without ``allow_slow``.

    Args:
        cfg: the chapter's settings (``chapter_settings``: ``pretrained``, ``image_root``,
            ``sweep_engine``, the sizes :func:`planned_steps` reads).
        device: the notebook's resolved device (the probe runs there).
        allow_slow: the notebook's ``ALLOW_SLOW``.

    Raises:
        gitutor.preflight.PreflightError: listing what is missing (each with the parameter or
            command that supplies it) and the estimate.
        TypeError: naming ``allow_slow`` when it is not True or False.
    """
    device = torch.device(device)
    missing = offline_problems(cfg.pretrained, cfg.image_root)
    missing += packages_missing(RAY_PACKAGES if cfg.sweep_engine == "ray" else {})

    def estimate() -> float:
        # the chapter's random streams stay as they were
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            model, context = _probe(cfg, device)
            names = [name for name, _ in model.named_parameters()]
            steps = planned_steps(cfg, block_starts(names, MODEL_BLOCKS[cfg.model]))

            def run(k: int) -> None:
                run_attack(context, "Stepwise", (cfg.batch_size, 0), k, seed=0)

            return estimate_seconds(run, steps, probe_steps=3)

    preflight(
        missing,
        profile=cfg.profile,
        device=device,
        allow_slow=allow_slow,
        estimate=estimate,
    )
