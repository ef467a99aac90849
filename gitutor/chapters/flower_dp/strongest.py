"""Chapter 08's strongest adversary per defense: Inverting Gradients with restarts, every round matched at
its own model, and Learning To Invert trained through the same defense; their envelope per client.

- Restarts (Geiping et al. 2020, §4: "the best of several trials"): R independent starts on the same
  objective, keeping per client the one whose reconstruction has the lowest objective (matching + λ_TV
  · TV) — what the attacker can compute, never its PSNR against the truth.
- Every round (:func:`~gitutor.chapters.flower_dp.experiments.attack_rounds`): one candidate matched to
  all R updates the server recorded of a client (under SecAgg+: all R aggregates of the same group),
  each at its own round's global model; under noise at the λ_TV the server chose for that noise on its
  own images sent through the same defense (:func:`tuned_tv_weight`).
- Learning To Invert (Wu et al. 2022, §3.2): g_θ trained on the server's own auxiliary images, their
  gradients at the attacked model passed through the defense the clients run (clipping and noise in
  the units the server reads, −Δ/η), then one forward pass per observed update.
- The envelope: per client, the candidate with the lowest objective on everything the server holds of
  that client (``"attacker"``): the every-round attack's matching term (the mean cosine distance
  between the candidate's simulated update and each recorded round's noisy update, at that round's
  model; the noise of R rounds averages out of the criterion as out of the objective) plus its λ_TV ·
  TV, where the server holds every round; round 1's objective otherwise. And the oracle upper bound
  that picks the highest PSNR (``"oracle"``: needs the truth, which no attacker has).

They run for every defense of the decision table (:func:`strongest_by_defense`) and along the DP-SGD
σ sweep (:func:`sweep_strongest`), where one σ's run is :func:`dp_sgd_strongest`. Where an attack stops,
two checks say what stops it: :func:`sanity_arm` (the same attack from the photograph, and the matching
term at the photograph beside the run's) and :func:`identification_ranks` (whether the matching term
still singles out the photograph among others the server holds).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import torch

from gitutor.attacks.lti import (
    InversionMLP,
    make_gradient_dataset,
    reconstruct,
    train_inversion_model,
)
from gitutor.attacks.objectives import total_variation
from gitutor.attacks.unrolled import simulated_update
from gitutor.chapters.flower_dp.experiments import (
    attack_gradient,
    attack_rounds,
    score_row,
    summarise,
)
from gitutor.checks import check_int, check_real, check_seed
from gitutor.controls import RECOGNISABLE_PSNR
from gitutor.federated.client import gradient_dimension
from gitutor.federated.flower_defenses import clip_update
from gitutor.metrics import match_batch, psnr
from gitutor.stats import BOUNDS, interval

#: Seeds of restart r ≥ 1 are ``seed + partition + RESTART_STRIDE · r`` (restart 0: the chapter's run).
RESTART_STRIDE = 1000
#: The server's noise draws on its own images (:func:`tuned_tv_weight`) come from ``TUNING_SEED + seed``.
TUNING_SEED = 7919


def restarted(model, summary: dict, cfg, *, seed: int = 0) -> dict:
    """Inverting Gradients with ``cfg.restarts`` starts per client: restart 0 is ``summary``'s run
    (from :func:`~gitutor.chapters.flower_dp.experiments.attack_deltas`, seed ``seed + partition``),
    the others start from independent seeds on the same objective, budget and prior weight (the row's
    ``objective``, ``iterations`` and ``tv_weight``); per client the start whose reconstruction has the
    lowest whole objective (matching + λ_TV · TV: what every start minimised) is kept. Returns
    :func:`summarise` of the kept rows; each carries ``"starts"``, the rows of all its starts, so that
    :func:`envelope` ranks every start by its own criterion, not only the one kept here.

    A departure from the authors' code: inversefed's ``_score_trial`` (``scoring_choice="loss"``, its
    default, which :func:`~gitutor.attacks.inverting_gradients.inverting_gradients` follows) ranks
    restarts by the matching term alone. Under noise a start fitted to one round's noise matches about as
    well as a smooth one; λ_TV · TV, which the server computes too, tells them apart.

    Raises:
        ValueError: for ``cfg.restarts`` < 1.
    """
    if (
        isinstance(cfg.restarts, bool)
        or not isinstance(cfg.restarts, int)
        or cfg.restarts < 1
    ):
        raise ValueError(f"cfg.restarts must be an int ≥ 1, got {cfg.restarts!r}")
    rows = []
    for row in summary["rows"]:
        tries = [row] + [
            _rerun(
                model,
                row,
                seed=seed + row["partition"] + RESTART_STRIDE * r,
                record_every=cfg.record_every,
            )
            for r in range(1, cfg.restarts)
        ]
        rows.append(min(tries, key=_start_objective) | {"starts": tries})
    return summarise(rows)


def _rerun(model, row: dict, *, seed: int, **changes) -> dict:
    """``row``'s attack (its gradient, labels, objective, ``iterations`` and ``tv_weight``) run again from
    the start drawn with ``seed``, with ``changes`` to
    :func:`~gitutor.chapters.flower_dp.experiments.attack_gradient`'s options (another ``objective``,
    ``iterations``, ``start``, ``lr``, ``record_every``); the new row keeps ``row``'s client fields."""
    options = {
        "iterations": row["iterations"],
        "tv_weight": row["tv_weight"],
        "objective": row["objective"],
    }
    found = attack_gradient(
        model,
        row["gradient"],
        row["truth"],
        row["truth_labels"],
        seed=seed,
        **(options | changes),
    )
    return found | {k: row[k] for k in ("partition", "truth", "truth_labels")}


