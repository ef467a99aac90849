"""Run chapter 04's setting study (gitutor.chapters.stepwise_gradinversion.setting_study) and record it.

    python scripts/setting_study.py --phase base         # the base, three methods, 1 000 iterations
    python scripts/setting_study.py --phase width        # ResNet-20 (16, 64), ResNet34 (IG, stepwise)
    python scripts/setting_study.py --phase width64      # CIFAR ResNet-18 of width 64 (IG, stepwise)
    python scripts/setting_study.py --phase statistics   # calibrated and trained BN statistics
    python scripts/setting_study.py --phase priors       # prior scale ×0 … ×1 (GradInversion: ×0.1, ×1)
    python scripts/setting_study.py --phase batch        # B = 8 (IG, stepwise; B = 4: chapter 04's recording)
    python scripts/setting_study.py --phase trained --engine processes        # trained network, B = 1, 1 000
    python scripts/setting_study.py --phase trained_table --engine processes  # its Table 1, B = 4, 1 000

The last two attack ImageNet-trained EfficientNet-Lite0 with the ImageNet samples and their true labels at
96 px (``setting_study.trained``) and go to book/studies/04_trained_network.json. The native recording attacks
it at its training resolution, 224 px, each method as its authors configure it (``setting_study.native``), and
goes to book/studies/04_native.json:

    python scripts/setting_study.py --phase native_sanity --engine processes --cpus 2  # truth + noise start
    python scripts/setting_study.py --phase native --engine processes --cpus 2         # 10 000 iterations

Its trials save their whole state every 100 iterations (``gitutor.checkpoints``) beside the journal
(``<journal>.checkpoints/``): a killed run loses at most 100 iterations of each running trial.

Each phase adds its trials to book/studies/04_setting_study.json with provenance: commit, device,
torch version, command, wall time per phase. The record is replaced (atomically) only when every
trial of the phase succeeded; otherwise the script names each failed trial with its error, leaves
the record byte-identical and exits 1. Every finished trial is kept at once in a journal beside the
record (``04_setting_study.<phase>.<device>.<commit>.journal.jsonl``, removed once the phase is recorded):
after a failure, Ctrl-C or a machine taken back, **rerun the same command** and only the missing
trials run (``resumed_trials`` in the phase's provenance says how many came from the journal; its
``wall_seconds`` are those of the last run). The device is checked before any trial starts, and the
trained ResNet-20 substitute (it ships with gitutor) must exist. The book page
book/setting_study.ipynb renders the record.

Phases run in different checkouts (one core each) write different records; ``--merge OTHER`` adds
every phase recorded in OTHER — its trials and its provenance, as recorded — to the record (a phase
present in both is taken from OTHER), without running anything:

    python scripts/setting_study.py --merge ../run-04/book/studies/04_trained_network.json \
        --record book/studies/04_trained_network.json
"""
from __future__ import annotations

import argparse
import datetime
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

from journaled import WORKERS, code_version, git, journaled, remove_journal, report_failures
from record import device_description

from gitutor import cli
from gitutor.chapters.stepwise_gradinversion import setting_study as study
from gitutor.chapters.stepwise_gradinversion.setting_study import native, trained
from gitutor.files import read_json, write_json
from gitutor.identity import run_identity
from gitutor.models.substitute import substitute_path
from gitutor.seeding import resolve_device
from gitutor.sweeps import ENGINES, run_trials

