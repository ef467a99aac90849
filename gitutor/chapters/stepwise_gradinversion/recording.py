"""Chapter 04's Table 1 reconstructions as a file a recorded run leaves beside its results record.

A recording of chapter 04 (``make record``, ``book/recorded/``) runs Table 1 for thousands of
iterations; the chapter page, built in minutes, shows that run's reconstructions and its quality along
the run from this file instead of running it again. The file is safetensors (no pickle): per batch i,
``truth/i`` (B, 3, H, W) and ``<method>/i`` (the final reconstruction matched to the truth, same shape)
for every Table 1 method, and ``curve/<method>/i`` (K, 3): iteration, PSNR (dB) and SSIM of each
snapshot taken along the run (Ye et al., AAAI 2024, Table 1 and Fig. 6b, measured along the way).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from gitutor.chapters.stepwise_gradinversion.trials import score
from gitutor.files import atomic_path
from gitutor.controls import RECOGNISABLE_PSNR
from gitutor.metrics import psnr
from gitutor.chapters.stepwise_gradinversion.experiments import summarise
from gitutor.chapters.stepwise_gradinversion.trained_rows import PAPER_TABLE1


def save_reconstructions(
    path: str | Path,
    truths: Sequence[torch.Tensor],
    runs: Mapping[str, Sequence[Mapping]],
) -> Path:
    """Write each batch's truth, each method's final images and its snapshot curve to ``path``.

    Args:
        path: the ``.safetensors`` file to write (its folder must exist).
        truths: batch i's private images, (B, 3, H, W) in [0, 1], one per batch.
        runs: ``{method: [trial value of batch 0, 1, …]}`` (:func:`gitutor.chapters.stepwise_gradinversion.trials.trial`:
            ``"images"`` matched to the truth, ``"snapshots"`` as (iteration, images) pairs).

    Raises:
        ValueError: if ``truths`` is empty, a method has not one run per batch, or a name holds "/".
    """
    if not truths:
        raise ValueError("truths must hold at least one batch")
    tensors = {
        f"truth/{i}": x.detach().cpu().float().contiguous()
        for i, x in enumerate(truths)
    }
    for method, values in runs.items():
        if "/" in method or len(values) != len(truths):
            raise ValueError(
                f"runs[{method!r}] must have one run per batch ({len(truths)}) and no '/' "
                f"in its name, got {len(values)}"
            )
        for i, (value, truth) in enumerate(zip(values, truths)):
            tensors[f"{method}/{i}"] = (
                value["images"].detach().cpu().float().contiguous()
            )
            tensors[f"curve/{method}/{i}"] = snapshot_curve(value["snapshots"], truth)
    with atomic_path(
        path
    ) as temporary:  # a failed write leaves an earlier recording intact
        save_file(tensors, str(temporary))
    return Path(path)


def snapshot_curve(
    snapshots: Sequence[tuple[int, torch.Tensor]], truth: torch.Tensor
) -> torch.Tensor:
    """(K, 3) float64 tensor: iteration, PSNR (dB), SSIM of each snapshot (Hungarian-matched, batch mean)."""
    rows = [
        (float(t), *(score(images, truth)[k] for k in ("PSNR", "SSIM")))
        for t, images in snapshots
    ]
    return torch.tensor(rows, dtype=torch.float64).reshape(-1, 3)


def load_reconstructions(path: str | Path) -> dict:
    """``{"truth": [batch 0, …], "images": {method: [batch 0, …]}, "curves": {method: [(K, 3), …]}}``.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: naming ``path`` when it is not a safetensors file (e.g. truncated), holds no
            ``truth/0``, or lacks a batch of a method's images or curve.
    """
    if not Path(path).is_file():
        raise FileNotFoundError(f"no chapter 04 reconstructions at {path}")
    try:
        tensors = load_file(str(path))
    except Exception as error:  # noqa: BLE001 - safetensors raises its own SafetensorError
        raise ValueError(
            f"{path} is not a readable safetensors file (truncated?): {error}"
        ) from None
    if "truth/0" not in tensors:
        raise ValueError(f"{path} holds no chapter 04 reconstructions (no 'truth/0')")
    n = sum(key.startswith("truth/") for key in tensors)
    methods = dict.fromkeys(key.split("/")[0] for key in tensors if key.count("/") == 1)
    methods.pop("truth")
    missing = [
        key
        for m in methods
        for i in range(n)
        for key in (f"{m}/{i}", f"curve/{m}/{i}")
        if key not in tensors
    ] + [f"truth/{i}" for i in range(n) if f"truth/{i}" not in tensors]
    if missing:
        raise ValueError(
            f"{path} holds {n} batches but lacks {missing[:4]}{' …' if len(missing) > 4 else ''}"
        )
    return {
        "truth": [tensors[f"truth/{i}"] for i in range(n)],
        "images": {m: [tensors[f"{m}/{i}"] for i in range(n)] for m in methods},
        "curves": {m: [tensors[f"curve/{m}/{i}"] for i in range(n)] for m in methods},
    }


def recorded_table1(recording: Mapping) -> dict[str, dict]:
    """Table 1 from a :func:`load_reconstructions` recording: ``{method: {"PSNR", "SSIM", "LPIPS":
    Interval or None}}`` over its batches in the paper's row order: the noise baseline (every method's
    common start x_0, the first snapshot of Inverting Gradients; its images are not kept, so its LPIPS
    is None), then each method's final reconstruction, scored against the truth (LPIPS None without
    AlexNet's weights).
    """
    truths, images = recording["truth"], recording["images"]
    noise = [
        {"PSNR": float(curve[0, 1]), "SSIM": float(curve[0, 2]), "LPIPS": None}
        for curve in recording["curves"]["Inverting Gradients"]
    ]
    keys = ("PSNR", "SSIM", "LPIPS")
    table = {"Noise N(0, I)": summarise(noise, keys)}
    table |= {
        m: summarise([score(x, truth) for x, truth in zip(images[m], truths)], keys)
        for m in PAPER_TABLE1
        if m in images
    }
    return table


def recognisable_counts(
    recording: Mapping, threshold: float = RECOGNISABLE_PSNR
) -> dict[str, tuple[int, int]]:
    """How many photographs each method of a :func:`load_reconstructions` recording recovers to PSNR ≥
    ``threshold`` dB (the book's "recognisable", :mod:`gitutor.controls`), per photograph:
    ``{method: (recognisable, photographs)}`` in the recording's method order.

    Raises:
        ValueError: if the recording holds no method.
    """
    truths, images = recording["truth"], recording["images"]
    if not images:
        raise ValueError("the recording holds no method's reconstructions")
    counts = {}
    for method, batches in images.items():
        values = torch.cat([psnr(x, truth) for x, truth in zip(batches, truths)])
        counts[method] = (int((values >= threshold).sum()), len(values))
    return counts
