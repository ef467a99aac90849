"""Chapter 06's Inverting Gradients baseline at its best: its settings tuned on the attacker's own images.

Table 1 compares LTI with the defense-aware Inverting Gradients of Wu et al. (Appendix A; Geiping et al.
2020, Eq. 4). A baseline run at settings nobody tuned for these images says little, so :func:`tune_ig`
chooses IG's settings per defense on a few **auxiliary** images — the server's own data, which it can
attack through its own simulated, defended clients and score, as it trains LTI on them; no held-out
target is used. Stage 1 sweeps the TV weight α_TV and the learning rate (Geiping et al.'s step schedule,
the best iterate kept); stage 2, at the chosen pair, tries a constant learning rate, the last iterate
instead of the best, and :data:`RESTARTS` restarts. Every choice is the lowest mean MSE over the tuning
images; restarts are adopted only when they lower it by more than :data:`RESTART_GAIN` (they multiply
IG's cost). :func:`run_ig` is the tuned attack: restarts from other seeds, the one with the lowest
gradient-matching objective kept (what the attacker can compute, not the MSE).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from gitutor.attacks import defended_inverting_gradients
from gitutor.metrics import mse

#: Stage 1's grid: α_TV × learning rate.
GRID = {"tv_weight": (0.0, 1e-4, 1e-3, 1e-2, 1e-1), "lr": (0.3, 0.1)}
#: Restarts tried in stage 2.
RESTARTS = 3
#: Restarts are adopted only if they lower the tuning images' mean MSE by more than this fraction.
RESTART_GAIN = 0.1
#: Stage 1's fixed settings: Geiping et al.'s step schedule, the best iterate kept, one start.
DEFAULTS = {"lr_steps": True, "keep_best": True, "restarts": 1}


def run_ig(
    model: nn.Module,
    observed: list[torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    defense: str,
    iterations: int,
    settings: Mapping,
    seed: int,
    progress: bool = False,
) -> torch.Tensor:
    """Defense-aware IG (:func:`~gitutor.attacks.defended_inverting_gradients`) on the observed gradient of
    the batch ``x`` ``(B, C, H, W)`` with labels ``y`` and ``settings`` ``{"tv_weight", "lr", "lr_steps"
    (bool: Geiping et al.'s steps or a constant rate), "keep_best" (bool), "restarts" (int ≥ 1)}``;
    restart r starts from seed ``seed + r`` and the run with the lowest matching objective (its best or
    last) is kept. Returns ``(1, B, C, H, W)``.

    Raises:
        ValueError: for restarts < 1 (and as the attack).
    """
    if settings["restarts"] < 1:
        raise ValueError(
            f"settings['restarts'] must be ≥ 1, got {settings['restarts']!r}"
        )
    best, best_loss = None, np.inf
    for r in range(settings["restarts"]):
        result = defended_inverting_gradients(
            model,
            observed,
            y.to(observed[0].device),
            tuple(x.shape),
            defense,
            iterations=iterations,
            tv_weight=settings["tv_weight"],
            lr=settings["lr"],
            seed=seed + r,
            progress=progress,
            lr_steps=(3 / 8, 5 / 8, 7 / 8) if settings["lr_steps"] else (),
            keep_best=settings["keep_best"],
        )
        losses = result.history["loss"]
        loss = min(losses) if settings["keep_best"] else losses[-1]
        if best is None or loss < best_loss:
            best, best_loss = result.images, loss
    return best[None]


def _errors(
    model, observed, images, labels, defense, iterations, settings, seed
) -> list[float]:
    return [
        float(
            mse(
                run_ig(
                    model,
                    g,
                    images[i : i + 1],
                    labels[i : i + 1],
                    defense,
                    iterations,
                    settings,
                    seed,
                )[0],
                images[i : i + 1],
            ).mean()
        )
        for i, g in enumerate(observed)
    ]


def tune_ig(
    model: nn.Module,
    observed: Mapping[str, Sequence[list[torch.Tensor]]],
    images: torch.Tensor,
    labels: torch.Tensor,
    iterations: int,
    seed: int,
) -> dict:
    """IG's settings per defense, chosen on the tuning ``images`` ``(n, C, H, W)`` (auxiliary, B = 1) from
    their observed defended gradients ``{defense: [gradient of image i]}`` (module docstring).

    Returns:
        ``{"grid": {defense: [[tv_weight, lr, mean MSE], …]}, "stage2": {defense: {variant: mean MSE}},
        "chosen": {defense: settings of run_ig}}``.

    Raises:
        ValueError: when an observed list does not hold one gradient per image.
    """
    if any(len(grads) != len(images) for grads in observed.values()):
        raise ValueError(
            f"observed must hold one gradient per tuning image ({len(images)}) for every defense"
        )
    grid, stage2, chosen = {}, {}, {}
    for defense, grads in observed.items():

        def mean_error(grads=grads, defense=defense, **changes):
            return float(
                np.mean(
                    _errors(
                        model,
                        grads,
                        images,
                        labels,
                        defense,
                        iterations,
                        {**DEFAULTS, **changes},
                        seed,
                    )
                )
            )

        grid[defense] = [
            [tv, lr, mean_error(tv_weight=tv, lr=lr)]
            for tv in GRID["tv_weight"]
            for lr in GRID["lr"]
        ]
        tv, lr, base = min(grid[defense], key=lambda row: row[2])
        pick = {"tv_weight": tv, "lr": lr}
        variants = {
            "chosen (steps, best iterate, 1 start)": base,
            "constant learning rate": mean_error(**pick, lr_steps=False),
            "last iterate": mean_error(**pick, keep_best=False),
        }
        settings = {
            **DEFAULTS,
            **pick,
            "lr_steps": variants["constant learning rate"] >= base,
            "keep_best": variants["last iterate"] >= base,
        }
        best_single = min(variants.values())
        variants[f"{RESTARTS} restarts"] = mean_error(
            **{**settings, "restarts": RESTARTS}
        )
        if variants[f"{RESTARTS} restarts"] < (1 - RESTART_GAIN) * best_single:
            settings["restarts"] = RESTARTS
        stage2[defense], chosen[defense] = variants, settings
    return {"grid": grid, "stage2": stage2, "chosen": chosen}


def tuning_tables(
    tuning: Mapping, names: Mapping[str, str], settings: Mapping[str, Mapping]
) -> dict:
    """The recorded tuning (:func:`tune_ig`'s result in ``book/studies/06_ig_budget.json``) for the page.

    Args:
        tuning: ``{"grid", "stage2", "chosen", "images", "iterations"}``.
        names: display names of the defenses (the tuning's keys).
        settings: this run's ``cfg.ig_settings``.

    Returns:
        ``grid`` (Markdown: mean tuning MSE per α_TV × lr and defense, the chosen pair in bold), ``stage2``
        (Markdown: the variants at the chosen pair), ``chosen`` (Markdown: the settings per defense) and
        ``matches`` (whether this run's settings are the recorded choice).
    """
    from gitutor.tables import markdown_table

    chosen = tuning["chosen"]
    pairs = [(tv, lr) for tv, lr, _ in tuning["grid"][next(iter(names))]]
    cells = {d: {(tv, lr): m for tv, lr, m in tuning["grid"][d]} for d in names}

    def cell(d, pair):
        text = f"{cells[d][pair]:.4f}"
        return (
            f"**{text}**" if pair == (chosen[d]["tv_weight"], chosen[d]["lr"]) else text
        )

    grid = markdown_table(
        ["α_TV", "lr", *names.values()],
        [
            [f"{tv:g}", f"{lr:g}", *(cell(d, (tv, lr)) for d in names)]
            for tv, lr in pairs
        ],
    )
    variants = list(tuning["stage2"][next(iter(names))])
    stage2 = markdown_table(
        ["variant at the chosen α_TV, lr", *names.values()],
        [[v, *(f"{tuning['stage2'][d][v]:.4f}" for d in names)] for v in variants],
    )
    return {
        "grid": grid,
        "stage2": stage2,
        "chosen": markdown_table(
            ["defense", "α_TV", "lr", "schedule", "iterate", "starts"],
            [
                [
                    names[d],
                    f"{chosen[d]['tv_weight']:g}",
                    f"{chosen[d]['lr']:g}",
                    "steps" if chosen[d]["lr_steps"] else "constant",
                    "best" if chosen[d]["keep_best"] else "last",
                    str(chosen[d]["restarts"]),
                ]
                for d in names
            ],
        ),
        "matches": all(dict(settings[d]) == dict(chosen[d]) for d in names),
    }
