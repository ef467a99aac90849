"""Seconds per attack iteration against one plain training step (notebook 04, Ye et al. 2024).

Every optimisation attack pays, per iteration, one forward pass, one backward pass with
``create_graph=True`` and one more backward pass through that graph (double backpropagation).
This script measures, for a ResNet34 and one batch, the wall time of

* one plain training step (forward + backward of the batch-mean cross-entropy), the unit;
* one iteration of Inverting Gradients (all 110 tensors, cosine + TV);
* one iteration of GradInversion (all tensors + TV + R_BN);
* one iteration of stepwise GradInversion in its first phase (tensors ≥ 100) and at the floor
  (tensors ≥ 25), with 30 % gradient dropout, TV and R_BN on;
* optionally (``--dlg``) one DLG L-BFGS step, which evaluates the gradient distance up to 20 times;

and prints a markdown table of seconds and the ratio to the training step. Timings depend on the
machine and its load; run it alone.

Usage::

    python3 benchmarks/attack_iteration_cost.py                  # ResNet34, 64 and 224 px, batch 4
    python3 benchmarks/attack_iteration_cost.py --sizes 64 --iterations 5 --device cuda --dlg
"""
from __future__ import annotations

import argparse
import time

import torch

from gitutor import make_generator, resolve_device
from gitutor.attacks import StepwiseSchedule, dlg, gradinversion, inverting_gradients, stepwise_inversion
from gitutor.federated import client_gradients
from gitutor.models import resnet34


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds_per_call(function, calls: int, device: torch.device, warm_up: bool = True) -> float:
    """Mean wall time of ``function()`` over ``calls`` calls, after one untimed warm-up call if asked."""
    if warm_up:
        function()
    _synchronise(device)
    start = time.perf_counter()
    for _ in range(calls):
        function()
    _synchronise(device)
    return (time.perf_counter() - start) / calls


def training_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    """One plain forward + backward (what the client does once per round)."""
    model.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()


def measure(size: int, batch_size: int, iterations: int, device: torch.device, with_dlg: bool) -> list[tuple]:
    """Rows ``(size, method, seconds, ratio to the training step)`` for one image size."""
    model = resnet34(num_classes=1000).to(device).eval()
    generator = make_generator(0, device)
    x = torch.rand(batch_size, 3, size, size, generator=generator, device=device)
    y = torch.randperm(1000, generator=generator, device=device)[:batch_size]
    grads = client_gradients(model, x, y)
    shape = tuple(x.shape)
    common = dict(iterations=iterations, record_every=iterations)
    attacks = {
        "Inverting Gradients": lambda: inverting_gradients(model, grads, y, shape, tv_weight=0.01, **common),
        "GradInversion": lambda: gradinversion(model, grads, y, shape, **common),
        "stepwise, tensors ≥ 100": lambda: stepwise_inversion(
            model, grads, y, shape, schedule=StepwiseSchedule.fixed(iterations, 100), **common),
        "stepwise, tensors ≥ 25": lambda: stepwise_inversion(
            model, grads, y, shape, schedule=StepwiseSchedule.fixed(iterations, 25), **common),
    }
    if with_dlg:
        attacks["DLG (one L-BFGS step)"] = lambda: dlg(model, grads, shape, 1000, labels=y, iterations=iterations,
                                                       record_every=iterations)
    unit = seconds_per_call(lambda: training_step(model, x, y), max(3, iterations), device)
    rows = [(size, "training step (forward + backward)", unit, 1.0)]
    for name, attack in attacks.items():
        seconds = seconds_per_call(attack, 1, device, warm_up=False) / iterations  # model warmed up above
        rows.append((size, name, seconds, seconds / unit))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 224], help="image sides in pixels")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=2, help="attack iterations timed per method")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--dlg", action="store_true", help="also time DLG (slow: up to 20 evaluations per step)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    print(f"ResNet34, batch {args.batch_size}, device {device}, {args.iterations} timed iterations per attack\n")
    print("| image | method | seconds / iteration | × training step |\n|---|---|---|---|")
    for size in args.sizes:
        for size_, method, seconds, ratio in measure(size, args.batch_size, args.iterations, device, args.dlg):
            print(f"| {size_}×{size_} | {method} | {seconds:.3f} | {ratio:.1f} |", flush=True)


if __name__ == "__main__":
    main()
