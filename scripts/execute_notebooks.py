"""Execute the book's notebooks with papermill for rendering (used by `make notebooks` / `make book`).

Each notebook runs in a fresh ``python3`` kernel with ``notebooks/`` as working directory and the
parameters ``PROFILE`` and ``RESULTS_DIR`` injected; its executed copy goes to ``<stage>/<path>.ipynb``.
Every path is checked before anything runs: a notebook lies inside the working directory, and
``--stage``/``--results`` are neither a source folder nor hold one or the notebooks (``--stage ''``,
an unset shell variable, would otherwise write the executed copy over the source).
For the rendered page the injected-parameters cell is tagged ``remove-cell`` (it stays in the
executed notebook), and with the quick profile progress bars are off (``TQDM_DISABLE=1``;
interactive runs keep them). With the full profile they stay on: papermill shows each notebook's
cells as a progress bar in the terminal, and the chapters' own bars stay in the executed copies.
``--jobs`` notebooks run at once (default: one per core; every chapter pins its torch thread
count, so its numbers do not depend on what runs beside it), started in the order given. After a
failure no further notebook starts (exit code 1); prints each notebook's wall time
and any stderr output it left (the book hides stderr; this log does not).

    python scripts/execute_notebooks.py --stage build/book --results build/results --profile quick notebooks/01_dlg
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

import papermill
from jupyter_client.manager import KernelManager
from traitlets import default

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from gitutor import cli
from gitutor.files import write_json
from gitutor.chapters import PROFILES

HIDE_TAG = "remove-cell"


class UnixSocketKernelManager(KernelManager):
    """A kernel that talks over Unix sockets (``transport = "ipc"``), not TCP ports.

    With TCP, each kernel is given ports that were free when it was planned; two kernels started at
    once can be given the same one, and the second dies with "Address already in use". Each
    kernel's sockets get their own name prefix in the temporary folder (the default prefix is the
    same for every kernel started from one working directory).
    """

    @default("transport")
    def _transport_default(self) -> str:
        return "ipc"

    @default("ip")
    def _ip_default(self) -> str:
        return str(Path(tempfile.gettempdir()) / f"gitutor-kernel-{uuid.uuid4().hex[:12]}")


def hide_injected_parameters(path: Path) -> None:
    """Tag papermill's ``injected-parameters`` cell ``remove-cell`` so the page does not show it."""
    notebook = json.loads(path.read_text())
    for cell in notebook["cells"]:
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if "injected-parameters" in tags and HIDE_TAG not in tags:
            tags.append(HIDE_TAG)
    write_json(path, notebook, indent=1, ensure_ascii=False)


def stderr_lines(path: Path) -> list[str]:
    """The first line of every stderr stream output in an executed notebook."""
    cells = json.loads(path.read_text())["cells"]
    return ["".join(output.get("text", "")).strip().splitlines()[0]
            for cell in cells if cell["cell_type"] == "code" for output in cell.get("outputs", [])
            if output.get("name") == "stderr" and "".join(output.get("text", "")).strip()]


def execute(notebook: str, stage: Path, parameters: dict, cwd: str, progress: bool = False) -> Path:
    """Run ``notebook`` (a path without ``.ipynb``) into ``stage``; returns the executed copy's path.
    ``progress``: papermill's progress bar over the notebook's cells, on stderr."""
    source = Path(f"{notebook}.ipynb")
    target = stage / source
    target.parent.mkdir(parents=True, exist_ok=True)
    known = papermill.inspect_notebook(str(source))  # pass only the parameters the notebook declares
    parameters = {name: value for name, value in parameters.items() if name in known}
    papermill.execute_notebook(str(source), str(target), parameters=parameters, kernel_name="python3",
                               cwd=cwd, progress_bar=progress, log_output=False,
                               kernel_manager_class=UnixSocketKernelManager)
    hide_injected_parameters(target)
    return target


def run(notebook: str, stage: Path, parameters: dict, cwd: str | None, profile: str) -> bool:
    """Execute one notebook and print its wall time and stderr lines; False if it failed."""
    start = time.perf_counter()
    try:
        target = execute(notebook, stage, parameters, cwd or str(Path(notebook).parent), profile == "full")
    except Exception as error:  # papermill raises PapermillExecutionError with the failing cell
        print(f"notebook {notebook} FAILED ({type(error).__name__}); see {stage / notebook}.ipynb\n{error}",
              file=sys.stderr)
        return False
    lines = [f"{notebook}: {time.perf_counter() - start:.0f} s ({profile} profile)"]
    lines += [f"  stderr (hidden on the page): {line[:160]}" for line in stderr_lines(target)]
    print("\n".join(lines), flush=True)
    return True


def _inside_stage(notebook: str, stage: Path, parser: argparse.ArgumentParser) -> str:
    """``notebook`` relative to the working directory, after checking that its executed copy
    ``<stage>/<notebook>.ipynb`` lands inside the stage and is not the notebook itself."""
    source = Path(f"{notebook}.ipynb").resolve()
    if not source.is_relative_to(Path.cwd()):
        parser.error(f"{notebook}: give notebooks inside the working directory {Path.cwd()} (e.g. "
                     "notebooks/01_dlg), so that each executed copy lands inside --stage")
    if source.is_relative_to(stage):
        parser.error(f"argument --stage: {stage} holds the notebook {source}; its executed copy must go elsewhere")
    return str(source.relative_to(Path.cwd()).with_suffix(""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=cli.notebook(),
                        help="notebook paths without .ipynb, e.g. notebooks/01_dlg")
    parser.add_argument("--stage", type=cli.output_folder(ROOT), required=True,
                        help="folder of the executed copies (not a source folder, nor one holding one)")
    parser.add_argument("--results", type=cli.output_folder(ROOT), required=True,
                        help="RESULTS_DIR given to every notebook (not a source folder)")
    parser.add_argument("--profile", default="quick", choices=PROFILES)
    parser.add_argument("--cwd", default=None, help="working directory of the kernel (default: the notebook's folder)")
    parser.add_argument("--jobs", type=cli.positive_int, default=os.cpu_count() or 1, help="notebooks run at once")
    args = parser.parse_args(argv)
    if args.cwd is not None and not Path(args.cwd).is_dir():
        parser.error(f"argument --cwd: no folder {args.cwd}")
    args.notebooks = [_inside_stage(notebook, args.stage, parser) for notebook in args.notebooks]
    if args.profile == "quick":  # the full profile's long loops keep their bars (module docstring)
        os.environ.setdefault("TQDM_DISABLE", "1")
    parameters = {"PROFILE": args.profile, "RESULTS_DIR": str(args.results.resolve())}
    queue, running, ok = list(args.notebooks), set(), True
    # processes, not threads: papermill changes the working directory of the process it runs in
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        while running or (queue and ok):
            while ok and queue and len(running) < args.jobs:
                running.add(pool.submit(run, queue.pop(0), args.stage, parameters, args.cwd, args.profile))
            done, running = wait(running, return_when=FIRST_COMPLETED)
            ok = ok and all(future.result() for future in done)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