def _start_objective(row: dict) -> float:
    """What a start minimised, at its end: its ``matching`` (computed at the attack's own image order, before
    the images were matched to the photographs for scoring) + its λ_TV · TV (which no order changes)."""
    return row["matching"] + row["tv_weight"] * float(total_variation(row["images"]))


def longer_attack(model, summary: dict, cfg, *, factor: int = 2, seed: int = 0) -> dict:
    """The one-start IG of ``summary`` rerun with ``factor`` × its rows' ``iterations`` steps from the
    same starts (seed ``seed + partition``) on the same gradients and prior weight: the budget check. Within one run the
    step size falls at 3/8, 5/8 and 7/8 of the steps (Geiping et al. 2020), so a flat end of the run's
    curve is partly that schedule; a run with more steps tests the budget itself. Returns
    :func:`summarise` of the rows.

    Raises:
        ValueError: for a ``factor`` that is not an int ≥ 2.
    """
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 2:
        raise ValueError(f"factor must be an int ≥ 2, got {factor!r}")
    rows = [
        _rerun(
            model,
            row,
            seed=seed + row["partition"],
            record_every=cfg.record_every,
            iterations=factor * row["iterations"],
        )
        for row in summary["rows"]
    ]
    return summarise(rows)


def _no_matching(images: torch.Tensor, used: torch.Tensor) -> torch.Tensor:
    """A matching term that is 0 everywhere (its gradient too): the attack then follows its prior alone."""
    return images.sum() * 0.0


def prior_alone(model, summary: dict, cfg, *, seed: int = 0) -> dict:
    """The control for an attack ``summary`` (one row per client): the same attack — start (seed ``seed +
    partition``, as :func:`~gitutor.chapters.flower_dp.experiments.attack_rounds` draws it), steps and
    λ_TV — with its matching term replaced by 0, so that every signed step follows λ_TV · TV alone
    (Geiping et al. 2020, Eq. 4, without its first term). It says how much of an attack's PSNR its prior
    gives whatever the updates hold: under heavy noise, at a large λ_TV, the two can coincide. Returns
    :func:`summarise` of the rows."""
    rows = [
        _rerun(
            model,
            row,
            seed=seed + row["partition"],
            record_every=cfg.record_every,
            objective=_no_matching,
        )
        for row in summary["rows"]
    ]
    return summarise(rows)


def psnr_curve(summary: dict) -> dict:
    """PSNR (dB; interval over the rows) of each row's kept run at every recorded step:
    ``{step: Interval}``, for :func:`~gitutor.chapters.flower_dp.report.flat_step`.

    Raises:
        ValueError: naming ``summary`` when it holds no rows.
    """
    if not summary.get("rows"):
        raise ValueError(
            "summary must hold at least one client's row (summarise of an attack)"
        )
    steps = [s for s, _ in summary["rows"][0]["result"].snapshots if s > 0]
    return {
        s: interval(
            [
                float(
                    psnr(
                        match_batch(
                            dict(r["result"].snapshots)[s].clamp(0, 1), r["truth"]
                        ),
                        r["truth"],
                    ).mean()
                )
                for r in summary["rows"]
            ],
            bounds=BOUNDS["PSNR"],
        )
        for s in steps
    }


