"""Chapter 01's paper-vs-run rows (Zhu et al. 2019 §4–5; iDLG's label accuracy; the reproduction report §6).

The paper column holds what the papers report: DLG's "pixel-wise accurate" reconstructions, the report's
"clear by ~280 iterations" and "strongly seed dependent", iDLG's 83.3 % DLG label accuracy on CIFAR-100,
and DLG §5's defense thresholds (pruning > 20 %, noise variance 1e-2).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitutor.stats import Interval


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
        label_rate: fraction of seeds whose label DLG recovered.
        batch_rows: :func:`~gitutor.studies.dlg_sweeps.batch_sweep` rows (the last, largest B is reported).
        thresholds: ``{(kind, level): first_stopping(...)}`` for kind ``"prune"``/``"noise"`` at ``cfg.success_psnr``.
        scale: :func:`~gitutor.studies.dlg_sweeps.gradient_scale` of the defended gradient.

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
        row("DLG label accuracy", f"{len(cfg.seeds)} seeds", 0.833, round(label_rate, 3),
            "fraction (iDLG paper, CIFAR-100)", better="higher"),
        row(f"mean PSNR, B = {batch_rows[-1]['B']}", f"{cfg.batch_iterations} steps, matched",
            "recovered (DLG Fig. 4, up to B = 8)", round(batch_rows[-1]["psnr"], 2), "dB"),
        row("smallest pruning rate that stops DLG", f"rates {cfg.prune_rates}, {success}", "> 0.2",
            str(thresholds["prune", cfg.success_psnr] or "none tried"), "fraction pruned"),
        row("smallest noise variance that stops DLG", f"variances {cfg.noise_variances}, {success}", "1e-2",
            str(thresholds["noise", cfg.success_psnr] or "none tried"), "variance",
            differences=differences + f"; gradient RMS {scale['rms']:.2g}"),
    ]
