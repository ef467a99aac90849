"""An identity test of user-level reconstructions that brightness cannot win (this book's, for
Li et al. 2023's claim that the representative image reveals *who* the user is, §1 and Table 1b).

Why a new test: scored by MSE, a representative is "closest to its own user" whenever it has the
user's overall brightness — and the quick profile's label *is* "brighter than the median face",
which the gradient reveals. So every image is first **standardised** (its own mean subtracted,
divided by its own standard deviation): what is left is the layout of light and dark (eyes, nose,
mouth, hair line), and the similarity of two images is their Pearson correlation r ∈ [−1, 1]
(the MSE of two standardised images is 2(1 − r)).

The test is a **pairing test** (a two-alternative forced choice): for two users i and j, shown
their two representatives and their two mean photos, is the right pairing more similar than the
swapped one, S[i, i] + S[j, j] > S[i, j] + S[j, i]? A user's score is the fraction of the other users
(optionally: only those with the same label) for which the pairing is right; ties count ½. Chance
is ½, and a representative that does not depend on the user (the same face for everyone) scores
exactly ½. The pairing is blind to "hub" users and images: a term that makes one user's photos
(or one representative) similar to everything cancels from both sides.

Intervals: a user's score lies in [0, 1]; :func:`score_interval` gives the Wilson 95 % interval
of the mean score with n = the number of users, which stays inside [0, 1] and is conservative
(the variance of a mean of values in [0, 1] with mean p is at most p(1 − p)/n, the binomial one).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from gitutor.stats import CONFIDENCE, Interval


def standardise(images: torch.Tensor) -> torch.Tensor:
    """Each image of ``(N, C, H, W)`` minus its own mean, divided by its own standard deviation
    (over C, H, W); a constant image becomes all zeros. Output: float64, same shape.

    Raises:
        ValueError: naming ``images`` if it is not a finite ``(N, C, H, W)`` tensor.
    """
    if (
        not isinstance(images, torch.Tensor)
        or images.dim() != 4
        or not torch.isfinite(images).all()
    ):
        raise ValueError(
            f"images must be a finite (N, C, H, W) tensor, got {getattr(images, 'shape', images)!r}"
        )
    flat = images.detach().double().flatten(1)
    centred = flat - flat.mean(1, keepdim=True)
    scale = centred.pow(2).mean(1, keepdim=True).sqrt()
    return torch.where(
        scale > 1e-12, centred / scale.clamp(min=1e-12), torch.zeros_like(centred)
    ).view_as(images)


def correlation_matrix(
    representatives: Sequence[torch.Tensor], means: Sequence[torch.Tensor]
) -> np.ndarray:
    """``(U, U)`` Pearson correlations: entry [i, j] = r(representative i, user j's mean photo), each
    a ``(1, C, H, W)`` image; r = 0 when either image is constant. Unchanged when any image is
    brightened or its contrast scaled (a positive affine change of its grey values).

    Raises:
        ValueError: naming ``means`` for fewer than 2 users, counts that differ or shapes that differ.
    """
    if len(means) < 2 or len(representatives) != len(means):
        raise ValueError(
            f"means must hold >= 2 users, one per representative; got {len(means)} means for "
            f"{len(representatives)} representatives"
        )
    reps, users = (
        standardise(torch.cat(list(representatives))),
        standardise(torch.cat(list(means))),
    )
    if reps.shape != users.shape:
        raise ValueError(
            f"means must have the representatives' shape, got {tuple(users.shape)} and "
            f"{tuple(reps.shape)}"
        )
    return (reps.flatten(1) @ users.flatten(1).T / reps[0].numel()).numpy()


def pairing_scores(
    similarity: np.ndarray, labels: Sequence[int] | None = None
) -> np.ndarray:
    """Per user i: the fraction of other users j (with ``labels`` given: only those with user i's
    label) for which S[i, i] + S[j, j] > S[i, j] + S[j, i] (higher S = more similar; ties ½).

    Returns:
        ``(U,)`` float array in [0, 1]; NaN for a user with no eligible partner (alone with its label).

    Raises:
        ValueError: naming ``similarity`` (not square, < 2 users, not finite) or ``labels`` (length).
    """
    s = np.asarray(similarity, dtype=float)
    if (
        s.ndim != 2
        or s.shape[0] != s.shape[1]
        or s.shape[0] < 2
        or not np.isfinite(s).all()
    ):
        raise ValueError(
            f"similarity must be a finite square matrix with >= 2 users, got shape {s.shape}"
        )
    if labels is not None and len(labels) != len(s):
        raise ValueError(
            f"labels must hold one label per user ({len(s)}), got {len(labels)}"
        )
    own = np.diag(s)
    margin = (
        own[:, None] + own[None, :] - s - s.T
    )  # > 0: the right pairing of i and j wins
    outcome = np.where(
        np.isclose(margin, 0.0, atol=1e-12), 0.5, (margin > 0).astype(float)
    )
    eligible = ~np.eye(len(s), dtype=bool)
    if labels is not None:
        labels = np.asarray(labels)
        eligible &= labels[:, None] == labels[None, :]
    counts = eligible.sum(1)
    with np.errstate(invalid="ignore"):
        return np.where(
            counts > 0, (outcome * eligible).sum(1) / np.maximum(counts, 1), np.nan
        )


def score_interval(scores: Sequence[float]) -> Interval:
    """Mean of per-user scores in [0, 1] (NaN entries left out) and its Wilson 95 % interval with
    n = the number of users (see the module docstring: conservative, inside [0, 1]).

    Raises:
        ValueError: naming ``scores`` if no finite score is left or one lies outside [0, 1].
    """
    values = np.asarray(scores, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0 or values.min() < 0 or values.max() > 1:
        raise ValueError(
            f"scores must hold >= 1 finite value in [0, 1], got {list(scores)!r}"
        )
    mean, n = float(values.mean()), int(values.size)
    low, high = _wilson(mean, n)
    return Interval(mean, min(mean, low), max(mean, high), n)


def _wilson(share: float, n: int) -> tuple[float, float]:
    """Wilson 95 % interval of a share (any value in [0, 1], not only k/n) observed on n trials
    (as :func:`gitutor.stats.success_interval`, which takes 0/1 outcomes)."""
    from scipy import stats as scipy_stats

    z = float(scipy_stats.norm.ppf(0.5 + CONFIDENCE / 2))
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))
