"""Chapter 01's headline: the DLG paper's central claim (Zhu et al. 2019, Abstract) judged from the seed study.

"The recovery is pixel-wise accurate for images" is a claim about how exact a recovery is, not how often
DLG gets there: the paper states no rate, and the reproduction report (§6) says success depends strongly on
the seed. The test that can fail: does a run that matches the client's gradient (final gradient distance below
the profile's ``match_loss``, read after the run's whole budget) hold the image (PSNR ≥ the book's
:data:`gitutor.controls.RECOGNISABLE_PSNR`, above every control)?
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitutor.stats import success_interval

#: The DLG paper's central claim, in its words (the book's copy of the paper is a Chinese reproduction
#: report that renders Zhu et al.'s abstract: "对于图像，恢复是像素级精确的").
CLAIM = (
    "the recovery is pixel-wise accurate for images and token-wise matching for texts "
    "(Zhu, Liu & Han, NeurIPS 2019, Abstract)"
)


def claim_judgement(
    seed_rows: Sequence[Mapping], recognisable: float, match_loss: float
) -> tuple[str, str]:
    """``(claim_outcome, claim_reason)`` of :data:`CLAIM` from the seed study's
    :func:`~gitutor.chapters.dlg.sweeps.score_run` rows (``psnr`` dB, final gradient distance ``loss``).

    The claim is about how exact a recovery is, not how often DLG gets there (the paper states no rate; the
    report, §6, says it depends on the seed). A run *matched the gradient* when its final distance is below
    ``match_loss``: DLG found an input with the client's gradient. *Consistent* when some run matched it and
    every run that matched it recovers the image (PSNR ≥ ``recognisable`` dB, above the book's controls);
    *refuted* when a run matched the gradient with an image below ``recognisable`` (the gradient did not pin
    the image down) or no run matched it. The reason gives the matched runs' PSNR and the rate of
    recovered seeds with its 95 % Wilson interval.

    Raises:
        ValueError: if ``seed_rows`` is empty.
    """
    if not seed_rows:
        raise ValueError("seed_rows must hold at least one run")
    rate = success_interval([row["psnr"] >= recognisable for row in seed_rows])
    matched = [row["psnr"] for row in seed_rows if row["loss"] < match_loss]
    n, k = len(seed_rows), len(matched)
    if not matched:
        return (
            "refuted",
            f"0 of {n} seeds match the gradient (distance < {match_loss:g}) in the study",
        )
    below = [p for p in matched if p < recognisable]
    if below:
        return "refuted", (
            f"{len(below)} of the {k} runs that match the gradient (distance < {match_loss:g}) end "
            f"below {recognisable:.0f} dB ({min(below):.1f} dB)"
        )
    return "consistent", (
        f"{k} of {n} runs match the gradient (distance < {match_loss:g}), end at "
        f"{min(matched):.1f}–{max(matched):.1f} dB (≥ {recognisable:.0f} dB, above all controls); "
        f"the rate [{rate.low:.2f}, {rate.high:.2f}] depends on the seed (§6)"
    )
