"""Chapter 08's experiments: attacks on what a Flower server records, against Opacus DP-SGD.

Data and partitions: :mod:`.faces`.
"""

from __future__ import annotations

import torch

from gitutor.attacks import inverting_gradients
from gitutor.attacks.objectives import cosine_gradient_distance
from gitutor.chapters.flower_dp.faces import attacked_partitions, utility_partitions
from gitutor.checks import check_int, check_real, check_seed
from gitutor.controls import RECOGNISABLE_PSNR
from gitutor.federated.client import client_gradients
from gitutor.federated.client_secrets import client_secrets
from gitutor.federated.defenses import add_gaussian_noise
from gitutor.federated.dp import epsilon
from gitutor.federated.flower import federated_round, update_as_gradient
from gitutor.metrics import match_batch, psnr, score_batch
from gitutor.models import LeNet
from gitutor.stats import BOUNDS, interval, success_interval


def chapter_model(size: int, seed: int = 0) -> LeNet:
    """The attacked network: DLG LeNet, tanh, PyTorch's default initialisation, 2 classes.

    Raises:
        TypeError: naming ``seed`` when it is not an int (or ``size``, as :class:`~gitutor.models.LeNet`).
        ValueError: as :class:`~gitutor.models.LeNet` for a bad ``size``.
    """
    torch.manual_seed(check_seed(seed))
    return LeNet(2, in_channels=1, image_size=size, activation="tanh")


def accuracy(model, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of ``images`` the model classifies as ``labels``."""
    with torch.no_grad():
        return float((model(images).argmax(1) == labels).float().mean())


def test_outcomes(model, images: torch.Tensor, labels: torch.Tensor) -> list[bool]:
    """Whether the model classifies each of ``images`` as its label (one bool per image): test
    accuracy with :func:`gitutor.stats.success_interval` (Wilson, over the test images), and paired
    differences between two models on the same images (:func:`gitutor.paired.paired_difference`)."""
    with torch.no_grad():
        return (model(images).argmax(1) == labels).tolist()


def check_clients(cfg) -> None:
    """The profile's client counts, before a federation runs: ``cfg.attacked_clients`` an int ≥ 1 (the
    clients whose updates the server attacks: with none there is nothing to score) and
    ``cfg.utility_clients`` an int ≥ 0.

    Raises:
        TypeError: naming ``cfg.attacked_clients`` / ``cfg.utility_clients`` when not an int.
        ValueError: naming it when out of range.
    """
    check_int(cfg.attacked_clients, "cfg.attacked_clients")
    check_int(cfg.utility_clients, "cfg.utility_clients", low=0)


def federation(model, data: dict, cfg, config: dict, *, client_seeds=None):
    """``cfg.rounds`` Flower rounds of the attacked one-image clients and the utility clients from
    ``model`` with the training ``config``; returns ``(updates, history, outcomes)``: the server's
    recorded replies, its accuracy after every round, and whether each test image is classified right
    after the last (:func:`test_outcomes`).

    Raises:
        TypeError, ValueError: naming ``cfg.attacked_clients`` or ``cfg.utility_clients``
            (:func:`check_clients`), before the federation runs; as
            :func:`~gitutor.federated.flower.federated_round`.
    """
    check_clients(cfg)
    attacked = attacked_partitions(data, cfg.attacked_clients, 1)
    partitions = attacked + utility_partitions(
        data, cfg.utility_clients, cfg.attacked_clients
    )
    final = {}

    def evaluate(m):
        final["outcomes"] = test_outcomes(m, data["test_x"], data["test_y"])
        return sum(final["outcomes"]) / len(final["outcomes"])

    updates, history = federated_round(
        model,
        partitions,
        config,
        num_rounds=cfg.rounds,
        engine=cfg.engine,
        evaluate_fn=evaluate,
        client_seeds=client_seeds,
    )
    return updates, history, final["outcomes"]


def trained_outcomes(model, data: dict, cfg) -> list[bool]:
    """Test outcomes after ``cfg.rounds`` undefended FedSGD rounds (η = ``cfg.lr``, weighted by examples)
    from ``model`` (:func:`federation`): how well a candidate network learns the chapter's task."""
    return federation(model, data, cfg, {"lr": cfg.lr})[2]


