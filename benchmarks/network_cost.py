"""Seconds per attack iteration of each network of chapter 04's setting study (Ye et al. 2024).

The study's wall times are measured with other work on the machine; this script measures the
cost of one iteration of Inverting Gradients, GradInversion and stepwise GradInversion (at the
first and at the deepest-reaching phase of the paper's schedule, its *floor*) on each network of
the study (:data:`gitutor.chapters.stepwise_gradinversion.setting_study.FACTORS`, random weights, default BatchNorm
statistics, 32 px) at B = 1 and B = 4, as CPU seconds of this process on one thread, which other
processes barely disturb: (time of a 2 + k iteration run − time of a 2 iteration run) / k, the
shortest of ``--repeats``. It writes a JSON record with provenance::

    python3 benchmarks/network_cost.py --out book/studies/04_network_cost.json
"""
from __future__ import annotations

import argparse
import datetime
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gitutor import cli  # noqa: E402
from gitutor.files import write_json  # noqa: E402

from gitutor.chapters.stepwise_gradinversion.setting_study import NETWORKS  # noqa: E402


def seconds_per_iteration(run, extra: int, repeats: int) -> float:
    """CPU seconds per iteration of ``run(n)`` (n iterations), setup excluded (module docstring)."""
    def best(n: int) -> float:
        times = []
        for _ in range(repeats):
            start = time.process_time()
            run(n)
            times.append(time.process_time() - start)
        return min(times)
    run(1)  # warm-up
    return (best(2 + extra) - best(2)) / extra


def network_costs(architecture: str, width: int, batch_size: int, extra: int, repeats: int) -> dict[str, float]:
    """Seconds per iteration of each attack on one network and batch size (random images)."""
    from gitutor.attacks import StepwiseSchedule, gradinversion, inverting_gradients, stepwise_inversion
    from gitutor.federated import client_gradients
    from gitutor.chapters.stepwise_gradinversion.setting_study import study_model

    model = study_model(architecture, width, "random", "default", 32, None)
    x = torch.rand(batch_size, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    y = torch.arange(batch_size)
    grads = client_gradients(model, x, y)
    shape, paper = tuple(x.shape), StepwiseSchedule.paper(1000, len(grads))
    attacks = {
        "Inverting Gradients": lambda n: inverting_gradients(model, grads, y, shape, iterations=n, tv_weight=0.01),
        "GradInversion": lambda n: gradinversion(model, grads, y, shape, iterations=n, tv_weight=1e-4,
                                                 bn_weight=1e-6),
        "stepwise, first phase": lambda n: stepwise_inversion(
            model, grads, y, shape, iterations=n, schedule=StepwiseSchedule.fixed(n, paper.start)),
        "stepwise, floor": lambda n: stepwise_inversion(
            model, grads, y, shape, iterations=n, schedule=StepwiseSchedule.fixed(n, paper.floor)),
    }
    return {name: round(seconds_per_iteration(run, extra, repeats), 4) for name, run in attacks.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="JSON record to write (default: print only)")
    parser.add_argument("--batch-sizes", type=cli.positive_int, nargs="+", default=[1, 4])
    parser.add_argument("--iterations", type=cli.positive_int, default=3, help="extra iterations timed")
    parser.add_argument("--repeats", type=cli.positive_int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    rows = []
    for label, (architecture, width) in NETWORKS.items():
        for batch_size in args.batch_sizes:
            costs = network_costs(architecture, width, batch_size, args.iterations, args.repeats)
            rows.append({"network": label, "B": batch_size, **costs})
            print(rows[-1], flush=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    record = {"rows": rows, "provenance": {
        "commit": commit, "torch": torch.__version__, "python": platform.python_version(),
        "device": f"CPU: {platform.processor() or 'x86_64'}, 1 torch thread, CPU time of the process",
        "command": " ".join(["python3", "benchmarks/network_cost.py", *sys.argv[1:]]),
        "wall_seconds": round(time.perf_counter() - start),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}}
    if args.out:
        write_json(args.out, record)


if __name__ == "__main__":
    main()
