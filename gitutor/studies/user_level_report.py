"""Chapter 05's tables and paper-vs-run rows (Li et al. 2023, Table 1a–b) and the own-user identity test.

Paper numbers (CelebA 64×64, 50 users, B = 30, FFHQ-256 DDPM, Table 1a): MSE of IG (matched) 0.3192,
DiffULA 0.4210, intra-user 0.4981; DiffULA LPIPS 0.5039; face detection rates DiffULA 1.00, IG 0.03,
original batches 0.95; DiffULA run time 23.3 min per user on an A100.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from gitutor.attacks.user_level import own_user_match_rate, user_distance_matrix
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
        row("face detection rate, DiffULA (realism, not identity)", "B = 30", 1.00, round(rate[diff], 2), "fraction", "higher"),
        row("face detection rate, Inverting Gradients", "B = 30 (paper: sample level)", 0.03, round(rate[ig], 2), "fraction"),
        row("face detection rate, original batch", "B = 30", 0.95, round(rate[intra], 2), "fraction"),
        row("MSE, DiffULA", "B = 30", 0.4210, round(average(rows, diff, "mse"), 4), "MSE"),
        row("MSE, intra-user", "B = 30", 0.4981, round(average(rows, intra, "mse"), 4), "MSE"),
        row("MSE, Inverting Gradients (matched)", "B = 30", 0.3192, round(average(rows, ig, "mse"), 4), "MSE"),
        row("MSE, IG user level without prior", "B = 30", "not reported", round(average(rows, user_ig, "mse"), 4), "MSE"),
        row("LPIPS, DiffULA", "B = 30", 0.5039, LPIPS_NA if lpips is None else round(lpips, 3), "LPIPS"),
    ]
