"""Record a chapter at a larger budget: execute it with papermill into book/recorded/ with provenance.

    python scripts/record.py notebooks/04_stepwise_gradinversion --profile full --device cpu \
        -p PRETRAINED False -p BUDGET cpu_recording

writes ``book/recorded/<notebook>.ipynb`` (the executed notebook, its title saying "at a larger
budget, recorded on <date>, <device>") and ``book/recorded/<notebook>.json`` (the notebook's
results record, :mod:`gitutor.results`, plus a ``"provenance"`` dict: commit, device, torch
version, wall time, exact command, parameters, date), and any other file the notebook wrote beside
its record as ``<notebook>.<suffix>`` (chapter 04: its Table 1 reconstructions, ``.safetensors``); a
``<notebook>.*`` file of an earlier recording that this one did not write is removed, so a recording
never mixes two runs.
The working tree must be committed (the provenance commit is what was run); ``make record`` calls
this script.

Every argument is checked before anything runs (the notebook is a committed chapter of this
repository under ``notebooks/``, not a copy elsewhere; ``--recorded`` is not a source folder; ``-p``
names a parameter it declares, ``BUDGET`` is one of its profile's budgets, the device exists here). The notebook runs
into a temporary folder and its files replace those in ``book/recorded/`` only when it succeeded:
a failed or interrupted run leaves ``book/recorded/`` byte-identical and exits 1 with the failing
cell's error. Every trial its sweeps finish is journaled at once under
``book/recorded/<notebook>.journal/`` (:mod:`gitutor.journal`; the failed run's executed copy is kept
there too; git ignores the folder and a successful recording removes it); **rerun the same command**
(same commit and parameters) to resume: only the missing trials run.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.util
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RECORDED = ROOT / "book" / "recorded"
#: The checkout whose ``notebooks/`` holds the chapters that may be recorded (the tests point it at a tiny one).
CHAPTERS = ROOT

from gitutor import cli
from gitutor.files import copy_files, read_json
from gitutor.seeding import resolve_device
from gitutor.sweeps import JOURNALS_ENV


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def _parameter(value: str):
    """Papermill-style parameter value: JSON when it parses (False, 3, "x"), else the string."""
    try:
        return json.loads({"True": "true", "False": "false", "None": "null"}.get(value, value))
    except json.JSONDecodeError:
        return value


def device_description(device: str, threads: int | None) -> str:
    """``"NVIDIA H100 80GB HBM3"`` or ``"CPU: <model name>, 1 torch thread"`` for the page title."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    name = platform.processor() or "CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        name = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                     if line.startswith("model name")), name)
    return f"CPU: {name}" + (f", {threads} torch thread{'s' * (threads != 1)}" if threads else "")


def recording_title(name: str, budget: str | None) -> str:
    """What a recording of chapter ``name`` at ``budget`` is, for its title: the chapter profile's
    ``RECORDING_TITLES[budget]`` (e.g. chapter 08's "on Flower's simulation engine"), else "at a
    larger budget"."""
    from gitutor.chapters import NOTEBOOK_MODULES

    package = NOTEBOOK_MODULES.get(name)  # None: a test's stand-in chapter
    titles = getattr(importlib.import_module(f"gitutor.chapters.{package}.profile"), "RECORDING_TITLES", {}) \
        if package else {}
    return titles.get(budget, "at a larger budget")


def retitle(notebook: dict, date: str, device: str, what: str = "at a larger budget") -> None:
    """Add "— <what>, recorded on <date>, <device>" to the first Markdown title."""
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and source.startswith("# "):
            title, _, rest = source.partition("\n")
            cell["source"] = f"{title} — {what}, recorded on {date}, {device}\n{rest}".splitlines(True)
            return
    raise ValueError("the notebook has no Markdown cell starting with a '# ' title")


def drop_chapter_cells(notebook: dict) -> None:
    """Remove the cells that belong to the chapter page only: its exercise block (tag ``exercise``: a
    second copy of its sphinx-exercise labels on the recorded page breaks the book build) and cells
    tagged ``chapter-only`` (e.g. chapter 04's section that shows this very recording)."""
    dropped = {"exercise", "chapter-only"}
    notebook["cells"] = [cell for cell in notebook["cells"] if not dropped & set(cell["metadata"].get("tags", []))]


