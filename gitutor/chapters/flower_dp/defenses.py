"""Chapter 08's defense study: Flower's own defenses against the server's attack, same federation.

Every arm runs :func:`gitutor.federated.flower_defenses.defended_round` on the same clients (the
attacked one-image clients and the utility clients), the same initial model, the same FedSGD config
and rounds, every reply weighted once (``weighting="uniform"``: Flower's accounted central DP refuses
unequal weights, and only then is a client's sensitivity C/n). The server attacks what it holds of
each attacked client: the raw update (no defense), the clipped un-noised update (central DP, either
clipping), the noised update (LocalDpMod; also the mean of its R rounds), or only the aggregate of k
clients (SecAgg+, :func:`secagg_aggregates`).
"""

from __future__ import annotations

import copy
import math

import torch

from gitutor.chapters.flower_dp.experiments import (
    attack_deltas,
    averaged_deltas,
    test_outcomes,
)
from gitutor.chapters.flower_dp.faces import attacked_partitions, utility_partitions
from gitutor.controls import check_threshold, control_scores
from gitutor.federated.client_secrets import client_secrets
from gitutor.federated.flower_defenses import defended_round
from gitutor.stats import success_interval

ARMS = (
    "none",
    "secagg+",
    "central-dp-server-clipping",
    "central-dp-client-clipping",
    "local-dp",
)


def arm_settings(defense: str, cfg) -> dict:
    """The keyword arguments of :func:`defended_round` for ``defense`` from the profile."""
    if defense.startswith("central-dp"):
        return {
            "clip": cfg.central_clip,
            "noise_multiplier": cfg.central_z,
            "delta": cfg.delta,
        }
    if defense == "local-dp":
        return {
            "clip": cfg.local_clip,
            "epsilon": cfg.local_epsilon,
            "delta": cfg.delta,
        }
    return {}


def defense_run(model, data: dict, defense: str, cfg, *, seed: int = 0) -> dict:
    """One arm: ``cfg.rounds`` FedSGD rounds (η = ``cfg.defense_lr``) of the attacked and utility
    clients under ``defense``; returns the :class:`~gitutor.federated.flower_defenses.ServerView`
    (``"view"``), test accuracy after the last round with its Wilson interval over the test images
    (``"accuracy"``; per image: ``"outcomes"``),
    and the attack on each attacked client's round-1 update as the server holds it (``"round1"``;
    None under SecAgg+) and, under LocalDpMod, on the mean of its ``cfg.rounds`` updates
    (``"average"``). ``seed`` draws the clients' secrets (client side) and the server's noise."""
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
        **arm_settings(defense, cfg),
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
        "average": None,
        "outcomes": outcomes,
        "accuracy": success_interval(outcomes),
    }
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
        mean = averaged_deltas(view.updates, view.starts, len(attacked))
        out["average"] = attack_deltas(
            model, mean, attacked, cfg, lr=cfg.defense_lr, seed=seed
        )
    return out


def local_noise_ratio(
    epsilon: float, delta: float, m: int, sensitivity_per_clip: float = 2.0
) -> float:
    """The norm of LocalDpMod's noise over ``m`` parameters as a multiple of its clipping norm C: per
    coordinate it adds std s·√(2 ln(1.25/δ))/ε with s = ``sensitivity_per_clip``·C (the chapter's 2C),
    so the ratio (s/C)·√(2 ln(1.25/δ))·√m/ε does not depend on C. Against an update of norm ≤ C it is the
    noise-to-signal ratio of what the server receives.

    Raises:
        ValueError: for ε ≤ 0, δ outside (0, 1), m < 1 or a sensitivity factor ≤ 0.
    """
    if not epsilon > 0 or not 0 < delta < 1 or not sensitivity_per_clip > 0:
        raise ValueError(
            f"epsilon must be > 0, delta in (0, 1), sensitivity_per_clip > 0; got {epsilon!r}, "
            f"{delta!r}, {sensitivity_per_clip!r}"
        )
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"m must be the number of parameters, an int ≥ 1, got {m!r}")
    return (
        sensitivity_per_clip
        * math.sqrt(2 * math.log(1.25 / delta))
        * math.sqrt(m)
        / epsilon
    )


def secagg_aggregates(model, data: dict, cfg, *, seed: int = 0) -> dict:
    """What survives SecAgg+ for an aggregate of k one-image clients, k in ``cfg.secagg_k``:
    ``cfg.secagg_groups`` disjoint groups of k training images (group g: images g·k … g·k + k − 1 of
    ``train_x``, faces and non-faces alternating), one SecAgg+ FedSGD round each, and Inverting
    Gradients on the unmasked average read as one batch-k gradient (labels given). Returns
    ``{k: summary}``, one row per group (intervals over the groups' aggregates)."""
    images, labels, out = data["train_x"], data["train_y"], {}
    for k in cfg.secagg_k:
        if k * cfg.secagg_groups > len(images):
            raise ValueError(
                f"secagg_k × secagg_groups = {k * cfg.secagg_groups} exceeds the "
                f"{len(images)} training images"
            )
        batches, deltas = [], {}
        for g in range(cfg.secagg_groups):
            group = [
                (images[i : i + 1], labels[i : i + 1]) for i in range(g * k, g * k + k)
            ]
            view = defended_round(
                model,
                group,
                {"lr": cfg.defense_lr},
                "secagg+",
                engine=cfg.engine,
                client_seeds=client_secrets(k, seed + g),
                weighting="uniform",
            )
            deltas[g] = [a - s for a, s in zip(view.aggregates[0], view.starts[0])]
            batches.append((images[g * k : g * k + k], labels[g * k : g * k + k]))
        out[k] = attack_deltas(
            model, deltas, batches, cfg, lr=cfg.defense_lr, seed=seed
        )
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
