"""Chapter 08's defense study: Flower's own defenses against the server's attack, same federation.

Every arm runs :func:`gitutor.federated.flower_defenses.defended_round` on the same clients (the
attacked one-image clients and the utility clients), the same initial model, the same FedSGD config
and rounds, every reply weighted once (``weighting="uniform"``: Flower's accounted central DP refuses
unequal weights, and only then is a client's sensitivity C/n). The server attacks what it holds of
each attacked client: the raw update (no defense), the clipped un-noised update (central DP, either
clipping), the noised update (LocalDpMod; also every one of its R rounds at its own model), or only the
aggregate of k
clients (SecAgg+, :func:`secagg_aggregates`).
"""

from __future__ import annotations

import copy
import math

import torch

from gitutor.chapters.flower_dp.experiments import (
    attack_deltas,
    held_rounds,
    test_outcomes,
)
from gitutor.chapters.flower_dp.faces import attacked_partitions, utility_partitions
from gitutor.checks import check_real
from gitutor.controls import check_threshold, control_scores
from gitutor.federated.client_secrets import client_secrets
from gitutor.federated.dp import epsilon
from gitutor.federated.flower_defenses import defended_round
from gitutor.stats import success_interval

ARMS = (
    "none",
    "secagg+",
    "central-dp-server-clipping",
    "central-dp-client-clipping",
    "local-dp",
)


def local_mod_epsilon(noise_multiplier: float, delta: float) -> float:
    """The ε to give Flower's ``LocalDpMod`` so that its noise std per coordinate is z·s (z =
    ``noise_multiplier``, s its sensitivity): LocalDpMod's calibration σ = s·√(2 ln(1.25/δ))/ε solved for
    ε. The mod's ε is a setting, not the guarantee: under replacement of a client's whole update
    (s = 2C) the noise is the Gaussian mechanism with noise multiplier z, under add/remove (C, the
    relation the chapter states every ε under: :func:`add_remove_epsilon`) with multiplier 2z, each
    composed over the R rounds by Opacus' RDP accountant, no subsampling.

    Raises:
        TypeError / ValueError: naming ``noise_multiplier`` (a finite number > 0) or ``delta`` (in (0, 1)).
    """
    z = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_open=True)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    return math.sqrt(2 * math.log(1.25 / delta)) / z


def matched_local_z(sigma: float) -> float:
    """LocalDpMod's noise multiplier z whose ε equals DP-SGD's at noise multiplier ``sigma`` under one
    neighbouring relation and one accountant: σ / 2.

    Under add/remove adjacency at clipping norm C (Opacus' relation, sensitivity C) the mod's noise
    std 2zC (:func:`local_mod_epsilon`, s = 2C) is the Gaussian mechanism with noise multiplier 2z;
    DP-SGD with q = 1 on a one-example client is the Gaussian mechanism with multiplier σ, once per
    round in both. So at z = σ/2 the two carry the same ε over the same rounds, per client (= per
    example for a client that holds one photograph), by Opacus' RDP accountant.

    Raises:
        TypeError / ValueError: naming ``sigma`` (a finite number > 0).
    """
    return check_real(sigma, "sigma", low=0.0, low_open=True) / 2


def add_remove_epsilon(view, cfg) -> float | None:
    """The ε over ``cfg.rounds`` rounds of what ``view`` (a
    :class:`~gitutor.federated.flower_defenses.ServerView`) guarantees, under add/remove adjacency —
    one client's data left out, Opacus' relation and DP-SGD's — by ``cfg.accountant`` at
    ``cfg.delta``: the one relation the chapter compares ε under. LocalDpMod's noise std σ on an update
    clipped to C is the Gaussian mechanism with noise multiplier σ/C there (2z, where its own
    guarantee is stated under replacement at multiplier z); central DP's guarantee is already
    add/remove at the client level; no DP: None.
    """
    if view.noise_by == "client":
        return epsilon(
            view.sigma / view.clip,
            1.0,
            cfg.rounds,
            cfg.delta,
            accountant=cfg.accountant,
        )
    return view.guarantee.epsilon