def defense_transform(clip: float | None, noise_std: float, generator: torch.Generator):
    """The defense as the server reads it, on one gradient list (units of −Δ/η): clip the whole
    list to L2 norm ``clip`` (None: no clipping; Flower's :func:`clip_update`), then add
    N(0, noise_std²) to every entry from ``generator``.

    Raises:
        TypeError: naming ``clip`` or ``noise_std`` when not a real number (``"0.1"``, ``True``), or
            ``generator`` when not a ``torch.Generator``.
        ValueError: naming ``clip`` (NaN, infinite or ≤ 0) or ``noise_std`` (NaN, infinite or < 0), when
            the transform is made, before any gradient passes it.
    """
    if clip is not None:
        clip = check_real(clip, "clip", low=0.0, low_open=True)
    noise_std = check_real(noise_std, "noise_std", low=0.0)
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator, got {type(generator).__name__}"
        )

    def apply(grads):
        out = list(grads) if clip is None else clip_update(grads, clip)
        if noise_std:
            out = [
                g + noise_std * torch.randn(g.shape, generator=generator) for g in out
            ]
        return out

    return apply


def train_lti(
    model,
    aux: tuple[torch.Tensor, torch.Tensor],
    batch: int,
    cfg,
    *,
    clip: float | None = None,
    noise_std: float = 0.0,
    seed: int = 0,
) -> InversionMLP:
    """Learning To Invert's g_θ for batches of ``batch`` images (hidden ``cfg.lti_hidden``,
    ``cfg.lti_epochs`` epochs, Adam ``cfg.lti_lr``, standardised input), trained on the auxiliary
    ``aux = (images (N, 1, H, W), labels (N,))`` whose gradients at ``model`` pass through
    :func:`defense_transform` — ``cfg.lti_copies`` noise draws per image under noise; batches of B
    random distinct images.

    Raises:
        TypeError: naming ``batch`` or ``seed`` when not an int, or as :func:`defense_transform`.
        ValueError: for ``batch`` < 1, an auxiliary set smaller than 2·B, as :func:`defense_transform`
            (``clip``, ``noise_std``), or from :func:`train_inversion_model`.
    """
    check_int(batch, "batch")
    check_seed(seed)
    defense_transform(
        clip, noise_std, torch.Generator()
    )  # its arguments, before any training
    images, labels = aux
    if len(images) < 2 * batch:
        raise ValueError(
            f"aux holds {len(images)} images; learned inversion needs at least {2 * batch}"
        )
    defense = defense_transform(clip, noise_std, torch.Generator().manual_seed(seed))
    copies = cfg.lti_copies if noise_std else 1
    repeated = (images.repeat(copies, 1, 1, 1), labels.repeat(copies))
    count = (len(repeated[1]) // batch) * (1 if batch == 1 else cfg.lti_copies)
    features, targets = make_gradient_dataset(
        model,
        *repeated,
        defense,
        batch,
        num_batches=None if batch == 1 else count,
        seed=seed,
    )
    g = InversionMLP(
        gradient_dimension(model),
        tuple(images.shape[1:]),
        batch,
        hidden=cfg.lti_hidden,
        seed=seed,
    )
    train_inversion_model(
        g,
        features,
        targets,
        epochs=cfg.lti_epochs,
        lr=cfg.lti_lr,
        batch_size=32,
        seed=seed,
        progress=False,
        standardise=True,
    )
    return g


def learned_inversion(model, summary: dict, g: InversionMLP) -> dict:
    """Learning To Invert (:func:`train_lti`'s ``g``) on the gradients of ``summary``'s rows (their own
    ``gradient``). Each row's ``matching``: its row's ``objective`` at the output, the lowest over the
    orders of its used labels (g_θ returns no labels). Returns :func:`summarise` of the rows."""
    observed = torch.stack(
        [torch.cat([t.flatten() for t in r["gradient"]]) for r in summary["rows"]]
    )
    found = reconstruct(g, observed.float()).images
    rows = []
    for row, images in zip(summary["rows"], found):
        matching = _lowest_over_orders(row["objective"], images, row["used"])
        rows.append(
            score_row(images, row["truth"])
            | {
                "matching": matching,
                "label_ok": row["label_ok"],
                "gradient": row["gradient"],
                "used": row["used"],
                "objective": row["objective"],
                **{k: row[k] for k in ("partition", "truth", "truth_labels")},
            }
        )
    return summarise(rows)


def _lowest_over_orders(objective, images: torch.Tensor, labels: torch.Tensor) -> float:
    """``objective(images, order)`` at its lowest over the distinct orders of ``labels``."""
    orders = set(itertools.permutations(labels.tolist()))
    return min(float(objective(images, torch.tensor(o)).detach()) for o in orders)


def envelope(candidates: dict[str, dict | None], reference: dict) -> dict:
    """Per client, the best of ``candidates`` (name → summary, rows aligned by client; None: not
    run): ``"attacker"`` keeps the lowest ``"criterion"`` — the whole objective of ``reference``'s row
    at the candidate's reconstruction, its matching term (``objective``, at the reference's labels
    ``used``: a candidate's own round-1 label may differ) + its λ_TV · TV (Geiping et al. 2020, Eq. 4),
    what the attacker minimised and can compute from what it holds (the module docstring says which)
    — and ``"oracle"`` the highest PSNR (an upper bound: it needs the truth).
    The prior term is the reference's own: under noise a candidate fitted to one round's noise can
    match the rounds' updates about as well as a smooth one, and the λ_TV the server chose for that
    noise on its own images (:func:`tuned_tv_weight`) is what tells them apart. Each kept row carries
    its ``"matching"`` (the reference's matching term) and ``"criterion"``. A candidate row holding
    ``"starts"`` (:func:`restarted`) enters with each of its starts, the lowest criterion among them kept
    under the candidate's name. Returns both summaries and
    ``"wins"``: how often each candidate was kept. A row's images are stored in the truth's order (for
    scoring), so for a client of several images the matching term is the lowest over the orders of the
    reference's labels, which the attacker can compute without the truth (as
    :func:`learned_inversion` does); TV does not depend on the order.

    Raises:
        ValueError: naming ``reference`` when it holds no rows, ``candidates`` when none was run, or the
            candidate whose rows are not one per client of ``reference``.
    """
    run = {name: s for name, s in candidates.items() if s is not None}
    if not reference.get("rows") or not run:
        raise ValueError(
            "reference must hold one row per client and candidates at least one run summary"
        )
    for name, found in run.items():
        if len(found["rows"]) != len(reference["rows"]):
            raise ValueError(
                f"candidates[{name!r}] holds {len(found['rows'])} rows, reference "
                f"{len(reference['rows'])}: one per client each"
            )
    attacker, oracle, wins = [], [], dict.fromkeys(run, 0)
    for i, ref in enumerate(reference["rows"]):
        tries, every = {}, []
        for name, s in run.items():
            scored = []
            for row in s["rows"][i].get("starts", [s["rows"][i]]):
                matching = (
                    row["matching"]
                    if row["objective"] is ref["objective"]
                    else _lowest_over_orders(
                        ref["objective"], row["images"], ref["used"]
                    )
                )
                prior = ref["tv_weight"] * float(total_variation(row["images"]))
                scored.append(
                    row | {"matching": matching, "criterion": matching + prior}
                )
            tries[name] = min(scored, key=lambda r: r["criterion"])
            every += scored
        chosen = min(tries, key=lambda n: tries[n]["criterion"])
        wins[chosen] += 1
        attacker.append(tries[chosen])
        oracle.append(max(every, key=lambda r: r["psnr"]))
    return {"attacker": summarise(attacker), "oracle": summarise(oracle), "wins": wins}


def adversaries(
    model, summary: dict, rounds: dict | None, g: InversionMLP, cfg, *, seed: int = 0
) -> dict:
    """The adversaries on what the server holds of each client and their envelope: ``summary`` (the
    one-start IG on round 1's update, :func:`~gitutor.chapters.flower_dp.experiments.attack_deltas`),
    :func:`restarted` on the same objective, ``rounds`` (IG on every round at its own model,
    :func:`~gitutor.chapters.flower_dp.experiments.attack_rounds`; None where the server holds no
    client's every round) and :func:`learned_inversion` with ``g``. The envelope ranks by ``rounds``'
    whole objective (matching + its λ_TV · TV) where it was run, else by round 1's. The one-start run
    is restart 0, so it never changes the attacker's pick over the restarts (ties go to the restarts);
    the oracle's it can.
    Returns ``{"single", "restarts", "rounds", "lti", "curve"`` (:func:`psnr_curve` of the every-round
    attack where run, else of the restarts), ``"attacker", "oracle", "wins"}`` (:func:`envelope`)."""
    found = {
        "single": summary,
        "restarts": restarted(model, summary, cfg, seed=seed),
        "rounds": rounds,
        "lti": learned_inversion(model, summary, g),
    }
    candidates = {
        "IG, restarts": found["restarts"],
        "IG, one start": summary,
        "IG, every round": rounds,
        "LTI": found["lti"],
    }
    return (
        found
        | {"curve": psnr_curve(found["restarts"] if rounds is None else rounds)}
        | envelope(candidates, summary if rounds is None else rounds)
    )


def dp_sgd_strongest(model, data: dict, point: dict, cfg, *, seed: int = 0) -> dict:
    """:func:`adversaries` at one σ of the DP-SGD sweep (``point``:
    :func:`~gitutor.chapters.flower_dp.experiments.dp_point`), LTI trained through that σ's DP-SGD
    step as the server reads it (−Δ/η of one full-batch step, q = 1): the example's gradient clipped
    to C = ``cfg.max_grad_norm`` plus N(0, (σ·C)²) per entry (Abadi et al. 2016, Alg. 1, for a client
    of one example), on the server's test set (``data["test_x"]``, ``data["test_y"]``).

    Raises:
        ValueError: for a point whose clients hold more than one image (DP-SGD clips each example,
            this transform the whole gradient: the same only for one).
    """
    batch = len(point["rows"][0]["truth"])
    if batch != 1:
        raise ValueError(
            f"point: DP-SGD's transform here is for one-image clients, got {batch} images"
        )
    clip = cfg.max_grad_norm
    return through_noise(
        model,
        data,
        point,
        cfg,
        clip=clip,
        noise_std=point["sigma"] * clip,
        lr=cfg.lr,
        seed=seed,
    )


def local_dp_strongest(model, data: dict, point: dict, cfg, *, seed: int = 0) -> dict:
    """:func:`adversaries` at one z of the LocalDpMod sweep (``point``:
    :func:`~gitutor.chapters.flower_dp.defenses.local_dp_point`), LTI trained through LocalDpMod as the
    server reads it (−Δ/η at η = ``cfg.defense_lr``): the update clipped to C = ``cfg.local_clip``, plus
    the mod's noise, std σ per parameter (the run's ``view.sigma``), both divided by η; on the server's
    test set."""
    eta, view = cfg.defense_lr, point["run"]["view"]
    return through_noise(
        model,
        data,
        point,
        cfg,
        clip=cfg.local_clip / eta,
        noise_std=view.sigma / eta,
        lr=eta,
        seed=seed,
    )


def through_noise(
    model,
    data: dict,
    point: dict,
    cfg,
    *,
    clip: float,
    noise_std: float,
    lr: float,
    seed: int,
) -> dict:
    """:func:`adversaries` on a sweep point whose noise is the client's: LTI trained on the server's
    test set through the defense as the server reads it (clip ``clip``, noise ``noise_std``, units of
    −Δ/η; :func:`train_lti`) and the every-round attack at the clients' η = ``lr`` (:func:`every_round`)
    with the prior weight the server chose for this noise on its own images (:func:`tuned_tv_weight`,
    returned as ``"tuning"``), and that attack's control with its matching term removed
    (:func:`prior_alone`, ``"prior"``)."""
    g = train_lti(
        model,
        (data["test_x"], data["test_y"]),
        len(point["rows"][0]["truth"]),
        cfg,
        clip=clip,
        noise_std=noise_std,
        seed=seed,
    )
    tuning = tuned_tv_weight(
        model, data, point, cfg, clip=clip, noise_std=noise_std, lr=lr, seed=seed
    )
    rounds = every_round(model, point, cfg, lr, seed, tv_weight=tuning["tv_weight"])
    return adversaries(model, point, rounds, g, cfg, seed=seed) | {
        "tuning": tuning,
        "prior": prior_alone(model, rounds, cfg, seed=seed),
    }


def tuning_images(data: dict, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``count`` images of the server's test set, taken from its classes in turn (label 0,
    label 1, label 0, …): ``(images (count, 1, H, W), labels (count,))``.

    Raises:
        ValueError: naming ``count`` when it is < 1 or more than the test set holds of a class in turn.
    """
    count = check_int(count, "count")
    labels = data["test_y"]
    by_class = [torch.nonzero(labels == c).flatten() for c in labels.unique()]
    if count < 1 or count > len(by_class) * min(len(i) for i in by_class):
        raise ValueError(
            f"count must be ≥ 1 and at most {len(by_class)} × the smallest class, got {count}"
        )
    per_class = min(len(i) for i in by_class)
    chosen = torch.stack([i[:per_class] for i in by_class], 1).flatten()[:count]
    return data["test_x"][chosen], labels[chosen]


def tuned_tv_weight(
    model,
    data: dict,
    point: dict,
    cfg,
    *,
    clip: float | None,
    noise_std: float,
    lr: float,
    seed: int = 0,
) -> dict:
    """λ_TV of the every-round attack at one sweep point, chosen by the server on images it holds.

    The noise changes which prior weight recovers best (more noise: a smoother image wins), so the
    server picks λ_TV per noise level the way the book picks every hyper-parameter: on images the table
    does not score. It sends ``cfg.tuning_images`` of its own test set (:func:`tuning_images`) through
    the rounds the attacked clients ran — at each round's global model (the starts of ``point["held"]``)
    one full-batch SGD step at η = ``lr``, its −Δ/η passed through :func:`defense_transform` (clip
    ``clip``, noise std ``noise_std``, drawn from the server's own generator, never a client's secret)
    — and attacks them with :func:`~gitutor.chapters.flower_dp.experiments.attack_rounds` at the λ_TV
    of ``cfg.tv_candidates`` in increasing order, until one scores a lower mean PSNR than the best so far
    (the score has turned down) or the grid ends; it keeps the best (ties: the smaller λ_TV).

    Returns:
        ``{"tv_weight": the chosen λ_TV, "psnr": {λ_TV: mean PSNR (dB) on the server's images, for
        those tried}, "at_edge": whether the choice is the grid's largest (the score had not turned
        down: a larger λ_TV might do better)}``.

    Raises:
        ValueError: naming ``cfg.tv_candidates`` when it is empty, not increasing or holds a value < 0,
            or ``cfg.tuning_images`` (:func:`tuning_images`), before any attack runs; as
            :func:`defense_transform` for ``clip`` and ``noise_std``.
    """
    candidates = list(cfg.tv_candidates)
    if not candidates:
        raise ValueError("cfg.tv_candidates must hold at least one λ_TV")
    for weight in candidates:
        check_real(weight, "cfg.tv_candidates", low=0.0)
    if any(b <= a for a, b in itertools.pairwise(candidates)):
        raise ValueError(f"cfg.tv_candidates must be increasing, got {candidates}")
    check_seed(seed)
    images, labels = tuning_images(data, cfg.tuning_images)
    defense = defense_transform(
        clip, noise_std, torch.Generator().manual_seed(TUNING_SEED + seed)
    )
    starts = [start for start, _ in next(iter(point["held"].values()))]
    held = {}
    for k in range(len(images)):
        x, y = images[k : k + 1], labels[k : k + 1]
        held[k] = []
        for start in starts:
            delta = simulated_update(
                model,
                x,
                y,
                lr=lr,
                epochs=1,
                batch_size=1,
                start=start,
                create_graph=False,
            )
            sent = defense([-d / lr for d in delta])
            held[k].append((start, [-lr * g for g in sent]))
    parts = [(images[k : k + 1], labels[k : k + 1]) for k in range(len(images))]
    scores, best = {}, None
    for weight in candidates:
        found = attack_rounds(
            model, held, parts, cfg, lr=lr, seed=seed, tv_weight=weight
        )
        scores[weight] = found["psnr"].mean
        if best is not None and scores[weight] < scores[best]:
            break  # the score has turned down
        if best is None or scores[weight] > scores[best]:
            best = weight
    return {"tv_weight": best, "psnr": scores, "at_edge": best == candidates[-1]}


def every_round(
    model, point: dict, cfg, lr: float, seed: int, *, tv_weight: float | None = None
) -> dict:
    """:func:`~gitutor.chapters.flower_dp.experiments.attack_rounds` on what the server holds of a sweep
    point's clients (``point["held"]``), the clients' photographs taken from its round-1 rows, at prior
    weight ``tv_weight`` (None: ``cfg.tv_weight``)."""
    partitions = {
        r["partition"]: (r["truth"], r["truth_labels"]) for r in point["rows"]
    }
    ordered = [partitions[k] for k in range(max(partitions) + 1)]
    return attack_rounds(
        model, point["held"], ordered, cfg, lr=lr, seed=seed, tv_weight=tv_weight
    )


def _whole_objective(row: dict, images: torch.Tensor) -> float:
    """What a row's attack minimises at ``images``: its matching term + its λ_TV · TV."""
    matching = row["objective"](images, row["used"])
    return float((matching + row["tv_weight"] * total_variation(images)).detach())


