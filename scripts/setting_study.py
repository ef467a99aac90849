"""Run chapter 04's setting study (gitutor.studies.setting_study) on Ray and record it.

    python scripts/setting_study.py --phase curves    # base and random weights, 5 000 iterations
    python scripts/setting_study.py --phase factors   # prior weights, BatchNorm mode: 1 000
    python scripts/setting_study.py --phase scale     # architecture, resolution, batch size
    python scripts/setting_study.py --phase base      # the base at 1 000, their reference
    python scripts/setting_study.py --phase scale2   # 96 and 128 px, B = 2: 1 000
    python scripts/setting_study.py --phase gpu --device cuda --engine processes --cpus 9
                                                      # the base at 2 000, on a GPU without Ray

Each phase adds its trials to book/studies/04_setting_study.json (rewritten after the phase)
with provenance: commit, device, torch version, command, wall time per phase. The trained
substitutes must exist (scripts/train_substitute.py). The book page
book/setting_study.ipynb renders the record.
"""
from __future__ import annotations

import argparse
import datetime
import json
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

from record import device_description  # noqa: E402

from gitutor.models.substitute import substitute_path  # noqa: E402
from gitutor.studies import setting_study as study  # noqa: E402
from gitutor.sweeps import run_trials  # noqa: E402

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


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=sorted(PHASES), required=True)
    parser.add_argument("--cpus", type=int, default=2, help="workers (one CPU each)")
    parser.add_argument("--engine", choices=("ray", "processes"), default="ray",
                        help="gitutor.sweeps engine: Ray, or worker processes where Ray is missing")
    parser.add_argument("--device", default="cpu", help="torch device of every trial, e.g. cuda")
    parser.add_argument("--iterations", type=int, help="instead of the phase's budget (a short check)")
    parser.add_argument("--commit", help="the commit of a tree copied without .git (recorded as given)")
    args = parser.parse_args()
    iterations, groups = PHASES[args.phase]
    iterations = args.iterations or iterations
    trials = [t for settings, methods in groups
              for t in study.study_trials(settings, iterations, methods=methods)]
    paths = {name: str(substitute_path(name)) for name in ("resnet20", "resnet34")}
    if args.commit:  # a copy of the tree without .git (a lent GPU machine): committed before the copy
        commit, dirty = args.commit, None
    else:
        commit, dirty = _git("rev-parse", "HEAD"), bool(_git("status", "--porcelain", "gitutor"))
    start = time.perf_counter()
    outcomes = run_trials(study.trial, trials, context={"weights": paths, "device": args.device},
                          engine=args.engine, num_cpus=args.cpus, progress=True)
    wall = time.perf_counter() - start
    workers = "Ray workers" if args.engine == "ray" else "worker processes"
    record = json.loads(RECORD.read_text()) if RECORD.is_file() else {"trials": [], "phases": {}}
    record["trials"] = [t for t in record["trials"] if t["phase"] != args.phase]
    record["trials"] += [{"phase": args.phase, "trial": {**o.trial, "setting": asdict(o.trial["setting"])},
                          "value": _plain(o.value) if o.ok else None, "error": o.error}
                         for o in outcomes]
    record["phases"][args.phase] = {
        "commit": commit, "dirty": dirty,
        "device": device_description(args.device, 1) + f", {args.cpus} {workers}",
        "torch": torch.__version__, "python": platform.python_version(),
        "command": shlex.join(["python3", "scripts/setting_study.py", *sys.argv[1:]]),
        "wall_seconds": round(wall), "iterations": iterations, "trials": len(trials),
        "failed": sum(not o.ok for o in outcomes),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "substitutes": {name: json.loads(Path(p).with_suffix(".json").read_text())["sha256"]
                        for name, p in paths.items() if Path(p).is_file()}}
    RECORD.write_text(json.dumps(record) + "\n")
    print(f"{args.phase}: {len(trials)} trials in {wall:.0f} s, "
          f"{record['phases'][args.phase]['failed']} failed -> {RECORD.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
