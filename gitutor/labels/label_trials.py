"""Batches with repeated labels and how to score a recovered label multiset (Ye et al. 2024, Fig. 4(a)).

Batch label recovery returns a multiset: which classes, how many images each, not which image has
which label. Two scores follow: the per-label accuracy Σ_k min(n̂_k, n_k) / N (the fraction of the
batch's labels that are recovered) and whether the whole batch is exact (n̂ = n).
"""

from __future__ import annotations

import torch


def sample_repeated_labels(
    batch_size: int,
    num_classes: int,
    max_classes: int,
    generator: torch.Generator,
    *,
    min_classes: int = 2,
) -> torch.Tensor:
    """Labels of a batch with repeats: K ∈ [min_classes, min(max_classes, N − 1)] classes, uniform counts.

    K is uniform, the K classes are uniform without replacement among ``num_classes``, and the counts
    are a uniform composition of N into K positive parts, so at least one class repeats.

    Args:
        batch_size: N ≥ 3.
        num_classes: C ≥ 2, classes of the model.
        max_classes: the most distinct classes a batch may hold (≥ 2).
        generator: torch generator (the same seed gives the same batches).
        min_classes: the fewest distinct classes (≥ 2, ≤ the upper bound).

    Returns:
        ``(N,)`` int64 labels in random order.

    Raises:
        ValueError: for N < 3, C < 2, max_classes < 2, or min_classes outside [2, upper bound].
    """
    if batch_size < 3:
        raise ValueError(
            f"a batch with a repeated label and ≥ 2 classes needs batch_size ≥ 3, got {batch_size}"
        )
    if num_classes < 2 or max_classes < 2:
        raise ValueError(
            f"need num_classes ≥ 2 and max_classes ≥ 2, got {num_classes} and {max_classes}"
        )
    high = min(max_classes, batch_size - 1, num_classes)
    if not 2 <= min_classes <= high:
        raise ValueError(
            f"min_classes must be in [2, {high}] for batch_size={batch_size}, max_classes={max_classes}, "
            f"got {min_classes}"
        )
    distinct = int(torch.randint(min_classes, high + 1, (1,), generator=generator))
    classes = torch.randperm(num_classes, generator=generator)[:distinct]
    cuts = (
        (torch.randperm(batch_size - 1, generator=generator)[: distinct - 1] + 1)
        .sort()
        .values
    )
    counts = torch.diff(
        torch.cat([torch.tensor([0]), cuts, torch.tensor([batch_size])])
    )
    labels = classes.repeat_interleave(counts)
    return labels[torch.randperm(batch_size, generator=generator)]


def batch_label_scores(
    predicted: torch.Tensor, truth: torch.Tensor
) -> dict[str, float]:
    """Score a recovered label multiset against the true labels (order of images ignored).

    Args:
        predicted: ``(N̂,)`` int64 recovered labels (N̂ may differ from N, e.g. for bias counts).
        truth: ``(N,)`` int64 true labels.

    Returns:
        ``{"accuracy": Σ_k min(n̂_k, n_k) / N, "exact": 1.0 if the multisets are equal else 0.0}``.

    Raises:
        ValueError: if either tensor is not 1-D integer, or ``truth`` is empty or holds negative labels.
    """
    for name, labels in (("predicted", predicted), ("truth", truth)):
        if labels.dim() != 1 or labels.is_floating_point() or labels.is_complex():
            raise ValueError(
                f"{name} must be a 1-D integer label tensor, got {labels.dtype} {tuple(labels.shape)}"
            )
        if labels.numel() and int(labels.min()) < 0:
            raise ValueError(f"{name} holds negative labels")
    if truth.numel() == 0:
        raise ValueError("truth is empty")
    size = int(max(predicted.max() if predicted.numel() else 0, truth.max())) + 1
    recovered = torch.bincount(predicted.cpu(), minlength=size)
    actual = torch.bincount(truth.cpu(), minlength=size)
    return {
        "accuracy": float(torch.minimum(recovered, actual).sum()) / truth.numel(),
        "exact": float(torch.equal(recovered, actual)),
    }


def sample_pool_batch(
    pool_labels: torch.Tensor | None,
    pool_size: int,
    batch_size: int,
    num_classes: int,
    max_classes: int,
    generator: torch.Generator,
    *,
    min_classes: int = 2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick a batch with repeated labels from a pool of images: ``(indices into the pool, labels)``.

    Without ``pool_labels`` (crops of photographs attacking a randomly initialised model, where a
    label is just an index) the images are a random subset and the labels come from
    :func:`sample_repeated_labels`. With ``pool_labels`` (e.g. ImageNet validation images) the same
    count pattern is filled with real classes of the pool that have enough images.

    Returns:
        ``indices`` ``(N,)`` int64 and ``labels`` ``(N,)`` int64.

    Raises:
        ValueError: as :func:`sample_repeated_labels`, if the pool is smaller than N, or no class of the
            pool has enough images left for one of the sampled counts.
    """
    if pool_size < batch_size:
        raise ValueError(
            f"the pool holds {pool_size} images, fewer than batch_size={batch_size}"
        )
    labels = sample_repeated_labels(
        batch_size, num_classes, max_classes, generator, min_classes=min_classes
    )
    if pool_labels is None:
        return torch.randperm(pool_size, generator=generator)[:batch_size], labels
    available = torch.bincount(pool_labels.cpu(), minlength=num_classes)
    indices = []
    for count in torch.unique(labels, return_counts=True)[1].tolist():
        candidates = torch.nonzero(available >= count).flatten()
        if candidates.numel() == 0:
            raise ValueError(
                f"no class of the pool has {count} images left; load a larger pool"
            )
        chosen = int(
            candidates[torch.randint(candidates.numel(), (1,), generator=generator)]
        )
        available[chosen] = 0
        members = torch.nonzero(pool_labels.cpu() == chosen).flatten()
        indices.append(
            members[torch.randperm(members.numel(), generator=generator)[:count]]
        )
    indices = torch.cat(indices)
    return indices, pool_labels.cpu()[indices]
