"""Colab from the launch button (issue 47, item 2): the chapter's setup cell installs gitutor from the ref
the launch button opens, and that ref exists.

jupyter-book builds a chapter's Colab link from ``repository.url``, ``repository.branch`` and
``repository.path_to_book`` of _config.yml (``colab.research.google.com/github/<owner>/<repo>/blob/
<branch>/<path>``); scripts/sync_colab_cell.py builds the setup cell's ``pip install`` from the same
fields, and tests/test_notebooks.py checks that every chapter carries that cell. Here: the fields
are there, the cell names that ref, and the ref is a branch or tag of this repository (a cell pinned to
a tag nobody made, ``@v0.1.0``, fails every Colab run at its first line).
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
    cell = sync.colab_cell()
    assert f'%pip install -q "gitutor[assets] @ git+{url}@{ref}"' in cell.splitlines()[4]
    assert cell.splitlines()[3] == 'if "google.colab" in sys.modules:', "the cell must do nothing outside Colab"


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
