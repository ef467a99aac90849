"""Chapter 03's experiments on Stage I of Ye et al. (AAAI 2024, §Label Inference): the chapter's images
and features, the comparison of the evolutionary count search with the exhaustive minimum of Eq. 6 and
the baselines, the batch-size sweep, the effect of M and of the auxiliary images, the
late-training (confident head, bias-free FC) case, and the same comparison on a random and a trained
network (the shipped substitute of :mod:`gitutor.models.substitute`).

The experiments take two callables of the notebook: ``fc_gradient(indices, labels, head)`` returning
the server's observation ``[∇W^FC (C, m), ∇b^FC (C,) or absent]`` of a batch of the pool
(:func:`observed_fc_update`), and ``recover(w, batch_size, seed, head)`` returning ``(labels, seconds)``
(:func:`timed_recovery`). Scores are :func:`~gitutor.labels.batch_label_scores` dicts.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from gitutor.data import BUNDLED_CROP, OfflineDataError, load, resize
from gitutor.federated import client_gradients, last_layer_case
from gitutor.labels import (
    FeatureCV,
    batch_label_scores,
    bias_label_counts,
    class_evidence,
    coarse_labels,
    evolve_label_counts,
    exhaustive_label_counts,
    idlg_batch_labels,
    label_count_objective,
    recover_batch_labels,
    sample_pool_batch,
    yin_batch_labels,
)
from gitutor.labels.llg import LLGPlus, llg_label_counts
from gitutor.models import fc_input_features

#: The methods of the comparison: Ye et al.'s search, Eq. 6's exact minimum and five baselines (LLG and
#: LLG+ of Wainakh et al. 2022; LLG+ only where its auxiliary fit is given).
METHODS = (
    "ours",
    "Eq. 6 exhaustive",
    "Yin et al.",
    "iDLG rule",
    "bias count",
    "LLG",
    "LLG+",
)


def chapter_images(
    cfg, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(aux_images, pool_images, pool_labels)``: ``cfg.aux_images`` (at least ``max(cfg.aux_counts)`` when
    bundled) auxiliary and ``cfg.target_pool`` attacked images at ``cfg.image_size``. A root of "bundled" takes
    the disjoint pool="aux" / pool="target" halves of the bundled photographs (no labels: labels are assigned
    per batch; crops are at most :data:`gitutor.data.BUNDLED_CROP` px and upsampled to a larger ``cfg.image_size``); otherwise
    ImageFolder trees ``cfg.aux_root`` (one sub-folder) and ``cfg.image_root``.

    Raises:
        OfflineDataError: when a tree is not on disk, naming the parameter (AUX_ROOT, IMAGE_ROOT) to set.
    """
    size, crop = cfg.image_size, min(cfg.image_size, BUNDLED_CROP)
    if cfg.aux_root == "bundled":
        aux_images = resize(
            load("photos", max(cfg.aux_counts), size=crop, seed=seed, pool="aux")[0],
            size,
        )
    else:
        try:
            aux_images, _ = load(
                "imagefolder", cfg.aux_images, root=cfg.aux_root, size=size, seed=seed
            )
        except OfflineDataError as error:
            raise OfflineDataError(
                f"auxiliary images not found in {cfg.aux_root}: put {cfg.aux_images} public web "
                "images in a sub-folder of it (e.g. aux_web/web/*.jpg), or set AUX_ROOT"
            ) from error
    if cfg.image_root == "bundled":
        pool_images, pool_labels = (
            resize(
                load(
                    "photos", cfg.target_pool, size=crop, seed=seed + 1, pool="target"
                )[0],
                size,
            ),
            None,
        )
    else:
        pool_images, pool_labels = load(
            "imagefolder",
            cfg.target_pool,
            root=cfg.image_root,
            size=size,
            seed=seed + 1,
        )
    return aux_images, pool_images, pool_labels


def penultimate_features(
    model: nn.Module,
    images: torch.Tensor,
    device="cpu",
    chunk: int = 128,
    progress: bool = False,
) -> torch.Tensor:
    """``(n, m)`` features h = Φ(x), the FC layer's input, on the CPU (in eval mode independent of the
    batch), ``chunk`` images per forward pass; ``progress`` shows a tqdm bar over the chunks."""
    parts = images.split(chunk)
    return torch.cat(
        [
            fc_input_features(model, part.to(device))
            for part in tqdm(parts, desc="features", disable=not progress)
        ]
    ).cpu()


