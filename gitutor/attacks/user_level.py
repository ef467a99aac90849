"""User-level gradient inversion with a diffusion prior (Li et al., NeurIPS 2023 workshop, Algorithm 1).

The observed gradient ∇w comes from a batch of B photos of one user. Instead of B images, the
attacker recovers ONE representative image x̂ (Eq. 6–7): B random semantics-preserving augmentations
𝒜(x̂) = {𝒯(x̂)}_{i=1..B} must reproduce ∇w (cosine distance), and a DDPM ε_θ keeps x̂ on the image
manifold through its denoising loss (Eq. 13–14, constant w_t):

    x̂* = argmin_x̂ d(F(𝒜(x̂)), ∇w) + ||ε − ε_θ(√ᾱ_τ x̂ + √(1 − ᾱ_τ) ε, τ)||².

Algorithm 1, step i: g_p = ∇_x̂ of the prior term at τ_i; g_gm = ∇_x̂ of the matching term with
per-layer weights of a sliding window (§2.3.2, Fig. 5b); g_gm ← g_gm / max(1, ||g_gm|| / (ζ_i ||g_p||));
x̂ ← x̂ − η (g_p + g_gm), where we let Adam (Graikos et al.'s optimiser) scale the step: with the linear
β schedule ||g_p|| ∝ ᾱ_τ/(1 − ᾱ_τ) changes by orders of magnitude between τ = 999 and 500, which a
fixed plain-gradient step cannot follow. τ_i anneals from T toward 500 (App. C, Fig. 5a), ζ_i from 1.5 to 1.0. After S
steps the DDPM denoises from t* = 200 to 0. The search space is one image whatever B is.

x̂ lives in the DDPM's scale [−1, 1] at the prior's resolution; the classifier sees
(clamp(x̂, −1, 1) + 1) / 2 resized to its input side.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.transforms.v2.functional as TF
from torch import nn
from tqdm.auto import tqdm

from gitutor.attacks.inverting_gradients import inverting_gradients
from gitutor.attacks.objectives import check_target_gradients, cosine_gradient_distance
from gitutor.attacks.result import AttackResult
from gitutor.federated.client import client_gradients
from gitutor.seeding import make_generator


def _cosine_ramp(fraction: np.ndarray) -> np.ndarray:
    """(1 + cos π f) / 2: 1 at f = 0, 0 at f = 1, monotone in between."""
    return (1 + np.cos(np.pi * np.clip(fraction, 0.0, 1.0))) / 2


def _fractions(steps: int) -> np.ndarray:
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    return np.linspace(0.0, 1.0, steps) if steps > 1 else np.zeros(1)


@dataclass(frozen=True)
class TauSchedule:
    """Diffusion time τ_i per optimisation step (Li et al. App. C, Fig. 5a; after Graikos et al. 2022).

    Cosine-modulated linear annealing: with f = i / (S − 1),
    mean(f) = t_min + (t_max − t_min) · (1 − f) · (1 + cos π f) / 2, falling from ``t_max`` to
    ``t_min``; each τ_i adds integer uniform noise in [−noise, noise] and is clipped to
    [t_min, t_max].

    Raises:
        ValueError: unless 0 <= t_min <= t_max and noise >= 0.
    """

    t_max: int = 999
    t_min: int = 500
    noise: int = 50

    def __post_init__(self):
        if not 0 <= self.t_min <= self.t_max or self.noise < 0:
            raise ValueError(f"need 0 <= t_min <= t_max and noise >= 0, got {self}")

    def mean(self, steps: int) -> np.ndarray:
        """Noise-free schedule, ``(steps,)`` floats, non-increasing from t_max to t_min."""
        f = _fractions(steps)
        return self.t_min + (self.t_max - self.t_min) * (1 - f) * _cosine_ramp(f)

    def sample(self, steps: int, generator: torch.Generator) -> torch.Tensor:
        """``(steps,)`` int64 diffusion times with uniform noise drawn from ``generator``."""
        jitter = torch.randint(-self.noise, self.noise + 1, (steps,), generator=generator)
        tau = torch.as_tensor(np.rint(self.mean(steps)), dtype=torch.int64) + jitter
        return tau.clamp(self.t_min, self.t_max)


@dataclass(frozen=True)
class ZetaSchedule:
    """Clipping ratio ζ_i (Li et al. App. C): a cosine ramp from ``start`` (1.5) to ``end`` (1.0).

    ζ(f) = end + (start − end) · (1 + cos π f) / 2 with f = i / (S − 1).

    Raises:
        ValueError: if ``start`` or ``end`` is not positive.
    """

    start: float = 1.5
    end: float = 1.0

    def __post_init__(self):
        if self.start <= 0 or self.end <= 0:
            raise ValueError(f"ζ must stay positive, got start={self.start}, end={self.end}")

    def values(self, steps: int) -> np.ndarray:
        """``(steps,)`` floats from ``start`` to ``end``."""
        return self.end + (self.start - self.end) * _cosine_ramp(_fractions(steps))


@dataclass(frozen=True)
class LayerWindow:
    """Sliding asymmetric Hamming window over the gradient tensors (Li et al. §2.3.2, Fig. 5b).

    Tensor ℓ = 0 … L − 1 follows ``model.parameters()`` (shallow → deep). The window's edge c(f)
    slides from the deepest tensor (c = L − 1 at f = 0) to the first (c = 0 at f = ``open_at``):
    tensors deeper than c weigh 1; the ``width`` tensors just below c get the rising half of a
    Hamming window, 0.54 − 0.46 cos(π (ℓ − c + width) / width); shallower ones weigh 0. So matching
    starts on the deep layers (high-level semantics) and gradually adds the shallow ones.

    Raises:
        ValueError: if ``width`` is not positive or ``open_at`` is not in (0, 1].
    """

    width: float = 2.0
    open_at: float = 0.5

    def __post_init__(self):
        if self.width <= 0 or not 0 < self.open_at <= 1:
            raise ValueError(f"need width > 0 and 0 < open_at <= 1, got {self}")

    def weights(self, num_tensors: int, fraction: float) -> torch.Tensor:
        """``(num_tensors,)`` weights in [0, 1] at optimisation progress ``fraction`` ∈ [0, 1]."""
        if num_tensors < 1:
            raise ValueError("need at least one gradient tensor")
        edge = (num_tensors - 1) * (1 - min(1.0, max(0.0, fraction) / self.open_at))
        layer = torch.arange(num_tensors, dtype=torch.float64)
        rising = 0.54 - 0.46 * torch.cos(math.pi * (layer - edge + self.width) / self.width)
        weights = torch.where(layer >= edge, torch.ones_like(layer), rising)
        return torch.where(layer < edge - self.width, torch.zeros_like(layer), weights).float()


@dataclass(frozen=True)
class Augmentation:
    """Random semantics-preserving transformations 𝒯 (Li et al. App. C), each applied with prob. ``p``.

    Gaussian noise (std ``noise_std``), colour jitter (brightness and contrast factors in
    1 ± ``jitter``; saturation too for RGB), perspective (corners moved by up to
    ``distortion`` × side), Gaussian blur (3×3, σ ∈ [0.1, ``blur_sigma``]). All are differentiable
    in the image; the result is clamped to [0, 1].

    Raises:
        ValueError: for a probability outside [0, 1] or a negative strength.
    """

    p: float = 0.5
    noise_std: float = 0.05
    jitter: float = 0.2
    distortion: float = 0.1
    blur_sigma: float = 1.0

    def __post_init__(self):
        if not 0 <= self.p <= 1 or min(self.noise_std, self.jitter, self.distortion) < 0 or self.blur_sigma < 0.1:
            raise ValueError(f"need 0 <= p <= 1, non-negative strengths and blur_sigma >= 0.1, got {self}")

    def __call__(self, image: torch.Tensor, copies: int, generator: torch.Generator) -> torch.Tensor:
        """``copies`` augmented versions ``(copies, C, H, W)`` of ``image`` ``(1, C, H, W)`` in [0, 1].

        Raises:
            ValueError: if ``image`` is not a single ``(1, C, H, W)`` image or ``copies < 1``.
        """
        if image.dim() != 4 or image.shape[0] != 1:
            raise ValueError(f"image must be (1, C, H, W), got shape {tuple(image.shape)}")
        if copies < 1:
            raise ValueError(f"copies must be >= 1, got {copies}")
        return torch.cat([self._one(image, generator) for _ in range(copies)]).clamp(0, 1)

    def _uniform(self, generator: torch.Generator, low: float, high: float, n: int = 1) -> list[float]:
        return (low + (high - low) * torch.rand(n, generator=generator, dtype=torch.float64)).tolist()

    def _one(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        apply = (torch.rand(4, generator=generator) < self.p).tolist()
        side = x.shape[-1]
        if apply[0]:
            x = x + self.noise_std * torch.randn(x.shape, generator=generator, dtype=x.dtype).to(x.device)
        if apply[1]:
            brightness, contrast, saturation = self._uniform(generator, 1 - self.jitter, 1 + self.jitter, 3)
            x = x * brightness
            x = (x - x.mean(dim=(-3, -2, -1), keepdim=True)) * contrast + x.mean(dim=(-3, -2, -1), keepdim=True)
            if x.shape[1] == 3:
                x = TF.adjust_saturation(x.clamp(0, 1), saturation)
        if apply[2]:
            shift = self.distortion * (side - 1)
            corners = [[0, 0], [side - 1, 0], [side - 1, side - 1], [0, side - 1]]
            offsets = self._uniform(generator, -shift, shift, 8)
            moved = [[round(c[0] + offsets[2 * k]), round(c[1] + offsets[2 * k + 1])] for k, c in enumerate(corners)]
            x = TF.perspective(x, corners, moved)
        if apply[3]:
            sigma = self._uniform(generator, 0.1, self.blur_sigma)[0]
            x = TF.gaussian_blur(x, kernel_size=[3, 3], sigma=[sigma, sigma])
        return x


def clip_matching_gradient(g_gm: torch.Tensor, g_prior: torch.Tensor, zeta: float) -> torch.Tensor:
    """Algorithm 1's clipping: g_gm / max(1, ||g_gm|| / (ζ ||g_p||)), so ||result|| <= ζ ||g_p||.

    Raises:
        ValueError: if ``zeta`` is not positive.
    """
    if zeta <= 0:
        raise ValueError(f"zeta must be positive, got {zeta}")
    ratio = g_gm.norm() / (zeta * g_prior.norm() + 1e-12)
    return g_gm / torch.clamp(ratio, min=1.0)


def matching_distance(model: nn.Module, target_grads: Sequence[torch.Tensor], labels: torch.Tensor,
                      batch: torch.Tensor, layer_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Cosine gradient distance d(F(𝒜(x̂)), ∇w) (Li et al. Eq. 6, Algorithm 1 line 6).

    Args:
        batch: ``(B, C, H, W)`` augmented copies of x̂ in [0, 1], one per label.
        layer_weights: ``(L,)`` per-tensor weights of :class:`LayerWindow` (None: all 1); tensors
            with weight 0 are left out, the others scaled by √weight in both gradients so that
            each tensor's terms in the inner product and the norms carry its weight.
    """
    grads = client_gradients(model, batch, labels, create_graph=True)
    if layer_weights is None:
        return cosine_gradient_distance(grads, target_grads)
    indices = [i for i, w in enumerate(layer_weights.tolist()) if w > 0]
    masks = [layer_weights[i].sqrt().to(batch.device) for i in indices]
    return cosine_gradient_distance(grads, target_grads, indices=indices, masks=masks)


