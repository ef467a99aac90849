"""User-level gradient inversion with a diffusion prior (Li et al., NeurIPS 2023 workshop, Algorithm 1).

The observed gradient ∇w comes from a batch of B photos of one user. Instead of B images, the
attacker recovers ONE representative image x̂ (Eq. 6–7): B random semantics-preserving augmentations
𝒜(x̂) = {𝒯(x̂)}_{i=1..B} must reproduce ∇w (cosine distance), and a DDPM ε_θ keeps x̂ on the image
manifold through its denoising loss (Eq. 13–14, constant w_t):

    x̂* = argmin_x̂ λ d(F(𝒜(x̂)), ∇w) + ||ε − ε_θ(√ᾱ_τ x̂ + √(1 − ᾱ_τ) ε, τ)||².

Algorithm 1, step i: g_p = ∇_x̂ of the prior term at τ_i; g_gm = ∇_x̂ of the matching term with
per-layer weights of a sliding window (§2.3.2, Fig. 5b); g_gm ← g_gm / max(1, ||g_gm|| / (ζ_i ||g_p||));
x̂ ← x̂ − η (g_p + g_gm), where we let Adam (Graikos et al.'s optimiser) scale the step: with the linear
β schedule ||g_p|| ∝ ᾱ_τ/(1 − ᾱ_τ) changes by orders of magnitude between τ = 999 and 500, which a
fixed plain-gradient step cannot follow. After S steps the DDPM denoises from t*.

λ (``matching_weight``) is ours: Eq. 14 adds the two terms unweighted, and Algorithm 1's clip only
*caps* g_gm at ζ ||g_p||. A cosine distance near 0 has a gradient orders of magnitude smaller than the
prior's (measured in ``history["grad_ratio"]``), so unweighted the prior alone moves x̂ and each user
gets an image that does not depend on the user's gradient (only on the seed). A large λ makes the clip bind at every step: g_gm then has norm ζ_i ||g_p|| —
matching and prior get a fixed share of the step, as Algorithm 1's ζ intends.

x̂ lives in the DDPM's scale [−1, 1] at the prior's resolution; the classifier sees
(clamp(x̂, −1, 1) + 1) / 2 resized to its input side.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from gitutor.attacks.inverting_gradients import inverting_gradients
from gitutor.attacks.loop import optimise_images
from gitutor.attacks.objectives import check_target_gradients, cosine_gradient_distance
from gitutor.attacks.result import AttackResult
from gitutor.attacks.user_level.augment import Augmentation
from gitutor.attacks.user_level.schedules import LayerWindow, TauSchedule, ZetaSchedule
from gitutor.checks import check_layout, input_channels
from gitutor.federated.client import client_gradients
from gitutor.priors.sampling import add_noise, ddpm_denoise
from gitutor.seeding import make_generator


def clip_matching_gradient(
    g_gm: torch.Tensor, g_prior: torch.Tensor, zeta: float
) -> torch.Tensor:
    """Algorithm 1's clipping: g_gm / max(1, ||g_gm|| / (ζ ||g_p||)), so ||result|| <= ζ ||g_p||.

    Raises:
        ValueError: naming ``zeta`` if it is not a finite positive number.
    """
    if not math.isfinite(zeta) or zeta <= 0:
        raise ValueError(f"zeta must be a finite number > 0, got {zeta}")
    ratio = g_gm.norm() / (zeta * g_prior.norm() + 1e-12)
    return g_gm / torch.clamp(ratio, min=1.0)


def matching_distance(
    model: nn.Module,
    target_grads: Sequence[torch.Tensor],
    labels: torch.Tensor,
    batch: torch.Tensor,
    layer_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Cosine gradient distance d(F(𝒜(x̂)), ∇w) (Li et al. Eq. 6, Algorithm 1 line 6).

    Args:
        batch: ``(B, C, H, W)`` augmented copies of x̂ in [0, 1], one per label.
        layer_weights: ``(L,)`` per-tensor weights of :class:`LayerWindow` (None: all 1); tensors
            with weight 0 are left out, the others scaled by √weight in both gradients so that
            each tensor's terms in the inner product and the norms carry its weight.

    Raises:
        ValueError / TypeError: as :func:`~gitutor.federated.client_gradients` (e.g. a channels-last
            ``batch``), or for gradient lists that do not match.
    """
    grads = client_gradients(model, batch, labels, create_graph=True)
    if layer_weights is None:
        return cosine_gradient_distance(grads, target_grads)
    indices = [i for i, w in enumerate(layer_weights.tolist()) if w > 0]
    masks = [layer_weights[i].sqrt().to(batch.device) for i in indices]
    return cosine_gradient_distance(grads, target_grads, indices=indices, masks=masks)