def sanity_arm(
    model, summary: dict, *, scale: float = 0.05, seed: int = 0, lr: float = 0.1
) -> dict:
    """The sanity arm on every client of an attack ``summary`` (one image per client): the row's own
    attack — its objective, labels, ``iterations`` and ``tv_weight`` — rerun from the client's
    photograph plus N(0, ``scale``²) per pixel (clamped to [0, 1]; noise from ``seed``) at signed-Adam
    step ``lr`` (the attack's 0.1; a smaller step stays near the photograph: whether the objective admits
    a recognisable image there, which a step that jumps away cannot tell), and the whole
    objective the attack minimises — the matching term (``objective``) + λ_TV · TV (Geiping et al. 2020,
    Eq. 4) — at the photograph, at the row's reconstruction and at the arm's. Where that objective is lower
    at the reconstruction than at the photograph, the search has found what the objective asks for: the
    objective at this prior weight, not the optimiser, limits that client.

    Returns:
        ``{"arm": summarise(arm rows), "start_psnr": [dB per client], "at_truth": […], "at_run": […],
        "at_arm": […] (the whole objective), "prefers_run": clients whose whole objective is lower at the
        reconstruction than at the photograph}``.

    Raises:
        ValueError: naming ``scale`` or ``lr`` (finite numbers > 0) or ``summary`` when a row holds more
            than one image, before any attack runs.
    """
    scale = check_real(scale, "scale", low=0.0, low_open=True)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    check_seed(seed)
    if any(len(row["truth"]) != 1 for row in summary["rows"]):
        raise ValueError("summary: the sanity arm here is for clients of one image")
    generator = torch.Generator().manual_seed(seed)
    rows, starts, at_truth = [], [], []
    for row in summary["rows"]:
        truth = row["truth"]
        start = (truth + scale * torch.randn(truth.shape, generator=generator)).clamp(
            0, 1
        )
        arm = _rerun(model, row, seed=seed + row["partition"], start=start, lr=lr)
        rows.append(arm)
        starts.append(float(psnr(start, truth).mean()))
        at_truth.append(_whole_objective(row, truth))
    at_run = [_whole_objective(row, row["images"]) for row in summary["rows"]]
    return {
        "arm": summarise(rows),
        "start_psnr": starts,
        "at_truth": at_truth,
        "at_run": at_run,
        "at_arm": [_whole_objective(row, row["images"]) for row in rows],
        "prefers_run": sum(r < t for r, t in zip(at_run, at_truth)),
    }