def observed_fc_update(
    head: nn.Linear, features: torch.Tensor, labels: torch.Tensor, device="cpu"
):
    """``[∇W^FC, ∇b^FC]`` (CPU) the server observes in the last-layer case (:func:`~gitutor.federated.last_layer_case`)
    of a batch with these ``(N, m)`` features and ``(N,)`` labels (no ∇b for a bias-free head)."""
    return [
        g.cpu()
        for g in last_layer_case(head, features.to(device), labels.to(device)).update
    ]


def timed_recovery(
    head: nn.Module, w: torch.Tensor, batch_size: int, stats: FeatureCV, cfg, seed: int
):
    """Stage I (:func:`~gitutor.labels.recover_batch_labels` with the profile's population, generations and
    crossover rate): ``((N,) labels, seconds taken)``."""
    start = time.perf_counter()
    labels = recover_batch_labels(
        head,
        w,
        batch_size,
        stats,
        population=cfg.population,
        iterations=cfg.iterations,
        crossover=cfg.crossover,
        seed=seed,
    )
    return labels, time.perf_counter() - start


def _multiset(counts: torch.Tensor) -> torch.Tensor:
    return torch.arange(len(counts)).repeat_interleave(counts)


def bias_count_labels(b: torch.Tensor, batch_size: int) -> torch.Tensor:
    """The bias count n_k ≈ −N ∂L/∂b_k (:func:`~gitutor.labels.bias_label_counts`) as a label multiset."""
    return _multiset(bias_label_counts(b, batch_size))


def baseline_predictions(
    w: torch.Tensor, b: torch.Tensor, batch_size: int, llg_plus: LLGPlus | None = None
) -> dict[str, torch.Tensor]:
    """The baselines' labels: Yin et al.'s N most negative rows, the iDLG rule on a batch, the bias count,
    LLG and (with its fitted parameters, :func:`~gitutor.labels.llg.fit_llg_plus`) LLG+."""
    found = {
        "Yin et al.": yin_batch_labels(w, batch_size),
        "iDLG rule": idlg_batch_labels(w, batch_size),
        "bias count": bias_count_labels(b, batch_size),
        "LLG": _multiset(llg_label_counts(w, batch_size)),
    }
    if llg_plus is not None:
        found["LLG+"] = _multiset(llg_label_counts(w, batch_size, llg_plus))
    return found


def summary(values: Sequence[dict]) -> tuple[float, float]:
    """Mean per-label accuracy and exact-batch rate of a list of ``batch_label_scores`` dicts.

    Raises:
        ValueError: if ``values`` is empty.
    """
    if not values:
        raise ValueError("values is empty: no batch was scored")
    return float(np.mean([v["accuracy"] for v in values])), float(
        np.mean([v["exact"] for v in values])
    )


def compare_methods(
    trials: Sequence[tuple[torch.Tensor, torch.Tensor]],
    fc_gradient: Callable,
    recover: Callable,
    stats: FeatureCV,
    batch_size: int,
    progress: bool = False,
    llg_plus: LLGPlus | None = None,
) -> dict:
    """Every :data:`METHODS` entry on each ``(indices, labels)`` batch of ``trials`` (the seed of batch t is t;
    LLG+ only with ``llg_plus``); ``progress`` shows a tqdm bar over the batches.

    Returns:
        dict with ``scores`` (method → list of scores), ``seconds`` (per recovery of ours), ``agree`` (batches
        where ours equals the exhaustive minimum), ``coarse_right`` (batches whose coarse label set is the
        truth), ``failures`` ((true counts, Eq. 6 minimum) where they differ) and ``spread`` ("exact"/"failed" →
        std/mean of a_k / n_k over a batch's classes, 0 if Eq. 6 held exactly).

    Raises:
        ValueError: if ``trials`` is empty; as the label functions for a malformed gradient.
    """
    if not trials:
        raise ValueError("trials is empty: give at least one (indices, labels) batch")
    names = [name for name in METHODS if name != "LLG+" or llg_plus is not None]
    out = {
        "scores": {name: [] for name in names},
        "seconds": [],
        "failures": [],
        "agree": 0,
        "coarse_right": 0,
        "spread": {"exact": [], "failed": []},
    }
    for trial, (indices, labels) in enumerate(
        tqdm(trials, desc="batches", disable=not progress)
    ):
        w, b = fc_gradient(indices, labels)
        ours, took = recover(w, batch_size, seed=trial)
        out["seconds"].append(took)
        classes = coarse_labels(w)
        best = exhaustive_label_counts(w, classes, batch_size, stats)
        out["agree"] += torch.equal(ours, classes.repeat_interleave(best))
        predictions = {
            "ours": ours,
            "Eq. 6 exhaustive": classes.repeat_interleave(best),
            **baseline_predictions(w, b, batch_size, llg_plus),
        }
        for name, predicted in predictions.items():
            out["scores"][name].append(batch_label_scores(predicted, labels))
        if set(classes.tolist()) != set(labels.tolist()):
            continue  # a wrong coarse label set
        out["coarse_right"] += 1
        truth = torch.bincount(labels, minlength=w.shape[0])[classes]
        ratio = (
            class_evidence(w, classes, stats) / truth
        )  # a_k / n_k: the same for every class if Eq. 6 held
        out["spread"]["exact" if torch.equal(best, truth) else "failed"].append(
            float(ratio.std() / ratio.mean())
        )
        if not torch.equal(best, truth):
            out["failures"].append((truth.tolist(), best.tolist()))
    return out