RECORD = ROOT / "book" / "studies" / "04_setting_study.json"
#: The trained network's phases (gitutor.chapters.stepwise_gradinversion.setting_study.trained) go here.
TRAINED_RECORD = ROOT / "book" / "studies" / "04_trained_network.json"
#: The native recording (gitutor.chapters.stepwise_gradinversion.setting_study.native) goes here.
NATIVE_RECORD = ROOT / "book" / "studies" / "04_native.json"
_F = study.FACTORS
#: phase → (iterations, [(settings, methods), …]), one factor (or a costly part of one) each.
PHASES = {
    "base": (1000, [([study.BASE], study.METHODS)]),
    # GradInversion is left out of the factors of scale (two cores could not afford it there too)
    "width": (1000, [([s for s in _F["width and architecture"] if s.width != 64 or s.architecture != "cifar_resnet18"],
                      ("Inverting Gradients", "Stepwise"))]),
    "width64": (1000, [([s for s in _F["width and architecture"] if s.width == 64 and s.architecture == "cifar_resnet18"],
                        ("Inverting Gradients", "Stepwise"))]),
    "statistics": (1000, [(_F["BatchNorm statistics"] + _F["trained weights"], study.METHODS)]),
    # the prior scale does not reach Inverting Gradients (its own α_TV, every setting); GradInversion
    # without priors is Table 2's ℓ_grad row of chapter 04
    "priors": (1000, [(_F["prior scale"], ("Stepwise",)),
                      ([s for s in _F["prior scale"] if s.prior_scale >= 0.1], ("GradInversion",))]),
    # B = 4 is chapter 04's recording (the base network, five batches, its own budget)
    "batch": (1000, [(_F["batch size"], ("Inverting Gradients", "Stepwise"))]),
}
_T = trained.TrainedSetting
#: The trained network (EfficientNet-Lite0, ImageNet statistics, true labels, 96 px): the study set
#: at B = 1 (R_BN on / off, λ_BN × 10, the authors' options; about 1 h of one core), then Table 1 on the other 16
#: photographs (four batches of four). Their trials run trained.trial and go to TRAINED_RECORD.
TRAINED_PHASES = {
    "trained": (1000, [([_T()], study.METHODS), ([_T(bn_scale=0.0)], ("GradInversion", "Stepwise")),
                       ([_T(bn_scale=10.0)], ("Stepwise",)), ([_T(options="authors")], ("Stepwise",))]),
    "trained_table": (1000, [([_T(split="table")], trained.TABLE_METHODS)]),
}


_N = native.NativeSetting
#: The learning rate of the native recording (normalised units): the largest of 0.1 (the authors'), 0.01 and
#: 0.001 at which every method's sanity arm stays at the photograph (PSNR ≥ 30 dB after 300 iterations from
#: the truth plus σ = 0.01 noise) on the tuning photograph, which the recording does not score (phase
#: native_lr; at 0.1 and 0.01 Inverting Gradients walks away).
NATIVE_LR = 0.001
#: The native recording: EfficientNet-Lite0 at 224 px, B = 1, three study photographs, each method as its
#: authors configure it. The sanity arm (the truth plus σ = 0.01 noise as the start) at the authors' learning
#: rate and at NATIVE_LR; the learning-rate choice on the tuning photograph; then the attack.
NATIVE_PHASES = {
    "native_sanity": (500, [([_N(start_noise=native.SANITY_SIGMA)], native.METHODS)]),
    "native_sanity_tuned": (500, [([_N(start_noise=native.SANITY_SIGMA, lr=NATIVE_LR)], native.METHODS)]),
    "native_lr": (300, [([_N(start_noise=native.SANITY_SIGMA, lr=lr) for lr in (0.1, 0.01, 0.001)],
                         native.METHODS)]),
    "native": (10_000, [([_N(lr=NATIVE_LR)], native.METHODS)]),
}


def _plain(value: dict) -> dict:
    """A trial's output as JSON: images as uint8 nested lists."""
    images = (value["images"].clamp(0, 1) * 255).round().byte()
    return {"curve": value["curve"], "images": images.tolist(), "seconds": value["seconds"]}


