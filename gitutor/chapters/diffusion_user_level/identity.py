"""Chapter 05: does each representative identify its own user, and does the diffusion prior help?

The identity test is :mod:`gitutor.attacks.user_level.identity` (images standardised, so
brightness — the quick profile's label — cannot win it; a pairing test with chance ½). Next to it
the old own-user match by MSE, which a constant image at the user's mean grey level can win, is
kept as a reminder of why. The prior's effect is the paired per-user difference DiffULA − user-level
Inverting Gradients without prior on the same users, same gradients and same budget.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from gitutor.attacks.user_level import own_user_match_rate, user_distance_matrix
from gitutor.attacks.user_level.identity import correlation_matrix, pairing_scores, score_interval
from gitutor.stats import Interval, NOT_RESOLVED, format_interval, interval
from gitutor.tables import markdown_table

#: The row name of the brightness-only calibration (a constant image at the user's mean grey level).
BRIGHTNESS_ONLY = "brightness only: a flat image at the user's mean grey level (calibration)"
#: Scores of Table 1a compared between DiffULA and the prior-free baseline, with their ranges
#: (the range of a difference) and which direction is better.
PRIOR_METRICS = {"mse": ((-1.0, 1.0), "lower", 4), "psnr": ((-np.inf, np.inf), "higher", 2),
                 "ssim": ((-2.0, 2.0), "higher", 3), "lpips": ((-np.inf, np.inf), "lower", 3)}
#: Display names of the compared scores.
METRIC_NAMES = {"mse": "MSE", "psnr": "PSNR", "ssim": "SSIM", "lpips": "LPIPS", "pairing": "the identity test"}


def brightness_only(means: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """One flat image per user at the mean grey level of its mean photo ``(1, C, H, W)``: a
    "representative" that knows only the user's brightness."""
    return [torch.full_like(m, float(m.mean())) for m in means]


def identity_study(candidates: Mapping[str, Sequence[torch.Tensor]], means: Sequence[torch.Tensor],
                   labels: Sequence[int]) -> dict:
    """The identity test of every candidate's representatives ``(1, C, H, W)`` against the users'
    mean photos ``means`` (one per user, same order; ``labels`` one per user).

    Returns:
        ``scores[name]`` (per-user pairing scores, all users), ``same_label[name]`` (the same, against
        users with the same label only; NaN for a user alone with its label), ``intervals[name]`` and
        ``same_intervals[name]`` (:func:`~gitutor.attacks.user_level.identity.score_interval`),
        ``mse_match[name]`` (the old own-user match rate by MSE), ``correlations[name]`` (the
        ``(U, U)`` matrix) and ``table`` (Markdown, one row per candidate).

    Raises:
        ValueError: as :func:`~gitutor.attacks.user_level.identity.correlation_matrix` (< 2 users, shapes).
    """
    out = {key: {} for key in ("scores", "same_label", "intervals", "same_intervals", "mse_match", "correlations")}
    for name, reps in candidates.items():
        similarity = correlation_matrix(reps, means)
        out["correlations"][name] = similarity
        out["scores"][name], out["same_label"][name] = pairing_scores(similarity), pairing_scores(similarity, labels)
        out["intervals"][name] = score_interval(out["scores"][name])
        finite = out["same_label"][name][np.isfinite(out["same_label"][name])]
        out["same_intervals"][name] = score_interval(finite) if finite.size else None
        out["mse_match"][name] = own_user_match_rate(user_distance_matrix(reps, means))
    rows = [[name, f"{out['mse_match'][name]:.2f}", format_interval(out["intervals"][name], 2, count=False),
             "n/a" if out["same_intervals"][name] is None
             else format_interval(out["same_intervals"][name], 2, count=False)]
            for name in candidates]
    out["table"] = markdown_table(["representative", "own-user match by MSE (brightness can win)",
                                   "pairing score, standardised [95 %]", "same-label pairs only [95 %]"], rows)
    return out