def search_fell_short(
    fc_weight_grad: torch.Tensor,
    classes: torch.Tensor,
    stats: FeatureCV,
    found: torch.Tensor,
    labels: torch.Tensor,
) -> bool:
    """Whether the count search stopped short of the truth on one batch: ``found`` (``(N,)`` labels the
    search returned) is not the batch's multiset ``labels`` ``(N,)``, the true classes are all among the
    coarse ``classes`` ``(K,)`` (so the true count vector is in the search space), and the true counts score
    a lower Eq. 6 J (:func:`gitutor.labels.label_count_objective`) than the found ones. Where the found
    counts score no higher than the truth, no search finds the truth by Eq. 6 (its minimum is not the
    truth): the error is the objective's, not the search's. A batch the method refused (``found`` empty:
    no negative row, or more coarse classes than images) never ran a search and is not counted.

    Raises:
        ValueError: when a non-empty ``found`` and ``labels`` differ in length.
    """
    if found.numel() == 0:
        return False
    if found.shape != labels.shape:
        raise ValueError(
            f"found and labels must both hold the N labels, got {tuple(found.shape)} "
            f"and {tuple(labels.shape)}"
        )
    if torch.equal(found.sort().values, labels.cpu().sort().values):
        return False
    classes = classes.cpu()
    if not bool(torch.isin(labels.cpu(), classes).all()):
        return False  # the coarse step missed a class: no count vector holds the truth
    truth = (labels.cpu()[None, :] == classes[:, None]).sum(dim=1)
    mine = (found[None, :] == classes[:, None]).sum(dim=1)
    j = label_count_objective(
        torch.stack([truth, mine]), fc_weight_grad, classes, stats
    )
    return bool(j[0] < j[1])


def batch_size_sweep(
    pool_labels,
    pool_size: int,
    fc_gradient: Callable,
    recover: Callable,
    cfg,
    generator: torch.Generator,
    progress: bool = False,
    llg_plus: LLGPlus | None = None,
    stats: FeatureCV | None = None,
) -> tuple[dict, list[float]]:
    """Per N in ``cfg.batch_sizes``, ``cfg.sweep_trials`` batches with at most max(2, N·``cfg.sweep_class_fraction``)
    classes. Returns ``{method: {"accuracy": [...], "exact": [...], "flags": [[0/1 per batch], ...]}}`` (one entry
    per N; all methods but the exhaustive one, LLG+ only with ``llg_plus``) and the mean seconds per recovery of
    ours per N; ``progress`` shows a tqdm bar over N. With ``stats`` (the statistics ``recover`` searches
    with), ours also holds ``"short"``: per N the batches on which the search stopped short of the truth
    (:func:`search_fell_short`, each batch's coarse classes :func:`~gitutor.labels.coarse_labels` of its
    gradient), so that a rate set by the generation cap can be told from one the objective sets."""
    sweep = {
        name: {"accuracy": [], "exact": [], "flags": []}
        for name in METHODS
        if name != "Eq. 6 exhaustive" and (name != "LLG+" or llg_plus is not None)
    }
    if stats is not None:
        sweep["ours"]["short"] = []
    seconds = []
    for batch_size in tqdm(cfg.batch_sizes, desc="batch sizes", disable=not progress):
        max_classes = max(2, int(batch_size * cfg.sweep_class_fraction))
        per_method, took, short = {name: [] for name in sweep}, [], 0
        for trial in range(cfg.sweep_trials):
            indices, labels = sample_pool_batch(
                pool_labels,
                pool_size,
                batch_size,
                cfg.num_classes,
                max_classes,
                generator,
            )
            w, b = fc_gradient(indices, labels)
            ours, seconds_taken = recover(w, batch_size, seed=trial)
            took.append(seconds_taken)
            if stats is not None:
                short += search_fell_short(w, coarse_labels(w), stats, ours, labels)
            for name, predicted in (
                {"ours": ours} | baseline_predictions(w, b, batch_size, llg_plus)
            ).items():
                per_method[name].append(batch_label_scores(predicted, labels))
        for name, values in per_method.items():
            for key, value in zip(("accuracy", "exact"), summary(values)):
                sweep[name][key].append(value)
            sweep[name]["flags"].append([float(v["exact"]) for v in values])
        if stats is not None:
            sweep["ours"]["short"].append(short)
        seconds.append(float(np.mean(took)))
    return sweep, seconds


