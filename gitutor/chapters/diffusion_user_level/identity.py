"""Chapter 05: does each representative identify its own user, and does the diffusion prior help?

The identity test is :mod:`gitutor.attacks.user_level.identity` (images standardised, so
brightness — the quick profile's label — cannot win it): a pairing test with chance ½ and a
closed-set identification among all users (is the representative most like its own user's
reference, chance 1/U). Next to it the old own-user match by MSE, which a constant image at the
user's mean grey level can win, is kept as a reminder of why. The prior's effect is the paired
per-user difference DiffULA − user-level Inverting Gradients without prior on the same users and
gradients: the same objective, with Inverting Gradients' recipe (TV, signed Adam, no window, clip, λ or
final denoising) instead of Algorithm 1's with its DDPM.

The test asks about the *person* only when each user's photos are different photographs of that
person (CelebA identities). When every user is one photograph and its variations (the quick
profile's LFW users), the reference is that photograph, any image that carries its layout wins, and
the test cannot separate the prior from no prior: :func:`prior_effect` then leaves it out and says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from gitutor.attacks.user_level import (
    own_user_match_rate,
    own_user_matches,
    user_distance_matrix,
)
from gitutor.attacks.user_level.identity import (
    correlation_matrix,
    pairing_scores,
    score_interval,
)
from gitutor.stats import (
    Interval,
    NOT_RESOLVED,
    format_interval,
    interval,
    success_interval,
)
from gitutor.tables import markdown_table

#: The row name of the brightness-only control (a constant image at the user's mean grey level).
BRIGHTNESS_ONLY = (
    "brightness only: a flat image at the user's mean grey level (control)"
)
#: Scores of Table 1a compared between DiffULA and the prior-free baseline, with their ranges
#: (the range of a difference) and which direction is better.
PRIOR_METRICS = {
    "mse": ((-1.0, 1.0), "lower", 4),
    "psnr": ((-np.inf, np.inf), "higher", 2),
    "ssim": ((-2.0, 2.0), "higher", 3),
    "lpips": ((-np.inf, np.inf), "lower", 3),
}
#: Why the identity test cannot separate the prior from no prior when every user is one photograph.
ONE_PHOTOGRAPH = (
    "each user's photos are variations of one photograph, so the reference is that photograph and "
    "any image that carries its layout of light and dark matches it; the test asks whether an image "
    "is this photograph, not this person"
)
#: Display names of the compared scores.
METRIC_NAMES = {
    "mse": "MSE",
    "psnr": "PSNR",
    "ssim": "SSIM",
    "lpips": "LPIPS",
    "pairing": "the identity test",
}


def brightness_only(means: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """One flat image per user at the mean grey level of its mean photo ``(1, C, H, W)``: a
    "representative" that knows only the user's brightness."""
    return [torch.full_like(m, float(m.mean())) for m in means]


#: The controls of the identity test, by role (:func:`identity_controls`), with their row names on the page.
CONTROLS = {
    "mean_photo": "the user's mean photo (the reference itself: the ceiling)",
    "real_photo": "one photo of the user (control)",
    "prior_sample": "a sample of the prior, not conditioned on the user (control)",
    "other_user": "another user's photo (control)",
    "brightness": BRIGHTNESS_ONLY,
}


def identity_controls(
    users: Sequence[torch.Tensor], samples: torch.Tensor
) -> dict[str, list[torch.Tensor]]:
    """The controls of the identity test, ``{CONTROLS name: one (1, C, H, W) image per user}``: the user's
    mean photo (the test's reference), the user's first photo, prior sample ``k mod len(samples)`` for user
    k resized to the users' side (it knows nothing of the user), user k + 1's first photo (mod U) for user
    k (a real face of the wrong person) and :func:`brightness_only`.

    Args:
        users: each user's ``(B, C, H, W)`` photos in [0, 1] (>= 2 users).
        samples: ``(N, C, H', W')`` prior samples in [0, 1], N >= 1.

    Raises:
        ValueError: naming ``users`` (fewer than 2) or ``samples`` (empty or other channels).
    """
    from gitutor.data import resize

    if len(users) < 2:
        raise ValueError(f"users must hold >= 2 users, got {len(users)}")
    side, channels = users[0].shape[-1], users[0].shape[1]
    if samples.dim() != 4 or len(samples) < 1 or samples.shape[1] != channels:
        raise ValueError(
            f"samples must be (N >= 1, {channels}, H, W), got {tuple(samples.shape)}"
        )
    means = [x.cpu().mean(0, keepdim=True) for x in users]
    shrunk = resize(samples.cpu().float(), side)
    roles = {
        "mean_photo": means,
        "real_photo": [x[:1].cpu() for x in users],
        "prior_sample": [shrunk[k % len(shrunk)][None] for k in range(len(users))],
        "other_user": [
            users[(k + 1) % len(users)][:1].cpu() for k in range(len(users))
        ],
        "brightness": brightness_only(means),
    }
    return {CONTROLS[role]: images for role, images in roles.items()}


