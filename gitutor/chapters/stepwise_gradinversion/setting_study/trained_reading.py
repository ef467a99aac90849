"""The trained-network record in words (``book/studies/04_trained_network.json``, page ``book/trained_network``):
what R_BN prefers, whether a reconstruction is closer to its own photograph than to the others, what
R_BN changes in the attacks, and whether the runs had stopped moving — each a sentence built from the
numbers, glued into the page.

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


def rbn_sentence(rows: Sequence[Mapping]) -> str:
    """:func:`.trained_summary.rbn_controls` in words: on how many photographs R_BN is lower for the
    photograph than for each of its stand-ins, and whether every photograph scores below every stand-in.

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
    lowest = sum(r["true photograph"] < min(r[k] for k in stand_ins) for r in rows)
    photos = [r["true photograph"] for r in rows]
    floor = min(r[k] for r in rows for k in stand_ins)
    split = (
        "every photograph scores below every stand-in: with these statistics the prior prefers "
        "photographs to images that are not photographs"
        if max(photos) < floor
        else "the photographs' and the stand-ins' ranges overlap: the prior does not set these photographs "
        "apart from every image that is not a photograph"
    )
    return (
        f"On {lowest} of {len(rows)} study photographs R_BN of the photograph is lower than that of each of "
        f"its {len(stand_ins)} stand-ins; the photographs score {min(photos):,} to {max(photos):,}, the "
        f"stand-ins {floor:,} or more — {split}."
    )


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


def specificity_sentence(rows: Sequence[Mapping]) -> str:
    """:func:`specificity_rows` in words: which arms are closer to their own photographs, per metric."""
    closer = {
        m: [r["arm"] for r in rows if r[f"{m}: closer to its own"] == "yes"]
        for m in (*METRICS, LAYOUT)
    }
    n = rows[0]["photographs"] if rows else 0
    if not any(closer.values()):
        return (
            f"In no arm and no score is a reconstruction resolved closer to its own photograph than to the "
            f"other {n - 1} photographs of the set (paired over the {n} photographs, beyond the margin)"
        )
    return (
        f"Resolved closer to its own photograph than to the other {n - 1} (paired over the {n} photographs, "
        "beyond the margin): "
        + "; ".join(
            f"in {m}, {', '.join(found) if found else 'no arm'}"
            for m, found in closer.items()
        )
    )


def _row(rows: Sequence[Mapping], a: str, b: str) -> Mapping | None:
    return next((r for r in rows if r["A"] == a and r["B"] == b), None)


def _better(row: Mapping | None, side: str) -> list[str]:
    return [m for m in METRICS if row is not None and row[f"{m}: better"] == side]


def rbn_answer(rows: Sequence[Mapping], baseline: str = "Inverting Gradients") -> str:
    """The study's answer to "does R_BN let GradInversion and stepwise recover what Inverting Gradients
    does not?" from :func:`.trained_summary.paired_rows` over the study photographs: in which metrics the
    paper's arms and their R_BN-off variants beat ``baseline``, and what R_BN on against off changes.

    Raises:
        ValueError: if ``rows`` lack a comparison of an attack with or without R_BN against ``baseline``.
    """
    parts = []
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
        gain = (
            f"beats {baseline} in {_list(with_)} with R_BN and in {_list(without)} without it"
            if with_ or without
            else f"is not resolved above {baseline}, with R_BN or without it"
        )
        if with_ and set(with_) <= set(without):
            gain += " (that gap does not need R_BN)"
        rbn = [
            f"{m} {'favours R_BN on' if v == 'A' else 'favours R_BN off' if v == 'B' else 'not resolved'}"
            for m in METRICS
            for v in [effect[f"{m}: better"]]
        ]
        parts.append(f"{method} {gain}; R_BN on against off: {', '.join(rbn)}")
    return "; ".join(parts) + "."


def _list(metrics: Sequence[str]) -> str:
    return ", ".join(metrics) if metrics else "no metric"


def late_change_sentence(trials: Sequence[Mapping]) -> str:
    """Whether the runs had stopped moving: per metric (PSNR, SSIM) the largest |mean change| over the
    last 30 % of a run among the arms, and the arms whose change is resolved above 0 (95 % interval over
    the photographs wholly positive: still rising when the run ended).

    Raises:
        ValueError: if ``trials`` is empty.
    """
    if not trials:
        raise ValueError("trials must hold at least one run")
    parts = []
    for column, (metric, unit, digits) in enumerate(
        (("PSNR", " dB", 2), ("SSIM", "", 3)), start=1
    ):
        changes = {
            arm_name(*a): interval(
                [late_change(r["curve"], column) for r in arm(trials, *a)]
            )
            for a in arms(trials)
        }
        largest = max(abs(v.mean) for v in changes.values())
        rising = [name for name, v in changes.items() if v.low > 0]
        parts.append(
            f"{metric} moved by at most {largest:.{digits}f}{unit} on average; still rising "
            f"(interval above 0): {', '.join(rising) if rising else 'no arm'}"
        )
    return "Over the last 30 % of the runs " + "; ".join(parts) + "."


def study_lesson(specific: Sequence[Mapping], pairs: Sequence[Mapping]) -> str:
    """The study's lesson in one sentence, from :func:`specificity_rows` and the R_BN on/off rows of
    :func:`.trained_summary.paired_rows` (B named "… (R_BN off)"): whether any arm is closer to its own
    photographs, and in which metrics switching R_BN on moves every arm the same way.

    Raises:
        ValueError: if ``specific`` is empty or ``pairs`` hold no R_BN on/off row.
    """
    effects = [r for r in pairs if r["B"].endswith("(R_BN off)")]
    if not specific or not effects:
        raise ValueError("need specificity rows and at least one R_BN on/off row")
    closer = sorted(
        {
            r["arm"]
            for r in specific
            for m in (*METRICS, LAYOUT)
            if r[f"{m}: closer to its own"] == "yes"
        }
    )
    found = (
        "no arm's reconstructions are resolved closer to their own photographs than to the others in any "
        "score"
        if not closer
        else f"{', '.join(closer)} are closer to their own photographs in some score "
        "(the specificity table)"
    )
    moved = {m: {r[f"{m}: better"] for r in effects} for m in METRICS}
    on = [m for m, v in moved.items() if v == {"A"}]
    off = [m for m, v in moved.items() if v == {"B"}]
    still = [m for m in METRICS if m not in on + off]
    said = [f"favours R_BN on in {_list(on)}"] if on else []
    said += [f"favours R_BN off in {_list(off)}"] if off else []
    said += [f"is not resolved in {_list(still)}"] if still else []
    return (
        f"{found}; R_BN on against off, paired, "
        + " and ".join(said)
        + " in every attack compared"
    )
