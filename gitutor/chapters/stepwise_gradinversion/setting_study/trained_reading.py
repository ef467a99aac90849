"""The trained-network record read for its page (``book/studies/04_trained_network.json``, page
``book/trained_network``): what R_BN prefers, whether a reconstruction is closer to its own photograph
than to the others, what R_BN changes in the attacks, and whether the runs had stopped moving — as
tables, numbers and single words that the page's fixed prose glues in.

Ye et al. (AAAI 2024), Eq. 11: R_BN(x') compares the candidate's feature statistics with the network's
stored ones. It is a function of the candidate alone; it can prefer photographs to images that are not
photographs, not the client's photograph to another one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gitutor.chapters.stepwise_gradinversion.setting_study.trained import (
    TrainedSetting,
    trained_batch,
)
from gitutor.chapters.stepwise_gradinversion.setting_study.trained_summary import (
    DIGITS,
    METRICS,
    arm,
    arm_name,
    arms,
    late_change,
)
from gitutor.chapters.stepwise_gradinversion.trained_rows import MARGINS
from gitutor.paired import compare_paired, oriented, paired_difference
from gitutor.stats import format_interval, interval

#: How a specificity verdict reads (compare_paired's "A > B": own photograph closer, with the margin).
_CLOSER = {"A > B": "yes", "A < B": "no"}
#: A layout score beside PSNR, SSIM and LPIPS: :func:`layout_correlation` (blocks of ``LAYOUT_BLOCK`` px).
LAYOUT = "layout r"
LAYOUT_BLOCK = 8
#: The smallest own − others difference of the layout correlation read as "closer" (as SSIM's margin).
LAYOUT_MARGIN = 0.01


def layout_correlation(
    x: torch.Tensor, y: torch.Tensor, block: int = LAYOUT_BLOCK
) -> torch.Tensor:
    """Pearson correlation, per image, between ``x`` and ``y`` averaged over ``block`` × ``block`` pixel
    blocks (all channels): does a reconstruction put light and dark, and colour, where the photograph
    has them, whatever its contrast and mean? PSNR, SSIM and LPIPS all charge a low-contrast trace of
    the photograph under noise more than a flat grey; this score does not. Not a metric of the paper.

    Args:
        x, y: ``(B, C, H, W)`` images, H and W multiples of ``block``.
        block: side of the averaged blocks in pixels (≥ 1).

    Returns:
        ``(B,)`` correlations in [−1, 1] (0 where an image is flat after averaging).

    Raises:
        ValueError: if the shapes differ, are not ``(B, C, H, W)``, or H, W are not multiples of ``block``.
    """
    if (
        x.shape != y.shape
        or x.dim() != 4
        or block < 1
        or x.shape[-1] % block
        or x.shape[-2] % block
    ):
        raise ValueError(
            f"x and y must be equal (B, C, H, W) with H, W multiples of block={block}, got "
            f"{tuple(x.shape)} and {tuple(y.shape)}"
        )
    a, b = (
        torch.nn.functional.avg_pool2d(v.double(), block).flatten(1)
        for v in (x.clamp(0, 1), y)
    )
    a, b = a - a.mean(1, keepdim=True), b - b.mean(1, keepdim=True)
    norms = a.norm(dim=1) * b.norm(dim=1)
    return torch.where(
        norms > 0, (a * b).sum(1) / norms.clamp_min(1e-12), torch.zeros_like(norms)
    )


def rbn_numbers(rows: Sequence[Mapping]) -> dict:
    """:func:`.trained_summary.rbn_controls` read for the page: ``lowest`` (on how many photographs R_BN
    of the photograph is below that of each stand-in), ``photographs``, ``stand_ins`` (how many per
    photograph), ``photo_low`` / ``photo_high`` (the photographs' range), ``stand_in_low`` (the lowest
    stand-in) and ``ranges`` ("separate" when every photograph scores below every stand-in, else
    "overlap").

    Raises:
        ValueError: if ``rows`` is empty or a row has no stand-in.
    """
    if not rows:
        raise ValueError("rows must hold at least one photograph")
    stand_ins = [k for k in rows[0] if k not in ("batch", "true photograph")]
    if not stand_ins:
        raise ValueError(
            f"rows need stand-ins beside 'true photograph', got {sorted(rows[0])}"
        )
    photos = [r["true photograph"] for r in rows]
    floor = min(r[k] for r in rows for k in stand_ins)
    return {
        "lowest": sum(
            r["true photograph"] < min(r[k] for k in stand_ins) for r in rows
        ),
        "photographs": len(rows),
        "stand_ins": len(stand_ins),
        "photo_low": min(photos),
        "photo_high": max(photos),
        "stand_in_low": floor,
        "ranges": "separate" if max(photos) < floor else "overlap",
    }


def specificity_rows(trials: Sequence[Mapping], setting: TrainedSetting) -> list[dict]:
    """Is a reconstruction closer to its own photograph than to the other photographs of the split?
    Per arm of ``trials`` (on ``setting.split``): each score (PSNR, SSIM, LPIPS and
    :func:`layout_correlation`, :data:`LAYOUT`) of reconstruction i against photograph i
    minus its mean against the other N − 1 photographs, paired over the N photographs, mean [95 %
    interval], and "yes" / "no" / "not resolved" (the paired interval beyond the metric's margin of
    :data:`.trained_rows.MARGINS`, :data:`LAYOUT_MARGIN`; LPIPS lower is better). A score that does not prefer the
    photograph a reconstruction was attacked from measures something other than that photograph.
    Within a batch of B > 1 the reconstructions were matched to the photographs by MSE (Hungarian),
    which favours "own" — a bias towards "yes".

    Raises:
        ValueError: if an arm does not hold every batch of ``setting`` or the split has one photograph.
    """
    from gitutor.metrics import lpips_distance, psnr, ssim

    truths = torch.cat([trained_batch(setting, b)[0] for b in range(setting.batches())])
    if len(truths) < 2:
        raise ValueError("specificity needs at least two photographs")
    functions = {
        "PSNR": psnr,
        "SSIM": ssim,
        "LPIPS": lpips_distance,
        LAYOUT: layout_correlation,
    }
    margins = {**MARGINS, LAYOUT: LAYOUT_MARGIN}
    rows = []
    for arm_setting, method in arms(trials):
        runs = arm(trials, arm_setting, method)
        if [r["batch"] for r in runs] != list(range(setting.batches())):
            raise ValueError(
                f"{arm_name(arm_setting, method)} does not hold every batch of the {setting.split} split"
            )
        images = torch.cat([r["images"] for r in runs])
        row = {"arm": arm_name(arm_setting, method), "photographs": len(truths)}
        for m in functions:
            own = functions[m](images, truths)
            others = torch.stack(
                [functions[m](images, truths.roll(k, 0)) for k in range(1, len(truths))]
            ).mean(0)
            row[f"{m}: own − others"] = format_interval(
                paired_difference(own.tolist(), others.tolist()),
                DIGITS.get(m, 3),
                count=False,
            )
            found = compare_paired(
                oriented(m, own.tolist()),
                oriented(m, others.tolist()),
                margin=margins[m],
            )
            row[f"{m}: closer to its own"] = _CLOSER.get(found, "not resolved")
        rows.append(row)
    return rows


def closer_count(rows: Sequence[Mapping]) -> int:
    """How many (arm, score) cells of :func:`specificity_rows` are resolved closer to their own
    photograph than to the others."""
    return sum(
        r[f"{m}: closer to its own"] == "yes" for r in rows for m in (*METRICS, LAYOUT)
    )


def _row(rows: Sequence[Mapping], a: str, b: str) -> Mapping | None:
    return next((r for r in rows if r["A"] == a and r["B"] == b), None)


def _better(row: Mapping | None, side: str) -> list[str]:
    return [m for m in METRICS if row is not None and row[f"{m}: better"] == side]


def rbn_effects(
    rows: Sequence[Mapping], baseline: str = "Inverting Gradients"
) -> dict[str, str]:
    """What the R_BN on/off rows of :func:`.trained_summary.paired_rows` say, one word each, over
    GradInversion and stepwise alike:

    * ``"gap"`` — "needs" or "does not need": whether the attacks' lead over ``baseline`` needs R_BN
      ("does not need" when every metric in which an attack beats ``baseline`` with R_BN it also
      beats it in without R_BN; "needs" otherwise; "none" when no attack beats it with R_BN);
    * per metric of PSNR, SSIM, LPIPS — R_BN on against off: "on" (favours R_BN on in every attack),
      "off", "not resolved" (in every attack) or "mixed".

    Raises:
        ValueError: if ``rows`` lack a comparison of an attack with or without R_BN against
            ``baseline``, or of the two against each other.
    """
    gaps, effects = [], {m: set() for m in METRICS}
    for method in ("GradInversion", "Stepwise"):
        on, off = (
            _row(rows, method, baseline),
            _row(rows, f"{method} (R_BN off)", baseline),
        )
        effect = _row(rows, method, f"{method} (R_BN off)")
        if on is None or off is None or effect is None:
            raise ValueError(
                f"rows need {method} and {method} (R_BN off) against {baseline}, and against each other"
            )
        with_, without = _better(on, "A"), _better(off, "A")
        gaps.append(None if not with_ else set(with_) <= set(without))
        for m in METRICS:
            effects[m].add(effect[f"{m}: better"])
    found = {
        "gap": "none"
        if all(g is None for g in gaps)
        else "does not need"
        if all(g in (True, None) for g in gaps)
        else "needs"
    }
    words = {"A": "on", "B": "off", "not resolved": "not resolved"}
    found |= {
        m: words.get(next(iter(v)), "mixed") if len(v) == 1 else "mixed"
        for m, v in effects.items()
    }
    return found


def _list(metrics: Sequence[str]) -> str:
    return ", ".join(metrics) if metrics else "no metric"


def late_changes(trials: Sequence[Mapping]) -> dict:
    """Whether the runs had stopped moving: per metric (PSNR, SSIM) the largest |mean change| over the
    last 30 % of a run among the arms (``"PSNR"``, ``"SSIM"``), and how many arms' change is resolved
    above 0 (``"PSNR rising"``, ``"SSIM rising"``: 95 % interval over the photographs wholly positive,
    still rising when the run ended) of ``"arms"``.

    Raises:
        ValueError: if ``trials`` is empty.
    """
    if not trials:
        raise ValueError("trials must hold at least one run")
    found = {"arms": len(arms(trials))}
    for column, metric in enumerate(("PSNR", "SSIM"), start=1):
        changes = [
            interval([late_change(r["curve"], column) for r in arm(trials, *a)])
            for a in arms(trials)
        ]
        found[metric] = max(abs(v.mean) for v in changes)
        found[f"{metric} rising"] = sum(v.low > 0 for v in changes)
    return found