def identification_ranks(summary: dict, candidates: torch.Tensor) -> list[int]:
    """Per client of an attack ``summary``: the rank of the client's photograph among ``candidates``
    (``(N, C, H, W)`` photographs the server holds, e.g. its test set) and itself, by the row's own
    matching term (``objective`` at the row's ``used`` labels; 1 = lowest). A photograph that ranks first
    is still in the updates, whatever a reconstruction from noise recovers: a server holding a candidate
    set that contains it can pick it out.

    Raises:
        ValueError: naming ``candidates`` when it is not ``(N, C, H, W)`` with a row's image shape, or
            ``summary`` when a row holds more than one image, before anything is evaluated.
    """
    if not isinstance(candidates, torch.Tensor) or candidates.dim() != 4:
        raise ValueError("candidates must be an (N, C, H, W) tensor of photographs")
    for row in summary["rows"]:
        if len(row["truth"]) != 1:
            raise ValueError("summary: identification here is for clients of one image")
        if tuple(row["truth"].shape[1:]) != tuple(candidates.shape[1:]):
            raise ValueError(
                f"candidates hold {tuple(candidates.shape[1:])} images, the clients "
                f"{tuple(row['truth'].shape[1:])}"
            )
    ranks = []
    for row in summary["rows"]:

        def score(image, row=row):
            return float(row["objective"](image, row["used"]).detach())

        truth = score(row["truth"])
        others = [score(candidates[i : i + 1]) for i in range(len(candidates))]
        ranks.append(1 + sum(v < truth for v in others))
    return ranks


