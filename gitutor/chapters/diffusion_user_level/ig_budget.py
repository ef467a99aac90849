"""Chapter 05's two Inverting Gradients baselines at their own best budget (Li et al. 2023 §4, Table 1;
Geiping et al. 2020).

Li et al. give Inverting Gradients 24 000 steps against DiffULA's 4 000 (Table 1's run times: about the
same wall time on an A100), six times DiffULA's budget. The quick profile runs both baselines of
:func:`~gitutor.chapters.diffusion_user_level.experiments.baselines` for ``cfg.ig_steps`` steps, as many as
DiffULA's. ``scripts/ig_study_05.py`` records both at several budgets — a fresh run per budget, because
Inverting Gradients' step decay (×0.1 at 3/8, 5/8, 7/8) is set by its budget — with each baseline's budget
chosen on LFW users the table does not score (:func:`selection_users`) and every budget then run on the
table's users. :func:`baseline_scores` is one user's run at one budget, scored as
:func:`~gitutor.chapters.diffusion_user_level.experiments.evaluate_users` scores it; :func:`read_record` reads
the record (refusing one without provenance or of other users, seeds or settings), :func:`recorded_study` reads
it where it applies to the notebook's run, :func:`budget_table` and :func:`budget_curves` show it and
:func:`chosen_rows` puts each baseline at its chosen budget into Table 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from gitutor.chapters.diffusion_user_level.experiments import METHODS
from gitutor.study_records import provenance, speaks_for

#: The two baselines of Table 1a, in the page's order: sample level (Hungarian-matched), user level
#: without prior.
BASELINES = (METHODS[1], METHODS[2])
#: What each user's run is scored by: Table 1a's scores (``mse``, ``psnr`` in dB, ``ssim``, ``lpips``; images in
#: [0, 1]), the face detection rate (0 to 1) and ``distance``, the run's last matching loss (cosine distance).
SCORES = ("mse", "psnr", "ssim", "lpips", "face_rate", "distance")
#: The score a baseline's budget is chosen by (the page reads image quality by LPIPS, as Li et al. §3), and
#: its better direction.
CHOICE_SCORE, CHOICE_BETTER = "lpips", "lower"
#: The profile's settings the baselines' runs depend on; a record of other values is refused.
SETTINGS = (
    "data",
    "image_size",
    "channels",
    "batch_size",
    "model",
    "ig_tv_weight",
    "ig_lr",
    "ig_steps",
)


def selection_users(cfg, count: int = 3) -> list[int]:
    """The LFW faces a baseline's budget is chosen on: the first ``count`` held-out faces (index
    ``PRIOR_TRAIN_FACES`` and up, never seen by the prior) that are not among the table's users
    ``cfg.users``, in index order — a rule fixed before any result, so the table scores no user its budget
    was chosen on.

    Raises:
        ValueError: naming ``cfg.users`` when it is not a list of LFW face indices (the full profile's
            CelebA users), or ``count`` when fewer than ``count`` held-out faces are left (or ``count < 1``).
    """
    from gitutor.federated.users import NUM_LFW_FACES
    from gitutor.priors import PRIOR_TRAIN_FACES

    if cfg.data != "lfw" or not isinstance(cfg.users, list):
        raise ValueError(
            f"cfg.users must be a list of LFW face indices (data 'lfw'), got data {cfg.data!r}, "
            f"users {cfg.users!r}"
        )
    left = [i for i in range(PRIOR_TRAIN_FACES, NUM_LFW_FACES) if i not in cfg.users]
    if (
        isinstance(count, bool)
        or not isinstance(count, int)
        or not 1 <= count <= len(left)
    ):
        raise ValueError(
            f"count must be an int in [1, {len(left)}] (held-out faces not in cfg.users), got {count!r}"
        )
    return left[:count]


def baseline_scores(case, cfg, augment, start: int, budget: int) -> dict[str, dict]:
    """Both baselines of :func:`~gitutor.chapters.diffusion_user_level.experiments.baselines` on one user for
    ``budget`` steps (``cfg.ig_steps`` replaced; the step decay follows the budget), scored exactly as
    :func:`~gitutor.chapters.diffusion_user_level.experiments.evaluate_users` scores them: the sample-level
    images Hungarian-matched to the user's photos, the user-level image against every photo.

    Args:
        case: the user's :class:`~gitutor.federated.case.Case` (photos ``case.inputs`` ``(B, C, H, W)`` in
            [0, 1]).
        cfg: the chapter's settings (``ig_tv_weight``, ``ig_lr``).
        augment: Algorithm 1's 𝒯 (the notebook's ``SCHEDULES["augment"]``).
        start: the user's seed, :func:`~gitutor.seeding.trial_seeds` ``(seed, U, "baseline starts")[k]``
            for user k of U, as the notebook.
        budget: steps, an int >= 1.

    Returns:
        ``{baseline: {score: value}}`` for :data:`BASELINES`, with the :data:`SCORES` (``lpips`` None when
        LPIPS' backbone is not installed).

    Raises:
        ValueError: naming ``budget`` when it is not an int >= 1, or as the attacks and the scores.
    """
    from gitutor.attacks.user_level import paired_scores, representative_scores
    from gitutor.chapters.diffusion_user_level.experiments import baselines
    from gitutor.face_detection import face_detection_rate
    from gitutor.metrics import match_batch

    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be an int >= 1, got {budget!r}")
    sample, user = baselines(case, cfg.replace(ig_steps=budget), augment, start)
    truth = case.inputs.cpu()
    matched = match_batch(sample.images, truth)
    scored = (
        (BASELINES[0], paired_scores(matched, truth), sample),
        (BASELINES[1], representative_scores(user.images, truth), user),
    )
    return {
        name: dict(
            scores,
            face_rate=face_detection_rate(result.images),
            distance=float(result.history["gradient_distance"][-1]),
        )
        for name, scores, result in scored
    }


def choose_budget(scores: Mapping[int, Sequence[Mapping]]) -> int:
    """The budget of lowest mean :data:`CHOICE_SCORE` over users (ties: the smaller budget).

    Args:
        scores: ``{budget: [per-user scores]}`` of one baseline on the selection users.

    Raises:
        ValueError: naming ``scores`` when it is empty, a budget holds no user, or a user lacks the score.
    """
    if not scores or any(not users for users in scores.values()):
        raise ValueError(
            f"scores must hold at least one user at every budget, got {scores!r}"
        )
    means = {}
    for budget, users in scores.items():
        values = [user.get(CHOICE_SCORE) for user in users]
        if any(v is None or not math.isfinite(v) for v in values):
            raise ValueError(
                f"scores must hold a finite {CHOICE_SCORE!r} for every user, got {values} at "
                f"budget {budget}"
            )
        means[int(budget)] = float(np.mean(values))
    return min(sorted(means), key=lambda b: means[b])


def _by_int_budget(part: Mapping, field: str) -> dict[str, dict[int, list[dict]]]:
    try:
        return {
            name: {int(b): list(users) for b, users in part[name].items()}
            for name in BASELINES
        }
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(
            f"record field {field!r} must map each of {list(BASELINES)} to "
            f"{{budget: [per-user scores]}} ({type(error).__name__}: {error})"
        ) from None


def read_record(path: str | Path, cfg, seed: int) -> dict:
    """The recorded budget study at ``path`` (``book/studies/05_ig_budget.json``, written by
    ``scripts/ig_study_05.py``), checked against this run: its provenance, the profile's users (the table's),
    ``seed`` and the settings of :data:`SETTINGS`.

    Returns:
        ``budgets`` (increasing ints, steps), ``table_budget`` (``cfg.ig_steps``, the page's own run),
        ``chosen`` ``{baseline: budget}`` (chosen on the selection users, :func:`choose_budget`),
        ``scores`` ``{baseline: {budget: {score: [value per table user]}}}`` (:data:`SCORES`, the table's
        users in ``cfg.users`` order), ``choice`` (the same on the selection users), ``rows``
        ``{baseline: [per-user scores at its chosen budget]}`` (the shape of ``evaluate_users``' rows,
        ready for the page's tables and paired differences), ``users``, ``selection_users``,
        ``notebook_check`` (the largest difference between the record's ``cfg.ig_steps`` runs and
        ``evaluate_users``' own, 0 when they are the same runs) and ``provenance``.

    Raises:
        FileNotFoundError: naming ``path`` when it does not exist.
        ValueError: naming ``path`` when it is not JSON, or naming the field: a provenance field of
            :data:`gitutor.study_records.PROVENANCE` missing; ``seed``, ``users`` or a setting other than this run's;
            ``selection_users`` that share a user with the table; ``budgets`` without ``cfg.ig_steps``;
            ``scores`` / ``choice`` without a budget or user; ``chosen_budget`` not the budget the
            selection users choose (a record edited by hand); ``notebook_check`` not 0.
    """
    from gitutor.study_records import read_study_record

    expected = {"seed": seed, "users": list(cfg.users)}
    expected |= {f"settings.{k}": getattr(cfg, k) for k in SETTINGS}
    record = read_study_record(
        path, "Inverting Gradients budget record", "scripts/ig_study_05.py", expected
    )
    selection = record.get("selection_users")
    if not selection or set(selection) & set(cfg.users):
        raise ValueError(
            f"record {path}: field 'selection_users' must name users the table does not score, got "
            f"{selection!r} (table users {list(cfg.users)})"
        )
    budgets = record.get("budgets")
    if (
        not isinstance(budgets, list)
        or cfg.ig_steps not in budgets
        or budgets != sorted(set(budgets))
    ):
        raise ValueError(
            f"record {path}: field 'budgets' must be increasing steps including this run's "
            f"{cfg.ig_steps}, got {budgets!r}"
        )
    scores = _by_int_budget(record.get("scores", {}), "scores")
    choice = _by_int_budget(record.get("choice", {}), "choice")
    for field, part, count in (
        ("scores", scores, len(cfg.users)),
        ("choice", choice, len(selection)),
    ):
        for name in BASELINES:
            if sorted(part[name]) != budgets or any(
                len(users) != count for users in part[name].values()
            ):
                raise ValueError(
                    f"record {path}: field {field!r} must hold {count} users at each of {budgets} for "
                    f"{name!r}, got {[(b, len(u)) for b, u in part[name].items()]}"
                )
    chosen = {name: choose_budget(choice[name]) for name in BASELINES}
    stated = {name: record.get("chosen_budget", {}).get(name) for name in BASELINES}
    if stated != chosen:
        raise ValueError(
            f"record {path}: field 'chosen_budget' is {stated}, its selection users choose {chosen}"
        )
    check = record.get("notebook_check", {})
    if check.get("budget") != cfg.ig_steps or check.get("max_difference") != 0:
        raise ValueError(
            f"record {path}: field 'notebook_check' must show the {cfg.ig_steps}-step runs equal to "
            f"evaluate_users' own (max_difference 0), got {check!r}"
        )

    def columns(users: Sequence[Mapping]) -> dict[str, list]:
        return {score: [user.get(score) for user in users] for score in SCORES}

    return {
        "budgets": budgets,
        "table_budget": cfg.ig_steps,
        "chosen": chosen,
        "scores": {n: {b: columns(u) for b, u in scores[n].items()} for n in BASELINES},
        "choice": {n: {b: columns(u) for b, u in choice[n].items()} for n in BASELINES},
        "rows": {n: [dict(u) for u in scores[n][chosen[n]]] for n in BASELINES},
        "users": list(record["users"]),
        "selection_users": list(selection),
        "notebook_check": dict(check),
        "provenance": provenance(record),
    }


def recorded_study(
    path: str | Path, cfg, seed: int, budget: str | None = None
) -> dict | None:
    """:func:`read_record` of ``path`` for a run the record can speak for, else None (the page says it is not
    recorded): None when the notebook names a ``budget`` (``"smoke"``: other users and steps), when ``path``
    does not exist (e.g. a Colab runtime) or when the record was made for another profile than
    ``cfg.profile`` (the full profile, also with ``DATA_ROOT = "bundled"``).

    Raises:
        ValueError: as :func:`read_record`, for a record of this profile made for other users, seeds or
            settings, or without provenance: a stale record fails loudly rather than being skipped.
    """
    if not speaks_for(path, cfg.profile, budget):
        return None
    return read_record(path, cfg, seed)


def chosen_name(name: str, study: Mapping | None) -> str:
    """The row name of baseline ``name`` at its chosen budget: ``name`` itself when ``study`` is None (no record
    applies to the run) or chose the page's own budget, else ``"<name>, <budget> steps (chosen; recorded)"``,
    the row :func:`chosen_rows` adds.

    Raises:
        KeyError: naming ``name`` when it is not one of :data:`BASELINES` in ``study``.
    """
    if study is None or study["chosen"][name] == study["table_budget"]:
        return name
    return f"{name}, {study['chosen'][name]} steps (chosen; recorded)"


def chosen_rows(study: Mapping | None) -> dict[str, list[dict]]:
    """Table 1's rows of the baselines whose chosen budget is not the page's: ``{chosen_name: per-user
    scores}`` from ``study["rows"]`` (:func:`read_record`: the table's users in ``cfg.users`` order, the same
    users and seeds as the page's runs, so a difference with the page's arms pairs user k with user k).
    ``{}`` when ``study`` is None or every baseline chose the page's budget.

    Args:
        study: as :func:`read_record` returns, or None.
    """
    if study is None:
        return {}
    return {
        chosen_name(name, study): [dict(row) for row in study["rows"][name]]
        for name in BASELINES
        if chosen_name(name, study) != name
    }


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """``(median, lowest, highest)`` of ``values`` (a score over users).

    Raises:
        ValueError: naming ``values`` when it is empty or holds a None or non-finite value.
    """
    if not values or any(v is None or not math.isfinite(v) for v in values):
        raise ValueError(f"values must be finite numbers, at least one, got {values!r}")
    return float(np.median(values)), float(min(values)), float(max(values))


#: The columns of :func:`budget_table` and panels of :func:`budget_curves`: score, label, digits.
SHOWN = (("lpips", "LPIPS ↓", 3), ("mse", "MSE ↓", 4), ("ssim", "SSIM ↑", 3))


def budget_table(study: Mapping) -> str:
    """Markdown: per baseline and budget, the mean LPIPS on the selection users (what the budget is chosen
    by) and on the table's users the median [lowest, highest] over users of LPIPS, MSE and SSIM (images in
    [0, 1]); the chosen budget's row marked in bold, the page's own budget (``table_budget``) named.

    Args:
        study: as :func:`read_record` returns.

    Raises:
        KeyError: when ``study`` lacks a field of :func:`read_record`'s.
    """
    from gitutor.tables import markdown_table

    rows = []
    for name in BASELINES:
        for budget in study["budgets"]:
            chosen = budget == study["chosen"][name]
            steps = f"{budget}" + (" (page)" if budget == study["table_budget"] else "")
            cells = [
                f"{np.mean(study['choice'][name][budget][CHOICE_SCORE]):.3f}",
                *(
                    "{0:.{3}f} [{1:.{3}f}, {2:.{3}f}]".format(
                        *spread(study["scores"][name][budget][score]), digits
                    )
                    for score, _, digits in SHOWN
                ),
            ]
            if chosen:
                steps, cells = f"**{steps}**", [f"**{c}**" for c in cells]
            rows.append([name, steps, *cells])
    header = [
        "baseline",
        "steps",
        "LPIPS ↓, selection users (mean)",
        *(f"{label}, table users: median [lowest, highest]" for _, label, _ in SHOWN),
    ]
    return markdown_table(header, rows)


def budget_curves(study: Mapping):
    """LPIPS, MSE and SSIM on the table's users against the budget (steps, log axis), one panel each: per
    baseline the median over users and the band from the lowest to the highest user, a ring at its chosen
    budget, a dotted line at the page's own budget; the legend above the panels. Returns the figure.

    Args:
        study: as :func:`read_record` returns.

    Raises:
        KeyError: when ``study`` lacks a field of :func:`read_record`'s.
    """
    import matplotlib.pyplot as plt

    from gitutor.viz import legible

    budgets = study["budgets"]
    fig, axes = plt.subplots(1, len(SHOWN), figsize=(4.2 * len(SHOWN), 3.6))
    for ax, (score, label, _) in zip(axes, SHOWN):
        for name in BASELINES:
            parts = np.array([spread(study["scores"][name][b][score]) for b in budgets])
            (line,) = ax.plot(budgets, parts[:, 0], marker="o", label=name)
            ax.fill_between(
                budgets, parts[:, 1], parts[:, 2], color=line.get_color(), alpha=0.2
            )
            best = budgets.index(study["chosen"][name])
            ax.plot(
                budgets[best],
                parts[best, 0],
                marker="o",
                markersize=12,
                markerfacecolor="none",
                color=line.get_color(),
            )
        ax.axvline(study["table_budget"], color="grey", linestyle=":", linewidth=1)
        ax.set(xscale="log", xlabel="steps", ylabel=label, xticks=budgets)
        ax.set_xticklabels([str(b) for b in budgets])
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(BASELINES), frameon=False)
    legible(fig)
    fig.tight_layout(rect=(0, 0, 1, 0.86))  # room for the legend above the panels
    return fig
