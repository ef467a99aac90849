"""The package's layering: one package per chapter under gitutor/chapters/, imported only by its own
notebook; chapter packages never import each other and no shared layer imports a chapter package;
no module is over 300 lines."""
from __future__ import annotations

import ast
import json
import pathlib

import pytest

from gitutor.chapters import NOTEBOOK_MODULES

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gitutor"
CHAPTERS = PACKAGE / "chapters"
#: Book pages outside notebooks/ that draw a chapter's records, and the chapter package they may use.
BOOK_PAGES = {"book/setting_study.ipynb": "stepwise_gradinversion", "book/trained_network.ipynb": "stepwise_gradinversion",
              "book/results.ipynb": None}


def imported_modules(source: str) -> set[str]:
    """Every module an ``import`` or ``from … import`` statement of ``source`` names (absolute
    imports; ``from pkg import mod`` also counts as ``pkg.mod``)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def chapter_of(module: str) -> str | None:
    """``"dlg"`` for ``gitutor.chapters.dlg.report``; None for anything that is not in a chapter package."""
    parts = module.split(".")
    if parts[:2] == ["gitutor", "chapters"] and len(parts) > 2 and (CHAPTERS / parts[2]).is_dir():
        return parts[2]
    return None


def notebook_source(path: pathlib.Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    code = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    lines = [line for block in code for line in block.splitlines()]
    # IPython magics and shell lines (the Colab cell's ``!pip install``) become ``pass``, indentation kept.
    return "\n".join(line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!"))
                     else line for line in lines)


def test_the_helper_sees_imports_and_chapters():
    """The checks below would catch a violation: the parser finds ``from X import Y`` as ``X.Y``."""
    found = imported_modules("from gitutor.chapters import dlg\nimport gitutor.chapters.flower_dp.report\n")
    assert {chapter_of(name) for name in found} >= {"dlg", "flower_dp"}
    assert chapter_of("gitutor.chapters.settings") is None and chapter_of("gitutor.viz") is None


def test_every_notebook_has_a_chapter_package():
    assert sorted(NOTEBOOK_MODULES.values()) == sorted(p.name for p in CHAPTERS.iterdir()
                                                       if (p / "__init__.py").is_file())
    for notebook, package in NOTEBOOK_MODULES.items():
        assert (ROOT / "notebooks" / f"{notebook}.ipynb").is_file(), notebook
        assert (CHAPTERS / package / "profile.py").is_file(), package


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_layers(path):
    """A chapter package imports only itself among the chapters; the shared layers import none."""
    relative = path.relative_to(PACKAGE)
    own = relative.parts[1] if relative.parts[0] == "chapters" and len(relative.parts) > 2 else None
    used = {chapter_of(name) for name in imported_modules(path.read_text())} - {None}
    assert used <= ({own} if own else set()), f"{relative} imports the chapter packages {sorted(used - {own})}"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_over_300_lines(path):
    assert len(path.read_text().splitlines()) <= 300, f"{path.relative_to(ROOT)} is over 300 lines"


@pytest.mark.parametrize("page", [*(f"notebooks/{n}.ipynb" for n in NOTEBOOK_MODULES), *BOOK_PAGES])
def test_pages_import_their_own_chapter_only(page):
    own = NOTEBOOK_MODULES.get(pathlib.Path(page).stem, BOOK_PAGES.get(page))
    used = {chapter_of(name) for name in imported_modules(notebook_source(ROOT / page))} - {None}
    assert used <= ({own} if own else set()), f"{page} imports the chapter packages {sorted(used - {own})}"
