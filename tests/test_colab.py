"""Colab from the launch button (issue 47, item 2): a page's setup cell clones the repository at the ref
the launch button opens, installs gitutor from that clone and works in the page's folder of it; that ref
exists; and the install brings every package a page imports.

jupyter-book builds a chapter's Colab link from ``repository.url``, ``repository.branch`` and
``repository.path_to_book`` of _config.yml (``colab.research.google.com/github/<owner>/<repo>/blob/
<branch>/<path>``); scripts/sync_colab_cell.py builds the setup cell from the same fields, and
tests/test_notebooks.py checks that every notebook page carries that cell. Here: the fields are there,
the cell names that ref, the ref is a branch or tag of this repository (a cell pinned to a tag nobody
made, ``@v0.1.0``, fails every Colab run at its first line), and no page imports a package that the
cell's install (``gitutor[assets]``, its requirements and theirs) does not bring.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


def _sync():
    return load_script("sync_colab_cell")


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)


def test_launch_buttons_open_colab_at_the_repository_and_ref_of_config():
    config = (ROOT / "_config.yml").read_text()
    assert re.search(r'^\s+colab_url:\s*"https://colab.research.google.com"', config, re.M)
    assert re.search(r'^\s+path_to_book:\s*""', config, re.M), "notebooks/ must be at the repository's root"
    url, ref = _sync().repository()
    assert url.startswith("https://github.com/") and ref


def test_setup_cell_installs_the_ref_the_launch_buttons_open():
    sync = _sync()
    url, ref = sync.repository()
    lines = sync.colab_cell(folder="book").splitlines()
    assert lines[3] == 'if "google.colab" in sys.modules:', "the cell must do nothing outside Colab"
    assert lines[4] == f'    REPOSITORY, REF = "{url}", "{ref}"' and lines[5] == f'    CLONE = "{sync.CLONE}"'
    # clone once at that ref, install the package from the clone, work in the page's folder of the clone
    assert lines[6] == "    ![ -d {CLONE} ] || git clone -q --depth 1 -b {REF} {REPOSITORY} {CLONE}"
    assert lines[7] == f'    %pip install -q "{sync.CLONE}[assets]"' and lines[-1] == f"    %cd {sync.CLONE}/book"


def test_repository_fields_are_read_from_the_repository_block(tmp_path):
    sync = _sync()
    (tmp_path / "_config.yml").write_text(
        'title: x\nrepository:\n  url: https://github.com/a/b/\n  branch: "v1.2.0"\n  path_to_book: ""\n'
        "launch_buttons:\n  colab_url: x\n")
    assert sync.repository(tmp_path) == ("https://github.com/a/b", "v1.2.0")
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://github.com/a/b\n")
    with pytest.raises(ValueError, match="branch"):
        sync.repository(tmp_path)


def test_the_ref_exists_in_this_repository():
    """A branch (``main``) or, for a release, a tag: the Colab cell's ``pip install`` resolves it."""
    if _git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout")
    _, ref = _sync().repository()
    candidates = (f"refs/heads/{ref}", f"refs/tags/{ref}", f"refs/remotes/origin/{ref}")
    found = [name for name in candidates if _git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}").returncode == 0]
    if not found and _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip(f"shallow clone without {ref!r} (CI checks out one ref)")
    assert found, (f"_config.yml's repository.branch {ref!r} is neither a branch nor a tag of this repository: the "
                   "launch buttons and the chapters' Colab cells would open and install a ref that does not exist")


#: Modules a Jupyter kernel brings itself (Colab's included): the pages' ``from IPython.display import ...``.
KERNEL_MODULES = {"IPython"}


def _requirement_names(requirements, extras=()) -> set[str]:
    """Normalised distribution names of ``requirements`` (PEP 508 strings) whose markers hold for
    ``extras`` (a requirement for another extra, or another platform, is left out)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    names = set()
    for text in requirements or ():
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in ("", *extras)):
            names.add(canonicalize_name(requirement.name))
    return names


def _closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require, recursively, as installed here."""
    import importlib.metadata as metadata

    from packaging.utils import canonicalize_name

    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name)
        except metadata.PackageNotFoundError:
            continue
        todo += [canonicalize_name(n) for n in _requirement_names(requires)]
    return seen


def _imported_modules(path: Path) -> set[str]:
    """Top-level modules the code cells of notebook ``path`` import (IPython magics and shell lines
    skipped)."""
    import ast
    import json

    found = set()
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        lines = [line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
                 for line in "".join(cell["source"]).splitlines()]
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_the_colab_install_brings_every_package_the_pages_import():
    """The cell installs ``gitutor[assets]`` (and chapter 08's cell ``flwr``/``opacus``): every module a
    page imports must come from a distribution in that install's requirement closure, the standard library
    or the kernel — a page importing ``myst_nb`` while only the ``book`` extra brought it failed on Colab at
    its import cell."""
    import importlib.metadata as metadata
    import sys

    from packaging.utils import canonicalize_name

    tomllib = pytest.importorskip("tomllib")  # Python ≥ 3.11

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    cell_install = set(project["dependencies"]) | set(project["optional-dependencies"]["assets"])
    installed = _closure(_requirement_names(cell_install))
    providers = metadata.packages_distributions()
    missing = {}
    for page in _sync().pages():
        extra = set()
        text = page.read_text()
        if '%pip install -q \\"flwr' in text:  # chapter 08's own cell: Flower and Opacus
            extra = _closure(_requirement_names(project["optional-dependencies"]["fl"]))
        for module in _imported_modules(page) - set(sys.stdlib_module_names) - KERNEL_MODULES - {"gitutor"}:
            dists = {canonicalize_name(d) for d in providers.get(module, [])}
            if not dists & (installed | extra):
                missing.setdefault(page.name, []).append(f"{module} ({', '.join(sorted(dists)) or 'not installed'})")
    assert not missing, f"pages import packages the Colab cell does not install: {missing}"
