"""Run chapter 01's defense study (gitutor.chapters.dlg.defense_study) and record it.

    python3 scripts/defense_study_01.py                       # all 20 CIFAR-100 samples, 300 steps
    python3 scripts/defense_study_01.py --images 10           # the first 10 samples
    python3 scripts/defense_study_01.py --engine processes --cpus 2   # one worker process per core
    python3 scripts/defense_study_01.py --restarts            # restart every run of the record that stalled

One trial per (defense, level, image): DLG (gitutor.attacks.dlg, label unknown, 300 L-BFGS steps, no stop rule)
on the DLG LeNet and foolbox's CIFAR-100 sample, its gradient undefended, pruned at DLG Fig. 7's ratios, or
with Gaussian or Laplacian noise of DLG §5's variances (defense_study.study_trials: 15 levels per image). The
record, book/studies/01_defenses.json, holds every trial's PSNR, SSIM, gradient distances (the run's last, the
truth's), its PSNR curve every 10 steps and its reconstruction, each image's know-nothing controls
(defense_study.image_controls) and gradient scale, and the provenance: commit, torch, machine, threads,
command, wall time. Chapter 01 reads it (gitutor.chapters.dlg.defense_reading).

The record is written (atomically) only when every trial succeeded; a failed trial is a failure: the script
names it with its error, leaves the record byte-identical and exits 1. Every finished trial is kept at once
in a journal beside the record (01_defenses.<commit>.journal.jsonl; removed once the record is written), and
a running trial saves its L-BFGS state every 100 steps (<journal>.checkpoints/): after a failure, Ctrl-C or a
reboot, **rerun the same command at the same commit** and only the missing trials run (resumed_trials in the
provenance says how many came from the journal; wall_seconds are those of the last run). Commit first: the
record names the commit, and a rerun with other code starts afresh.

``--restarts`` reads the record and runs each trial whose run stalled (final gradient distance ≥
defense_reading.STALL_FACTOR × the truth's) on an image DLG recovers without a defense (the images a level is
judged on) once more from a new dummy (defense_study.trial with start 1),
writing book/studies/01_defenses_restarts.json with its provenance and the commit of the record it restarts
(``of``); the chapter keeps, per trial, the start of lower final distance (defense_reading.with_restarts).

One 32×32 L-BFGS step of dlg costs about 0.2 s of one core: the 300 trials of 20 images take at most
15 × 20 × 300 × 0.2 s ≈ 5 CPU hours (less: a run at a fixed point of L-BFGS stops computing).
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
from gitutor.chapters.dlg import defense_study as study
from gitutor.chapters.dlg.sweeps import dlg_case, gradient_scale
from gitutor.federated import client_gradients
from gitutor.files import write_json
from gitutor.identity import run_identity
from gitutor.sweeps import ENGINES, run_trials

RECORD = ROOT / "book" / "studies" / "01_defenses.json"
RESTARTS = ROOT / "book" / "studies" / "01_defenses_restarts.json"


def journal_path(record: Path, code: str) -> Path:
    """The journal of a study run with the code ``code`` (commit, and a digest of uncommitted changes), beside
    the record; removed once the record is written."""
    return record.with_name(f"{record.stem}.{code}.journal.jsonl")


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line, checked before anything runs (argparse exits naming the argument)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=cli.positive_int, default=study.SAMPLES,
                        help=f"attack the first N of the {study.SAMPLES} CIFAR-100 samples (at least 10)")
    parser.add_argument("--iterations", type=cli.positive_int, default=study.SETTING["iterations"],
                        help="L-BFGS steps (other than the paper's 300 only with --record elsewhere: a short check)")
    parser.add_argument("--engine", choices=ENGINES, default="local",
                        help="gitutor.sweeps engine: this process, worker processes or Ray")
    parser.add_argument("--cpus", type=cli.positive_int, default=1, help="workers (one CPU, one thread each)")
    parser.add_argument("--record", type=Path, default=RECORD, help=f"the record to write (default {RECORD})")
    parser.add_argument("--restarts", action="store_true",
                        help=f"restart the record's stalled runs into {RESTARTS.name} beside it")
    args = parser.parse_args(argv)
    if not 10 <= args.images <= study.SAMPLES:
        parser.error(f"argument --images: the study attacks 10 to {study.SAMPLES} samples, got {args.images}")
    default = args.record.resolve() == RECORD.resolve()
    if default and args.iterations != study.SETTING["iterations"]:
        parser.error(f"argument --iterations: {RECORD.name} is the book's record of the paper's "
                     f"{study.SETTING['iterations']} steps; give --record elsewhere for a short check")
    if args.restarts:
        if not args.record.is_file():
            parser.error(f"argument --restarts: no study record at {args.record}; record the study first")
        problem = record_problem(args.record.with_name(RESTARTS.name))
    else:
        problem = record_problem(args.record)
    if problem:
        parser.error(f"argument --record: {problem}")
    return args


def _provenance(commit, dirty, args, command, wall, trials, resumed):
    import torch

    return {
        "commit": commit, "dirty": dirty,
        "machine": device_description("cpu", 1) + f", {args.cpus} {WORKERS[args.engine]}",
        "threads": {"torch": 1, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")},
        "torch": torch.__version__, "python": platform.python_version(),
        "command": command, "wall_seconds": round(wall), "trials": trials, "failed": 0,
        "resumed_trials": resumed,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def restart(args, command: str) -> int:
    """Run every stalled trial of the record once more from start 1 and write the restart record."""
    from gitutor.chapters.dlg import defense_reading as reading

    record = reading.read_study(args.record)
    out = args.record.with_name(RESTARTS.name)
    # the images DLG recovers without a defense: the only ones a level is judged on
    summary = reading.summarise(record)
    none = summary["none", 0.0]
    judged = {i for i, o in zip(none.images, none.outcomes) if o == "recovered"}
    trials = [{"kind": t["kind"], "level": t["level"], "image": t["image"], "start": 1}
              for t in record["trials"] if t["image"] in judged and reading.stalled_run(t["value"])]
    commit, dirty, code = code_version(ROOT)
    journal = journal_path(out, code)
    resumed = journaled(journal, trials, run_identity(study.trial, record["setting"]))
    print(f"defense study restarts: {len(trials)} stalled runs of {args.record.name}; {resumed} already in "
          f"{journal.name}", flush=True)
    start = time.perf_counter()
    outcomes = run_trials(study.trial, trials, context=record["setting"], engine=args.engine,
                          num_cpus=args.cpus, progress=True, journal=journal, decode=lambda value: value)
    wall = time.perf_counter() - start
    if report_failures(outcomes, "defense_study_01", out, journal, command):
        return 1
    write_json(out, {
        "study": "01_defenses_restarts",
        "of": record["provenance"]["commit"],
        "setting": record["setting"],
        "stall_factor": reading.STALL_FACTOR,
        "trials": [{**o.trial, "value": o.value, "seconds": round(o.seconds, 2)} for o in outcomes],
        "provenance": _provenance(commit, dirty, args, command, wall, len(trials), resumed),
    })
    remove_journal(journal)
    print(f"defense study restarts: {len(trials)} trials in {wall:.0f} s -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    import torch

    args = parse(argv)
    torch.set_num_threads(1)  # LeNet-sized work: one thread per trial, the same numbers on any machine
    command = shlex.join(["python3", "scripts/defense_study_01.py", *(sys.argv[1:] if argv is None else argv)])
    if args.restarts:
        return restart(args, command)
    context = dict(study.SETTING, iterations=args.iterations)
    images = list(range(args.images))
    trials = study.study_trials(images)
    commit, dirty, code = code_version(ROOT)
    journal = journal_path(args.record, code)
    resumed = journaled(journal, trials, run_identity(study.trial, context))
    print(f"defense study: {len(trials)} trials ({len(images)} images × {len(trials) // len(images)} levels, "
          f"{args.iterations} steps); "
          f"{resumed} already in {journal.name}", flush=True)
    start = time.perf_counter()
    outcomes = run_trials(study.trial, trials, context=context, engine=args.engine, num_cpus=args.cpus,
                          progress=True, journal=journal, decode=lambda value: value)
    wall = time.perf_counter() - start
    if report_failures(outcomes, "defense_study_01", args.record, journal, command):
        return 1
    scales = []
    for image in range(study.SAMPLES):
        model, x, y = dlg_case(image, size=context["size"], source=context["source"],
                               num_classes=context["num_classes"])
        scales.append(gradient_scale(client_gradients(model, x, y)))
    record = {
        "study": "01_defenses",
        "setting": context,
        "images": images,
        "levels": {kind: list(levels) for kind, levels in study.LEVELS.items()},
        "controls": study.image_controls(context["size"]),
        "gradient_scale": scales,
        "trials": [{**o.trial, "value": o.value, "seconds": round(o.seconds, 2)} for o in outcomes],
        "provenance": _provenance(commit, dirty, args, command, wall, len(trials), resumed),
    }
    write_json(args.record, record)
    remove_journal(journal)
    print(f"defense study: {len(trials)} trials in {wall:.0f} s ({resumed} from the journal) -> {args.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