def recovers_every_client(summary: dict, controls: Mapping[str, torch.Tensor]) -> bool:
    """Whether the one-start IG of ``summary`` (one image per client) already recovers every client:
    each PSNR ≥ :data:`~gitutor.controls.RECOGNISABLE_PSNR` and above every control's PSNR on the same
    photograph (``controls``: ``{control: (N,)}`` dB, indexed by partition, as
    :func:`~gitutor.chapters.flower_dp.defenses.face_controls`' ``"scores"``).

    Raises:
        ValueError: naming ``controls`` when it holds no control, for a row of more than one image, or a
            partition the controls do not cover.
    """
    if not controls:
        raise ValueError(
            "controls must hold at least one control's scores (face_controls' 'scores')"
        )
    for row in summary["rows"]:
        k = row["partition"]
        if len(row["psnrs"]) != 1 or any(
            k >= len(scores) for scores in controls.values()
        ):
            raise ValueError(
                f"controls must score partition {k}'s one image; got {len(row['psnrs'])} "
                f"images and {min(len(s) for s in controls.values())} control scores"
            )
        floor = max(float(scores[k]) for scores in controls.values())
        if not (row["psnrs"][0] >= RECOGNISABLE_PSNR and row["psnrs"][0] > floor):
            return False
    return True


