"""Chapter 03's random-vs-trained comparison (Ye et al., AAAI 2024, Stage I): the same label-count attack on
the book's trained substitute network (a CIFAR ResNet-20 of :mod:`gitutor.models.substitute`), on the same
architecture with random weights, and on the trained features with a new head, on the same batches of crops
of photographs the substitute never saw (:func:`~gitutor.chapters.cv_batch_labels.experiments.compare_methods` per network).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from gitutor.data import ATTACKED_PHOTOGRAPHS, resize
from gitutor.data.bundled import photograph
from gitutor.labels import FeatureCV, sample_pool_batch
from gitutor.labels.llg import fit_llg_plus
from gitutor.models import calibrate_batchnorm, last_linear
from gitutor.models.substitute import (
    RECIPES,
    load_substitute,
    substitute_network,
    substitute_path,
)
from gitutor.seeding import make_generator
from gitutor.stats import interval, success_interval
from gitutor.chapters.cv_batch_labels.experiments import (
    compare_methods,
    observed_fc_update,
    penultimate_features,
    timed_recovery,
)

# ---- Random vs trained network (issue 21, item 5) ---------------------------------------------------------
# Stage I models the FC gradient with the feature statistics of Eq. 5, which Ye et al. measure on an
# ImageNet-pretrained ResNet34. Offline there is none, so the same comparison runs on the shipped trained
# substitute (a CIFAR ResNet-20 trained on other bundled photographs) and on the same architecture with
# random weights, on the same batches of crops of photographs the substitute never saw.

#: The networks of :func:`substitute_networks`, in the order of the chapter's table.
SUBSTITUTE_VARIANTS = ("random", "trained", "trained, new head")


def photograph_crops(
    n: int,
    size: int,
    seed: int,
    pool: str = "target",
    names: Sequence[str] = ATTACKED_PHOTOGRAPHS,
) -> torch.Tensor:
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
        raise ValueError(
            f"pool must be 'target' (left halves) or 'aux' (right halves), got {pool!r}"
        )
    if not names:
        raise ValueError("names must list at least one skimage.data photograph")
    photos = [photograph(name) for name in names]
    largest = min(min(p.shape[1], p.shape[2] // 2) for p in photos)
    if size > largest:
        raise ValueError(
            f"size={size} exceeds the smallest half photograph ({largest} px)"
        )
    generator, crops = make_generator(seed), []
    for _ in range(n):
        photo = photos[int(torch.randint(len(photos), (1,), generator=generator))]
        height, width = photo.shape[1:]
        left, right = (0, width // 2) if pool == "target" else (width // 2, width)
        fraction = 0.2 + 0.3 * float(torch.rand((), generator=generator))
        side = max(size, int(fraction * min(height, right - left)))
        top = int(torch.randint(height - side + 1, (1,), generator=generator))
        x0 = left + int(
            torch.randint(right - left - side + 1, (1,), generator=generator)
        )
        crops.append(resize(photo[None, :, top : top + side, x0 : x0 + side], size))
    return torch.cat(crops)


def substitute_images(cfg, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(aux_images, pool_images)`` for the substitute comparison: ``cfg.aux_images`` auxiliary and
    ``cfg.substitute_pool`` attacked :func:`photograph_crops` of :data:`gitutor.data.ATTACKED_PHOTOGRAPHS` at
    ``cfg.substitute_image_size`` px (right and left halves)."""
    aux = photograph_crops(cfg.aux_images, cfg.substitute_image_size, seed, pool="aux")
    pool = photograph_crops(
        cfg.substitute_pool, cfg.substitute_image_size, seed + 1, pool="target"
    )
    return aux, pool


def substitute_networks(
    name: str, aux_images: torch.Tensor, seed: int = 0
) -> dict[str, nn.Module]:
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
    return {
        "random": untrained,
        "trained": trained,
        "trained, new head": new_head.eval(),
    }


