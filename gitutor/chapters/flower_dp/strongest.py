"""Chapter 08's strongest adversary per defense: Inverting Gradients with restarts, the multi-round mean,
and Learning To Invert trained through the same defense; their envelope per client.

- Restarts (Geiping et al. 2020, §4: "the best of several trials"): R independent starts on the same
  observed gradient, keeping per client the one whose reconstruction has the lowest cosine gradient
  distance to it — what the attacker can compute, never its PSNR against the truth.
- Learning To Invert (Wu et al. 2022, §3.2): g_θ trained on the server's own auxiliary images, their
  gradients at the attacked model passed through the defense the clients run (clipping and noise in
  the units the server reads, −Δ/η), then one forward pass per observed update.
- The envelope: per client, the candidate with the lowest gradient distance to the update the server
  holds of round 1 (``"attacker"``), and the oracle upper bound that picks the highest PSNR
  (``"oracle"``: needs the truth, which no attacker has).
"""

from __future__ import annotations

import itertools

import torch

from gitutor.attacks.lti import (
    InversionMLP,
    make_gradient_dataset,
    reconstruct,
    train_inversion_model,
)
from gitutor.chapters.flower_dp.experiments import (
    attack_gradient,
    matching_loss,
    score_row,
    summarise,
)
from gitutor.federated.client import gradient_dimension
from gitutor.federated.flower_defenses import clip_update
from gitutor.metrics import match_batch, psnr
from gitutor.stats import BOUNDS, interval

#: Seeds of restart r ≥ 1 are ``seed + partition + RESTART_STRIDE · r`` (restart 0: the chapter's run).
RESTART_STRIDE = 1000


def restarted(model, summary: dict, cfg, *, seed: int = 0) -> dict:
    """Inverting Gradients with ``cfg.restarts`` starts per client: restart 0 is ``summary``'s run
    (from :func:`~gitutor.chapters.flower_dp.experiments.attack_deltas`, seed ``seed + partition``),
    the others start from independent seeds on the same gradient; per client the lowest
    ``matching`` is kept. Returns :func:`summarise` of the kept rows.

    Raises:
        ValueError: for ``cfg.restarts`` < 1.
    """
    if isinstance(cfg.restarts, bool) or not isinstance(cfg.restarts, int) or cfg.restarts < 1:
        raise ValueError(f"cfg.restarts must be an int ≥ 1, got {cfg.restarts!r}")
    rows = []
    for row in summary["rows"]:
        keep = {k: row[k] for k in ("partition", "truth", "truth_labels")}
        tries = [row] + [attack_gradient(model, row["gradient"], row["truth"], row["truth_labels"],
                                         iterations=cfg.attack_iterations, tv_weight=cfg.tv_weight,
                                         seed=seed + row["partition"] + RESTART_STRIDE * r,
                                         record_every=cfg.record_every) | keep
                         for r in range(1, cfg.restarts)]
        rows.append(min(tries, key=lambda t: t["matching"]))
    return summarise(rows)


def psnr_curve(summary: dict) -> dict:
    """PSNR (dB; interval over the rows) of each row's kept run at every recorded step:
    ``{step: Interval}``, for :func:`~gitutor.chapters.flower_dp.report.flat_step`."""
    steps = [s for s, _ in summary["rows"][0]["result"].snapshots if s > 0]
    return {s: interval([float(psnr(match_batch(dict(r["result"].snapshots)[s].clamp(0, 1), r["truth"]),
                                    r["truth"]).mean()) for r in summary["rows"]], bounds=BOUNDS["PSNR"])
            for s in steps}


def defense_transform(clip: float | None, noise_std: float, generator: torch.Generator):
    """The defense as the server reads it, on one gradient list (units of −Δ/η): clip the whole
    list to L2 norm ``clip`` (None: no clipping; Flower's :func:`clip_update`), then add
    N(0, noise_std²) to every entry from ``generator``."""
    def apply(grads):
        out = list(grads) if clip is None else clip_update(grads, clip)
        if noise_std:
            out = [g + noise_std * torch.randn(g.shape, generator=generator) for g in out]
        return out
    return apply


