"""Chapter 08 before its long work: the packages its engine needs, and its time on this machine.

:func:`check` is the chapter's call to :func:`gitutor.preflight.preflight`: the simulation engine
needs Ray, Flower and Opacus installed; the run's time is estimated from a few steps of the
chapter's own attack (:func:`~gitutor.chapters.flower_dp.experiments.attack_gradient` on one face,
on the CPU, where the chapter runs) times :func:`attack_steps`, and a full-profile run longer than
:data:`gitutor.preflight.LONG_RUN_S` stops unless ``ALLOW_SLOW = True``.
"""

from __future__ import annotations

import torch

from gitutor.chapters.flower_dp.experiments import attack_gradient
from gitutor.federated.client import client_gradients
from gitutor.preflight import estimate_seconds, packages_missing, preflight

#: What the simulation engine imports, and the command that installs it.
SIMULATION_PACKAGES = {
    "flwr": 'pip install -e ".[fl]" (in the checkout)',
    "opacus": 'pip install -e ".[fl]" (in the checkout)',
    "ray": 'pip install -e ".[fl,sweeps]" (in the checkout)',
}


def attack_steps(cfg) -> int:
    """A lower bound on the Inverting Gradients steps the chapter runs at ``cfg``.

    Per attacked client: ``attack_iterations`` steps for FedSGD, twice for each E > 1 of
    ``local_epochs`` (unrolled, and read as one gradient) and once per σ of ``noise_multipliers``;
    ``batch_iterations`` steps per B > 1 of ``batch_sizes``; and ``batch_iterations`` steps per
    SecAgg+ aggregate (``secagg_groups`` per k of ``secagg_k``). Restarts, λ_TV tuning, the
    longer attack, LocalDpMod, the defense arms and Learning To Invert come on top.
    """
    single = 1 + 2 * sum(e > 1 for e in cfg.local_epochs) + len(cfg.noise_multipliers)
    batches = sum(b > 1 for b in cfg.batch_sizes)
    per_client = single * cfg.attack_iterations + batches * cfg.batch_iterations
    aggregates = len(cfg.secagg_k) * cfg.secagg_groups
    return cfg.attacked_clients * per_client + aggregates * cfg.batch_iterations


def check(cfg, model, data: dict, device, *, allow_slow: bool = False) -> None:
    """Stop before the long work when the engine's packages are missing or the full profile would
    run longer than :data:`gitutor.preflight.LONG_RUN_S` here without ``allow_slow``.

    Args:
        cfg: the chapter's profile (``engine``, the sizes :func:`attack_steps` reads).
        model: the chapter's LeNet; data: :func:`~gitutor.chapters.flower_dp.faces.face_data`.
        device: the notebook's resolved device (named in the message).
        allow_slow: the notebook's ``ALLOW_SLOW``.

    Raises:
        gitutor.preflight.PreflightError: listing what is missing and the estimate.
        TypeError: naming ``allow_slow`` when it is not True or False.
    """
    needed = SIMULATION_PACKAGES if cfg.engine == "simulation" else {}
    truth, labels = data["train_x"][:1], data["train_y"][:1]

    def run(steps: int) -> None:
        with torch.random.fork_rng(
            devices=[]
        ):  # the chapter's random streams stay as they were
            gradient = client_gradients(model, truth, labels)
            attack_gradient(
                model,
                gradient,
                truth,
                labels,
                iterations=steps,
                tv_weight=cfg.tv_weight,
                seed=0,
                record_every=steps,
            )

    preflight(
        packages_missing(needed),
        profile=cfg.profile,
        device=device,
        allow_slow=allow_slow,
        estimate=lambda: estimate_seconds(run, attack_steps(cfg)),
        smaller="BUDGET = 'recorded' (the decisive sizes; Flower's simulation engine runs the "
        "clients on the CPU, so a GPU shortens only the attacks)",
    )