def arm_settings(defense: str, cfg, noise_multiplier: float | None = None) -> dict:
    """The keyword arguments of :func:`defended_round` for ``defense`` from the profile; LocalDpMod at
    noise multiplier z = ``noise_multiplier`` (default :func:`matched_local_z` of ``cfg.table_sigma``:
    the decision table's ε), through :func:`local_mod_epsilon`."""
    if defense.startswith("central-dp"):
        return {
            "clip": cfg.central_clip,
            "noise_multiplier": cfg.central_z,
            "delta": cfg.delta,
        }
    if defense == "local-dp":
        return {
            "clip": cfg.local_clip,
            "epsilon": local_mod_epsilon(
                matched_local_z(cfg.table_sigma)
                if noise_multiplier is None
                else noise_multiplier,
                cfg.delta,
            ),
            "delta": cfg.delta,
        }
    return {}


def defense_run(
    model,
    data: dict,
    defense: str,
    cfg,
    *,
    seed: int = 0,
    noise_multiplier: float | None = None,
) -> dict:
    """One arm: ``cfg.rounds`` FedSGD rounds (η = ``cfg.defense_lr``) of the attacked and utility
    clients under ``defense``; returns the :class:`~gitutor.federated.flower_defenses.ServerView`
    (``"view"``), test accuracy after the last round with its Wilson interval over the test images
    (``"accuracy"``; per image: ``"outcomes"``), the ε the page compares (``"epsilon"``,
    :func:`add_remove_epsilon`),
    and the attack on each attacked client's round-1 update as the server holds it (``"round1"``;
    None under SecAgg+) and, under LocalDpMod, what the server holds of each attacked client over all
    ``cfg.rounds`` rounds (``"held"``, :func:`~gitutor.chapters.flower_dp.experiments.held_rounds`: the
    input of the every-round attack, which the strongest adversary runs).
    ``seed`` draws the clients' secrets (client side) and the server's noise; ``noise_multiplier``:
    LocalDpMod's z (:func:`arm_settings`)."""
    attacked = attacked_partitions(data, cfg.attacked_clients, 1)
    partitions = attacked + utility_partitions(
        data, cfg.utility_clients, cfg.attacked_clients
    )
    view = defended_round(
        model,
        partitions,
        {"lr": cfg.defense_lr},
        defense,
        num_rounds=cfg.rounds,
        engine=cfg.engine,
        client_seeds=client_secrets(len(partitions), seed),
        server_seed=seed,
        weighting="uniform",
        **arm_settings(defense, cfg, noise_multiplier),
    )
    final = copy.deepcopy(model)
    with torch.no_grad():
        for parameter, value in zip(final.parameters(), view.aggregates[-1]):
            parameter.copy_(value)
    outcomes = test_outcomes(final, data["test_x"], data["test_y"])
    out = {
        "defense": defense,
        "view": view,
        "round1": None,
        "held": None,
        "outcomes": outcomes,
        "accuracy": success_interval(outcomes),
    }
    out["epsilon"] = add_remove_epsilon(view, cfg)
    if defense == "secagg+":
        return out
    held = view.clipped if defense.startswith("central-dp") else view.updates
    deltas = {
        u.partition: view.update(u)
        for u in held
        if u.round == 1 and u.partition < len(attacked)
    }
    out["round1"] = attack_deltas(
        model, deltas, attacked, cfg, lr=cfg.defense_lr, seed=seed
    )
    if defense == "local-dp":
        out["held"] = held_rounds(view.updates, view.starts, len(attacked))
    return out


