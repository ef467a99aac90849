"""Seconds per attack iteration of chapter 08's every-round objective (gitutor.attacks.unrolled).

The server matches one candidate image to all R recorded updates of a client, each at its own round's
global model (``rounds_distance``). It runs the R simulated steps as one ``torch.func.vmap`` over the
stacked starts; this script times one forward + backward of that objective against the same objective
written as R separate ``update_distance`` calls (what it replaced), and against one round alone, on
chapter 08's network (tanh LeNet, 32×32 grey, one image per client) with random starts and updates.

Times are CPU seconds of this process (robust to other load; ``--threads 1`` as the chapter runs).
Usage::

    python3 benchmarks/rounds_distance.py --threads 1 --rounds 10 --repeats 50
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from gitutor.attacks.unrolled import rounds_distance, update_distance
from gitutor.chapters.flower_dp.experiments import chapter_model


def seconds(objective, images, repeats: int) -> float:
    """CPU seconds per forward + backward of ``objective(images)`` (the median of ``repeats`` calls)."""
    times = []
    for _ in range(repeats):
        x = images.clone().requires_grad_(True)
        start = time.process_time()
        objective(x).backward()
        times.append(time.process_time() - start)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--size", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = chapter_model(args.size, 0)
    g = torch.Generator().manual_seed(0)
    rounds = [
        (
            [
                p.detach() + 0.01 * torch.randn(p.shape, generator=g)
                for p in model.parameters()
            ],
            [torch.randn(p.shape, generator=g) for p in model.parameters()],
        )
        for _ in range(args.rounds)
    ]
    images = torch.rand(1, 1, args.size, args.size, generator=g)
    labels = torch.tensor([1])
    step = {"lr": 0.05, "epochs": 1, "batch_size": 1}
    found = {
        "vectorised (rounds_distance)": seconds(
            lambda x: rounds_distance(model, rounds, x, labels, **step),
            images,
            args.repeats,
        ),
        "one call per round (update_distance)": seconds(
            lambda x: (
                sum(
                    update_distance(model, d, x, labels, start=s, **step)
                    for s, d in rounds
                )
                / len(rounds)
            ),
            images,
            args.repeats,
        ),
        "one round": seconds(
            lambda x: update_distance(
                model, rounds[0][1], x, labels, start=rounds[0][0], **step
            ),
            images,
            args.repeats,
        ),
    }
    print(
        json.dumps(
            {"rounds": args.rounds, "threads": args.threads, "seconds": found}, indent=1
        )
    )


if __name__ == "__main__":
    main()
