"""Integer label counts minimising Eq. 6, and Stage I as one call (Ye et al., AAAI 2024, Eq. 7–8).

*Evolutionary matching*: rescaling Rs, uniform crossover (Eq. 7), a one-unit mutation and
parent/child selection (Eq. 8); an exhaustive search as the reference; and
:func:`recover_batch_labels`, coarse labels followed by the evolutionary counts.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from gitutor.labels.batch_labels import (
    check_batch_size,
    check_fc_weight_grad,
    coarse_labels,
    cosine_objective,
    objective_direction,
)
from gitutor.labels.feature_cv import FeatureCV
from gitutor.models.introspect import last_linear

#: Largest number of count vectors :func:`exhaustive_label_counts` will enumerate.
MAX_EXHAUSTIVE = 2_000_000


class LabelCountSearch(NamedTuple):
    """Result of :func:`evolve_label_counts`: ``counts`` ``(K,)`` int64 and ``history`` (best J per generation)."""

    counts: torch.Tensor
    history: list[float]


def rescale_counts(vectors: np.ndarray, batch_size: int) -> np.ndarray:
    """Rs = Φ3 ∘ Φ2 ∘ Φ1 of Ye et al. 2024 ("Initializing Population"): real vectors → valid counts.

    Φ1 scales each row to sum N (its L1 magnitude), Φ2 sets every entry to max(⌊v_k⌋, 1), Φ3 adjusts
    the last entry so the row sums to N. When Φ2's ones push the sum above N by more than the last
    entry can give, the paper's Φ3 would leave it below 1; this implementation then sets it to 1 and
    takes the rest, one unit at a time, from the largest entries.

    Args:
        vectors: ``(P, K)`` or ``(K,)`` non-negative rows, each with a positive sum.
        batch_size: N ≥ K.

    Returns:
        int64 array of the input's shape; every entry ≥ 1, every row sums to N.

    Raises:
        ValueError: for negative entries, an all-zero row, non-finite values or N < K.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    rows = np.atleast_2d(vectors)
    check_batch_size(batch_size, rows.shape[1])
    if not np.isfinite(rows).all() or (rows < 0).any() or (rows.sum(axis=1) <= 0).any():
        raise ValueError(
            "vectors must be finite and non-negative with a positive sum per row"
        )
    scaled = rows * batch_size / rows.sum(axis=1, keepdims=True)  # Φ1
    counts = np.maximum(np.floor(scaled + 1e-9), 1).astype(
        np.int64
    )  # Φ2 (1e-9: 2.9999… → 3)
    counts[:, -1] += batch_size - counts.sum(axis=1)  # Φ3
    for row in np.nonzero(counts[:, -1] < 1)[0]:
        excess = 1 - counts[row, -1]
        counts[row, -1] = 1
        for _ in range(excess):
            counts[row, counts[row].argmax()] -= 1
    return counts.reshape(vectors.shape)


def _crossover(
    population: np.ndarray, rate: float, rng: np.random.Generator
) -> np.ndarray:
    """Uniform crossover of Eq. 7: child_k = own_k if γ_k < p_r else partner_k, partner j ≠ i random."""
    size = population.shape[0]
    partners = (np.arange(size) + rng.integers(1, size, size=size)) % size
    keep = rng.random(population.shape) < rate
    return np.where(keep, population, population[partners])