def to_classifier_input(x: torch.Tensor, image_size: int) -> torch.Tensor:
    """DDPM-scale images ``(N, C, H, W)`` in [−1, 1] → classifier images in [0, 1] of side ``image_size``.

    Raises:
        ValueError: if ``x`` is not ``(N, C, H, W)`` (:func:`gitutor.checks.check_layout`).
    """
    check_layout(x.shape, "x")
    images = (x.clamp(-1, 1) + 1) / 2
    if images.shape[-1] != image_size:
        images = F.interpolate(
            images,
            size=(image_size, image_size),
            mode="bilinear",
            antialias=True,
            align_corners=False,
        ).clamp(0, 1)
    return images


def _check_positive(**values) -> None:
    for name, value in values.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= 0
        ):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _check_common(model, target_grads, labels, batch_size, steps):
    target_grads = check_target_gradients(model, target_grads)
    for name, value in (("batch_size", batch_size), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if labels.dim() != 1 or labels.shape[0] != batch_size:
        raise ValueError(
            f"labels must be (batch_size,) = ({batch_size},), got shape {tuple(labels.shape)}"
        )
    return target_grads


def diffula_gradient(
    x: torch.Tensor,
    epsilon: torch.Tensor,
    tau: int,
    zeta: float,
    *,
    prior,
    match: Callable[[torch.Tensor], torch.Tensor],
    matching_weight: float = 1.0,
    prior_weight: float = 1.0,
) -> dict:
    """One step of Algorithm 1 (lines 4–8): the update direction g = w_p g_p + clip(λ ∇d, ζ ||g_p||).

    Args:
        x: x̂ ``(1, C, s, s)`` in the DDPM's [−1, 1] scale, with ``requires_grad``.
        epsilon: ε ~ N(0, I), shaped like ``x`` (line 4).
        tau: the diffusion time τ_i (line 3, App. C), an int in [0, T).
        zeta: ζ_i, the clip's ratio (line 7).
        prior: a :class:`gitutor.priors.DiffusionPrior`; g_p = ∇_x̂ ||ε − ε_θ(√ᾱ_τ x̂ + √(1 − ᾱ_τ) ε, τ)||²
            (Eq. 13–14, line 5).
        match: x̂ ↦ the cosine gradient distance d(F(𝒜(x̂)), ∇w) of B augmented copies (Eq. 6, line 6).
        matching_weight: λ on the distance before the clip (see the module docstring).
        prior_weight: w_p on g_p in the step (1: Algorithm 1; 0: the no-prior control, whose g_p still
            sets the clip's scale).

    Returns:
        ``grad`` (g, shaped like ``x``; the optimiser steps x̂ ← x̂ − η g, line 8), ``loss`` and
        ``gradient_distance`` (d, a 0-d tensor), ``prior_loss``, ``tau``, ``zeta``, ``grad_ratio``
        (λ||∇d|| / ||g_p|| before the clip) and ``clip_scale`` (factor applied to λ∇d, 1 = unclipped).

    Raises:
        ValueError: naming ``zeta`` if it is not a finite number > 0 (:func:`clip_matching_gradient`).
    """
    t = torch.tensor([tau], device=x.device)  # line 4: x_τ = √ᾱ_τ x̂ + √(1 − ᾱ_τ) ε
    prediction = prior.unet(add_noise(prior, x, epsilon, tau), t).sample
    prior_loss = (prediction - epsilon).pow(2).sum()
    (g_prior,) = torch.autograd.grad(prior_loss, x)  # line 5
    distance = match(x)
    (g_gm,) = torch.autograd.grad(matching_weight * distance, x)  # line 6
    ratio = (g_gm.norm() / (g_prior.norm() + 1e-12)).item()
    # line 7 clips λ ∇d to ζ ||g_p||; line 8 steps x̂ along g (Adam, in the loop)
    return {
        "grad": prior_weight * g_prior + clip_matching_gradient(g_gm, g_prior, zeta),
        "loss": distance.detach(),
        "gradient_distance": distance.detach(),
        "prior_loss": prior_loss.detach(),
        "tau": tau,
        "zeta": zeta,
        "grad_ratio": ratio,
        "clip_scale": min(1.0, zeta / max(ratio, 1e-30)),
    }


def user_level_inversion(
    model: nn.Module,
    target_grads: Sequence[torch.Tensor],
    labels: torch.Tensor,
    prior,
    *,
    batch_size: int,
    steps: int,
    augment: Augmentation | None = None,
    tau_schedule: TauSchedule | None = None,
    zeta_schedule: ZetaSchedule | None = None,
    layer_window: LayerWindow | None = None,
    lr: float = 0.05,
    t_star: int = 200,
    matching_weight: float = 1.0,
    prior_weight: float = 1.0,
    image_size: int | None = None,
    seed: int = 0,
    record_every: int = 50,
    progress: bool = False,
) -> AttackResult:
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
        matching_weight: λ multiplying the matching distance before the clip (1 = Eq. 14 as written;
            see the module docstring).
        prior_weight: weight of g_p in the step x̂ ← x̂ − η (prior_weight · g_p + clipped g_gm)
            (Algorithm 1, line 8: 1). 0 is the no-prior control: g_p is still computed and still
            sets the clip's scale ζ_i ||g_p|| (line 7), so the matching step is Algorithm 1's, but
            the prior term no longer moves x̂ (pair it with ``t_star = 0``: the final denoising is
            the prior too).
        image_size: classifier input side (default: the prior's side); x̂ is resized to it.
        seed: seeds x̂'s N(0, I) start, ε, τ noise, the augmentations and the denoising noise.
        record_every: snapshot interval; step S is always recorded (snapshots are classifier-side
            images in [0, 1], the last one is x̂ before denoising).
        progress: show a tqdm bar.

    Returns:
        :class:`AttackResult` with ``images`` the denoised representative image ``(1, C, s, s)`` in
        [0, 1]; ``history`` per step: ``gradient_distance``, ``prior_loss``, ``tau``, ``zeta``,
        ``grad_ratio`` (λ||∇d|| / ||g_p|| before the clip), ``clip_scale`` (factor applied to
        g_gm, 1 = unclipped); ``info``: ``seconds`` (wall time).

    Raises:
        ValueError: naming the argument: mismatched ``target_grads``, ``labels`` not of length
            ``batch_size``, ``steps``/``batch_size``/``record_every`` < 1, non-finite or non-positive
            ``lr``/``matching_weight``, ``t_star`` outside [0, T), a ``tau_schedule`` beyond T, or a
            ``prior`` whose image channels differ from the input channels of the model.
    """
    target_grads = _check_common(model, target_grads, labels, batch_size, steps)
    channels = input_channels(model)
    if channels is not None and channels != prior.channels:
        raise ValueError(
            f"prior makes {prior.channels}-channel images but the model's first convolution takes "
            f"{channels} channels; use a model and a prior with the same channels"
        )
    augment, tau_schedule = augment or Augmentation(), tau_schedule or TauSchedule()
    zeta_schedule, layer_window = (
        zeta_schedule or ZetaSchedule(),
        layer_window or LayerWindow(),
    )
    _check_positive(lr=lr, matching_weight=matching_weight, record_every=record_every)
    if (
        isinstance(prior_weight, bool)
        or not isinstance(prior_weight, (int, float))
        or not math.isfinite(prior_weight)
        or prior_weight < 0
    ):
        raise ValueError(
            f"prior_weight must be a finite number >= 0, got {prior_weight!r}"
        )
    if tau_schedule.t_max >= prior.num_timesteps:
        raise ValueError(
            f"tau_schedule.t_max must be < the prior's T = {prior.num_timesteps}, got {tau_schedule.t_max}"
        )
    if (
        isinstance(t_star, bool)
        or not isinstance(t_star, int)
        or not 0 <= t_star < prior.num_timesteps
    ):
        raise ValueError(
            f"t_star must be an int in [0, {prior.num_timesteps - 1}], got {t_star!r}"
        )
    device, side = target_grads[0].device, image_size or prior.image_size
    start = time.perf_counter()
    generator = make_generator(seed)
    taus, zetas = tau_schedule.sample(steps, generator), zeta_schedule.values(steps)
    x0 = torch.randn(
        (1, prior.channels, prior.image_size, prior.image_size), generator=generator
    ).to(device)

    def objective(x: torch.Tensor, i: int) -> dict:
        """Step i of Algorithm 1 (:func:`diffula_gradient`), handed to the loop as its gradient."""
        weights = layer_window.weights(len(target_grads), i / max(steps - 1, 1))

        def match(image: torch.Tensor) -> torch.Tensor:  # d(F(𝒜(x̂)), ∇w), Eq. 6
            batch = augment(to_classifier_input(image, side), batch_size, generator)
            return matching_distance(model, target_grads, labels, batch, weights)

        epsilon = torch.randn(x.shape, generator=generator).to(device)
        return diffula_gradient(
            x,
            epsilon,
            int(taus[i]),
            float(zetas[i]),
            prior=prior,
            match=match,
            matching_weight=matching_weight,
            prior_weight=prior_weight,
        )

    # Adam on g itself (no sign), no pixel box: x̂ lives in the prior's [−1, 1] scale (Graikos et al.)
    result = optimise_images(
        objective,
        x0,
        iterations=steps,
        lr=lr,
        signed=False,
        box=None,
        record_every=record_every,
        labels=labels,
        progress=progress,
        desc="DiffULA",
    )
    x = ddpm_denoise(prior, result.images.to(device), t_star, generator)
    return AttackResult(
        images=to_classifier_input(x, side).cpu(),
        labels=result.labels,
        history=result.history,
        snapshots=[
            (t, to_classifier_input(image, side)) for t, image in result.snapshots
        ],
        info=dict(result.info, seconds=time.perf_counter() - start),
    )


def user_level_inverting_gradients(
    model: nn.Module,
    target_grads: Sequence[torch.Tensor],
    labels: torch.Tensor,
    input_shape: Sequence[int],
    *,
    batch_size: int,
    steps: int,
    augment: Augmentation | None = None,
    tv_weight: float = 1e-2,
    lr: float = 0.1,
    seed: int = 0,
    record_every: int = 50,
    progress: bool = False,
) -> AttackResult:
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
        ValueError: as :func:`user_level_inversion`, or naming ``input_shape`` if it is not (C, H, W)
            with positive sizes and the model's input channels (e.g. channels-last (H, W, C)).
    """
    target_grads = _check_common(model, target_grads, labels, batch_size, steps)
    if len(input_shape) != 3 or min(input_shape) < 1:
        raise ValueError(f"input_shape must be (C, H, W), got {input_shape!r}")
    check_layout(input_shape, "input_shape", channels=input_channels(model), leading=0)
    augment = augment or Augmentation()
    generator = make_generator(seed)

    def user_level_distance(x: torch.Tensor) -> torch.Tensor:
        return matching_distance(
            model, target_grads, labels, augment(x, batch_size, generator)
        )

    start = time.perf_counter()
    result = inverting_gradients(
        model,
        target_grads,
        labels,
        (1, *input_shape),
        iterations=steps,
        tv_weight=tv_weight,
        lr=lr,
        seed=seed,
        record_every=record_every,
        progress=progress,
        matching_distance=user_level_distance,
    )
    result.info["seconds"] = time.perf_counter() - start
    return result
