"""Chapter 06's Inverting Gradients baseline tuned and at larger budgets (a recorded study: too slow for the quick book).

1. Tuning (:func:`gitutor.chapters.learning_to_invert.tuning.tune_ig`): IG's TV weight, learning rate and its
   schedule, best-iterate and restarts per defense, chosen on the first ``--tune-images`` **auxiliary** images
   (the server's own data; no held-out target) at Table 1's budget. The quick profile's ``ig_settings`` must
   equal the chosen settings (tests/test_studies_06.py checks it).
2. Budget: the tuned IG on the first ``--targets`` held-out targets under each defense, once per budget (a
   fresh run per budget: IG's step schedule is set by its budget). The observed gradients are the chapter's
   own for the deterministic defenses (none, sign, prune); the Gaussian defense draws fresh noise.

One process per defense (one thread each). Writes both, with provenance, to ``book/studies/06_ig_budget.json``, which the chapter reads
(:mod:`gitutor.chapters.learning_to_invert.budget`).

    OMP_NUM_THREADS=1 python benchmarks/ig_budget_06.py --tune-images 3 --targets 4 --budgets 100 300 1000
"""
import argparse
import multiprocessing
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
from gitutor.chapters.learning_to_invert.tuning import tune_ig
from gitutor.files import write_json

OUT = Path(__file__).resolve().parents[1] / "book" / "studies" / "06_ig_budget.json"


def one_defense(args, name: str) -> tuple[dict, dict]:
    """Tuning and budget study under one defense (one process each)."""
    torch.set_num_threads(1)
    cfg = gitutor.get_profile("06_learning_to_invert", "quick")
    aux_x, aux_y, target_x, target_y = study.load_split(cfg, args.seed)
    model = study.build_model(cfg.models[0], cfg)
    hasher = study.build_hasher(cfg.models[0], model, cfg, args.seed)
    defense = paper_defenses(prune_rate=cfg.prune_rate, sigma=cfg.sigma, seed=args.seed)[name]
    tx, ty = aux_x[:args.tune_images], aux_y[:args.tune_images]
    tuning = tune_ig(model, {name: study.observe(model, hasher, defense, tx, ty, 1)[1]}, tx, ty,
                     cfg.ig_iterations, args.seed)
    x, y = target_x[:args.targets], target_y[:args.targets]
    observed = {name: study.observe(model, hasher, defense, x, y, 1)[1]}
    setup = study.Setup(cfg.replace(ig_settings=tuning["chosen"]), args.seed, "cpu", False, tuple(x.shape[1:]))
    return tuning, ig_budget_errors(setup, model, observed, x, y, args.budgets)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune-images", type=int, default=3)
    parser.add_argument("--targets", type=int, default=4)
    parser.add_argument("--budgets", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cfg = gitutor.get_profile("06_learning_to_invert", "quick")
    names = list(paper_defenses())
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(len(names)) as pool:  # one process (one thread) per defense
        found = pool.starmap(one_defense, [(args, name) for name in names])
    seconds = time.perf_counter() - start
    tuning = {key: {name: part[key][name] for name, (part, _) in zip(names, found)}
              for key in ("grid", "stage2", "chosen")}
    errors = {name: by_budget[name] for name, (_, by_budget) in zip(names, found)}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=OUT.parent).stdout.strip()
    record = {"command": "OMP_NUM_THREADS=1 python benchmarks/ig_budget_06.py " + " ".join(sys.argv[1:]),
              "commit": commit, "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
              "threads": 1, "processes": len(names), "wall_seconds": round(seconds, 1), "profile": "quick",
              "seed": args.seed, "tuning": {**tuning, "images": args.tune_images, "iterations": cfg.ig_iterations},
              "targets": args.targets, "budgets": args.budgets, "table_budget": cfg.ig_iterations, "errors": errors}
    write_json(OUT, record)
    print("chosen", tuning["chosen"])
    for defense, by_budget in errors.items():
        print(defense, {b: round(sum(v) / len(v), 4) for b, v in by_budget.items()}, flush=True)
    print(f"{seconds:.0f} s -> {OUT}")


if __name__ == "__main__":
    main()