def aux_and_m_effects(
    trials, gradients, batch_size: int, aux_features: torch.Tensor, cfg
) -> tuple[dict, dict]:
    """Eq. 6's exhaustive minimum (:func:`eq6_scores`) with the statistics of Eq. 5 refitted
    (:meth:`~gitutor.labels.FeatureCV.from_features`) for every M in ``cfg.m_values`` (on ``cfg.aux_images``
    auxiliary features) and every number of auxiliary images in ``cfg.aux_counts`` that ``aux_features``
    ``(n, m)`` holds (M = ``cfg.top_m``, at most m).

    Returns:
        ``(by_m, by_aux)``: ``{M: (per-label accuracy, exact-batch rate, 0/1 exact flags)}`` and
        ``{count: (…)}``, every setting on the same batches.
    """
    by_m = {
        m: eq6_scores(
            trials,
            gradients,
            batch_size,
            FeatureCV.from_features(aux_features[: cfg.aux_images], top_m=m),
        )
        for m in cfg.m_values
    }
    top_m = min(cfg.top_m, aux_features.shape[1])
    by_aux = {
        n: eq6_scores(
            trials,
            gradients,
            batch_size,
            FeatureCV.from_features(aux_features[:n], top_m=top_m),
        )
        for n in cfg.aux_counts
        if n <= len(aux_features)
    }
    return by_m, by_aux


def eq6_scores(
    trials, gradients, batch_size: int, stats: FeatureCV
) -> tuple[float, float]:
    """:func:`summary` of the exhaustive minimum of Eq. 6 with ``stats`` on each trial batch (``gradients``
    holds each batch's ``(w, b)``), and its 0/1 exact flag per batch: ``(accuracy, exact rate, flags)``."""
    values = []
    for (_, labels), (w, _) in zip(trials, gradients):
        classes = coarse_labels(w)
        counts = exhaustive_label_counts(w, classes, batch_size, stats)
        values.append(batch_label_scores(classes.repeat_interleave(counts), labels))
    return (*summary(values), [float(v["exact"]) for v in values])


def confident_head(
    fc: nn.Linear, features: torch.Tensor, labels: torch.Tensor, steps: int, lr: float
):
    """A copy of ``fc`` after ``steps`` plain SGD steps of rate ``lr`` on this batch's
    ``(N, m)`` features (the client's own update rule, emulating a trained model) and
    the mean probability of the true class after them."""
    head = copy.deepcopy(fc)
    for _ in range(steps):
        grads = client_gradients(head, features, labels)
        with torch.no_grad():
            for parameter, grad in zip(head.parameters(), grads):
                parameter -= lr * grad
    with torch.no_grad():
        probability = head(features).softmax(-1)[torch.arange(len(labels)), labels]
    return head, float(probability.mean())


