"""Chapter 05's two Inverting Gradients baselines at their own best budget (a recorded study: too slow for the
quick book; issue 46, item 2).

    python3 scripts/ig_study_05.py                       # the book's record (one process, one thread)
    python3 scripts/ig_study_05.py --budgets 100 600     # other budgets (another record's path: --record)

Li et al. (Table 1) give Inverting Gradients 24 000 steps against DiffULA's 4 000: six times DiffULA's budget.
The quick profile runs both baselines of chapter 05 — sample level (Hungarian-matched) and user level without
prior — for ``ig_steps`` (100) steps, as many as DiffULA's. This study runs both, exactly as the notebook runs
them (its model, users, per-user seeds, TV weight, learning rate; the step decay set by each budget: a fresh
run per budget), at ``BUDGETS`` steps (600 = six times DiffULA's 100):

1. Choice: every budget on ``SELECTION`` held-out LFW users the table does not score
   (:func:`gitutor.chapters.diffusion_user_level.ig_budget.selection_users`: the first three held-out faces
   not among the profile's users); each baseline's budget is the one of lowest mean LPIPS there.
2. Table: every budget on the table's users (the profile's ``users``, in order).
3. Check: the table's ``ig_steps``-step runs must equal the notebook's own IG numbers — the notebook's
   :func:`~gitutor.chapters.diffusion_user_level.experiments.evaluate_users` runs them again (DiffULA
   replaced by a stub it does not score here) and every score must agree exactly; otherwise no record.

Each (phase, budget, user) is one task, journaled as it finishes beside the record
(``05_ig_budget.<code>.journal.jsonl``, ignored by git): an interrupted run resumes with the same command at
the same commit and runs only the rest. Writes the record, with provenance (commit, command, wall time,
device, torch), to ``book/studies/05_ig_budget.json`` atomically and removes the journal;
:func:`gitutor.chapters.diffusion_user_level.ig_budget.read_record` reads it. Commit first: the record names
the commit.
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

OUT = ROOT / "book" / "studies" / "05_ig_budget.json"
SEED = 0
SELECTION = 3  # held-out LFW users the budget is chosen on
BUDGETS = [100, 300, 600, 1200]


def settings():
    """The notebook's settings of the quick profile (``chapter_settings`` with its defaults)."""
    import gitutor
    from gitutor.chapters.diffusion_user_level.profile import chapter_settings

    return chapter_settings(
        gitutor.get_profile("05_diffusion_user_level", "quick"), None, "data", None
    )


def setup(cfg, seed: int = SEED):
    """As the notebook: Algorithm 1's schedules (their 𝒯), the shared model drawn after
    ``seed_everything(seed)``, and per phase the users' cases and baseline seeds
    (``trial_seeds(seed, U, "baseline starts")``, as ``evaluate_users``)."""
    import torch

    import gitutor
    from gitutor.chapters.diffusion_user_level import experiments as study
    from gitutor.chapters.diffusion_user_level.ig_budget import selection_users
    from gitutor.federated.case import gradient_case
    from gitutor.seeding import trial_seeds

    torch.set_num_threads(cfg.torch_threads)
    schedules = study.attack_schedules(cfg)
    gitutor.seed_everything(seed)
    model = study.shared_model(cfg.model, cfg)
    phases = {}
    for phase, faces in (
        ("choice", selection_users(cfg, SELECTION)),
        ("table", list(cfg.users)),
    ):
        users = study.chapter_users(cfg.replace(users=faces), "data", seed, "cpu")
        cases = [gradient_case(model, x, y, labels_known=True) for x, y in users]
        phases[phase] = (faces, cases, trial_seeds(seed, len(cases), "baseline starts"))
    return schedules["augment"], phases


