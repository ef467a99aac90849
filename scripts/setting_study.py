"""Run chapter 04's setting study (gitutor.studies.setting_study) on Ray and record it.

    python scripts/setting_study.py --phase curves    # base and random weights, 5 000 iterations
    python scripts/setting_study.py --phase factors   # prior weights, BatchNorm mode: 1 000
    python scripts/setting_study.py --phase scale     # architecture, resolution, batch size
    python scripts/setting_study.py --phase base      # the base at 1 000, their reference
    python scripts/setting_study.py --phase scale2   # 96 and 128 px, B = 2: 1 000
    python scripts/setting_study.py --phase gpu --device cuda --engine processes --cpus 9
                                                      # the base at 2 000, on a GPU without Ray

Each phase adds its trials to book/studies/04_setting_study.json with provenance: commit, device,
torch version, command, wall time per phase. The record is replaced (atomically) only when every
trial of the phase succeeded; otherwise the script names each failed trial with its error, leaves
the record byte-identical and exits 1. Every finished trial is kept at once in a journal beside the
record (``04_setting_study.<phase>.<device>.<commit>.journal.jsonl``, removed once the phase is recorded):
after a failure, Ctrl-C or a machine taken back, **rerun the same command** and only the missing
trials run (``resumed_trials`` in the phase's provenance says how many came from the journal; its
``wall_seconds`` are those of the last run). The device is checked before any trial starts, and the
trained substitutes must exist (scripts/train_substitute.py). The book page
book/setting_study.ipynb renders the record.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from record import device_description

from gitutor import cli
from gitutor.files import read_json, write_json
from gitutor.journal import Journal, trial_key
from gitutor.models.substitute import substitute_path
from gitutor.seeding import resolve_device
from gitutor.studies import setting_study as study
from gitutor.sweeps import ENGINES, run_trials

RECORD = ROOT / "book" / "studies" / "04_setting_study.json"
#: phase → (iterations, [(settings, methods), …]): the budget curves to 5 000 iterations of the
#: base and its random-weight twin; the prior weights and BatchNorm mode at 1 000 iterations;
#: then the factors of scale (architecture, resolution, batch size) at 1 000 iterations, where a
#: trial costs 2–5× more and two cores cannot afford GradInversion too (the page says so).
_SCALE = ("architecture", "resolution", "batch size")
_FIRST_SCALE = [study.Setting(architecture="resnet34"), study.Setting(image_size=64),
                study.Setting(batch_size=4)]  # the "scale" phase; "scale2" runs the rest of _SCALE
PHASES = {
    "curves": (5000, [([study.BASE, *study.FACTORS["weights"]], study.METHODS)]),
    "factors": (1000, [(group, study.METHODS) for name, group in study.FACTORS.items()
                       if name not in ("weights", *_SCALE)]),
    "scale": (1000, [(_FIRST_SCALE, ("Inverting Gradients", "Stepwise"))]),
    "scale2": (1000, [([s for name in _SCALE for s in study.FACTORS[name] if s not in _FIRST_SCALE],
                        ("Inverting Gradients", "Stepwise"))]),
    # the reference of the 1 000-iteration factors: the base with its lr schedule over 1 000
    "base": (1000, [([study.BASE], study.METHODS)]),
    # the base on a GPU, one process per trial (recorded on an H200 with --iterations 2000)
    "gpu": (2000, [([study.BASE], study.METHODS)]),
}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()


def _plain(value: dict) -> dict:
    """A trial's output as JSON: images as uint8 nested lists."""
    images = (value["images"].clamp(0, 1) * 255).round().byte()
    return {"curve": value["curve"], "images": images.tolist(), "seconds": value["seconds"]}


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=sorted(PHASES), required=True)
    parser.add_argument("--cpus", type=cli.positive_int, default=2, help="workers (one CPU each)")
    parser.add_argument("--engine", choices=ENGINES, default="ray",
                        help="gitutor.sweeps engine: Ray, worker processes where Ray is missing, or local")
    parser.add_argument("--device", type=cli.device, default="cpu", help="torch device of every trial, e.g. cuda")
    parser.add_argument("--iterations", type=cli.positive_int, help="instead of the phase's budget (a short check)")
    parser.add_argument("--commit", type=cli.commit,
                        help="the commit of a tree copied without .git (recorded as given)")
    parser.add_argument("--record", type=Path, default=RECORD, help="the record to add the phase to")
    args = parser.parse_args(argv)
    iterations, groups = PHASES[args.phase]
    iterations = args.iterations if args.iterations is not None else iterations
    trials = [t for settings, methods in groups
              for t in study.study_trials(settings, iterations, methods=methods)]
    paths = {name: str(substitute_path(name)) for name in ("resnet20", "resnet34")}
    missing = sorted({paths[t["setting"].architecture] for t in trials if t["setting"].weights == "trained"
                      and not Path(paths[t["setting"].architecture]).is_file()})
    if missing:
        parser.error(f"no trained substitute {', '.join(missing)}: run `make substitutes` first")
    try:
        record = read_json(args.record, "setting-study record") if args.record.is_file() else \
            {"trials": [], "phases": {}}
    except ValueError as error:  # never overwrite a record that cannot be read
        parser.error(str(error))
    if args.commit:  # a copy of the tree without .git (a lent GPU machine): committed before the copy
        commit, dirty = args.commit, None
    else:
        commit, dirty = _git("rev-parse", "HEAD"), bool(_git("status", "--porcelain", "gitutor"))
    device = str(resolve_device(args.device))
    code = commit[:12] + (f"+{hashlib.sha256(_git('diff', 'HEAD', '--', 'gitutor').encode()).hexdigest()[:8]}"
                          if dirty else "")  # a rerun resumes only with the same code
    journal = journal_path(args.record, args.phase, device, code)
    command = shlex.join(["python3", "scripts/setting_study.py", *(sys.argv[1:] if argv is None else argv)])
    resumed = len({trial_key(t) for t in trials} & set(Journal(journal, decode=lambda v: v).read()))
    if resumed:
        print(f"{args.phase}: {resumed} of {len(trials)} trials already done ({journal.name}); running the rest")
    start = time.perf_counter()
    outcomes = run_trials(study.trial, trials, context={"weights": paths, "device": device},
                          engine=args.engine, num_cpus=args.cpus, progress=True,
                          journal=journal, encode=_plain, decode=lambda value: value)
    wall = time.perf_counter() - start
    failed = [o for o in outcomes if not o.ok]
    if failed:
        for outcome in failed:
            print(f"  trial {outcome.trial}: {outcome.error}", file=sys.stderr)
        print(f"setting_study: {len(failed)} of {len(trials)} trials of phase {args.phase} failed (above); "
              f"{args.record} is unchanged; the {len(trials) - len(failed)} finished trials are kept in "
              f"{journal}: rerun `{command}` (same commit) to run only the rest", file=sys.stderr)
        return 1
    workers = {"ray": "Ray workers", "processes": "worker processes", "local": "process"}[args.engine]
    record["trials"] = [t for t in record["trials"] if t["phase"] != args.phase]
    record["trials"] += [{"phase": args.phase, "trial": {**o.trial, "setting": asdict(o.trial["setting"])},
                          "value": o.value, "error": None} for o in outcomes]
    record["phases"][args.phase] = {
        "commit": commit, "dirty": dirty,
        "device": device_description(device, 1) + f", {args.cpus} {workers}",
        "torch": torch.__version__, "python": platform.python_version(),
        "command": command,
        "wall_seconds": round(wall), "iterations": iterations, "trials": len(trials), "failed": 0,
        "resumed_trials": resumed,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "substitutes": {name: read_json(Path(p).with_suffix(".json"), "substitute log")["sha256"]
                        for name, p in paths.items() if Path(p).is_file()}}
    write_json(args.record, record)
    journal.unlink()
    print(f"{args.phase}: {len(trials)} trials in {wall:.0f} s ({resumed} from the journal) -> {args.record}")
    return 0


def journal_path(record: Path, phase: str, device: str, code: str) -> Path:
    """The journal of a phase run on ``device`` with the code ``code`` (commit, and a digest of
    uncommitted changes), beside the record; removed once the phase is recorded."""
    return record.with_name(f"{record.stem}.{phase}.{device.replace(':', '-')}.{code}.journal.jsonl")


if __name__ == "__main__":
    sys.exit(main())
