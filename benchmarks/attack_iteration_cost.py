"""Seconds per attack iteration, where they go, and against a plain training step (notebook 04, Ye et al. 2024).

Every optimisation attack pays, per iteration, one forward pass, one backward pass with
``create_graph=True`` and one more backward pass through that graph (double backpropagation),
plus the gradient-matching objective over every entry of ∇W and the optimiser step. This script
measures, for a ResNet34 and one batch:

* one plain training step (forward + backward of the batch-mean cross-entropy), the unit;
* the parts of one Inverting Gradients iteration, timed one by one: forward, first backward with
  graph, objective (cosine + TV), double backward, optimiser (sign, Adam, clamp); the rest of the
  loop's time is Python overhead;
* seconds per iteration of Inverting Gradients, GradInversion and stepwise GradInversion (first
  phase, tensors ≥ 100, and at the floor, tensors ≥ 25, with dropout), each measured as
  (time of a 2 + k iteration run − time of a 2 iteration run) / k, so per-call setup (input
  checks, buffers) is not counted as iteration time;
* with ``--baseline REF``, the same attack timings with the package as it was at git revision
  ``REF`` (exported with ``git archive`` and run in a subprocess), and the speed-up.

Times are CPU seconds of this process on the CPU (robust to other load; use ``--threads 1``) and
wall seconds on a GPU. Usage::

    python3 benchmarks/attack_iteration_cost.py --threads 1 --baseline 9fe8b62
    python3 benchmarks/attack_iteration_cost.py --sizes 64 --iterations 5 --device cuda
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_of(function, repeats: int, device: torch.device) -> float:
    """Shortest time of ``function()`` over ``repeats`` calls (after one untimed warm-up).

    On the CPU the clock is this process's CPU time (user + system, ``time.process_time``), which
    other processes on a shared machine barely disturb (run with one thread: with more, CPU time
    adds up over threads); on a GPU it is wall time after synchronising.
    """
    clock = time.process_time if device.type == "cpu" else time.perf_counter
    function()
    times = []
    for _ in range(repeats):
        _synchronise(device)
        start = clock()
        function()
        _synchronise(device)
        times.append(clock() - start)
    return min(times)


def setting(size: int, batch_size: int, device: torch.device):
    """A ResNet34 in eval mode, one batch, its labels and shared gradient."""
    from gitutor import make_generator
    from gitutor.federated import client_gradients
    from gitutor.models import resnet34

    model = resnet34(num_classes=1000).to(device).eval()
    generator = make_generator(0, device)
    x = torch.rand(batch_size, 3, size, size, generator=generator, device=device)
    y = torch.randperm(1000, generator=generator, device=device)[:batch_size]
    return model, x, y, client_gradients(model, x, y)


def attack_seconds(size: int, batch_size: int, extra: int, repeats: int, device: torch.device) -> dict[str, float]:
    """Seconds per iteration of each attack, per-call setup excluded (see the module docstring)."""
    from gitutor.attacks import StepwiseSchedule, gradinversion, inverting_gradients, stepwise_inversion

    model, x, y, grads = setting(size, batch_size, device)
    shape = tuple(x.shape)
    attacks = {
        "Inverting Gradients": lambda n: inverting_gradients(model, grads, y, shape, iterations=n, tv_weight=0.01),
        "GradInversion": lambda n: gradinversion(model, grads, y, shape, iterations=n),
        "stepwise, tensors ≥ 100": lambda n: stepwise_inversion(model, grads, y, shape, iterations=n,
                                                                schedule=StepwiseSchedule.fixed(n, 100)),
        "stepwise, tensors ≥ 25": lambda n: stepwise_inversion(model, grads, y, shape, iterations=n,
                                                               schedule=StepwiseSchedule.fixed(n, 25)),
    }
    return {name: (best_of(lambda: run(2 + extra), repeats, device) - best_of(lambda: run(2), repeats, device)) / extra
            for name, run in attacks.items()}


def iteration_parts(size: int, batch_size: int, repeats: int, device: torch.device) -> dict[str, float]:
    """Seconds of each part of one Inverting Gradients iteration, and of a plain training step."""
    from gitutor.attacks.objectives import CosineToTarget, total_variation
    from gitutor.federated.client import cross_entropy

    model, x_true, y, grads = setting(size, batch_size, device)
    parameters, cosine = list(model.parameters()), CosineToTarget(grads)
    x = torch.rand_like(x_true).requires_grad_(True)
    optimizer = torch.optim.Adam([x], lr=0.1)
    state = {}

    def forward():
        state["loss"] = cross_entropy(model(x), y)

    def first_backward():
        state["grads"] = torch.autograd.grad(state["loss"], parameters, create_graph=True)

    def objective():
        state["objective"] = cosine(state["grads"]) + 0.01 * total_variation(x)

    def double_backward():
        x.grad = torch.autograd.grad(state["objective"], x)[0]

    def step():
        x.grad = torch.sign(x.grad)
        optimizer.step()
        with torch.no_grad():
            x.clamp_(0, 1)

    def training_step():
        model.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x_true), y).backward()

    parts = {}
    for name, chain in (("forward", [forward]), ("first backward with graph", [forward, first_backward]),
                        ("objective (cosine + TV)", [forward, first_backward, objective]),
                        ("double backward", [forward, first_backward, objective, double_backward]),
                        ("optimiser (sign, Adam, clamp)", [forward, first_backward, objective, double_backward, step])):
        parts[name] = best_of(lambda: [f() for f in chain], repeats, device)  # cumulative
    cumulative = list(parts.values())
    parts = {name: value - (cumulative[i - 1] if i else 0.0) for i, (name, value) in enumerate(parts.items())}
    model.zero_grad(set_to_none=True)
    parts["training step (forward + backward)"] = best_of(training_step, repeats, device)
    return parts


def baseline_seconds(ref: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Run :func:`attack_seconds` with the package at git revision ``ref`` in a subprocess."""
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", ref, "gitutor"], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        command = [sys.executable, __file__, "--attacks-only", "--sizes", *map(str, args.sizes), "--batch-size",
                   str(args.batch_size), "--iterations", str(args.iterations), "--repeats", str(args.repeats),
                   "--device", args.device, "--threads", str(args.threads)]
        env = {**os.environ, "PYTHONPATH": folder}
        out = subprocess.run(command, env=env, check=True, capture_output=True, text=True, cwd=folder).stdout
        return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64], help="image sides in pixels")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=3, help="extra iterations timed per attack")
    parser.add_argument("--repeats", type=int, default=2, help="timings per measurement (the shortest is kept)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--baseline", help="git revision to compare with (e.g. the commit before the loop)")
    parser.add_argument("--attacks-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    attacks = {str(s): attack_seconds(s, args.batch_size, args.iterations, args.repeats, device) for s in args.sizes}
    if args.attacks_only:
        print(json.dumps(attacks))
        return
    from gitutor.tables import markdown_table

    clock = "CPU seconds of this process" if device.type == "cpu" else "wall seconds"
    print(f"ResNet34, batch {args.batch_size}, {device}, {args.threads} thread(s); times are {clock}\n")
    before = baseline_seconds(args.baseline, args) if args.baseline else None
    for size in args.sizes:
        parts = iteration_parts(size, args.batch_size, args.repeats, device)
        unit = parts.pop("training step (forward + backward)")
        floor = sum(parts[k] for k in ("forward", "first backward with graph", "double backward"))
        print(f"\n{size}×{size}: training step {unit:.3f} s; network floor (forward, backward with graph, double "
              f"backward) {floor:.3f} s = {floor / unit:.1f} × training step\n")
        iteration = attacks[str(size)]["Inverting Gradients"]
        parts["Python overhead (rest of the loop)"] = iteration - sum(parts.values())
        print(markdown_table(["part of an IG iteration", "seconds", "share"],
                             [(name, f"{seconds:.3f}", f"{seconds / iteration:.0%}") for name, seconds in parts.items()]))
        header = ["attack", "s / iteration", "× training step", "× floor"] + (["before", "speed-up"] if before else [])
        rows = [[name, f"{seconds:.3f}", f"{seconds / unit:.1f}", f"{seconds / floor:.2f}"]
                + ([f"{before[str(size)][name]:.3f}", f"{before[str(size)][name] / seconds:.2f}×"] if before else [])
                for name, seconds in attacks[str(size)].items()]
        print("\n" + markdown_table(header, rows), flush=True)


if __name__ == "__main__":
    main()
