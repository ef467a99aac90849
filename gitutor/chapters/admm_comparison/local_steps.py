"""Chapter 07's ablation of more local steps, like with like: the three round-1 attacks on the increment
(:data:`~gitutor.chapters.admm_comparison.judgement.ON_INCREMENT`: DLG and iDLG on −Δ/(2η), cosine matching on
−Δ/η) at E > 1 local steps, on the same images, model, dummy seed and budgets as at the chapter's E in
the main table (:func:`gitutor.chapters.admm_comparison.compare.increment_attacks`), and beside them the
adaptive attack (:data:`~gitutor.chapters.admm_comparison.judgement.ADAPTIVE`, the E local steps
unrolled: :func:`gitutor.chapters.admm_comparison.compare.adaptive_attacks`), the strongest the threat
model allows. In round 1 with E = 1 the adaptive attack is DLG on −Δ/(2η), so the main table's
DLG on −Δ/(2η) stands for it there.

``base`` below is the main table of the ablation's data kind and ``more`` ``{(ρ, E): table}``, each table
``{attack: [(MSE, PSNR dB)] per image}`` over the same images in the same order. Per setting,
:func:`summarise` counts the images each attack (and the attacker's pick of the attacks its criteria
name) makes recognisable, and takes
the paired change in PSNR against ``base`` image by image (:func:`gitutor.paired.paired_difference`:
mean and 95 % Student-t interval). The report's conclusion is read for each setting by the same rule as
the main table (:func:`~gitutor.chapters.admm_comparison.judgement.judge`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from gitutor.paired import paired_difference
from gitutor.results import interval_fields
from gitutor.stats import success_interval
from gitutor.tables import markdown_table
from gitutor.chapters.admm_comparison.judgement import (
    ADAPTIVE,
    ON_INCREMENT,
    attackers_pick,
    judge,
)

#: Per image, the attack the attacker keeps by what it computes
#: (:func:`~gitutor.chapters.admm_comparison.judgement.attackers_pick`).
BETTER = "attacker's pick"


#: The attack columns of the ablation's tables.
COLUMNS = (*ON_INCREMENT, ADAPTIVE)


def _with_adaptive(
    table: Mapping[str, Sequence[tuple[float, float]]],
) -> dict[str, Sequence[tuple[float, float]]]:
    """``table`` with an :data:`ADAPTIVE` column: its own, or (the main table, round 1, E = 1) its DLG on
    −Δ/(2η), which is the adaptive attack's objective there."""
    return {ADAPTIVE: table[ON_INCREMENT[0]], **table}


def _psnrs(
    table: Mapping[str, Sequence[tuple[float, float]]],
    criteria: Mapping[str, Sequence[float]],
) -> dict[str, list[float]]:
    return {
        **{name: [p for _, p in table[name]] for name in COLUMNS},
        BETTER: attackers_pick(table, criteria),
    }


def summarise(
    base: Mapping[str, Sequence[tuple[float, float]]],
    more: Mapping[tuple[float, int], Mapping[str, Sequence[tuple[float, float]]]],
    threshold: float,
    criteria: Mapping,
) -> dict[tuple[float, int], dict]:
    """``criteria``: what the attacker computes to pick an attack per image
    (:func:`~gitutor.chapters.admm_comparison.compare.increment_criteria`), for ``base`` under the key
    ``"base"`` and for every ``(ρ, E)`` of ``more``; its attacks are the ones the pick ranges over (at
    E > 1 all three of :data:`COLUMNS`). ``base`` is the main table (E = 1, round 1): its
    :data:`ADAPTIVE` column is its DLG on −Δ/(2η) unless it has its own; every table of ``more`` has its
    own. Per ``(ρ, E)`` of ``more``: ``counts`` and ``medians`` (images with PSNR ≥ ``threshold`` dB and
    median PSNR, per attack of :data:`COLUMNS` and :data:`BETTER`), ``n``, ``rate`` (Wilson interval of
    :data:`BETTER`'s count),
    ``verdict`` (:func:`~gitutor.chapters.admm_comparison.judgement.judge` of it), ``lost`` / ``gained`` (images
    :data:`BETTER` makes recognisable in ``base`` and not here / here and not in ``base``) and ``change``
    (paired PSNR change against ``base``, per attack and :data:`BETTER`; None for a single image).

    Raises:
        KeyError: naming a missing attack (e.g. a table of ``more`` without :data:`ADAPTIVE`);
        ValueError: when a table scores other images than ``base``.
    """
    before = _psnrs(_with_adaptive(base), criteria["base"])
    out = {}
    for setting, table in more.items():
        after = _psnrs(table, criteria[setting])
        if len(after[BETTER]) != len(before[BETTER]):
            raise ValueError(
                f"setting {setting} scores {len(after[BETTER])} images, the base "
                f"{len(before[BETTER])}: a paired change needs the same images"
            )
        n = len(after[BETTER])
        rate = success_interval([p >= threshold for p in after[BETTER]])
        crossed = [
            (a >= threshold) - (b >= threshold)
            for a, b in zip(after[BETTER], before[BETTER])
        ]
        out[setting] = {
            "counts": {k: sum(p >= threshold for p in v) for k, v in after.items()},
            "lost": crossed.count(-1),
            "gained": crossed.count(1),
            "medians": {k: statistics.median(v) for k, v in after.items()},
            "n": n,
            "rate": rate,
            "verdict": judge(rate),
            "change": {
                k: paired_difference(after[k], before[k]) if n > 1 else None
                for k in after
            },
        }
    return out


