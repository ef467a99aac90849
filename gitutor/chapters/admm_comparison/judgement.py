"""Chapter 07's judgement of the report's conclusion, one data kind at a time, and what "recognisable"
is worth on the chapter's own images.

The report concludes that ADMM "may be an effective privacy-protection technique" (§5, on Fig. 1). An
attacker of the increment has three attacks in this chapter that use nothing but what the server knows
in round 1: DLG and iDLG (the sign rule's label read off the increment) on −Δ/(2η), and cosine matching
on −Δ/η. Per image, the attacker keeps the one whose
reconstruction's gradient points closest to −Δ/η (:func:`attackers_pick`, a number the server computes;
:func:`best_on_increment`, the higher PSNR, is the oracle beside it); per data kind, the fraction of images it makes recognisable
(PSNR ≥ :data:`gitutor.controls.RECOGNISABLE_PSNR`, with its 95 % Wilson interval) reads *refuted* when
the whole interval lies above ½, *consistent* when it lies below ½, else not resolved
(:func:`kind_judgements`). Kinds are never pooled into one verdict: the headline says what each kind
shows (:func:`claim_outcome`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from gitutor.controls import (
    RECOGNISABLE_PSNR,
    check_threshold,
    control_scores,
    start_images,
)
from gitutor.metrics import psnr
from gitutor.stats import Interval, success_interval
from gitutor.tables import markdown_table

#: The round-1 attacks on the increment that need only what the server knows (ρ, η, E; π = 0).
ON_INCREMENT = ("DLG on −Δ/(2η)", "iDLG on −Δ/(2η)", "cosine on −Δ/η")
#: The adaptive attack (:func:`gitutor.attacks.adaptive_admm_inversion`: the client's E local steps
#: unrolled); in round 1 with E = 1 it is DLG on −Δ/(2η), so the main table runs it under that name.
ADAPTIVE = "adaptive (E steps unrolled)"
#: The control column of the attacks' N(0, 1) start (:func:`control_table`).
START = "N(0, 1) start"
#: The attacks on the SGD gradient, for reference.
ON_GRADIENT = ("DLG", "iDLG")


def best_on_increment(
    table: Mapping[str, Sequence[tuple[float, float]]],
    attacks: Sequence[str] = ON_INCREMENT,
) -> list[float]:
    """Per image, the highest PSNR (dB) of ``attacks`` (``table``: ``{attack: [(MSE, PSNR)] per image}``).

    Raises:
        KeyError: naming a missing attack; ValueError: when the attacks scored different numbers of images.
    """
    columns = [[psnr for _, psnr in table[name]] for name in attacks]
    if len({len(c) for c in columns}) != 1:
        raise ValueError(
            f"the attacks {attacks} must score the same images, got {[len(c) for c in columns]}"
        )
    return [max(values) for values in zip(*columns)]


def attackers_pick(
    table: Mapping[str, Sequence[tuple[float, float]]],
    criteria: Mapping[str, Sequence[float]],
) -> list[float]:
    """Per image, the PSNR (dB) of the attack the attacker would keep: of the attacks in ``criteria``
    (``{attack: [what the attacker computes per image, lower = better]}``, e.g.
    :func:`~gitutor.chapters.admm_comparison.compare.increment_criteria`), the one with the lowest
    criterion, read off ``table`` (``{attack: [(MSE, PSNR)] per image}``). Ties go to the first attack.
    Unlike :func:`best_on_increment` (the oracle: the highest PSNR, which needs the photograph), this
    uses nothing the server lacks.

    Raises:
        KeyError: naming an attack of ``criteria`` missing from ``table``; ValueError: when the attacks
            scored or were scored on different numbers of images.
    """
    names = list(criteria)
    columns = [[p for _, p in table[name]] for name in names]
    sizes = {len(c) for c in columns} | {len(criteria[name]) for name in names}
    if len(sizes) != 1:
        raise ValueError(
            f"the attacks {names} must score and be scored on the same images, got sizes {sorted(sizes)}"
        )
    picks = [
        min(range(len(names)), key=lambda a: criteria[names[a]][i])
        for i in range(len(columns[0]))
    ]
    return [columns[a][i] for i, a in enumerate(picks)]


def judge(rate: Interval) -> str:
    """``"refuted"`` when the 95 % interval of the fraction recognisable lies above ½ (the increment leaks
    most images), ``"consistent"`` when it lies below ½, else ``"not resolved"`` (the kind's n is too small)."""
    if rate.low > 0.5:
        return "refuted"
    return "consistent" if rate.high < 0.5 else "not resolved"


def kind_judgements(
    tables: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]],
    criteria: Mapping[str, Mapping[str, Sequence[float]]],
    threshold: float = RECOGNISABLE_PSNR,
) -> dict[str, dict]:
    """Per data kind: ``increment`` (:func:`gitutor.stats.success_interval` of images with PSNR ≥
    ``threshold`` dB by :func:`attackers_pick` of the attacks on the increment, chosen by the kind's
    ``criteria``), ``count`` (those images), ``oracle_count`` (by :func:`best_on_increment`, the highest
    PSNR: an upper bound that needs the photograph), ``gradient`` and ``gradient_count`` (the best of
    :data:`ON_GRADIENT`, for reference), ``n`` and ``verdict`` (:func:`judge` of ``increment``: the
    attacker's, never the oracle's).

    Raises:
        ValueError: when ``criteria`` lacks a kind of ``tables``.
    """
    if set(tables) - set(criteria):
        raise ValueError(
            f"criteria must hold every kind of tables, missing {sorted(set(tables) - set(criteria))}"
        )
    out = {}
    for kind, table in tables.items():
        on_increment = [p >= threshold for p in attackers_pick(table, criteria[kind])]
        oracle = [p >= threshold for p in best_on_increment(table)]
        on_gradient = [p >= threshold for p in best_on_increment(table, ON_GRADIENT)]
        rate = success_interval(on_increment)
        out[kind] = {
            "increment": rate,
            "gradient": success_interval(on_gradient),
            "count": sum(on_increment),
            "oracle_count": sum(oracle),
            "gradient_count": sum(on_gradient),
            "n": len(on_increment),
            "verdict": judge(rate),
        }
    return out


