"""Chapter 06's Inverting Gradients baseline at larger budgets (a recorded study: too slow for the quick book).

Runs the defense-aware IG of chapter 06's Table 1 (quick profile: 16×16 digits, the untrained LeNet, B = 1) on
the first ``--targets`` held-out targets under each defense, once per budget (a fresh run per budget: IG's step
schedule is set by its budget), and writes the per-target MSE with its provenance to
``book/studies/06_ig_budget.json``, which the chapter reads
(:mod:`gitutor.chapters.learning_to_invert.budget`). The observed gradients are the chapter's own for the
deterministic defenses (none, sign, prune); the Gaussian defense draws fresh noise.

    OMP_NUM_THREADS=1 python benchmarks/ig_budget_06.py --targets 6 --budgets 100 300 1000 3000
"""
import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

import gitutor
from gitutor.attacks import paper_defenses
from gitutor.chapters.learning_to_invert import experiments as study
from gitutor.chapters.learning_to_invert.budget import ig_budget_errors
from gitutor.files import write_json

OUT = Path(__file__).resolve().parents[1] / "book" / "studies" / "06_ig_budget.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=6)
    parser.add_argument("--budgets", type=int, nargs="+", default=[100, 300, 1000, 3000])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = gitutor.get_profile("06_learning_to_invert", "quick")
    _, _, target_x, target_y = study.load_split(cfg, args.seed)
    x, y = target_x[:args.targets], target_y[:args.targets]
    model = study.build_model(cfg.models[0], cfg)
    hasher = study.build_hasher(cfg.models[0], model, cfg, args.seed)
    defenses = paper_defenses(prune_rate=cfg.prune_rate, sigma=cfg.sigma, seed=args.seed)
    observed = {name: study.observe(model, hasher, defense, x, y, 1)[1] for name, defense in defenses.items()}
    setup = study.Setup(cfg, args.seed, "cpu", False, tuple(x.shape[1:]))
    start = time.perf_counter()
    errors = ig_budget_errors(setup, model, observed, x, y, args.budgets)
    seconds = time.perf_counter() - start
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=OUT.parent).stdout.strip()
    record = {"command": "OMP_NUM_THREADS=1 python benchmarks/ig_budget_06.py " + " ".join(sys.argv[1:]),
              "commit": commit, "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
              "threads": 1, "wall_seconds": round(seconds, 1), "profile": "quick", "seed": args.seed,
              "targets": args.targets, "budgets": args.budgets, "table_budget": cfg.ig_iterations, "errors": errors}
    write_json(OUT, record)
    for defense, by_budget in errors.items():
        print(defense, {b: round(sum(v) / len(v), 4) for b, v in by_budget.items()}, flush=True)
    print(f"{seconds:.0f} s -> {OUT}")


if __name__ == "__main__":
    main()