def to_classifier_input(x: torch.Tensor, image_size: int) -> torch.Tensor:
    """DDPM-scale images ([−1, 1]) → classifier images in [0, 1] of side ``image_size``."""
    images = (x.clamp(-1, 1) + 1) / 2
    if images.shape[-1] != image_size:
        images = F.interpolate(images, size=(image_size, image_size), mode="bilinear", antialias=True,
                               align_corners=False).clamp(0, 1)
    return images


def ddpm_denoise(prior, x: torch.Tensor, t_star: int, generator: torch.Generator) -> torch.Tensor:
    """Algorithm 1's last loop: x_{t*} from x̂, then DDPM ancestral steps t = t*, …, 1 (Ho et al. Eq. 11).

    Algorithm 1 writes x_{t*} ← x̂; we read this as diffusing x̂ to level t* first,
    x_{t*} = √ᾱ_{t*} x̂ + √(1 − ᾱ_{t*}) z (Eq. 9), so that the input matches the noise level the
    denoiser expects (feeding the clean x̂ as x_{t*} amplifies its contrast by 1/√ᾱ_{t*}). Then
    x_{t−1} = (x_t − (1 − α_t)/√(1 − ᾱ_t) ε_θ(x_t, t)) / √α_t + σ_t z with z ~ N(0, I) for t > 1 and
    z = 0 at t = 1 (diffusers ``DDPMScheduler.step``). Input and result are in the DDPM scale.

    Raises:
        ValueError: unless 0 <= t_star < T.
    """
    if not 0 <= t_star < prior.num_timesteps:
        raise ValueError(f"t_star must be in [0, {prior.num_timesteps - 1}], got {t_star}")
    scheduler = prior.scheduler
    a_bar = scheduler.alphas_cumprod[t_star].to(x.device)
    x = a_bar.sqrt() * x + (1 - a_bar).sqrt() * torch.randn(x.shape, generator=generator).to(x.device)
    with torch.no_grad():
        for t in range(t_star, 0, -1):
            epsilon = prior.unet(x, torch.tensor([t], device=x.device)).sample
            x = scheduler.step(epsilon, t, x, generator=generator).prev_sample
    return x


