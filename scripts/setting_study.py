"""Run chapter 04's setting study (gitutor.studies.setting_study) and record it.

    python scripts/setting_study.py --phase base         # the base, three methods, 1 000 iterations
    python scripts/setting_study.py --phase width        # ResNet-20 (16, 64), ResNet34: 1 000
    python scripts/setting_study.py --phase width64      # CIFAR ResNet-18 of width 64 (IG, stepwise)
    python scripts/setting_study.py --phase statistics   # calibrated and trained BN statistics
    python scripts/setting_study.py --phase priors       # prior scale ×0, ×0.001, ×0.1, ×1
    python scripts/setting_study.py --phase batch        # B = 8 (IG, stepwise; B = 4: chapter 04's recording)

Each phase adds its trials to book/studies/04_setting_study.json (rewritten after the phase)
with provenance: commit, device, torch version, command, wall time per phase. The book page
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
_F = study.FACTORS
#: phase → (iterations, [(settings, methods), …]), one factor (or a costly part of one) each.
PHASES = {
    "base": (1000, [([study.BASE], study.METHODS)]),
    "width": (1000, [([s for s in _F["width and architecture"] if s.width != 64 or s.architecture != "cifar_resnet18"],
                      study.METHODS)]),
    "width64": (1000, [([s for s in _F["width and architecture"] if s.width == 64 and s.architecture == "cifar_resnet18"],
                        ("Inverting Gradients", "Stepwise"))]),
    "statistics": (1000, [(_F["BatchNorm statistics"] + _F["trained weights"], study.METHODS)]),
    # the prior scale does not reach Inverting Gradients (its own α_TV, every setting); GradInversion
    # without priors is Table 2's ℓ_grad row of chapter 04
    "priors": (1000, [(_F["prior scale"], ("Stepwise",)),
                      ([s for s in _F["prior scale"] if s.prior_scale > 0], ("GradInversion",))]),
    # B = 4 is chapter 04's recording (the base network, five batches, its own budget)
    "batch": (1000, [(_F["batch size"], ("Inverting Gradients", "Stepwise"))]),
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
    paths = {"resnet20": str(substitute_path("resnet20"))}  # the trained substitute (ships)
    if args.commit:  # a copy of the tree without .git (a lent GPU machine): committed before the copy
        commit, dirty = args.commit, None
    else:
        commit, dirty = _git("rev-parse", "HEAD"), bool(_git("status", "--porcelain", "gitutor"))
    start = time.perf_counter()
    outcomes = run_trials(study.trial, trials, context={"weights": paths["resnet20"], "device": args.device},
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