def local_dp_point(
    model, data: dict, noise_multiplier: float, cfg, *, seed: int = 0
) -> dict:
    """One z of the LocalDpMod sweep, in the form of a DP-SGD sweep point
    (:func:`~gitutor.chapters.flower_dp.experiments.dp_point`): :func:`defense_run` of ``"local-dp"`` at
    noise multiplier z; the attack on round 1's noised updates (its rows and intervals), ``"sigma"``: z,
    ``"epsilon"``: ε over the rounds under add/remove adjacency (:func:`add_remove_epsilon`, client level), ``"held"``, ``"accuracy"``,
    ``"accuracy_interval"``, ``"outcomes"`` and the run itself (``"run"``).

    Raises:
        TypeError / ValueError: naming ``noise_multiplier`` (a finite number > 0), before the federation runs.
    """
    z = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_open=True)
    run = defense_run(model, data, "local-dp", cfg, seed=seed, noise_multiplier=z)
    return run["round1"] | {
        "sigma": z,
        "epsilon": run["epsilon"],
        "held": run["held"],
        "accuracy": run["accuracy"].mean,
        "accuracy_interval": run["accuracy"],
        "outcomes": run["outcomes"],
        "run": run,
    }


def secagg_aggregates(model, data: dict, cfg, *, seed: int = 0) -> dict:
    """What survives SecAgg+ for an aggregate of k one-image clients, k in ``cfg.secagg_k``:
    ``cfg.secagg_groups`` disjoint groups of k training images (group g: images g·k … g·k + k − 1 of
    ``train_x``, faces and non-faces alternating), each a federation of its k clients for ``cfg.rounds``
    SecAgg+ FedSGD rounds (the same clients every round, every reply weighted once), and Inverting
    Gradients on round 1's unmasked average read as one batch-k gradient (labels given), for
    ``cfg.batch_iterations`` steps: a batch needs a longer run than one image (the quick profile's value
    is where this page's k = 2 run had flattened).

    Returns:
        ``{k: summary}``, one row per group (intervals over the groups' aggregates), each summary with
        ``"held"`` (group → every round's ``(w_0, aggregate Δ)``, the input of
        :func:`~gitutor.chapters.flower_dp.experiments.attack_rounds`) and ``"batches"`` (group → its
        ``(images, labels)``).

    Raises:
        ValueError: naming ``secagg_k × secagg_groups`` when the groups need more images than
            ``train_x`` holds, before any federation runs.
    """
    images, labels, out = data["train_x"], data["train_y"], {}
    for k in cfg.secagg_k:
        if k * cfg.secagg_groups > len(images):
            raise ValueError(
                f"secagg_k × secagg_groups = {k * cfg.secagg_groups} exceeds the "
                f"{len(images)} training images"
            )
    for k in cfg.secagg_k:
        batches, deltas, held = [], {}, {}
        for g in range(cfg.secagg_groups):
            group = [
                (images[i : i + 1], labels[i : i + 1]) for i in range(g * k, g * k + k)
            ]
            view = defended_round(
                model,
                group,
                {"lr": cfg.defense_lr},
                "secagg+",
                num_rounds=cfg.rounds,
                engine=cfg.engine,
                client_seeds=client_secrets(k, seed + g),
                weighting="uniform",
            )
            held[g] = [
                (start, [a - s for a, s in zip(aggregate, start)])
                for start, aggregate in zip(view.starts, view.aggregates)
            ]
            deltas[g] = held[g][0][1]
            batches.append((images[g * k : g * k + k], labels[g * k : g * k + k]))
        out[k] = attack_deltas(
            model,
            deltas,
            batches,
            cfg,
            lr=cfg.defense_lr,
            seed=seed,
            iterations=cfg.batch_iterations,
        ) | {"held": held, "batches": batches}
    return out


def face_controls(data: dict, cfg) -> dict:
    """PSNR (dB) of :func:`gitutor.controls.control_images` on the attacked images and the highest
    control, checked below :data:`~gitutor.controls.RECOGNISABLE_PSNR` (:func:`check_threshold`
    raises otherwise). Returns ``{"scores": {control: (N,)}, "best": dB, "best_name": str}``."""
    images = torch.cat(
        [x for x, _ in attacked_partitions(data, cfg.attacked_clients, 1)]
    )
    scores = control_scores(images)
    best = check_threshold(scores)
    name = max(scores, key=lambda k: float(scores[k].max()))
    return {"scores": scores, "best": best, "best_name": name}