def claim_outcome(judgements: Mapping[str, Mapping]) -> str:
    """The report's conclusion judged over kinds without pooling them: ``"refuted"`` when some kind refutes it
    (a counter-example in the report's own kind of data suffices against "ADMM may protect"), ``"consistent"``
    when every kind is consistent with it, else ``"not resolved"``."""
    verdicts = [j["verdict"] for j in judgements.values()]
    if "refuted" in verdicts:
        return "refuted"
    return (
        "consistent"
        if verdicts and all(v == "consistent" for v in verdicts)
        else "not resolved"
    )


def kinds_text(judgements: Mapping[str, Mapping], names: Mapping[str, str]) -> str:
    """``"digits 10/10 (refuted), photographs 6/10 (not resolved), …"``: per kind, images recognisable from the
    increment and the kind's verdict (the short name before any bracket)."""
    return ", ".join(
        f"{names[kind].split(' (')[0]} {j['count']}/{j['n']} ({j['verdict']})"
        for kind, j in judgements.items()
    )


def kind_table(
    judgements: Mapping[str, Mapping], names: Mapping[str, str], threshold: float
) -> str:
    """Markdown table: per kind, images recognisable from the gradient (best of DLG, iDLG), from the
    increment by the attacker's pick (:func:`attackers_pick`) with its 95 % Wilson interval, by the oracle
    (:func:`best_on_increment`, which needs the photograph), and the kind's verdict on the claim (the
    attacker's)."""
    rows = [
        [
            names[kind],
            f"{j['gradient_count']} / {j['n']}",
            f"{j['count']} / {j['n']}",
            f"[{j['increment'].low:.2f}, {j['increment'].high:.2f}]",
            f"{j['oracle_count']} / {j['n']}",
            j["verdict"],
        ]
        for kind, j in judgements.items()
    ]
    return markdown_table(
        [
            "data",
            f"from ∇f (≥ {threshold:.0f} dB)",
            "from −Δ/η, attacker's pick",
            "95 % Wilson",
            "oracle (needs the photograph)",
            "“ADMM may protect privacy”",
        ],
        rows,
    )


def control_table(
    data: Mapping[str, tuple[torch.Tensor, torch.Tensor]],
    count: int,
    names: Mapping[str, str],
    threshold: float = RECOGNISABLE_PSNR,
    seed: int = 0,
) -> tuple[str, float]:
    """The book's controls (:func:`gitutor.controls.control_scores`: mean colour, 4×4 thumbnail, batch mean, a
    different image) and the attacks' own start, x' ~ N(0, 1) clipped to [0, 1] (DLG Algorithm 1, line 2;
    :func:`gitutor.controls.start_images` from ``seed``), on the first ``count`` images of every kind: a
    Markdown table of each control's highest and median PSNR (dB) per kind (cells "highest (median)"), and
    the highest control PSNR over all kinds.

    Raises:
        ValueError: as :func:`gitutor.controls.check_threshold` when a control reaches ``threshold`` on some kind
            (the threshold would call a reconstruction that knows nothing recognisable).
    """
    rows, best = [], -math.inf
    for kind, (images, _) in data.items():
        images = images[:count].cpu()
        channels = images.shape[1]
        start = start_images(images, [0.0] * channels, [1.0] * channels, seed=seed)
        scores = control_scores(images)
        scores[START] = psnr(start["noise clamp(N(0, 1), 0, 1), pixels"], images)
        best = max(best, check_threshold(scores, threshold))
        rows.append(
            [
                names[kind],
                *(
                    f"{float(v.max()):.1f} ({float(v.median()):.1f})"
                    for v in scores.values()
                ),
            ]
        )
    headers = [
        "data",
        *scores,
    ]  # each cell: highest (median) over the kind's images, dB
    return markdown_table(headers, rows), best


def relative_gap(cosine: float, ratio: float) -> float:
    """‖a − 2g‖ / ‖2g‖ from cos(a, g) and ‖a‖ / ‖g‖ (law of cosines): how far −Δ/η = a lies from twice the
    gradient g, the quantity of Exercise 7.2, from one cell of the chapter's cosine table."""
    return math.sqrt(max(ratio**2 + 4 - 4 * cosine * ratio, 0.0)) / 2
