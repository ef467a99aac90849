"""Chapter 02's reduced Table 3 (Wang, Liang & He, ICLR 2024, §4.3): what the recovered soft label buys a
gradient-matching attack, over many runs.

Every run attacks one sample ``(x, y)`` of ``sample(kind, index)`` through the server's view of an untrained
LeNet and scores the reconstruction by PSNR (dB) and SSIM. Seven settings (:data:`MATCHING_SETTINGS`): cosine
matching with TV (Inverting Gradients, Geiping et al. 2020) or L2 matching without a prior (DLG's distance,
Zhu et al. 2019; Yin et al. 2021), both by signed Adam, with the label fixed to the truth (GT), the iDLG
one-hot label or the recovered label (Ours); and DLG itself, its label optimised jointly with L-BFGS. The
paper does not state its optimisers.

The runs of one fixed-label setting are solved together (:func:`batched_inverting_gradients`): the objective
of a batch of R independent problems is the mean of their objectives, and signed Adam steps on the *sign*
of each pixel's gradient, per coordinate, so each problem follows exactly the path it would follow alone
from the same start (up to float rounding); only the per-step overhead is shared. L-BFGS couples all
coordinates through its curvature pairs, so DLG's runs stay one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from tqdm.auto import tqdm

from gitutor.attacks import dlg, inverting_gradients
from gitutor.federated import gradient_case
from gitutor.labels import idlg_label, recover_soft_label
from gitutor.metrics import psnr, ssim

Sample = Callable[[str, int], tuple[torch.Tensor, torch.Tensor, int]]
#: Table 3's settings: gradient distance / label given to the attack (Wang et al. §4.3).
MATCHING_SETTINGS = (
    "cos / GT",
    "cos / iDLG",
    "cos / Ours",
    "L2 / GT",
    "L2 / Ours",
    "L2 / iDLG",
    "L2 / DLG",
)
LABEL_SOURCES = ("GT", "iDLG", "Ours")


def _observed(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, device
) -> list[torch.Tensor]:
    return [g.detach() for g in gradient_case(model, x.to(device), y.to(device)).update]


def batched_cosine_distance(
    model: nn.Module,
    targets: Sequence[Sequence[torch.Tensor]],
    labels: torch.Tensor,
    distance: str = "cos",
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``f(images (R, C, H, W)) -> scalar``: the mean over r of the gradient distance between the gradient of
    ``model`` at ``(images[r], labels[r])`` and ``targets[r]``: the cosine distance of Geiping et al. 2020
    (Eq. 4, ``distance="cos"``) or the squared Euclidean distance of DLG / Yin et al. 2021 (``"l2"``).

    Args:
        model: the attacked network (its parameters are constants here).
        targets: R observed gradients, each aligned with ``model.parameters()``.
        labels: ``(R, K)`` soft labels (rows sum to 1), one per problem.
        distance: ``"cos"`` or ``"l2"``.

    Raises:
        ValueError: if the number of targets and labels differ, a target does not match the parameters, or
            ``distance`` is unknown.
    """
    if distance not in ("cos", "l2"):
        raise ValueError(f"distance must be 'cos' or 'l2', got {distance!r}")
    names, params = zip(*[(n, p.detach()) for n, p in model.named_parameters()])
    if len(targets) != len(labels) or any(len(t) != len(names) for t in targets):
        raise ValueError(
            f"need one target per label ({len(targets)} targets, {len(labels)} labels), "
            f"each with {len(names)} tensors (model.parameters())"
        )
    stacked = [torch.stack([t[j].detach() for t in targets]) for j in range(len(names))]
    fixed = dict(zip(names, params))

    def loss(weights, x, y):  # the client's soft-label cross-entropy on one sample
        return -(
            y * torch.log_softmax(functional_call(model, weights, (x[None],))[0], -1)
        ).sum()

    def cos(x, y, *target):
        g = grad(loss)(fixed, x, y)
        dot = sum((g[n] * t).sum() for n, t in zip(names, target))
        norms = (
            sum((g[n] ** 2).sum() for n in names).sqrt()
            * sum((t**2).sum() for t in target).sqrt()
        )
        return 1 - dot / norms

    def l2(x, y, *target):
        g = grad(loss)(fixed, x, y)
        return sum(((g[n] - t) ** 2).sum() for n, t in zip(names, target))

    one = cos if distance == "cos" else l2
    return lambda images: vmap(one)(images, labels, *stacked).mean()


def batched_inverting_gradients(
    model: nn.Module,
    targets,
    labels: torch.Tensor,
    image_shape,
    *,
    iterations: int,
    tv_weight: float,
    seed: int = 0,
    distance: str = "cos",
) -> torch.Tensor:
    """Inverting Gradients on R independent one-image problems at once; returns the ``(R, C, H, W)`` images.
    ``distance="l2"`` swaps the cosine distance for DLG's squared Euclidean one (the same signed Adam loop).

    The mean of the R objectives ``distance_r + tv_weight · TV(x_r)`` (TV is a per-pixel mean, so the batch's
    TV is the mean of the per-image TVs) has the per-pixel gradient of problem r's own objective divided by
    R; signed Adam ignores that factor, so each image follows its own run from the batch's seeded start.

    Args:
        model, targets, labels: as :func:`batched_cosine_distance`.
        image_shape: ``(C, H, W)`` of one image.
        iterations, tv_weight, seed: as :func:`gitutor.attacks.inverting_gradients`.
    """
    shape = (len(targets), *image_shape)
    return inverting_gradients(
        model,
        targets[0],
        labels,
        shape,
        iterations=iterations,
        tv_weight=tv_weight,
        seed=seed,
        matching_distance=batched_cosine_distance(model, targets, labels, distance),
    ).images


