"""Chapter 08's experiments: attacks on what a Flower server records, against Opacus DP-SGD.

Data and partitions: :mod:`.faces`.
"""

from __future__ import annotations

import math

import torch

from gitutor.attacks import inverting_gradients
from gitutor.attacks.objectives import cosine_gradient_distance
from gitutor.attacks.unrolled import check_schedule, rounds_distance, update_distance
from gitutor.chapters.flower_dp.faces import attacked_partitions, utility_partitions
from gitutor.checks import check_choice, check_flag, check_int, check_real, check_seed
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


def federation(model, data: dict, cfg, config: dict, *, client_seeds=None, on="test"):
    """``cfg.rounds`` Flower rounds of the attacked one-image clients and the utility clients from
    ``model`` with the training ``config``; returns ``(updates, history, outcomes)``: the server's
    recorded replies, its accuracy after every round, and whether each image of the ``on`` set
    (``"test"``: the server's test set; ``"train"``: the clients' training images) is classified right
    after the last (:func:`test_outcomes`).

    Raises:
        TypeError, ValueError: naming ``on`` (not "test" or "train"), ``cfg.attacked_clients`` or
            ``cfg.utility_clients`` (:func:`check_clients`), before the federation runs; as
            :func:`~gitutor.federated.flower.federated_round`.
    """
    check_choice(on, "on", ("test", "train"))
    check_clients(cfg)
    attacked = attacked_partitions(data, cfg.attacked_clients, 1)
    partitions = attacked + utility_partitions(
        data, cfg.utility_clients, cfg.attacked_clients
    )
    final = {}

    def evaluate(m):
        final["outcomes"] = test_outcomes(m, data[f"{on}_x"], data[f"{on}_y"])
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
    """Outcomes on the clients' training images (``data["train_x"]``) after ``cfg.rounds`` undefended
    FedSGD rounds (η = ``cfg.lr``, weighted by examples) from ``model`` (:func:`federation`): how well a
    candidate network learns the chapter's task, measured without the server's test set, which the
    page's accuracies and Learning To Invert's auxiliary set use."""
    return federation(model, data, cfg, {"lr": cfg.lr}, on="train")[2]


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
    iterations: int,
    tv_weight: float,
    seed: int,
    epochs: int = 1,
    batch_size: int | None = None,
    unroll: bool = True,
    record_every: int = 50,
    progress: bool = False,
    noise_std: float = 0.0,
) -> dict:
    """Inverting Gradients on one client's FedAvg update Δ; one client's row of :func:`attack_gradient`.

    The client ran K = E·⌈N/b⌉ SGD steps (η = ``lr``, E = ``epochs``, b = ``batch_size``, None: its N
    images in one batch), the schedule the server configured. ``unroll=True`` (the server's attack): the
    candidate's own K steps are simulated and their update matched to Δ
    (:func:`~gitutor.attacks.unrolled.update_distance`; Geiping et al. 2020, §5); for K = 1 this is the
    cosine to −Δ/η, which is what runs. ``unroll=False`` reads Δ as one gradient −Δ/(η·K) — exact only
    for K = 1: the contrast that shows what unrolling buys. The row's ``gradient`` is −Δ/(η·K) either
    way (the label is read off its bias, and Learning To Invert takes it as input).

    ``noise_std`` > 0 first adds chapter 01's hand-written defense, N(0, noise_std²) on every
    entry of the gradient (no clipping), as if the client had sent that instead (FedSGD only: K = 1).

    Raises:
        TypeError, ValueError: naming ``noise_std`` (a finite number ≥ 0; > 0 needs K = 1), ``lr``,
            ``epochs``, ``batch_size``, ``unroll`` or ``update``
            (:func:`~gitutor.federated.flower.update_as_gradient`), before the attack runs.
    """
    noise_std = check_real(noise_std, "noise_std", low=0.0)
    unroll = check_flag(unroll, "unroll")
    count = len(truth)
    lr, epochs, batch_size = check_schedule(lr, epochs, batch_size or count, count)
    steps = epochs * math.ceil(count / batch_size)
    if noise_std and steps > 1:
        raise ValueError(
            f"noise_std is chapter 01's defense on one gradient (K = 1); this client ran K = {steps} steps"
        )
    gradient = update_as_gradient(update, lr, steps)
    if noise_std:
        gradient = add_gaussian_noise(
            gradient, noise_std, torch.Generator().manual_seed(seed)
        )
    objective = None
    if unroll and steps > 1:
        observed = [d.detach() for d in update]

        def objective(images, used):
            return update_distance(
                model,
                observed,
                images,
                used,
                lr=lr,
                epochs=epochs,
                batch_size=batch_size,
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
        objective=objective,
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
    objective=None,
    start: torch.Tensor | None = None,
    lr: float = 0.1,
) -> dict:
    """Inverting Gradients from the start drawn with ``seed`` (or from ``start``, ``(B, C, H, W)`` in
    [0, 1]: the sanity arm), signed Adam at step ``lr`` (Geiping et al. 2020's 0.1); one client's scores,
    label and reconstruction. B = 1: the label is read off
    the bias of ``gradient`` (:func:`bias_label`); B > 1: the labels are given.

    ``objective(images, labels) -> scalar``: the matching term (default: the cosine gradient distance to
    ``gradient``, Geiping et al. 2020, Eq. 4), e.g. the unrolled update's (:func:`attack`) or every round's
    (:func:`attack_rounds`). The row keeps ``gradient``, the ``used`` labels, the ``objective`` and
    ``matching``: the objective at the reconstruction (what the attacker can compute; no truth in it),
    its step budget ``iterations`` and its prior weight ``tv_weight`` (what a restart or a longer run of
    the row repeats)."""
    label = bias_label(gradient)
    used = torch.tensor([label]) if len(labels) == 1 else labels  # B > 1: labels known
    if objective is None:

        def objective(images, used_labels):
            return cosine_gradient_distance(
                client_gradients(model, images, used_labels, create_graph=True),
                gradient,
            )

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
        matching_distance=lambda images: objective(images, used),
        start=start,
        lr=lr,
    )
    images = result.images.clamp(0, 1)
    matching = float(objective(images, used).detach())
    return score_row(images, truth) | {
        "label_ok": len(labels) > 1 or label == int(labels[0]),
        "result": result,
        "gradient": gradient,
        "used": used,
        "objective": objective,
        "matching": matching,
        "iterations": iterations,
        "tv_weight": tv_weight,
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
    unroll: bool = True,
) -> dict:
    """One Flower round with ``clients`` clients of ``batch`` images, then the attack on each.

    FedSGD: ``epochs = 1`` and one batch; FedAvg: ``epochs`` passes in mini-batches of
    ``batch_size``. The server attacks with the schedule it configured (:func:`attack`: ``unroll``
    simulates the clients' steps; False reads each update as one gradient), for ``cfg.attack_iterations``
    steps on one image and ``cfg.batch_iterations`` on a batch (a batch flattens later). Returns the
    per-client rows and PSNR/SSIM intervals (:func:`summarise`) and the recorded ``updates``.

    Raises:
        TypeError: naming ``clients``, ``batch``, ``epochs``, ``batch_size`` or ``seed`` when not an int,
            ``noise_std`` when not a real number, ``unroll`` when not a bool.
        ValueError: naming them when out of range (``clients``, ``batch``, ``epochs`` ≥ 1; ``batch_size``
            in [1, batch]; ``noise_std`` a finite number ≥ 0, > 0 only for one step), before the
            federation runs.
    """
    for name, value in (("clients", clients), ("batch", batch), ("epochs", epochs)):
        check_int(value, name)
    if batch_size is not None:
        check_int(batch_size, "batch_size", high=batch)
    check_seed(seed)
    check_flag(unroll, "unroll")
    if check_real(noise_std, "noise_std", low=0.0) and (
        epochs > 1 or (batch_size or batch) < batch
    ):
        raise ValueError("noise_std is chapter 01's defense on one gradient (FedSGD)")
    partitions = attacked_partitions(data, clients, batch)
    config = {"lr": cfg.lr, "local-epochs": epochs, "batch-size": batch_size or 0}
    updates, _ = federated_round(model, partitions, config, engine=cfg.engine)
    start = [p.detach() for p in model.parameters()]
    summary = attack_deltas(
        model,
        {u.partition: u.update(start) for u in updates},
        partitions,
        cfg,
        lr=cfg.lr,
        epochs=epochs,
        batch_size=batch_size,
        unroll=unroll,
        seed=seed,
        noise_std=noise_std,
        iterations=cfg.batch_iterations if batch > 1 else cfg.attack_iterations,
    )
    return summary | {"updates": updates}


