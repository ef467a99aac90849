"""Chapter 05's tables and paper-vs-run rows (Li et al. 2023, Table 1a–b) and the own-user identity test.

Paper numbers (CelebA 64×64, 50 users, B = 30, FFHQ-256 DDPM, Table 1a): MSE of IG (matched) 0.3192,
DiffULA 0.4210, intra-user 0.4981; DiffULA LPIPS 0.5039; face detection rates DiffULA 1.00, IG 0.03,
original batches 0.95; DiffULA run time 23.3 min per user on an A100.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from gitutor.attacks.user_level import own_user_match_rate, own_user_matches, user_distance_matrix
from gitutor.metrics import LPIPS_NA, mse, ssim
from gitutor.tables import markdown_table


def average(rows: Mapping[str, Sequence[Mapping]], name: str, key: str) -> float | None:
    """Mean over users of ``rows[name][u][key]`` (None when any user's value is None, e.g. LPIPS without weights)."""
    values = [r[key] for r in rows[name]]
    return None if any(v is None for v in values) else float(np.mean(values))


def _fmt(value: float | None, digits: int) -> str:
    return LPIPS_NA if value is None else f"{value:.{digits}f}"


def method_table(rows: Mapping[str, Sequence[Mapping]]) -> str:
    """Table 1a in shape: one Markdown row per method with the users' mean MSE, PSNR, SSIM, LPIPS, face rate."""
    return markdown_table(["method", "MSE ↓", "PSNR (dB) ↑", "SSIM ↑", "LPIPS ↓", "face detection rate"],
                          [[name, _fmt(average(rows, name, "mse"), 4), _fmt(average(rows, name, "psnr"), 2),
                            _fmt(average(rows, name, "ssim"), 3), _fmt(average(rows, name, "lpips"), 3),
                            f"{average(rows, name, 'face_rate'):.2f}"] for name in rows])


def mean_pairwise_mse(images: Sequence[torch.Tensor]) -> float:
    """Mean MSE over all pairs of the ``(1, C, H, W)`` images: how much they differ from one another.

    Raises:
        ValueError: for fewer than two images.
    """
    if len(images) < 2:
        raise ValueError(f"images must hold >= 2 images, got {len(images)}")
    return float(np.mean([mse(a, b).item() for i, a in enumerate(images) for b in images[i + 1:]]))


def identity_study(candidates: Mapping[str, Sequence[torch.Tensor]], means: Sequence[torch.Tensor]):
    """Own-user match rates of each candidate's representatives against the users' mean photos.

    Returns ``(matrices, match)``: ``matrices[name] = (MSE matrix, SSIM matrix)`` (``(U, U)``, entry [i, j]:
    representative i against user j's mean photo) and ``match[name] = (rate by MSE, rate by SSIM)``.

    Raises:
        ValueError: as :func:`~gitutor.attacks.user_level.user_distance_matrix` (fewer than 2 users, shapes).
    """
    matrices = {name: (user_distance_matrix(reps, means), user_distance_matrix(reps, means, ssim))
                for name, reps in candidates.items()}
    match = {name: (own_user_match_rate(m), own_user_match_rate(s, better="higher")) for name, (m, s) in matrices.items()}
    return matrices, match


def differences(cfg, profile: str, users: int, prior_parameters: int) -> str:
    """The "differences" column: how the run differs from the paper's setup (§3, Table 1)."""
    from gitutor.priors import PRIOR_TRAIN_FACES

    if profile == "quick":
        return (f"quick profile: 32×32 grey LFW users (variations of one held-out face), {users} users, {cfg.steps} steps "
                f"(τ to {cfg.tau['t_min']}, t* = {cfg.t_star}), λ = {cfg.matching_weight:g}, untrained {cfg.model} instead of "
                f"ResNet-18, {prior_parameters / 1e6:.1f} M-parameter DDPM trained on {PRIOR_TRAIN_FACES} LFW faces, LBP "
                "detector instead of MTCNN, [0, 1] intensity scale")
    return (f"{profile} profile; CelebA-HQ-256 DDPM instead of FFHQ-256, λ = {cfg.matching_weight:g}, LBP detector "
            "instead of MTCNN" + ("" if cfg.prior != "untrained" and cfg.data == "celeba" else
                                  f"; OFFLINE SUBSTITUTES (data {cfg.data}, prior {cfg.prior}): not a result"))


def chapter_rows(rows: Mapping[str, Sequence[Mapping]], *, match: tuple[float, float], spread_ratio: float, ordering: str,
                 intervals: Mapping[str, tuple[float, float]], users: int, differences: str) -> list[dict]:
    """The results rows of chapter 05 (see :mod:`gitutor.results`).

    Args:
        rows: :func:`gitutor.studies.diffusion_user_level.evaluate_users`'s per-method rows.
        match: DiffULA's own-user match rates (by MSE, by SSIM). spread_ratio: mean pairwise MSE of DiffULA's
            representatives over that of the users' mean photos. ordering, intervals: the MSE ordering verdict
            and ``{method: (mean, 95 % half-width)}`` of IG matched, DiffULA, intra-user (in that order).
        users: U. differences: the profile's differences from the paper.
    """
    def row(quantity, setting, paper, value, unit, better=None):
        return dict(quantity=quantity, setting=setting, paper=paper, this_run=value, unit=unit,
                    differences=differences) | ({"better": better} if better else {})

    diff, ig, intra, user_ig = "DiffULA (diffusion prior)", "IG sample-level (matched)", "intra-user", "IG user-level, no prior"
    order_text = "; ".join(f"{name.split(' (')[0]} {m:.4f} ± {h:.4f}" for name, (m, h) in intervals.items())
    rate = {name: average(rows, name, "face_rate") for name in (diff, ig, intra)}
    lpips = average(rows, diff, "lpips")
    return [
        row("own-user match rate", f"DiffULA, MSE to the user's mean photo, {users} users (chance {1 / users:.2f})",
            "not reported", round(match[0], 3), "fraction"),
        row("own-user match rate", f"DiffULA, SSIM to the user's mean photo, {users} users (chance {1 / users:.2f})",
            "not reported", round(match[1], 3), "fraction"),
        row("spread of DiffULA's representatives / spread of the users' mean photos", "mean pairwise MSE ratio",
            "not reported", round(spread_ratio, 3), "ratio"),
        row("ordering of MSE to the user's photos", "IG matched < DiffULA < intra-user, 95 % intervals over users",
            "IG 0.3192 < DiffULA 0.4210 < intra-user 0.4981", f"{ordering}: {order_text}", "MSE"),
        row("face detection rate, DiffULA (realism, not identity)", f"B = 30, one image per user, {users} users", 1.00, round(rate[diff], 2), "fraction", "higher"),
        row("face detection rate, Inverting Gradients", "B = 30 (paper: sample level)", 0.03, round(rate[ig], 2), "fraction"),
        row("face detection rate, original batch", "B = 30", 0.95, round(rate[intra], 2), "fraction"),
        row("MSE, DiffULA", "B = 30", 0.4210, round(average(rows, diff, "mse"), 4), "MSE"),
        row("MSE, intra-user", "B = 30", 0.4981, round(average(rows, intra, "mse"), 4), "MSE"),
        row("MSE, Inverting Gradients (matched)", "B = 30", 0.3192, round(average(rows, ig, "mse"), 4), "MSE"),
        row("MSE, IG user level without prior", "B = 30", "not reported", round(average(rows, user_ig, "mse"), 4), "MSE"),
        row("LPIPS, DiffULA", "B = 30", 0.5039, LPIPS_NA if lpips is None else round(lpips, 3), "LPIPS"),
    ]


def matching_weight_summary(plain: Sequence, weighted) -> dict[str, float]:
    """What λ = 1 (Eq. 14 as written) does, from the ``history`` of Algorithm 1 runs.

    ``plain``: the λ = 1 results of users 0 and 1; ``weighted``: user 0's result with the profile's λ.
    Returns floats: ``ratio_plain`` (median over steps of ‖∇d‖ / ‖g_p‖ before the clip, λ = 1),
    ``clip_plain`` / ``clip_weighted`` (fraction of steps in which the clip ζ_i binds, i.e. scales
    the matching gradient down, for λ = 1 / the profile's λ) and ``max_difference`` (largest pixel
    difference between users 0's and 1's λ = 1 images, images in [0, 1]).

    Raises:
        ValueError: if ``plain`` holds fewer than two results.
    """
    if len(plain) < 2:
        raise ValueError(f"plain must hold the λ = 1 results of two users, got {len(plain)}")

    def binds(result) -> float:
        return float(np.mean(np.asarray(result.history["clip_scale"]) < 1))

    return {"ratio_plain": float(np.median(plain[0].history["grad_ratio"])),
            "clip_plain": binds(plain[0]),
            "max_difference": float((plain[0].images - plain[1].images).abs().max()),
            "clip_weighted": binds(weighted)}


def match_comparison(matrices: Mapping[str, tuple[np.ndarray, np.ndarray]], first: str, second: str,
                     names: tuple[str, str]) -> dict[str, str]:
    """Own-user match of two representatives compared beyond noise: per metric (``"mse"``,
    ``"ssim"``) :func:`gitutor.stats.compare` of the Wilson 95 % intervals
    (:func:`gitutor.stats.success_interval`) of :func:`~gitutor.attacks.user_level.own_user_matches` — ``"A > B"`` with
    ``names`` only when the intervals separate, else "not resolved at this budget".

    ``matrices``: :func:`identity_study`'s first output; ``first``/``second``: two of its keys.

    Raises:
        KeyError: if ``first`` or ``second`` is not in ``matrices``.
    """
    from gitutor.stats import compare, success_interval

    result = {}
    for index, (metric, better) in enumerate((("mse", "lower"), ("ssim", "higher"))):
        a, b = (success_interval(own_user_matches(matrices[key][index], better)) for key in (first, second))
        result[metric] = compare(a, b, names)
    return result


def match_table(match: Mapping[str, tuple[float, float]]) -> str:
    """Markdown table of own-user match rates: one row per representative, by MSE and by SSIM."""
    return markdown_table(["representative", "by MSE", "by SSIM"],
                          [[name, f"{a:.2f}", f"{b:.2f}"] for name, (a, b) in match.items()])


#: Table 1a's MSE ordering, lowest first: the paper's IG (matched) < DiffULA < intra-user.
ORDER = ("IG sample-level (matched)", "DiffULA (diffusion prior)", "intra-user")


def ordering_study(rows: Mapping[str, Sequence[Mapping]]) -> dict:
    """Table 1a's MSE ordering (:data:`ORDER`) tested with 95 % intervals over users.

    Returns ``intervals`` (``{method: (mean, half-width)}`` of the per-user MSE,
    :func:`~gitutor.attacks.user_level.mean_interval`), ``paper_order`` ("holds", "reversed" or
    "not resolved at this budget", :func:`~gitutor.attacks.user_level.interval_ordering`),
    ``measured`` (:func:`gitutor.stats.ordering` of the three, highest MSE first, or "not resolved
    at this budget") and ``table`` (Markdown: mean, interval, users per method).

    Raises:
        KeyError: if a method of :data:`ORDER` is missing; ValueError: fewer than 2 users.
    """
    from gitutor.attacks.user_level import interval_ordering, mean_interval
    from gitutor.stats import BOUNDS, interval, ordering

    groups = [(name, [r["mse"] for r in rows[name]]) for name in ORDER]
    intervals = {name: mean_interval(values) for name, values in groups}
    bounded = {name: interval(values, bounds=BOUNDS["MSE"]) for name, values in groups}
    table = markdown_table(["method", "MSE mean", "95 % interval", "users"],
                           [[name, f"{s.mean:.4f}", f"[{s.low:.4f}, {s.high:.4f}]", str(len(values))]
                            for (name, values), s in zip(groups, bounded.values())])
    return {"intervals": intervals, "paper_order": interval_ordering(groups),
            "measured": ordering(bounded), "table": table}


def failure_case(rows: Mapping[str, Sequence[Mapping]], examples: Sequence) -> dict:
    """App. D: the user whose DiffULA representative is farthest (MSE) from its photos.

    Returns ``user`` (its index), ``truth`` (its ``(B, C, H, W)`` photos), ``result`` (DiffULA's
    result), and floats ``mse`` (DiffULA to the photos), ``intra`` (the intra-user MSE) and
    ``mean_image`` (the MSE of the batch's mean image to the photos: the floor of any single image).
    ``rows``/``examples``: :func:`gitutor.studies.diffusion_user_level.evaluate_users`'s outputs.
    """
    from gitutor.attacks.user_level import representative_scores

    diff_rows = rows["DiffULA (diffusion prior)"]
    worst = int(np.argmax([row["mse"] for row in diff_rows]))
    truth, _, _, diff = examples[worst]
    floor = representative_scores(truth.mean(0, keepdim=True), truth)["mse"]
    return {"user": worst, "truth": truth, "result": diff, "mse": float(diff_rows[worst]["mse"]),
            "intra": float(rows["intra-user"][worst]["mse"]), "mean_image": float(floor)}


def timing_rows(cfg, seconds: Mapping[str, Sequence[float]], wall_seconds: float, profile: str,
                differences: str) -> list[dict]:
    """Wall-clock rows for :func:`gitutor.results.save_results`'s ``timings``: DiffULA's mean seconds
    per user (``seconds``: :func:`~gitutor.studies.diffusion_user_level.evaluate_users`'s third
    output; paper: 23.3 min on an A100) and the whole notebook's ``wall_seconds``."""
    diffula = round(float(np.mean(seconds["DiffULA (diffusion prior)"])), 1)
    return [dict(quantity="run time, DiffULA", setting=f"{cfg.steps} steps (paper 4 000 on an A100)",
                 paper=23.3 * 60, this_run=diffula, unit="s per user", differences=differences),
            dict(quantity="run time, whole notebook", setting=profile, paper="not reported",
                 this_run=round(wall_seconds, 1), unit="s", differences=differences)]