def _trained_plain(value: dict) -> dict:
    """A trained-network (or native) trial's output as JSON: images as base64 PNGs (trained.encode_images)."""
    return {**value, "images": trained.encode_images(value["images"])}


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=sorted(PHASES) + sorted(TRAINED_PHASES) + sorted(NATIVE_PHASES))
    parser.add_argument("--merge", type=Path, metavar="OTHER",
                        help="add the phases recorded in OTHER to --record instead of running a phase")
    parser.add_argument("--cpus", type=cli.positive_int, default=2, help="workers (one CPU each)")
    parser.add_argument("--engine", choices=ENGINES, default="ray",
                        help="gitutor.sweeps engine: Ray, worker processes where Ray is missing, or local")
    parser.add_argument("--device", type=cli.device, default="cpu", help="torch device of every trial, e.g. cuda")
    parser.add_argument("--iterations", type=cli.positive_int, help="instead of the phase's budget (a short check)")
    parser.add_argument("--commit", type=cli.existing_commit(ROOT),
                        help="the commit of a tree copied without .git (checked where git knows it; "
                             "its full 40-digit id otherwise)")
    parser.add_argument("--record", type=Path, help="the record to add the phase to (default: "
                        f"{RECORD.name}, {TRAINED_RECORD.name} for the trained network's phases)")
    args = parser.parse_args(argv)
    if (args.phase is None) == (args.merge is None):
        parser.error("give either --phase (run a phase) or --merge OTHER (add OTHER's phases)")
    if args.merge is not None:
        if args.iterations is not None or args.commit is not None:
            parser.error("--iterations and --commit belong to a run; --merge runs nothing")
        if args.record is None:  # no default: a merge writes only the record it is asked to
            parser.error("--merge needs --record RECORD, the record to add OTHER's phases to")
        return merge(parser, args.merge, args.record)
    is_trained, is_native = args.phase in TRAINED_PHASES, args.phase in NATIVE_PHASES
    trial_function, encode = ((native.trial, _trained_plain) if is_native else (trained.trial, _trained_plain)
                              if is_trained else (study.trial, _plain))
    args.record = args.record or (NATIVE_RECORD if is_native else TRAINED_RECORD if is_trained else RECORD)
    iterations, groups = (NATIVE_PHASES if is_native else TRAINED_PHASES if is_trained else PHASES)[args.phase]
    iterations = args.iterations if args.iterations is not None else iterations
    if is_native:
        photographs = (native.TUNING_PHOTOGRAPH,) if args.phase == "native_lr" else native.PHOTOGRAPHS
        trials = [t for settings, methods in groups for t in native.study_trials(settings, iterations, methods,
                                                                                photographs)]
    else:
        trials = [t for settings, methods in groups for t in study.study_trials(
            settings, iterations, methods=methods, batches=settings[0].batches() if is_trained else 3)]
    paths = {"resnet20": str(substitute_path("resnet20"))}  # the trained substitute (ships)
    missing = sorted({paths["resnet20"] for t in trials if getattr(t["setting"], "weights", "") == "trained"
                      and not Path(paths["resnet20"]).is_file()})
    if missing:
        parser.error(f"no trained substitute {', '.join(missing)}: run `make substitutes` first")
    try:
        record = read_json(args.record, "setting-study record") if args.record.is_file() else \
            {"trials": [], "phases": {}}
    except ValueError as error:  # never overwrite a record that cannot be read
        parser.error(str(error))
    problem = record_problem(args.record, record)
    if problem:  # checked before any trial runs: the record is written only at the end
        parser.error(f"argument --record: {problem}")
    inside = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT, capture_output=True).returncode == 0
    if args.commit and inside:  # git knows what runs (and whether the tree is dirty): --commit would hide it
        parser.error(f"argument --commit: this checkout is a git repository (HEAD is {git(ROOT, 'rev-parse', 'HEAD')}); "
                     "--commit names the commit of a tree copied without .git")
    if args.commit:  # a copy of the tree without .git (a lent GPU machine): committed before the copy
        commit, dirty = args.commit, None
    else:
        commit, dirty, code = code_version(ROOT)
    device = str(resolve_device(args.device))
    journal = journal_path(args.record, args.phase, device, code)
    command = shlex.join(["python3", "scripts/setting_study.py", *(sys.argv[1:] if argv is None else argv)])
    run = run_identity(trial_function, {"weights": paths["resnet20"], "device": device})
    resumed = journaled(journal, trials, run)
    if resumed:
        print(f"{args.phase}: {resumed} of {len(trials)} trials already done ({journal.name}); running the rest")
    start = time.perf_counter()
    outcomes = run_trials(trial_function, trials, context={"weights": paths["resnet20"], "device": device},
                          engine=args.engine, num_cpus=args.cpus, progress=True,
                          journal=journal, encode=encode, decode=lambda value: value)
    wall = time.perf_counter() - start
    if report_failures(outcomes, f"setting_study (phase {args.phase})", args.record, journal, command):
        return 1
    workers = WORKERS[args.engine]
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
    remove_journal(journal)
    print(f"{args.phase}: {len(trials)} trials in {wall:.0f} s ({resumed} from the journal) -> {args.record}")
    return 0