def _mutate(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Move one unit from a random entry > 1 to a random other entry (rows that are all ones stay)."""
    counts = counts.copy()
    size, length = counts.shape
    keys = np.where(counts > 1, rng.random(counts.shape), -1.0)
    source = keys.argmax(axis=1)
    offset = rng.integers(0, length - 1, size=size)
    target = offset + (offset >= source)
    rows = np.nonzero((counts > 1).any(axis=1))[0]
    counts[rows, source[rows]] -= 1
    counts[rows, target[rows]] += 1
    return counts


def evolve_label_counts(
    fc_weight_grad: torch.Tensor,
    classes: torch.Tensor,
    batch_size: int,
    stats: FeatureCV,
    *,
    population: int = 20,
    iterations: int = 200,
    crossover: float = 0.5,
    seed: int = 0,
    progress: bool = False,
) -> LabelCountSearch:
    """Search integer counts per class minimising Eq. 6 with the evolutionary algorithm of Ye et al. 2024.

    Initial population: ``population`` vectors drawn from U(0, 1)^K mapped by Rs. Each generation,
    every parent gets a child by uniform crossover with another random parent (Eq. 7, then Rs) and a
    one-unit mutation; the better of parent and child (lower J, the parent on ties) survives (Eq. 8).

    Args:
        fc_weight_grad: ``(C, m)`` FC weight gradient of the batch.
        classes: ``(K,)`` classes present (usually :func:`coarse_labels`).
        batch_size: N, the number of images (known to the server, as in the paper).
        stats: :class:`FeatureCV` from auxiliary images.
        population: m, individuals per generation (paper: 20), ≥ 2.
        iterations: generations (paper: < 200).
        crossover: p_r, probability of keeping the own entry in Eq. 7 (paper: 0.5).
        seed: seed of the numpy generator; the same seed gives the same counts.
        progress: show a tqdm bar over generations.

    Returns:
        :class:`LabelCountSearch`: ``counts`` ``(K,)`` int64 aligned with ``classes`` (each ≥ 1,
        summing to N) and ``history``, the population's best J after 0, 1, …, ``iterations`` generations.

    Raises:
        ValueError: if N is smaller than the number of classes, ``population < 2``, ``iterations < 0``,
            ``crossover`` outside [0, 1], or the gradient / classes / statistics do not fit together.
        TypeError: for a non-int ``batch_size``, ``population`` or ``iterations``, or a ``stats`` that is
            not a FeatureCV.
    """
    direction = objective_direction(fc_weight_grad, classes, stats)
    length = direction.shape[0]
    check_batch_size(batch_size, length)
    if type(population) is not int or type(iterations) is not int:
        raise TypeError(
            f"population and iterations must be ints, got {population!r} and {iterations!r}"
        )
    if population < 2:
        raise ValueError(
            f"population must be ≥ 2 (crossover needs a partner), got {population}"
        )
    if iterations < 0:
        raise ValueError(f"iterations must be ≥ 0, got {iterations}")
    if not 0.0 <= crossover <= 1.0:
        raise ValueError(f"crossover is a probability p_r in [0, 1], got {crossover}")
    if length == 1:
        return LabelCountSearch(
            torch.tensor([batch_size]), [float(cosine_objective(np.ones(1), direction))]
        )
    rng = np.random.default_rng(seed)
    parents = rescale_counts(rng.random((population, length)), batch_size)
    scores = cosine_objective(parents, direction)
    history = [float(scores.min())]
    for _ in tqdm(range(iterations), desc="evolution", disable=not progress):
        children = _mutate(
            rescale_counts(_crossover(parents, crossover, rng), batch_size), rng
        )
        child_scores = cosine_objective(children, direction)
        better = child_scores < scores
        parents[better], scores[better] = children[better], child_scores[better]
        history.append(float(scores.min()))
    return LabelCountSearch(torch.as_tensor(parents[scores.argmin()]), history)


def exhaustive_label_counts(
    fc_weight_grad: torch.Tensor,
    classes: torch.Tensor,
    batch_size: int,
    stats: FeatureCV,
) -> torch.Tensor:
    """The global minimiser of Eq. 6 over all C(N−1, K−1) count vectors (each ≥ 1, summing to N).

    A reference for :func:`evolve_label_counts`: it shows what the objective itself can achieve,
    independently of the search. Ties go to the first vector in lexicographic order.

    Returns:
        ``(K,)`` int64 counts aligned with ``classes``.

    Raises:
        ValueError: as :func:`evolve_label_counts`, or if there are more than :data:`MAX_EXHAUSTIVE`
            count vectors (use the evolutionary search).
    """
    direction = objective_direction(fc_weight_grad, classes, stats)
    length = direction.shape[0]
    check_batch_size(batch_size, length)
    total = math.comb(batch_size - 1, length - 1)
    if total > MAX_EXHAUSTIVE:
        raise ValueError(
            f"{total} count vectors for N={batch_size}, K={length}: too many to enumerate "
            f"(limit {MAX_EXHAUSTIVE}); use evolve_label_counts"
        )
    cuts = np.array(
        list(itertools.combinations(range(1, batch_size), length - 1)), dtype=np.int64
    )
    cuts = cuts.reshape(total, length - 1)
    bounds = np.concatenate(
        [np.zeros((total, 1), np.int64), cuts, np.full((total, 1), batch_size)], axis=1
    )
    candidates = np.diff(bounds, axis=1)
    return torch.as_tensor(candidates[cosine_objective(candidates, direction).argmin()])


def recover_batch_labels(
    model: nn.Module,
    fc_weight_grad: torch.Tensor,
    batch_size: int,
    stats: FeatureCV,
    *,
    population: int = 20,
    iterations: int = 200,
    crossover: float = 0.5,
    seed: int = 0,
) -> torch.Tensor:
    """Stage I of Ye et al. 2024: coarse labels, then counts by the evolutionary search on Eq. 6.

    Args:
        model: the attacked model; its last Linear layer fixes the expected gradient shape.
        fc_weight_grad: ``(C, m)`` batch-mean gradient of that layer's weight.
        batch_size: N, the number of images in the batch.
        stats: :class:`FeatureCV` fitted on auxiliary images with the same model.
        population, iterations, crossover, seed: as :func:`evolve_label_counts`.

    Returns:
        ``(N,)`` int64 labels on the CPU, sorted (a multiset: the order of images is not recoverable here).

    Raises:
        ValueError: if the gradient's shape is not the last Linear weight's, no row is negative (the
            gradient does not look like an early-training cross-entropy gradient), or N is smaller
            than the number of coarse labels; as :func:`evolve_label_counts` otherwise.
    """
    check_fc_weight_grad(fc_weight_grad)
    expected = tuple(last_linear(model).weight.shape)
    if tuple(fc_weight_grad.shape) != expected:
        raise ValueError(
            f"fc_weight_grad has shape {tuple(fc_weight_grad.shape)} but the model's last Linear weight "
            f"is {expected}; pass the gradient of that layer's weight"
        )
    classes = coarse_labels(fc_weight_grad)
    if classes.numel() == 0:
        raise ValueError(
            "no row of fc_weight_grad has a negative mean, so no class can be identified; the "
            "features must be non-negative (ReLU/Sigmoid before the FC layer) and p_k ≪ 1"
        )
    check_batch_size(batch_size, classes.numel())
    counts = evolve_label_counts(
        fc_weight_grad,
        classes,
        batch_size,
        stats,
        population=population,
        iterations=iterations,
        crossover=crossover,
        seed=seed,
    ).counts
    return classes.cpu().repeat_interleave(counts)
