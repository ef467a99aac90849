"""The wheel built from this repository carries every file of the package (issue 47, item 2).

A Colab reader installs gitutor with pip from git (the chapters' setup cell, scripts/sync_colab_cell.py),
which builds a wheel: a data file that ``[tool.setuptools.package-data]`` in pyproject.toml does not list
is left out, and the chapter that reads it fails outside the checkout (chapter 03 without the shipped
ResNet-20 substitute, ``gitutor/models/weights/``). The wheel is built from a copy of the package's
sources (pyproject.toml, README.md, gitutor/) in a temporary folder, so the checkout gets no
``build/lib`` or ``*.egg-info``.
"""
from __future__ import annotations

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