def merge(parser: argparse.ArgumentParser, other: Path, target: Path) -> int:
    """Add every phase recorded in ``other`` (trials and provenance, unchanged) to the record at
    ``target`` (a new one if absent); a phase present in both is replaced by ``other``'s. Both records
    are checked before anything is written; the target is replaced atomically."""
    if other.resolve() == target.resolve():
        parser.error(f"argument --merge: {other} is the record itself")
    try:
        incoming = read_json(other, "setting-study record")
        record = read_json(target, "setting-study record") if target.is_file() else {"trials": [], "phases": {}}
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    for path, found in ((other, incoming), (target, record)):
        problem = record_problem(path, found)
        if problem:
            parser.error(f"argument {'--merge' if path is other else '--record'}: {problem}")
    phases = sorted(incoming["phases"])
    if not phases or {t.get("phase") for t in incoming["trials"]} != set(phases):
        parser.error(f"argument --merge: {other} holds no recorded phase, or trials of a phase without provenance")
    families = {family(p) for p in [*phases, *record["phases"]]}
    if None in families or len(families) > 1:
        parser.error(f"argument --merge: the phases {', '.join(phases)} of {other} and "
                     f"{', '.join(record['phases']) or 'none'} of {target} are not phases of one study record "
                     f"({', '.join(sorted(PHASES))} | {', '.join(sorted(TRAINED_PHASES))} | "
                     f"{', '.join(sorted(NATIVE_PHASES))})")
    for phase in phases:
        provenance = incoming["phases"][phase]
        missing = sorted(set(PROVENANCE) - set(provenance if isinstance(provenance, dict) else {}))
        count = sum(t.get("phase") == phase for t in incoming["trials"])
        if missing or provenance.get("trials") != count or provenance.get("failed") != 0:
            parser.error(f"argument --merge: phase {phase} of {other} is not a whole recorded phase (provenance "
                         f"{'lacks ' + ', '.join(missing) if missing else 'counts other trials'}; {count} trials)")
    record["trials"] = [t for t in record["trials"] if t["phase"] not in phases] + incoming["trials"]
    record["phases"].update({p: incoming["phases"][p] for p in phases})
    write_json(target, record)
    print(f"merged phase(s) {', '.join(phases)} of {other} into {target}")
    return 0


def family(phase: str) -> str | None:
    """Which record a phase belongs to: ``"setting"``, ``"trained"`` or ``"native"`` (None: no known phase)."""
    for name, phases in (("setting", PHASES), ("trained", TRAINED_PHASES), ("native", NATIVE_PHASES)):
        if phase in phases:
            return name
    return None


#: What every recorded phase's provenance holds (written by main; checked by merge).
PROVENANCE = ("commit", "device", "torch", "command", "wall_seconds", "iterations", "trials", "failed", "date")


def record_problem(path: Path, record) -> str | None:
    """Why ``record`` (read from ``path``; a fresh one when ``path`` does not exist) cannot take a
    phase (None: it can): ``path`` is a folder, not a ``.json`` file, unwritable, or a JSON file that
    is not a setting-study record (e.g. a results record or a notebook given by mistake)."""
    from gitutor.files import target_problem

    if path.suffix != ".json":
        return f"{path} is not a .json file"
    problem = target_problem(path.absolute())
    if problem:
        return problem
    if not (isinstance(record, dict) and isinstance(record.get("trials"), list)
            and isinstance(record.get("phases"), dict)):
        return f"{path} is not a setting-study record (a JSON object with a 'trials' list and a 'phases' dict)"
    return None


def journal_path(record: Path, phase: str, device: str, code: str) -> Path:
    """The journal of a phase run on ``device`` with the code ``code`` (commit, and a digest of
    uncommitted changes), beside the record; removed once the phase is recorded."""
    return record.with_name(f"{record.stem}.{phase}.{device.replace(':', '-')}.{code}.journal.jsonl")


if __name__ == "__main__":
    sys.exit(main())
