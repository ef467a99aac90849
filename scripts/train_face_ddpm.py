"""Train the small face DDPM shipped as gitutor's quick-profile image prior (Li et al. 2023, §2.3).

Ho et al.'s DDPM objective (Li et al. Eq. 13 with constant w_t): for a face x_0, t ~ U{0..T−1}
and ε ~ N(0, I), minimise ||ε − ε_θ(√ᾱ_t x_0 + √(1 − ᾱ_t) ε, t)||². Data: the first
PRIOR_TRAIN_FACES grey LFW faces bundled with scikit-image, resized 25 → 32 px, random horizontal
flips, scaled to [−1, 1]. Model: diffusers ``UNet2DModel`` (gitutor.priors.FACE_DDPM_CONFIG, ~0.6 M
parameters, 2.5 MB as safetensors) with ``DDPMScheduler`` (linear β, T = 1000). The saved weights
are an exponential moving average (EMA) of the trained ones.

Everything random comes from the seed, so the same seed, torch version and thread count give the
same file. 900 steps of batch 16 on one CPU thread: 19.5 minutes measured on a 2-core machine shared
with other jobs (load average ~15); one thread is much faster than two on a busy machine:

    python scripts/train_face_ddpm.py            # writes gitutor/priors/weights/face_ddpm_lfw32/
    python scripts/train_face_ddpm.py --steps 50 --out /tmp/ddpm   # smoke test

It prints the sha256 over config.json and the weights (gitutor.priors.prior_sha256) to record in
gitutor/priors/__init__.py (FACE_DDPM_SHA256).
"""
from __future__ import annotations

import argparse
import copy
import tempfile
from pathlib import Path

import torch
from diffusers import DDPMScheduler, UNet2DModel
from tqdm.auto import tqdm

from gitutor import cli
from gitutor.data import lfw_faces
from gitutor.files import copy_files
from gitutor.priors import (
    FACE_DDPM_CONFIG,
    FACE_DDPM_SCHEDULER,
    PRIOR_TRAIN_FACES,
    WEIGHTS_DIR,
    prior_sha256,
)
from gitutor.seeding import make_generator, seed_everything


def training_faces() -> torch.Tensor:
    """The prior's training set: ``(PRIOR_TRAIN_FACES, 1, 32, 32)`` grey faces in [−1, 1]."""
    return lfw_faces(size=FACE_DDPM_CONFIG["sample_size"], channels=1)[:PRIOR_TRAIN_FACES] * 2 - 1


def train(steps: int, batch_size: int, lr: float, ema_decay: float, seed: int) -> UNet2DModel:
    """Train ε_θ for ``steps`` AdamW steps; return the EMA copy of the weights."""
    seed_everything(seed)  # diffusers initialises the UNet from torch's global generator
    unet = UNet2DModel(**FACE_DDPM_CONFIG)
    ema = copy.deepcopy(unet).requires_grad_(False)
    scheduler = DDPMScheduler(**FACE_DDPM_SCHEDULER)
    faces = training_faces()
    generator = make_generator(seed)
    optimizer = torch.optim.AdamW(unet.parameters(), lr=lr, weight_decay=0.0)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 100))
    progress = tqdm(range(steps), desc="DDPM training", mininterval=10)
    for _ in progress:
        index = torch.randint(len(faces), (batch_size,), generator=generator)
        x0 = faces[index]
        flip = torch.rand(batch_size, generator=generator) < 0.5
        x0 = torch.where(flip[:, None, None, None], x0.flip(-1), x0)
        noise = torch.randn(x0.shape, generator=generator)
        t = torch.randint(scheduler.config.num_train_timesteps, (batch_size,), generator=generator)
        loss = torch.nn.functional.mse_loss(unet(scheduler.add_noise(x0, noise, t), t).sample, noise)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        warmup.step()
        with torch.no_grad():
            for e, p in zip(ema.parameters(), unet.parameters()):
                e.lerp_(p, 1 - ema_decay)
        progress.set_postfix(loss=f"{loss.item():.4f}", refresh=False)
    return ema


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=cli.positive_int, default=900)
    parser.add_argument("--batch-size", type=cli.positive_int, default=16)
    parser.add_argument("--lr", type=cli.positive_float, default=2e-3)
    parser.add_argument("--ema-decay", type=cli.fraction, default=0.99)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=cli.positive_int, default=1,
                        help="torch CPU threads (1 is fastest on a busy machine and keeps the run reproducible)")
    parser.add_argument("--out", type=cli.output_folder(Path(__file__).resolve().parents[1]), default=WEIGHTS_DIR,
                        help="folder of the prior (not a source folder, nor one holding one)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    ema = train(args.steps, args.batch_size, args.lr, args.ema_decay, args.seed)
    with tempfile.TemporaryDirectory() as staged:  # the prior on disk is replaced only when saved whole
        ema.save_pretrained(staged, safe_serialization=True)
        copy_files({path: args.out / path.name for path in Path(staged).iterdir()})
    print(f"saved {args.out}\nsha256 (config.json + weights) {prior_sha256(args.out)}")


if __name__ == "__main__":
    main()
