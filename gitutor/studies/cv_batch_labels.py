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
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from gitutor.data import ATTACKED_PHOTOGRAPHS, BUNDLED_CROP, OfflineDataError, load, resize
from gitutor.data.bundled import photograph
from gitutor.federated import client_gradients, last_layer_case
from gitutor.labels import (FeatureCV, batch_label_scores, bias_label_counts, class_evidence, coarse_labels,
                            exhaustive_label_counts, idlg_batch_labels, recover_batch_labels, sample_pool_batch,
                            yin_batch_labels)
from gitutor.models import calibrate_batchnorm, fc_input_features, last_linear
from gitutor.models.substitute import RECIPES, load_substitute, substitute_network, substitute_path
from gitutor.seeding import make_generator
from gitutor.stats import interval, success_interval

#: The methods of the comparison: Ye et al.'s search, Eq. 6's exact minimum and three baselines.
METHODS = ("ours", "Eq. 6 exhaustive", "Yin et al.", "iDLG rule", "bias count")


def chapter_images(cfg, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
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
        aux_images = resize(load("photos", max(cfg.aux_counts), size=crop, seed=seed, pool="aux")[0], size)
    else:
        try:
            aux_images, _ = load("imagefolder", cfg.aux_images, root=cfg.aux_root, size=size, seed=seed)
        except OfflineDataError as error:
            raise OfflineDataError(f"auxiliary images not found in {cfg.aux_root}: put {cfg.aux_images} public web "
                                   "images in a sub-folder of it (e.g. aux_web/web/*.jpg), or set AUX_ROOT") from error
    if cfg.image_root == "bundled":
        pool_images, pool_labels = resize(load("photos", cfg.target_pool, size=crop, seed=seed + 1, pool="target")[0],
                                          size), None
    else:
        pool_images, pool_labels = load("imagefolder", cfg.target_pool, root=cfg.image_root, size=size, seed=seed + 1)
    return aux_images, pool_images, pool_labels


def penultimate_features(model: nn.Module, images: torch.Tensor, device="cpu", chunk: int = 128) -> torch.Tensor:
    """``(n, m)`` features h = Φ(x), the FC layer's input, on the CPU (in eval mode independent of the batch)."""
    return torch.cat([fc_input_features(model, part.to(device)) for part in images.split(chunk)]).cpu()


def observed_fc_update(head: nn.Linear, features: torch.Tensor, labels: torch.Tensor, device="cpu"):
    """``[∇W^FC, ∇b^FC]`` (CPU) the server observes in the last-layer case (:func:`~gitutor.federated.last_layer_case`)
    of a batch with these ``(N, m)`` features and ``(N,)`` labels (no ∇b for a bias-free head)."""
    return [g.cpu() for g in last_layer_case(head, features.to(device), labels.to(device)).update]


def timed_recovery(head: nn.Module, w: torch.Tensor, batch_size: int, stats: FeatureCV, cfg, seed: int):
    """Stage I (:func:`~gitutor.labels.recover_batch_labels` with the profile's population, generations and
    crossover rate): ``((N,) labels, seconds taken)``."""
    start = time.perf_counter()
    labels = recover_batch_labels(head, w, batch_size, stats, population=cfg.population, iterations=cfg.iterations,
                                  crossover=cfg.crossover, seed=seed)
    return labels, time.perf_counter() - start


def bias_count_labels(b: torch.Tensor, batch_size: int) -> torch.Tensor:
    """The bias count n_k ≈ −N ∂L/∂b_k (:func:`~gitutor.labels.bias_label_counts`) as a label multiset."""
    counts = bias_label_counts(b, batch_size)
    return torch.arange(len(counts)).repeat_interleave(counts)


def baseline_predictions(w: torch.Tensor, b: torch.Tensor, batch_size: int) -> dict[str, torch.Tensor]:
    """The baselines' labels: Yin et al.'s N most negative rows, the iDLG rule on a batch, the bias count."""
    return {"Yin et al.": yin_batch_labels(w, batch_size), "iDLG rule": idlg_batch_labels(w, batch_size),
            "bias count": bias_count_labels(b, batch_size)}


def summary(values: Sequence[dict]) -> tuple[float, float]:
    """Mean per-label accuracy and exact-batch rate of a list of ``batch_label_scores`` dicts.

    Raises:
        ValueError: if ``values`` is empty.
    """
    if not values:
        raise ValueError("values is empty: no batch was scored")
    return float(np.mean([v["accuracy"] for v in values])), float(np.mean([v["exact"] for v in values]))


def compare_methods(trials: Sequence[tuple[torch.Tensor, torch.Tensor]], fc_gradient: Callable, recover: Callable,
                    stats: FeatureCV, batch_size: int, progress: bool = False) -> dict:
    """Every :data:`METHODS` entry on each ``(indices, labels)`` batch of ``trials`` (the seed of batch t is t);
    ``progress`` shows a tqdm bar over the batches.

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
    out = {"scores": {name: [] for name in METHODS}, "seconds": [], "failures": [], "agree": 0, "coarse_right": 0,
           "spread": {"exact": [], "failed": []}}
    for trial, (indices, labels) in enumerate(tqdm(trials, desc="batches", disable=not progress)):
        w, b = fc_gradient(indices, labels)
        ours, took = recover(w, batch_size, seed=trial)
        out["seconds"].append(took)
        classes = coarse_labels(w)
        best = exhaustive_label_counts(w, classes, batch_size, stats)
        out["agree"] += torch.equal(ours, classes.repeat_interleave(best))
        predictions = {"ours": ours, "Eq. 6 exhaustive": classes.repeat_interleave(best),
                       **baseline_predictions(w, b, batch_size)}
        for name, predicted in predictions.items():
            out["scores"][name].append(batch_label_scores(predicted, labels))
        if set(classes.tolist()) != set(labels.tolist()):
            continue  # a wrong coarse label set
        out["coarse_right"] += 1
        truth = torch.bincount(labels, minlength=w.shape[0])[classes]
        ratio = class_evidence(w, classes, stats) / truth  # a_k / n_k: the same for every class if Eq. 6 held
        out["spread"]["exact" if torch.equal(best, truth) else "failed"].append(float(ratio.std() / ratio.mean()))
        if not torch.equal(best, truth):
            out["failures"].append((truth.tolist(), best.tolist()))
    return out


def batch_size_sweep(pool_labels, pool_size: int, fc_gradient: Callable, recover: Callable, cfg,
                     generator: torch.Generator, progress: bool = False) -> tuple[dict, list[float]]:
    """Per N in ``cfg.batch_sizes``, ``cfg.sweep_trials`` batches with at most max(2, N·``cfg.sweep_class_fraction``)
    classes. Returns ``{method: {"accuracy": [...], "exact": [...]}}`` (one entry per N; all methods but the
    exhaustive one) and the mean seconds per recovery of ours per N; ``progress`` shows a tqdm bar over N."""
    sweep = {name: {"accuracy": [], "exact": []} for name in METHODS if name != "Eq. 6 exhaustive"}
    seconds = []
    for batch_size in tqdm(cfg.batch_sizes, desc="batch sizes", disable=not progress):
        max_classes = max(2, int(batch_size * cfg.sweep_class_fraction))
        per_method, took = {name: [] for name in sweep}, []
        for trial in range(cfg.sweep_trials):
            indices, labels = sample_pool_batch(pool_labels, pool_size, batch_size, cfg.num_classes, max_classes,
                                                generator)
            w, b = fc_gradient(indices, labels)
            ours, seconds_taken = recover(w, batch_size, seed=trial)
            took.append(seconds_taken)
            for name, predicted in ({"ours": ours} | baseline_predictions(w, b, batch_size)).items():
                per_method[name].append(batch_label_scores(predicted, labels))
        for name, values in per_method.items():
            for key, value in zip(("accuracy", "exact"), summary(values)):
                sweep[name][key].append(value)
        seconds.append(float(np.mean(took)))
    return sweep, seconds


def aux_and_m_effects(trials, gradients, batch_size: int, aux_features: torch.Tensor, cfg) -> tuple[dict, dict]:
    """Eq. 6's exhaustive minimum (:func:`eq6_scores`) with the statistics of Eq. 5 refitted
    (:meth:`~gitutor.labels.FeatureCV.from_features`) for every M in ``cfg.m_values`` (on ``cfg.aux_images``
    auxiliary features) and every number of auxiliary images in ``cfg.aux_counts`` that ``aux_features``
    ``(n, m)`` holds (M = ``cfg.top_m``, at most m).

    Returns:
        ``(by_m, by_aux)``: ``{M: (per-label accuracy, exact-batch rate)}`` and ``{count: (…)}``.
    """
    by_m = {m: eq6_scores(trials, gradients, batch_size,
                          FeatureCV.from_features(aux_features[:cfg.aux_images], top_m=m)) for m in cfg.m_values}
    top_m = min(cfg.top_m, aux_features.shape[1])
    by_aux = {n: eq6_scores(trials, gradients, batch_size, FeatureCV.from_features(aux_features[:n], top_m=top_m))
              for n in cfg.aux_counts if n <= len(aux_features)}
    return by_m, by_aux


def eq6_scores(trials, gradients, batch_size: int, stats: FeatureCV) -> tuple[float, float]:
    """:func:`summary` of the exhaustive minimum of Eq. 6 with ``stats`` on each trial batch (``gradients``
    holds each batch's ``(w, b)``)."""
    values = []
    for (_, labels), (w, _) in zip(trials, gradients):
        classes = coarse_labels(w)
        counts = exhaustive_label_counts(w, classes, batch_size, stats)
        values.append(batch_label_scores(classes.repeat_interleave(counts), labels))
    return summary(values)


def confident_head(fc: nn.Linear, features: torch.Tensor, labels: torch.Tensor,
                   steps: int, lr: float):
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


def late_training(trials, fc: nn.Linear, features: torch.Tensor, fc_gradient: Callable, recover: Callable, cfg,
                  device="cpu", progress: bool = False) -> tuple[dict, list[float], int]:
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
    late = {"ours (bias-free FC)": [], "ours (confident head)": [], "bias count (confident head)": []}
    probabilities, rejected = [], 0
    for trial, (indices, labels) in enumerate(tqdm(trials, desc="batches", disable=not progress)):
        w_free, = fc_gradient(indices, labels, head=bias_free)
        late["ours (bias-free FC)"].append(batch_label_scores(recover(w_free, len(labels), trial, head=bias_free)[0],
                                                              labels))
        head, probability = confident_head(fc, features[indices].to(device), labels.to(device), cfg.head_steps,
                                           cfg.head_lr)
        probabilities.append(probability)
        w, b = fc_gradient(indices, labels, head=head)
        late["bias count (confident head)"].append(batch_label_scores(bias_count_labels(b, len(labels)), labels))
        try:
            late["ours (confident head)"].append(batch_label_scores(recover(w, len(labels), trial, head=head)[0], labels))
        except ValueError:  # more negative rows than images: the early-training assumption is gone
            rejected += 1
            late["ours (confident head)"].append({"accuracy": 0.0, "exact": 0.0})
    return late, probabilities, rejected


def settled_generation(history: Sequence[float]) -> int:
    """First generation at which the best J of a search's history reached its final value."""
    return int(np.argmax(np.asarray(history) <= history[-1]))


# ---- Random vs trained network (issue 21, item 5) ---------------------------------------------------------
# Stage I models the FC gradient with the feature statistics of Eq. 5, which Ye et al. measure on an
# ImageNet-pretrained ResNet34. Offline there is none, so the same comparison runs on the shipped trained
# substitute (a CIFAR ResNet-20 trained on other bundled photographs) and on the same architecture with
# random weights, on the same batches of crops of photographs the substitute never saw.

#: The networks of :func:`substitute_networks`, in the order of the chapter's table.
SUBSTITUTE_VARIANTS = ("random", "trained", "trained, new head")


def photograph_crops(n: int, size: int, seed: int, pool: str = "target",
                     names: Sequence[str] = ATTACKED_PHOTOGRAPHS) -> torch.Tensor:
    """Random square crops of the whole photographs ``names`` (default: the ones no trained substitute saw,
    :data:`gitutor.data.ATTACKED_PHOTOGRAPHS`), as :func:`gitutor.data.natural_images` draws them: a
    photograph, a side of 20–50 % of the region's shorter side, a position, all from ``seed``.

    ``pool="target"`` crops from the left half of every photograph, ``pool="aux"`` from the right half, so an
    attacked batch and the auxiliary images never share a pixel.

    Returns:
        ``(n, 3, size, size)`` float tensor in [0, 1].

    Raises:
        ValueError: for ``n < 1``, a ``size`` that is not a positive int or exceeds a half photograph, an
            unknown ``pool`` or an empty ``names``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive int (pixels), got {size!r}")
    if pool not in ("target", "aux"):
        raise ValueError(f"pool must be 'target' (left halves) or 'aux' (right halves), got {pool!r}")
    if not names:
        raise ValueError("names must list at least one skimage.data photograph")
    photos = [photograph(name) for name in names]
    largest = min(min(p.shape[1], p.shape[2] // 2) for p in photos)
    if size > largest:
        raise ValueError(f"size={size} exceeds the smallest half photograph ({largest} px)")
    generator, crops = make_generator(seed), []
    for _ in range(n):
        photo = photos[int(torch.randint(len(photos), (1,), generator=generator))]
        height, width = photo.shape[1:]
        left, right = (0, width // 2) if pool == "target" else (width // 2, width)
        fraction = 0.2 + 0.3 * float(torch.rand((), generator=generator))
        side = max(size, int(fraction * min(height, right - left)))
        top = int(torch.randint(height - side + 1, (1,), generator=generator))
        x0 = left + int(torch.randint(right - left - side + 1, (1,), generator=generator))
        crops.append(resize(photo[None, :, top:top + side, x0:x0 + side], size))
    return torch.cat(crops)


def substitute_images(cfg, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(aux_images, pool_images)`` for the substitute comparison: ``cfg.aux_images`` auxiliary and
    ``cfg.substitute_pool`` attacked :func:`photograph_crops` of :data:`gitutor.data.ATTACKED_PHOTOGRAPHS` at
    ``cfg.substitute_image_size`` px (right and left halves)."""
    aux = photograph_crops(cfg.aux_images, cfg.substitute_image_size, seed, pool="aux")
    pool = photograph_crops(cfg.substitute_pool, cfg.substitute_image_size, seed + 1, pool="target")
    return aux, pool


def substitute_networks(name: str, aux_images: torch.Tensor, seed: int = 0) -> dict[str, nn.Module]:
    """The networks of the random-vs-trained comparison, all in eval mode, keyed by :data:`SUBSTITUTE_VARIANTS`:

    * ``"random"``: the substitute's architecture with random weights (seed ``seed``), its BatchNorm running
      statistics calibrated on ``aux_images`` (:func:`~gitutor.models.calibrate_batchnorm`; with the default
      statistics a random ResNet-20's activations grow block by block and its softmax saturates);
    * ``"trained"``: the trained substitute ``name`` (:func:`~gitutor.models.substitute.load_substitute`,
      sha256 checked), feature extractor and classification head as trained;
    * ``"trained, new head"``: the trained feature extractor with a freshly initialised last Linear layer
      (PyTorch's default initialisation, seed ``seed``), as when a client fine-tunes a pretrained backbone
      for new classes: trained features, softmax outputs near uniform.

    Args:
        name: a recipe of :data:`gitutor.models.substitute.RECIPES` (``"resnet20"`` ships with the package).
        aux_images: ``(n, 3, H, W)`` auxiliary images in [0, 1] for the BatchNorm calibration.
        seed: seed of the random weights and of the new head.

    Raises:
        ValueError: for an unknown ``name``.
        FileNotFoundError: if the substitute has not been trained (the message says how).
    """
    if name not in RECIPES:
        raise ValueError(f"substitute must be one of {sorted(RECIPES)}, got {name!r}")
    trained = load_substitute(substitute_path(name))
    untrained = substitute_network(RECIPES[name].architecture, seed=seed)
    untrained = calibrate_batchnorm(untrained, aux_images).eval()
    new_head = copy.deepcopy(trained)
    head = last_linear(new_head)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = nn.Linear(head.in_features, head.out_features)
    with torch.no_grad():
        head.weight.copy_(fresh.weight)
        head.bias.copy_(fresh.bias)
    return {"random": untrained, "trained": trained, "trained, new head": new_head.eval()}


def comparison_summary(comparison: Mapping, stats: FeatureCV, top_probability: float, classes: int,
                       image_size: int) -> dict:
    """What the random-vs-trained table shows of one network's :func:`compare_methods` output.

    Args:
        comparison: :func:`compare_methods`'s dict.
        stats: the statistics of Eq. 5 the comparison used.
        top_probability: mean top softmax probability on the attacked images (:func:`top_probability`).
        classes, image_size: the network's number of classes C and input side (px), as shown in the table.

    Returns:
        ``{"exact": Interval, "accuracy": Interval, "coarse_right": int, "trials": int, "kept_cv": float,
        "top_probability": float, "classes": int, "image_size": int}``: ours' exact-batch rate (Wilson 95 %
        interval, :func:`~gitutor.stats.success_interval`) and per-label accuracy (Student-t,
        :func:`~gitutor.stats.interval`), batches whose coarse label set was right, the mean CV at the M kept
        ranks of ``stats``, and the arguments.

    Raises:
        ValueError: if the comparison scored no batch.
    """
    ours = comparison["scores"]["ours"]
    if not ours:
        raise ValueError("the comparison scored no batch")
    return {"exact": success_interval([s["exact"] for s in ours]),
            "accuracy": interval([s["accuracy"] for s in ours], bounds=(0.0, 1.0)),
            "coarse_right": int(comparison["coarse_right"]), "trials": len(ours),
            "kept_cv": float(stats.cv[stats.indices].mean()), "top_probability": float(top_probability),
            "classes": int(classes), "image_size": int(image_size)}


def top_probability(head: nn.Linear, features: torch.Tensor) -> float:
    """Mean over the ``(n, m)`` ``features`` of the head's largest softmax probability (1/C: uniform)."""
    with torch.no_grad():
        return float(head(features).softmax(-1).max(dim=1).values.mean())


def network_comparison(networks: Mapping[str, nn.Module], pool_images: torch.Tensor, aux_images: torch.Tensor,
                       cfg, seed: int, device="cpu") -> tuple[dict[str, dict], list]:
    """Stage I on every network of ``networks`` (same attacked batches for all), as the chapter's comparison.

    ``cfg.substitute_trials`` batches of ``cfg.batch_size`` images of ``pool_images`` with labels repeated over
    at most ``cfg.max_classes`` of the networks' C classes (:func:`~gitutor.labels.sample_pool_batch`, seed
    ``seed``); per network the statistics of Eq. 5 on ``cfg.aux_images`` of ``aux_images`` (M = ``cfg.top_m``)
    and :func:`compare_methods` with the profile's search settings.

    Returns:
        ``({name: comparison_summary}, trials)``: the summaries and the ``(indices, labels)`` batches.

    Raises:
        ValueError: if ``networks`` is empty or the networks do not share one number of classes.
    """
    if not networks:
        raise ValueError("networks is empty: give at least one model")
    classes = {last_linear(model).out_features for model in networks.values()}
    if len(classes) != 1:
        raise ValueError(f"the networks must share one number of classes, got {sorted(classes)}")
    num_classes, generator = classes.pop(), make_generator(seed)
    trials = [sample_pool_batch(None, len(pool_images), cfg.batch_size, num_classes, cfg.max_classes, generator)
              for _ in range(cfg.substitute_trials)]
    summaries = {}
    for name, model in networks.items():
        model = model.to(device).eval()
        head = last_linear(model)
        features = penultimate_features(model, pool_images, device)
        aux_features = penultimate_features(model, aux_images[:cfg.aux_images], device)
        stats = FeatureCV.from_features(aux_features, top_m=min(cfg.top_m, aux_features.shape[1]))

        def fc_gradient(indices, labels, head=head, features=features):
            return observed_fc_update(head, features[indices], labels, device)

        def recover(w, batch_size, seed, head=head, stats=stats):
            return timed_recovery(head, w, batch_size, stats, cfg, seed)

        comparison = compare_methods(trials, fc_gradient, recover, stats, cfg.batch_size)
        summaries[name] = comparison_summary(comparison, stats, top_probability(head, features.to(device)),
                                             head.out_features, pool_images.shape[-1])
    return summaries, trials
