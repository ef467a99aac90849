"""Stage I of Ye et al. (AAAI 2024) in the paper's kind of setting: an ImageNet-trained network, real ImageNet
photographs and their true labels (chapter 03's headline).

- **Network**: EfficientNet-Lite0 with its ImageNet weights and the running statistics of its 49 BatchNorm
  layers (:func:`gitutor.models.pretrained`), in eval mode, 224 px, 1 000 classes; it stands where the paper
  attacks an ImageNet ResNet34.
- **Images and labels**: foolbox's 20 ImageNet photographs with their true labels (19 classes: two are jeeps),
  ``gitutor.data.load("imagenet")``. Twenty photographs cannot fill batches whose classes repeat, so a class
  holding n images of a batch gets n **augmented views** of its photograph(s) (:func:`augmented_views`: a random
  resized crop of ``cfg.imagenet_scale`` of the photograph's area, aspect 3/4–4/3, and a horizontal flip with
  probability 1/2, the usual ImageNet training augmentation), drawn without replacement from a bank of
  ``cfg.imagenet_views`` views per photograph.
- **Auxiliary images** (Eq. 5, M = ``cfg.top_m``): the centre crops of the photographs whose class is *not* in
  the batch, refitted per batch, so the statistics never see a photograph the batch holds a view of; LLG+ is
  fitted on the same images.

What varies across batches is the classes, their counts and the views; the 20 photographs stay the same, so an
interval covers batches drawn from these photographs, not ImageNet at large.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from gitutor.data import load
from gitutor.labels import (
    FeatureCV,
    batch_label_scores,
    coarse_labels,
    exhaustive_label_counts,
    label_count_objective,
    recover_batch_labels,
    sample_repeated_labels,
)
from gitutor.labels.llg import fit_llg_plus, llg_label_counts
from gitutor.models import last_linear
from gitutor.stats import interval, success_interval
from gitutor.chapters.cv_batch_labels.experiments import (
    bias_count_labels,
    observed_fc_update,
    penultimate_features,
    search_fell_short,
)

#: The methods of the ImageNet comparison: ours, Eq. 6's exhaustive minimum (B small enough), three count
#: baselines (Yin et al. and the iDLG rule cannot count repeats: they stay with the chapter's own network).
METHODS = ("ours", "Eq. 6 exhaustive", "bias count", "LLG", "LLG+")
#: The count baselines that the headline pairs with ours.
BASELINES = ("bias count", "LLG", "LLG+")


@dataclass(frozen=True)
class ViewBank:
    """Augmented views of the ImageNet photographs and their features.

    Attributes:
        views: ``(P, V, 3, S, S)`` images in [0, 1], V views of each of the P photographs.
        features: ``(P, V, m)`` penultimate features of the views.
        centre_features: ``(P, m)`` features of the photographs' centre crops (the auxiliary images).
        labels: ``(P,)`` true ImageNet class of each photograph.
        true_probability: ``(P, V)`` the network's softmax probability of the true class on each view.
    """

    views: torch.Tensor
    features: torch.Tensor
    centre_features: torch.Tensor
    labels: torch.Tensor
    true_probability: torch.Tensor


@contextlib.contextmanager
def torch_threads(count: int | None):
    """Run the block with ``count`` torch threads (None: leave them), then restore the caller's count. One thread
    is fastest for this section's many small (C, m) operations on a shared CPU, where two threads contend."""
    before = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def augmented_views(
    images: torch.Tensor,
    views: int,
    size: int,
    generator: torch.Generator,
    scale: tuple[float, float] = (0.25, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> torch.Tensor:
    """``views`` random resized crops with a random horizontal flip of each of the ``(P, C, H, W)`` images:
    ``(P, views, C, size, size)`` in [0, 1] (torchvision's RandomResizedCrop and RandomHorizontalFlip, drawn
    from ``generator``; after 10 draws that do not fit, the whole image).

    Raises:
        ValueError: if ``views`` < 1 or ``scale`` is not within (0, 1].
    """
    if views < 1 or not 0 < scale[0] <= scale[1] <= 1:
        raise ValueError(
            f"need views ≥ 1 and 0 < scale[0] ≤ scale[1] ≤ 1, got {views} and {scale}"
        )
    height, width = images.shape[-2:]
    uniform = lambda low, high: (
        low + (high - low) * float(torch.rand(1, generator=generator))
    )
    out = []
    for image in images:
        for _ in range(views):
            h, w = height, width
            for _ in range(10):
                area = height * width * uniform(*scale)
                aspect = math.exp(uniform(math.log(ratio[0]), math.log(ratio[1])))
                cw, ch = (
                    round(math.sqrt(area * aspect)),
                    round(math.sqrt(area / aspect)),
                )
                if 0 < cw <= width and 0 < ch <= height:
                    h, w = ch, cw
                    break
            top = int(torch.randint(height - h + 1, (1,), generator=generator))
            left = int(torch.randint(width - w + 1, (1,), generator=generator))
            crop = F.interpolate(
                image[None, :, top : top + h, left : left + w],
                size=(size, size),
                mode="bilinear",
                antialias=True,
                align_corners=False,
            ).clamp(0, 1)
            out.append(
                crop.flip(-1)
                if float(torch.rand(1, generator=generator)) < 0.5
                else crop
            )
    return torch.cat(out).view(len(images), views, *images.shape[1:2], size, size)


def view_bank(model: nn.Module, cfg, seed: int, device="cpu") -> ViewBank:
    """The :class:`ViewBank` of the ImageNet photographs: ``cfg.imagenet_views`` views per photograph at
    ``cfg.imagenet_size`` px, cut from the ``cfg.imagenet_source`` px centre of each photograph (the ImageNet
    resize-and-crop), and the ``cfg.imagenet_size`` px centre crops (seeded by ``seed``)."""
    source, labels = load("imagenet", size=cfg.imagenet_source)
    centre, _ = load("imagenet", size=cfg.imagenet_size)
    views = augmented_views(
        source,
        cfg.imagenet_views,
        cfg.imagenet_size,
        torch.Generator().manual_seed(seed),
        tuple(cfg.imagenet_scale),
    )
    flat = views.flatten(0, 1)
    features = penultimate_features(model, flat, device, chunk=32)
    with torch.no_grad():
        p = last_linear(model)(features.to(device)).softmax(-1).cpu()
    true = p[torch.arange(len(flat)), labels.repeat_interleave(cfg.imagenet_views)]
    return ViewBank(
        views,
        features.view(*views.shape[:2], -1),
        penultimate_features(model, centre, device),
        labels,
        true.view(*views.shape[:2]),
    )


def sample_view_batch(
    bank: ViewBank,
    batch_size: int,
    max_classes: int,
    generator: torch.Generator,
    tries: int = 1000,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch with repeated true labels: ``(picks (N, 2) of (photograph, view), labels (N,))``.

    The count pattern is :func:`~gitutor.labels.sample_repeated_labels`'s (K uniform in [2, min(max_classes,
    N − 1)], a uniform composition of N) over the bank's classes, redrawn while a class would need more views
    than its photographs have; each class's n images are n distinct views of its photograph(s).

    Raises:
        ValueError: if no pattern fits in ``tries`` draws (more views per photograph are needed).
    """
    classes = bank.labels.unique()
    photos = {int(c): torch.nonzero(bank.labels == c).flatten() for c in classes}
    views = bank.features.shape[1]
    for _ in range(tries):
        chosen, counts = classes[
            sample_repeated_labels(batch_size, len(classes), max_classes, generator)
        ].unique(return_counts=True)
        if all(int(n) <= views * len(photos[int(c)]) for c, n in zip(chosen, counts)):
            break
    else:
        raise ValueError(
            f"no batch of {batch_size} with ≤ {max_classes} classes fits {views} views per photograph"
        )
    picks = []
    for c, n in zip(chosen.tolist(), counts.tolist()):
        slots = torch.cartesian_prod(photos[c], torch.arange(views))
        picks.append(slots[torch.randperm(len(slots), generator=generator)[:n]])
    picks = torch.cat(picks)
    return picks, bank.labels[picks[:, 0]]


def premise_gradient(
    num_classes: int, features: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """``(C, m)`` FC weight gradient of the same batch if every softmax output were 0 (Eq. 2–3 with p = 0,
    the premise of Eq. 6): ∇W_k = −(1/N) Σ_{n: y_n = k} h_n."""
    onehot = F.one_hot(labels, num_classes).to(features.dtype)
    return -(onehot.T @ features) / len(labels)


def _multiset(counts: torch.Tensor) -> torch.Tensor:
    return torch.arange(len(counts)).repeat_interleave(counts)


def _failed(batch_size: int) -> torch.Tensor:
    return torch.empty(
        0, dtype=torch.int64
    )  # scored as a wrong batch (a method that refused this gradient)


def imagenet_trials(
    model: nn.Module,
    bank: ViewBank,
    cfg,
    batch_size: int,
    trials: int,
    max_classes: int,
    generator: torch.Generator,
    *,
    exhaustive: bool = True,
    progress: bool = False,
    device="cpu",
) -> dict:
    """Every :data:`METHODS` entry (the exhaustive minimum only with ``exhaustive``) on ``trials`` batches of
    :func:`sample_view_batch`, the auxiliary statistics and LLG+ refitted per batch on the photographs whose
    class is not in it (seed of batch t: t).

    Returns:
        ``{"scores": {method: [batch_label_scores]}, "coarse": [0/1 coarse set right], "premise": [0/1 Eq. 6
        exact with p = 0 (:func:`premise_gradient`), only with ``exhaustive``], "seconds": [ours per batch],
        "n_aux": [auxiliary images per batch], "refused": batches where ours raised (scored wrong),
        "short": [0/1 per batch: ours is wrong although the true counts score a lower Eq. 6 J than the
        counts it found (:func:`~gitutor.chapters.cv_batch_labels.experiments.search_fell_short`)], "first": (picks, labels) of the first batch}``.
    """
    head = last_linear(model)
    names = [name for name in METHODS if exhaustive or name != "Eq. 6 exhaustive"]
    out = {
        "scores": {name: [] for name in names},
        "coarse": [],
        "premise": [],
        "seconds": [],
        "n_aux": [],
        "refused": 0,
        "short": [],
        "first": None,
    }
    for trial in tqdm(
        range(trials), desc=f"ImageNet batches, N = {batch_size}", disable=not progress
    ):
        picks, labels = sample_view_batch(bank, batch_size, max_classes, generator)
        out["first"] = out["first"] or (picks, labels)
        features = bank.features[picks[:, 0], picks[:, 1]]
        aux = bank.centre_features[~torch.isin(bank.labels, labels)]
        stats = FeatureCV.from_features(aux, top_m=cfg.top_m)
        w, b = observed_fc_update(head, features, labels, device)
        start = time.perf_counter()
        try:
            ours = recover_batch_labels(
                head,
                w,
                batch_size,
                stats,
                population=cfg.population,
                iterations=cfg.iterations,
                crossover=cfg.crossover,
                seed=trial,
            )
        except ValueError:  # no negative row, or more negative rows than images
            ours, out["refused"] = _failed(batch_size), out["refused"] + 1
        out["seconds"].append(time.perf_counter() - start)
        classes = coarse_labels(w)
        found = {
            "ours": ours,
            "bias count": bias_count_labels(b, batch_size),
            "LLG": _multiset(llg_label_counts(w, batch_size)),
            "LLG+": _multiset(
                llg_label_counts(w, batch_size, fit_llg_plus(head, aux.to(device)))
            ),
        }
        if exhaustive:
            try:
                found["Eq. 6 exhaustive"] = classes.repeat_interleave(
                    exhaustive_label_counts(w, classes, batch_size, stats)
                )
            except ValueError:
                found["Eq. 6 exhaustive"] = _failed(batch_size)
            w0 = premise_gradient(w.shape[0], features, labels)
            c0 = coarse_labels(w0)
            out["premise"].append(
                batch_label_scores(
                    c0.repeat_interleave(
                        exhaustive_label_counts(w0, c0, batch_size, stats)
                    ),
                    labels,
                )["exact"]
            )
        for name in names:
            out["scores"][name].append(batch_label_scores(found[name], labels))
        out["short"].append(float(search_fell_short(w, classes, stats, ours, labels)))
        out["coarse"].append(float(set(classes.tolist()) == set(labels.tolist())))
        out["n_aux"].append(len(aux))
    return out


def imagenet_summary(result: dict) -> dict:
    """What the page and the record show of :func:`imagenet_trials`: per method the exact-batch rate (Wilson
    95 %), the exact rate on the batches whose coarse label set was right (Wilson, its own n), the per-label
    accuracy (95 % interval in [0, 1]); per :data:`BASELINES` method the paired difference ours − it of the
    exact flags (95 % interval in [−1, 1]) and its discordant batches ``(ours only, it only)``; the coarse-set
    rate, Eq. 6 with p = 0 (if run; ``premise_paired``: p = 0 − ours, paired), the auxiliary images' range and
    the batches ours refused."""
    scores, coarse = result["scores"], result["coarse"]
    flags = {name: [s["exact"] for s in values] for name, values in scores.items()}
    right = [i for i, c in enumerate(coarse) if c]
    given = {
        name: success_interval([f[i] for i in right]) if right else None
        for name, f in flags.items()
    }
    ours = np.asarray(flags["ours"])
    paired, discordant = {}, {}
    for name in BASELINES:
        other = np.asarray(flags[name])
        paired[name] = interval(ours - other, bounds=(-1.0, 1.0))
        discordant[name] = (
            int(((ours == 1) & (other == 0)).sum()),
            int(((ours == 0) & (other == 1)).sum()),
        )
    return {
        "exact": {name: success_interval(f) for name, f in flags.items()},
        "given_coarse": given,
        "accuracy": {
            name: interval([s["accuracy"] for s in v], bounds=(0.0, 1.0))
            for name, v in scores.items()
        },
        "paired": paired,
        "discordant": discordant,
        "coarse": success_interval(coarse),
        "coarse_right": len(right),
        "trials": len(coarse),
        "premise": success_interval(result["premise"]) if result["premise"] else None,
        "premise_paired": (
            interval(np.asarray(result["premise"], float) - ours, bounds=(-1.0, 1.0))
            if result["premise"]
            else None
        ),
        "n_aux": (min(result["n_aux"]), max(result["n_aux"])),
        "refused": result["refused"],
        "short": int(sum(result["short"])),
        "seconds": float(np.mean(result["seconds"])),
    }


def imagenet_sweep(
    model: nn.Module,
    bank: ViewBank,
    cfg,
    headline: dict,
    generator: torch.Generator,
    progress: bool = False,
    device="cpu",
) -> tuple[dict, list[float], list[int]]:
    """The batch-size sweep in the ImageNet setting: per N of ``cfg.imagenet_batch_sizes``,
    ``cfg.imagenet_sweep_trials`` batches with at most max(2, min(N·``cfg.sweep_class_fraction``,
    ``cfg.imagenet_max_classes``)) classes (so that some photographs stay auxiliary); N = ``cfg.batch_size``
    reuses ``headline`` (:func:`imagenet_trials`'s output). Returns the sweep in the shape of
    :func:`~gitutor.chapters.cv_batch_labels.experiments.batch_size_sweep` (no exhaustive minimum; ours
    also holds ``"short"``: per N the batches on which the search stopped short of the truth,
    :func:`~gitutor.chapters.cv_batch_labels.experiments.search_fell_short`), the mean seconds of ours per N and the number of batches per N."""
    names = [name for name in METHODS if name != "Eq. 6 exhaustive"]
    sweep = {name: {"accuracy": [], "exact": [], "flags": []} for name in names}
    sweep["ours"]["short"] = []
    seconds, counts = [], []
    for n in cfg.imagenet_batch_sizes:
        if n == cfg.batch_size:
            result = headline
        else:
            cap = max(
                2, min(int(n * cfg.sweep_class_fraction), cfg.imagenet_max_classes)
            )
            result = imagenet_trials(
                model,
                bank,
                cfg,
                n,
                cfg.imagenet_sweep_trials,
                cap,
                generator,
                exhaustive=False,
                progress=progress,
                device=device,
            )
        for name in names:
            values = result["scores"][name]
            sweep[name]["accuracy"].append(
                float(np.mean([v["accuracy"] for v in values]))
            )
            sweep[name]["exact"].append(float(np.mean([v["exact"] for v in values])))
            sweep[name]["flags"].append([float(v["exact"]) for v in values])
        sweep["ours"]["short"].append(int(sum(result["short"])))
        seconds.append(float(np.mean(result["seconds"])))
        counts.append(len(result["coarse"]))
    return sweep, seconds, counts


def view_spread(bank: ViewBank, top_m: int) -> tuple[float, float]:
    """What augmented views change: the mean CV at the M kept ranks of Eq. 5 (fitted on all the centre crops)
    across the views of one photograph (averaged over photographs), and across the photographs' centre crops."""
    stats = FeatureCV.from_features(bank.centre_features, top_m=top_m)
    ranked = (
        bank.features.double().sort(dim=-1, descending=True).values[..., stats.indices]
    )  # (P, V, M)
    within = (ranked.std(dim=1) / ranked.mean(dim=1)).mean()
    return float(within), float(stats.cv[stats.indices].mean())
