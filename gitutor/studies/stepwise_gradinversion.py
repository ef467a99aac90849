"""Chapter 04's set-up and paper-vs-run rows (Ye et al., AAAI 2024, Stage II: Tables 1–2, Fig. 5–8).

The attacked model is ResNet34 behind ImageNet normalisation in eval mode (§Experiments); offline it is
randomly initialised and its BatchNorm running statistics are calibrated on auxiliary crops. The trials
themselves live in :mod:`gitutor.attacks.comparison`; this module holds what the notebook builds around
them and the paper's numbers (Table 1: LPIPS / PSNR / SSIM at B = 8, 15 000 iterations; Table 2: ablation).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torchvision

from gitutor.data import bundled_crops
from gitutor.models import calibrate_batchnorm, resnet34
from gitutor.models.substitute import load_substitute, substitute_network, substitute_path
from gitutor.stats import Interval, interval

#: Ye et al. Table 1 (LPIPS, PSNR dB, SSIM), ImageNet, ResNet34, B = 8.
PAPER_TABLE1 = {"Noise N(0, I)": (1.39, 9.82, 0.21), "DLG": (1.01, 9.31, 0.25), "Inverting Gradients": (0.58, 11.99, 0.31),
                "GradInversion": (0.39, 13.22, 0.44), "Stepwise": (0.33, 15.12, 0.49)}
#: Ye et al. Table 2 (LPIPS, PSNR dB, SSIM): each row adds one component.
PAPER_TABLE2 = {"ℓ_grad": (0.80, 8.34, 0.27), "+ R_image": (0.57, 10.79, 0.34), "+ ℓ̃_grad": (0.27, 14.71, 0.50),
                "+ schedule": (0.23, 15.99, 0.55)}
#: Table 2's rows and the :data:`gitutor.attacks.comparison.METHODS` entry that runs each.
ABLATION = {"ℓ_grad": "ℓ_grad", "+ R_image": "GradInversion", "+ ℓ̃_grad": "+ ℓ̃_grad", "+ schedule": "Stepwise"}
PAPER_ORDER = "Stepwise > GradInversion > Inverting Gradients > DLG > Noise N(0, I)"
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def chapter_model(cfg, seed: int, device: str | torch.device = "cpu") -> torch.nn.Sequential:
    """The attacked network behind ImageNet normalisation, in eval mode on ``device``.

    ``cfg.pretrained``: the ImageNet ResNet34; else ``cfg.substitute``: the trained substitute of
    ``cfg.model`` (:func:`gitutor.models.substitute.load_substitute`, sha256 checked); else a
    random ``cfg.model`` whose BatchNorm running statistics are calibrated on
    ``cfg.calibrate_bn_images`` auxiliary crops (``pool="aux"``, seed ``seed + 1``).

    Raises:
        OfflineDataError: as :func:`gitutor.models.resnet34` when pretrained weights are missing.
        FileNotFoundError: when the substitute has not been trained (the message says how).
    """
    if cfg.pretrained:
        normalise = torchvision.transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
        model = torch.nn.Sequential(normalise, resnet34(num_classes=cfg.num_classes, pretrained=True))
    elif cfg.substitute:
        model = load_substitute(substitute_path(cfg.model))
    else:
        model = substitute_network(cfg.model, cfg.num_classes, seed)
        calibrate_batchnorm(model, bundled_crops(cfg.calibrate_bn_images, cfg.image_size, seed + 1, "aux"))
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
    starts = {label: next((i for i, name in enumerate(names) if f"{prefix}." in name), None)
              for label, prefix in blocks.items()}
    missing = [block for block, index in starts.items() if index is None]
    if missing:
        raise ValueError(f"blocks {missing} have no parameters among names")
    return starts


def summarise(results: Sequence[Mapping], keys: Sequence[str] = ("PSNR", "SSIM")) -> dict[str, Interval | None]:
    """Mean and 95 % interval over batches of each metric in ``keys`` (None where a metric is None, e.g.
    LPIPS without AlexNet weights). ``results``: one trial value per batch.

    Raises:
        ValueError: if ``results`` is empty.
    """
    if not results:
        raise ValueError("results is empty: one trial value per batch is needed")
    return {k: None if results[0][k] is None else interval([r[k] for r in results]) for k in keys}


def chapter_rows(cfg, table1: Mapping[str, Mapping[str, Interval | None]], table2: Mapping[str, Mapping[str, Interval]],
                 order: str) -> list[dict]:
    """The results rows of chapter 04 (see :mod:`gitutor.results`).

    Args:
        cfg: the chapter's settings (``gitutor.profiles.stepwise_gradinversion.chapter_settings``).
        table1: :func:`summarise` of every Table 1 method with keys LPIPS, PSNR, SSIM (``PAPER_TABLE1`` names).
        table2: :func:`summarise` of every Table 2 row (``ABLATION`` names) with key PSNR.
        order: :func:`gitutor.stats.ordering` of the Table 1 PSNRs.

    Raises:
        KeyError: naming a method or row missing from ``table1``/``table2``.
    """
    n = cfg.n_batches
    differences = (f"{cfg.profile} profile{f' at budget {cfg.budget}' if cfg.budget else ''}: {cfg.iterations} iterations, "
                   f"{n} batches, {cfg.image_size}² {'bundled photographs' if cfg.image_root == 'bundled' else 'ImageNet'}, "
                   f"B = {cfg.batch_size}, ResNet34 " + ("ImageNet-pretrained" if cfg.pretrained
                                                      else f"random init, BN calibrated on {cfg.calibrate_bn_images} auxiliary crops"))
    rows = [{"quantity": f"Table 1 {k} (mean of {n} batches)", "setting": m, "paper": PAPER_TABLE1[m][j],
             "this_run": "n/a" if table1[m][k] is None else round(table1[m][k].mean, 3), "unit": "dB" if k == "PSNR" else "",
             "differences": differences, "better": "lower" if k == "LPIPS" else "higher"}
            for m in PAPER_TABLE1 if m != "Noise N(0, I)" for j, k in enumerate(("LPIPS", "PSNR", "SSIM"))]
    rows += [{"quantity": f"Table 2 PSNR (mean of {n} batches)", "setting": row, "paper": PAPER_TABLE2[row][1],
              "this_run": round(table2[row]["PSNR"].mean, 2), "unit": "dB",
              "differences": f"{cfg.ablation_iterations} iterations; " + differences, "better": "higher"} for row in ABLATION]
    rows.append({"quantity": "PSNR ordering " + PAPER_ORDER, "setting": "Table 1, 95 % intervals separate",
                 "paper": "yes", "this_run": "yes" if order == PAPER_ORDER else order, "unit": "", "differences": differences})
    return rows
