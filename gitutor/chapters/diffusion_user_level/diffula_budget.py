"""Chapter 05's DiffULA at more steps than the page's (Li et al. 2023 §3: Algorithm 1 runs 4 000 steps; the
quick profile 100).

``scripts/diffula_study_05.py`` runs DiffULA exactly as the notebook does — same model, users, per-user
seeds, schedules (which read the number of steps S), λ and t* — at several budgets on the table's users and
records each user's Table 1a scores after the final denoising pass and before it (t* = 0, the same run).
:func:`read_record` reads the record, refusing one without provenance, of other users, seed or settings,
or whose page-budget scores differ from the page's own DiffULA runs (a stale record);
:func:`recorded_study` reads it where it applies to the notebook's run; :func:`budget_rows` turns it into
per-method rows that :func:`~gitutor.chapters.diffusion_user_level.report.arm_differences` pairs with the
page's baseline, user by user.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from gitutor.study_records import provenance, speaks_for

#: The profile's settings DiffULA's runs depend on (besides the steps); a record of other values is refused.
SETTINGS = (
    "data",
    "image_size",
    "channels",
    "batch_size",
    "model",
    "prior",
    "t_star",
    "tau",
    "zeta",
    "window",
    "matching_weight",
    "lr",
)
#: Table 1a's scores of one user (images in [0, 1]; PSNR in dB; face rate 0 to 1).
SCORES = ("mse", "psnr", "ssim", "lpips", "face_rate")
#: The two readings of each run: after the final denoising pass and before it (t* = 0).
READINGS = ("final", "t_star_0")


def read_record(path: str | Path, cfg, seed: int, page_rows: Sequence[Mapping]) -> dict:
    """The recorded DiffULA budget study at ``path`` (``book/studies/05_diffula_budget.json``), checked
    against this run: provenance, the profile's users, ``seed``, the settings of :data:`SETTINGS`, and its
    ``cfg.steps``-step scores against ``page_rows`` (the page's own DiffULA rows, one dict of
    :data:`SCORES` per user, from
    :func:`~gitutor.chapters.diffusion_user_level.experiments.evaluate_users`).

    Returns:
        ``budgets`` (increasing steps), ``table_budget`` (``cfg.steps``), ``scores`` ``{budget: {reading:
        [per-user scores]}}`` (:data:`READINGS`, users in ``cfg.users`` order) and ``provenance``.

    Raises:
        FileNotFoundError: naming ``path`` when it does not exist.
        ValueError: naming ``path`` and the field: not a JSON object; a provenance field missing; seed,
            users or a setting other than this run's; budgets without ``cfg.steps`` or not increasing; a
            budget, reading or user missing; ``page_rows`` of another length, or page-budget scores that
            differ from ``page_rows`` by more than 1e-9 (a record made with other code).
    """
    from gitutor.study_records import read_study_record

    expected = {"seed": seed, "users": list(cfg.users)}
    expected |= {f"settings.{k}": getattr(cfg, k) for k in SETTINGS}
    record = read_study_record(
        path, "DiffULA budget record", "scripts/diffula_study_05.py", expected
    )
    budgets = record.get("budgets")
    if (
        not isinstance(budgets, list)
        or cfg.steps not in budgets
        or budgets != sorted(set(budgets))
    ):
        raise ValueError(
            f"record {path}: field 'budgets' must be increasing steps including this run's {cfg.steps}, "
            f"got {budgets!r}"
        )
    users = len(cfg.users)
    scores = {}
    for budget in budgets:
        part = record.get("scores", {}).get(str(budget), {})
        if any(len(part.get(reading, [])) != users for reading in READINGS):
            raise ValueError(
                f"record {path}: field 'scores' must hold {users} users of {READINGS} at {budget} steps"
            )
        scores[budget] = {
            reading: [dict(u) for u in part[reading]] for reading in READINGS
        }
    if len(page_rows) != users:
        raise ValueError(
            f"page_rows must hold the {users} users' DiffULA scores, got {len(page_rows)}"
        )
    gap = max(
        abs(float(page[score]) - float(mine[score]))
        for page, mine in zip(page_rows, scores[cfg.steps]["final"])
        for score in SCORES
        if page.get(score) is not None
    )
    if not gap <= 1e-9:
        raise ValueError(
            f"record {path}: its {cfg.steps}-step DiffULA scores differ from this page's by up to {gap:.3g}; "
            "the record was made with other code: rerun scripts/diffula_study_05.py"
        )
    return {
        "budgets": budgets,
        "table_budget": cfg.steps,
        "scores": scores,
        "provenance": provenance(record),
    }


def recorded_study(
    path: str | Path, cfg, seed: int, budget: str | None, page_rows: Sequence[Mapping]
) -> dict | None:
    """:func:`read_record` of ``path`` for a run the record can speak for, else None (the page says it is not
    recorded): None when the notebook names a ``budget`` (``"smoke"``), when ``path`` does not exist or when
    the record was made for another profile than ``cfg.profile``.

    Raises:
        ValueError: as :func:`read_record`, for a record of this profile that does not match the run: a
            stale record fails loudly rather than being skipped.
    """
    if not speaks_for(path, cfg.profile, budget):
        return None
    return read_record(path, cfg, seed, page_rows)


def row_name(budget: int, reading: str = "final") -> str:
    """The row name of DiffULA at ``budget`` steps, after (``"final"``) or before (``"t_star_0"``) its final
    denoising pass.

    Raises:
        ValueError: naming ``reading`` when it is not one of :data:`READINGS`.
    """
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {READINGS}, got {reading!r}")
    return f"DiffULA, {budget} steps" + ("" if reading == "final" else ", t* = 0")


def budget_rows(study: Mapping) -> dict[str, list[dict]]:
    """Every recorded run as per-user rows under :func:`row_name` (both readings, every budget), in the
    shape of ``evaluate_users``' rows, ready for
    :func:`~gitutor.chapters.diffusion_user_level.report.arm_differences`."""
    return {
        row_name(budget, reading): study["scores"][budget][reading]
        for budget in study["budgets"]
        for reading in READINGS
    }


def mean_scores(study: Mapping, reading: str = "final") -> dict[int, dict[str, float]]:
    """``{budget: {score: mean over users}}`` of one reading (:data:`READINGS`).

    Raises:
        ValueError: naming ``reading`` when it is not one of :data:`READINGS`.
    """
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {READINGS}, got {reading!r}")
    out = {}
    for budget in study["budgets"]:
        users = study["scores"][budget][reading]
        out[budget] = {
            score: math.fsum(u[score] for u in users) / len(users)
            for score in SCORES
            if all(u.get(score) is not None for u in users)
        }
    return out
