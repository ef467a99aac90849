"""Chapter 01's experiments around DLG (Zhu, Liu & Han 2019; the reproduction report §6 on seeds).

``dlg_case`` builds one seeded attack case (the DLG LeNet, a private image, its label);
``seed_study`` runs DLG on one case per seed and scores it (``score_run``); ``defense_sweep`` reruns DLG against
pruned or noised gradients; ``gradient_scale`` measures the shared gradient's size, the yardstick a
noise σ must be compared with.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from gitutor.attacks import AttackResult, dlg
from gitutor.data import digits, torchvision_images, whole_photographs
from gitutor.federated import add_gaussian_noise, client_gradients, prune_gradients
from gitutor.metrics import psnr, ssim
from gitutor.models import LeNet, init_uniform_
from gitutor.seeding import make_generator

SOURCES = ("photos", "digits", "cifar100", "mnist")


def dlg_case(seed: int, *, size: int = 32, source: str = "photos", batch_size: int = 1, num_classes: int = 100,
             data_root: str = "data", device: str | torch.device = "cpu"):
    """``(model, x, y)``: the DLG LeNet (U(−0.5, 0.5) from ``seed``) and a private batch drawn by ``seed``.

    ``"photos"``: whole bundled photographs (photo ``seed mod 12`` first) with random labels; ``"digits"``:
    scikit-learn digits; ``"cifar100"``/``"mnist"``: torchvision test images from ``data_root`` (full
    profile). Grey images are replicated to 3 channels. ``x`` is ``(batch_size, 3, size, size)``.

    Raises:
        ValueError: for an unknown ``source``. OfflineDataError: a torchvision dataset is not on disk.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    generator = make_generator(seed)
    model = init_uniform_(LeNet(num_classes=num_classes, in_channels=3, image_size=size), 0.5, make_generator(seed))
    if source == "photos":
        pool = whole_photographs(size)
        images = pool[[(seed + i) % len(pool) for i in range(batch_size)]]
        labels = torch.randint(num_classes, (batch_size,), generator=generator)
    elif source == "digits":
        pool, pool_labels = digits(size=size)
        index = torch.randperm(len(pool), generator=generator)[:batch_size]
        images, labels = pool[index], pool_labels[index]
    else:
        images, labels = torchvision_images(source, batch_size, root=data_root, size=size, seed=seed)
    return model.to(device), images.expand(-1, 3, -1, -1).contiguous().to(device), labels.to(device)


def score_run(seed: int, result: AttackResult, x: torch.Tensor, y: torch.Tensor) -> dict:
    """``{seed, psnr (dB, mean over the batch), ssim, label_ok, truth, result}`` of one DLG run on ``(x, y)``."""
    truth = x.cpu()
    return {"seed": seed, "psnr": float(psnr(result.images, truth).mean()),
            "ssim": float(ssim(result.images.clamp(0, 1), truth).mean()),
            "label_ok": bool((result.labels == y.cpu()).all()), "truth": truth, "result": result}


def seed_study(seeds: Sequence[int], *, iterations: int, line_search: str | None = None, record_every: int = 10,
               progress: bool = False, **case) -> list[dict]:
    """DLG (label unknown) on ``dlg_case(seed, **case)`` for every seed: one :func:`score_run` dict per seed.

    The seed draws the model, the image, the label and the dummy initialisation together (the report's
    "random seed", §6); ``line_search`` is passed to :func:`gitutor.attacks.dlg`.
    """
    rows = []
    for seed in seeds:
        model, x, y = dlg_case(seed, **case)
        result = dlg(model, client_gradients(model, x, y), x.shape, model.fc.out_features, iterations=iterations,
                     seed=seed, line_search=line_search, record_every=record_every, progress=progress)
        rows.append(score_run(seed, result, x, y))
    return rows


def defense_sweep(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, prune_rates: Sequence[float],
                  noise_variances: Sequence[float], iterations: int, seed: int = 0, progress: bool = False) -> dict:
    """DLG against the clean, pruned (DLG §5: smallest-magnitude entries zeroed) and noised gradients.

    Returns ``{(kind, strength): (psnr dB, images)}`` with kind in ``"none"``, ``"prune"``, ``"noise"``
    (strength: pruned fraction, noise variance σ²; the noise is drawn from ``seed``).
    """
    grads = client_gradients(model, x, y)
    defended = {("none", 0.0): grads}
    defended |= {("prune", rate): prune_gradients(grads, rate) for rate in prune_rates}
    defended |= {("noise", var): add_gaussian_noise(grads, math.sqrt(var), make_generator(seed, x.device))
                 for var in noise_variances}
    out = {}
    for key, observed in defended.items():
        run = dlg(model, observed, x.shape, model.fc.out_features, iterations=iterations, seed=seed, progress=progress)
        out[key] = (float(psnr(run.images, x.cpu()).mean()), run.images)
    return out


def gradient_scale(grads: Sequence[torch.Tensor]) -> dict[str, float]:
    """Root-mean-square and median absolute value of all gradient entries, and the largest entry's size.

    A Gaussian defense of standard deviation σ drowns entries smaller than σ: compare σ with these.
    """
    flat = torch.cat([g.detach().flatten().abs() for g in grads])
    return {"rms": float(flat.pow(2).mean().sqrt()), "median_abs": float(flat.median()), "max_abs": float(flat.max())}
