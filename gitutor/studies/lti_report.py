"""Chapter 06's tables: Wu et al.'s numbers (Table 1, Table 2) and this run's paper-vs-run rows.

``table1`` below is ``{(model, B, defense): scores}``, where ``scores`` is
:attr:`gitutor.studies.learning_to_invert.Comparison.scores`; defenses are in the order of
:func:`~gitutor.federated.paper_defenses` (none, sign, prune, gauss).
"""
from __future__ import annotations

from collections.abc import Mapping

from gitutor.tables import markdown_table

#: Wu et al. 2022, Table 1: MSE on CIFAR-10 per (model, B), method, defense (none, sign, prune, gauss).
PAPER_MSE = {
    ("lenet", 1): {"IG": [0.022, 0.116, 0.138, 0.150], "LTI": [0.004, 0.014, 0.029, 0.012]},
    ("lenet", 4): {"IG": [0.105, 0.265, 0.169, 0.206], "LTI": [0.015, 0.023, 0.031, 0.026]},
    ("resnet20", 1): {"IG": [0.120, 0.154, 0.171, 0.133], "LTI": [0.018, 0.013, 0.023, 0.021]},
    ("resnet20", 4): {"IG": [0.125, 0.272, 0.195, 0.123], "LTI": [0.038, 0.035, 0.038, 0.039]},
}
#: Wu et al. 2022, Table 2: LTI-OOD MSE (LeNet, B = 1) per defense.
PAPER_OOD = [0.015, 0.036, 0.045, 0.029]
METHODS = ("IG", "LTI", "LTI (all held-out)")


def defense_names(prune_rate: float, sigma: float) -> dict[str, str]:
    """Display names of the four defenses of §4.1, keyed like :func:`~gitutor.federated.paper_defenses`."""
    return {"none": "none", "sign": "sign comp.", "prune": f"prune α={prune_rate}", "gauss": f"Gauss σ={sigma}"}


def table1_markdown(table1: Mapping, model: str, batch_size: int, names: Mapping[str, str], n_ig: int,
                    n_targets: int) -> str:
    """Table 1 for one model and B as Markdown: a row per method, ``MSE / PSNR / SSIM`` per defense."""
    rows = [[method] + [f"{c['mse']:.4f} / {c['psnr']:.1f} / {c['ssim']:.2f}"
                        for c in (table1[model, batch_size, d][method] for d in names)] for method in METHODS]
    return (f"**{model}, B = {batch_size}** (IG and LTI on the same {n_ig} target batch(es); LTI also on all "
            f"{n_targets // batch_size})\n\n"
            + markdown_table(["method"] + [f"{name} MSE / PSNR / SSIM" for name in names.values()], rows))


def results_rows(table1: Mapping, table2: Mapping[str, float], names: Mapping[str, str], *, scale: str,
                 n_ig: Mapping[int, int], ood_model: str, smallest: str) -> list[dict]:
    """The paper-vs-run rows of the results record (:func:`gitutor.results.save_results`).

    Args:
        table1: ``{(model, B, defense): scores}``; table2: ``{defense: LTI-OOD MSE}``.
        names: :func:`defense_names`; scale: how this run differs from the paper.
        n_ig: target batches attacked by both methods per B; ood_model: the model of Table 2.
        smallest: this run's Fig. 3a finding, e.g. ``"100 of 1597 images: 2/3 defenses"``.

    Raises:
        KeyError: for a (model, B) or defense the paper does not report.
    """
    order = list(names)
    rows = [{"quantity": f"MSE {method} (Table 1)", "setting": f"{model}, B={batch_size}, {names[defense]}",
             "paper": PAPER_MSE[model, batch_size][method][order.index(defense)],
             "this_run": round(scores[method]["mse"], 4), "unit": "MSE", "better": "lower",
             "differences": f"{scale}; {n_ig[batch_size]} target batch(es)"}
            for (model, batch_size, defense), scores in table1.items() for method in ("IG", "LTI")]
    rows += [{"quantity": "MSE LTI-OOD (Table 2)", "setting": f"{ood_model}, B=1, {names[defense]}",
              "paper": PAPER_OOD[order.index(defense)], "this_run": round(table2[defense], 4), "unit": "MSE",
              "better": "lower", "differences": f"{scale}; OOD = other digit classes"} for defense in order]
    rows.append({"quantity": "smallest auxiliary set still beats IG under defenses (Fig. 3a)",
                 "setting": f"{ood_model}, B=1", "paper": "500 of 50 000 images: yes", "this_run": smallest,
                 "unit": "", "differences": scale})
    return rows


def timing_rows(profile: str, device: str, wall_s: float, cpu_s: float) -> list[dict]:
    """Wall-clock and CPU time of the run, for ``save_results(..., timings=...)``."""
    return [{"quantity": "notebook wall time", "setting": f"{profile} profile, {device}", "paper": "not reported",
             "this_run": round(wall_s), "unit": "s", "differences": "shared machine; varies run to run"},
            {"quantity": "notebook CPU time", "setting": "summed over threads", "paper": "not reported",
             "this_run": round(cpu_s), "unit": "s", "differences": "as above"}]

