"""The inversion model g_θ of Learning To Invert, its training and the attack itself.

Wu et al. (2022), §3.2. g_θ: R^m → R^{B×d} is an MLP fitted by minimising the reconstruction
error (Eq. 2), which for B > 1 is permutation invariant (Eq. 3):

    ℓ^attack(g_θ(grad), S_B) = min_π Σ_i ℓ_single(g_θ(grad)_i, x_{π(i)})              (Eq. 3)

with ℓ_single the squared error and the minimum over permutations found by the Hungarian method
(:func:`gitutor.metrics.hungarian_assignment`). The attack is one forward pass of g_θ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from tqdm.auto import tqdm

from gitutor.attacks.result import AttackResult
from gitutor.checks import check_images, check_layout
from gitutor.metrics import hungarian_assignment
from gitutor.seeding import make_generator


class InversionMLP(nn.Module):
    """g_θ of Wu et al. §4.1: Linear(m, h) – ReLU – Linear(h, h) – ReLU – Linear(h, B·d) – Sigmoid.

    Args:
        in_dim: m (or the hashed k), the length of one aggregated gradient vector.
        image_shape: ``(C, H, W)`` of one image; d = C·H·W.
        batch_size: B, the number of images reconstructed from one gradient.
        hidden: h (the paper: 3 000 for B = 1, 10 000 for B = 4).
        seed: seed of the initial weights (PyTorch's default Linear initialisation, drawn under
            ``torch.random.fork_rng`` so the global generator is left untouched).

    ``forward`` maps ``(N, in_dim)`` to ``(N, B, C, H, W)`` in (0, 1). It first standardises its
    input, (features − ``shift``) / ``scale``: identity until :meth:`standardise_from` sets them.

    Raises:
        ValueError: for non-positive sizes or a bad ``image_shape`` (not ``(C, H, W)``, e.g.
            channels-last ``(H, W, C)``); in ``forward``, for an input that is not ``(N, in_dim)``.
    """

    def __init__(
        self,
        in_dim: int,
        image_shape: Sequence[int],
        batch_size: int = 1,
        hidden: int = 3000,
        seed: int = 0,
    ):
        super().__init__()
        image_shape = tuple(image_shape)
        if len(image_shape) != 3 or min(image_shape) < 1:
            raise ValueError(
                f"image_shape must be (C, H, W) with positive sides, got {image_shape!r}"
            )
        check_layout(image_shape, "image_shape", leading=0)
        for name, value in (
            ("in_dim", in_dim),
            ("batch_size", batch_size),
            ("hidden", hidden),
        ):
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.in_dim, self.image_shape, self.batch_size = in_dim, image_shape, batch_size
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.net = nn.Sequential(
                nn.Linear(in_dim, hidden),
                nn.ReLU(),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, batch_size * math.prod(image_shape)),
                nn.Sigmoid(),
            )
        self.register_buffer("shift", torch.zeros(in_dim))
        self.register_buffer("scale", torch.ones(in_dim))

    def standardise_from(self, features: torch.Tensor) -> None:
        """Set ``shift``/``scale`` to the per-coordinate mean and standard deviation of ``features``
        ``(N, in_dim)`` (the training pairs; a constant coordinate keeps scale 1).

        An affine map the first linear layer could learn itself, but slowly: the undefended gradient's
        coordinates are ~10× smaller than sign compression's ±1 (summed by the hash), so with
        PyTorch's default initialisation and a short training the undefended g_θ is the under-trained
        one (chapter 06 measures it). Not in Wu et al.'s description.

        Raises:
            ValueError: if ``features`` is not a finite ``(N >= 2, in_dim)`` tensor.
        """
        if (
            features.dim() != 2
            or features.shape[1] != self.in_dim
            or len(features) < 2
            or not torch.isfinite(features).all()
        ):
            raise ValueError(
                f"features must be a finite (N >= 2, {self.in_dim}) tensor, got {tuple(features.shape)}"
            )
        std = features.float().std(0)
        self.shift.copy_(features.float().mean(0))
        self.scale.copy_(torch.where(std > 1e-8, std, torch.ones_like(std)))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if features.dim() != 2 or features.shape[1] != self.in_dim:
            raise ValueError(
                f"InversionMLP expects (N, {self.in_dim}) gradient features, got {tuple(features.shape)}"
            )
        return self.net((features - self.shift) / self.scale).view(
            -1, self.batch_size, *self.image_shape
        )


def _check_batches(reconstructed: torch.Tensor, images: torch.Tensor) -> None:
    if reconstructed.dim() != 5 or reconstructed.shape != images.shape:
        raise ValueError(
            f"reconstructed and images must both be (N, B, C, H, W) of the same shape, "
            f"got {tuple(reconstructed.shape)} and {tuple(images.shape)}"
        )
    check_layout(images.shape, "images", leading=2)


def permutation_invariant_mse(
    reconstructed: torch.Tensor, images: torch.Tensor
) -> torch.Tensor:
    """ℓ^attack of Eq. 3 with ℓ_single = pixel MSE: min over π of the mean squared error between
    output i and image π(i), averaged over outputs and samples. For B = 1 it is the plain MSE.

    Args:
        reconstructed, images: ``(N, B, C, H, W)``.

    Returns:
        Scalar tensor (differentiable w.r.t. ``reconstructed``; the matching itself is not).

    Raises:
        ValueError: if the shapes differ or are not ``(N, B, C, H, W)`` (e.g. channels-last).
    """
    _check_batches(reconstructed, images)
    cost = (
        (reconstructed[:, :, None] - images[:, None]).pow(2).flatten(3).mean(-1)
    )  # (N, B, B)
    if reconstructed.shape[1] == 1:
        return cost.mean()
    permutation = hungarian_assignment(cost).to(cost.device)
    return cost.gather(2, permutation[..., None]).mean()


def train_epoch(
    inversion_model: InversionMLP,
    optimizer: torch.optim.Optimizer,
    features: torch.Tensor,
    images: torch.Tensor,
    train_idx: torch.Tensor,
    batch_size: int,
    generator: torch.Generator,
    device: str | torch.device = "cpu",
) -> float:
    """One pass of Eq. 2 over the training pairs ``train_idx`` in a random order: mini-batches of
    ``batch_size`` gradients ``features`` ``(N, in_dim)`` → batches ``images`` ``(N, B, C, H, W)``,
    the loss of Eq. 3, one optimiser step each. Returns the mean training loss of the pass."""
    inversion_model.train()
    total = 0.0
    shuffled = train_idx[torch.randperm(len(train_idx), generator=generator)]
    for chunk in shuffled.split(batch_size):
        x, target = features[chunk].to(device), images[chunk].to(device)
        loss = permutation_invariant_mse(inversion_model(x), target)  # Eq. 3
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(chunk)
    return total / len(train_idx)


def epochs_without_gain(val_loss: Sequence[float], min_delta: float) -> int:
    """How many of the last epochs have passed since the validation loss last fell below
    ``(1 − min_delta)`` × the lowest loss before it (0 right after such a fall; the first epoch
    counts as one). The stopping rule of :func:`train_inversion_model`.

    Raises:
        ValueError: for ``min_delta`` outside [0, 1).
    """
    if not 0.0 <= min_delta < 1.0:
        raise ValueError(f"min_delta must be in [0, 1), got {min_delta!r}")
    best, since = math.inf, 0
    for loss in val_loss:
        if loss < (1 - min_delta) * best:
            best, since = loss, 0
        else:
            since += 1
    return since


def train_inversion_model(
    inversion_model: InversionMLP,
    features: torch.Tensor,
    images: torch.Tensor,
    *,
    epochs: int,
    lr: float = 1e-4,
    batch_size: int = 256,
    val_fraction: float = 0.1,
    lr_drop_at: float = 0.75,
    seed: int = 0,
    device: str | torch.device = "cpu",
    progress: bool = True,
    standardise: bool = False,
    patience: int | None = None,
    min_delta: float = 0.01,
) -> dict:
    """Fit g_θ on auxiliary pairs by minimising Eq. 2 with the loss of Eq. 3 (Wu et al. §4.1).

    Adam with learning rate ``lr``. A random ``val_fraction`` of the pairs is held out; its loss is
    measured after every epoch (:func:`train_epoch` is one epoch). Two schedules:

    - ``patience=None`` (Wu et al.): ``epochs`` epochs, the learning rate ×0.1 after ``lr_drop_at``
      of them (the paper: 1e-4 → 1e-5 after 150 of 200 epochs, batch 256).
    - ``patience=P`` (a stopping rule on the validation split): once the validation loss has not
      fallen by ``min_delta`` of its lowest value for P epochs (:func:`epochs_without_gain`), the
      learning rate drops ×0.1; once it has not for P epochs at the lower rate (its lowest value
      counted from the drop), training stops and g_θ keeps the weights of its lowest validation
      loss. ``epochs`` is then a cap: ``flattened`` says whether
      the rule stopped it before the cap.

    The model is trained in place and left in eval mode.

    Args:
        inversion_model: an :class:`InversionMLP` whose ``in_dim`` and output shape fit the data.
        features: ``(N, in_dim)`` aggregated gradients, from :func:`make_gradient_dataset`.
        images: ``(N, B, C, H, W)`` the batches behind them, in [0, 1] (g_θ ends in a sigmoid).
        epochs: number of passes over the training part (≥ 1); the cap under ``patience``.
        seed: seed of the train/validation split and of the mini-batch order.
        standardise: first set g_θ's input standardisation from the training part of ``features``
            (:meth:`InversionMLP.standardise_from`); False (Wu et al.): raw features.
        patience, min_delta: the stopping rule (needs a validation split).

    Returns:
        ``{"train_loss": [...], "val_loss": [...], "lr": [...]}``, one float per epoch run
        (``val_loss`` is empty when ``val_fraction`` is 0), and ``"flattened"`` (bool; None without
        ``patience``).

    Raises:
        ValueError: on mismatched counts or shapes, ``epochs < 1``, ``val_fraction`` outside
            [0, 1), ``lr`` not finite and > 0, ``lr_drop_at`` outside (0, 1], ``batch_size < 1``,
            ``patience < 1`` or without a validation split, NaN/inf in the data, images outside
            [0, 1] (:func:`gitutor.checks.check_images`), or a split that leaves no training pair.
    """
    if features.dim() != 2 or features.shape[0] != images.shape[0]:
        raise ValueError(
            f"features must be (N, in_dim) with N = {images.shape[0]} images, got {tuple(features.shape)}"
        )
    expected = (inversion_model.batch_size, *inversion_model.image_shape)
    if images.dim() != 5 or tuple(images.shape[1:]) != expected:
        raise ValueError(
            f"images must be (N, {', '.join(map(str, expected))}) for this inversion model, "
            f"got {tuple(images.shape)}"
        )
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be a positive int, got {epochs!r}")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction!r}")
    if not 0.0 < lr < math.inf:
        raise ValueError(f"lr must be finite and > 0, got {lr!r}")
    if not 0.0 < lr_drop_at <= 1.0:
        raise ValueError(
            f"lr_drop_at must be a fraction of the epochs in (0, 1], got {lr_drop_at!r}"
        )
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if patience is not None and (not isinstance(patience, int) or patience < 1):
        raise ValueError(f"patience must be a positive int or None, got {patience!r}")
    if patience is not None and val_fraction == 0:
        raise ValueError("the stopping rule (patience) needs a validation split")
    epochs_without_gain([], min_delta)  # checks min_delta
    if not torch.isfinite(features).all():
        raise ValueError("features contain NaN or inf")
    check_images(images, "images", leading=2)
    generator = make_generator(seed)
    order = torch.randperm(features.shape[0], generator=generator)
    n_val = int(round(val_fraction * features.shape[0]))
    if n_val >= features.shape[0]:
        raise ValueError(
            "the validation split leaves no training pair; use more data or a smaller val_fraction"
        )
    val_idx, train_idx = order[:n_val], order[n_val:]
    if standardise:
        inversion_model.standardise_from(features[train_idx])
    inversion_model.to(device)
    optimizer = torch.optim.Adam(inversion_model.parameters(), lr=lr)
    drops = [] if patience else [int(lr_drop_at * epochs)]
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, drops, gamma=0.1)
    history: dict = {"train_loss": [], "val_loss": [], "lr": [], "flattened": None}
    best, best_state, dropped_at = math.inf, None, None
    bar = tqdm(range(epochs), desc="training g_θ", disable=not progress)
    for epoch in bar:
        history["lr"].append(optimizer.param_groups[0]["lr"])
        history["train_loss"].append(
            train_epoch(
                inversion_model,
                optimizer,
                features,
                images,
                train_idx,
                batch_size,
                generator,
                device,
            )
        )
        scheduler.step()
        if n_val:
            reconstructed = reconstruct(
                inversion_model, features[val_idx], device=device
            ).images
            history["val_loss"].append(
                permutation_invariant_mse(reconstructed, images[val_idx]).item()
            )
        bar.set_postfix(
            train=history["train_loss"][-1],
            val=history["val_loss"][-1] if n_val else None,
        )
        if patience is None:
            continue
        if history["val_loss"][-1] < best:
            best = history["val_loss"][-1]
            best_state = {
                k: v.detach().clone() for k, v in inversion_model.state_dict().items()
            }
        # epochs without gain, at the lower rate counted from the drop
        since = epochs_without_gain(history["val_loss"][dropped_at:], min_delta)
        if since >= patience and dropped_at is None:  # flat: lower the learning rate
            dropped_at = epoch + 1
            for group in optimizer.param_groups:
                group["lr"] *= 0.1
        elif since >= patience:  # flat again at the lower rate: stop
            history["flattened"] = True
            break
    if patience is not None:
        history["flattened"] = bool(history["flattened"])
        inversion_model.load_state_dict(best_state)
    inversion_model.eval()
    return history


@torch.no_grad()
def reconstruct(
    inversion_model: InversionMLP,
    features: torch.Tensor,
    *,
    chunk: int = 1024,
    device: str | torch.device = "cpu",
) -> AttackResult:
    """The LTI attack itself: one forward pass g_θ(grad) per observed aggregated gradient (Wu et al. §3.2).

    Args:
        inversion_model: a trained :class:`InversionMLP`.
        features: ``(N, in_dim)`` observed (defended, aggregated, optionally hashed) gradients,
            made exactly like the training features (e.g. :func:`make_gradient_dataset`).
        chunk: observations per forward pass.
        device: where g_θ runs.

    Returns:
        :class:`AttackResult` whose ``images`` are ``(N, B, C, H, W)`` reconstructions in (0, 1) on
        the CPU (one batch of B per observation), ``labels`` None (LTI reconstructs no labels) and
        ``info`` ``{"observations": N, "batch_size": B}``.

    Raises:
        TypeError: if ``inversion_model`` is not an :class:`InversionMLP`.
        ValueError: if ``features`` is not a finite ``(N, in_dim)`` tensor or ``chunk < 1``.
    """
    if not isinstance(inversion_model, InversionMLP):
        raise TypeError(
            f"inversion_model must be an InversionMLP, got {type(inversion_model).__name__}"
        )
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive int, got {chunk!r}")
    if not torch.isfinite(features).all():
        raise ValueError("features contain NaN or inf")
    inversion_model.eval()
    images = torch.cat(
        [inversion_model(part.to(device)).cpu() for part in features.split(chunk)]
    )
    return AttackResult(
        images=images,
        labels=None,
        info={
            "observations": int(images.shape[0]),
            "batch_size": inversion_model.batch_size,
        },
    )
