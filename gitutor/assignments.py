"""Course assignments from the chapter notebooks, with otter-grader (``otter assign`` / ``otter run``).

Each chapter ends with one block of cells tagged ``exercise`` in otter's notebook format: a raw
``# ASSIGNMENT CONFIG`` cell, then questions delimited by raw ``# BEGIN QUESTION`` … ``# END QUESTION``
cells, with the reference solution between ``# BEGIN SOLUTION`` / ``# END SOLUTION`` cells and the
checks (otter's exception-based test functions) between ``# BEGIN TESTS`` / ``# END TESTS`` cells.

``python -m gitutor.assignments build OUT NOTEBOOK…`` writes, per chapter, ``OUT/<chapter>/student``
(the student notebook: no solutions, public checks only) and ``OUT/<chapter>/autograder`` (the
reference notebook and the autograder zip). The chapter body is tagged ``otter_ignore`` in both, so
grading executes only the exercise block, which builds its own inputs from gitutor.
``python -m gitutor.assignments check OUT NOTEBOOK…`` grades the reference and the untouched student
notebook of every chapter with ``otter run`` and prints
``assignments: N exercises, P pass with the reference solutions, U pass unanswered``; it fails unless
P = N and U = 0 and no solution line appears in a student notebook.

This module needs otter-grader only for the command line (``pip install "gitutor[assign]"``).
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from gitutor.files import read_json, write_json

EXERCISE_TAG = "exercise"
IGNORE_TAG = "otter_ignore"
_MARKER = re.compile(r"#\s*(BEGIN|END)\s+(QUESTION|SOLUTION|TESTS)\b", re.IGNORECASE)


@dataclass
class Question:
    """One otter question of a chapter: its name, reference-solution code cells and test cells."""

    name: str
    solution_cells: list[str] = field(default_factory=list)
    test_cells: list[str] = field(default_factory=list)


def _source(cell: dict) -> str:
    return (
        "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    )


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def read_notebook(path: str | Path) -> dict:
    """The notebook at ``path`` as a dict (nbformat 4 JSON).

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: naming ``path`` if it is truncated or not JSON.
    """
    return read_json(path, "notebook")


def exercise_cells(nb: dict) -> list[dict]:
    """The cells tagged ``exercise``, in order.

    Raises:
        ValueError: if the notebook has none, or they are not one contiguous block at its end.
    """
    flags = [EXERCISE_TAG in _tags(cell) for cell in nb["cells"]]
    if not any(flags):
        raise ValueError("the notebook has no cells tagged 'exercise'")
    first = flags.index(True)
    if not all(flags[first:]):
        raise ValueError(
            "the cells tagged 'exercise' must form one contiguous block at the end of the notebook"
        )
    return nb["cells"][first:]


def parse_questions(nb: dict) -> tuple[list[str], list[Question]]:
    """The setup code cells (outside any question) and the questions of a chapter's exercise block.

    Raises:
        ValueError: for unbalanced or misplaced BEGIN/END cells, or a question without a name.
    """
    setup, questions, stack = [], [], []
    for cell in exercise_cells(nb):
        text = _source(cell)
        marker = _MARKER.match(text.strip()) if cell["cell_type"] == "raw" else None
        if marker:
            kind, block = marker.group(1).upper(), marker.group(2).upper()
            if kind == "BEGIN":
                if block == "QUESTION":
                    name = re.search(r"^name:\s*(\S+)", text, re.MULTILINE)
                    if stack or not name:
                        raise ValueError(
                            f"misplaced or unnamed BEGIN QUESTION cell: {text!r}"
                        )
                    questions.append(Question(name.group(1)))
                stack.append(block)
            elif not stack or stack.pop() != block:
                raise ValueError(f"END {block} without a matching BEGIN")
        elif cell["cell_type"] == "code":
            if "SOLUTION" in stack:
                questions[-1].solution_cells.append(text)
            elif "TESTS" in stack:
                questions[-1].test_cells.append(text)
            elif not stack:
                setup.append(text)
    if stack:
        raise ValueError(f"unclosed blocks: {stack}")
    return setup, questions


def solution_lines(code: str) -> list[str]:
    """The reference-solution lines of a solution cell (between # BEGIN/END SOLUTION or ending in
    ``# SOLUTION``), stripped of indentation and of the marker; blank and comment-only lines are left out."""
    lines, inside = [], False
    for line in code.splitlines():
        stripped = line.strip()
        if re.match(r"#\s*BEGIN SOLUTION", stripped):
            inside = True
        elif re.match(r"#\s*END SOLUTION", stripped):
            inside = False
        elif inside or re.search(r"#\s*SOLUTION\s*$", stripped):
            code_part = re.sub(r"#\s*SOLUTION\s*$", "", stripped).strip()
            if code_part and not code_part.startswith("#"):
                lines.append(code_part)
    return lines


def run_tests(question: Question, env: dict) -> list[tuple[str, bool, str]]:
    """Run a question's test functions against the namespace ``env``, as otter's exception-based
    format does (each argument is looked up by name in ``env``, ``None`` when missing).

    Returns:
        ``(test name, passed, message)`` per test function.
    """
    results = []
    for code in question.test_cells:
        namespace: dict = {}
        exec(compile(code, f"<tests of {question.name}>", "exec"), namespace)
        for name, test in list(namespace.items()):
            if name.startswith("test_") and callable(test):
                args = {arg: env.get(arg) for arg in inspect.signature(test).parameters}
                try:
                    test(**args)
                    results.append((name, True, ""))
                except Exception as error:  # a failing check is a result, not a crash
                    results.append((name, False, f"{type(error).__name__}: {error}"))
    return results


def grading_master(nb: dict) -> dict:
    """A copy of the chapter whose non-exercise code cells carry ``otter_ignore`` (grading skips them)."""
    nb = json.loads(json.dumps(nb))
    exercise_cells(nb)
    for cell in nb["cells"]:
        if (
            cell["cell_type"] == "code"
            and EXERCISE_TAG not in _tags(cell)
            and IGNORE_TAG not in _tags(cell)
        ):
            cell.setdefault("metadata", {}).setdefault("tags", []).append(IGNORE_TAG)
    return nb


def leaked_lines(chapter_nb: dict, student_nb: dict) -> list[str]:
    """Reference-solution lines of ``chapter_nb`` that appear in the student notebook (should be none)."""
    text = "\n".join(_source(cell) for cell in student_nb["cells"])
    text += "\n" + "\n".join(
        str(test)
        for test in student_nb.get("metadata", {})
        .get("otter", {})
        .get("tests", {})
        .values()
    )
    _, questions = parse_questions(chapter_nb)
    return [
        line
        for q in questions
        for cell in q.solution_cells
        for line in solution_lines(cell)
        if line in text
    ]


def _otter(*args: str) -> None:
    """Run the otter command line quietly; on failure show its output and stop."""
    done = subprocess.run(
        [sys.executable, "-m", "otter", *args], capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(
            f"otter {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
        )


def build(out: Path, notebooks: list[Path]) -> None:
    """``otter assign`` every chapter into ``out/<chapter>/{student,autograder}``."""
    for path in notebooks:
        chapter = path.stem
        master = out / "masters" / f"{chapter}.ipynb"
        master.parent.mkdir(parents=True, exist_ok=True)
        write_json(
            master, grading_master(read_notebook(path)), indent=1, ensure_ascii=False
        )
        target = out / chapter
        subprocess.run(["rm", "-rf", str(target)], check=True)
        _otter("assign", "--no-pdfs", str(master), str(target))
        leaks = leaked_lines(
            read_notebook(path), read_notebook(target / "student" / f"{chapter}.ipynb")
        )
        if leaks:
            raise SystemExit(
                f"{chapter}: the student notebook contains solution lines: {leaks}"
            )
        print(
            f"{chapter}: {target / 'student' / (chapter + '.ipynb')} and its autograder"
        )


def _grade(zip_path: Path, notebook: Path, out: Path) -> dict[str, bool]:
    """``otter run`` one notebook; {question: full score?}."""
    out.mkdir(parents=True, exist_ok=True)
    _otter("run", "-a", str(zip_path), "-o", str(out), str(notebook))
    tests = json.loads((out / "results.json").read_text())["tests"]
    return {
        t["name"]: t["score"] == t["max_score"] for t in tests if t.get("max_score")
    }


def check(out: Path, notebooks: list[Path]) -> bool:
    """Grade reference and student notebooks of every chapter; print per-chapter times and the summary."""
    total = reference_pass = unanswered_pass = 0
    for path in notebooks:
        chapter = path.stem
        _, questions = parse_questions(read_notebook(path))
        zips = sorted((out / chapter / "autograder").glob("*.zip"))
        if not zips:
            raise SystemExit(
                f"{chapter}: no autograder in {out / chapter}; run `make assignments` first"
            )
        start = time.perf_counter()
        reference = _grade(
            zips[-1],
            out / chapter / "autograder" / f"{chapter}.ipynb",
            out / "results" / chapter / "reference",
        )
        seconds = time.perf_counter() - start
        unanswered = _grade(
            zips[-1],
            out / chapter / "student" / f"{chapter}.ipynb",
            out / "results" / chapter / "unanswered",
        )
        names = [q.name for q in questions]
        total += len(names)
        reference_pass += sum(reference.get(n, False) for n in names)
        unanswered_pass += sum(unanswered.get(n, False) for n in names)
        failed = [n for n in names if not reference.get(n, False)]
        passed = [n for n in names if unanswered.get(n, False)]
        print(
            f"{chapter}: {len(names)} exercises graded in {seconds:.0f} s"
            + (f"; reference FAILS {failed}" if failed else "")
            + (f"; unanswered PASSES {passed}" if passed else "")
        )
    print(
        f"assignments: {total} exercises, {reference_pass} pass with the reference solutions, "
        f"{unanswered_pass} pass unanswered"
    )
    return reference_pass == total and unanswered_pass == 0


def main(argv: list[str] | None = None) -> int:
    """The command line: ``build|check OUT NOTEBOOK.ipynb…`` (see the module docstring); exit status 2
    with one line for a bad argument (an unknown command, a notebook that does not exist, an ``OUT``
    that is or holds a source folder of the checkout, :func:`gitutor.cli.output_folder`)."""
    import argparse

    from gitutor import cli

    parser = argparse.ArgumentParser(
        prog="python -m gitutor.assignments", description=__doc__.splitlines()[0]
    )
    parser.add_argument("command", choices=("build", "check"))
    parser.add_argument(
        "out",
        type=cli.output_folder(Path(__file__).resolve().parents[1]),
        help="folder of the student notebooks and autograders (not a source folder)",
    )
    parser.add_argument(
        "notebooks",
        nargs="+",
        type=cli.existing_file,
        help="chapter notebooks (.ipynb)",
    )
    args = parser.parse_args(argv)
    not_notebooks = [str(path) for path in args.notebooks if path.suffix != ".ipynb"]
    if not_notebooks:
        parser.error(f"not notebooks (.ipynb): {', '.join(not_notebooks)}")
    if args.command == "build":
        build(args.out, args.notebooks)
        return 0
    return 0 if check(args.out, args.notebooks) else 1


if __name__ == "__main__":
    sys.exit(main())
