"""Chapter 05's tables and paper-vs-run rows (Li et al. 2023, Table 1a–b); the identity test and the
prior's effect are in :mod:`gitutor.chapters.diffusion_user_level.identity`.

Paper numbers (CelebA 64×64, 50 users, B = 30, FFHQ-256 DDPM, Table 1a): MSE of IG (matched) 0.3192,
DiffULA 0.4210, intra-user 0.4981; LPIPS DiffULA 0.5039, IG (matched) 0.7165; face detection rates DiffULA 1.00, IG 0.03,
original batches 0.95; DiffULA run time 23.3 min per user on an A100.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from gitutor.metrics import LPIPS_NA, mse
from gitutor.paired import paired_difference
from gitutor.stats import NOT_RESOLVED, format_interval
from gitutor.tables import markdown_table


def average(rows: Mapping[str, Sequence[Mapping]], name: str, key: str) -> float | None:
    """Mean over users of ``rows[name][u][key]`` (None when any user's value is None, e.g. LPIPS without weights)."""
    values = [r[key] for r in rows[name]]
    return None if any(v is None for v in values) else float(np.mean(values))


def _fmt(value: float | None, digits: int) -> str:
    return LPIPS_NA if value is None else f"{value:.{digits}f}"


def method_table(rows: Mapping[str, Sequence[Mapping]]) -> str:
    """Table 1a in shape: one Markdown row per method with the users' mean MSE, PSNR, SSIM, LPIPS, face rate."""
    return markdown_table(
        ["method", "MSE ↓", "PSNR (dB) ↑", "SSIM ↑", "LPIPS ↓", "face detection rate"],
        [
            [
                name,
                _fmt(average(rows, name, "mse"), 4),
                _fmt(average(rows, name, "psnr"), 2),
                _fmt(average(rows, name, "ssim"), 3),
                _fmt(average(rows, name, "lpips"), 3),
                f"{average(rows, name, 'face_rate'):.2f}",
            ]
            for name in rows
        ],
    )


#: The scores of :func:`arm_differences`: display name, the better direction and digits.
ARM_METRICS = {
    "mse": ("MSE", "lower", 4),
    "ssim": ("SSIM", "higher", 3),
    "lpips": ("LPIPS", "lower", 3),
}


def arm_differences(
    rows: Mapping[str, Sequence[Mapping]], pairs: Mapping[str, tuple[str, str]]
) -> dict:
    """Paired differences a − b over users of two arms that ran on the same users (and, for the
    DiffULA arms, the same seeds): ``pairs`` maps a short key to the row names ``(a, b)`` of ``rows``
    (:func:`~gitutor.chapters.diffusion_user_level.experiments.evaluate_users` plus the arms scored by
    ``score_images``). An arm run on the first n users only (the no-prior control) is paired with the other
    arm's first n users: user k is user k in every arm. Each difference gets :func:`gitutor.paired.paired_difference`'s 95 % interval and a
    word for ``a``: ``"better"`` / ``"worse"`` when the interval lies on one side of 0 (read with the
    metric's direction, :data:`ARM_METRICS`), else :data:`gitutor.stats.NOT_RESOLVED`. LPIPS is left
    out when a user lacks it (its backbone not installed).

    Returns:
        ``values`` ``{f"{key}_{metric}": mean, …_low, …_high, …_word}`` (for glue), ``intervals``
        ``{key: {metric: Interval}}`` and ``table`` (Markdown, one row per pair).

    Raises:
        ValueError: naming ``pairs`` when it is empty or names a row missing from ``rows``; as
            :func:`~gitutor.paired.paired_difference` for an arm with no user.
    """
    if not pairs:
        raise ValueError("pairs must name at least one (a, b) pair of rows")
    for key, names in pairs.items():
        missing = [name for name in names if name not in rows]
        if len(names) != 2 or missing:
            raise ValueError(
                f"pairs[{key!r}] must be two row names of rows, got {names!r}"
            )
    values, intervals, table = {}, {}, []
    for key, (a, b) in pairs.items():
        intervals[key] = {}
        for metric, (name, better, digits) in ARM_METRICS.items():
            n = min(len(rows[a]), len(rows[b]))
            first = [r[metric] for r in rows[a][:n]]
            second = [r[metric] for r in rows[b][:n]]
            if any(v is None for v in first + second):
                continue
            summary = paired_difference(first, second)
            sign = 1.0 if better == "higher" else -1.0
            good, bad = sorted((sign * summary.low, sign * summary.high))
            word = "better" if good > 0 else "worse" if bad < 0 else NOT_RESOLVED
            intervals[key][metric] = summary
            values |= {
                f"{key}_{metric}": summary.mean,
                f"{key}_{metric}_low": summary.low,
                f"{key}_{metric}_high": summary.high,
                f"{key}_{metric}_word": word,
            }
            table.append(
                [f"{a} − {b}", name, better, format_interval(summary, digits), word]
            )
    header = ["a − b", "score", "better", "per user, mean [95 %]", "a is"]
    return {
        "values": values,
        "intervals": intervals,
        "table": markdown_table(header, table),
    }


def arm_rows(
    rows: Mapping[str, Sequence[Mapping]],
    arms: Mapping,
    pairs: Mapping[str, tuple[str, str]],
    controls: Sequence[str],
    differences: str,
) -> list[dict]:
    """The results rows of the arms beside Table 1a (the paper reports none of them, so none is judged):
    each ``controls`` row's mean MSE, SSIM and LPIPS over users (images that know nothing of the user, the
    scale an attack's score is read against) and each pair's paired difference
    (:func:`arm_differences`' ``intervals``, one row per pair and score).

    Args:
        rows: per-method rows, every name of ``controls`` and ``pairs`` among them.
        arms: :func:`arm_differences` ``(rows, pairs)``.
        pairs: ``{key: (a, b)}`` as given to :func:`arm_differences`.
        controls: the row names of the know-nothing controls.
        differences: the profile's differences from the paper (:func:`differences`).

    Raises:
        ValueError: naming ``controls`` for a name missing from ``rows``, ``arms`` when it lacks a key
            of ``pairs``.
    """
    from gitutor.results import interval_fields
    from gitutor.stats import interval

    missing = [name for name in controls if name not in rows]
    if missing:
        raise ValueError(f"controls must be row names of rows, got {missing!r}")
    if any(key not in arms["intervals"] for key in pairs):
        raise ValueError(
            f"arms must be arm_differences(rows, pairs) for pairs {list(pairs)!r}"
        )
    bounds = {"mse": (0.0, 1.0), "ssim": (-1.0, 1.0), "lpips": (0.0, np.inf)}

    def row(quantity: str, setting: str, summary, unit: str, digits: int) -> dict:
        return dict(
            quantity=quantity,
            setting=setting,
            paper="not reported",
            this_run=round(summary.mean, digits),
            unit=unit,
            differences=differences,
        ) | interval_fields(summary, digits)

    out = []
    for name in controls:
        for metric, (unit, _, digits) in ARM_METRICS.items():
            values = [r[metric] for r in rows[name]]
            if any(v is None for v in values):
                continue
            summary = interval(values, bounds=bounds[metric])
            setting = f"control that knows nothing of the user; {len(values)} users"
            out.append(row(f"{unit}, {name}", setting, summary, unit, digits))
    for key, (a, b) in pairs.items():
        for metric, summary in arms["intervals"][key].items():
            unit, _, digits = ARM_METRICS[metric]
            word = arms["values"][f"{key}_{metric}_word"]
            setting = f"paired over {summary.n} users, same seeds: a is {word}"
            quantity = f"difference in {unit}, {a} − {b}"
            out.append(row(quantity, setting, summary, f"{unit} difference", digits))
    return out


def mean_pairwise_mse(images: Sequence[torch.Tensor]) -> float:
    """Mean MSE over all pairs of the ``(1, C, H, W)`` images: how much they differ from one another.

    Raises:
        ValueError: for fewer than two images.
    """
    if len(images) < 2:
        raise ValueError(f"images must hold >= 2 images, got {len(images)}")
    return float(
        np.mean(
            [mse(a, b).item() for i, a in enumerate(images) for b in images[i + 1 :]]
        )
    )


def differences(cfg, profile: str, users: int, prior_parameters: int) -> str:
    """The "differences" column: how the run differs from the paper's setup (§3, Table 1)."""
    from gitutor.priors import PRIOR_TRAIN_FACES

    if profile == "quick":
        return (
            f"quick profile: 32×32 grey LFW users (variations of one held-out face), {users} users, {cfg.steps} steps "
            f"(τ to {cfg.tau['t_min']}, t* = {cfg.t_star}), λ = {cfg.matching_weight:g}, untrained {cfg.model} instead of "
            f"ResNet-18, {prior_parameters / 1e6:.1f} M-parameter DDPM trained on {PRIOR_TRAIN_FACES} LFW faces, LBP "
            "detector instead of MTCNN, [0, 1] intensity scale"
        )
    leak = victim_data_leak(cfg)
    return (
        f"{profile} profile; {cfg.prior} instead of an FFHQ-256 DDPM"
        + (f" ({LEAK.format(prior=cfg.prior, seen=leak)})" if leak else "")
        + f", λ = {cfg.matching_weight:g}, LBP detector instead of MTCNN"
        + (
            ""
            if cfg.prior != "untrained" and cfg.data == "celeba"
            else f"; OFFLINE SUBSTITUTES (data {cfg.data}, prior {cfg.prior}): not a result"
        )
    )


#: Li et al.'s central claim, in their words (Abstract), and where they say how to read it (§3, Image Quality).
CLAIM = (
    "we propose a novel gradient inversion attack that applies a denoising diffusion model as a strong image "
    "prior in order to enhance recovery in the large batch setting (Abstract)"
)
#: The metric the paper reads image quality by: "LPIPS is the most interpretable metric that is better aligned
#: with human perception" (§3, Image Quality).
CLAIM_METRIC = "lpips"


#: Hub priors trained on the dataset the full profile's victims come from, by the data they saw. Li et al. call
#: a prior whose training data held the private images "an unrealistically strong threat model" (§3,
#: Baselines, of their GIAS baseline); their own DDPM saw FFHQ, disjoint from CelebA.
VICTIM_DATA_PRIORS = {"google/ddpm-celebahq-256": "CelebA-HQ"}


#: The record's words (``differences``, ``claim_reason``) for a prior trained on the victims' dataset, with
#: ``{prior}`` and ``{seen}`` (:func:`victim_data_leak`).
LEAK = (
    "prior {prior} was trained on {seen}, the dataset the victims come from: the leak Li et al. "
    "call an unrealistically strong threat model (§3); their prior saw FFHQ"
)


def victim_data_leak(cfg) -> str | None:
    """The victims' dataset that this run's hub prior was trained on (:data:`VICTIM_DATA_PRIORS`, victims from
    CelebA), e.g. ``"CelebA-HQ"``, else None."""
    seen = VICTIM_DATA_PRIORS.get(cfg.prior)
    return seen if seen is not None and cfg.data == "celeba" else None


def paper_prior(cfg, profile: str) -> bool:
    """Whether this run's prior and data are the paper's kind (the full profile's pretrained face DDPM on
    CelebA, trained on other data than the victims', :func:`victim_data_leak`): only then can the prior's
    measured effect confirm or refute the claim (:data:`CLAIM`)."""
    return (
        profile == "full"
        and cfg.prior not in ("lfw32", "untrained")
        and cfg.data == "celeba"
        and victim_data_leak(cfg) is None
    )


def prior_note(cfg, profile: str, prior_parameters: int) -> str:
    """A few words on the prior for the claim's reason: the quick profile's stand-in (size, faces, side) or the
    full profile's hub prior."""
    from gitutor.priors import PRIOR_TRAIN_FACES

    if paper_prior(cfg, profile):
        return f"prior {cfg.prior}"
    if victim_data_leak(cfg):
        return LEAK.format(prior=cfg.prior, seen=victim_data_leak(cfg))
    if cfg.prior == "lfw32":
        return (
            f"stand-in prior ({prior_parameters / 1e6:.1f} M-param DDPM, {PRIOR_TRAIN_FACES} LFW faces, "
            f"{cfg.image_size} px)"
        )
    return f"stand-in prior ({cfg.prior}, data {cfg.data})"


def claim_judgement(
    effect: Mapping, users: int, comparable: bool, prior_note: str
) -> dict:
    """The row fields ``claim``, ``claim_outcome`` and ``claim_reason`` of :data:`CLAIM` from the prior's paired
    effect (:func:`~gitutor.chapters.diffusion_user_level.identity.prior_effect`; ``users``: its n).

    With the paper's kind of prior (``comparable``): *consistent* when the prior helps on the paper's metric
    (:data:`CLAIM_METRIC`, else MSE when LPIPS is not installed) and hurts on none, *refuted* when it hurts on
    that metric, else *not resolved*. Otherwise *not comparable* (the prior is a stand-in, ``prior_note``),
    the reason stating the measured effect either way.
    """
    metric = CLAIM_METRIC if CLAIM_METRIC in effect["helps"] else "mse"
    names = {"mse": "MSE", "ssim": "SSIM", "lpips": "LPIPS", "psnr": "PSNR"}
    measured = ", ".join(
        f"{names[m]} {effect['helps'][m]} ({effect['intervals'][m].mean:+.3g})"
        for m in ("lpips", "mse", "ssim")
        if m in effect["helps"]
    )
    if not comparable:
        outcome = "not comparable"
    elif effect["helps"][metric] == "hurts":
        outcome = "refuted"
    elif effect["helps"][metric] == "helps" and "hurts" not in effect["helps"].values():
        outcome = "consistent"
    else:
        outcome = "not resolved"
    reason = f"{prior_note}; the prior's paired effect over {users} users: {measured}"
    return {"claim": CLAIM, "claim_outcome": outcome, "claim_reason": reason}


def chapter_rows(
    rows: Mapping[str, Sequence[Mapping]],
    *,
    identity: Mapping,
    effect: Mapping,
    ordering: str,
    intervals: Mapping[str, tuple[float, float]],
    users: int,
    differences: str,
    claim: Mapping | None = None,
    distinct_photographs: bool = True,
    lpips_step: tuple | None = None,
    baseline_steps: int | None = None,
    paper_setting: bool = False,
) -> list[dict]:
    """The results rows of chapter 05 (see :mod:`gitutor.results`).

    Headline: the paper's central claim (:data:`CLAIM`), that the diffusion prior enhances recovery, as the
    prior's paired effect on the paper's metric (LPIPS, else MSE) — DiffULA − user-level Inverting Gradients
    without the prior on the same users — carrying ``claim`` (:func:`claim_judgement`). Then the identity
    test on standardised images, which brightness cannot win (closed-set identification among the U users,
    chance 1/U, and the pairing score, chance ½, each with its 95 % interval over users; the paper has no
    such number, its identity evidence is a DeepFace facial similarity). Without ``distinct_photographs``
    (every user one photograph and its variations) the identity rows are marked not comparable with
    :data:`~gitutor.chapters.diffusion_user_level.identity.ONE_PHOTOGRAPH`: they test the photograph, not the person.

    Args:
        rows: :func:`gitutor.chapters.diffusion_user_level.experiments.evaluate_users`'s per-method rows.
        identity: :func:`gitutor.chapters.diffusion_user_level.identity.identity_study`'s output.
        effect: :func:`gitutor.chapters.diffusion_user_level.identity.prior_effect` of DiffULA against user-level IG.
        ordering, intervals: the MSE ordering verdict and ``{method: (mean, 95 % half-width)}`` of IG
            matched, DiffULA, intra-user (in that order).
        users: U. differences: the profile's differences from the paper.
        claim: :func:`claim_judgement`'s fields for the headline row (None: the row quotes no claim).
        distinct_photographs: whether each user's photos are different photographs of one person.
        lpips_step: ``(Interval, reading)`` of the paired LPIPS difference DiffULA − IG matched
            (:func:`ordering_study`'s ``lpips``, ``lpips_read``); None leaves the row out.
        baseline_steps: the steps of the user-level Inverting Gradients runs ``effect`` was measured against
            (its chosen budget, :func:`~gitutor.chapters.diffusion_user_level.ig_budget.chosen_name`), named
            in the prior's rows; None names none.
        paper_setting: whether the run is the paper's kind (:func:`paper_prior`: the full profile's
            pretrained face DDPM on CelebA, no leak). Only then are Table 1a's absolute LPIPS numbers on
            this run's scale and judged (lower is better); otherwise those rows are not comparable.
    """
    from gitutor.chapters.diffusion_user_level.identity import (
        ONE_PHOTOGRAPH,
        above_chance,
        score_interval,
    )
    from gitutor.results import interval_fields
    from gitutor.stats import NOT_RESOLVED, interval, success_interval

    def row(
        quantity,
        setting,
        paper,
        value,
        unit,
        better=None,
        summary=None,
        digits=4,
        **extra,
    ):
        return (
            dict(
                quantity=quantity,
                setting=setting,
                paper=paper,
                this_run=value,
                unit=unit,
                differences=differences,
            )
            | ({"better": better} if better else {})
            | interval_fields(summary, digits)
            | extra
        )

    diff, ig, intra, user_ig = (
        "DiffULA (diffusion prior)",
        "IG sample-level (matched)",
        "intra-user",
        "IG user-level, no prior",
    )
    order_text = "; ".join(
        f"{name.split(' (')[0]} {m:.4f} ± {h:.4f}" for name, (m, h) in intervals.items()
    )
    small = f"{users} users: n small, intervals wide"
    pairing, same = identity["intervals"], identity["same_intervals"]
    rates = {
        diff: success_interval([r["face_rate"] > 0.5 for r in rows[diff]]),
        ig: score_interval([r["face_rate"] for r in rows[ig]]),
        intra: score_interval([r["face_rate"] for r in rows[intra]]),
    }
    mses = {
        name: interval([r["mse"] for r in rows[name]], bounds=(0.0, 1.0))
        for name in (diff, intra, ig, user_ig)
    }
    no_prior = "not reported (the paper has no user-level run without the prior)"
    found = identity["identified"]

    def beyond(summary) -> str:  # closed-set identification against chance 1/U
        return "above chance" if summary.low > 1 / users else NOT_RESOLVED

    blind = (
        {}
        if distinct_photographs
        else {
            "not_comparable": f"{ONE_PHOTOGRAPH}; the test cannot separate the prior from no prior and no verdict uses it"
        }
    )
    deepface = "not reported (its identity evidence: DeepFace facial similarity 0.574)"
    out = [
        row(
            f"own user identified among {users} users (closed set, images standardised), DiffULA",
            f"chance {1 / users:.2f}: {beyond(found[diff])}; {small}",
            deepface,
            round(found[diff].mean, 3),
            "fraction of users",
            "higher",
            found[diff],
            3,
            **blind,
        ),
        row(
            f"own user identified among {users} users, IG user level without prior",
            f"chance {1 / users:.2f}: {beyond(found[user_ig])}",
            no_prior,
            round(found[user_ig].mean, 3),
            "fraction of users",
            None,
            found[user_ig],
            3,
            **blind,
        ),
        row(
            "own user identified: pairing score, DiffULA",
            f"all pairs of {users} users, chance 0.50: {above_chance(pairing[diff])}",
            "not reported",
            round(pairing[diff].mean, 3),
            "fraction of pairs",
            None,
            pairing[diff],
            3,
            **blind,
        ),
        row(
            "own user identified: pairing score, same-label users only, DiffULA",
            f"chance 0.50: {above_chance(same[diff])}",
            "not reported",
            "n/a" if same[diff] is None else round(same[diff].mean, 3),
            "fraction of pairs",
            None,
            same[diff],
            3,
            **blind,
        ),
    ]
    # The prior's paired effect per metric; PSNR's (a signed dB difference, on the page's table) is left out of
    # the record: it is −10·log10 of the same per-image MSEs, and a record reads a dB number as a PSNR (≥ 0).
    effects = []
    against = "" if baseline_steps is None else f", IG at {baseline_steps} steps"
    for metric, unit, digits in (
        ("lpips", "LPIPS", 3),
        ("mse", "MSE", 4),
        ("ssim", "SSIM", 3),
    ):
        if metric not in effect["intervals"]:  # LPIPS without its backbone
            continue
        summary = effect["intervals"][metric]
        effects.append(
            row(
                f"difference in {metric.upper()}, DiffULA − IG user level without prior (the prior's effect)",
                f"paired over {users} users{against}: the prior {effect['helps'][metric]}",
                no_prior,
                round(summary.mean, digits),
                f"{unit} difference",
                None,
                summary,
                digits,
            )
        )
    effects[0] |= {"headline": True, **(claim or {})}
    out = effects + out
    out += [
        row(
            "ordering of MSE to the user's photos",
            "IG matched < DiffULA < intra-user, 95 % intervals over users",
            "IG 0.3192 < DiffULA 0.4210 < intra-user 0.4981",
            f"{ordering}: {order_text}",
            "MSE",
        ),
        row(
            "face detection rate, DiffULA (realism, not identity)",
            f"B = 30, one image per user, {small}",
            1.00,
            round(rates[diff].mean, 2),
            "fraction",
            "higher",
            rates[diff],
            2,
            not_comparable=(
                f"this book's LBP detector finds {rates[intra].mean:.2f} of the users' real photographs "
                "(the paper's MTCNN: 0.95), so its rates are not on the paper's scale"
            ),
        ),
        row(
            "face detection rate, Inverting Gradients",
            "B = 30 (paper: sample level)",
            0.03,
            round(rates[ig].mean, 2),
            "fraction",
            None,
            rates[ig],
            2,
        ),
        row(
            "face detection rate, original batch",
            "B = 30",
            0.95,
            round(rates[intra].mean, 2),
            "fraction",
            None,
            rates[intra],
            2,
        ),
        row(
            "MSE, DiffULA",
            "B = 30",
            0.4210,
            round(mses[diff].mean, 4),
            "MSE",
            None,
            mses[diff],
        ),
        row(
            "MSE, intra-user",
            "B = 30",
            0.4981,
            round(mses[intra].mean, 4),
            "MSE",
            None,
            mses[intra],
        ),
        row(
            "MSE, Inverting Gradients (matched)",
            "B = 30",
            0.3192,
            round(mses[ig].mean, 4),
            "MSE",
            None,
            mses[ig],
        ),
        row(
            "MSE, IG user level without prior",
            "B = 30",
            "not reported",
            round(mses[user_ig].mean, 4),
            "MSE",
            None,
            mses[user_ig],
        ),
    ]
    # Table 1a's LPIPS values: on this run's scale only in the paper's kind of setting
    better = "lower" if paper_setting else None
    scale = (
        {}
        if paper_setting
        else {
            "not_comparable": "an LPIPS value depends on the images' size, data and prior: Table 1a's "
            "are 64-px CelebA colour images with an FFHQ-256 DDPM, this run's are not"
        }
    )
    if lpips_step is not None and lpips_step[0] is not None:
        out.append(
            row(
                "LPIPS difference, DiffULA − IG sample-level (matched), paired",
                f"paper: Table 1a 0.5039 − 0.7165; paired "
                f"over {users} users: {lpips_step[1]}",
                round(0.5039 - 0.7165, 4),
                round(lpips_step[0].mean, 3),
                "LPIPS difference",
                better,
                lpips_step[0],
                3,
                **scale,
            )
        )
    lpips = average(rows, diff, "lpips")
    out.append(
        row(
            "LPIPS, DiffULA",
            "B = 30",
            0.5039,
            LPIPS_NA if lpips is None else round(lpips, 3),
            "LPIPS",
            better,
            **scale,
        )
    )
    return out


#: Table 1a's MSE ordering, lowest first: the paper's IG (matched) < DiffULA < intra-user.
ORDER = ("IG sample-level (matched)", "DiffULA (diffusion prior)", "intra-user")


def ordering_study(rows: Mapping[str, Sequence[Mapping]]) -> dict:
    """Table 1a's MSE ordering (:data:`ORDER`) tested on the *same* users: every method scored every
    user, so each step of the order is read from the paired per-user differences
    (:func:`gitutor.paired.paired_difference`), not from whether the methods' own intervals overlap.

    Returns ``intervals`` (``{method: (mean, half-width)}`` of the per-user MSE,
    :func:`~gitutor.attacks.user_level.mean_interval`), ``steps`` (``{(lower, higher): Interval}`` of
    the paired differences MSE(higher) − MSE(lower) of consecutive methods of :data:`ORDER`),
    ``paper_order`` ("holds" when every step's interval lies above 0, "reversed" when one lies below,
    else "not resolved at this budget"), ``lpips`` (the paired LPIPS difference DiffULA − IG matched, Table 1a's
    other comparison, 0.5039 − 0.7165; None without LPIPS), ``lpips_read``, ``step_read``
    (``{(lower, higher): word}``: each step's own "holds" / "reversed" / not resolved, read like ``paper_order``;
    the page states the steps in Markdown with these words glued) and ``table`` (Markdown: each method's mean
    and interval, then each paired step).

    Raises:
        KeyError: if a method of :data:`ORDER` is missing; ValueError: fewer than 2 users, or methods
            scored on different numbers of users.
    """
    from gitutor.attacks.user_level import mean_interval
    from gitutor.paired import compare_paired, paired_difference
    from gitutor.stats import BOUNDS, NOT_RESOLVED, format_interval, interval

    groups = [(name, [r["mse"] for r in rows[name]]) for name in ORDER]
    intervals = {name: mean_interval(values) for name, values in groups}
    bounded = {name: interval(values, bounds=BOUNDS["MSE"]) for name, values in groups}
    steps = {}
    for (low_name, low), (high_name, high) in zip(groups, groups[1:]):
        steps[low_name, high_name] = paired_difference(high, low)
    step_read = {
        key: "holds"
        if summary.low > 0
        else "reversed"
        if summary.high < 0
        else NOT_RESOLVED
        for key, summary in steps.items()
    }
    below = [key for key, summary in steps.items() if summary.high < 0]
    order = (
        "reversed"
        if below
        else "holds"
        if all(s.low > 0 for s in steps.values())
        else NOT_RESOLVED
    )
    table = markdown_table(
        ["method or paired step", "MSE mean", "95 % interval over users", "users"],
        [
            [name, f"{s.mean:.4f}", f"[{s.low:.4f}, {s.high:.4f}]", str(len(values))]
            for (name, values), s in zip(groups, bounded.values())
        ]
        + [
            [
                f"{high} − {low} (paired)",
                *format_interval(summary, 4, count=False).split(" ", 1),
                str(summary.n),
            ]
            for (low, high), summary in steps.items()
        ],
    )
    lpips = [
        [r["lpips"] for r in rows[name]] for name in ORDER[:2]
    ]  # Table 1a's LPIPS: DiffULA < IG matched
    step = (
        paired_difference(lpips[1], lpips[0])
        if all(v is not None for v in lpips[0] + lpips[1])
        else None
    )
    read_lpips = (
        None
        if step is None
        else compare_paired(lpips[1], lpips[0], ("DiffULA", "IG sample-level"))
    )
    return {
        "intervals": intervals,
        "steps": steps,
        "paper_order": order,
        "step_read": step_read,
        "table": table,
        "lpips": step,
        "lpips_read": read_lpips,
    }


def failure_case(rows: Mapping[str, Sequence[Mapping]], examples: Sequence) -> dict:
    """App. D: the user whose DiffULA representative is farthest (MSE) from its photos.

    Returns ``user`` (its index), ``truth`` (its ``(B, C, H, W)`` photos), ``result`` (DiffULA's
    result), and floats ``mse`` (DiffULA to the photos), ``intra`` (the intra-user MSE) and
    ``mean_image`` (the MSE of the batch's mean image to the photos: the floor of any single image).
    ``rows``/``examples``: :func:`gitutor.chapters.diffusion_user_level.experiments.evaluate_users`'s outputs.
    """
    from gitutor.attacks.user_level import representative_scores

    diff_rows = rows["DiffULA (diffusion prior)"]
    worst = int(np.argmax([row["mse"] for row in diff_rows]))
    truth, _, _, diff = examples[worst]
    floor = representative_scores(truth.mean(0, keepdim=True), truth)["mse"]
    return {
        "user": worst,
        "truth": truth,
        "result": diff,
        "mse": float(diff_rows[worst]["mse"]),
        "intra": float(rows["intra-user"][worst]["mse"]),
        "mean_image": float(floor),
    }


def timing_rows(
    cfg,
    seconds: Mapping[str, Sequence[float]],
    wall_seconds: float,
    profile: str,
    differences: str,
) -> list[dict]:
    """Wall-clock rows for :func:`gitutor.results.save_results`'s ``timings``: DiffULA's mean seconds
    per user (``seconds``: :func:`~gitutor.chapters.diffusion_user_level.experiments.evaluate_users`'s third
    output; paper: 23.3 min on an A100) and the whole notebook's ``wall_seconds``."""
    diffula = round(float(np.mean(seconds["DiffULA (diffusion prior)"])), 1)
    return [
        dict(
            quantity="run time, DiffULA",
            setting=f"{cfg.steps} steps (paper 4 000 on an A100)",
            paper=23.3 * 60,
            this_run=diffula,
            unit="s per user",
            differences=differences,
        ),
        dict(
            quantity="run time, whole notebook",
            setting=profile,
            paper="not reported",
            this_run=round(wall_seconds, 1),
            unit="s",
            differences=differences,
        ),
    ]