def bias_label(gradient: list[torch.Tensor]) -> int:
    """The label of a one-image update: the class whose last-layer bias gradient p_c − y_c
    is negative (iDLG's rule read off the bias, which holds whatever the features' sign)."""
    return int(gradient[-1].argmin())


def attack(
    model,
    update,
    truth,
    labels,
    *,
    lr: float,
    steps: int,
    iterations: int,
    tv_weight: float,
    seed: int,
    record_every: int = 50,
    progress: bool = False,
    noise_std: float = 0.0,
) -> dict:
    """Inverting Gradients on −Δ/(η·steps); one client's row of :func:`attack_gradient`.

    ``noise_std`` > 0 first adds chapter 01's hand-written defense, N(0, noise_std²) on every
    entry of the gradient (no clipping), as if the client had sent that instead.

    Raises:
        TypeError, ValueError: naming ``noise_std`` (a finite number ≥ 0), ``lr``, ``steps`` or ``update``
            (:func:`~gitutor.federated.flower.update_as_gradient`), before the attack runs.
    """
    noise_std = check_real(noise_std, "noise_std", low=0.0)
    gradient = update_as_gradient(update, lr, steps)
    if noise_std:
        gradient = add_gaussian_noise(
            gradient, noise_std, torch.Generator().manual_seed(seed)
        )
    return attack_gradient(
        model,
        gradient,
        truth,
        labels,
        iterations=iterations,
        tv_weight=tv_weight,
        seed=seed,
        record_every=record_every,
        progress=progress,
    )


def attack_gradient(
    model,
    gradient,
    truth,
    labels,
    *,
    iterations: int,
    tv_weight: float,
    seed: int,
    record_every: int = 50,
    progress: bool = False,
) -> dict:
    """Inverting Gradients from the start drawn with ``seed``; one client's scores, label and
    reconstruction. B = 1: the label is read off the bias (:func:`bias_label`); B > 1: the labels
    are given. The row keeps ``gradient``, the ``used`` labels and ``matching``, the cosine
    gradient distance of the reconstruction (what the attacker can compute; no truth in it)."""
    label = bias_label(gradient)
    used = torch.tensor([label]) if len(labels) == 1 else labels  # B > 1: labels known
    result = inverting_gradients(
        model,
        gradient,
        used,
        truth.shape,
        iterations=iterations,
        tv_weight=tv_weight,
        seed=seed,
        record_every=record_every,
        progress=progress,
    )
    images = result.images.clamp(0, 1)
    return score_row(images, truth) | {
        "label_ok": len(labels) > 1 or label == int(labels[0]),
        "result": result,
        "gradient": gradient,
        "used": used,
        "matching": matching_loss(model, gradient, images, used),
    }


def score_row(images: torch.Tensor, truth: torch.Tensor) -> dict:
    """PSNR/SSIM/MSE/LPIPS of ``images`` matched to ``truth`` (both (B, C, H, W) in [0, 1])."""
    images = match_batch(images, truth)
    scores = score_batch(images, truth, match=False, lpips=True)
    return {
        "psnr": scores["psnr"],
        "ssim": scores["ssim"],
        "mse": scores["mse"],
        "lpips": scores["lpips"],
        "psnrs": psnr(images, truth).tolist(),
        "images": images,
    }


def matching_loss(model, gradient, images: torch.Tensor, labels: torch.Tensor) -> float:
    """1 − cos between the gradient of ``images`` with ``labels`` and the observed ``gradient``
    (Geiping et al. 2020, Eq. 4 without TV): the criterion by which the attacker, who never sees
    the truth, ranks candidate reconstructions."""
    return float(
        cosine_gradient_distance(client_gradients(model, images, labels), gradient)
    )