def sweep_strongest(
    model,
    data: dict,
    points: Sequence[dict],
    controls: Mapping[str, torch.Tensor],
    cfg,
    *,
    keep: float | None = None,
    seed: int = 0,
    strongest=None,
) -> list[dict | None]:
    """``strongest`` (None: :func:`dp_sgd_strongest`; :func:`local_dp_strongest` along the LocalDpMod sweep)
    at every σ of the sweep where the one-start IG does not already
    recover every attacked client (:func:`recovers_every_client` with ``controls``), and at σ = ``keep``
    whatever it does (the decision table's, which reuses the run); None at the others: there the
    defense has failed whatever a stronger adversary adds, so it is not run. Aligned with ``points``.

    Raises:
        ValueError: for a ``keep`` that is no σ of ``points``.
    """
    if keep is not None and all(p["sigma"] != keep for p in points):
        raise ValueError(f"keep must be a σ of the sweep, got {keep!r}")
    strongest = dp_sgd_strongest if strongest is None else strongest
    return [
        strongest(model, data, p, cfg, seed=seed)
        if p["sigma"] == keep or not recovers_every_client(p, controls)
        else None
        for p in points
    ]


def same_updates(a: dict, b: dict) -> bool:
    """Whether two attack summaries hold bitwise the same gradients, client by client (the two
    central-DP clippings leave the server the same clipped updates): the adversaries' runs on them
    are then one run."""
    return len(a["rows"]) == len(b["rows"]) and all(
        len(r["gradient"]) == len(q["gradient"])
        and all(torch.equal(x, y) for x, y in zip(r["gradient"], q["gradient"]))
        for r, q in zip(a["rows"], b["rows"])
    )