def _labels(
    model: nn.Module, grads, y: torch.Tensor, exclude_top: int
) -> dict[str, torch.Tensor]:
    """The label each setting gives the attack: the truth, iDLG's one-hot answer, ours (``(1, K)`` each)."""
    one_hot = torch.nn.functional.one_hot(
        torch.tensor([idlg_label(grads[-1])]), y.shape[-1]
    )
    ours = recover_soft_label(model.fc, grads[-1].cpu(), exclude_top=exclude_top).label
    return {"GT": y.float(), "iDLG": one_hot.float(), "Ours": ours.float().view(1, -1)}


def matching_table(
    model: nn.Module, sample: Sample, cfg, device="cpu", progress: bool = False
) -> dict:
    """Reduced Table 3: per kind in ("mixup", "smoothing"), ``cfg.table3_samples[kind]`` samples
    (images 0, 2, 4, …) × ``cfg.table3_repeats`` random starts, every :data:`MATCHING_SETTINGS`
    entry on each.

    Returns:
        dict with ``scores`` ``{(kind, setting): [(PSNR dB, SSIM) per run]}``, ``table`` (their
        means), ``images`` and ``titles`` (truth and every setting for each kind's first run),
        ``first`` ``{kind: (x, true label, grads, PSNR of its first cos / GT run)}`` and ``truths``
        ``{kind: (n, C, H, W)}``, every attacked image once (for the controls).

    ``progress``: a tqdm bar over each kind's DLG runs (run by run; the others are batched).
    """
    scores, images, titles, first, truths_of = {}, [], [], {}, {}
    steps, tv = cfg.table3_ig_iterations, cfg.table3_tv_weight
    for kind in ("mixup", "smoothing"):
        runs = []  # (x, observed gradient, {source: label}, start)
        for index in range(cfg.table3_samples[kind]):
            x, y, k = sample(kind, 2 * index)
            grads = _observed(model, x, y, device)
            labels = _labels(model, grads, y, k)
            runs += [
                (x.to(device), grads, labels, r) for r in range(cfg.table3_repeats)
            ]
        truths, grads = torch.cat([run[0] for run in runs]), [run[1] for run in runs]
        truths_of[kind] = truths[
            :: cfg.table3_repeats
        ].cpu()  # each attacked image once
        found = {}
        for source in LABEL_SOURCES:  # a fixed label: all runs of a setting at once
            y = torch.cat([run[2][source] for run in runs]).to(device)
            for name, weight in (("cos", tv), ("L2", 0.0)):  # L2 as DLG: no prior
                found[f"{name} / {source}"] = batched_inverting_gradients(
                    model,
                    grads,
                    y,
                    truths.shape[1:],
                    iterations=steps,
                    tv_weight=weight,
                    seed=len(runs),
                    distance=name.lower(),
                )
        found["L2 / DLG"] = torch.cat(
            [  # DLG optimises its label too: L-BFGS, run by run
                dlg(
                    model,
                    g,
                    tuple(x.shape),
                    cfg.num_classes,
                    iterations=cfg.table3_iterations,
                    seed=start,
                ).images
                for x, g, _, start in tqdm(
                    runs, desc=f"Table 3 DLG, {kind}", disable=not progress
                )
            ]
        )
        for setting in MATCHING_SETTINGS:
            scores[kind, setting] = [
                (
                    float(psnr(a[None], b[None])),
                    float(ssim(a[None].clamp(0, 1), b[None])),
                )
                for a, b in zip(found[setting], truths)
            ]
        images += [truths[:1], *(found[s][:1] for s in MATCHING_SETTINGS)]
        titles += [f"{kind}: truth"] + [f"{kind}: {s}" for s in MATCHING_SETTINGS]
        cos_gt = scores[kind, "cos / GT"][0][0]
        first[kind] = (truths[:1], runs[0][2]["GT"].to(device), runs[0][1], cos_gt)
    table = {key: tuple(np.mean(values, axis=0)) for key, values in scores.items()}
    return {
        "table": table,
        "scores": scores,
        "images": images,
        "titles": titles,
        "first": first,
        "truths": truths_of,
    }


def cosine_diagnosis(
    model: nn.Module, matching: Mapping, cfg, device="cpu"
) -> dict[str, dict[str, float]]:
    """For each kind whose first "cos / GT" run of :func:`matching_table` stays below
    ``cfg.recognisable_psnr``: the PSNR (dB) of that sample attacked alone from seed 0 ("as run": the
    profile's steps and TV weight) and with 3× the steps, without TV, and from another start (seed 1)."""
    diagnosis = {}
    for kind, (x, y, grads, base) in matching["first"].items():
        if base >= cfg.recognisable_psnr:
            continue
        steps, tv = cfg.table3_ig_iterations, cfg.table3_tv_weight
        variants = {
            "as run": dict(iterations=steps, tv_weight=tv, seed=0),
            "3× steps": dict(iterations=3 * steps, tv_weight=tv, seed=0),
            "no TV": dict(iterations=steps, tv_weight=0.0, seed=0),
            "another start": dict(iterations=steps, tv_weight=tv, seed=1),
        }
        diagnosis[kind] = {
            name: float(
                psnr(
                    inverting_gradients(
                        model, grads, y, tuple(x.shape), **options
                    ).images,
                    x,
                )
            )
            for name, options in variants.items()
        }
    return diagnosis
