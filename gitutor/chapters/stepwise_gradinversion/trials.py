"""The trials behind chapter 04's comparisons (Ye et al., AAAI 2024, Tables 1–2, Fig. 5–8).

One trial = one attack (:data:`METHODS`) on one private batch at one budget, scored against the
truth. Trials are independent, so a sweep (:func:`gitutor.sweeps.run_trials`) can run them in this
process or on Ray; :func:`trial` is the function it calls with a shared context::

    context = {"model": model, "batches": {(B, i): (x, y, shared_gradient)}, "settings": {...}}

``settings`` holds the hyper-parameters of the profile: ``dropout``, ``tv_weight``, ``bn_weight``,
``lr``, ``t1``, ``t2`` (paper iterations), ``ig_tv_weight``, ``dlg_inner_steps``, ``num_classes``
and ``record_every``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import torch

from gitutor.attacks.dlg import dlg
from gitutor.attacks.gradinversion import gradinversion
from gitutor.attacks.inverting_gradients import inverting_gradients
from gitutor.attacks.result import AttackResult
from gitutor.attacks.stepwise import stepwise_inversion
from gitutor.attacks.stepwise_schedule import StepwiseSchedule
from gitutor.checkpoints import Checkpoint
from gitutor.data import (
    ATTACKED_PHOTOGRAPHS,
    BUNDLED_PHOTOGRAPHS,
    attacked_photographs,
    image_folder,
)
from gitutor.metrics import lpips_or_none, match_batch, psnr, ssim
from gitutor.preflight import weights_missing
from gitutor.seeding import make_generator

#: The profile settings a trial reads from ``context["settings"]`` (see the module docstring).
SETTINGS = (
    "dropout",
    "tv_weight",
    "bn_weight",
    "lr",
    "t1",
    "t2",
    "ig_tv_weight",
    "dlg_inner_steps",
    "num_classes",
    "record_every",
)
#: Table 1 (DLG … Stepwise) and the Table 2 / Fig. 6 variants of the stepwise objective.
METHODS = (
    "DLG",
    "Inverting Gradients",
    "GradInversion",
    "Stepwise",
    "ℓ_grad",
    "+ ℓ̃_grad",
    "Stepwise, no dropout",
)


def run_attack(
    context: Mapping,
    method: str,
    batch: tuple[int, int],
    iterations: int,
    seed: int,
    first_tensor: int | None = None,
    floor: int | None = None,
    checkpoint: Checkpoint | None = None,
) -> AttackResult:
    """Run ``method`` on ``context["batches"][batch]`` for ``iterations`` image updates.

    DLG gets ``iterations // dlg_inner_steps`` L-BFGS steps (the same number of gradient
    evaluations). ``first_tensor`` (Stepwise only, Fig. 8) matches tensors ``first_tensor …`` at
    every step instead of the schedule. ``floor`` (the Stepwise variants): the schedule's deepest start
    index instead of the depth-scaled one (:func:`~gitutor.attacks.stepwise_schedule.stage_floor` on a
    network other than ResNet34). ``checkpoint``: save and resume the run there
    (:class:`gitutor.checkpoints.Checkpoint`).

    Raises:
        ValueError: for an unknown method or batch, or ``first_tensor`` with another method.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if first_tensor is not None and method != "Stepwise":
        raise ValueError(f"first_tensor is a Stepwise setting, got method {method!r}")
    if batch not in context["batches"]:
        raise ValueError(
            f"batch {batch!r} is not in the context; batches: {sorted(context['batches'])}"
        )
    model, s = context["model"], context["settings"]
    x, y, grads = context["batches"][batch]
    shape = tuple(x.shape)
    common = dict(
        lr=s["lr"], seed=seed, record_every=s["record_every"], checkpoint=checkpoint
    )
    if method == "DLG":
        return dlg(
            model,
            grads,
            shape,
            s["num_classes"],
            labels=y,
            seed=seed,
            record_every=1,
            iterations=max(1, iterations // s["dlg_inner_steps"]),
            checkpoint=checkpoint,
        )
    if method == "Inverting Gradients":
        return inverting_gradients(
            model,
            grads,
            y,
            shape,
            iterations=iterations,
            tv_weight=s["ig_tv_weight"],
            **common,
        )
    if method == "GradInversion":
        return gradinversion(
            model,
            grads,
            y,
            shape,
            iterations=iterations,
            tv_weight=s["tv_weight"],
            bn_weight=s["bn_weight"],
            **common,
        )
    if (
        method == "ℓ_grad"
    ):  # Table 2, row 1: cosine over every tensor, no prior, no dropout
        return stepwise_inversion(
            model,
            grads,
            y,
            shape,
            iterations=iterations,
            dropout=0.0,
            tv_weight=0.0,
            bn_weight=0.0,
            schedule=StepwiseSchedule.all_tensors(iterations),
            **common,
        )
    schedule = _schedule(method, iterations, len(grads), s, first_tensor, floor)
    return stepwise_inversion(
        model,
        grads,
        y,
        shape,
        iterations=iterations,
        tv_weight=s["tv_weight"],
        bn_weight=s["bn_weight"],
        schedule=schedule,
        dropout=0.0 if method == "Stepwise, no dropout" else s["dropout"],
        **common,
    )


def _schedule(
    method: str,
    iterations: int,
    num_tensors: int,
    s: Mapping,
    first_tensor: int | None,
    floor: int | None,
):
    paper = StepwiseSchedule.paper(
        iterations, num_tensors, t1=s["t1"], t2=s["t2"], floor=floor
    )
    if first_tensor is not None:
        return StepwiseSchedule.fixed(
            iterations, first_tensor, t1=paper.t1, t2=paper.t2
        )
    if method == "+ ℓ̃_grad":
        return StepwiseSchedule.paper(iterations, num_tensors, t1=0, t2=0, floor=floor)
    return paper


def score(images: torch.Tensor, truth: torch.Tensor) -> dict[str, float | None]:
    """Batch-mean PSNR (dB), SSIM and LPIPS (None without AlexNet weights) after Hungarian matching."""
    matched = match_batch(images.detach().cpu().clamp(0, 1), truth.cpu())
    lpips_values = lpips_or_none(matched, truth.cpu())
    return {
        "PSNR": psnr(matched, truth.cpu()).mean().item(),
        "SSIM": ssim(matched, truth.cpu()).mean().item(),
        "LPIPS": None if lpips_values is None else lpips_values.mean().item(),
    }


def trial(
    context: Mapping,
    *,
    method: str,
    batch: tuple[int, int],
    iterations: int,
    seed: int,
    first_tensor: int | None = None,
) -> dict:
    """One scored run of :func:`run_attack` (what a sweep calls); ``context["floor"]``, when present, is
    the stepwise schedule's floor (:func:`~gitutor.attacks.stepwise_schedule.stage_floor`).

    Returns:
        ``{"PSNR", "SSIM", "LPIPS", "loss" (per iteration), "info", "images" (matched to the truth),
        "snapshots", "seconds"}``.
    """
    start = time.perf_counter()
    result = run_attack(
        context, method, batch, iterations, seed, first_tensor, context.get("floor")
    )
    truth = context["batches"][batch][0]
    return {
        **score(result.images, truth),
        "loss": result.history.get("loss", []),
        "info": result.info,
        "images": match_batch(result.images.clamp(0, 1), truth.cpu()),
        "snapshots": result.snapshots,
        "seconds": time.perf_counter() - start,
    }


def private_batches(
    batch_sizes: list[int],
    count: int,
    *,
    image_size: int,
    num_classes: int,
    seed: int,
    image_root: str | Path = "bundled",
    held_out: bool = True,
) -> dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]]:
    """``{(B, i): (x, y)}`` for every B in ``batch_sizes`` and i < ``count``: distinct-label batches.

    Whole bundled photographs (:func:`~gitutor.data.attacked_photographs` batch i: of the six held
    out of the trained substitutes, or of all :data:`~gitutor.data.BUNDLED_PHOTOGRAPHS` when not
    ``held_out``) with random distinct labels when ``image_root == "bundled"``, else images of the
    ImageFolder tree with distinct classes. Batch ``(B, i)`` is drawn with seed ``seed + 1000 · i + B``.

    Raises:
        ValueError: for a bundled B larger than the photographs to draw from (as ``attacked_photographs``).
    """
    names = ATTACKED_PHOTOGRAPHS if held_out else BUNDLED_PHOTOGRAPHS
    batches = {}
    for b in batch_sizes:
        for i in range(count):
            generator = make_generator(seed + 1000 * i + b)
            if image_root == "bundled":
                x = attacked_photographs(image_size, b, i, names)
                batches[(b, i)] = (
                    x,
                    torch.randperm(num_classes, generator=generator)[:b],
                )
                continue
            images, labels = image_folder(
                image_root, 8 * b, size=image_size, seed=seed + 1000 * i + b
            )
            first = [labels.tolist().index(c) for c in dict.fromkeys(labels.tolist())][
                :b
            ]
            batches[(b, i)] = images[first], labels[first]
    return batches