def attack_deltas(
    model,
    deltas: dict,
    partitions: list,
    cfg,
    *,
    lr: float,
    epochs: int = 1,
    batch_size: int | None = None,
    unroll: bool = True,
    seed: int = 0,
    noise_std: float = 0.0,
    iterations: int | None = None,
) -> dict:
    """:func:`attack` on ``deltas`` (partition → Δ, one tensor per parameter, taken at ``model``'s
    parameters) with the clients' schedule (η = ``lr``, ``epochs``, ``batch_size``), ``iterations`` steps
    (None: ``cfg.attack_iterations``); the summary of :func:`summarise`, one row per partition, seed
    ``seed + partition``."""
    rows = []
    for partition in sorted(deltas):
        truth, labels = partitions[partition]
        row = attack(
            model,
            deltas[partition],
            truth,
            labels,
            lr=lr,
            epochs=epochs,
            batch_size=batch_size,
            unroll=unroll,
            iterations=cfg.attack_iterations if iterations is None else iterations,
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


def held_rounds(updates, starts, clients: int) -> dict:
    """What the server holds of each of the first ``clients`` partitions over the rounds: partition →
    ``[(w_0 of round r, Δ of round r), …]`` in round order, each update against its own round's global
    parameters (``starts[r − 1]``), the input of :func:`attack_rounds`.

    Args:
        updates: the recorded replies (``.round``, ``.partition``, ``.update(start)``) of every round.
        starts: per round, the global parameters the clients trained from.
        clients: how many partitions (0 … clients − 1) the server attacks.

    Raises:
        ValueError: naming ``updates`` when a partition has no recorded reply, or ``starts`` when it
            lacks a round of the replies.
    """
    check_int(clients, "clients")
    held = {}
    for k in range(clients):
        mine = sorted((u for u in updates if u.partition == k), key=lambda u: u.round)
        if not mine:
            raise ValueError(f"updates hold no reply of partition {k}")
        if mine[-1].round > len(starts):
            raise ValueError(
                f"starts holds {len(starts)} rounds, the replies reach round {mine[-1].round}"
            )
        held[k] = [(starts[u.round - 1], u.update(starts[u.round - 1])) for u in mine]
    return held


def attack_rounds(
    model,
    held: dict,
    partitions: list,
    cfg,
    *,
    lr: float,
    seed: int = 0,
    iterations: int | None = None,
    tv_weight: float | None = None,
) -> dict:
    """The adversary that watches every round: per client, one candidate whose simulated one-step update
    at each round's own global model matches that round's recorded update, jointly
    (:func:`~gitutor.attacks.unrolled.rounds_distance`, the mean cosine distance over the R rounds).
    The clients' data do not change between rounds, so the noise of R independent rounds averages out
    in the objective while each round keeps its own model. The label is read off the bias of the mean of
    the rounds' −Δ/η (the row's ``gradient``).

    Args:
        held: partition → its rounds (:func:`held_rounds`).
        partitions: ``[(images, labels), …]`` of the attacked clients (partition k = index k).
        lr: η of the clients' one full-batch step per round.
        iterations: IG steps (None: ``cfg.attack_iterations``; a batch: ``cfg.batch_iterations``).
        tv_weight: λ_TV (None: ``cfg.tv_weight``; under noise the server's own choice,
            :func:`~gitutor.chapters.flower_dp.strongest.tuned_tv_weight`).

    Raises:
        TypeError / ValueError: naming ``lr`` (a finite number > 0), ``tv_weight`` (a finite number ≥ 0),
            or ``held`` when it names a partition ``partitions`` does not hold, before any attack runs.
    """
    check_real(lr, "lr", low=0.0, low_open=True)
    tv_weight = (
        cfg.tv_weight
        if tv_weight is None
        else check_real(tv_weight, "tv_weight", low=0.0)
    )
    if any(k >= len(partitions) for k in held):
        raise ValueError(
            f"held names partitions {sorted(held)}; partitions holds {len(partitions)}"
        )
    rows = []
    for k, rounds in sorted(held.items()):
        truth, labels = partitions[k]
        count = len(truth)

        def objective(images, used, rounds=rounds, count=count):
            return rounds_distance(
                model, rounds, images, used, lr=lr, epochs=1, batch_size=count
            )

        mean = [
            sum(parts) / len(rounds)
            for parts in zip(*(update_as_gradient(d, lr) for _, d in rounds))
        ]
        row = attack_gradient(
            model,
            mean,
            truth,
            labels,
            iterations=cfg.attack_iterations if iterations is None else iterations,
            tv_weight=tv_weight,
            seed=seed + k,
            record_every=cfg.record_every,
            progress=cfg.progress,
            objective=objective,
        )
        rows.append(row | {"partition": k, "truth": truth, "truth_labels": labels})
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

    Returns the attack summary on the attacked clients' round-1 updates, what the server holds of each
    over all rounds for the joint attack (``"held"``, :func:`held_rounds`; the attack itself runs with
    the strongest adversary, :func:`~gitutor.chapters.flower_dp.strongest.dp_sgd_strongest`), the server's
    test accuracy after the last round with its interval (``"accuracy_interval"``; per test image:
    ``"outcomes"``), and ε from
    Opacus' accountant for the steps each client took (example-level, every round, add/remove), and
    ``"client_epsilon"``: the same noise's ε for the largest client (``"client_examples"`` images) as a
    whole — group privacy of the full-batch Gaussian mechanism: k examples move the clipped sum by at most
    kC, noise multiplier σ/k.
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
    if rate != 1.0:
        raise ValueError(
            f"the sweep's clients sample at q = 1 (full batch), got q = {rate}"
        )
    largest = max(int(u.metrics["num-examples"]) for u in updates)
    whole = epsilon(sigma / largest, rate, steps, cfg.delta, accountant=cfg.accountant)
    start = [p.detach() for p in model.parameters()]
    first = {
        u.partition: u.update(start)
        for u in updates
        if u.round == 1 and u.partition < len(attacked)
    }
    summary = attack_deltas(model, first, attacked, cfg, lr=cfg.lr, seed=seed)
    held = held_rounds(updates, fedavg_starts(model, updates), len(attacked))
    return summary | {
        "sigma": float(sigma),
        "epsilon": eps,
        "client_epsilon": whole,
        "client_examples": largest,
        "steps": steps,
        "held": held,
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
