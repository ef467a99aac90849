"""Chapter 04's set-up and paper-vs-run rows (Ye et al., AAAI 2024, Stage II: Tables 1–2, Fig. 5–8).

The paper attacks an ImageNet-pretrained ResNet34 behind ImageNet normalisation in eval mode
(§Experiments). Offline the chapter attacks the network on which the attacks recover photographs
(the setting study, ``book/studies/04_setting_study.json``): a randomly initialised CIFAR ResNet-18 of the profile's width with
torchvision's default BatchNorm statistics (mean 0, variance 1), or, on request, a trained
substitute or a random network whose statistics are calibrated on auxiliary crops. The trials
themselves live in :mod:`gitutor.chapters.stepwise_gradinversion.trials`; this module holds what the notebook builds around
them and the paper's numbers (Table 1: LPIPS / PSNR / SSIM at B = 8, 15 000 iterations; Table 2: ablation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torchvision

from gitutor.data import bundled_crops
from gitutor.models import calibrate_batchnorm, cifar_resnet18, resnet34
from gitutor.models.substitute import (
    load_substitute,
    substitute_network,
    substitute_path,
)
from gitutor.chapters.stepwise_gradinversion.trials import private_batches, score
from gitutor.federated.case import gradient_case
from gitutor.stats import BOUNDS, UNBOUNDED, Interval, interval
from gitutor.results import interval_fields
from gitutor.chapters.stepwise_gradinversion.trained_rows import (
    PAPER_RANKING,
    PAPER_TABLE1,
    ordering_row,
)

#: Ye et al. Table 2 (LPIPS, PSNR dB, SSIM): each row adds one component.
PAPER_TABLE2 = {
    "ℓ_grad": (0.80, 8.34, 0.27),
    "+ R_image": (0.57, 10.79, 0.34),
    "+ ℓ̃_grad": (0.27, 14.71, 0.50),
    "+ schedule": (0.23, 15.99, 0.55),
}
#: Table 2's rows and the :data:`gitutor.chapters.stepwise_gradinversion.trials.METHODS` entry that runs each.
ABLATION = {
    "ℓ_grad": "ℓ_grad",
    "+ R_image": "GradInversion",
    "+ ℓ̃_grad": "+ ℓ̃_grad",
    "+ schedule": "Stepwise",
}
TABLE1_METHODS = ("DLG", "Inverting Gradients", "GradInversion", "Stepwise")
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def chapter_model(
    cfg, seed: int, device: str | torch.device = "cpu"
) -> torch.nn.Sequential:
    """The attacked network behind ImageNet normalisation, in eval mode on ``device``.

    ``cfg.pretrained``: the ImageNet ResNet34; else ``cfg.substitute``: the trained substitute of
    ``cfg.model`` (:func:`gitutor.models.substitute.load_substitute`, sha256 checked); else a
    random ``cfg.model`` (``"cifar_resnet18"`` of width ``cfg.width``, seed ``seed``) with
    torchvision's default BatchNorm statistics, or statistics calibrated on
    ``cfg.calibrate_bn_images`` auxiliary crops (``pool="aux"``, seed ``seed + 1``) when that is
    positive.

    Raises:
        OfflineDataError: as :func:`gitutor.models.resnet34` when pretrained weights are missing.
        FileNotFoundError: when the substitute has not been trained (the message says how).
    """
    normalise = torchvision.transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    if cfg.pretrained:
        model = torch.nn.Sequential(
            normalise, resnet34(num_classes=cfg.num_classes, pretrained=True)
        )
    elif cfg.substitute:
        model = load_substitute(substitute_path(cfg.model))
    elif cfg.model == "cifar_resnet18":
        model = torch.nn.Sequential(
            normalise, cifar_resnet18(cfg.num_classes, cfg.width, seed)
        )
    else:
        model = substitute_network(cfg.model, cfg.num_classes, seed)
    if not (cfg.pretrained or cfg.substitute) and cfg.calibrate_bn_images:
        calibrate_batchnorm(
            model,
            bundled_crops(cfg.calibrate_bn_images, cfg.image_size, seed + 1, "aux"),
        )
    return model.to(device).eval()


def block_starts(names: Sequence[str], blocks: Mapping[str, str]) -> dict[str, int]:
    """Index of the first parameter tensor of each residual block in ``model.named_parameters()`` order.

    Args:
        names: the model's parameter names.
        blocks: block label → parameter-name prefix (``MODEL_BLOCKS[cfg.model]``), e.g.
            ``{"layer4": "layer4"}`` for ResNet34 or ``{"stage3": "blocks.6"}`` for ResNet-20.

    Raises:
        ValueError: naming a block no parameter belongs to.
    """
    starts = {
        label: next((i for i, name in enumerate(names) if f"{prefix}." in name), None)
        for label, prefix in blocks.items()
    }
    missing = [block for block, index in starts.items() if index is None]
    if missing:
        raise ValueError(f"blocks {missing} have no parameters among names")
    return starts


def describe_model(cfg) -> str:
    """The attacked network in words, e.g. ``"CIFAR ResNet-18 of width 32, random init, default
    BatchNorm statistics"``."""
    name = {
        "resnet34": "ResNet34",
        "resnet20": "ResNet-20",
        "cifar_resnet18": f"CIFAR ResNet-18 of width {getattr(cfg, 'width', 64)}",
    }[cfg.model]
    if cfg.pretrained:
        return f"{name}, ImageNet-pretrained"
    if cfg.substitute:
        return f"{name}, trained substitute ({cfg.num_classes} bundled photographs, attacked ones held out)"
    if cfg.calibrate_bn_images:
        return f"{name}, random init, BN calibrated on {cfg.calibrate_bn_images} auxiliary crops"
    return f"{name}, random init, default BatchNorm statistics"