def regime(
    model,
    data: dict,
    *,
    clients: int,
    batch: int,
    epochs: int,
    cfg,
    seed: int = 0,
    batch_size: int | None = None,
    noise_std: float = 0.0,
) -> dict:
    """One Flower round with ``clients`` clients of ``batch`` images, then the attack on each.

    FedSGD: ``epochs = 1`` and one batch; FedAvg: ``epochs`` passes in mini-batches of
    ``batch_size``. Returns the per-client rows and PSNR/SSIM intervals.

    Raises:
        TypeError: naming ``clients``, ``batch``, ``epochs``, ``batch_size`` or ``seed`` when not an int,
            ``noise_std`` when not a real number.
        ValueError: naming them when out of range (``clients``, ``batch``, ``epochs`` ≥ 1; ``batch_size``
            in [1, batch]; ``noise_std`` a finite number ≥ 0), before the federation runs.
    """
    for name, value in (("clients", clients), ("batch", batch), ("epochs", epochs)):
        check_int(value, name)
    if batch_size is not None:
        check_int(batch_size, "batch_size", high=batch)
    check_seed(seed)
    check_real(noise_std, "noise_std", low=0.0)
    partitions = attacked_partitions(data, clients, batch)
    config = {"lr": cfg.lr, "local-epochs": epochs, "batch-size": batch_size or 0}
    updates, _ = federated_round(model, partitions, config, engine=cfg.engine)
    summary = attack_updates(
        model, updates, partitions, cfg, seed=seed, noise_std=noise_std
    )
    return summary | {"updates": updates}


def attack_updates(
    model,
    updates,
    partitions,
    cfg,
    *,
    seed: int = 0,
    first_round=1,
    noise_std: float = 0.0,
) -> dict:
    """Attack the recorded round-``first_round`` update of every client in ``partitions``.

    Raises:
        TypeError / ValueError: naming ``first_round`` when not an int ≥ 1, or ``updates`` when it holds
            no update of that round.
    """
    check_int(first_round, "first_round")
    if not any(
        u.round == first_round and u.partition < len(partitions) for u in updates
    ):
        raise ValueError(
            f"updates hold no update of round {first_round} from the {len(partitions)} partitions"
        )
    start = [p.detach() for p in model.parameters()]
    chosen = [
        u for u in updates if u.round == first_round and u.partition < len(partitions)
    ]
    return attack_deltas(
        model,
        {u.partition: u.update(start) for u in chosen},
        partitions,
        cfg,
        lr=cfg.lr,
        steps={u.partition: int(u.metrics["local-steps"]) for u in chosen},
        seed=seed,
        noise_std=noise_std,
    )


def attack_deltas(
    model,
    deltas: dict,
    partitions: list,
    cfg,
    *,
    lr: float,
    steps: dict | None = None,
    seed: int = 0,
    noise_std: float = 0.0,
) -> dict:
    """Inverting Gradients on ``deltas`` (partition → Δ, one tensor per parameter) read as
    −Δ/(η·steps) at ``model``'s parameters; the summary of :func:`summarise`."""
    rows = []
    for partition in sorted(deltas):
        truth, labels = partitions[partition]
        row = attack(
            model,
            deltas[partition],
            truth,
            labels,
            lr=lr,
            steps=(steps or {}).get(partition, 1),
            iterations=cfg.attack_iterations,
            tv_weight=cfg.tv_weight,
            seed=seed + partition,
            record_every=cfg.record_every,
            progress=cfg.progress,
            noise_std=noise_std,
        )
        rows.append(
            row | {"partition": partition, "truth": truth, "truth_labels": labels}
        )
    return summarise(rows)