def train_lti(model, aux: tuple[torch.Tensor, torch.Tensor], batch: int, cfg, *, clip: float | None = None,
              noise_std: float = 0.0, seed: int = 0) -> InversionMLP:
    """Learning To Invert's g_θ for batches of ``batch`` images (hidden ``cfg.lti_hidden``,
    ``cfg.lti_epochs`` epochs, Adam ``cfg.lti_lr``, standardised input), trained on the auxiliary
    ``aux = (images (N, 1, H, W), labels (N,))`` whose gradients at ``model`` pass through
    :func:`defense_transform` — ``cfg.lti_copies`` noise draws per image under noise; batches of B
    random distinct images.

    Raises:
        ValueError: for an auxiliary set smaller than 2·B, or from :func:`train_inversion_model`.
    """
    images, labels = aux
    if len(images) < 2 * batch:
        raise ValueError(f"aux holds {len(images)} images; learned inversion needs at least {2 * batch}")
    defense = defense_transform(clip, noise_std, torch.Generator().manual_seed(seed))
    copies = cfg.lti_copies if noise_std else 1
    repeated = (images.repeat(copies, 1, 1, 1), labels.repeat(copies))
    count = (len(repeated[1]) // batch) * (1 if batch == 1 else cfg.lti_copies)
    features, targets = make_gradient_dataset(model, *repeated, defense, batch,
                                              num_batches=None if batch == 1 else count, seed=seed)
    g = InversionMLP(gradient_dimension(model), tuple(images.shape[1:]), batch, hidden=cfg.lti_hidden,
                     seed=seed)
    train_inversion_model(g, features, targets, epochs=cfg.lti_epochs, lr=cfg.lti_lr, batch_size=32,
                          seed=seed, progress=False, standardise=True)
    return g


def learned_inversion(model, summary: dict, g: InversionMLP) -> dict:
    """Learning To Invert (:func:`train_lti`'s ``g``) on the gradients of ``summary``'s rows (their own
    ``gradient``). Each row's ``matching``: the lowest gradient distance over the orders of its used
    labels (g_θ returns no labels). Returns :func:`summarise` of the rows."""
    observed = torch.stack([torch.cat([t.flatten() for t in r["gradient"]]) for r in summary["rows"]])
    found = reconstruct(g, observed.float()).images
    rows = []
    for row, images in zip(summary["rows"], found):
        orders = set(itertools.permutations(row["used"].tolist()))
        matching = min(matching_loss(model, row["gradient"], images, torch.tensor(o)) for o in orders)
        rows.append(score_row(images, row["truth"]) | {
            "matching": matching, "label_ok": row["label_ok"], "gradient": row["gradient"],
            "used": row["used"], **{k: row[k] for k in ("partition", "truth", "truth_labels")}})
    return summarise(rows)


def envelope(model, candidates: dict[str, dict | None], reference: dict) -> dict:
    """Per client, the best of ``candidates`` (name → summary, rows aligned by client; None: not
    run): ``"attacker"`` keeps the lowest gradient distance to the update the server holds
    (``reference``'s row ``gradient``, round 1), ``"oracle"`` the highest PSNR (an upper bound: it
    needs the truth). Returns both summaries and ``"wins"``: how often each candidate was kept."""
    run = {name: s for name, s in candidates.items() if s is not None}
    attacker, oracle, wins = [], [], dict.fromkeys(run, 0)
    for i, ref in enumerate(reference["rows"]):
        tries = {}
        for name, s in run.items():
            row = s["rows"][i]
            same = row["gradient"] is ref["gradient"] or len(row["truth"]) > 1
            tries[name] = row | {"matching": row["matching"] if same else
                                 matching_loss(model, ref["gradient"], row["images"], ref["used"])}
        chosen = min(tries, key=lambda n: tries[n]["matching"])
        wins[chosen] += 1
        attacker.append(tries[chosen])
        oracle.append(max(tries.values(), key=lambda r: r["psnr"]))
    return {"attacker": summarise(attacker), "oracle": summarise(oracle), "wins": wins}


def strongest_by_defense(model, data: dict, runs: dict, aggregates: dict, point: dict, cfg, *,
                         seed: int = 0) -> dict:
    """The three adversaries and their envelope for every defense of the decision table: the runs of
    :func:`~gitutor.chapters.flower_dp.defenses.defense_run` (SecAgg+: its smallest aggregate of
    :func:`~gitutor.chapters.flower_dp.defenses.secagg_aggregates`) and the DP-SGD sweep ``point``
    (key ``"dp-sgd"``). LTI's auxiliary set is the server's test set (``data["test_x"]``, the images
    it honestly holds). Each value: ``{"restarts", "average" (None where no noise is the
    client's), "lti", "single"`` (the one-start IG run), ``"curve"`` (:func:`psnr_curve` of the restarts),
    ``"attacker", "oracle", "wins"}`` (:func:`envelope`)."""
    aux, eta = (data["test_x"], data["test_y"]), cfg.defense_lr
    settings = {"none": (runs["none"]["round1"], None, 0.0, None),
                "secagg+": (aggregates[min(aggregates)], None, 0.0, None),
                "local-dp": (runs["local-dp"]["round1"], cfg.local_clip / eta,
                             runs["local-dp"]["view"].sigma / eta, runs["local-dp"]["average"]),
                "dp-sgd": (point, cfg.max_grad_norm, point["sigma"] * cfg.max_grad_norm, point["average"])}
    for name in ("central-dp-server-clipping", "central-dp-client-clipping"):
        settings[name] = (runs[name]["round1"], cfg.central_clip / eta, 0.0, None)
    out, trained = {}, {}  # one g_θ per (clip, noise, B): both central-DP clippings share theirs
    for name, (summary, clip, noise, average) in settings.items():
        batch = len(summary["rows"][0]["truth"])
        if (clip, noise, batch) not in trained:
            trained[clip, noise, batch] = train_lti(model, aux, batch, cfg, clip=clip, noise_std=noise, seed=seed)
        found = {"single": summary, "restarts": restarted(model, summary, cfg, seed=seed), "average": average,
                 "lti": learned_inversion(model, summary, trained[clip, noise, batch])}
        candidates = {"IG, restarts": found["restarts"], "IG, mean of rounds": average, "LTI": found["lti"]}
        out[name] = found | {"curve": psnr_curve(found["restarts"])} | envelope(model, candidates, summary)
    return out
