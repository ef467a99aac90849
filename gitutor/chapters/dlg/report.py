"""Chapter 01's paper-vs-run rows (Zhu et al. 2019 §4–5; iDLG's label accuracy; the reproduction report §6).

The headline is the DLG paper's central claim in its own words (:data:`~gitutor.chapters.dlg.claim.CLAIM`)
judged from the seed study (:func:`~gitutor.chapters.dlg.claim.claim_judgement`): are the runs that match the
client's gradient recognisable? The paper states no rate, so the row has no paper number. The one rate a
paper states for DLG on CIFAR-100 with B = 1, its label accuracy (83.3 % in the iDLG paper, Zhao et al.
2020, Table 1), is the next row, judged by the verdict rule; then the PSNR of the study's median run, the failures and
restarts (report §6) and the batch sweep; DLG §5's defense rows come from the recorded defense study
(:func:`~gitutor.chapters.dlg.defense_reading.result_rows`). The Markdown tables the chapter's prose
pastes in (myst-nb ``glue``) are built here too; the prose itself is the notebook's Markdown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gitutor.chapters.dlg.claim import CLAIM, claim_judgement
from gitutor.metrics import psnr
from gitutor.results import interval_fields
from gitutor.stats import Interval, success_interval
from gitutor.tables import markdown_table


def _span(rate: Interval) -> str:
    return f"[{rate.low:.2f}, {rate.high:.2f}]"


def _reached(step: int | None, threshold: float) -> str:
    return (
        f"never ≥ {threshold:.0f} dB"
        if step is None
        else f"≥ {threshold:.0f} dB from step {step}"
    )


def chapter_rows(
    cfg,
    seed: int,
    *,
    main: Mapping,
    known_psnr: float,
    seed_rows: Sequence[Mapping],
    rescued: Mapping[str, Mapping[int, Mapping]],
    batch_rows: Sequence[Mapping],
    reached: Mapping[str, int | None] | None = None,
) -> list[dict]:
    """The results rows of chapter 01 (see :mod:`gitutor.results`) from the chapter's measurements.

    Args:
        cfg: the chapter's settings (``gitutor.chapters.dlg.profile``).
        seed: the seed of ``main`` and of the label-known run.
        main: the :func:`~gitutor.chapters.dlg.sweeps.score_run` dict of the run the page shows, the seed
            study's median (:func:`~gitutor.chapters.dlg.sweeps.showcase_row`; ``psnr`` in dB).
        known_psnr: PSNR (dB) of the label-known run after ``cfg.iterations`` steps, from ``main``'s
            dummy start; reached: ``{"label known": step, "label unknown": step}``, the first recorded step
            at which each run is recognisable (None: never; :func:`~gitutor.chapters.dlg.sweeps.psnr_curves`).
        seed_rows: the seed study's :func:`~gitutor.chapters.dlg.sweeps.score_run` dicts (one per seed).
        rescued: ``{"restart": {seed: row}}``, the failed seeds rerun from a new dummy start.
        batch_rows: :func:`~gitutor.chapters.dlg.sweeps.batch_sweep` rows (the last, largest B is reported).

    Raises KeyError naming a missing rescue, ValueError if ``seed_rows`` is empty.
    """
    S, n, T = cfg.sweep_image_size, len(seed_rows), cfg.recognisable_psnr
    differences = (
        f"{cfg.profile} profile: {cfg.data}; random-init LeNet as the DLG code; "
        f"batch/MNIST sweeps on {S}×{S} images with {cfg.batch_iterations}/{cfg.extra_iterations} "
        "steps"
    )
    study = (
        f"{n} seeds (each: model, image, true label, dummy start), {cfg.image_size}×{cfg.image_size}, "
        f"{cfg.iterations} L-BFGS steps (no stop rule); matched the gradient: final distance "
        f"< {cfg.match_loss:g}"
    )
    recognisable = success_interval([row["psnr"] >= T for row in seed_rows])
    outcome, reason = claim_judgement(seed_rows, T, cfg.match_loss)
    labels = success_interval([row["label_ok"] for row in seed_rows])
    failed = [row["seed"] for row in seed_rows if row["psnr"] < T]
    saved = {
        name: sum(rows[s]["psnr"] >= T for s in failed if s in rows)
        for name, rows in rescued.items()
    }
    rerun = len(rescued["restart"])

    def row(quantity, setting, paper, this_run, unit, **extra):
        return {
            "quantity": quantity,
            "setting": setting,
            "paper": paper,
            "this_run": this_run,
            "unit": unit,
            "differences": differences,
            **extra,
        }

    rows = [
        row(
            f"DLG recovers the B = 1 image: seeds with PSNR ≥ {T:.0f} dB (the book's recognisable)",
            study,
            "pixel-wise accurate (Abstract; examples, no rate stated)",
            round(recognisable.mean, 3),
            f"fraction of {n} seeds; 95 % Wilson interval {_span(recognisable)}",
            headline=True,
            claim=CLAIM,
            claim_outcome=outcome,
            claim_reason=reason,
            **interval_fields(recognisable, 3),
        ),
        row(
            "DLG label accuracy, B = 1",
            study,
            0.833,
            round(labels.mean, 3),
            f"fraction of {n} seeds (iDLG paper, Table 1, CIFAR-100); 95 % Wilson interval {_span(labels)}",
            better="higher",
            **interval_fields(labels, 3),
        ),
        row(
            "PSNR, DLG, B = 1 (the seed study's median run)",
            f"{cfg.iterations} L-BFGS steps, seed {seed}, the median of {n} seeds",
            "pixel-wise accurate (MSE ≈ 0)",
            round(main["psnr"], 2),
            "dB",
        ),
        row(
            f"seeds that fail (PSNR < {T:.0f} dB)",
            study,
            "strongly seed dependent (report §6)",
            round(1 - recognisable.mean, 3),
            f"fraction of {n} seeds; 95 % Wilson interval [{1 - recognisable.high:.2f}, {1 - recognisable.low:.2f}]",
            low=round(1 - recognisable.high, 3),
            high=round(1 - recognisable.low, 3),
        ),
        row(
            "failed seeds recognisable after one restart (new dummy start)",
            f"{len(failed)} failed of {n}, {rerun} rerun",
            "not in the paper (beyond-the-paper row)",
            f"{saved['restart']} of {rerun}",
            "seeds",
        ),
        row(
            "PSNR, label known (iDLG setting)",
            f"{cfg.iterations} L-BFGS steps, seed {seed}, one image"
            + (
                ""
                if reached is None
                else f"; label known: {_reached(reached['label known'], T)}, label unknown: "
                f"{_reached(reached['label unknown'], T)}"
            ),
            "clear by ~280 iterations (report Fig. 1, no number)",
            round(known_psnr, 2),
            "dB",
            n=1,
            not_comparable="the report shows images at ~280 iterations and states no PSNR; this is one "
            "image",
        ),
        row(
            f"mean PSNR, B = {batch_rows[-1]['B']}",
            f"{cfg.batch_iterations} steps, matched, one batch",
            "recovered (DLG Fig. 4, up to B = 8)",
            round(batch_rows[-1]["psnr"], 2),
            "dB",
        ),
    ]
    return rows


def seed_table(
    studies: Mapping[str, Sequence[Mapping]],
    reached: Mapping[tuple[str, int], int | None],
    success: float,
    recognisable: float,
) -> str:
    """A Markdown table with one line per run of the seed study (report §6): run, seed, PSNR (dB), SSIM,
    recognisable (✓ when PSNR ≥ ``recognisable`` dB), label recovered, L-BFGS steps run, final gradient
    distance (what the attacker sees) and the first recorded step at or above ``recognisable`` (from
    :func:`~gitutor.chapters.dlg.sweeps.psnr_curves`). ``success`` is kept for callers; a run stopped early
    is not scored against it.

    Raises:
        KeyError: if ``reached`` lacks a ``(name, seed)`` of ``studies``.
    """
    header = [
        "run",
        "seed",
        "PSNR (dB)",
        "SSIM",
        f"≥ {recognisable:.0f} dB",
        "label",
        "steps",
        "final distance",
        f"first step ≥ {recognisable:.0f} dB",
    ]
    mark = lambda ok: "✓" if ok else "✗"
    lines = [
        [
            name,
            row["seed"],
            f"{row['psnr']:.1f}",
            f"{row['ssim']:.3f}",
            mark(row["psnr"] >= recognisable),
            mark(row["label_ok"]),
            row["steps"],
            f"{row['loss']:.1e}",
            "not reached"
            if reached[name, row["seed"]] is None
            else reached[name, row["seed"]],
        ]
        for name, rows in studies.items()
        for row in rows
    ]
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
        lines.append(
            [
                name,
                f"{values[0]:.1f}",
                f"{values[(len(values) - 1) // 2]:.1f}",
                f"{values[-1]:.1f}",
                f"{sum(v >= recognisable for v in values)} of {len(values)}",
            ]
        )
    return markdown_table(
        [
            "control",
            "lowest (dB)",
            "median (dB)",
            "highest (dB)",
            f"images ≥ {recognisable:.0f} dB",
        ],
        lines,
    )


def noise_scale_table(
    noise_variances: Sequence[float], scale: Mapping[str, float]
) -> str:
    """A Markdown table of each noise variance v (DLG §5's unit), its standard deviation σ = √v (of the
    Gaussian and of the Laplacian noise alike), and σ in units of the shared gradient's median absolute entry
    and RMS (``scale`` as :func:`~gitutor.chapters.dlg.sweeps.gradient_scale` gives them): how much of the
    gradient a noise level drowns.

    Raises:
        ValueError: if the gradient's median or RMS is not positive.
    """
    if not (scale["median_abs"] > 0 and scale["rms"] > 0):
        raise ValueError(
            f"scale must have positive median_abs and rms, got {dict(scale)!r}"
        )
    header = ["noise variance v", "σ = √v", "σ / median |entry|", "σ / RMS"]
    return markdown_table(
        header,
        [
            [
                f"{v:g}",
                f"{v**0.5:.2g}",
                f"{v**0.5 / scale['median_abs']:.3g}",
                f"{v**0.5 / scale['rms']:.3g}",
            ]
            for v in noise_variances
        ],
    )


def batch_table(
    batch_rows: Sequence[Mapping],
    recognisable: float,
    controls: Sequence[torch.Tensor] | None = None,
) -> str:
    """A Markdown table of the :func:`~gitutor.chapters.dlg.sweeps.batch_sweep` rows (DLG Fig. 4): per batch
    size B the mean PSNR (dB) of the matched reconstructions and how many of the B images reach
    ``recognisable`` dB (``row["images"]``: the B truths, then the B matched reconstructions); with
    ``controls`` (per row, each image's highest know-nothing control in dB, shape ``(B,)``) also how many
    end at or below their control (*stopped*) and how many between (*not resolved*).

    Raises:
        ValueError: if ``batch_rows`` is empty, or naming ``controls`` when it does not hold one ``(B,)``
            tensor per row.
    """
    if not batch_rows:
        raise ValueError("batch_rows must hold at least one batch")
    if controls is not None and (
        len(controls) != len(batch_rows)
        or any(tuple(c.shape) != (row["B"],) for c, row in zip(controls, batch_rows))
    ):
        raise ValueError("controls must hold one (B,) tensor of dB per batch row")
    lines = []
    for index, row in enumerate(batch_rows):
        b = row["B"]
        found = psnr(row["images"][b:], row["images"][:b])
        count = int((found >= recognisable).sum())
        line = [b, f"{row['psnr']:.1f}", f"{count} of {b}"]
        if controls is not None:
            stopped = int((found <= controls[index]).sum())
            line += [f"{b - count - stopped} of {b}", f"{stopped} of {b}"]
        lines.append(line)
    header = ["B", "mean PSNR (dB)", f"images ≥ {recognisable:.0f} dB"]
    if controls is not None:
        header += ["not resolved", "stopped (≤ the image's best control)"]
    return markdown_table(header, lines)
