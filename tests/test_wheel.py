"""The wheel built from this repository carries every file of the package (issue 47, item 2).

A Colab reader installs gitutor with pip from git (the chapters' setup cell, scripts/sync_colab_cell.py),
which builds a wheel: a data file that ``[tool.setuptools.package-data]`` in pyproject.toml does not list
is left out, and the chapter that reads it fails outside the checkout (chapter 03 without the shipped
ResNet-20 substitute, ``gitutor/models/weights/``). The wheel is built from a copy of the package's
sources (pyproject.toml, README.md, gitutor/) in a temporary folder, so the checkout gets no
``build/lib`` or ``*.egg-info``. Then the wheel is installed in a fresh virtual environment and a
chapter's quick profile runs from it outside the checkout.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gitutor"


def package_files(root: Path = PACKAGE) -> list[str]:
    """Every file under ``root`` as a wheel names it (``gitutor/...``), caches left out."""
    return sorted(
        path.relative_to(root.parent).as_posix()
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel ``pip wheel --no-deps --no-build-isolation`` builds from a copy of the sources."""
    pytest.importorskip("setuptools")
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / "gitutor", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         str(source), "-w", str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, f"pip wheel failed:\n{run.stdout}\n{run.stderr}"
    (built,) = out.glob("gitutor-*.whl")
    return built


def test_package_has_non_python_files_to_check():
    """The check below is not vacuous: the package ships weights (substitute, face DDPM)."""
    data = [name for name in package_files() if not name.endswith(".py")]
    assert "gitutor/models/weights/substitute_resnet20.safetensors" in data
    assert "gitutor/priors/weights/face_ddpm_lfw32/diffusion_pytorch_model.safetensors" in data


def test_wheel_holds_every_file_of_the_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in package_files() if name not in names]
    data_missing = [name for name in missing if not name.endswith(".py")]
    assert not data_missing, (
        f"{wheel.name} lacks data files the package reads: {data_missing}; list them in "
        "[tool.setuptools.package-data] of pyproject.toml")
    assert not missing, f"{wheel.name} lacks modules: {missing} (a folder without __init__.py?)"


def test_wheel_data_files_are_the_checkouts_bytes(wheel):
    """Not a stale or truncated copy: the shipped weights are sha256-checked when they are loaded."""
    archive = zipfile.ZipFile(wheel)
    for name in package_files():
        if not name.endswith(".py") and name in archive.namelist():  # a missing one fails the test above
            assert archive.read(name) == (ROOT / name).read_bytes(), f"{name} differs in {wheel.name}"


def test_a_chapter_runs_from_the_installed_wheel_outside_the_checkout(wheel, tmp_path):
    """Chapter 03's quick profile (it reads the shipped ResNet-20 substitute) from the wheel installed
    in a fresh virtual environment, in a folder outside the checkout: what a Colab or pip user runs.
    The environment sees this machine's packages (``--system-site-packages``: nothing is downloaded)
    but imports gitutor from the wheel, not from the checkout."""
    pytest.importorskip("papermill")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"TQDM_DISABLE": "1", "OMP_NUM_THREADS": "1"}
    install = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                             capture_output=True, text=True, timeout=300, env=env, check=False)
    assert install.returncode == 0, install.stderr
    where = tmp_path / "reader"
    where.mkdir()
    found = subprocess.run([python, "-c", "import gitutor; print(gitutor.__file__)"], cwd=where, env=env,
                           capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert found.startswith(str(venv)), f"gitutor imported from {found}, not from the installed wheel"
    shutil.copy2(ROOT / "notebooks" / "03_cv_batch_labels.ipynb", where)
    run = subprocess.run([python, "-m", "papermill", "03_cv_batch_labels.ipynb", "out.ipynb", "-k", "python3",
                          "-p", "RESULTS_DIR", "results", "--no-progress-bar"],
                         cwd=where, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (where / "results" / "03_cv_batch_labels.json").is_file()