def chapter_batches(
    cfg, model: torch.nn.Module, seed: int, device: str | torch.device = "cpu"
) -> dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]]:
    """``{(B, i): (x, y, shared gradient)}`` for B in ``{cfg.batch_size, *cfg.batch_sizes}`` and
    i < ``cfg.n_batches``: the private batches (:func:`~gitutor.chapters.stepwise_gradinversion.trials.private_batches`;
    bundled photographs held out of its training when ``cfg.substitute``, else any) and what the server observes of each (:func:`~gitutor.federated.case.gradient_case`, labels known).
    """
    sizes = sorted({cfg.batch_size, *cfg.batch_sizes})
    images = private_batches(
        sizes,
        cfg.n_batches,
        image_size=cfg.image_size,
        num_classes=cfg.num_classes,
        seed=seed,
        image_root=cfg.image_root,
        held_out=cfg.substitute,
    )
    batches = {}
    for key, (x, y) in images.items():
        case = gradient_case(model, x.to(device), y.to(device), labels_known=True)
        batches[key] = case.inputs, case.labels, case.server_view["update"]
    return batches


def table1_runs(
    runs: Mapping[tuple, list[dict]], batches: Mapping, cfg
) -> dict[str, list[dict]]:
    """Table 1's trial values per method (``PAPER_TABLE1`` names) at ``cfg.iterations``, with the
    noise baseline scored from the common start x_0 of every batch (IG's first snapshot)."""
    b, t = cfg.batch_size, cfg.iterations
    noise = [
        score(
            runs[("Inverting Gradients", b, t, None)][i]["snapshots"][0][1],
            batches[(b, i)][0],
        )
        for i in range(cfg.n_batches)
    ]
    return {
        "Noise N(0, I)": noise,
        **{m: runs[(m, b, t, None)] for m in TABLE1_METHODS},
    }


def summarise(
    results: Sequence[Mapping], keys: Sequence[str] = ("PSNR", "SSIM")
) -> dict[str, Interval | None]:
    """Mean and 95 % interval over batches of each metric in ``keys`` (None where a metric is None, e.g.
    LPIPS without AlexNet weights). ``results``: one trial value per batch.

    Raises:
        ValueError: if ``results`` is empty.
    """
    if not results:
        raise ValueError("results is empty: one trial value per batch is needed")
    return {
        k: None
        if results[0][k] is None
        else interval([r[k] for r in results], bounds=BOUNDS.get(k, UNBOUNDED))
        for k in keys
    }


def control_summary(
    controls: Mapping[str, Mapping[str, Sequence[float]]],
) -> dict[str, dict[str, Interval]]:
    """``{control: {metric: Interval}}``: mean and 95 % interval over the batches of each control's
    per-batch scores (:func:`gitutor.controls.batch_controls`), for :func:`gitutor.stats.interval_table`."""
    return {
        name: {
            m: interval(values, bounds=BOUNDS.get(m, UNBOUNDED))
            for m, values in scores.items()
        }
        for name, scores in controls.items()
    }


