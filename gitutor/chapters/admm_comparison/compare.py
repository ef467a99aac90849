"""Chapter 07's main comparison on many images (the DLG reproduction report, Fig. 1–2, Algorithm 2):
the report's four attacks and two diagnostics on every attacked image of a data kind, all images of a
kind at once (:func:`gitutor.attacks.batched_dlg.batched_dlg`, :mod:`gitutor.attacks.batched_ig`).

Per image, against the first FedADMM round (w = z, π = 0, E local steps): DLG and iDLG on the SGD
gradient ∇f(z); DLG-ADMM and iDLG-ADMM on −Δ/η (the report's attacks); DLG on −Δ/(2η), which for one
local step equals ∇f(z) (the closed form −Δ/η = 2∇f), free and with iDLG's label (the sign rule on
the increment); and cosine matching (Inverting Gradients, label from the sign rule on −Δ/η) on −Δ/η,
which is blind to the factor 2. Every attack of an image starts from the same dummy (one seed).
``increment_attacks`` runs the three attacks on the increment alone at other
(ρ, E), for the like-for-like ablation of more local steps, and ``adaptive_attacks`` the adaptive attack
(the E local steps unrolled) there; ``increment_criteria`` is what the server computes to pick one. ``scores`` and ``log_gaps`` summarise them
(95 % intervals: ``gap_intervals``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

from gitutor.attacks import AttackResult, adaptive_admm_inversion, fc_weight_index
from gitutor.attacks.batched_dlg import batched_dlg
from gitutor.attacks.batched_ig import batched_inverting_gradients
from gitutor.attacks.objectives import cosine_gradient_distance
from gitutor.federated import client_gradients
from gitutor.labels import idlg_label
from gitutor.metrics import mse, psnr
from gitutor.stats import Interval, interval
from gitutor.chapters.admm_comparison.judgement import ADAPTIVE, ON_INCREMENT
from gitutor.chapters.admm_comparison.rounds import first_round

#: The attacks of the comparison, in table order.
ATTACKS = (
    "DLG",
    "iDLG",
    "DLG-ADMM",
    "iDLG-ADMM",
    "DLG on −Δ/(2η)",
    "iDLG on −Δ/(2η)",
    "cosine on −Δ/η",
)
#: Floor of a clipped reconstruction's MSE before its log10 is taken (a pixel-exact image gives 0).
MSE_FLOOR = 1e-12


def _sent(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    rho: float,
    lr: float,
    local_steps: int,
) -> list[list[torch.Tensor]]:
    """−Δ/η of the first FedADMM round of one client per image (w = z, π = 0, E = ``local_steps``)."""
    return [
        list(
            first_round(
                model,
                images[i : i + 1],
                labels[i : i + 1],
                rho=rho,
                lr=lr,
                local_steps=local_steps,
            ).public["pseudo_gradient"]
        )
        for i in range(len(images))
    ]


def _sign(model: nn.Module, targets: Sequence[Sequence[torch.Tensor]]) -> torch.Tensor:
    """iDLG's sign rule on the last layer of every target: ``(len(targets),)`` int64 labels."""
    fc = fc_weight_index(model)
    return torch.tensor([idlg_label(t[fc]) for t in targets], dtype=torch.int64)