def late_training(
    trials,
    fc: nn.Linear,
    features: torch.Tensor,
    fc_gradient: Callable,
    recover: Callable,
    cfg,
    device="cpu",
    progress: bool = False,
) -> tuple[dict, list[float], int]:
    """The bias count and ours late in training: ours on a bias-free copy of ``fc``, and both on a
    :func:`confident_head` of each trial batch (``features`` are the pool's ``(n, m)`` features); ``progress``
    shows a tqdm bar over the batches.

    Returns:
        setting → list of scores, the true class's mean probability per batch under the confident head, and
        how many batches ours rejected (more negative rows than images; scored 0).
    """
    bias_free = nn.Linear(fc.in_features, fc.out_features, bias=False).to(device)
    with torch.no_grad():
        bias_free.weight.copy_(fc.weight)
    late = {
        "ours (bias-free FC)": [],
        "ours (confident head)": [],
        "bias count (confident head)": [],
    }
    probabilities, rejected = [], 0
    for trial, (indices, labels) in enumerate(
        tqdm(trials, desc="batches", disable=not progress)
    ):
        (w_free,) = fc_gradient(indices, labels, head=bias_free)
        late["ours (bias-free FC)"].append(
            batch_label_scores(
                recover(w_free, len(labels), trial, head=bias_free)[0], labels
            )
        )
        head, probability = confident_head(
            fc,
            features[indices].to(device),
            labels.to(device),
            cfg.head_steps,
            cfg.head_lr,
        )
        probabilities.append(probability)
        w, b = fc_gradient(indices, labels, head=head)
        late["bias count (confident head)"].append(
            batch_label_scores(bias_count_labels(b, len(labels)), labels)
        )
        try:
            late["ours (confident head)"].append(
                batch_label_scores(recover(w, len(labels), trial, head=head)[0], labels)
            )
        except (
            ValueError
        ):  # more negative rows than images: the early-training assumption is gone
            rejected += 1
            late["ours (confident head)"].append({"accuracy": 0.0, "exact": 0.0})
    return late, probabilities, rejected


#: The settling rule of a count search: its best J has *settled* at generation g when g is the last
#: generation at which the best J changed and it then stays the same for :data:`SETTLE_PATIENCE`
#: generations. :func:`search_until_settled` runs a search for at most :data:`SETTLE_CAP` generations
#: (25 times the paper's "fewer than 200"); a search that has not settled by then is reported as "not
#: settled at SETTLE_CAP", never as a number of generations.
SETTLE_PATIENCE = 1000
SETTLE_CAP = 5000


def settled_generation(
    history: Sequence[float], patience: int = SETTLE_PATIENCE
) -> int | None:
    """The generation at which a search's best J settled by the settling rule (:data:`SETTLE_PATIENCE`):
    the last generation at which the best J changed, provided it then stayed unchanged for at least
    ``patience`` generations of ``history`` (best J after 0, 1, … generations); None when it did not
    (the history ends too soon after its last change: a cap, not a settled search).

    Raises:
        ValueError: if ``history`` is empty or ``patience`` < 1.
    """
    if not len(history):
        raise ValueError(
            "history is empty: a search records its best J from generation 0"
        )
    if patience < 1:
        raise ValueError(f"patience must be ≥ 1 generation, got {patience}")
    values = np.asarray(history, dtype=np.float64)
    last = int(np.argmax(values <= values[-1]))  # first generation at the final best J
    return last if len(values) - 1 - last >= patience else None


def search_until_settled(
    w: torch.Tensor,
    classes: torch.Tensor,
    batch_size: int,
    stats: FeatureCV,
    cfg,
    seed: int,
    labels: torch.Tensor | None = None,
) -> dict:
    """Ye et al.'s count search (:func:`~gitutor.labels.evolve_label_counts`, the profile's population and
    crossover rate) run for :data:`SETTLE_CAP` generations and read by the settling rule, beside the same
    search stopped at the profile's ``cfg.iterations`` generations (the paper's budget).

    Returns:
        ``{"settled": generation or None (:func:`settled_generation`), "history": best J per generation,
        "j_final": best J at the end, "j_budget": best J after ``cfg.iterations`` generations, "wrong":
        images in a wrong class at the end (½ Σ |counts − truth|), "wrong_budget": the same after
        ``cfg.iterations`` generations, "j_truth": J at the true counts}``; the last three are None
        without ``labels`` (the batch's true ``(N,)`` labels) or when ``classes`` is not their class set.
    """
    runs = [
        evolve_label_counts(
            w,
            classes,
            batch_size,
            stats,
            population=cfg.population,
            iterations=iterations,
            crossover=cfg.crossover,
            seed=seed,
        )
        for iterations in (SETTLE_CAP, cfg.iterations)
    ]
    out = {
        "settled": settled_generation(runs[0].history),
        "history": runs[0].history,
        "j_final": runs[0].history[-1],
        "j_budget": runs[1].history[-1],
        "wrong": None,
        "wrong_budget": None,
        "j_truth": None,
    }
    if labels is not None and set(labels.tolist()) == set(classes.tolist()):
        truth = torch.bincount(labels, minlength=w.shape[0])[classes.cpu()]
        out |= {
            "wrong": int((runs[0].counts - truth).abs().sum()) // 2,
            "wrong_budget": int((runs[1].counts - truth).abs().sum()) // 2,
            "j_truth": float(label_count_objective(truth, w, classes, stats)),
        }
    return out
