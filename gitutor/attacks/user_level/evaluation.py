"""Scores of user-level reconstructions (Li et al. 2023, §3 "Evaluation Metrics", Table 1a) and the
identity test of this book: is a user's representative image closer to *this* user's photos than
to any other user's?

Intervals come from :mod:`gitutor.stats` (Student-t 95 %), as in every chapter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
import torch

from gitutor.checks import check_images
from gitutor.metrics import lpips_distance, lpips_or_none, mse, psnr, ssim
from gitutor.stats import interval


@lru_cache(maxsize=1)
def _lpips_available() -> bool:
    return (
        lpips_or_none(torch.zeros(1, 3, 16, 16), torch.zeros(1, 3, 16, 16)) is not None
    )


def paired_scores(x: torch.Tensor, y: torch.Tensor) -> dict[str, float | None]:
    """MSE, PSNR (dB), SSIM and LPIPS (None without its weights) of x[i] against y[i], averaged over i."""
    lpips = lpips_distance(x, y) if _lpips_available() else None
    return {
        "mse": float(mse(x, y).mean()),
        "psnr": float(psnr(x, y).mean()),
        "ssim": float(ssim(x, y).mean()),
        "lpips": None if lpips is None else float(lpips.mean()),
    }


def _check_representative(representative: torch.Tensor, batch: torch.Tensor) -> None:
    check_images(batch, "batch")
    check_images(
        representative, "representative", in_range=False
    )  # a reconstruction: clipped by the metrics
    if (
        representative.dim() != 4
        or representative.shape[0] != 1
        or representative.shape[1:] != batch.shape[1:]
    ):
        raise ValueError(
            f"representative must be (1, {', '.join(map(str, batch.shape[1:]))}), "
            f"got {tuple(representative.shape)}"
        )


def representative_scores(
    representative: torch.Tensor, batch: torch.Tensor
) -> dict[str, float | None]:
    """Scores of one image ``(1, C, H, W)`` against every image of the user's ``batch``
    ``(B, C, H, W)`` in [0, 1], averaged (Table 1a).

    Raises:
        TypeError: for non-float images.
        ValueError: naming ``batch`` if it is not ``(B, C, H, W)`` in [0, 1] (e.g. channels-last,
            0–255 pixels; :func:`gitutor.checks.check_images`), ``representative`` if it is not one
            finite image shaped like the batch's.
    """
    _check_representative(representative, batch)
    return paired_scores(representative.expand_as(batch), batch)


def intra_user_scores(batch: torch.Tensor) -> dict[str, float | None]:
    """The intra-user reference of Table 1a: scores averaged over all pairs i < j of the user's photos
    ``batch`` ``(B, C, H, W)`` in [0, 1].

    Raises:
        TypeError: for non-float images.
        ValueError: naming ``batch`` if it holds fewer than 2 images or is not ``(B, C, H, W)`` in
            [0, 1] (:func:`gitutor.checks.check_images`).
    """
    check_images(batch, "batch")
    if batch.dim() != 4 or batch.shape[0] < 2:
        raise ValueError(
            f"batch must be (B >= 2, C, H, W), got shape {tuple(batch.shape)}"
        )
    i, j = torch.triu_indices(len(batch), len(batch), offset=1)
    return paired_scores(batch[i], batch[j])


def user_distance_matrix(
    representatives: Sequence[torch.Tensor],
    batches: Sequence[torch.Tensor],
    metric: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = mse,
) -> np.ndarray:
    """``(U, U)`` matrix: entry [i, j] = metric of representative i against user j's photos, averaged.

    ``metric`` maps two equal-shape batches to per-image values (``gitutor.metrics.mse``, ``ssim``).

    Raises:
        ValueError: naming ``batches`` if the counts differ or a batch is not ``(B, C, H, W)`` in
            [0, 1], ``representative`` for a bad shape (as :func:`representative_scores`).
    """
    if len(representatives) != len(batches) or len(batches) < 2:
        raise ValueError(
            f"batches must hold >= 2 users, one per representative; got {len(batches)} batches "
            f"for {len(representatives)} representatives"
        )
    for rep, batch in zip(representatives, batches):
        _check_representative(rep, batch)
    return np.array(
        [
            [float(metric(rep.expand_as(batch), batch).mean()) for batch in batches]
            for rep in representatives
        ]
    )


def own_user_matches(matrix: np.ndarray, better: str = "lower") -> list[bool]:
    """Per user i: does representative i score strictly better on its own user's photos than on
    every other user's (matrix[i, i] < matrix[i, j] for all j ≠ i; ``better="higher"``: >)?

    Raises:
        ValueError: naming ``matrix`` (not square, < 2 users) or ``better``.
    """
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        raise ValueError(
            f"matrix must be square with >= 2 users, got shape {matrix.shape}"
        )
    if better not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' or 'higher', got {better!r}")
    signed = matrix if better == "lower" else -matrix
    others = signed + np.diag(np.full(len(signed), np.inf))
    return [bool(v) for v in np.diag(signed) < others.min(axis=1)]


def own_user_match_rate(matrix: np.ndarray, better: str = "lower") -> float:
    """Fraction of users whose representative matches them (:func:`own_user_matches`). Chance: 1/U.

    Raises:
        ValueError: naming ``matrix`` (not square, < 2 users) or ``better``.
    """
    return float(np.mean(own_user_matches(matrix, better)))


def mean_interval(values: Sequence[float]) -> tuple[float, float]:
    """Mean and half-width of its 95 % interval (:func:`gitutor.stats.interval`, Student-t).

    Raises:
        ValueError: naming ``values`` with fewer than 2 finite entries.
    """
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or len(array) < 2 or not np.all(np.isfinite(array)):
        raise ValueError(f"values must be >= 2 finite numbers, got {values!r}")
    summary = interval(array.tolist())
    return summary.mean, summary.high - summary.mean


def interval_ordering(groups: Sequence[tuple[str, Sequence[float]]]) -> str:
    """Whether ``groups`` are in increasing order beyond noise, judged by :func:`mean_interval`.

    Returns ``"holds"`` when every group's 95 % interval lies entirely below the next group's,
    ``"reversed"`` when some interval lies entirely *above* the next one, else
    ``"not resolved at this budget"`` (some consecutive intervals overlap).

    Raises:
        ValueError: naming ``groups`` with fewer than two groups (or as :func:`mean_interval`).
    """
    if len(groups) < 2:
        raise ValueError(
            f"groups must hold >= 2 (name, values) pairs, got {len(groups)}"
        )
    intervals = [mean_interval(values) for _, values in groups]
    pairs = list(zip(intervals, intervals[1:]))
    if any(m1 - h1 > m2 + h2 for (m1, h1), (m2, h2) in pairs):
        return "reversed"
    return (
        "holds"
        if all(m1 + h1 < m2 - h2 for (m1, h1), (m2, h2) in pairs)
        else "not resolved at this budget"
    )
