"""Learning To Invert (LTI): a learned inversion model g_θ from defended gradients to images.

Wu et al. (2022), "Learning To Invert: Simple Adaptive Attacks for Gradient Inversion in
Federated Learning", §3.2. The honest-but-curious server knows the model weights w and the
defense DM the clients apply, and holds an auxiliary image set D_aux. It makes its own training
pairs (defended, aggregated gradient → batch of images),

    grad_{S_B}^{DM} = (1/B) Σ_{i=1}^{B} DM[∇_w ℓ(f_w(x_i^aux), y_i^aux)]              (§3.2)

(the paper writes the sum; we average, as the clients' batch-mean loss does — a fixed factor B),
and fits an MLP g_θ: R^m → R^{B×d} by minimising the reconstruction error (Eq. 2), which for
B > 1 is permutation invariant (Eq. 3):

    ℓ^attack(g_θ(grad), S_B) = min_π Σ_i ℓ_single(g_θ(grad)_i, x_{π(i)})              (Eq. 3)

with ℓ_single the squared error and the minimum over permutations found by the Hungarian method.
A defense is *data augmentation* for g_θ: nothing in the attack changes when DM changes.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from functools import partial

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import nn
from torch.func import functional_call, grad, vmap
from tqdm.auto import tqdm

from gitutor.attacks.feature_hashing import FeatureHasher
from gitutor.federated import add_gaussian_noise, client_gradients, cross_entropy, prune_gradients, sign_compress
from gitutor.metrics import match_batch, mse, psnr, ssim
from gitutor.seeding import make_generator

#: A defense maps one client's gradient list to a list of the same shapes (None: no defense).
Defense = Callable[[list[torch.Tensor]], list[torch.Tensor]]


def paper_defenses(*, prune_rate: float = 0.99, sigma: float = 0.1, seed: int = 0,
                   device: str | torch.device = "cpu") -> dict[str, Defense | None]:
    """The four settings of Wu et al. §4.1: ``none``, ``sign`` (sign compression), ``prune``
    (gradient pruning with α = ``prune_rate``) and ``gauss`` (Gaussian perturbation σ = ``sigma``).

    The Gaussian defense draws from its own ``torch.Generator`` seeded with ``seed`` on ``device``,
    so the same calls in the same order give the same noise.
    """
    return {
        "none": None,
        "sign": sign_compress,
        "prune": partial(prune_gradients, rate=prune_rate),
        "gauss": partial(add_gaussian_noise, sigma=sigma, generator=make_generator(seed, device)),
    }


def apply_defense(defense: Defense | None, grads: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Apply ``defense`` to one client's gradient list and check that the result is a valid gradient.

    This is the check for a home-made defense (the chapter's exercise): it must return a list of
    finite tensors with the same count and shapes as its input.

    Raises:
        TypeError: if ``defense`` is not callable or does not return a list/tuple of tensors.
        ValueError: naming the first tensor whose shape changed or that is not finite.
    """
    grads = list(grads)
    if defense is None:
        return grads
    if not callable(defense):
        raise TypeError(f"defense must be a function grads -> grads (or None), got {type(defense).__name__}")
    defended = defense(grads)
    if not isinstance(defended, (list, tuple)) or not all(isinstance(g, torch.Tensor) for g in defended):
        raise TypeError("a defense must return a list of tensors, one per model parameter")
    if len(defended) != len(grads):
        raise ValueError(f"the defense returned {len(defended)} tensors for {len(grads)} parameters")
    for i, (before, after) in enumerate(zip(grads, defended)):
        if after.shape != before.shape:
            raise ValueError(f"the defense changed the shape of gradient tensor {i}: "
                             f"{tuple(before.shape)} -> {tuple(after.shape)}")
        if not torch.isfinite(after).all():
            raise ValueError(f"the defense returned NaN or inf in gradient tensor {i}")
    return list(defended)


def gradient_dimension(model: nn.Module) -> int:
    """m, the number of gradient coordinates of ``model`` (its trainable parameter count)."""
    return sum(p.numel() for p in model.parameters())