def base_summary(
    base: Mapping[str, Sequence[tuple[float, float]]],
    threshold: float,
    criteria: Mapping[str, Sequence[float]],
) -> dict:
    """:func:`summarise`'s fields for ``base`` itself (``change`` None), the attacker picking by
    ``criteria``; its :data:`ADAPTIVE` column is its DLG on −Δ/(2η) unless it has its own."""
    picks = {"base": criteria, (0.0, 0): criteria}
    filled = _with_adaptive(base)
    return summarise(filled, {(0.0, 0): filled}, threshold, picks)[0.0, 0] | {
        "change": None
    }


def _cell(summary: Mapping, name: str) -> str:
    text = f"{summary['counts'][name]} / {summary['n']} ({summary['medians'][name]:.0f} dB)"
    change = (summary["change"] or {}).get(name)
    return (
        text
        if change is None
        else f"{text}; {change.mean:+.1f} [{change.low:+.1f}, {change.high:+.1f}]"
    )


def steps_table(
    base: Mapping,
    summaries: Mapping[tuple[float, int], Mapping],
    base_steps: int,
    threshold: float,
) -> str:
    """Markdown table: one row for ``base`` (E = ``base_steps``, any ρ: in round 1 with one step −Δ/η = 2∇f
    whatever ρ) and one per ``(ρ, E)`` of ``summaries``; per attack of :data:`COLUMNS` (the base row's
    adaptive cell is its DLG on −Δ/(2η)) and :data:`BETTER` the images recognisable
    (≥ ``threshold`` dB) "k / n (median dB)", then the paired PSNR change against the base row, mean
    [95 % interval] in dB; then the images :data:`BETTER` makes recognisable in the base row and not
    here / here and not in the base row ("lost / gained"); last, the report's conclusion by the main
    table's rule."""
    rows = [
        [
            f"E = {base_steps} (main table)",
            *(_cell(base, k) for k in (*COLUMNS, BETTER)),
            "—",
            base["verdict"],
        ]
    ]
    rows += [
        [
            f"ρ = {rho:g}, E = {steps}",
            *(_cell(s, k) for k in (*COLUMNS, BETTER)),
            f"{s['lost']} / {s['gained']}",
            s["verdict"],
        ]
        for (rho, steps), s in summaries.items()
    ]
    header = ["round 1", *COLUMNS, BETTER, "lost / gained"]
    return markdown_table([*header, "“ADMM may protect privacy”"], rows)


def steps_rows(
    summaries: Mapping[tuple[float, int], Mapping],
    kind: str,
    cfg,
    *,
    budget: str,
) -> list[dict]:
    """One results row per ``(ρ, E)`` of ``summaries`` (:func:`summarise`): the fraction of ``kind``'s
    images the attacker's pick of the attacks on the increment makes recognisable (95 % Wilson
    interval), each row's ``differences`` naming its own ρ and E (round 1;
    :func:`~gitutor.chapters.admm_comparison.report.profile_differences` of the chapter's profile
    ``cfg``); the report does not vary E (no paper value).

    Raises:
        ValueError: as :func:`~gitutor.chapters.admm_comparison.report.profile_differences` for a ρ or E
            out of range.
    """
    from gitutor.chapters.admm_comparison.report import profile_differences

    attacks = ", ".join(COLUMNS)
    return [
        {
            "quantity": f"images recognisable from −Δ/η at E = {steps}, ρ = {rho:g} ({BETTER} of {attacks})",
            "setting": f"{s['n']} images of {kind}, round 1, {budget}; the same images as the E = 1 rows",
            "paper": "not studied",
            "this_run": round(s["rate"].mean, 3),
            "unit": f"fraction; 95 % Wilson interval [{s['rate'].low:.2f}, {s['rate'].high:.2f}]",
            "differences": profile_differences(cfg, rho=rho, local_steps=steps),
            **interval_fields(s["rate"], 3),
        }
        for (rho, steps), s in summaries.items()
    ]


def unattacked_steps(
    base_steps: int, attacked: Sequence[int], measured: Sequence[int]
) -> list[int]:
    """The E of the cosine grid (``measured``) at which the attacks on the increment ran neither in
    the main table (E = ``base_steps``) nor in the ablation (``attacked``): there only their target's
    turn is measured, not whether they recover the images. Sorted."""
    return sorted(set(measured) - set(attacked) - {base_steps})