def sample_prior(prior, n: int, *, seed: int = 0, num_inference_steps: int = 100,
                 device: str | torch.device = "cpu") -> torch.Tensor:
    """``n`` unconditional samples ``(n, C, side, side)`` in [0, 1] from the DDPM prior.

    Ancestral DDPM sampling (Ho et al. 2020, Algorithm 2) on ``num_inference_steps`` evenly spaced
    timesteps of the T = 1000 (diffusers ``DDPMScheduler.set_timesteps``), to keep it fast on a CPU.
    """
    generator = make_generator(seed, device)
    scheduler = type(prior.scheduler).from_config(prior.scheduler.config)
    scheduler.set_timesteps(num_inference_steps)
    x = torch.randn((n, prior.channels, prior.image_size, prior.image_size), generator=generator, device=device)
    with torch.no_grad():
        for t in scheduler.timesteps:
            x = scheduler.step(prior.unet(x, t).sample, t, x, generator=generator).prev_sample
    return ((x.clamp(-1, 1) + 1) / 2).cpu()


def _check_common(model, target_grads, labels, batch_size, steps):
    target_grads = check_target_gradients(model, target_grads)
    if labels.dim() != 1 or labels.shape[0] != batch_size:
        raise ValueError(f"labels must be (batch_size,) = ({batch_size},), got shape {tuple(labels.shape)}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    return target_grads


def user_level_inversion(model: nn.Module, target_grads: Sequence[torch.Tensor], labels: torch.Tensor, prior, *,
                         batch_size: int, steps: int, augment: Augmentation | None = None,
                         tau_schedule: TauSchedule | None = None, zeta_schedule: ZetaSchedule | None = None,
                         layer_window: LayerWindow | None = None, lr: float = 0.05, t_star: int = 200,
                         image_size: int | None = None, seed: int = 0, record_every: int = 50,
                         progress: bool = False) -> AttackResult:
    """Li et al.'s DiffULA: one representative image from a user's batch gradient (Algorithm 1).

    Args:
        model: the shared classifier in the client's mode.
        target_grads: observed batch-mean gradient ∇w, aligned with ``model.parameters()``.
        labels: ``(batch_size,)`` int64 labels of the user's batch (known to the attacker).
        prior: a :class:`gitutor.priors.DiffusionPrior` (ε_θ and its ``DDPMScheduler``).
        batch_size: B, the number of augmented copies of x̂ matched against ∇w.
        steps: S optimisation steps (4 000 in the paper).
        augment: 𝒯 (default :class:`Augmentation()`, each transform with p = 0.5).
        tau_schedule, zeta_schedule, layer_window: the schedules of App. C (defaults: τ 999 → 500
            with ±50 noise, ζ 1.5 → 1.0, window fully open at half of the steps).
        lr: η, the Adam learning rate of the update with g_p + clipped g_gm (x̂ in the [−1, 1] scale).
        t_star: start of the final DDPM denoising (200); 0 skips it.
        image_size: classifier input side (default: the prior's side); x̂ is resized to it.
        seed: seeds x̂'s N(0, I) start, ε, τ noise, the augmentations and the denoising noise.
        record_every: snapshot interval (snapshots are classifier-side images in [0, 1]).
        progress: show a tqdm bar.

    Returns:
        :class:`AttackResult` with ``images`` the denoised representative image ``(1, C, s, s)`` in
        [0, 1]; ``history`` per step: ``gradient_distance``, ``prior_loss``, ``tau``, ``zeta``,
        ``clip_scale`` (factor applied to g_gm, 1 = unclipped); ``info``: ``before_denoising``
        (image after the S steps) and ``seconds`` (wall time).

    Raises:
        ValueError: for mismatched gradients, ``labels`` not of length ``batch_size``, ``steps < 1``
            or a bad ``t_star``.
    """
    target_grads = _check_common(model, target_grads, labels, batch_size, steps)
    augment, tau_schedule = augment or Augmentation(), tau_schedule or TauSchedule()
    zeta_schedule, layer_window = zeta_schedule or ZetaSchedule(), layer_window or LayerWindow()
    if not 0 <= t_star < prior.num_timesteps:
        raise ValueError(f"t_star must be in [0, {prior.num_timesteps - 1}], got {t_star}")
    device, side = target_grads[0].device, image_size or prior.image_size
    start = time.perf_counter()
    generator = make_generator(seed)
    taus, zetas = tau_schedule.sample(steps, generator), zeta_schedule.values(steps)
    alphas_cumprod = prior.scheduler.alphas_cumprod.to(device)
    x = torch.randn((1, prior.channels, prior.image_size, prior.image_size), generator=generator).to(device)
    x.requires_grad_(True)
    optimizer = torch.optim.Adam([x], lr=lr)
    history: dict[str, list[float]] = {k: [] for k in ("gradient_distance", "prior_loss", "tau", "zeta", "clip_scale")}
    snapshots = [(0, to_classifier_input(x.detach(), side).cpu())]
    weights_of = (lambda f: layer_window.weights(len(target_grads), f))
    for i in tqdm(range(steps), desc="DiffULA", disable=not progress):
        tau, a_bar = int(taus[i]), alphas_cumprod[int(taus[i])]
        epsilon = torch.randn(x.shape, generator=generator).to(device)
        x_tau = a_bar.sqrt() * x + (1 - a_bar).sqrt() * epsilon
        prior_loss = (prior.unet(x_tau, torch.tensor([tau], device=device)).sample - epsilon).pow(2).sum()
        g_prior, = torch.autograd.grad(prior_loss, x)
        batch = augment(to_classifier_input(x, side), batch_size, generator)
        distance = matching_distance(model, target_grads, labels, batch, weights_of(i / max(steps - 1, 1)))
        g_gm, = torch.autograd.grad(distance, x)
        clipped = clip_matching_gradient(g_gm, g_prior, float(zetas[i]))
        x.grad = g_prior + clipped
        optimizer.step()
        for key, value in (("gradient_distance", distance.item()), ("prior_loss", prior_loss.item()), ("tau", tau),
                           ("zeta", zetas[i]), ("clip_scale", (clipped.norm() / (g_gm.norm() + 1e-12)).item())):
            history[key].append(float(value))
        if (i + 1) % record_every == 0:
            snapshots.append((i + 1, to_classifier_input(x.detach(), side).cpu()))
    x = x.detach()
    before = to_classifier_input(x, side).cpu()
    x = ddpm_denoise(prior, x, t_star, generator) if t_star > 0 else x
    return AttackResult(images=to_classifier_input(x, side).cpu(), labels=labels.detach().cpu(), history=history,
                        snapshots=snapshots,
                        info={"before_denoising": before, "seconds": time.perf_counter() - start})


def user_level_inverting_gradients(model: nn.Module, target_grads: Sequence[torch.Tensor], labels: torch.Tensor,
                                   input_shape: Sequence[int], *, batch_size: int, steps: int,
                                   augment: Augmentation | None = None, tv_weight: float = 1e-2, lr: float = 0.1,
                                   seed: int = 0, record_every: int = 50, progress: bool = False) -> AttackResult:
    """The user-level baseline without a diffusion prior: one image x̂, Inverting Gradients' recipe.

    Same user-level objective as :func:`user_level_inversion` (B augmented copies of x̂, cosine
    distance over all layers; Li et al. Eq. 6) but with Geiping et al.'s TV prior instead of the DDPM
    and their optimiser: Adam on the sign of the gradient, learning rate ×0.1 at 3/8, 5/8, 7/8 of
    the steps, x̂ clamped to [0, 1].

    Args:
        input_shape: ``(C, H, W)`` of x̂; other arguments as in :func:`user_level_inversion`.

    Returns:
        :class:`AttackResult` with ``images`` ``(1, C, H, W)``, ``history["gradient_distance"]`` and
        ``history["loss"]``, snapshots and ``info["seconds"]``.

    Raises:
        ValueError: as :func:`user_level_inversion`, or for an ``input_shape`` that is not (C, H, W).
    """
    target_grads = _check_common(model, target_grads, labels, batch_size, steps)
    if len(input_shape) != 3 or min(input_shape) < 1:
        raise ValueError(f"input_shape must be (C, H, W), got {input_shape!r}")
    augment = augment or Augmentation()
    generator = make_generator(seed)

    def user_level_distance(x: torch.Tensor) -> torch.Tensor:
        return matching_distance(model, target_grads, labels, augment(x, batch_size, generator))

    start = time.perf_counter()
    result = inverting_gradients(model, target_grads, labels, (1, *input_shape), iterations=steps,
                                 tv_weight=tv_weight, lr=lr, seed=seed, record_every=record_every,
                                 progress=progress, matching_distance=user_level_distance)
    result.info["seconds"] = time.perf_counter() - start
    return result