def _cosine(
    model: nn.Module,
    sent: Sequence[Sequence[torch.Tensor]],
    shape: tuple,
    *,
    seed: int,
    cosine_iterations: int,
    tv_weight: float,
) -> list[AttackResult]:
    """Cosine matching (Inverting Gradients) on every −Δ/η of ``sent``, label from the sign rule."""
    return batched_inverting_gradients(
        [model] * len(sent),
        sent,
        _sign(model, sent),
        shape,
        seeds=[seed] * len(sent),
        iterations=cosine_iterations,
        tv_weight=tv_weight,
        record_every=max(1, cosine_iterations // 4),
    )


def _check_batch(images: torch.Tensor, labels: torch.Tensor) -> int:
    n = len(images)
    if n < 1 or len(labels) != n:
        raise ValueError(
            f"images and labels must hold the same number ≥ 1 of items, got {n} and {len(labels)}"
        )
    return n


def compare_kind(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    rho: float,
    lr: float,
    local_steps: int,
    iterations: int,
    seed: int,
    record_every: int,
    cosine_iterations: int,
    tv_weight: float,
) -> list[dict[str, AttackResult]]:
    """Every attack of :data:`ATTACKS` on every image of ``images`` ``(n, C, H, W)`` (labels ``(n,)``), one
    client per image in the first FedADMM round of ``model`` (a DLG LeNet). The L-BFGS attacks run
    ``iterations`` steps, cosine matching ``cosine_iterations`` Adam steps with α_TV = ``tv_weight``.

    Returns:
        One ``{attack: AttackResult}`` per image, in the order of :data:`ATTACKS`.

    Raises:
        ValueError: for fewer than one image, or as the attacks (e.g. a model that is not a DLG LeNet).
    """
    n = _check_batch(images, labels)
    fc_weight_index(
        model
    )  # raises for a model that is not a DLG LeNet, before anything runs
    shape, classes = tuple(images.shape[1:]), model.fc.out_features
    grads = [
        client_gradients(model, images[i : i + 1], labels[i : i + 1]) for i in range(n)
    ]
    sent = _sent(model, images, labels, rho=rho, lr=lr, local_steps=local_steps)
    half = [[p / 2 for p in s] for s in sent]
    options = dict(iterations=iterations, record_every=record_every)
    free = batched_dlg(
        [model] * 3 * n,
        grads + sent + half,
        shape,
        classes,
        seeds=[seed] * 3 * n,
        **options,
    )
    fixed = batched_dlg(  # iDLG: the sign rule's label (the same on −Δ/η and −Δ/(2η))
        [model] * 3 * n,
        grads + sent + half,
        shape,
        classes,
        seeds=[seed] * 3 * n,
        labels=torch.cat([_sign(model, grads), _sign(model, sent), _sign(model, half)]),
        **options,
    )
    cosine = _cosine(
        model,
        sent,
        shape,
        seed=seed,
        cosine_iterations=cosine_iterations,
        tv_weight=tv_weight,
    )
    runs = [free[:n], fixed[:n], free[n : 2 * n], fixed[n : 2 * n], free[2 * n :]]
    runs += [fixed[2 * n :], cosine]
    return [
        {name: results[i] for name, results in zip(ATTACKS, runs)} for i in range(n)
    ]


def increment_attacks(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    settings: Sequence[tuple[float, int]],
    *,
    lr: float,
    iterations: int,
    seed: int,
    record_every: int,
    cosine_iterations: int,
    tv_weight: float,
) -> list[list[dict[str, AttackResult]]]:
    """The three round-1 attacks on the increment that :func:`compare_kind` runs at the chapter's E,
    :data:`ON_INCREMENT` (DLG and iDLG on −Δ/(2η), cosine matching on −Δ/η), at every ``(ρ, E)`` of ``settings``
    on the same images ``(n, C, H, W)`` (labels ``(n,)``), model, dummy seed and budgets: the like-for-like
    comparison of more local steps. All settings run in one stacked L-BFGS and one stacked Adam run.

    Returns:
        Per setting, one ``{attack: AttackResult}`` per image, attacks in the order of :data:`ON_INCREMENT`.

    Raises:
        ValueError: for fewer than one image or setting, or as the attacks.
    """
    n = _check_batch(images, labels)
    if not settings:
        raise ValueError("settings must hold at least one (rho, local_steps) pair")
    fc_weight_index(
        model
    )  # raises for a model that is not a DLG LeNet, before anything runs
    shape, classes = tuple(images.shape[1:]), model.fc.out_features
    sent = [
        s
        for rho, steps in settings
        for s in _sent(model, images, labels, rho=rho, lr=lr, local_steps=steps)
    ]
    half = [[p / 2 for p in s] for s in sent]
    options = {"iterations": iterations, "record_every": record_every}
    models, seeds = [model] * len(half), [seed] * len(half)
    dlg = batched_dlg(models, half, shape, classes, seeds=seeds, **options)
    labelled = batched_dlg(
        models, half, shape, classes, seeds=seeds, labels=_sign(model, half), **options
    )
    cosine = _cosine(
        model,
        sent,
        shape,
        seed=seed,
        cosine_iterations=cosine_iterations,
        tv_weight=tv_weight,
    )
    found = [dict(zip(ON_INCREMENT, runs)) for runs in zip(dlg, labelled, cosine)]
    return [found[k * n : (k + 1) * n] for k in range(len(settings))]


def _adaptive_start(
    model: nn.Module,
    state: Mapping,
    shape: tuple[int, ...],
    classes: int,
    seed: int,
    iterations: int,
    **round_,
) -> AttackResult:
    """One start of the adaptive attack on a round the server observed (``state``: its server view),
    ``info["seed"]`` set to ``seed``."""
    run = adaptive_admm_inversion(
        model,
        state["update"],
        shape,
        classes,
        global_params=state["global_params"],
        dual=state["dual"],
        iterations=iterations,
        seed=seed,
        **round_,
    )
    run.info["seed"] = seed
    return run


def adaptive_attacks(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    settings: Sequence[tuple[float, int]],
    *,
    lr: float,
    iterations: int,
    seeds: Sequence[int],
    record_every: int,
    accept_below: float | None = None,
    probe_iterations: int | None = None,
    progress: bool = False,
) -> list[list[dict[str, AttackResult]]]:
    """The adaptive attack (:func:`gitutor.attacks.adaptive_admm_inversion`; this book's addition, the
    report's §6 asks for an attack built for ADMM) on the first FedADMM round of every image of
    ``images`` ``(n, C, H, W)`` (labels ``(n,)``, one client each; w = z, π = 0) at every ``(ρ, E)`` of
    ``settings``: the client's E local steps simulated on the dummy and unrolled, ``iterations`` L-BFGS
    steps (give it no fewer than DLG's), dummy labels optimised. It restarts from every seed of
    ``seeds`` and keeps, per image, the restart with the lowest final matching loss
    ``info["final_loss"]`` (‖Δ'/η − Δ/η‖², the attack's own loss: a number the server computes, never
    the PSNR against the photograph); ties go to the earlier seed. With ``accept_below`` (> 0) an image
    takes no further start once one ends with a matching loss below it (the server's own early
    acceptance; None: every seed runs). With ``probe_iterations`` (≥ 1, below ``iterations``) the starts
    after the first are probed: when the first seed's run is not accepted, every further seed runs
    ``probe_iterations`` steps and only the one with the lowest matching loss after them runs the full
    budget (from its seed again: the same steps), so a start that stalls within a few steps (its loss
    stays far above that of a start on its way to the image) costs a few steps, not a full run (None: every seed runs the full
    budget). Each run costs about E times a DLG run. ``progress``: a tqdm bar over the
    images of each setting.

    Returns:
        Per setting, one ``{ADAPTIVE: AttackResult}`` per image (:data:`~gitutor.chapters.admm_comparison.
        judgement.ADAPTIVE`), the kept restart's ``info["seed"]`` set to its seed.

    Raises:
        ValueError: for fewer than one image, setting or seed, or as the attack (ρ or η not > 0, E < 1,
            ``iterations`` < 1, a model that does not fit the images).
        TypeError: for a seed that is not an int, or a ``probe_iterations`` that is not an int.
    """
    n = _check_batch(images, labels)
    if probe_iterations is not None:
        if isinstance(probe_iterations, bool) or not isinstance(probe_iterations, int):
            raise TypeError(
                f"probe_iterations must be an int or None, got {probe_iterations!r}"
            )
        if not 1 <= probe_iterations < iterations:
            raise ValueError(
                f"probe_iterations must be in [1, iterations = {iterations}), "
                f"got {probe_iterations}"
            )
    if accept_below is not None and not (
        isinstance(accept_below, float)
        and math.isfinite(accept_below)
        and accept_below > 0
    ):
        raise ValueError(
            f"accept_below must be a positive finite float or None, got {accept_below!r}"
        )
    if not settings:
        raise ValueError("settings must hold at least one (rho, local_steps) pair")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must hold at least one seed (one restart)")
    if any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
        raise TypeError(f"seeds must be ints, got {seeds!r}")
    shape, classes = (1, *images.shape[1:]), model.fc.out_features
    out = []
    for rho, steps in settings:
        found = []
        bar = tqdm(range(n), desc=f"adaptive, ρ={rho} E={steps}", disable=not progress)
        for i in bar:
            x, y = images[i : i + 1], labels[i : i + 1]
            view = first_round(model, x, y, rho=rho, lr=lr, local_steps=steps)
            start = functools.partial(
                _adaptive_start,
                model,
                view.server_view,
                shape,
                classes,
                rho=rho,
                lr=lr,
                local_steps=steps,
                record_every=record_every,
            )

            def accepted(run: AttackResult) -> bool:
                return (
                    accept_below is not None and run.info["final_loss"] < accept_below
                )

            best, rest = start(seeds[0], iterations), seeds[1:]
            if probe_iterations is not None and rest and not accepted(best):
                probes = [start(seed, probe_iterations) for seed in rest]
                rest = [
                    min(probes, key=lambda run: run.info["final_loss"]).info["seed"]
                ]
            for seed in rest:
                if accepted(best):
                    break
                run = start(seed, iterations)
                if run.info["final_loss"] < best.info["final_loss"]:
                    best = run
            found.append({ADAPTIVE: best})
        out.append(found)
    return out


def increment_criteria(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    runs: Sequence[Mapping[str, AttackResult]],
    *,
    rho: float,
    lr: float,
    local_steps: int,
    attacks: Sequence[str] = ON_INCREMENT,
) -> dict[str, list[float]]:
    """What the attacker can compute to choose between the attacks on the increment, per image: the cosine
    distance (Geiping et al. 2020, Eq. 4) between the increment the client would have sent for each
    attack's reconstruction (clipped to [0, 1], at the attack's own label) and the one it sent, as
    −Δ'/η and −Δ/η, for the attacks ``attacks`` (default :data:`ON_INCREMENT`) in ``runs`` (one
    ``{attack: AttackResult}`` per image of ``images`` ``(n, C, H, W)``, labels ``(n,)``). The server
    knows the round (w = z, π = 0, ``rho``, ``lr``, E = ``local_steps``), so it simulates the client's E
    local steps on the reconstruction (Algorithm 2 lines 12–19); with E = 1 the simulated −Δ'/η is
    2∇f at the reconstruction (the closed form), so the gradient stands for it there (the cosine is
    blind to the factor 2). −Δ/η is recomputed from the same round the attacks saw; the true image and
    label serve only to make the client's message, as the client does. The cosine scores every attack
    on one scale whatever it minimised — it is the cosine attack's own objective in round 1 with E = 1,
    so where both fit the increment the pick leans to that attack. The distance is summed in float64
    (the increments are float32), so that two reconstructions that both fit are not ordered by
    rounding; an exact tie goes to the first attack
    (:func:`~gitutor.chapters.admm_comparison.judgement.attackers_pick`).

    Returns:
        ``{attack: [distance per image]}`` in the order of ``attacks`` (0 = the same direction).

    Raises:
        ValueError: when ``runs`` does not hold one entry per image, an entry lacks an attack of
            ``attacks``, or ``attacks`` is empty.
    """
    n = _check_batch(images, labels)
    attacks = tuple(attacks)
    if not attacks:
        raise ValueError("attacks must name at least one attack of the runs")
    if len(runs) != n or any(set(attacks) - set(r) for r in runs):
        raise ValueError(
            f"runs must hold one {{attack: result}} per image with the attacks {attacks}, "
            f"got {len(runs)} for {n} images"
        )
    sent = _sent(model, images, labels, rho=rho, lr=lr, local_steps=local_steps)
    out = {name: [] for name in attacks}
    for target, results in zip(sent, runs):
        for name in attacks:
            found = results[name]
            candidate = found.images.clamp(0, 1).to(images.device)
            label = found.labels.to(images.device)
            if local_steps == 1:  # the closed form: −Δ'/η = 2∇f(candidate)
                mine = client_gradients(model, candidate, label)
            else:
                mine = _sent(
                    model, candidate, label, rho=rho, lr=lr, local_steps=local_steps
                )[0]
            wide = [d.double() for d in mine], [t.double() for t in target]
            out[name].append(float(cosine_gradient_distance(*wide)))
    return out


def scores(
    runs: Sequence[Mapping[str, AttackResult]], images: torch.Tensor
) -> dict[str, list[tuple[float, float]]]:
    """``{attack: [(MSE, PSNR dB) per image]}`` of the final images clipped to [0, 1] against ``images``."""
    out = {name: [] for name in runs[0]}
    for i, results in enumerate(runs):
        truth = images[i : i + 1].cpu()
        for name, result in results.items():
            found = result.images.clamp(0, 1)
            out[name].append((float(mse(found, truth)), float(psnr(found, truth))))
    return out


def log_gaps(
    table: Mapping[str, Sequence[tuple[float, float]]],
) -> dict[str, list[float]]:
    """Per image, log10(MSE of X-ADMM / MSE of X) for X = DLG and iDLG, and ``"both"``: the smaller of
    the two (ADMM resists DLG and iDLG only as far as both gaps are large). MSEs floored at
    :data:`MSE_FLOOR`."""
    log = lambda value: math.log10(max(value, MSE_FLOOR))  # noqa: E731
    gaps = {
        name: [
            log(a[0]) - log(b[0]) for a, b in zip(table[f"{name}-ADMM"], table[name])
        ]
        for name in ("DLG", "iDLG")
    }
    gaps["both"] = [min(a, b) for a, b in zip(gaps["DLG"], gaps["iDLG"])]
    return gaps


def gap_intervals(gaps: Mapping[str, Sequence[float]]) -> dict[str, Interval]:
    """Mean and 95 % Student-t interval of every list of :func:`log_gaps` (log10 units: a ratio interval)."""
    return {name: interval(values) for name, values in gaps.items()}