def per_example_gradients(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, *,
                          chunk: int = 256) -> Iterator[list[torch.Tensor]]:
    """Yield ∇_w ℓ(f_w(x_i), y_i) for every example i alone, as a gradient list (one client each).

    Without BatchNorm the gradients of a chunk of examples come from one vectorised call
    (``torch.func.vmap`` over ``torch.func.grad``); a model with BatchNorm couples the examples of
    a batch, so each example then goes through ``client_gradients`` on its own.
    """
    device = next(model.parameters()).device
    if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        for i in range(images.shape[0]):
            yield client_gradients(model, images[i:i + 1].to(device), labels[i:i + 1].to(device))
        return
    params = {name: p.detach() for name, p in model.named_parameters()}

    def loss(parameters, x, y):
        return cross_entropy(functional_call(model, parameters, (x[None],)), y[None])

    per_example_grad = vmap(grad(loss), in_dims=(None, 0, 0))
    for start in range(0, images.shape[0], chunk):
        grads = per_example_grad(params, images[start:start + chunk].to(device), labels[start:start + chunk].to(device))
        for i in range(len(next(iter(grads.values())))):
            yield [grads[name][i] for name in params]


def make_gradient_dataset(model: nn.Module, images: torch.Tensor, labels: torch.Tensor,
                          defense: Defense | None = None, batch_size: int = 1, *,
                          hasher: FeatureHasher | None = None, num_batches: int | None = None,
                          seed: int = 0, progress: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
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
        ValueError: on a count mismatch between images and labels, non-4-D images, a batch size
            outside [1, N], a hasher whose ``in_dim`` is not m, or an invalid defense output.
    """
    if images.dim() != 4:
        raise ValueError(f"images must be (N, C, H, W), got shape {tuple(images.shape)}")
    if labels.shape != (images.shape[0],):
        raise ValueError(f"labels must be ({images.shape[0]},) to match the images, got {tuple(labels.shape)}")
    m = gradient_dimension(model)
    if hasher is not None and hasher.in_dim != m:
        raise ValueError(f"the hasher expects {hasher.in_dim} coordinates but the model has {m} parameters")
    per_example = [gradient_features(apply_defense(defense, grads), hasher)
                   for grads in tqdm(per_example_gradients(model, images, labels), total=images.shape[0],
                                     desc="per-example gradients", disable=not progress)]
    return aggregate_batches(torch.stack(per_example), images.detach().cpu(), batch_size,
                             num_batches=num_batches, seed=seed)


def gradient_features(grads: Sequence[torch.Tensor], hasher: FeatureHasher | None = None) -> torch.Tensor:
    """The input vector of g_θ: the gradient list flattened to ``(m,)`` (or hashed to ``(k,)``), float32 on the CPU."""
    flat = torch.cat([g.reshape(-1) for g in grads])
    return (flat if hasher is None else hasher(flat)).float().cpu()


def observed_gradient(model: nn.Module, images: torch.Tensor, labels: torch.Tensor,
                      defense: Defense | None = None) -> list[torch.Tensor]:
    """What the server receives from B clients holding one image each (Wu et al. §3.1, threat model):
    (1/B) Σ_i DM[∇_w ℓ(f_w(x_i), y_i)], a gradient list aligned with ``model.parameters()``.

    Args:
        images: ``(B, C, H, W)``; labels: ``(B,)`` int64; defense: grads -> grads, or None.

    Raises:
        ValueError / TypeError: as :func:`apply_defense` and ``client_gradients``.
    """
    defended = [apply_defense(defense, g) for g in per_example_gradients(model, images, labels)]
    return [torch.stack(layer).mean(dim=0) for layer in zip(*defended)]


def aggregate_batches(features: torch.Tensor, images: torch.Tensor, batch_size: int, *,
                      num_batches: int | None = None, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
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
        ValueError: on a count mismatch or a batch size outside [1, N].
    """
    images = images[:, 0] if images.dim() == 5 else images
    n = features.shape[0]
    if images.shape[0] != n or images.dim() != 4:
        raise ValueError(f"need (N, k) features and (N, C, H, W) images with the same N, got "
                         f"{tuple(features.shape)} and {tuple(images.shape)}")
    if not isinstance(batch_size, int) or not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be an int in [1, {n}], got {batch_size!r}")
    if batch_size == 1:
        if num_batches not in (None, n):
            raise ValueError("with batch_size=1 every image is its own batch; leave num_batches=None")
        return features, images[:, None]
    num_batches = n // batch_size if num_batches is None else num_batches
    generator = make_generator(seed)
    rounds = math.ceil(num_batches / (n // batch_size))
    groups = torch.cat([torch.randperm(n, generator=generator)[: n - n % batch_size].view(-1, batch_size)
                        for _ in range(rounds)])[:num_batches]
    return features[groups].mean(dim=1), images[groups]


class InversionMLP(nn.Module):
    """g_θ of Wu et al. §4.1: Linear(m, h) – ReLU – Linear(h, h) – ReLU – Linear(h, B·d) – Sigmoid.

    Args:
        in_dim: m (or the hashed k), the length of one aggregated gradient vector.
        image_shape: ``(C, H, W)`` of one image; d = C·H·W.
        batch_size: B, the number of images reconstructed from one gradient.
        hidden: h (the paper: 3 000 for B = 1, 10 000 for B = 4).
        seed: seed of the initial weights (PyTorch's default Linear initialisation, drawn under
            ``torch.random.fork_rng`` so the global generator is left untouched).

    ``forward`` maps ``(N, in_dim)`` to ``(N, B, C, H, W)`` in (0, 1).

    Raises:
        ValueError: for non-positive sizes or a bad ``image_shape``; in ``forward``, for an input
            that is not ``(N, in_dim)``.
    """

    def __init__(self, in_dim: int, image_shape: Sequence[int], batch_size: int = 1, hidden: int = 3000,
                 seed: int = 0):
        super().__init__()
        image_shape = tuple(image_shape)
        if len(image_shape) != 3 or min(image_shape) < 1:
            raise ValueError(f"image_shape must be (C, H, W) with positive sides, got {image_shape!r}")
        if min(in_dim, batch_size, hidden) < 1:
            raise ValueError("in_dim, batch_size and hidden must be positive")
        self.in_dim, self.image_shape, self.batch_size = in_dim, image_shape, batch_size
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.net = nn.Sequential(
                nn.Linear(in_dim, hidden), nn.ReLU(),
                nn.Linear(hidden, hidden), nn.ReLU(),
                nn.Linear(hidden, batch_size * math.prod(image_shape)), nn.Sigmoid(),
            )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if features.dim() != 2 or features.shape[1] != self.in_dim:
            raise ValueError(f"InversionMLP expects (N, {self.in_dim}) gradient features, got {tuple(features.shape)}")
        return self.net(features).view(-1, self.batch_size, *self.image_shape)


def _check_batches(reconstructed: torch.Tensor, images: torch.Tensor) -> None:
    if reconstructed.dim() != 5 or reconstructed.shape != images.shape:
        raise ValueError(f"reconstructed and images must both be (N, B, C, H, W) of the same shape, "
                         f"got {tuple(reconstructed.shape)} and {tuple(images.shape)}")


def hungarian_assignment(cost: torch.Tensor) -> torch.Tensor:
    """For each of N cost matrices ``(N, B, B)`` (output i vs image j), the permutation π with
    minimal Σ_i cost[i, π(i)] (Eq. 3), found with ``scipy.optimize.linear_sum_assignment``.

    Returns:
        ``(N, B)`` int64, row n holding π for sample n.
    """
    matrices = cost.detach().cpu().numpy()
    return torch.as_tensor(np.stack([linear_sum_assignment(c)[1] for c in matrices]), dtype=torch.int64)


def permutation_invariant_mse(reconstructed: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    """ℓ^attack of Eq. 3 with ℓ_single = pixel MSE: min over π of the mean squared error between
    output i and image π(i), averaged over outputs and samples. For B = 1 it is the plain MSE.

    Args:
        reconstructed, images: ``(N, B, C, H, W)``.

    Returns:
        Scalar tensor (differentiable w.r.t. ``reconstructed``; the matching itself is not).

    Raises:
        ValueError: if the shapes differ or are not 5-D.
    """
    _check_batches(reconstructed, images)
    cost = (reconstructed[:, :, None] - images[:, None]).pow(2).flatten(3).mean(-1)  # (N, B, B)
    if reconstructed.shape[1] == 1:
        return cost.mean()
    permutation = hungarian_assignment(cost).to(cost.device)
    return cost.gather(2, permutation[..., None]).mean()


def train_inversion_model(inversion_model: InversionMLP, features: torch.Tensor, images: torch.Tensor, *,
                          epochs: int, lr: float = 1e-4, batch_size: int = 256, val_fraction: float = 0.1,
                          lr_drop_at: float = 0.75, seed: int = 0, device: str | torch.device = "cpu",
                          progress: bool = True) -> dict[str, list[float]]:
    """Fit g_θ on auxiliary pairs by minimising Eq. 2 with the loss of Eq. 3 (Wu et al. §4.1).

    Adam with learning rate ``lr``, multiplied by 0.1 after ``lr_drop_at`` of the epochs (the paper:
    1e-4 → 1e-5 after 150 of 200 epochs, batch 256). A random ``val_fraction`` of the pairs is held
    out; its loss is measured after every epoch. The model is trained in place and left in eval mode.

    Args:
        inversion_model: an :class:`InversionMLP` whose ``in_dim`` and output shape fit the data.
        features: ``(N, in_dim)`` aggregated gradients, from :func:`make_gradient_dataset`.
        images: ``(N, B, C, H, W)`` the batches behind them.
        epochs: number of passes over the training part (≥ 1).
        seed: seed of the train/validation split and of the mini-batch order.

    Returns:
        ``{"train_loss": [...], "val_loss": [...], "lr": [...]}``, one float per epoch
        (``val_loss`` is empty when ``val_fraction`` is 0).

    Raises:
        ValueError: on mismatched counts or shapes, ``epochs < 1``, ``val_fraction`` outside
            [0, 1), or a split that leaves no training pair.
    """
    if features.dim() != 2 or features.shape[0] != images.shape[0]:
        raise ValueError(f"features must be (N, in_dim) with N = {images.shape[0]} images, got {tuple(features.shape)}")
    expected = (inversion_model.batch_size, *inversion_model.image_shape)
    if images.dim() != 5 or tuple(images.shape[1:]) != expected:
        raise ValueError(f"images must be (N, {', '.join(map(str, expected))}) for this inversion model, "
                         f"got {tuple(images.shape)}")
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be a positive int, got {epochs!r}")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction!r}")
    generator = make_generator(seed)
    order = torch.randperm(features.shape[0], generator=generator)
    n_val = int(round(val_fraction * features.shape[0]))
    if n_val >= features.shape[0]:
        raise ValueError("the validation split leaves no training pair; use more data or a smaller val_fraction")
    val_idx, train_idx = order[:n_val], order[n_val:]
    inversion_model.to(device)
    optimizer = torch.optim.Adam(inversion_model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[int(lr_drop_at * epochs)], gamma=0.1)
    history: dict[str, list[float]] = {"train_loss": [], "val_loss": [], "lr": []}
    bar = tqdm(range(epochs), desc="training g_θ", disable=not progress)
    for _ in bar:
        inversion_model.train()
        total = 0.0
        for chunk in train_idx[torch.randperm(len(train_idx), generator=generator)].split(batch_size):
            x, target = features[chunk].to(device), images[chunk].to(device)
            loss = permutation_invariant_mse(inversion_model(x), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(chunk)
        history["lr"].append(optimizer.param_groups[0]["lr"])
        scheduler.step()
        history["train_loss"].append(total / len(train_idx))
        if n_val:
            reconstructed = reconstruct(inversion_model, features[val_idx], device=device)
            history["val_loss"].append(permutation_invariant_mse(reconstructed, images[val_idx]).item())
        bar.set_postfix(train=history["train_loss"][-1], val=history["val_loss"][-1] if n_val else None)
    inversion_model.eval()
    return history


@torch.no_grad()
def reconstruct(inversion_model: InversionMLP, features: torch.Tensor, *, chunk: int = 1024,
                device: str | torch.device = "cpu") -> torch.Tensor:
    """The LTI attack itself: one forward pass g_θ(grad) per observed aggregated gradient.

    Args:
        features: ``(N, in_dim)`` observed (defended, aggregated, optionally hashed) gradients,
            made exactly like the training features (e.g. :func:`make_gradient_dataset`).

    Returns:
        ``(N, B, C, H, W)`` reconstructions in (0, 1), on the CPU.
    """
    inversion_model.eval()
    return torch.cat([inversion_model(part.to(device)).cpu() for part in features.split(chunk)])


def reconstruction_scores(reconstructed: torch.Tensor, images: torch.Tensor) -> dict[str, float]:
    """Mean MSE, PSNR (dB) and SSIM of reconstructed batches against the truth (Wu et al. §4.1,
    evaluation), each batch first put in its best order by Hungarian matching (for B > 1).

    Args:
        reconstructed, images: ``(N, B, C, H, W)`` in [0, 1].

    Returns:
        ``{"mse": ..., "psnr": ..., "ssim": ...}`` averaged over all N·B images.

    Raises:
        ValueError: if the shapes differ or are not 5-D.
    """
    _check_batches(reconstructed, images)
    matched = torch.cat([match_batch(r, x) for r, x in zip(reconstructed, images)])
    truth = images.flatten(0, 1)
    return {"mse": mse(matched, truth).mean().item(), "psnr": psnr(matched, truth).mean().item(),
            "ssim": ssim(matched, truth).mean().item()}
