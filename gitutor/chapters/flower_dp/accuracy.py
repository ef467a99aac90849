"""Chapter 08's test accuracy in words: Wilson intervals against chance and paired differences.

Every accuracy of the chapter is one trained model's (one draw of the clients' and the server's noise)
on the server's balanced test set; its interval varies the test images, never the seed. Ye et al.
2024 (§2): strict DP guarantees need noise that significantly hurts utility — a qualitative claim the
smallest-ε row judges from the paired difference.
"""

from __future__ import annotations

from collections.abc import Sequence

from gitutor.paired import paired_difference
from gitutor.results import interval_fields
from gitutor.stats import format_interval

#: Chance on the chapter's test set: half faces, half not, so a constant guess gets 0.5.
CHANCE = 0.5


def _difference(outcomes: Sequence[bool], baseline: Sequence[bool]):
    return paired_difference([float(v) for v in outcomes], [float(v) for v in baseline])


def chance_words(acc, chance: float = CHANCE) -> str:
    """Whether the Wilson interval ``acc`` lies above, below or around ``chance``; below says what that means."""
    if acc.low > chance:
        return "above chance"
    if acc.high < chance:
        return f"below chance ({chance:g}, what always guessing one class gets)"
    return "not resolved from chance"


def smallest_accuracy_row(points: Sequence[dict]) -> dict:
    """The fields of the paper-vs-run row "test accuracy at the smallest ε" of the DP-SGD sweep ``points``
    (``points[0]``: σ = 0): setting (ε, chance, the no-DP accuracy), the accuracy with its Wilson interval,
    and Ye et al.'s claim judged by the paired difference to σ = 0 — consistent when its interval lies
    below 0, not resolved when it covers 0, refuted when it lies above."""
    smallest, plain = min(points, key=lambda p: p["epsilon"]), points[0]
    acc, none = smallest["accuracy_interval"], plain["accuracy_interval"]
    diff = _difference(smallest["outcomes"], plain["outcomes"])
    outcome = (
        "consistent" if diff.high < 0 else "refuted" if diff.low > 0 else "not resolved"
    )
    reason = f"minus σ = 0 ({format_interval(none, 2, False)}), paired: {format_interval(diff, 2, False)}"
    setting = (
        f"Opacus DP-SGD, σ = {smallest['sigma']:g}, ε = {smallest['epsilon']:.3g} per example over all "
        f"rounds: {format_interval(acc, 2, False)} over the {acc.n} test images of one trained model, "
        f"{chance_words(acc)}; {reason}"
    )
    return {
        "setting": setting,
        "paper": "strict DP costs utility significantly (Ye et al. 2024 §2)",
        "this_run": round(acc.mean, 3),
        "unit": "fraction of test images",
        "claim": "strict DP guarantees need noise that significantly hurts utility",
        "claim_outcome": outcome,
        "claim_reason": reason,
        **interval_fields(acc, 3),
    }