def strongest_by_defense(
    model,
    data: dict,
    runs: dict,
    aggregates: dict,
    swept: dict,
    cfg,
    *,
    seed: int = 0,
) -> dict:
    """:func:`adversaries` for every defense of the decision table: the runs of
    :func:`~gitutor.chapters.flower_dp.defenses.defense_run` (SecAgg+: its smallest aggregate of
    :func:`~gitutor.chapters.flower_dp.defenses.secagg_aggregates`); ``swept`` holds those run once for a
    sweep and passed in, at the table's σ (``"dp-sgd"``: :func:`dp_sgd_strongest`, ``"local-dp"``:
    :func:`local_dp_strongest`). LTI's auxiliary set is the server's test set (``data["test_x"]``, the
    images it honestly holds), one g_θ per (clip, noise, B); a defense whose updates are
    :func:`same_updates` as an earlier one's under the same transform (both central-DP clippings)
    shares its run. Under SecAgg+ the server holds the same group's aggregate every round, un-noised,
    so its adversaries include the every-round attack on the aggregates (``"held"``, at
    ``cfg.batch_iterations``); without noise or an aggregate the round-1 attacks already recover every
    client on this page, and the every-round attack is not run there."""
    aux, eta = (data["test_x"], data["test_y"]), cfg.defense_lr
    settings = {
        "none": (runs["none"]["round1"], None),
        "secagg+": (aggregates[min(aggregates)], None),
    }
    for name in ("central-dp-server-clipping", "central-dp-client-clipping"):
        settings[name] = (runs[name]["round1"], cfg.central_clip / eta)
    out, trained = {}, {}
    for name, (summary, clip) in settings.items():
        batch = len(summary["rows"][0]["truth"])
        twin = next(
            (
                n
                for n in out
                if settings[n][1] == clip and same_updates(settings[n][0], summary)
            ),
            None,
        )
        if twin is not None:
            out[name] = out[twin]
            continue
        if (clip, batch) not in trained:
            trained[clip, batch] = train_lti(
                model, aux, batch, cfg, clip=clip, noise_std=0.0, seed=seed
            )
        rounds = (
            attack_rounds(
                model,
                summary["held"],
                summary["batches"],
                cfg,
                lr=eta,
                seed=seed,
                iterations=cfg.batch_iterations,
            )
            if name == "secagg+"
            else None
        )
        out[name] = adversaries(
            model, summary, rounds, trained[clip, batch], cfg, seed=seed
        )
    return out | dict(swept)
