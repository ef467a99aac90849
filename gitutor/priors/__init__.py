"""Diffusion priors for the user-level attack (Li et al. 2023, §2.3, Eq. 8–14).

- :func:`face_ddpm` — the small 32×32 grey face DDPM shipped with the package, trained by
  ``scripts/train_face_ddpm.py`` on the first :data:`PRIOR_TRAIN_FACES` LFW faces bundled with
  scikit-image (the rest are held out to build the quick profile's users). Loads offline and checks
  one sha256 over its ``config.json`` and its weights (:func:`prior_sha256`), so a changed
  architecture fails as loudly as changed weights.
- :func:`pretrained_face_ddpm` — a face DDPM from the Hugging Face hub (full profile; the paper used
  an FFHQ-256 DDPM), loaded with ``from_pretrained``; offline it fails fast with what to download.

Both return a :class:`DiffusionPrior`: the noise predictor ε_θ(x_t, t) (a diffusers
``UNet2DModel``), its ``DDPMScheduler`` (β_t, ᾱ_t of Eq. 8–10) and the image side it works at.
Images enter the UNet scaled to [−1, 1]. Sampling and noising: :mod:`gitutor.priors.sampling`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

WEIGHTS_DIR = Path(__file__).parent / "weights" / "face_ddpm_lfw32"
WEIGHTS_FILE = "diffusion_pytorch_model.safetensors"
CONFIG_FILE = "config.json"
#: :func:`prior_sha256` of WEIGHTS_DIR (config.json, then the weights) as written by
#: ``scripts/train_face_ddpm.py`` (seed 0).
FACE_DDPM_SHA256 = "b6805792d6036c5ff1b9587772343ff981717148071f12a3123ea3bbeca37d28"
#: LFW faces 0 … PRIOR_TRAIN_FACES − 1 train the prior; the remaining ones are never seen by it.
PRIOR_TRAIN_FACES = 80
#: Architecture of the shipped prior (diffusers ``UNet2DModel`` keyword arguments).
FACE_DDPM_CONFIG = dict(
    sample_size=32,
    in_channels=1,
    out_channels=1,
    layers_per_block=1,
    block_out_channels=(16, 32, 64),
    norm_num_groups=8,
    down_block_types=("DownBlock2D", "DownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "UpBlock2D", "UpBlock2D"),
)
#: Noise schedule of the shipped prior: Ho et al.'s linear β from 1e-4 to 0.02 over T = 1000 steps.
FACE_DDPM_SCHEDULER = dict(
    num_train_timesteps=1000, beta_schedule="linear", beta_start=1e-4, beta_end=0.02
)
#: Default hub model for the full profile (an unconditional CelebA-HQ 256×256 DDPM).
HUB_FACE_DDPM = "google/ddpm-celebahq-256"


class PriorChecksumError(RuntimeError):
    """The shipped prior's weights do not have the recorded sha256 (corrupted or retrained file)."""


@dataclass
class DiffusionPrior:
    """A pretrained DDPM used as image prior.

    Attributes:
        unet: ε_θ(x_t, t), called as ``unet(x_t, t).sample``; ``x_t`` is ``(N, C, side, side)`` in
            the [−1, 1] scale.
        scheduler: diffusers ``DDPMScheduler`` holding β_t and ``alphas_cumprod`` (ᾱ_t).
        image_size: the side the UNet was trained at; the attack resizes to the classifier's input.
        channels: image channels of the UNet (1 for the shipped grey prior).
    """

    unet: torch.nn.Module
    scheduler: object
    image_size: int
    channels: int

    @property
    def num_timesteps(self) -> int:
        """T, the number of diffusion steps (1000)."""
        return int(self.scheduler.config.num_train_timesteps)


