"""Chapter 06's Inverting Gradients baseline tuned, and at its own best budget on every Table 1 target (a
recorded study: too slow for the quick book).

    python3 scripts/ig_study_06.py                  # the book's record, two worker processes
    python3 scripts/ig_study_06.py --processes 4

1. Tuning (:func:`gitutor.chapters.learning_to_invert.tuning.tune_ig`): IG's TV weight, learning rate and its
   schedule, best-iterate and restarts per defense, chosen on the first ``TUNE_IMAGES`` **auxiliary** images (the
   server's own data; no held-out target) at Table 1's budget. The quick profile's ``ig_settings`` must equal the
   chosen settings (tests/test_studies_06.py checks it).
2. Budget: the tuned IG at each of ``BUDGETS`` iterations (a fresh run per budget: IG's step schedule is set by
   its budget) on the next ``BUDGET_IMAGES`` auxiliary images; IG's budget per defense is the one of lowest mean
   MSE there — chosen on images Table 1 does not score.
3. Targets: the tuned IG at every budget on all of Table 1's ``n_ig_targets`` held-out targets (B = 1), on the
   observed gradients the chapter itself computes (the Gaussian defense's noise drawn in the notebook's order):
   the chapter scores LTI against IG at the budget of step 2 and shows the whole curve.

Each (defense, step, budget) is one task on a pool of worker processes (one thread each). Writes the record, with
provenance (commit, command, wall time), to ``book/studies/06_ig_budget.json`` atomically; the chapter reads it
(:func:`gitutor.chapters.learning_to_invert.budget.recorded_study`). Commit first: the record names the commit.
"""
from __future__ import annotations

import argparse
import datetime
import multiprocessing
import platform
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from journaled import code_version  # noqa: E402

OUT = ROOT / "book" / "studies" / "06_ig_budget.json"
SEED = 0
TUNE_IMAGES = 3  # auxiliary images 0..2
BUDGET_IMAGES = 8  # auxiliary images 3..10
BUDGETS = [100, 300, 1000, 2000]


def _case(defense_name: str):
    """The chapter's model, hasher, split and a fresh defense object of ``defense_name`` (seeded as the notebook)."""
    import gitutor
    from gitutor.attacks import paper_defenses
    from gitutor.chapters.learning_to_invert import experiments as study

    cfg = gitutor.get_profile("06_learning_to_invert", "quick")
    split = study.load_split(cfg, SEED)
    model = study.build_model(cfg.models[0], cfg)
    hasher = study.build_hasher(cfg.models[0], model, cfg, SEED)
    defense = paper_defenses(prune_rate=cfg.prune_rate, sigma=cfg.sigma, seed=SEED)[defense_name]
    return cfg, split, model, hasher, defense


def task(kind: str, name: str, budget: int | None):
    """One task: ``("tune", defense, None)``, ``("choice", defense, budget)`` or ``("targets", defense, budget)``."""
    import torch

    from gitutor.attacks import make_gradient_dataset
    from gitutor.chapters.learning_to_invert import experiments as study
    from gitutor.chapters.learning_to_invert.budget import ig_budget_errors
    from gitutor.chapters.learning_to_invert.tuning import tune_ig

    torch.set_num_threads(1)
    cfg, (aux_x, aux_y, target_x, target_y), model, hasher, defense = _case(name)
    if kind == "tune":  # the first observation of a fresh defense, as when the settings were first tuned
        x, y = aux_x[:TUNE_IMAGES], aux_y[:TUNE_IMAGES]
        observed = {name: study.observe(model, hasher, defense, x, y, 1)[1]}
        return tune_ig(model, observed, x, y, cfg.ig_iterations, SEED)
    # the notebook's order of draws: the auxiliary set's defended gradients, then the targets'
    make_gradient_dataset(model, aux_x, aux_y, defense, 1, hasher=hasher)
    x, y = target_x[: cfg.n_ig_targets], target_y[: cfg.n_ig_targets]
    observed = study.observe(model, hasher, defense, target_x, target_y, 1)[1][: cfg.n_ig_targets]
    if kind == "choice":
        x = aux_x[TUNE_IMAGES : TUNE_IMAGES + BUDGET_IMAGES]
        y = aux_y[TUNE_IMAGES : TUNE_IMAGES + BUDGET_IMAGES]
        observed = study.observe(model, hasher, defense, x, y, 1)[1]
    setup = study.Setup(cfg, SEED, "cpu", False, tuple(x.shape[1:]))
    return ig_budget_errors(setup, model, {name: observed}, x, y, [budget])[name][budget]


def _run(args):
    start = time.process_time()  # one thread: the task's CPU time
    return task(*args), time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="worker processes (one thread each)")
    args = parser.parse_args()
    import torch

    import gitutor
    from gitutor.files import write_json

    cfg = gitutor.get_profile("06_learning_to_invert", "quick")
    names = list(cfg.ig_settings)
    commit, dirty, _ = code_version(ROOT)
    tasks = [("tune", d, None) for d in names]
    tasks += [(k, d, b) for k in ("choice", "targets") for d in names for b in BUDGETS]
    tasks.sort(key=lambda t: -(t[2] or 0) * cfg.ig_settings[t[1]]["restarts"])  # longest first
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
        done = dict(zip(tasks, pool.map(_run, tasks, chunksize=1)))
    wall = time.perf_counter() - start
    tuning = {key: {d: done["tune", d, None][0][key][d] for d in names} for key in ("grid", "stage2", "chosen")}
    choice = {d: {b: done["choice", d, b][0] for b in BUDGETS} for d in names}
    mean = {d: {b: sum(v) / len(v) for b, v in choice[d].items()} for d in names}
    record = {
        "study": "06_ig_budget",
        "profile": "quick",
        "seed": SEED,
        "tuning": {**tuning, "images": TUNE_IMAGES, "iterations": cfg.ig_iterations},
        "budgets": BUDGETS,
        "table_budget": cfg.ig_iterations,
        "choice": {"images": list(range(TUNE_IMAGES, TUNE_IMAGES + BUDGET_IMAGES)), "errors": choice},
        "chosen_budget": {d: min(BUDGETS, key=lambda b, d=d: mean[d][b]) for d in names},
        "targets": cfg.n_ig_targets,
        "errors": {d: {b: done["targets", d, b][0] for b in BUDGETS} for d in names},
        "command": shlex.join(["python3", "scripts/ig_study_06.py", *sys.argv[1:]]),
        "commit": commit[:12],
        "dirty": dirty,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
        "threads": 1,
        "processes": args.processes,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(sum(s for _, s in done.values()), 1),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    write_json(OUT, record)
    print("chosen budget", record["chosen_budget"])
    for d in names:
        print(d, {b: round(sum(v) / len(v), 4) for b, v in record["errors"][d].items()}, flush=True)
    print(f"{wall:.0f} s -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