def fedavg_starts(model, updates) -> list[list[torch.Tensor]]:
    """The global parameters of every round, rebuilt from the recorded replies: round 1 starts at
    ``model``, round r + 1 at FedAvg's example-weighted mean of round r's replies."""
    starts = [[p.detach().clone() for p in model.parameters()]]
    for r in range(1, max(u.round for u in updates)):
        replies = [u for u in updates if u.round == r]
        total = sum(int(u.metrics["num-examples"]) for u in replies)
        starts.append(
            [
                sum(u.arrays[i] * int(u.metrics["num-examples"]) for u in replies)
                / total
                for i in range(len(starts[0]))
            ]
        )
    return starts


def averaged_deltas(updates, starts, partitions: int) -> dict:
    """partition → the mean of its update over every round, each against its own round's start:
    the multi-round adversary's estimate (noise std cut by √R when the data do not change)."""
    out = {}
    for k in range(partitions):
        mine = [u.update(starts[u.round - 1]) for u in updates if u.partition == k]
        out[k] = [sum(parts) / len(mine) for parts in zip(*mine)]
    return out


def summarise(rows: list[dict]) -> dict:
    """Rows plus PSNR/SSIM/LPIPS intervals over them (:func:`gitutor.stats.interval`; LPIPS None
    without its backbone), label accuracy, ``label_chance`` (the majority-class guess's accuracy over
    the rows, from each row's ``truth_labels``; None without them), and ``recognised`` of
    ``images``: images at PSNR ≥ :data:`~gitutor.controls.RECOGNISABLE_PSNR`.

    Raises:
        ValueError: naming ``rows`` when it is empty (no attacked client: nothing to summarise).
    """
    if not rows:
        raise ValueError("rows must hold at least one attacked client's row")
    lpips = [r["lpips"] for r in rows]
    psnrs = [v for r in rows for v in r["psnrs"]]
    return {
        "rows": rows,
        "psnr": interval([r["psnr"] for r in rows], bounds=BOUNDS["PSNR"]),
        "ssim": interval([r["ssim"] for r in rows], bounds=BOUNDS["SSIM"]),
        "lpips": None if None in lpips else interval(lpips, bounds=(0.0, float("inf"))),
        "label_rate": sum(r["label_ok"] for r in rows) / len(rows),
        "label_chance": majority_rate([r.get("truth_labels") for r in rows]),
        "recognised": sum(v >= RECOGNISABLE_PSNR for v in psnrs),
        "images": len(psnrs),
    }


def majority_rate(labels: list) -> float | None:
    """The accuracy of always guessing the commonest of ``labels`` (one label tensor per row, each
    row counted once when it holds one image); None when any is missing, a row holds more, or there
    is no row."""
    if not labels or any(y is None or len(y) != 1 for y in labels):
        return None
    values = [int(y[0]) for y in labels]
    return max(values.count(v) for v in set(values)) / len(values)


