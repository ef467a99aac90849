"""Run chapter 02's Table 3 study (gitutor.chapters.idlg_soft_labels.table3_study) and record it.

    python3 scripts/table3_study_02.py                                # 10 samples per kind × 3 starts, 32×32
    python3 scripts/table3_study_02.py --engine processes --cpus 2    # one worker process per core
    python3 scripts/table3_study_02.py --pilot                        # time one trial per method, estimate
    python3 scripts/table3_study_02.py --sanity                       # the sanity arm: starts at the truth

One trial per (kind, setting, sample, start): Wang et al.'s Table 3 (ICLR 2024, §4.3) on the chapter's untrained
LeNet and foolbox's CIFAR-10 samples, L2 matching by gitutor.attacks.dlg (L-BFGS, lr 1, 300 steps; the label
fixed to the truth, iDLG's or the recovered one, or optimised jointly: DLG) and cosine matching by
gitutor.attacks.inverting_gradients (Adam, lr 0.1, 4 800 steps), both with TV 1e-2, step decay at 3/8, 5/8, 7/8
and the lowest-objective iterate, as the authors' code (table3_study's docstring names the departures). The same
samples and starts in every setting: the differences are paired. The record, book/studies/02_table3.json, holds
every trial's PSNR, SSIM and PSNR curve (30 points to its budget), each attacked image's highest know-nothing
control (gitutor.controls) and the provenance: commit, torch, machine, threads, command, wall time.

The record is written (atomically) only when every trial succeeded; a failed trial is a failure: the script
names it, leaves the record byte-identical and exits 1. Every finished trial is kept at once in a journal beside
the record (02_table3.<commit>.journal.jsonl; removed once the record is written), and a running trial saves its
state every 100 steps (<journal>.checkpoints/): after a failure, Ctrl-C or a reboot, **rerun the same command at
the same commit** and only the missing trials run. Commit first: the record names the commit, and a rerun with
other code starts afresh.

Cost (table3_study.cpu_hours, from --pilot and single trials on this project's 2-core machine under a load of ~5):
at 32×32 a trial takes 38–104 s (L2: L-BFGS runs that converge stop their inner iterations early; one that never
does takes 0.35 s a step; runs that blow up stop within seconds) and 40–63 s (cosine, 4 800 Adam steps) — at most
10 CPU hours for 10 samples × 3 starts (420 trials; about 6 at the pilot's typical rates), at most 34 for
10 × 10 (the authors' repeats), 64 for all 19 samples × 10 starts. 16×16 costs the same per step (LeNet-sized
work is overhead-bound), so the study runs at the paper's 32×32. On a quieter machine the pilot ran 3× faster
(L2 / GT 11.3 s, L2 / DLG 11.4 s, cos / GT 17.3 s: about 1.6 CPU hours for 10 × 3 at its rates).

With --sanity the script runs the study's sanity arm instead (table3_study.sanity_trial: the label-known settings
L2 / GT and cos / GT started at the truth plus small noise, each to its budget; one trial per kind, setting and
sample, 40 for 10 samples) and writes book/studies/02_table3_sanity.json, journaled and resumable the same way.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from journaled import record_problem, WORKERS, code_version, journaled, remove_journal, report_failures
from record import device_description

from gitutor import cli
from gitutor.chapters.idlg_soft_labels import table3_study as study
from gitutor.files import write_json
from gitutor.identity import run_identity
from gitutor.sweeps import ENGINES, run_trials

RECORD = ROOT / "book" / "studies" / "02_table3.json"
SANITY_RECORD = ROOT / "book" / "studies" / "02_table3_sanity.json"
#: The defaults of the book's record: samples per kind, starts per sample.
IMAGES, REPEATS = 10, 3
#: The pilot's trials: one per method (L2 with a fixed label, DLG's joint label, cosine).
PILOT = ("L2 / GT", "L2 / DLG", "cos / GT")


def journal_path(record: Path, code: str) -> Path:
    """The journal of a study run with the code ``code``, beside the record; removed once the record is written."""
    return record.with_name(f"{record.stem}.{code}.journal.jsonl")


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line, checked before anything runs (argparse exits naming the argument)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--images",
        type=cli.positive_int,
        default=IMAGES,
        help=f"attack the first N of the {study.SAMPLES} usable CIFAR-10 samples per kind",
    )
    parser.add_argument(
        "--repeats",
        type=cli.positive_int,
        default=None,
        help=f"random starts per sample (default {REPEATS}; at most {study.MAX_REPEATS}, the authors' "
        "count; not with --sanity, which starts at the truth)",
    )
    parser.add_argument(
        "--size",
        type=int,
        choices=(16, 32),
        default=study.SETTING["size"],
        help="image side (the paper's 32; 16 only with --record elsewhere)",
    )
    parser.add_argument(
        "--l2-iterations",
        type=cli.positive_int,
        default=study.METHODS["L2"]["iterations"],
        help="L-BFGS steps (other than the authors' 300 only with --record elsewhere)",
    )
    parser.add_argument(
        "--cos-iterations",
        type=cli.positive_int,
        default=study.METHODS["cos"]["iterations"],
        help="Adam steps (other than the authors' 4 800 only with --record elsewhere)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="local",
        help="gitutor.sweeps engine: this process, worker processes or Ray",
    )
    parser.add_argument(
        "--cpus",
        type=cli.positive_int,
        default=1,
        help="workers (one CPU, one thread each)",
    )
    parser.add_argument(
        "--record",
        type=Path,
        default=None,
        help=f"the record to write (default {RECORD}; with --sanity {SANITY_RECORD})",
    )
    parser.add_argument(
        "--sanity",
        action="store_true",
        help="run the sanity arm (starts at the truth plus small noise) instead of the study",
    )
    parser.add_argument(
        "--pilot",
        action="store_true",
        help="time one trial per method (sample 0, start 0, smoothing), print the study's "
        "estimated CPU hours, write nothing",
    )
    args = parser.parse_args(argv)
    if args.sanity and (args.repeats is not None or args.pilot):
        given = "--repeats" if args.repeats is not None else "--pilot"
        parser.error(f"argument {given}: not with --sanity (one start per sample, at the truth)")
    args.repeats = REPEATS if args.repeats is None else args.repeats
    book = SANITY_RECORD if args.sanity else RECORD
    args.record = book if args.record is None else args.record
    if args.images > study.SAMPLES:
        parser.error(
            f"argument --images: at most {study.SAMPLES} samples, got {args.images}"
        )
    if args.repeats > study.MAX_REPEATS:
        parser.error(
            f"argument --repeats: at most {study.MAX_REPEATS}, got {args.repeats}"
        )
    default = args.record.resolve() == book.resolve()
    changed = [
        name
        for name, value, want in (
            ("--size", args.size, study.SETTING["size"]),
            ("--l2-iterations", args.l2_iterations, study.METHODS["L2"]["iterations"]),
            (
                "--cos-iterations",
                args.cos_iterations,
                study.METHODS["cos"]["iterations"],
            ),
        )
        if value != want
    ]
    if default and changed:
        parser.error(
            f"argument {changed[0]}: {book.name} is the book's record of the study's setting; "
            "give --record elsewhere for a short check"
        )
    if default and args.images < IMAGES:
        parser.error(
            f"argument --images: {book.name} needs at least {IMAGES} samples per kind"
        )
    problem = record_problem(args.record)
    if problem:
        parser.error(f"argument --record: {problem}")
    return args


def context_of(args: argparse.Namespace) -> dict:
    """The study's SETTING with the command line's side and budgets."""
    methods = {
        "L2": dict(study.METHODS["L2"], iterations=args.l2_iterations),
        "cos": dict(study.METHODS["cos"], iterations=args.cos_iterations),
    }
    return dict(study.SETTING, size=args.size, methods=methods)


def pilot(args: argparse.Namespace, context: dict) -> int:
    """Run :data:`PILOT`'s trials (smoothing, sample 0, start 0) to their budgets; print seconds, seconds per step
    and the study's estimated CPU hours at these rates."""
    rates = {}
    for setting in PILOT:
        start = time.perf_counter()
        value = study.trial(
            context, kind="smoothing", setting=setting, image=0, repeat=0
        )
        seconds = time.perf_counter() - start
        rates.setdefault(setting.split(" / ")[0], []).append(
            seconds / value["iterations"]
        )
        print(
            f"pilot {setting}: {value['iterations']} steps in {seconds:.1f} s "
            f"({seconds / value['iterations']:.4f} s/step), PSNR {value['psnr']:.1f} dB "
            f"(last iterate {value['psnr_last']:.1f}, best at step {value['best_iteration']})",
            flush=True,
        )
        curve = (
            value["curve"][:: max(1, len(value["curve"]) // 8)] + value["curve"][-1:]
        )
        print(
            "  curve (step: dB): " + ", ".join(f"{t}: {p:.1f}" for t, p in curve),
            flush=True,
        )
    per = {d: max(r) for d, r in rates.items()}
    trials = study.study_trials(range(args.images), args.repeats)
    hours = (
        sum(
            per[t["setting"].split(" / ")[0]]
            * context["methods"][t["setting"].split(" / ")[0]]["iterations"]
            for t in trials
        )
        / 3600
    )
    print(
        f"estimate: {len(trials)} trials ({args.images} samples × {args.repeats} starts × "
        f"{len(study.SETTINGS)} settings × {len(study.KINDS)} kinds) ≈ {hours:.1f} CPU hours at "
        f"{args.size}×{args.size} at the pilot's rates; at most "
        f"{study.cpu_hours(args.images, args.repeats, args.size):.1f} (table3_study.cpu_hours)"
    )
    return 0


def controls(context: dict, images: list[int]) -> dict[str, list[dict]]:
    """Per kind, per attacked sample: the highest PSNR (dB) a reconstruction knowing nothing of it scores
    (gitutor.controls.control_images of the kind's attacked images, 4×4 thumbnail) and which control."""
    import torch

    from gitutor.controls import control_images
    from gitutor.metrics import psnr

    found = {}
    for kind in study.KINDS:
        truths = torch.cat([study.study_sample(context, kind, i)[0] for i in images])
        scores = {
            name: psnr(c, truths) for name, c in control_images(truths, 4).items()
        }
        table, names = torch.stack(list(scores.values())), list(scores)
        best = table.argmax(dim=0)
        found[kind] = [
            {"control": names[int(best[i])], "psnr": float(table[best[i], i])}
            for i in range(len(images))
        ]
    return found


def main(argv: list[str] | None = None) -> int:
    import torch

    args = parse(argv)
    torch.set_num_threads(
        1
    )  # LeNet-sized work: one thread per trial, the same numbers on any machine
    context = context_of(args)
    if args.pilot:
        return pilot(args, context)
    images = list(range(args.images))
    run = study.sanity_trial if args.sanity else study.trial
    if args.sanity:
        trials = study.sanity_trials(images)
    else:
        trials = study.study_trials(images, args.repeats)
    commit, dirty, code = code_version(ROOT)
    journal = journal_path(args.record, code)
    command = shlex.join(
        [
            "python3",
            "scripts/table3_study_02.py",
            *(sys.argv[1:] if argv is None else argv),
        ]
    )
    resumed = journaled(journal, trials, run_identity(run, context))
    name = "table 3 sanity arm" if args.sanity else "table 3 study"
    starts = "the truth + noise" if args.sanity else f"{args.repeats} starts"
    settings = study.SANITY_SETTINGS if args.sanity else study.SETTINGS
    print(
        f"{name}: {len(trials)} trials ({len(images)} samples × {starts} × "
        f"{len(settings)} settings × {len(study.KINDS)} kinds); {resumed} already in {journal.name}",
        flush=True,
    )
    start = time.perf_counter()
    outcomes = run_trials(
        run,
        trials,
        context=context,
        engine=args.engine,
        num_cpus=args.cpus,
        progress=True,
        journal=journal,
        decode=lambda value: value,
    )
    wall = time.perf_counter() - start
    if report_failures(outcomes, "table3_study_02", args.record, journal, command):
        return 1
    record = {
        "study": "02_table3_sanity" if args.sanity else "02_table3",
        "setting": context,
        "images": images,
        **({} if args.sanity else {"repeats": args.repeats}),
        "controls": controls(context, images),
        "trials": [
            {**o.trial, "value": o.value, "seconds": round(o.seconds, 2)}
            for o in outcomes
        ],
        "provenance": {
            "commit": commit,
            "dirty": dirty,
            "machine": device_description("cpu", 1)
            + f", {args.cpus} {WORKERS[args.engine]}",
            "threads": {
                "torch": 1,
                "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            },
            "torch": torch.__version__,
            "python": platform.python_version(),
            "command": command,
            "wall_seconds": round(wall),
            "trials": len(trials),
            "failed": 0,
            "resumed_trials": resumed,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC"
            ),
        },
    }
    write_json(args.record, record)
    remove_journal(journal)
    print(
        f"{name}: {len(trials)} trials in {wall:.0f} s ({resumed} from the journal) -> {args.record}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