def chapter_rows(
    cfg,
    table1: Mapping[str, Mapping[str, Interval | None]],
    table2: Mapping[str, Mapping[str, Interval]] | None,
    psnr: Mapping[str, Sequence[float]],
    unjudged: str | None = None,
) -> list[dict]:
    """The results rows of chapter 04 (see :mod:`gitutor.results`); Table 1 and 2 rows carry this
    run's 95 % interval over the batches (``low``/``high``), so a verdict needs all of it; stepwise
    GradInversion's Table 1 SSIM is the chapter's headline row.
    LPIPS rows at another image size than the paper's 224 px are marked ``not_comparable``
    (LPIPS's scale depends on the resolution), and every row of a network that is not the paper's
    ImageNet-trained one (``cfg.pretrained`` False: default or calibrated BatchNorm statistics, or the
    narrow substitute) is marked ``not_comparable`` with the reason; the last row is the paper's ordering
    judged by paired differences (:func:`.trained_rows.ordering_row`).

    Args:
        cfg: the chapter's settings (``gitutor.chapters.stepwise_gradinversion.profile.chapter_settings``).
        table1: :func:`summarise` of every Table 1 method with keys LPIPS, PSNR, SSIM (``PAPER_TABLE1`` names).
        table2: :func:`summarise` of every Table 2 row (``ABLATION`` names) with keys LPIPS, PSNR, SSIM (those
            present are reported), or None when the run has no ablation (``cfg.ablation_iterations`` None).
        psnr: per-batch PSNR (dB) of each Table 1 method (``PAPER_TABLE1`` names), batch i the same for all.
        unjudged: why the PSNR ordering is no test of the claim (e.g. no method above the controls in
            PSNR, :func:`.trained_rows.above_controls`); the ordering row then reads "not resolved".

    Raises:
        KeyError: naming a method or row missing from ``table1``/``table2``.
    """
    n = cfg.n_batches
    data = "whole bundled photographs" if cfg.image_root == "bundled" else "ImageNet"
    differences = (
        f"{cfg.profile} profile{f' at budget {cfg.budget}' if cfg.budget else ''}: "
        f"{cfg.iterations} iterations, {n} batches, {cfg.image_size}² {data}, "
        f"B = {cfg.batch_size}, {describe_model(cfg)}"
    )
    # LPIPS depends on the resolution (AlexNet's receptive fields cover most of a small image): a value at
    # another size than the paper's 224 px is not on the paper's scale, whatever its direction.
    lpips_scale = (
        {}
        if cfg.image_size == 224
        else {
            "not_comparable": f"LPIPS at {cfg.image_size} px, not the paper's 224 px: not on its scale"
        }
    )
    network = (
        {}
        if cfg.pretrained
        else {
            "not_comparable": (
                "not an ImageNet-trained network (R_BN's statistics hold no image information)"
            )
        }
    )
    rows = [
        {
            "quantity": f"Table 1 {k} (mean of {n} batches)",
            "setting": m,
            "paper": PAPER_TABLE1[m][j],
            "this_run": "n/a" if table1[m][k] is None else round(table1[m][k].mean, 3),
            "unit": "dB" if k == "PSNR" else "",
            "differences": differences,
            "better": "lower" if k == "LPIPS" else "higher",
            **interval_fields(table1[m][k], 3),
            **({"headline": True} if (m, k) == ("Stepwise", "SSIM") else {}),
            **(lpips_scale if k == "LPIPS" else {}),
            **network,
        }
        for m in PAPER_TABLE1
        if m != "Noise N(0, I)"
        for j, k in enumerate(("LPIPS", "PSNR", "SSIM"))
    ]
    budget = (
        ""
        if cfg.ablation_iterations == cfg.iterations
        else f" ({cfg.ablation_iterations} iterations)"
    )
    rows += [
        {
            "quantity": f"Table 2 {k} (mean of {n} batches)",
            "setting": row + budget,
            "paper": PAPER_TABLE2[row][j],
            "this_run": round(table2[row][k].mean, 3),
            "unit": "dB" if k == "PSNR" else "",
            **interval_fields(table2[row][k], 3),
            "differences": differences,
            "better": "lower" if k == "LPIPS" else "higher",
            **(lpips_scale if k == "LPIPS" else {}),
            **network,
        }
        for row in (ABLATION if table2 is not None else ())
        for j, k in enumerate(("LPIPS", "PSNR", "SSIM"))
        if k in table2[row] and table2[row][k] is not None
    ]

    rows.append(
        ordering_row(
            {"PSNR": {m: psnr[m] for m in PAPER_RANKING}},
            f"this run, {n} batches",
            differences,
            network.get("not_comparable"),
            unjudged,
        )
    )
    return rows


def skip_blocks(model: torch.nn.Module) -> list[tuple[str, int, int]]:
    """The blocks of ``model`` whose output adds a skip connection, in order: each as (module name,
    index of its first parameter tensor, index of its last), 0-based into
    ``list(model.parameters())`` — the index the stepwise schedule counts in.

    A torchvision ``BasicBlock`` / ``Bottleneck`` always adds its input back; a timm
    ``InvertedResidual`` / ``DepthwiseSeparableConv`` (EfficientNet) only where its ``has_skip`` is
    true (same shape in and out): on EfficientNet-Lite0 the first block with a skip connection comes
    after the first strided stage.

    Raises:
        ValueError: if the model has no such block.
    """
    index = {id(p): i for i, p in enumerate(model.parameters())}
    found = []
    for name, module in model.named_modules():
        residual = (
            isinstance(
                module,
                (
                    torchvision.models.resnet.BasicBlock,
                    torchvision.models.resnet.Bottleneck,
                ),
            )
            or getattr(module, "has_skip", False) is True
        )
        own = [index[id(p)] for p in module.parameters()]
        if residual and own:
            found.append((name, min(own), max(own)))
    if not found:
        raise ValueError(
            f"{type(model).__name__} has no block with a skip connection (a ResNet's BasicBlock, "
            "an EfficientNet block with has_skip)"
        )
    return found
