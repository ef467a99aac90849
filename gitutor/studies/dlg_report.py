"""Chapter 01's paper-vs-run rows (Zhu et al. 2019 §4–5; iDLG's label accuracy; the reproduction report §6).

The paper column holds what the papers report: DLG's "pixel-wise accurate" reconstructions, the report's
"clear by ~280 iterations" and "strongly seed dependent", iDLG's 83.3 % DLG label accuracy on CIFAR-100,
and DLG §5's defense thresholds (pruning > 20 %, noise variance 1e-2). The Markdown tables and short
strings the chapter's prose pastes in (myst-nb ``glue``) are built here too: the per-seed table, the noise
levels against the gradient's scale, and the one-line summaries of the batch and data sweeps.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitutor.results.records import interval_fields
from gitutor.stats import Interval, success_interval
from gitutor.tables import markdown_table


def _interval(rate: Interval) -> str:
    return f"{rate.mean:.2f} [{rate.low:.2f}, {rate.high:.2f}]"


def chapter_rows(cfg, seed: int, *, main: Mapping, known_psnr: float, rates: Mapping[str, Interval], label_rate: float,
                 batch_rows: Sequence[Mapping], thresholds: Mapping[tuple[str, float], float | None],
                 scale: Mapping[str, float]) -> list[dict]:
    """The results rows of chapter 01 (see :mod:`gitutor.results`) from the chapter's measurements.

    Args:
        cfg: the chapter's settings (``gitutor.profiles.dlg``).
        main: the :func:`~gitutor.studies.dlg_sweeps.score_run` dict of the main run (``psnr`` in dB).
        known_psnr: PSNR (dB) of the label-known run.
        rates: success intervals, keys ``"fixed step (DLG code)"`` and ``"strong-Wolfe line search"``.
        label_rate: fraction of the ``cfg.seeds`` runs whose label DLG recovered (its 95 % Wilson interval
            goes into the row's setting).
        batch_rows: :func:`~gitutor.studies.dlg_sweeps.batch_sweep` rows (the last, largest B is reported).
        thresholds: ``{(kind, level): first_stopping(...)}`` for kind ``"prune"``/``"noise"`` at ``cfg.success_psnr``.
        scale: :func:`~gitutor.studies.dlg_sweeps.gradient_scale` of the defended gradient (its RMS is
            stated in the noise row's setting, so every row shares one ``differences`` text).

    Raises:
        KeyError: naming a missing rate or threshold.
    """
    S = cfg.sweep_image_size
    differences = (f"{cfg.profile} profile: {cfg.data}; {cfg.iterations} L-BFGS steps"
                   + ("" if cfg.iterations == 300 else " (paper 300)") + "; "
                   f"batch/data/defense sweeps on {S}×{S} images with "
                   f"{cfg.batch_iterations}/{cfg.extra_iterations}/{cfg.defense_iterations} steps")
    seeds_note = f"{len(cfg.seeds)} seeds at {cfg.image_size}×{cfg.image_size}, {cfg.iterations} steps, PSNR ≥ {cfg.success_psnr:.0f} dB"
    success = f"PSNR < {cfg.success_psnr:.0f} dB"
    n = len(cfg.seeds)  # the label rate's runs: one per seed; its Wilson interval shows what n resolves
    label_interval = success_interval([i < round(label_rate * n) for i in range(n)])

    def row(quantity, setting, paper, this_run, unit, **extra):
        return {"quantity": quantity, "setting": setting, "paper": paper, "this_run": this_run, "unit": unit,
                "differences": differences, **extra}

    return [
        row("PSNR, DLG, B = 1", f"{cfg.iterations} L-BFGS steps, seed {seed}", "pixel-wise accurate (MSE ≈ 0)",
            round(main["psnr"], 2), "dB"),
        row("PSNR, label known (iDLG setting)", f"{cfg.known_iterations} L-BFGS steps", "clear by ~280 iterations",
            round(known_psnr, 2), "dB"),
        row("success rate over seeds (95 % interval)", seeds_note, "strongly seed dependent (§6)",
            _interval(rates["fixed step (DLG code)"]), "fraction"),
        row("success rate over seeds, strong-Wolfe L-BFGS", seeds_note, "not in the paper (beyond-the-paper row)",
            _interval(rates["strong-Wolfe line search"]), "fraction"),
        row("DLG label accuracy", f"{n} seeds; 95 % interval [{label_interval.low:.2f}, {label_interval.high:.2f}]", 0.833, round(label_rate, 3),
            "fraction (iDLG paper, CIFAR-100)", better="higher", **interval_fields(label_interval, 2)),
        row(f"mean PSNR, B = {batch_rows[-1]['B']}", f"{cfg.batch_iterations} steps, matched",
            "recovered (DLG Fig. 4, up to B = 8)", round(batch_rows[-1]["psnr"], 2), "dB"),
        row("smallest pruning rate that stops DLG", f"rates {cfg.prune_rates}, {success}", "> 0.2",
            str(thresholds["prune", cfg.success_psnr] or "none tried"), "fraction pruned"),
        row("smallest noise variance that stops DLG",
            f"variances {cfg.noise_variances}, {success}; gradient RMS {scale['rms']:.2g}", "1e-2",
            str(thresholds["noise", cfg.success_psnr] or "none tried"), "variance"),
    ]


def seed_table(studies: Mapping[str, Sequence[Mapping]], reached: Mapping[tuple[str, int], int | None],
               success: float) -> str:
    """A Markdown table with one line per run of the seed study (report §6): method, seed, PSNR (dB),
    SSIM, success (✓ when PSNR ≥ ``success`` dB), label recovered, and the first recorded L-BFGS step at
    or above ``success`` (from :func:`~gitutor.studies.dlg_sweeps.psnr_curves`; "not reached" otherwise).

    Raises:
        KeyError: if ``reached`` lacks a ``(name, seed)`` of ``studies``.
    """
    header = ["method", "seed", "PSNR (dB)", "SSIM", f"≥ {success:.0f} dB", "label", "first step ≥"]
    lines = [[name, row["seed"], f"{row['psnr']:.1f}", f"{row['ssim']:.3f}", "✓" if row["psnr"] >= success else "✗",
              "✓" if row["label_ok"] else "✗",
              "not reached" if reached[name, row["seed"]] is None else reached[name, row["seed"]]]
             for name, rows in studies.items() for row in rows]
    return markdown_table(header, lines)


def noise_scale_table(noise_variances: Sequence[float], scale: Mapping[str, float]) -> str:
    """A Markdown table of each noise variance v of the defense sweep, its σ = √v, and σ in units of the
    shared gradient's median absolute entry and RMS (``scale`` from
    :func:`~gitutor.studies.dlg_sweeps.gradient_scale`): how much of the gradient a noise level drowns.

    Raises:
        ValueError: if the gradient's median or RMS is not positive.
    """
    if not (scale["median_abs"] > 0 and scale["rms"] > 0):
        raise ValueError(f"scale must have positive median_abs and rms, got {dict(scale)!r}")
    header = ["noise variance v", "σ = √v", "σ / median |entry|", "σ / RMS"]
    return markdown_table(header, [[f"{v:g}", f"{v ** 0.5:.2g}", f"{v ** 0.5 / scale['median_abs']:.3g}",
                                    f"{v ** 0.5 / scale['rms']:.3g}"] for v in noise_variances])


def stopping_strength(value: float | None, unit: str) -> str:
    """``"0.3 (fraction)"`` for the weakest defense strength that stopped DLG
    (:func:`~gitutor.studies.dlg_sweeps.first_stopping`), or ``"none of the strengths tried"`` for None."""
    return "none of the strengths tried" if value is None else f"{value:g} ({unit})"


def batch_summary(batch_rows: Sequence[Mapping]) -> str:
    """``"B = 2: 14.1 dB; B = 4: 11.0 dB"``: the mean matched PSNR of each
    :func:`~gitutor.studies.dlg_sweeps.batch_sweep` row (DLG Fig. 4)."""
    return "; ".join(f"B = {row['B']}: {row['psnr']:.1f} dB" for row in batch_rows)


def source_summary(extra: Mapping[str, tuple[float, object, object]]) -> str:
    """``"digits: 23.4 dB"``: the PSNR of each :func:`~gitutor.studies.dlg_sweeps.source_sweep` source, or
    ``"no other source in this profile"`` when the sweep is empty."""
    return "; ".join(f"{name}: {value:.1f} dB" for name, (value, _, _) in extra.items()) or \
        "no other source in this profile"