def hide_injected_parameters(path: Path) -> None:
    """Hide papermill's injected cell on the page, as the book build does (scripts/execute_notebooks.py)."""
    spec = importlib.util.spec_from_file_location("execute_notebooks", ROOT / "scripts" / "execute_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.hide_injected_parameters(path)


class RecordError(RuntimeError):
    """A recording that did not succeed (nothing under the recorded folder was changed)."""


def journals_of(recorded: Path, name: str, commit: str, profile: str, device: str, parameters: dict) -> Path:
    """Where the sweeps of one recording keep their journals: ``<recorded>/<name>.journal/<commit, 12
    hex>-<hash of profile, device and parameters>/`` (the same command at the same commit resumes)."""
    run = json.dumps([profile, device, parameters], sort_keys=True)
    return recorded / f"{name}.journal" / f"{commit[:12]}-{hashlib.sha256(run.encode()).hexdigest()[:8]}"


def record(notebook: str, profile: str, device: str, parameters: dict, command: str,
           recorded: Path = RECORDED) -> Path:
    """Execute ``notebook`` (e.g. ``notebooks/04_stepwise_gradinversion``) and store it with provenance.

    The notebook runs into a temporary folder; its executed copy, results record and kept files
    replace those in ``recorded`` only after it succeeded (:func:`gitutor.files.copy_files`). Its
    sweeps journal every finished trial under :func:`journals_of` (``GITUTOR_JOURNALS``), so a rerun
    of the same command after a failure or a kill runs only the missing trials.

    Raises:
        RecordError: naming the failing cell and its error (the executed copy is kept beside the
            journals), or a notebook that wrote no results record.
        SystemExit: if gitutor/, notebooks/ or scripts/ have uncommitted changes.
    """
    import papermill
    import torch

    name = Path(notebook).name
    if _git("status", "--porcelain", "--untracked-files=no", "--", "gitutor", "notebooks", "scripts"):
        raise SystemExit("record: commit gitutor/, notebooks/ and scripts/ first: the provenance names a commit")
    commit = _git("rev-parse", "HEAD")
    journals = journals_of(recorded, name, commit, profile, device, parameters)
    os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars on the page
    with tempfile.TemporaryDirectory(prefix=f"record-{name}-") as work:
        work = Path(work)
        results_dir, output = work / "results", work / f"{name}.ipynb"
        start = time.perf_counter()
        _execute(papermill, CHAPTERS / f"{notebook}.ipynb", output, journals,
                 {"PROFILE": profile, "DEVICE": device, "RESULTS_DIR": str(results_dir), **parameters})
        wall = time.perf_counter() - start
        if not (results_dir / f"{name}.json").is_file():
            raise RecordError(f"{notebook} ran but wrote no results record {name}.json into RESULTS_DIR")
        record_ = read_json(results_dir / f"{name}.json", "results record")
        executed = json.loads(output.read_text())
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        described = device_description(str(resolve_device(device)), _threads_of(executed))  # "auto" resolved
        retitle(executed, date, described, recording_title(name, parameters.get("BUDGET")))
        drop_chapter_cells(executed)
        output.write_text(json.dumps(executed, indent=1, ensure_ascii=False) + "\n")
        hide_injected_parameters(output)
        record_["provenance"] = {"commit": commit, "device": described, "device_parameter": device,
                                 "torch": torch.__version__, "python": platform.python_version(),
                                 "wall_seconds": round(wall), "command": command, "parameters": parameters,
                                 "date": date}
        (work / f"{name}.json").write_text(json.dumps(record_, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        kept = [path for path in results_dir.glob(f"{name}.*") if path.suffix != ".json"]  # beside its record
        pairs = {path: recorded / path.name for path in [output, work / f"{name}.json", *kept]}
        stale = [path for path in recorded.glob(f"{name}.*") if path.is_file() and path not in pairs.values()]
        copy_files(pairs, remove=stale)  # a file of the previous recording that this one did not write goes
    shutil.rmtree(journals, ignore_errors=True)  # recorded: the journals have served
    if journals.parent.is_dir() and not any(journals.parent.iterdir()):
        journals.parent.rmdir()
    return recorded / f"{name}.json"


def _execute(papermill, source: Path, output: Path, journals: Path, parameters: dict) -> None:
    """papermill ``source`` into ``output`` with ``GITUTOR_JOURNALS`` set; a failure becomes a
    :class:`RecordError` and its executed copy goes beside the journals."""
    before = os.environ.get(JOURNALS_ENV)
    os.environ[JOURNALS_ENV] = str(journals)  # the kernel inherits it
    try:
        papermill.execute_notebook(str(source), str(output), kernel_name="python3", cwd=str(CHAPTERS / "notebooks"),
                                   progress_bar=False, parameters=parameters)
    except Exception as error:  # noqa: BLE001 - any failure of the run is reported in one line
        failed = journals / f"{output.stem}.failed.ipynb"
        if output.is_file():
            failed.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(output, failed)
        where = f"cell {error.exec_count}: {error.ename}: {error.evalue}" if hasattr(error, "ename") else \
            f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0]}"
        raise RecordError(f"{source.stem} failed in {where} (executed copy: {failed}; finished trials are "
                          f"journaled in {journals}: rerun the same command to resume)") from None
    finally:
        if before is None:
            os.environ.pop(JOURNALS_ENV, None)
        else:
            os.environ[JOURNALS_ENV] = before


def _threads_of(executed: dict) -> int | None:
    """The torch thread count the notebook printed ("with N torch thread(s)"), if it did."""
    import re

    for cell in executed["cells"]:
        for out in cell.get("outputs", []):
            text = "".join(out.get("data", {}).get("text/markdown", "")) + "".join(out.get("text", ""))
            found = re.search(r"with (\d+) torch thread", text)
            if found:
                return int(found.group(1))
    return None


def main(argv: list[str] | None = None) -> int:
    import papermill

    from gitutor.chapters import NOTEBOOK_MODULES, PROFILES, get_profile

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=cli.chapter(CHAPTERS),
                        help="a chapter of this repository, e.g. notebooks/04_stepwise_gradinversion")
    parser.add_argument("--profile", default="full", choices=PROFILES)
    parser.add_argument("--device", default="auto", type=cli.device, help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    parser.add_argument("--recorded", type=cli.output_folder(ROOT), default=RECORDED,
                        help="folder of the recordings (not a source folder)")
    args = parser.parse_args(argv)
    command = shlex.join([Path(sys.executable).name, "scripts/record.py", *(sys.argv[1:] if argv is None else argv)])
    parameters = {key: _parameter(value) for key, value in args.parameter}
    for name, option in (("PROFILE", "--profile"), ("DEVICE", "--device"), ("RESULTS_DIR", "--recorded")):
        if name in parameters:  # record() sets these itself; a -p would run one setting under another's label
            parser.error(f"-p {name} is set by {option}; give {option} instead")
    for notebook in args.notebooks:  # every argument is checked before anything runs
        try:
            _git("ls-files", "--error-unmatch", f"{notebook}.ipynb")
        except subprocess.CalledProcessError:
            parser.error(f"{notebook}.ipynb is not committed: the provenance names the commit that was run")
        declared = papermill.inspect_notebook(str(CHAPTERS / f"{notebook}.ipynb"))
        unknown = sorted(set(parameters) - set(declared))
        if unknown:
            parser.error(f"{notebook} has no parameter {', '.join(unknown)}; it has {', '.join(declared)}")
        name = Path(notebook).name
        if name in NOTEBOOK_MODULES:
            try:
                get_profile(name, args.profile, budget=parameters.get("BUDGET"))
            except ValueError as error:
                parser.error(str(error))
    for notebook in args.notebooks:
        try:
            path = record(notebook, args.profile, args.device, parameters, command, args.recorded)
        except RecordError as error:
            print(f"record: {error}; nothing in {args.recorded} changed", file=sys.stderr)
            return 1
        print(f"record: {notebook} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
