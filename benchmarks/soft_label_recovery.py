"""Acceptance measurements for the λ soft-label recovery and FCN inversion (Wang et al., ICLR 2024).

Untrained LeNet (bias-free last layer) and untrained ResNet18 on CIFAR-10-sized 32×32 photo crops,
N random labels each under label smoothing (ε ~ U(0, 0.5)), mixup (weight ~ U(0, 1), two distinct
classes) and one-hot; a label counts as recovered when its L1 error is ≤ 1e-3. Then analytic
inversion of bias-free FCN-4 (3072 → 4096 → 1024 → 256 → 10) from the recovered feature.

    python3 benchmarks/soft_label_recovery.py [--n 50] [--seed 123]

Timings: wall-clock and CPU seconds of the recovery alone (a loaded machine inflates the wall-clock).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from gitutor.attacks import invert_fcn
from gitutor.data import load
from gitutor.federated import gradient_case
from gitutor.labels import recover_soft_label
from gitutor.metrics import score_batch
from gitutor.models import FCN, LeNet, init_uniform_, resnet18
from gitutor.chapters.idlg_soft_labels.trials import label_l1, labelled_sample

NUM_CLASSES = 10
TOLERANCE = 1e-3


def label_recovery(model, images, n: int, generator: torch.Generator) -> dict[str, tuple[float, ...]]:
    """(accuracy %, mean L1, mean wall s, mean CPU s) per augmentation."""
    rows = {}
    for kind in ("smoothing", "mixup", "one-hot"):
        errors, seconds, cpu_seconds = [], [], []
        for index in range(n):
            x, y, exclude_top = labelled_sample(kind, images, index, NUM_CLASSES, generator)
            grads = gradient_case(model, x, y).update  # what the server observes
            start, cpu_start = time.perf_counter(), time.process_time()
            result = recover_soft_label(model.fc, grads[-1], exclude_top=exclude_top, seed=index)
            seconds.append(time.perf_counter() - start)
            cpu_seconds.append(time.process_time() - cpu_start)
            errors.append(label_l1(result.label, y))
        errors = np.array(errors)
        rows[kind] = (100 * float((errors <= TOLERANCE).mean()), float(errors.mean()), float(np.mean(seconds)),
                      float(np.mean(cpu_seconds)))
    return rows


def fcn_inversion(images: torch.Tensor, n: int, generator: torch.Generator) -> tuple[float, float]:
    torch.manual_seed(int(torch.randint(2**31, (1,), generator=generator)))
    model = FCN(NUM_CLASSES, image_shape=(3, 32, 32))
    psnrs, ssims = [], []
    for index in range(n):
        x, y, _ = labelled_sample("smoothing", images, index, NUM_CLASSES, generator)
        grads = gradient_case(model, x, y).update  # what the server observes
        result = recover_soft_label(model.fc, grads[-1])
        reconstruction = invert_fcn(model, grads, result.feature, result.label).clamp(0, 1)
        scores = score_batch(reconstruction, x, match=False)
        psnrs.append(scores["psnr"])
        ssims.append(scores["ssim"])
    return float(np.mean(psnrs)), float(np.min(psnrs)), float(np.mean(ssims))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="random labels per network and augmentation")
    parser.add_argument("--fcn-images", type=int, default=5, help="photos inverted through FCN-4")
    parser.add_argument("--seed", type=int, default=123)
    args = parser.parse_args()
    torch.set_num_threads(1)  # small CPU work; thread synchronisation costs more than it saves on shared cores
    generator = torch.Generator().manual_seed(args.seed)
    images, _ = load("photos", args.n + 1, size=32, seed=args.seed, pool="all")
    lenet = init_uniform_(LeNet(NUM_CLASSES, fc_bias=False), generator=generator)
    torch.manual_seed(args.seed)
    networks = {"untrained LeNet (bias-free fc)": lenet, "untrained ResNet18 (bias-free fc)":
                resnet18(NUM_CLASSES, fc_bias=False).eval()}
    print(f"{'network':34s} {'augmentation':12s} {'acc %':>6s} {'mean L1':>9s} {'wall s/rec':>10s} {'CPU s/rec':>9s}")
    for name, model in networks.items():
        for kind, (accuracy, error, seconds, cpu) in label_recovery(model, images, args.n, generator).items():
            print(f"{name:34s} {kind:12s} {accuracy:6.1f} {error:9.2e} {seconds:10.3f} {cpu:9.3f}")
    mean_psnr, min_psnr, mean_ssim = fcn_inversion(images, args.fcn_images, generator)
    print(f"FCN-4 analytic inversion, {args.fcn_images} photos 32x32: PSNR mean {mean_psnr:.2f} dB "
          f"(min {min_psnr:.2f}), SSIM mean {mean_ssim:.4f}")


if __name__ == "__main__":
    main()
