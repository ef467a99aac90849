"""Smoke-run every chapter's code path of a profile for a handful of iterations (``make smoke``).

    python scripts/smoke.py notebooks/04_stepwise_gradinversion --profile full --device cuda

Each chapter says how to run its profile briefly and offline in its profile module
(``gitutor/chapters/<chapter>/profile.py``) as ``SMOKE_PARAMETERS``: papermill parameters such as
``{"PRETRAINED": False, "IMAGE_ROOT": "bundled", "BUDGET": "smoke"}``. A chapter without them is
listed as skipped (it would run at full scale). Only chapters of this repository run (a notebook
elsewhere is refused, never replaced by the chapter of its name). Executed copies go to ``--output``
(not a source folder); the script
prints each chapter's wall time and exits non-zero if a chapter failed.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from gitutor import cli


def smoke_parameters(notebook: str) -> dict | None:
    """The chapter's ``SMOKE_PARAMETERS`` (None when its profile module defines none)."""
    from gitutor.chapters import NOTEBOOK_MODULES

    module = importlib.import_module(f"gitutor.chapters.{NOTEBOOK_MODULES[notebook]}.profile")
    return getattr(module, "SMOKE_PARAMETERS", None)


def main(argv: list[str] | None = None) -> int:
    import papermill

    from gitutor.chapters import NOTEBOOK_MODULES, PROFILES

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=cli.chapter(ROOT),
                        help="a chapter of this repository, e.g. notebooks/04_stepwise_gradinversion")
    parser.add_argument("--profile", default="full", choices=PROFILES)
    parser.add_argument("--device", default="auto", type=cli.device, help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--output", type=cli.output_folder(ROOT), default="build/smoke",
                        help="folder of the executed copies (not a source folder)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.notebooks if Path(n).name not in NOTEBOOK_MODULES]
    if unknown:
        parser.error(f"not a chapter: {', '.join(unknown)}; chapters: {', '.join(sorted(NOTEBOOK_MODULES))}")
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    failed = []
    for notebook in args.notebooks:
        name = Path(notebook).name.removesuffix(".ipynb")
        parameters = smoke_parameters(name)
        if parameters is None:
            print(f"{name}: skipped (gitutor/chapters/<chapter>/profile.py defines no SMOKE_PARAMETERS for it)", flush=True)
            continue
        start = time.perf_counter()
        try:
            papermill.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(output / f"{name}.ipynb"),
                                       kernel_name="python3", cwd=str(ROOT / "notebooks"), progress_bar=False,
                                       parameters={"PROFILE": args.profile, "DEVICE": args.device,
                                                   "RESULTS_DIR": str((output / "results").resolve()), **parameters})
            status = "ok"
        except Exception as error:  # noqa: BLE001 - report every chapter, then fail
            status, _ = f"FAILED ({type(error).__name__}; see {output / f'{name}.ipynb'})", failed.append(name)
        print(f"{name}: {status} in {time.perf_counter() - start:.0f} s ({args.profile} profile, {parameters})",
              flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