def above_chance(summary: Interval | None) -> str:
    """``"above chance"`` when the whole 95 % interval lies above ½, ``"at or below chance"`` when it
    lies at or below ½ entirely, else :data:`gitutor.stats.NOT_RESOLVED`."""
    if summary is None:
        return NOT_RESOLVED
    if summary.low > 0.5:
        return "above chance"
    return "at or below chance" if summary.high <= 0.5 else NOT_RESOLVED


def prior_effect(rows: Mapping[str, Sequence[Mapping]], identity: Mapping, with_prior: str, without: str) -> dict:
    """What the diffusion prior changes, user by user: the paired differences ``with_prior`` −
    ``without`` of MSE, PSNR, SSIM and LPIPS (``rows``:
    :func:`~gitutor.chapters.diffusion_user_level.experiments.evaluate_users`; LPIPS only when every user of both
    methods has a value, i.e. its backbone is installed) and of the pairing score (``identity``: :func:`identity_study`).

    Returns:
        ``intervals`` ``{metric: Interval}`` of the differences (``"pairing"`` included),
        ``helps`` ``{metric: "helps" | "hurts" | NOT_RESOLVED}`` (the interval lies on one side of 0,
        read with the metric's better direction), ``sentence`` (plain text for the page) and
        ``table`` (Markdown).

    Raises:
        KeyError: for a method missing from ``rows`` or ``identity``; ValueError: fewer than 2 users.
    """
    directions = {metric: better for metric, (_, better, _) in PRIOR_METRICS.items()} | {"pairing": "higher"}
    digits = {metric: d for metric, (_, _, d) in PRIOR_METRICS.items()} | {"pairing": 2}
    pairs = list(zip(rows[with_prior], rows[without]))
    scored = [m for m in PRIOR_METRICS if all(a.get(m) is not None and b.get(m) is not None for a, b in pairs)]
    intervals = {metric: interval([a[metric] - b[metric] for a, b in pairs], bounds=PRIOR_METRICS[metric][0])
                 for metric in scored}
    intervals["pairing"] = interval(list(identity["scores"][with_prior] - identity["scores"][without]),
                                    bounds=(-1.0, 1.0))
    helps = {}
    for metric, summary in intervals.items():
        sign = 1 if directions[metric] == "higher" else -1
        good, bad = (summary.low, summary.high) if sign > 0 else (-summary.high, -summary.low)
        helps[metric] = "helps" if good > 0 else "hurts" if bad < 0 else NOT_RESOLVED
    names = METRIC_NAMES
    hurts = [names[m] for m in scored if helps[m] == "hurts"]
    gains = [names[m] for m in scored if helps[m] == "helps"]
    pairing = intervals["pairing"]
    ceiling = all(float(np.min(identity["scores"][m])) == 1.0 for m in (with_prior, without))
    identity_text = ("the identity test cannot separate it from no prior: both pair every user with its own "
                     "photographs (pairing score 1.00 for each user), the test's ceiling" if ceiling else
                     f"the identity test does not separate it from no prior (paired difference "
                     f"{format_interval(pairing, 2, count=False)}: its interval includes 0)"
                     if helps["pairing"] == NOT_RESOLVED else f"on the identity test the prior {helps['pairing']}")
    if gains:
        sentence = f"In this run the diffusion prior helps on {', '.join(gains)}"
        sentence += f" and hurts on {', '.join(hurts)}" if hurts else ""
        sentence += f"; {identity_text}."
    elif hurts:
        sentence = (f"In this run the diffusion prior does not help: without it the same user-level attack is "
                    f"closer to the users' photos on {', '.join(hurts)} (each 95 % interval of the per-user "
                    f"differences lies on the prior's losing side of 0), and {identity_text}.")
    else:
        sentence = f"In this run the intervals do not resolve whether the diffusion prior helps or hurts; {identity_text}."
    table = markdown_table(["score", "better", "DiffULA − IG without prior, per user [95 %]", "the prior"],
                           [[names[m], directions[m], format_interval(intervals[m], digits[m]), helps[m]]
                            for m in intervals])
    return {"intervals": intervals, "helps": helps, "sentence": sentence, "table": table}
