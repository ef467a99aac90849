"""Sampling from and noising with a DDPM prior, through diffusers (Ho et al. 2020; Li et al. 2023, Eq. 9, Alg. 1).

- :func:`add_noise` — the forward process q(x_t | x_0) (Eq. 9): ``DDPMScheduler.add_noise``.
- :func:`ddpm_denoise` — Algorithm 1's last loop: noise x̂ to level t*, then ancestral steps
  ``DDPMScheduler.step`` from t* down to 0.
- :func:`sample_prior` — unconditional samples with diffusers' ``DDPMPipeline``.

Each call works on a fresh copy of the prior's scheduler (``from_config``), so setting the number
of inference steps for sampling never changes the T-step grid the attack relies on.
"""

from __future__ import annotations

import torch


def _check_int(name: str, value, low: int, high: int) -> int:
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or not low <= value <= high
    ):
        raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    return value


def fresh_scheduler(prior):
    """A new scheduler of the prior's class and config (β_t, ᾱ_t; T-step grid, no inference steps set)."""
    return type(prior.scheduler).from_config(prior.scheduler.config)


def add_noise(prior, x0: torch.Tensor, noise: torch.Tensor, t: int) -> torch.Tensor:
    """x_t = √ᾱ_t x_0 + √(1 − ᾱ_t) ε (Ho et al. Eq. 4; Li et al. Eq. 9), differentiable in ``x0``.

    Args:
        x0: ``(N, C, H, W)`` images in the DDPM scale [−1, 1]; noise: ε, same shape.
        t: diffusion time in [0, T − 1].

    Raises:
        ValueError: naming ``t`` out of range or ``noise`` of another shape.
    """
    _check_int("t", t, 0, prior.num_timesteps - 1)
    if noise.shape != x0.shape:
        raise ValueError(
            f"noise must have x0's shape {tuple(x0.shape)}, got {tuple(noise.shape)}"
        )
    timesteps = torch.full((x0.shape[0],), t, dtype=torch.int64, device=x0.device)
    return prior.scheduler.add_noise(x0, noise, timesteps)


def ddpm_denoise(
    prior, x: torch.Tensor, t_star: int, generator: torch.Generator
) -> torch.Tensor:
    """Algorithm 1's last loop: x_{t*} from x̂, then DDPM ancestral steps t = t*, …, 1 (Ho et al. Eq. 11).

    Algorithm 1 writes x_{t*} ← x̂; we read this as diffusing x̂ to level t* first (Eq. 9), so that
    the input matches the noise level the denoiser expects (feeding the clean x̂ as x_{t*} amplifies
    its contrast by 1/√ᾱ_{t*}). Then x_{t−1} = (x_t − (1 − α_t)/√(1 − ᾱ_t) ε_θ(x_t, t)) / √α_t + σ_t z
    (diffusers ``DDPMScheduler.step``; z = 0 at the last step). ``t_star = 0`` returns ``x``.

    Args:
        x: ``(N, C, H, W)`` in the DDPM scale; generator: draws z (on the CPU).

    Returns:
        ``(N, C, H, W)`` denoised images, DDPM scale, no gradient.

    Raises:
        ValueError: naming ``t_star`` unless 0 <= t_star < T.
    """
    _check_int("t_star", t_star, 0, prior.num_timesteps - 1)
    if t_star == 0:
        return x.detach()
    scheduler = fresh_scheduler(prior)
    noise = torch.randn(x.shape, generator=generator).to(x.device)
    x = add_noise(prior, x.detach(), noise, t_star)
    with torch.no_grad():
        for t in range(t_star, 0, -1):
            epsilon = prior.unet(x, torch.tensor([t], device=x.device)).sample
            x = scheduler.step(epsilon, t, x, generator=generator).prev_sample
    return x


def sample_prior(
    prior,
    n: int,
    *,
    seed: int = 0,
    num_inference_steps: int = 100,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> torch.Tensor:
    """``n`` unconditional samples ``(n, C, side, side)`` in [0, 1] from the DDPM prior.

    Ancestral DDPM sampling (Ho et al. 2020, Algorithm 2) with diffusers' ``DDPMPipeline`` on
    ``num_inference_steps`` evenly spaced timesteps of the T = 1000, to keep it fast on a CPU;
    ``progress`` shows the pipeline's tqdm bar over the timesteps.

    Raises:
        ValueError: naming ``n`` (< 1) or ``num_inference_steps`` (outside [1, T]).
    """
    from diffusers import DDPMPipeline

    from gitutor.seeding import make_generator

    _check_int("n", n, 1, 1 << 20)
    _check_int("num_inference_steps", num_inference_steps, 1, prior.num_timesteps)
    pipeline = DDPMPipeline(unet=prior.unet, scheduler=fresh_scheduler(prior)).to(
        device
    )
    pipeline.set_progress_bar_config(disable=not progress)
    images = pipeline(
        batch_size=n,
        generator=make_generator(seed, device),
        num_inference_steps=num_inference_steps,
        output_type="pt",
    ).images
    return images.cpu()
