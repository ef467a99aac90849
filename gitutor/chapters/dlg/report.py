"""Chapter 01's paper-vs-run rows (Zhu et al. 2019 §4–5; iDLG's label accuracy; the reproduction report §6).

The headline is the DLG paper's central claim in its own words (:data:`CLAIM`: "for images, the recovery
is pixel-wise accurate", Abstract) judged from the seed study (:func:`claim_judgement`): the fraction of
seeds whose B = 1 image DLG recovers (PSNR ≥ ``cfg.recognisable_psnr``, the book's
:data:`gitutor.controls.RECOGNISABLE_PSNR`): *consistent* when the runs that recover the image are
pixel-accurate (all above the threshold), *refuted* when none does; the reason gives the PSNR the recovered
runs reach and the rate with its 95 % Wilson interval (how often DLG converges is seed dependent, §6). (A run of the
study stops once its gradient distance is below ``cfg.stop_loss``, so a count at ``cfg.success_psnr``
would score where it stopped, not how exact it can get.) The paper states no rate, so the row has no
paper number. The one rate a paper states for DLG on CIFAR-100 with B = 1, its label accuracy (83.3 % in
the iDLG paper, Zhao et al. 2020, Table 1), is the next row, judged by the verdict rule; then the main
run's PSNR, the failures and restarts (report §6), the batch sweep and DLG §5's defense thresholds. The Markdown tables and short strings the
chapter's prose pastes in (myst-nb ``glue``) are built here too.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitutor.results import interval_fields
from gitutor.stats import Interval, success_interval


def _span(rate: Interval) -> str:
    return f"[{rate.low:.2f}, {rate.high:.2f}]"


#: The DLG paper's central claim, in its words (the book's copy of the paper is a Chinese reproduction
#: report that renders Zhu et al.'s abstract: "对于图像，恢复是像素级精确的").
CLAIM = "for images, the recovery is pixel-wise accurate (Zhu et al. 2019, Abstract; translated)"


def claim_judgement(rate: Interval, recognisable: float, reached: Sequence[float]) -> tuple[str, str]:
    """``(claim_outcome, claim_reason)`` of :data:`CLAIM` from the seed study: ``rate`` is the fraction of
    seeds whose B = 1 image DLG recovers (PSNR ≥ ``recognisable`` dB, 95 % Wilson interval) and ``reached``
    the PSNRs (dB) those runs end at. The claim is about how exact a recovery is, not how often DLG
    converges (the report, §6, says that depends on the seed): *consistent* when some run recovers the image
    and every recovered run is above ``recognisable`` (the book's controls stay below it), *refuted* when no
    seed recovers it; the reason gives both the accuracy and the rate."""
    k = round(rate.mean * rate.n)
    if not reached:
        return "refuted", f"0 of {rate.n} seeds recover the B = 1 image (≥ {recognisable:.0f} dB) at 300 steps"
    return "consistent", (f"the {k} of {rate.n} seeds that recover the B = 1 image end at "
                          f"{min(reached):.1f}–{max(reached):.1f} dB (≥ {recognisable:.0f} dB, above every control); "
                          f"how often it converges, {_span(rate)}, depends on the seed (report §6)")
from gitutor.tables import markdown_table

#: The quick profile's results before it attacked CIFAR-100 (the record of notebooks/01_dlg on main at
#: 270524f: scikit-image photographs with random labels, threshold 15 dB, batch and defense sweeps at 16×16
#: with 50 / 40 L-BFGS steps), quoted by the page's "old setting → new" sentences.
PHOTOGRAPHS_RUN = {"recognisable": 0.7, "labels": 0.8, "batch_psnr": 27.0, "prune_stops": 0.7, "noise_stops": 1e-3}


def chapter_rows(cfg, seed: int, *, main: Mapping, known_psnr: float, seed_rows: Sequence[Mapping],
                 rescued: Mapping[str, Mapping[int, Mapping]], batch_rows: Sequence[Mapping],
                 stopping: Mapping[str, float | None], scale: Mapping[str, float],
                 unknown_psnr: float | None = None) -> list[dict]:
    """The results rows of chapter 01 (see :mod:`gitutor.results`) from the chapter's measurements.

    Args:
        cfg: the chapter's settings (``gitutor.chapters.dlg.profile``).
        main: the :func:`~gitutor.chapters.dlg.sweeps.score_run` dict of the main run (``psnr`` in dB).
        known_psnr: PSNR (dB) of the label-known run; unknown_psnr: DLG's (label unknown) at the same step.
        seed_rows: the seed study's :func:`~gitutor.chapters.dlg.sweeps.score_run` dicts (one per seed).
        rescued: ``{"restart": {seed: row}}``, the failed seeds rerun from a new dummy start.
        batch_rows: :func:`~gitutor.chapters.dlg.sweeps.batch_sweep` rows (the last, largest B is reported).
        stopping: ``{"prune": s, "noise": s}``, :func:`~gitutor.chapters.dlg.sweeps.stopping_from` at
            ``cfg.recognisable_psnr`` (None: no strength tried stops DLG).
        scale: :func:`~gitutor.chapters.dlg.sweeps.gradient_scale` of the defended gradient.

    Raises KeyError naming a missing rescue or defense kind, ValueError if ``seed_rows`` is empty.
    """
    S, n, T, D = cfg.sweep_image_size, len(seed_rows), cfg.recognisable_psnr, cfg.defense_image_size
    differences = (f"{cfg.profile} profile: {cfg.data}; random-init LeNet as the DLG code; "
                   f"batch/MNIST sweeps on {S}×{S} images with {cfg.batch_iterations}/{cfg.extra_iterations} "
                   f"steps; defense sweep {D}×{D}, {cfg.defense_iterations} steps")
    study = (f"{n} seeds (each: model, image, true label, dummy start), {cfg.image_size}×{cfg.image_size}, "
             f"≤ {cfg.iterations} L-BFGS steps, stop at gradient distance < {cfg.stop_loss:g}")
    recognisable = success_interval([row["psnr"] >= T for row in seed_rows])
    outcome, reason = claim_judgement(recognisable, T, [row["psnr"] for row in seed_rows if row["psnr"] >= T])
    labels = success_interval([row["label_ok"] for row in seed_rows])
    failed = [row["seed"] for row in seed_rows if row["psnr"] < T]
    saved = {name: sum(rows[s]["psnr"] >= T for s in failed if s in rows) for name, rows in rescued.items()}
    rerun = len(rescued["restart"])
    units = {"prune": "fraction pruned", "noise": "noise variance"}

    def row(quantity, setting, paper, this_run, unit, **extra):
        return {"quantity": quantity, "setting": setting, "paper": paper, "this_run": this_run, "unit": unit,
                "differences": differences, **extra}

    rows = [
        row(f"DLG recovers the B = 1 image: seeds with PSNR ≥ {T:.0f} dB (the book's recognisable)", study,
            "pixel-wise accurate (Abstract; examples, no rate stated)", round(recognisable.mean, 3),
            f"fraction of {n} seeds; 95 % Wilson interval {_span(recognisable)}", headline=True,
            claim=CLAIM, claim_outcome=outcome, claim_reason=reason, **interval_fields(recognisable, 3)),
        row("DLG label accuracy, B = 1", study, 0.833, round(labels.mean, 3),
            f"fraction of {n} seeds (iDLG paper, Table 1, CIFAR-100); 95 % Wilson interval {_span(labels)}",
            better="higher", **interval_fields(labels, 3)),
        row("PSNR, DLG, B = 1 (main run)", f"{cfg.iterations} L-BFGS steps, seed {seed}",
            "pixel-wise accurate (MSE ≈ 0)", round(main["psnr"], 2), "dB"),
        row(f"seeds that fail (PSNR < {T:.0f} dB)", study, "strongly seed dependent (report §6)",
            round(1 - recognisable.mean, 3),
            f"fraction of {n} seeds; 95 % Wilson interval [{1 - recognisable.high:.2f}, {1 - recognisable.low:.2f}]",
            low=round(1 - recognisable.high, 3), high=round(1 - recognisable.low, 3)),
        row("failed seeds recognisable after one restart (new dummy start)",
            f"{len(failed)} failed of {n}, {rerun} rerun", "not in the paper (beyond-the-paper row)",
            f"{saved['restart']} of {rerun}", "seeds"),
        row("PSNR, label known (iDLG setting)", f"{cfg.known_iterations} L-BFGS steps, seed {seed}, one image"
            + ("" if unknown_psnr is None else f"; label unknown at the same step: {unknown_psnr:.1f} dB"),
            "clear by ~280 iterations (report Fig. 1, no number)", round(known_psnr, 2), "dB", n=1,
            not_comparable=f"the report shows images at ~280 iterations and states no PSNR; this is one image "
                           f"after {cfg.known_iterations} steps"),
        row(f"mean PSNR, B = {batch_rows[-1]['B']}", f"{cfg.batch_iterations} steps, matched, one batch",
            "recovered (DLG Fig. 4, up to B = 8)", round(batch_rows[-1]["psnr"], 2), "dB"),
    ]
    for kind, paper, tried in (("prune", "> 0.2 (DLG §5: no longer recognisable)", cfg.prune_rates),
                               ("noise", "1e-2 (DLG §5; 1e-4 does not stop it)", cfg.noise_variances)):
        value = stopping[kind]
        setting = (f"{units[kind]} {tried}, one image, {D}×{D}, PSNR < {T:.0f} dB at this and every "
                   "stronger level")
        if kind == "noise":
            setting += f"; gradient RMS {scale['rms']:.2g}"
        rows.append(row(f"weakest {units[kind]} that stops DLG (unrecognisable)", setting, paper,
                        "none tried" if value is None else f"{value:g}", units[kind]))
    return rows


def seed_table(studies: Mapping[str, Sequence[Mapping]], reached: Mapping[tuple[str, int], int | None],
               success: float, recognisable: float) -> str:
    """A Markdown table with one line per run of the seed study (report §6): run, seed, PSNR (dB), SSIM,
    recognisable (✓ when PSNR ≥ ``recognisable`` dB), label recovered, L-BFGS steps run, final gradient
    distance (what the attacker sees) and the first recorded step at or above ``recognisable`` (from
    :func:`~gitutor.chapters.dlg.sweeps.psnr_curves`). ``success`` is kept for callers; a run stopped early
    is not scored against it.

    Raises:
        KeyError: if ``reached`` lacks a ``(name, seed)`` of ``studies``.
    """
    header = ["run", "seed", "PSNR (dB)", "SSIM", f"≥ {recognisable:.0f} dB", "label", "steps",
              "final distance", f"first step ≥ {recognisable:.0f} dB"]
    mark = lambda ok: "✓" if ok else "✗"  # noqa: E731
    lines = [[name, row["seed"], f"{row['psnr']:.1f}", f"{row['ssim']:.3f}", mark(row["psnr"] >= recognisable),
              mark(row["label_ok"]), row["steps"], f"{row['loss']:.1e}",
              "not reached" if reached[name, row["seed"]] is None else reached[name, row["seed"]]]
             for name, rows in studies.items() for row in rows]
    return markdown_table(header, lines)


def controls_table(scores: Mapping[str, Sequence[float]], recognisable: float) -> str:
    """A Markdown table of the controls (:func:`gitutor.controls.control_images` and DLG's start): per control
    its lowest, median and highest PSNR (dB) over the images and on how many it reaches ``recognisable`` dB.

    Raises:
        ValueError: if a control has no scores.
    """
    lines = []
    for name, values in scores.items():
        values = sorted(float(v) for v in values)
        if not values:
            raise ValueError(f"control {name!r} has no scores")
        lines.append([name, f"{values[0]:.1f}", f"{values[(len(values) - 1) // 2]:.1f}", f"{values[-1]:.1f}",
                      f"{sum(v >= recognisable for v in values)} of {len(values)}"])
    return markdown_table(["control", "lowest (dB)", "median (dB)", "highest (dB)",
                           f"images ≥ {recognisable:.0f} dB"], lines)


def noise_scale_table(noise_variances: Sequence[float], scale: Mapping[str, float]) -> str:
    """A Markdown table of each noise variance v of the defense sweep, its σ = √v, and σ in units of the
    shared gradient's median absolute entry and RMS (``scale`` from
    :func:`~gitutor.chapters.dlg.sweeps.gradient_scale`): how much of the gradient a noise level drowns.

    Raises:
        ValueError: if the gradient's median or RMS is not positive.
    """
    if not (scale["median_abs"] > 0 and scale["rms"] > 0):
        raise ValueError(f"scale must have positive median_abs and rms, got {dict(scale)!r}")
    header = ["noise variance v", "σ = √v", "σ / median |entry|", "σ / RMS"]
    return markdown_table(header, [[f"{v:g}", f"{v ** 0.5:.2g}", f"{v ** 0.5 / scale['median_abs']:.3g}",
                                    f"{v ** 0.5 / scale['rms']:.3g}"] for v in noise_variances])


def stopping_strength(value: float | None, unit: str) -> str:
    """``"0.3 (fraction pruned)"`` for the weakest defense strength from which DLG stays below the criterion
    (:func:`~gitutor.chapters.dlg.sweeps.stopping_from`), or ``"none of the strengths tried"`` for None."""
    return "none of the strengths tried" if value is None else f"{value:g} ({unit})"


def defense_table(sweep: Mapping[tuple[str, float], tuple[float, object]], recognisable: float) -> str:
    """A Markdown table of a :func:`~gitutor.chapters.dlg.sweeps.defense_sweep`: defense, strength, PSNR (dB)
    and whether the reconstruction is still recognisable (PSNR ≥ ``recognisable`` dB)."""
    names = {"none": "no defense", "prune": "pruning (fraction)", "noise": "Gaussian noise (variance)"}
    return markdown_table(["defense", "strength", "PSNR (dB)", f"recognisable (≥ {recognisable:.0f} dB)"],
                          [[names[kind], "–" if kind == "none" else f"{strength:g}", f"{value:.1f}",
                            "yes" if value >= recognisable else "no"]
                           for (kind, strength), (value, _) in sweep.items()])


def batch_summary(batch_rows: Sequence[Mapping]) -> str:
    """``"B = 2: 14.1 dB; B = 4: 11.0 dB"``: the mean matched PSNR of each
    :func:`~gitutor.chapters.dlg.sweeps.batch_sweep` row (DLG Fig. 4)."""
    return "; ".join(f"B = {row['B']}: {row['psnr']:.1f} dB" for row in batch_rows)


def source_summary(extra: Mapping[str, tuple[float, object, object]]) -> str:
    """``"digits: 23.4 dB"``: the PSNR of each :func:`~gitutor.chapters.dlg.sweeps.source_sweep` source, or
    ``"no other source in this profile"`` when the sweep is empty."""
    return "; ".join(f"{name}: {value:.1f} dB" for name, (value, _, _) in extra.items()) or \
        "no other source in this profile"


def seed_dependence(seed_rows: Sequence[Mapping], recognisable: float) -> str:
    """One sentence on the report's "strongly seed dependent" (§6) from the seed study: how many seeds
    fail (PSNR < ``recognisable`` dB) and the 95 % Wilson interval of the failure rate, saying whether the
    interval rules out that failures are rare (its low end ≥ 10 %) or that there are none.

    Raises:
        ValueError: if ``seed_rows`` is empty.
    """
    rate = success_interval([row["psnr"] < recognisable for row in seed_rows])
    k, n = round(rate.mean * rate.n), rate.n
    span = f"95 % interval [{rate.low:.0%}, {rate.high:.0%}]"
    if k == 0:
        return (f"No seed of {n} failed, so this run shows no seed dependence; the failure rate is at most "
                f"{rate.high:.0%} ({span}).")
    if k == n:
        return f"Every seed of {n} failed ({span}): DLG does not recover these images at all."
    strength = (f"failures are common, at least {rate.low:.0%} of seeds ({span}): the outcome depends "
                "strongly on the seed, as the report says" if rate.low >= 0.1 else
                f"the outcome depends on the seed, but with {n} seeds the {span} cannot rule out that "
                "failures are rare")
    return f"{k} of {n} seeds failed: {strength}."


def defense_sentence(kind: str, stopping: float | None, sweep: Mapping[tuple[str, float], tuple[float, object]],
                     recognisable: float) -> str:
    """One sentence comparing the defense sweep's ``kind`` (``"prune"`` or ``"noise"``) with DLG §5: from
    which strength the reconstruction stays unrecognisable (``stopping``, from
    :func:`~gitutor.chapters.dlg.sweeps.stopping_from`) and whether that agrees with the paper (pruning:
    recognisable at 20 %, not above; noise: recognisable at variance 1e-4, not from 1e-2).

    Raises:
        ValueError: for an unknown ``kind``.
    """
    papers = {"prune": ("pruning", 0.2, "more than 20 % of the entries"),
              "noise": ("Gaussian noise", 1e-4, "variance 1e-2 or more")}
    if kind not in papers:
        raise ValueError(f"kind must be 'prune' or 'noise', got {kind!r}")
    name, weak, paper = papers[kind]
    tried = {strength: value for (k, strength), (value, _) in sweep.items() if k == kind}
    paper_stop = {"prune": min((s for s in tried if s > 0.2), default=None), "noise": 1e-2}[kind]
    where = ("no strength tried stops it" if stopping is None else
             f"it stays below {recognisable:.0f} dB (at this budget) from {stopping:g} on")
    if stopping is None or paper_stop is None or stopping == paper_stop:
        compared = "" if stopping is None or paper_stop is None else " — the paper's threshold"
    else:
        compared = (f" at this budget (the paper: {paper} at 300 steps; a slower run counts as "
                    "stopped here, so this is a lower bound on the strength that stops DLG at 300 steps)"
                    if stopping < paper_stop else " — a stronger defense than the paper needed")
    where += compared
    agree = []
    if weak in tried:
        still = tried[weak] >= recognisable
        visible = "" if still else " — below the book's threshold an object can still be visible, see the grid"
        agree.append(f"at {weak:g} the reconstruction is {'above' if still else 'below'} {recognisable:.0f} dB "
                     f"({tried[weak]:.1f} dB; the paper: still recognisable{visible})")
    return f"Under {name}, {where}; DLG §5 reports that {paper} stop it" + (
        f", and {agree[0]}." if agree else ".")


def lost_sentence(lost: Sequence[int], n: int, recognisable: float, every: int) -> str:
    """How many of the ``n`` seed-study runs reached ``recognisable`` dB at some recorded snapshot (one every
    ``every`` steps) and ended below it (``lost``: their seeds), in one sentence."""
    if not lost:
        return (f"None of the {n} runs reached {recognisable:.0f} dB at a recorded snapshot (one every {every} "
                "steps) and then ended below it.")
    seeds = ("seed " if len(lost) == 1 else "seeds ") + ", ".join(map(str, lost))
    return (f"{len(lost)} of the {n} runs ({seeds}) reached {recognisable:.0f} dB at a recorded snapshot (one "
            f"every {every} steps) and then ended below it.")


def restart_sentence(failed: int, saved: int) -> str:
    """What one restart from a new dummy start did for the ``failed`` seeds (``saved`` became recognisable)."""
    if failed == 0:
        return "No seed failed, so there was nothing to restart."
    if saved == failed:
        return ("Every failure was the dummy start's: the seed dependence the report describes is then a property "
                "of one run, not a limit on the attacker, who sees which runs failed and reruns them.")
    if saved == 0:
        return (f"None of the {failed} failures is rescued by one new start; one restart does not show that they "
                "cannot be recovered.")
    return (f"A restart rescues {saved} of {failed} failures: some failures are the dummy start's; the others "
            "failed again from one new start, which does not show that they cannot be recovered (the seed table "
            "shows whether a run passed the threshold before losing the image).")