def offline_problems(pretrained: bool, image_root: str | Path | None) -> list[str]:
    """What the settings need that this machine lacks, one line each, naming the notebook parameter to set.

    ``pretrained``: the ImageNet ResNet34 weights must be in the torch hub cache, or fetched there
    (:func:`gitutor.preflight.weights_missing`: online, torch's loader downloads them). ``image_root``:
    ``"bundled"`` (bundled photographs), or an existing ImageFolder tree; None means not given.
    """
    problems = []
    if pretrained:  # fetched into the hub cache when the machine is online
        problems += weights_missing(
            "ResNet34_Weights.IMAGENET1K_V1",
            "PRETRAINED = False (random weights: a contrast, not the paper's setting)",
        )
    if image_root is None or (
        image_root != "bundled" and not Path(image_root).is_dir()
    ):
        given = (
            "is not set"
            if image_root is None
            else f"= {str(image_root)!r} is not a folder"
        )
        problems.append(
            f"IMAGE_ROOT {given}: point it to the ImageNet validation ImageFolder tree (one "
            "sub-folder per class), or set IMAGE_ROOT = 'bundled' (whole bundled photographs)"
        )
    return problems


def trial_settings(cfg) -> dict:
    """``context["settings"]`` of a sweep: the :data:`SETTINGS` of the chapter's settings ``cfg``.

    Raises:
        AttributeError: naming a setting ``cfg`` lacks.
    """
    return {name: getattr(cfg, name) for name in SETTINGS}


