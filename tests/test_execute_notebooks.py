"""scripts/execute_notebooks.py: notebooks run side by side, each into the stage; a failure stops the rest."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("execute_notebooks", ROOT / "scripts" / "execute_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["execute_notebooks"] = module  # its worker processes get `run` by this name
    spec.loader.exec_module(module)
    return module


def _notebook(name: str, source: str) -> str:
    cell = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": source}
    parameters = {**cell, "metadata": {"tags": ["parameters"]}, "source": "PROFILE = None\nRESULTS_DIR = None"}
    notebook = {"cells": [parameters, cell], "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                                          "display_name": "Python 3"}},
                "nbformat": 4, "nbformat_minor": 4}
    Path(f"{name}.ipynb").write_text(json.dumps(notebook))
    return name


def test_two_notebooks_side_by_side_and_a_failure_stops_the_queue(tmp_path, capfd, monkeypatch):
    main = _script().main
    monkeypatch.chdir(tmp_path)  # notebooks are given relative to the working directory, as make does
    ok = [_notebook(f"ok{i}", f"print('ok {i}', PROFILE)") for i in range(2)]
    stage, results = Path("stage"), Path("results")
    assert main([*ok, "--stage", str(stage), "--results", str(results), "--jobs", "2", "--cwd", str(tmp_path)]) == 0
    for i, notebook in enumerate(ok):
        executed = json.loads((stage / f"{notebook}.ipynb").read_text())
        assert f"ok {i} quick" in "".join(executed["cells"][-1]["outputs"][0]["text"])
    bad = _notebook("bad", "raise RuntimeError('boom')")
    later = _notebook("later", "print('never')")
    assert main([bad, later, "--stage", str(stage), "--results", str(results), "--jobs", "1",
                 "--cwd", str(tmp_path)]) == 1
    assert "bad FAILED" in capfd.readouterr().err
    assert not (stage / f"{later}.ipynb").exists()
    with pytest.raises(SystemExit):
        main([*ok, "--stage", str(stage), "--results", str(results), "--jobs", "0"])


def test_kernels_use_unix_sockets_with_their_own_names():
    """Two kernels started at once cannot be given one TCP port (CI once failed with "Address
    already in use"): they talk over Unix sockets, each under its own name prefix."""
    manager = _script().UnixSocketKernelManager
    first, second = manager(kernel_name="python3"), manager(kernel_name="python3")
    assert first.transport == second.transport == "ipc"
    assert first.ip != second.ip


def test_full_profile_keeps_progress_bars(tmp_path, capfd, monkeypatch):
    """`make book PROFILE=full`: tqdm stays on in the kernels and papermill shows the cells' progress
    (the quick profile turns bars off for the pages)."""
    main = _script().main
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    notebook = _notebook("bars", "import os\nprint('TQDM_DISABLE =', os.environ.get('TQDM_DISABLE'))")
    stage, results = Path("stage"), Path("results")
    assert main([notebook, "--stage", str(stage), "--results", str(results), "--profile", "full",
                 "--jobs", "1", "--cwd", str(tmp_path)]) == 0
    executed = json.loads((stage / f"{notebook}.ipynb").read_text())
    assert "TQDM_DISABLE = None" in "".join(executed["cells"][-1]["outputs"][0]["text"])
    assert "Executing" in capfd.readouterr().err