def notebook_rows(cfg, cases, augment, seed: int = SEED) -> dict:
    """The notebook's own baseline rows: ``evaluate_users`` on ``cases`` with a stub in DiffULA's place
    (the mean photo; its row is not used): ``{baseline: [per-user scores]}``."""
    from gitutor.attacks.result import AttackResult
    from gitutor.chapters.diffusion_user_level import experiments as study
    from gitutor.chapters.diffusion_user_level.ig_budget import BASELINES

    def stub(index, case):
        return AttackResult(
            images=case.inputs.cpu().mean(0, keepdim=True), labels=None, info={"seconds": 0.0}
        )

    rows, _, _ = study.evaluate_users(cases, stub, cfg, augment, seed)
    return {name: rows[name] for name in BASELINES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=BUDGETS, help="steps")
    parser.add_argument("--record", type=Path, default=OUT, help="the record to write")
    args = parser.parse_args()
    budgets = sorted(set(args.budgets))

    from gitutor.chapters.diffusion_user_level.ig_budget import (
        BASELINES,
        SETTINGS,
        baseline_scores,
        choose_budget,
    )
    from gitutor.files import write_json
    from gitutor.journal import Journal, trial_key

    cfg = settings()
    if cfg.ig_steps not in budgets:
        parser.error(f"--budgets must include the page's own {cfg.ig_steps} steps")
    commit, dirty, code = code_version(ROOT)
    command = shlex.join(["python3", "scripts/ig_study_05.py", *sys.argv[1:]])
    journal_file = args.record.with_name(f"{args.record.stem}.{code}.journal.jsonl")
    journal = Journal(
        journal_file, decode=lambda v: v, run={"study": "05_ig_budget", "code": code}
    )
    done = journal.read()
    start = time.perf_counter()
    augment, phases = setup(cfg)
    tasks = [
        {"phase": phase, "budget": budget, "index": k, "user": face}
        for phase in ("choice", "table")
        for budget in budgets
        for k, face in enumerate(phases[phase][0])
    ]
    resumed = sum(trial_key(t) in done for t in tasks)
    print(f"{len(tasks)} tasks, {resumed} from {journal_file.name}", flush=True)
    for number, task in enumerate(tasks, 1):
        if trial_key(task) in done:
            continue
        _, cases, starts = phases[task["phase"]]
        began = time.process_time()
        value = baseline_scores(
            cases[task["index"]], cfg, augment, starts[task["index"]], task["budget"]
        )
        if any(value[name]["lpips"] is None for name in BASELINES):
            raise RuntimeError("LPIPS' backbone is not installed: the study needs LPIPS")
        seconds = time.process_time() - began
        journal.append(task, value, seconds)
        done[trial_key(task)] = (value, None, seconds)
        print(
            f"[{number}/{len(tasks)}] {task['phase']} user {task['user']} {task['budget']} steps: "
            + ", ".join(f"{n.split(' (')[0]} LPIPS {value[n]['lpips']:.3f}" for n in BASELINES)
            + f" ({seconds:.0f} s)",
            flush=True,
        )

    def part(phase):
        return {
            name: {
                b: [
                    done[trial_key(t)][0][name]
                    for t in tasks
                    if t["phase"] == phase and t["budget"] == b
                ]
                for b in budgets
            }
            for name in BASELINES
        }

    choice, scores = part("choice"), part("table")
    # the page's own budget: the notebook's evaluate_users on the table's users gives the same numbers
    _, cases, _ = phases["table"]
    began = time.process_time()
    own = notebook_rows(cfg, cases, augment)
    check_seconds = time.process_time() - began
    gap = max(
        abs(own[name][k][score] - scores[name][cfg.ig_steps][k][score])
        for name in BASELINES
        for k in range(len(cases))
        for score in own[name][k]
    )
    if gap != 0:
        print(
            f"the {cfg.ig_steps}-step runs differ from evaluate_users' by up to {gap:.3g}: the study "
            f"does not run the notebook's baselines; no record written (journal kept: {journal_file})",
            file=sys.stderr,
        )
        return 1
    wall = time.perf_counter() - start
    record = {
        "study": "05_ig_budget",
        "profile": "quick",
        "seed": SEED,
        "settings": {k: getattr(cfg, k) for k in SETTINGS},
        "users": list(cfg.users),
        "selection_users": phases["choice"][0],
        "budgets": budgets,
        "table_budget": cfg.ig_steps,
        "choice_score": "lpips (mean over the selection users, lower is better)",
        "choice": choice,
        "chosen_budget": {name: choose_budget(choice[name]) for name in BASELINES},
        "scores": scores,
        "notebook_check": {"budget": cfg.ig_steps, "max_difference": gap},
        "processes": 1,
        "resumed_tasks": resumed,
        "task_cpu_seconds": round(sum(done[trial_key(t)][2] for t in tasks) + check_seconds, 1),
        **run_provenance(commit, dirty, command, wall),
    }
    write_json(args.record, record, indent=1)
    remove_journal(journal_file)
    print("chosen budget", record["chosen_budget"])
    for name in BASELINES:
        print(name, {b: round(sum(u["lpips"] for u in v) / len(v), 4) for b, v in scores[name].items()})
    print(f"{wall:.0f} s -> {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
