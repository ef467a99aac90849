"""The package's layering: one package per chapter under gitutor/chapters/, imported only by its own
notebook; chapter packages never import each other and no shared layer imports a chapter package; no
import circle between the package's modules (an import inside a function counts: it only hides the
circle); the package is ``ruff format`` clean at its configured 88 columns."""
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
BOOK_PAGES = {"book/trained_network.ipynb": "stepwise_gradinversion",
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


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_imports() -> dict[str, set[str]]:
    """``{module: the package's modules it imports}`` (absolute and relative imports, at any depth of the
    file; ``from pkg import name`` counts as ``pkg.name`` when that is a module, else as ``pkg``)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets.update([base, *(f"{base}.{alias.name}" for alias in node.names)])
        found = set()
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
        graph[name] = found
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_a_circle_hidden_in_a_function():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_package():
    assert circles(package_imports()) == []


def test_the_package_is_ruff_format_clean():
    import shutil
    import subprocess
    import sys

    ruff = shutil.which("ruff")
    command = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    done = subprocess.run([*command, "format", "--check", "gitutor"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("page", [*(f"notebooks/{n}.ipynb" for n in NOTEBOOK_MODULES), *BOOK_PAGES])
def test_pages_import_their_own_chapter_only(page):
    own = NOTEBOOK_MODULES.get(pathlib.Path(page).stem, BOOK_PAGES.get(page))
    used = {chapter_of(name) for name in imported_modules(notebook_source(ROOT / page))} - {None}
    assert used <= ({own} if own else set()), f"{page} imports the chapter packages {sorted(used - {own})}"