def identity_study(
    candidates: Mapping[str, Sequence[torch.Tensor]],
    means: Sequence[torch.Tensor],
    labels: Sequence[int],
) -> dict:
    """The identity test of every candidate's representatives ``(1, C, H, W)`` against the users'
    references ``means`` (each user's mean photo, one per user, same order; ``labels`` one per user).

    Returns:
        ``scores[name]`` (per-user pairing scores, all users), ``same_label[name]`` (the same, against
        users with the same label only; NaN for a user alone with its label), ``intervals[name]`` and
        ``same_intervals[name]`` (:func:`~gitutor.attacks.user_level.identity.score_interval`),
        ``identified[name]`` (closed-set identification among all U users: representative i is most
        correlated with user i's reference; a Wilson interval over users, chance 1/U),
        ``mse_match[name]`` (the old own-user match rate by MSE), ``correlations[name]`` (the
        ``(U, U)`` matrix) and ``table`` (Markdown, one row per candidate).

    Raises:
        ValueError: as :func:`~gitutor.attacks.user_level.identity.correlation_matrix` (< 2 users, shapes).
    """
    keys = (
        "scores",
        "same_label",
        "intervals",
        "same_intervals",
        "identified",
        "mse_match",
        "correlations",
    )
    out = {key: {} for key in keys}
    for name, reps in candidates.items():
        similarity = correlation_matrix(reps, means)
        out["correlations"][name] = similarity
        out["scores"][name], out["same_label"][name] = (
            pairing_scores(similarity),
            pairing_scores(similarity, labels),
        )
        out["intervals"][name] = score_interval(out["scores"][name])
        finite = out["same_label"][name][np.isfinite(out["same_label"][name])]
        out["same_intervals"][name] = score_interval(finite) if finite.size else None
        out["identified"][name] = success_interval(
            own_user_matches(similarity, better="higher")
        )
        out["mse_match"][name] = own_user_match_rate(user_distance_matrix(reps, means))
    rows = [
        [
            name,
            format_interval(out["identified"][name], 2, count=False),
            format_interval(out["intervals"][name], 2, count=False),
            "n/a"
            if out["same_intervals"][name] is None
            else format_interval(out["same_intervals"][name], 2, count=False),
        ]
        for name in candidates
    ]
    out["table"] = markdown_table(
        [
            "representative",
            f"identified among {len(means)} users [95 %]",
            "pairing score [95 %]",
            "same-label pairs only [95 %]",
        ],
        rows,
    )
    return out


def above_chance(summary: Interval | None) -> str:
    """``"above chance"`` when the whole 95 % interval lies above ½, ``"at or below chance"`` when it
    lies at or below ½ entirely, else :data:`gitutor.stats.NOT_RESOLVED`."""
    if summary is None:
        return NOT_RESOLVED
    if summary.low > 0.5:
        return "above chance"
    return "at or below chance" if summary.high <= 0.5 else NOT_RESOLVED


def prior_effect(
    rows: Mapping[str, Sequence[Mapping]],
    identity: Mapping,
    with_prior: str,
    without: str,
    distinct_photographs: bool = True,
) -> dict:
    """What the diffusion prior changes, user by user: the paired differences ``with_prior`` −
    ``without`` of MSE, PSNR, SSIM and LPIPS (``rows``:
    :func:`~gitutor.chapters.diffusion_user_level.experiments.evaluate_users`; LPIPS only when every user of both
    methods has a value, i.e. its backbone is installed) and of the pairing score (``identity``: :func:`identity_study`)
    — the latter only with ``distinct_photographs`` (each user's photos are different photographs of the person);
    without, the identity test cannot separate the two (:data:`ONE_PHOTOGRAPH`).

    Returns:
        ``intervals`` ``{metric: Interval}`` of the differences (``"pairing"`` with ``distinct_photographs``),
        ``helps`` ``{metric: "helps" | "hurts" | NOT_RESOLVED}`` (the interval lies on one side of 0,
        read with the metric's better direction) and ``table`` (Markdown); the page states the reading
        in its own Markdown with these words glued in.

    Raises:
        KeyError: for a method missing from ``rows`` or ``identity``; ValueError: fewer than 2 users.
    """
    directions = {
        metric: better for metric, (_, better, _) in PRIOR_METRICS.items()
    } | {"pairing": "higher"}
    digits = {metric: d for metric, (_, _, d) in PRIOR_METRICS.items()} | {"pairing": 2}
    pairs = list(zip(rows[with_prior], rows[without]))
    scored = [
        m
        for m in PRIOR_METRICS
        if all(a.get(m) is not None and b.get(m) is not None for a, b in pairs)
    ]
    intervals = {
        metric: interval(
            [a[metric] - b[metric] for a, b in pairs], bounds=PRIOR_METRICS[metric][0]
        )
        for metric in scored
    }
    if distinct_photographs:
        intervals["pairing"] = interval(
            list(identity["scores"][with_prior] - identity["scores"][without]),
            bounds=(-1.0, 1.0),
        )
    helps = {}
    for metric, summary in intervals.items():
        sign = 1 if directions[metric] == "higher" else -1
        good, bad = (
            (summary.low, summary.high) if sign > 0 else (-summary.high, -summary.low)
        )
        helps[metric] = "helps" if good > 0 else "hurts" if bad < 0 else NOT_RESOLVED
    names = METRIC_NAMES
    table = markdown_table(
        ["score", "better", "DiffULA − IG without prior, per user [95 %]", "the prior"],
        [
            [
                names[m],
                directions[m],
                format_interval(intervals[m], digits[m]),
                helps[m],
            ]
            for m in intervals
        ],
    )
    return {
        "intervals": intervals,
        "helps": helps,
        "table": table,
    }