def comparison_summary(
    comparison: Mapping,
    stats: FeatureCV,
    top_probability: float,
    classes: int,
    image_size: int,
) -> dict:
    """What the random-vs-trained table shows of one network's :func:`compare_methods` output.

    Args:
        comparison: :func:`compare_methods`'s dict.
        stats: the statistics of Eq. 5 the comparison used.
        top_probability: mean top softmax probability on the attacked images (:func:`top_probability`).
        classes, image_size: the network's number of classes C and input side (px), as shown in the table.

    Returns:
        ``{"exact": Interval, "accuracy": Interval, "methods": {method: Interval}, "flags": {method: [0/1 exact
        per batch, in the batches' order]}, "coarse_right": int,
        "trials": int, "kept_cv": float, "top_probability": float, "classes": int, "image_size": int}``: ours'
        exact-batch rate (Wilson 95 % interval, :func:`~gitutor.stats.success_interval`) and per-label accuracy
        (Student-t, :func:`~gitutor.stats.interval`), every method's exact-batch rate (Wilson), batches whose
        coarse label set was right, the mean CV at the M kept ranks of ``stats``, and the arguments.

    Raises:
        ValueError: if the comparison scored no batch.
    """
    ours = comparison["scores"]["ours"]
    if not ours:
        raise ValueError("the comparison scored no batch")
    return {
        "exact": success_interval([s["exact"] for s in ours]),
        "accuracy": interval([s["accuracy"] for s in ours], bounds=(0.0, 1.0)),
        "methods": {
            name: success_interval([s["exact"] for s in scores])
            for name, scores in comparison["scores"].items()
        },
        "flags": {
            name: [float(s["exact"]) for s in scores]
            for name, scores in comparison["scores"].items()
        },
        "coarse_right": int(comparison["coarse_right"]),
        "trials": len(ours),
        "kept_cv": float(stats.cv[stats.indices].mean()),
        "top_probability": float(top_probability),
        "classes": int(classes),
        "image_size": int(image_size),
    }


def top_probability(head: nn.Linear, features: torch.Tensor) -> float:
    """Mean over the ``(n, m)`` ``features`` of the head's largest softmax probability (1/C: uniform)."""
    with torch.no_grad():
        return float(head(features).softmax(-1).max(dim=1).values.mean())


def network_comparison(
    networks: Mapping[str, nn.Module],
    pool_images: torch.Tensor,
    aux_images: torch.Tensor,
    cfg,
    seed: int,
    device="cpu",
) -> tuple[dict[str, dict], list]:
    """Stage I on every network of ``networks`` (same attacked batches for all), as the chapter's comparison.

    ``cfg.substitute_trials`` batches of ``cfg.batch_size`` images of ``pool_images`` with labels repeated over
    at most ``cfg.max_classes`` of the networks' C classes (:func:`~gitutor.labels.sample_pool_batch`, seed
    ``seed``); per network the statistics of Eq. 5 on ``cfg.aux_images`` of ``aux_images`` (M = ``cfg.top_m``)
    and :func:`compare_methods` with the profile's search settings (LLG+ fitted on the same auxiliary features,
    :func:`~gitutor.labels.llg.fit_llg_plus`).

    Returns:
        ``({name: comparison_summary}, trials)``: the summaries and the ``(indices, labels)`` batches.

    Raises:
        ValueError: if ``networks`` is empty or the networks do not share one number of classes.
    """
    if not networks:
        raise ValueError("networks is empty: give at least one model")
    classes = {last_linear(model).out_features for model in networks.values()}
    if len(classes) != 1:
        raise ValueError(
            f"the networks must share one number of classes, got {sorted(classes)}"
        )
    num_classes, generator = classes.pop(), make_generator(seed)
    trials = [
        sample_pool_batch(
            None,
            len(pool_images),
            cfg.batch_size,
            num_classes,
            cfg.max_classes,
            generator,
        )
        for _ in range(cfg.substitute_trials)
    ]
    summaries = {}
    for name, model in networks.items():
        model = model.to(device).eval()
        head = last_linear(model)
        features = penultimate_features(model, pool_images, device)
        aux_features = penultimate_features(model, aux_images[: cfg.aux_images], device)
        stats = FeatureCV.from_features(
            aux_features, top_m=min(cfg.top_m, aux_features.shape[1])
        )

        def fc_gradient(indices, labels, head=head, features=features):
            return observed_fc_update(head, features[indices], labels, device)

        def recover(w, batch_size, seed, head=head, stats=stats):
            return timed_recovery(head, w, batch_size, stats, cfg, seed)

        comparison = compare_methods(
            trials,
            fc_gradient,
            recover,
            stats,
            cfg.batch_size,
            llg_plus=fit_llg_plus(head, aux_features.to(device)),
        )
        summaries[name] = comparison_summary(
            comparison,
            stats,
            top_probability(head, features.to(device)),
            head.out_features,
            pool_images.shape[-1],
        )
    return summaries, trials
