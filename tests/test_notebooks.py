"""Structure of the book's notebooks: stored without outputs, one parameters cell, listed in _toc.yml."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TOC = (ROOT / "_toc.yml").read_text()


def _cells(path):
    return json.loads(path.read_text())["cells"]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_stored_without_outputs(path):
    for cell in _cells(path):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, f"{path.name} has outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_one_parameters_cell_defaulting_to_quick(path):
    tagged = [c for c in _cells(path) if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: {len(tagged)} cells tagged 'parameters'"
    source = "".join(tagged[0]["source"])
    assert re.search(r"""^PROFILE = ["']quick["']""", source, re.M)
    for name in ("SEED", "DEVICE", "RESULTS_DIR"):
        assert re.search(rf"^{name} = ", source, re.M), f"{path.name}: parameters cell lacks {name}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_kernelspec_and_toc(path):
    assert json.loads(path.read_text())["metadata"]["kernelspec"]["name"] == "python3"
    assert f"notebooks/{path.stem}" in TOC, f"{path.name} is not listed in _toc.yml"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_uses_its_profile_and_saves_results(path):
    source = "".join("".join(c["source"]) for c in _cells(path) if c["cell_type"] == "code")
    assert f'get_profile("{path.stem}", PROFILE' in source
    assert f'save_results("{path.stem}", PROFILE' in source


def test_every_toc_notebook_exists():
    for name in re.findall(r"notebooks/(\w+)", TOC):
        assert (ROOT / "notebooks" / f"{name}.ipynb").exists(), f"_toc.yml lists missing notebooks/{name}"


def _sync_script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("sync_colab_cell", ROOT / "scripts" / "sync_colab_cell.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", NOTEBOOKS + [ROOT / "book" / "results.ipynb"], ids=lambda p: p.stem)
def test_colab_setup_cell_comes_first_and_installs_the_books_version(path):
    sync = _sync_script()
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    assert code[0].get("id") == sync.CELL_ID, f"{path.name}: the first code cell is not the Colab setup"
    assert "".join(code[0]["source"]) == sync.colab_cell(), \
        f"{path.name}: Colab cell differs from _config.yml/pyproject.toml; run python scripts/sync_colab_cell.py"
    target = sync.install_target()
    assert "github.com/gitutor/gitutor@v" in target and target.endswith(__import__("gitutor").__version__)
