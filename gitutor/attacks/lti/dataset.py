"""Training (and attack) inputs of Learning To Invert: defended, aggregated gradients and their images.

Wu et al. (2022), §3.2. The honest-but-curious server knows the model weights w and the defense DM
the clients apply, and holds an auxiliary image set D_aux. It makes its own training pairs
(defended, aggregated gradient → batch of images),

    grad_{S_B}^{DM} = (1/B) Σ_{i=1}^{B} DM[∇_w ℓ(f_w(x_i^aux), y_i^aux)]              (§3.2)

(the paper writes the sum; we average, as the clients' batch-mean loss does — a fixed factor B).
A defense is *data augmentation* for g_θ: nothing in the attack changes when DM changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

from gitutor.attacks.feature_hashing import FeatureHasher
from gitutor.checks import check_images, check_layout, input_channels
from gitutor.federated.client import gradient_dimension, per_example_gradients
from gitutor.federated.defenses import Defense, apply_defense
from gitutor.seeding import make_generator


def make_gradient_dataset(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    defense: Defense | None = None,
    batch_size: int = 1,
    *,
    hasher: FeatureHasher | None = None,
    num_batches: int | None = None,
    seed: int = 0,
    progress: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Training (or attack) inputs for LTI: defended, batch-averaged gradients and their images (§3.2).

    Every image's gradient is computed alone (one client each), the defense is applied to it
    *per example*, then B of them are averaged (:func:`aggregate_batches`) — what the server sees
    when B clients each send a defended gradient (Wu et al. §3.1, threat model). The optional
    feature hash P is linear, so hashing each example and then averaging equals hashing the average.

    Args:
        model: the shared model f_w (its weights are not changed).
        images: ``(N, C, H, W)`` images in [0, 1].
        labels: ``(N,)`` int64 labels.
        defense: a function grads -> grads applied to each example's gradient, or None.
        batch_size: B, the number of examples behind one aggregated gradient.
        hasher: optional :class:`FeatureHasher` with ``in_dim`` = m; features then have its ``out_dim``.
        num_batches, seed: see :func:`aggregate_batches` (B > 1 only).
        progress: show a tqdm bar over the N per-example gradients.

    Returns:
        ``features`` ``(num_batches, m or k)`` float32 and ``batches`` ``(num_batches, B, C, H, W)``;
        for B = 1, row i belongs to image i.

    Raises:
        ValueError: on a count mismatch between images and labels, images that are not finite
            ``(N, C, H, W)`` in [0, 1] with the model's input channels (channels-last, 0–255 pixels;
            g_θ ends in a sigmoid, so it cannot fit other values), labels outside [0, classes), a batch size
            outside [1, N], a hasher whose ``in_dim`` is not m, or an invalid defense output.
    """
    if (
        not isinstance(images, torch.Tensor)
        or not images.is_floating_point()
        or images.dim() != 4
    ):
        raise ValueError(
            f"images must be a float (N, C, H, W) tensor, got {getattr(images, 'dtype', type(images))} "
            f"{tuple(getattr(images, 'shape', ()))}"
        )
    if labels.shape != (images.shape[0],):
        raise ValueError(
            f"labels must be ({images.shape[0]},) to match the images, got {tuple(labels.shape)}"
        )
    check_images(images, "images", channels=input_channels(model))
    m = gradient_dimension(model)
    if hasher is not None and hasher.in_dim != m:
        raise ValueError(
            f"the hasher expects {hasher.in_dim} coordinates but the model has {m} parameters"
        )
    per_example = [
        gradient_features(apply_defense(defense, grads), hasher)
        for grads in tqdm(
            per_example_gradients(model, images, labels),
            total=images.shape[0],
            desc="per-example gradients",
            disable=not progress,
        )
    ]
    return aggregate_batches(
        torch.stack(per_example),
        images.detach().cpu(),
        batch_size,
        num_batches=num_batches,
        seed=seed,
    )


def gradient_features(
    grads: Sequence[torch.Tensor], hasher: FeatureHasher | None = None
) -> torch.Tensor:
    """The input vector of g_θ: the gradient list flattened to ``(m,)`` (or hashed to ``(k,)``), float32 on the CPU."""
    flat = torch.cat([g.reshape(-1) for g in grads])
    return (flat if hasher is None else hasher(flat)).float().cpu()


def aggregate_batches(
    features: torch.Tensor,
    images: torch.Tensor,
    batch_size: int,
    *,
    num_batches: int | None = None,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Average per-example (defended) gradient features over random batches of B distinct examples.

    Args:
        features: ``(N, k)`` one defended gradient per example (B = 1 output of
            :func:`make_gradient_dataset`).
        images: ``(N, C, H, W)`` or ``(N, 1, C, H, W)`` the matching images.
        batch_size: B in [1, N].
        num_batches: how many aggregated gradients to form (default ⌊N / B⌋); they are cut from
            successive random permutations of the N examples, so one batch never repeats an example.
            For B = 1 it must be None or N, and the order is kept.
        seed: seed of the permutations.

    Returns:
        ``(num_batches, k)`` mean features and ``(num_batches, B, C, H, W)`` images.

    Raises:
        ValueError: on a count mismatch, images not ``(N, C, H, W)`` (e.g. channels-last;
            :func:`gitutor.checks.check_layout`), or a batch size outside [1, N].
    """
    images = images[:, 0] if images.dim() == 5 else images
    n = features.shape[0]
    if images.shape[0] != n or images.dim() != 4:
        raise ValueError(
            f"need (N, k) features and (N, C, H, W) images with the same N, got "
            f"{tuple(features.shape)} and {tuple(images.shape)}"
        )
    check_layout(images.shape, "images")
    if not torch.isfinite(features).all():
        raise ValueError("features contain NaN or inf")
    if type(batch_size) is not int or not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be an int in [1, {n}], got {batch_size!r}")
    if batch_size == 1:
        if num_batches not in (None, n):
            raise ValueError(
                "with batch_size=1 every image is its own batch; leave num_batches=None"
            )
        return features, images[:, None]
    num_batches = n // batch_size if num_batches is None else num_batches
    generator = make_generator(seed)
    rounds = math.ceil(num_batches / (n // batch_size))
    groups = torch.cat(
        [
            torch.randperm(n, generator=generator)[: n - n % batch_size].view(
                -1, batch_size
            )
            for _ in range(rounds)
        ]
    )[:num_batches]
    return features[groups].mean(dim=1), images[groups]
