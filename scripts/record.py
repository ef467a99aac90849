"""Record a chapter at a larger budget: execute it with papermill into book/recorded/ with provenance.

    python scripts/record.py notebooks/04_stepwise_gradinversion --profile full --device cpu \
        -p PRETRAINED False -p BUDGET cpu_recording

writes ``book/recorded/<notebook>.ipynb`` (the executed notebook, its title saying "at a larger
budget, recorded on <date>, <device>") and ``book/recorded/<notebook>.json`` (the notebook's
results record, :mod:`gitutor.results`, plus a ``"provenance"`` dict: commit, device, torch
version, wall time, exact command, parameters, date), and any other file the notebook wrote beside
its record as ``<notebook>.<suffix>`` (chapter 04: its Table 1 reconstructions, ``.safetensors``).
The working tree must be committed (the provenance commit is what was run); ``make record`` calls
this script.
"""
from __future__ import annotations

import argparse
import datetime
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
RECORDED = ROOT / "book" / "recorded"


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


def retitle(notebook: dict, date: str, device: str) -> None:
    """Add "— at a larger budget, recorded on <date>, <device>" to the first Markdown title."""
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and source.startswith("# "):
            title, _, rest = source.partition("\n")
            cell["source"] = f"{title} — at a larger budget, recorded on {date}, {device}\n{rest}".splitlines(True)
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


def record(notebook: str, profile: str, device: str, parameters: dict, command: str) -> Path:
    """Execute ``notebook`` (e.g. ``notebooks/04_stepwise_gradinversion``) and store it with provenance."""
    import papermill
    import torch

    name = Path(notebook).name
    if _git("status", "--porcelain", "--untracked-files=no", "--", "gitutor", "notebooks", "scripts"):
        raise SystemExit("record: commit gitutor/, notebooks/ and scripts/ first: the provenance names a commit")
    commit = _git("rev-parse", "HEAD")
    RECORDED.mkdir(parents=True, exist_ok=True)
    output = RECORDED / f"{name}.ipynb"
    os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars on the page
    with tempfile.TemporaryDirectory() as results_dir:
        start = time.perf_counter()
        papermill.execute_notebook(str(ROOT / f"{notebook}.ipynb"), str(output), kernel_name="python3",
                                   cwd=str(ROOT / "notebooks"), progress_bar=False,
                                   parameters={"PROFILE": profile, "DEVICE": device, "RESULTS_DIR": results_dir,
                                               **parameters})
        wall = time.perf_counter() - start
        record_ = json.loads((Path(results_dir) / f"{name}.json").read_text())
        for kept in Path(results_dir).glob(f"{name}.*"):  # what the notebook keeps beside its record
            if kept.suffix != ".json":
                shutil.copyfile(kept, RECORDED / kept.name)
    executed = json.loads(output.read_text())
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    described = device_description(device, _threads_of(executed))
    retitle(executed, date, described)
    drop_chapter_cells(executed)
    output.write_text(json.dumps(executed, indent=1, ensure_ascii=False) + "\n")
    hide_injected_parameters(output)
    record_["provenance"] = {"commit": commit, "device": described, "device_parameter": device,
                             "torch": torch.__version__, "python": platform.python_version(),
                             "wall_seconds": round(wall), "command": command, "parameters": parameters,
                             "date": date}
    path = RECORDED / f"{name}.json"
    path.write_text(json.dumps(record_, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    return path


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", help="e.g. notebooks/04_stepwise_gradinversion (no .ipynb)")
    parser.add_argument("--profile", default="full")
    parser.add_argument("--device", default="auto")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    args = parser.parse_args()
    command = shlex.join([Path(sys.executable).name, "scripts/record.py", *sys.argv[1:]])
    parameters = {key: _parameter(value) for key, value in args.parameter}
    for notebook in args.notebooks:
        path = record(notebook.removesuffix(".ipynb"), args.profile, args.device, parameters, command)
        print(f"record: {notebook} -> {path}")


if __name__ == "__main__":
    main()