def chapter_trials(cfg, block_start: Mapping[str, int], seed: int) -> list[dict]:
    """Every distinct trial chapter 04 needs under settings ``cfg``, one per batch i < ``cfg.n_batches``.

    Budget curve: IG, GradInversion, Stepwise at each of ``cfg.budgets`` (B = ``cfg.batch_size``);
    Table 1: those plus DLG at ``cfg.iterations``; Table 2 and dropout: the variants at
    ``cfg.ablation_iterations``; Fig. 7–8: Stepwise per batch size and per first block at
    ``cfg.study_iterations``; a part whose iterations are None (or whose budgets are empty) is not
    run. Batch i starts every method from the same noise (seed ``seed + i``).
    """
    b, specs = cfg.batch_size, []
    specs += [
        (m, b, t, None)
        for t in cfg.budgets
        for m in ("Inverting Gradients", "GradInversion", "Stepwise")
    ]
    specs += [
        (m, b, cfg.iterations, None)
        for m in ("DLG", "Inverting Gradients", "GradInversion", "Stepwise")
    ]
    if cfg.ablation_iterations is not None:
        specs += [(m, b, cfg.ablation_iterations, None) for m in METHODS[2:]]
    if cfg.study_iterations is not None:
        specs += [
            ("Stepwise", size, cfg.study_iterations, None) for size in cfg.batch_sizes
        ]
        specs += [
            ("Stepwise", b, cfg.study_iterations, block_start[block])
            for block in cfg.first_blocks
        ]
    unique = list(dict.fromkeys(specs))
    return [
        dict(method=m, batch=(size, i), iterations=t, seed=seed + i, first_tensor=first)
        for m, size, t, first in unique
        for i in range(cfg.n_batches)
    ]


def by_setting(outcomes) -> dict[tuple, list[dict]]:
    """``{(method, B, iterations, first_tensor): [value of batch 0, 1, …]}`` from successful trial outcomes."""
    runs: dict[tuple, list[dict]] = {}
    for outcome in sorted(
        (o for o in outcomes if o.ok), key=lambda o: o.trial["batch"][1]
    ):
        t = outcome.trial
        runs.setdefault(
            (t["method"], t["batch"][0], t["iterations"], t["first_tensor"]), []
        ).append(outcome.value)
    return runs