def prior_sha256(weights_dir: str | Path) -> str:
    """Hex sha256 over the bytes of ``config.json`` followed by those of the safetensors weights.

    Raises:
        FileNotFoundError: if either file is missing.
    """
    digest = hashlib.sha256()
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        with open(Path(weights_dir) / name, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def face_ddpm(
    device: str | torch.device = "cpu",
    *,
    weights_dir: str | Path = WEIGHTS_DIR,
    expected_sha256: str = FACE_DDPM_SHA256,
) -> DiffusionPrior:
    """Load the shipped 32×32 grey LFW face DDPM offline, after checking its sha256.

    Args:
        device: where to put the UNet.
        weights_dir: folder with ``config.json`` and the safetensors weights (default: the copy
            inside the package).
        expected_sha256: the :func:`prior_sha256` the folder must have.

    Returns:
        :class:`DiffusionPrior` in eval mode with gradients of the UNet parameters switched off.

    Raises:
        FileNotFoundError: if the weights or config are missing (re-run ``scripts/train_face_ddpm.py``).
        PriorChecksumError: if the sha256 of config and weights differs from ``expected_sha256``.
    """
    from diffusers import DDPMScheduler, UNet2DModel

    weights_dir = Path(weights_dir)
    missing = [
        name
        for name in (CONFIG_FILE, WEIGHTS_FILE)
        if not (weights_dir / name).is_file()
    ]
    if missing:
        raise FileNotFoundError(
            f"face DDPM {' and '.join(missing)} not found in {weights_dir}; "
            "run `python scripts/train_face_ddpm.py` to recreate them"
        )
    actual = prior_sha256(weights_dir)
    if actual != expected_sha256:
        raise PriorChecksumError(
            f"sha256 of {weights_dir}/{{{CONFIG_FILE}, {WEIGHTS_FILE}}} is {actual}, expected "
            f"{expected_sha256}; a file is corrupted or changed: restore it from the repository "
            "or re-run scripts/train_face_ddpm.py and update FACE_DDPM_SHA256"
        )
    unet = UNet2DModel.from_pretrained(
        weights_dir, local_files_only=True, low_cpu_mem_usage=False
    )  # no accelerate
    unet = unet.to(device).eval().requires_grad_(False)
    return DiffusionPrior(
        unet=unet,
        scheduler=DDPMScheduler(**FACE_DDPM_SCHEDULER),
        image_size=FACE_DDPM_CONFIG["sample_size"],
        channels=FACE_DDPM_CONFIG["in_channels"],
    )


def hub_prior_cached(
    model_id: str = HUB_FACE_DDPM, cache_dir: str | Path | None = None
) -> bool:
    """Whether ``model_id``'s pipeline index is in the local Hugging Face cache (no network access)."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(
        try_to_load_from_cache(model_id, "model_index.json", cache_dir=cache_dir), str
    )


def hub_download_command(model_id: str = HUB_FACE_DDPM) -> str:
    """The shell command that fetches ``model_id`` into the Hugging Face cache (``hf``, huggingface_hub >= 0.34)."""
    return f"hf download {model_id}"


def pretrained_face_ddpm(
    model_id: str = HUB_FACE_DDPM,
    device: str | torch.device = "cpu",
    *,
    cache_dir: str | Path | None = None,
    local_files_only: bool = False,
) -> DiffusionPrior:
    """Load a hub face DDPM (full profile) with ``from_pretrained``.

    The paper used an FFHQ-256 DDPM (Baranchuk et al.); ``google/ddpm-celebahq-256`` is a face DDPM
    of the same size that diffusers' ``DDPMPipeline`` loads directly. The attack resizes its
    256×256 samples to the classifier's input (Li et al. 2023, App. C).

    Raises:
        RuntimeError: if the model is neither cached nor downloadable, naming the model and how to
            fetch it (:func:`hub_download_command`, on a machine with network, then set ``HF_HOME`` or
            ``cache_dir``).
    """
    from diffusers import DDPMPipeline

    try:
        pipeline = DDPMPipeline.from_pretrained(
            model_id, cache_dir=cache_dir, local_files_only=local_files_only
        )
    except (OSError, ValueError) as error:
        raise RuntimeError(
            f"could not load the diffusion prior {model_id!r} ({type(error).__name__}). It is "
            f"not in the local Hugging Face cache and the hub is unreachable: run "
            f"`{hub_download_command(model_id)}` with network access (≈450 MB), or use the "
            "quick profile's shipped prior gitutor.priors.face_ddpm()"
        ) from error
    unet, scheduler = pipeline.unet, pipeline.scheduler
    unet = unet.to(device).eval().requires_grad_(False)
    return DiffusionPrior(
        unet=unet,
        scheduler=scheduler,
        image_size=int(unet.config.sample_size),
        channels=int(unet.config.in_channels),
    )
