"""Chapter 05's DiffULA at more steps than the quick profile's 100 (a recorded study: too slow for the quick
book; review46 05-M2: "DiffULA's own budget is a cap").

    python3 scripts/diffula_study_05.py                      # the book's record (one process, one thread)
    python3 scripts/diffula_study_05.py --budgets 100 300    # other budgets (another record's path: --record)

Li et al. run Algorithm 1 for 4 000 steps; the quick profile runs it for ``steps`` (100). This study runs
DiffULA exactly as the notebook runs it (its model, users, per-user seeds, schedules, λ, t*; everything but
the number of steps S, which the schedules read) at ``BUDGETS`` steps on the table's users, and scores each
run as the page scores it (:func:`~gitutor.chapters.diffusion_user_level.experiments.score_images`), after
the final denoising pass and before it (t* = 0, the same run). Check: the ``steps``-step runs, scored by the
notebook's own :func:`~gitutor.chapters.diffusion_user_level.experiments.evaluate_users`, must give the same
DiffULA scores as this study's; otherwise no record. The page compares the record's ``steps``-step scores
with its own once more when it reads the record
(:func:`gitutor.chapters.diffusion_user_level.diffula_budget.read_record`).

Each (budget, user) is one task, journaled as it finishes beside the record
(``05_diffula_budget.<code>.journal.jsonl``, ignored by git): an interrupted run resumes with the same
command at the same commit. Writes the record, with provenance (commit, command, wall time, device, torch),
to ``book/studies/05_diffula_budget.json`` atomically and removes the journal. Commit first: the record
names the commit.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from journaled import code_version, remove_journal, run_provenance  # noqa: E402

OUT = ROOT / "book" / "studies" / "05_diffula_budget.json"
SEED = 0
BUDGETS = [100, 200, 400, 800]


def settings():
    """The notebook's settings of the quick profile (``chapter_settings`` with its defaults)."""
    import gitutor
    from gitutor.chapters.diffusion_user_level.profile import chapter_settings

    return chapter_settings(
        gitutor.get_profile("05_diffusion_user_level", "quick"), None, "data", None
    )


def setup(cfg, seed: int = SEED):
    """As the notebook: the prior, the shared model drawn after ``seed_everything(seed)``, the users'
    cases and photos."""
    import torch

    import gitutor
    from gitutor.chapters.diffusion_user_level import experiments as study
    from gitutor.federated.case import gradient_case

    torch.set_num_threads(cfg.torch_threads)
    prior = study.load_prior(cfg, "cpu", seed)
    gitutor.seed_everything(seed)
    model = study.shared_model(cfg.model, cfg)
    users = study.chapter_users(cfg, "data", seed, "cpu")
    cases = [gradient_case(model, x, y, labels_known=True) for x, y in users]
    return prior, cases, [x for x, _ in users]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=BUDGETS, help="steps")
    parser.add_argument("--record", type=Path, default=OUT, help="the record to write")
    args = parser.parse_args()
    budgets = sorted(set(args.budgets))

    from gitutor.chapters.diffusion_user_level import experiments as study
    from gitutor.chapters.diffusion_user_level.diffula_budget import SETTINGS
    from gitutor.files import write_json
    from gitutor.journal import Journal, trial_key

    cfg = settings()
    if cfg.steps not in budgets:
        parser.error(f"--budgets must include the page's own {cfg.steps} steps")
    commit, dirty, code = code_version(ROOT)
    command = shlex.join(["python3", "scripts/diffula_study_05.py", *sys.argv[1:]])
    journal_file = args.record.with_name(f"{args.record.stem}.{code}.journal.jsonl")
    journal = Journal(journal_file, decode=lambda v: v, run={"study": "05_diffula_budget", "code": code})
    done = journal.read()
    start = time.perf_counter()
    prior, cases, photos = setup(cfg)
    tasks = [{"budget": budget} for budget in budgets]
    resumed = sum(trial_key(t) in done for t in tasks)
    print(f"{len(tasks)} tasks, {resumed} from {journal_file.name}", flush=True)
    runs_at_page = None
    for number, task in enumerate(tasks, 1):
        if trial_key(task) in done and task["budget"] != cfg.steps:
            continue
        began = time.process_time()
        at = cfg.replace(steps=task["budget"])
        runs = study.diffula_users(cases, prior, at, study.attack_schedules(at), SEED)
        value = {
            "final": study.score_images([r.images for r in runs], photos),
            "t_star_0": study.score_images([study.before_final_denoising(r) for r in runs], photos),
        }
        if any(row["lpips"] is None for row in value["final"]):
            raise RuntimeError("LPIPS' backbone is not installed: the study needs LPIPS")
        seconds = time.process_time() - began
        if task["budget"] == cfg.steps:
            runs_at_page = runs
        if trial_key(task) not in done:
            journal.append(task, value, seconds)
            done[trial_key(task)] = (value, None, seconds)
        lpips = sum(r["lpips"] for r in value["final"]) / len(value["final"])
        print(f"[{number}/{len(tasks)}] {task['budget']} steps: DiffULA LPIPS {lpips:.4f} ({seconds:.0f} s)",
              flush=True)

    scores = {b: done[trial_key({"budget": b})][0] for b in budgets}
    # the page's own steps: the notebook's evaluate_users scores the same runs the same way
    began = time.process_time()
    own, _, _ = study.evaluate_users(
        cases, lambda index, case: runs_at_page[index], cfg, study.attack_schedules(cfg)["augment"], SEED
    )
    check_seconds = time.process_time() - began
    mine = scores[cfg.steps]["final"]
    gap = max(
        abs(own[study.METHODS[3]][k][score] - mine[k][score])
        for k in range(len(cases))
        for score in ("mse", "psnr", "ssim", "lpips", "face_rate")
    )
    if gap != 0:
        print(f"the {cfg.steps}-step runs differ from evaluate_users' by up to {gap:.3g}: no record written "
              f"(journal kept: {journal_file})", file=sys.stderr)
        return 1
    wall = time.perf_counter() - start
    record = {
        "study": "05_diffula_budget",
        "profile": "quick",
        "seed": SEED,
        "settings": {k: getattr(cfg, k) for k in SETTINGS},
        "users": list(cfg.users),
        "budgets": budgets,
        "table_budget": cfg.steps,
        "scores": {str(b): scores[b] for b in budgets},
        "notebook_check": {"budget": cfg.steps, "max_difference": gap},
        "processes": 1,
        "resumed_tasks": resumed,
        "task_cpu_seconds": round(sum(done[trial_key(t)][2] for t in tasks) + check_seconds, 1),
        **run_provenance(commit, dirty, command, wall),
    }
    write_json(args.record, record, indent=1)
    remove_journal(journal_file)
    for b in budgets:
        print(b, round(sum(u["lpips"] for u in scores[b]["final"]) / len(cases), 4))
    print(f"{wall:.0f} s -> {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