def dp_point(model, data: dict, sigma: float, cfg, *, seed: int = 0) -> dict:
    """One σ of the sweep: a Flower federation of attacked + utility clients training with
    Opacus DP-SGD (one full-batch step per round, q = 1) for ``cfg.rounds`` rounds.

    Returns the attack summary on the attacked clients' round-1 updates, the attack on the mean
    of each client's updates over all rounds (``"average"``, :func:`averaged_deltas`), the server's
    test accuracy after the last round with its interval (``"accuracy_interval"``; per test image:
    ``"outcomes"``), and ε from
    Opacus' accountant for the steps each client took (example-level, every round).
    ``seed`` draws the clients' own noise secrets (:func:`~gitutor.federated.client_secrets.client_secrets`,
    client side) and the attacker's starts; the server never receives it.

    Raises:
        TypeError, ValueError: naming ``sigma`` (a finite number ≥ 0), ``seed``, ``cfg.attacked_clients``
            or ``cfg.utility_clients`` (:func:`check_clients`), before the federation runs.
    """
    sigma = check_real(sigma, "sigma", low=0.0)
    check_seed(seed)
    check_clients(cfg)
    attacked = attacked_partitions(data, cfg.attacked_clients, 1)
    config = {
        "lr": cfg.lr,
        "noise-multiplier": float(sigma),
        "max-grad-norm": float(cfg.max_grad_norm),
    }
    # Each client's noise comes from its own secret; the page draws the secrets on the clients' side from
    # its seed so that it repeats (the server's config carries no seed: client_secrets).
    secrets = client_secrets(cfg.attacked_clients + cfg.utility_clients, seed)
    updates, history, outcomes = federation(
        model, data, cfg, config, client_seeds=secrets
    )
    steps = sum(int(u.metrics["local-steps"]) for u in updates if u.partition == 0)
    rate = float(next(u for u in updates if u.partition == 0).metrics["sample-rate"])
    eps = epsilon(sigma, rate, steps, cfg.delta, accountant=cfg.accountant)
    summary = attack_updates(model, updates, attacked, cfg, seed=seed)
    mean = averaged_deltas(updates, fedavg_starts(model, updates), len(attacked))
    average = attack_deltas(model, mean, attacked, cfg, lr=cfg.lr, seed=seed)
    return summary | {
        "sigma": float(sigma),
        "epsilon": eps,
        "steps": steps,
        "average": average,
        "accuracy": history[-1][1],
        "outcomes": outcomes,
        "accuracy_interval": success_interval(outcomes),
        "history": history,
    }


def equivalent_noise_multiplier(
    variance: float, batch: int, example_norm: float
) -> float:
    """σ that chapter 01's noise N(0, variance) on a mean gradient of ``batch`` examples would
    be if every example's gradient were clipped at its own norm ``example_norm``:
    σ = √variance · batch / example_norm (DP-SGD adds σ·C to the sum, i.e. σ·C/B to the mean).

    Raises:
        TypeError: naming ``variance``, ``batch`` or ``example_norm`` when not a number of the right kind
            (``"0.01"``, ``2.0`` images).
        ValueError: naming ``variance`` (NaN, infinite or < 0: a negative one has no square root),
            ``batch`` (< 1) or ``example_norm`` (NaN, infinite or ≤ 0).
    """
    variance = check_real(variance, "variance", low=0.0)
    batch = check_int(batch, "batch")
    example_norm = check_real(example_norm, "example_norm", low=0.0, low_open=True)
    return variance**0.5 * batch / example_norm


def dlg_lenet(size: int, seed: int = 0) -> LeNet:
    """Chapter 01's network for comparison: Sigmoid LeNet with weights from U(−0.5, 0.5).

    Raises:
        TypeError: naming ``seed`` when it is not an int (or ``size``, as :class:`~gitutor.models.LeNet`).
    """
    from gitutor.models import init_uniform_

    return init_uniform_(
        LeNet(2, in_channels=1, image_size=size),
        generator=torch.Generator().manual_seed(check_seed(seed)),
    )


def budget_curve(candidates: dict, data: dict, cfg, *, clients: int = 3) -> dict:
    """PSNR (dB) along the attack for each candidate network: one Flower FedSGD round with
    ``clients`` one-image clients, one attack of ``cfg.attack_iterations`` steps each, scored at
    every snapshot. Returns ``{name: {step: Interval}}``.

    Raises:
        TypeError / ValueError: naming ``clients`` when not an int ≥ 1, before any federation runs.
    """
    check_int(clients, "clients")
    curves = {}
    for name, net in candidates.items():
        found = regime(net, data, clients=clients, batch=1, epochs=1, cfg=cfg)
        steps = [step for step, _ in found["rows"][0]["result"].snapshots if step > 0]
        curves[name] = {
            step: interval(
                [
                    float(
                        psnr(
                            dict(r["result"].snapshots)[step].clamp(0, 1), r["truth"]
                        ).mean()
                    )
                    for r in found["rows"]
                ],
                bounds=BOUNDS["PSNR"],
            )
            for step in steps
        }
    return curves
