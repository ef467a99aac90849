"""Chapter 05: what the matching weight λ does (Eq. 14 as written, λ = 1, against the profile's λ).

A paired design: each user is attacked twice with Algorithm 1 on the *same* gradient and the *same*
seed (the same x_T, ε draws, τ jitter and augmentations), the two runs differing only in λ
(:func:`gitutor.chapters.diffusion_user_level.experiments.diffula_users`). The evidence is the
per-user difference λ_profile − λ = 1 and its 95 % interval over users (:mod:`gitutor.paired`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from gitutor.attacks.user_level import correlation_matrix, representative_scores
from gitutor.paired import compare_paired, paired_difference
from gitutor.stats import interval


def clip_share(result) -> float:
    """Fraction of Algorithm 1's steps in which the clip ζ_i binds (scales the matching gradient down),
    from ``result.history["clip_scale"]``."""
    return float(np.mean(np.asarray(result.history["clip_scale"]) < 1))


def own_user_margin(
    representatives: Sequence[torch.Tensor], references: Sequence[torch.Tensor]
) -> np.ndarray:
    """Per representative i ``(1, C, H, W)``: its correlation with user i's reference minus its mean
    correlation with the other users' references (``references``: one per user, images standardised,
    :func:`~gitutor.attacks.user_level.correlation_matrix`), in [−2, 2]; 0 when the image does not
    depend on which user it came from. ``representatives`` may cover only the first users.

    Raises:
        ValueError: naming ``representatives`` if there are more of them than ``references`` or none.
    """
    k, users = len(representatives), len(references)
    if not 1 <= k <= users or users < 2:
        raise ValueError(
            f"representatives must hold 1 to {users} images (one per user, first users first) "
            f"and references >= 2; got {k} and {users}"
        )
    padded = list(representatives) + list(references[k:])  # rows beyond k are not read
    matrix = correlation_matrix(padded, references)[:k]
    own = np.diag(matrix[:, :k])
    return own - (matrix.sum(1) - own) / (users - 1)


def matching_weight_study(
    plain: Sequence, weighted: Sequence, users: Sequence[torch.Tensor], weight: float
) -> dict:
    """λ = 1 (``plain``) against λ = ``weight`` (``weighted``), paired per user: result k of each ran on
    user k's gradient with user k's seed (:func:`~gitutor.chapters.diffusion_user_level.experiments.diffula_users`).

    Args:
        plain, weighted: Algorithm 1 results; ``weighted`` may cover more users than ``plain`` (only the
            first ``len(plain)`` are paired).
        users: every user's ``(B, C, H, W)`` photos in [0, 1] (the references are their means).
        weight: the profile's λ, naming the two sides in ``read``.

    Returns:
        ``n`` (paired users), ``margin_plain`` (the λ = 1 own-user margins' mean and 95 % interval over
        users: 0 when its image does not depend on its user), floats ``ratio_plain`` (median over users of the median over steps of
        λ‖∇d‖ / ‖g_p‖ with λ = 1), ``clip_plain`` / ``clip_weighted`` (mean over users of
        :func:`clip_share`), ``intervals`` ``{"margin", "mse"}`` of the paired differences λ = weight − λ = 1
        of :func:`own_user_margin` and of the MSE to the user's photos, ``read`` (each as
        :func:`gitutor.paired.compare_paired` reads it); the page states them in Markdown, glued.

    Raises:
        ValueError: naming ``plain`` for fewer than 2 paired users or more than ``weighted`` holds.
    """
    n = len(plain)
    if not 2 <= n <= len(weighted) <= len(users):
        raise ValueError(
            f"plain must hold >= 2 results, paired with the first of the {len(weighted)} weighted "
            f"ones and {len(users)} users; got {n}"
        )
    references = [x.cpu().mean(0, keepdim=True) for x in users]
    margins = {
        name: own_user_margin([r.images.cpu() for r in runs[:n]], references)
        for name, runs in (("plain", plain), ("weighted", weighted))
    }
    mses = {
        name: [
            representative_scores(r.images.cpu(), x.cpu())["mse"]
            for r, x in zip(runs[:n], users)
        ]
        for name, runs in (("plain", plain), ("weighted", weighted))
    }
    labels = (f"λ = {weight:g}", "λ = 1")
    intervals = {
        "margin": paired_difference(margins["weighted"], margins["plain"]),
        "mse": paired_difference(mses["weighted"], mses["plain"]),
    }
    read = {
        "margin": compare_paired(margins["weighted"], margins["plain"], labels),
        "mse": compare_paired(mses["weighted"], mses["plain"], labels),
    }
    alone = interval(
        margins["plain"].tolist(), bounds=(-2.0, 2.0)
    )  # λ = 1 against 0: does its image depend on its user?
    return {
        "n": n,
        "margin_plain": alone,
        "ratio_plain": float(
            np.median([np.median(r.history["grad_ratio"]) for r in plain])
        ),
        "clip_plain": float(np.mean([clip_share(r) for r in plain])),
        "clip_weighted": float(np.mean([clip_share(r) for r in weighted[:n]])),
        "intervals": intervals,
        "read": read,
    }
