"""Write the Colab setup cell into every chapter from the one place that states where gitutor comes from.

The repository is ``repository.url`` in ``_config.yml`` and the ref is ``v`` + the version in
``pyproject.toml``; ``tests/test_notebooks.py`` fails when a chapter's cell differs from
:func:`colab_cell`. Run ``python scripts/sync_colab_cell.py`` after changing either.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELL_ID = "colab-setup"
#: Longest line of the cell: the notebooks' code width (``line-length`` of ruff in pyproject.toml).
MAX_LINE = 88


def install_target(root: Path = ROOT) -> str:
    """``gitutor @ git+<repository.url>@v<version>`` from ``_config.yml`` and ``pyproject.toml``."""
    url = re.search(r"^repository:\s*\n\s+url:\s*(\S+)", (root / "_config.yml").read_text(), re.M).group(1)
    version = re.search(r'^version = "([^"]+)"', (root / "pyproject.toml").read_text(), re.M).group(1)
    return f"gitutor @ git+{url.rstrip('/')}@v{version}"


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
              f"    %pip install -q \"{install_target(root)}\"")
    long = [line for line in source.splitlines() if len(line) > MAX_LINE]
    if long:
        raise ValueError(f"the Colab cell would have lines longer than {MAX_LINE} characters: {long}")
    return source


def sync(path: Path, source: str) -> bool:
    """Put ``source`` in the cell with id ``colab-setup``; returns whether the file changed."""
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c.get("id") == CELL_ID)
    lines = source.splitlines(keepends=True)
    if cell["source"] == lines:
        return False
    cell["source"] = lines
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return True


if __name__ == "__main__":
    pages = sorted((ROOT / "notebooks").glob("*.ipynb")) + [ROOT / "book" / "results.ipynb"]
    changed = [p.name for p in pages if sync(p, colab_cell())]
    print("updated: " + (", ".join(changed) or "nothing"))
    sys.exit(0)
