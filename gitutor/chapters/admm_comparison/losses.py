"""Chapter 07's check of the report's Fig. 2 claim on the ADMM attacks' loss: "the loss of the ADMM
algorithm rises linearly as the iterations increase" (the DLG reproduction report, §5 on Fig. 2, MNIST;
the other two datasets "similar"; translated).

The chapter records the matching loss D of DLG-ADMM and iDLG-ADMM at every L-BFGS step on every
attacked image (:func:`gitutor.chapters.admm_comparison.compare.compare_kind`). Per image the loss
*grew* when its last value exceeds its first (:func:`loss_growth` > 1). Per data kind and attack the
fraction of images whose loss grew, with its 95 % Wilson interval, reads *reproduced* when the whole
interval lies above ½ and *not reproduced* when it lies below ½. The report states the claim for both
attacks on MNIST and "similar" on the other kinds, so — the chapter's rule for the report's conclusion
(:func:`~gitutor.chapters.admm_comparison.judgement.claim_outcome`) — one (kind, attack) whose loss
clearly falls is a counter-example: the claim reads *not reproduced* when some (kind, attack) reads so,
*reproduced* when every one does, else *not resolved* (:func:`growth_judgement`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from gitutor.attacks import AttackResult
from gitutor.stats import success_interval
from gitutor.tables import markdown_table

#: The report's attacks on −Δ/η whose loss Fig. 2 shows growing.
ADMM_ATTACKS = ("DLG-ADMM", "iDLG-ADMM")
#: The report's words (§5, on Fig. 2; translated from "ADMM 算法的损失随迭代次数增加而线性上升").
CLAIM = (
    "the loss of the ADMM algorithm rises linearly as the iterations increase (§5, on Fig. 2, MNIST; "
    "the other two datasets similar; translated)"
)


def loss_growth(result: AttackResult) -> float:
    """Last over first matching loss of an attack (> 1: the loss grew, report Fig. 2).

    Raises:
        ValueError: if the attack recorded no loss or a first loss of 0.
    """
    loss = result.history.get("loss") or []
    if not loss or loss[0] == 0:
        raise ValueError(
            f"the attack must record a loss history with a non-zero first value, got {loss[:1]}"
        )
    return loss[-1] / loss[0]


def growth_ratios(
    runs: Mapping, kinds: Sequence[str], attacks: Sequence[str] = ADMM_ATTACKS
) -> dict[tuple[str, str], list[float]]:
    """``{(kind, attack): [loss_growth per image]}`` over every image of ``runs``
    (``{(kind, image index): {attack: AttackResult}}``) of each kind, images in index order.

    Raises:
        KeyError: naming a missing attack; ValueError: for a kind with no image in ``runs``.
    """
    out = {}
    for kind in kinds:
        images = sorted(i for k, i in runs if k == kind)
        if not images:
            raise ValueError(f"runs hold no image of kind {kind!r}")
        for attack in attacks:
            out[kind, attack] = [loss_growth(runs[kind, i][attack]) for i in images]
    return out


def growth_judgement(ratios: Mapping[tuple[str, str], Sequence[float]]) -> str:
    """``"not reproduced"`` when, for some (kind, attack), the 95 % Wilson interval of the fraction of
    images whose loss grew lies below ½ (a counter-example to a claim made for every kind and both
    attacks); ``"reproduced"`` when for every one it lies above ½; else ``"not resolved"``.

    Raises:
        ValueError: if ``ratios`` is empty.
    """
    if not ratios:
        raise ValueError("ratios must hold at least one (kind, attack)")
    rates = [success_interval([r > 1 for r in values]) for values in ratios.values()]
    if any(rate.high < 0.5 for rate in rates):
        return "not reproduced"
    return "reproduced" if all(rate.low > 0.5 for rate in rates) else "not resolved"


def growth_text(
    ratios: Mapping[tuple[str, str], Sequence[float]], names: Mapping[str, str]
) -> str:
    """``"DLG-ADMM grew on 0/10 digits (median last/first 0.23), …"``: per (kind, attack), images whose
    loss grew and the median of last over first loss (the short name of a kind, before any bracket)."""
    return ", ".join(
        f"{attack} grew on {sum(r > 1 for r in values)}/{len(values)} {names[kind].split(' (')[0]} "
        f"(median last/first {statistics.median(values):.2g})"
        for (kind, attack), values in ratios.items()
    )


def growth_table(
    ratios: Mapping[tuple[str, str], Sequence[float]], names: Mapping[str, str]
) -> str:
    """Markdown table: per (kind, attack) of ``ratios`` (:func:`growth_ratios`), the images whose loss
    grew (last over first > 1) out of all, and the median of last over first loss."""
    return markdown_table(
        ["data", "attack", "loss grew on", "median last / first"],
        [
            [
                names[kind],
                attack,
                f"{sum(r > 1 for r in values)} / {len(values)}",
                f"{statistics.median(values):.2g}",
            ]
            for (kind, attack), values in ratios.items()
        ],
    )


def growth_row(
    ratios: Mapping[tuple[str, str], Sequence[float]],
    names: Mapping[str, str],
    *,
    iterations: str,
    differences: str,
) -> dict:
    """The results row of :data:`CLAIM`: ``this_run`` is the fraction of all (image, attack) runs whose loss
    grew, ``claim_outcome`` :func:`growth_judgement`, ``claim_reason`` :func:`growth_text` (shortened by the
    ledger if long); ``iterations`` names the L-BFGS budget per kind.

    Raises:
        ValueError: as :func:`growth_judgement`.
    """
    outcome = growth_judgement(ratios)
    values = [r for rs in ratios.values() for r in rs]
    grew = sum(r > 1 for r in values)
    return {
        "quantity": "matching loss of DLG-ADMM and iDLG-ADMM grows over the L-BFGS steps (last > first)",
        "setting": f"every attacked image of every kind, round 1, {iterations}; target −Δ/η fixed",
        "paper": "rises linearly (Fig. 2)",
        "this_run": f"{grew} of {len(values)}",
        "unit": "runs (image × attack) whose loss grew",
        "differences": differences,
        "claim": CLAIM,
        "claim_outcome": outcome,
        "claim_reason": growth_text(ratios, names),
        "not_comparable": "the report shows its loss curves (Fig. 2) and states no number; judged from "
        "this chapter's runs",
    }
