"""Course assignments from the chapter notebooks, with otter-grader (``otter assign`` / ``otter run``).

Each chapter ends with one block of cells tagged ``exercise`` in otter's notebook format: a raw
``# ASSIGNMENT CONFIG`` cell, then questions delimited by raw ``# BEGIN QUESTION`` … ``# END QUESTION``
cells, with the reference solution between ``# BEGIN SOLUTION`` / ``# END SOLUTION`` cells and the
checks (otter's exception-based test functions) between ``# BEGIN TESTS`` / ``# END TESTS`` cells.

``python -m gitutor.assignments build OUT NOTEBOOK…`` writes, per chapter, ``OUT/<chapter>/student``
(the student notebook: no solutions, public checks only) and ``OUT/<chapter>/autograder`` (the
reference notebook and the autograder zip). The chapter body is tagged ``otter_ignore`` in both, so
grading executes only the exercise block, which builds its own inputs from gitutor.
A question's ``# BEGIN QUESTION`` cell may name, on a line ``reference: gitutor.x.y[, …]``, the
``gitutor`` code whose source answers it (a function, method or class). The student copy then keeps
none of it: every statement of the chapter that prints that source (``inspect.getsource``,
``show_source``), and every later statement of its cell that reads what it assigned, becomes one
comment line (:func:`withhold_sources`); ``build`` stops if a student copy still shows a reference's
source or the exercise block imports it before its question (:func:`reference_leaks`).
``python -m gitutor.assignments check OUT NOTEBOOK…`` grades the reference and the untouched student
notebook of every chapter with ``otter run`` and prints
``assignments: N exercises, P pass with the reference solutions, U pass unanswered``; it fails unless
P = N and U = 0 and no solution line appears in a student notebook.

This module needs otter-grader only for the command line (``pip install "gitutor[assign]"``).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import re
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from gitutor.files import read_json, write_json

EXERCISE_TAG = "exercise"
IGNORE_TAG = "otter_ignore"
_MARKER = re.compile(r"#\s*(BEGIN|END)\s+(QUESTION|SOLUTION|TESTS)\b", re.IGNORECASE)
#: Calls that print or return an object's source; their arguments are checked against references.
SOURCE_CALLS = ("getsource", "getsourcelines", "show_source")


@dataclass
class Question:
    """One otter question of a chapter: its name, the dotted names of the ``gitutor`` code that
    answers it (``reference:`` in its ``# BEGIN QUESTION`` cell), reference-solution code cells and
    test cells."""

    name: str
    references: tuple[str, ...] = ()
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
        ValueError: for unbalanced or misplaced BEGIN/END cells, a question without a name, or a test
            cell that does not define exactly one ``test_`` function (otter keeps only the first: a
            second check in the same cell would silently not run; :func:`check_names`).
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
                    refs = re.search(r"^reference:\s*(.+)$", text, re.MULTILINE)
                    refs = refs.group(1).split(",") if refs else []
                    refs = tuple(ref.strip() for ref in refs if ref.strip())
                    questions.append(Question(name.group(1), refs))
                stack.append(block)
            elif not stack or stack.pop() != block:
                raise ValueError(f"END {block} without a matching BEGIN")
        elif cell["cell_type"] == "code":
            if "SOLUTION" in stack:
                questions[-1].solution_cells.append(text)
            elif "TESTS" in stack:
                found = check_names(text)
                if len(found) != 1:
                    raise ValueError(
                        f"a test cell of question {questions[-1].name!r} defines {len(found)} test "
                        f"functions {found}: otter runs only the first of a cell, so put each in its "
                        "own cell"
                    )
                questions[-1].test_cells.append(text)
            elif not stack:
                setup.append(text)
    if stack:
        raise ValueError(f"unclosed blocks: {stack}")
    return setup, questions


def check_names(code: str) -> list[str]:
    """The names of the module-level ``test_`` functions a test cell defines, in order."""
    return [
        node.name
        for node in ast.parse(code).body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]


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


#: Python of the autograder's image (``otter grade``, Gradescope): environment.yml's ``python=``.
GRADING_PYTHON = "3.11"
#: Extras of ``gitutor`` the exercise blocks and hidden checks import: offline weights and samples
#: (``assets``) and Flower and Opacus (``fl``, chapter 8).
GRADING_EXTRAS = "assets,fl"
ROOT = Path(__file__).resolve().parents[1]


def grading_requirements(root: Path = ROOT) -> list[str]:
    """The packages the autograder's image installs beside otter: ``gitutor`` with
    :data:`GRADING_EXTRAS` from the repository and ref the book's launch buttons open
    (``repository()`` of ``scripts/sync_colab_cell.py``, read from ``_config.yml``)."""
    spec = importlib.util.spec_from_file_location(
        "_sync_colab_cell", root / "scripts" / "sync_colab_cell.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    url, ref = module.repository(root)
    return [f"gitutor[{GRADING_EXTRAS}] @ git+{url}@{ref}"]


def grading_config(nb: dict, root: Path = ROOT) -> dict:
    """A copy of ``nb`` whose ``# ASSIGNMENT CONFIG`` cell also gives otter the autograder's
    ``python_version`` (:data:`GRADING_PYTHON`) and ``requirements`` (:func:`grading_requirements`),
    so the zip's image can import what the exercises import."""
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        if cell["cell_type"] == "raw" and _source(cell).lstrip().startswith(
            "# ASSIGNMENT CONFIG"
        ):
            lines = [
                line
                for line in _source(cell).rstrip("\n").split("\n")
                if not re.match(
                    r"(python_version|requirements|overwrite_requirements):", line
                )
            ]
            lines.append(f"python_version: {json.dumps(GRADING_PYTHON)}")
            lines.append("requirements:")
            lines += [f"  - {json.dumps(r)}" for r in grading_requirements(root)]
            cell["source"] = "\n".join(lines)
            return nb
    raise ValueError("the chapter has no raw # ASSIGNMENT CONFIG cell")


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


def resolve_reference(dotted: str) -> tuple[object, list[object]]:
    """The ``gitutor`` object a question's ``reference:`` names, and the objects that hold it.

    Args:
        dotted: ``gitutor.<module>.<name>[.<attribute>…]``, e.g.
            ``gitutor.attacks.StepwiseSchedule.start_index``.

    Returns:
        ``(object, holders)``: the holders are the classes on the way to it (for the example,
        ``[StepwiseSchedule]``), outermost first; modules are not holders.

    Raises:
        ValueError: naming ``dotted`` when it does not start with ``gitutor.``, names a module,
            or does not import.
    """
    parts = dotted.split(".")
    if parts[0] != "gitutor" or len(parts) < 2:
        raise ValueError(f"reference must name gitutor code, got {dotted!r}")
    cut = len(parts)
    while cut > 1:
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
            break
        except ModuleNotFoundError:
            cut -= 1
    if cut == len(parts):
        raise ValueError(
            f"reference {dotted!r} names a module, not a function or class"
        )
    chain = []
    for attribute in parts[cut:]:
        if not hasattr(obj, attribute):
            raise ValueError(f"reference {dotted!r}: {obj!r} has no {attribute!r}")
        obj = getattr(obj, attribute)
        chain.append(obj)
    return chain[-1], chain[:-1]


def _qualname(dotted: str) -> tuple[str, ...]:
    obj, holders = resolve_reference(dotted)
    name = getattr(obj, "__qualname__", None)
    return (
        tuple(name.split("."))
        if name
        else tuple(dotted.split(".")[-1 - len(holders) :])
    )


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a name or an attribute chain; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _names(dotted: str, qualname: tuple[str, ...]) -> bool:
    """Whether ``dotted`` (an argument's text) names the object ``qualname`` or a class holding it."""
    parts = tuple(dotted.split("."))
    size = len(qualname)
    inside = any(parts[i : i + size] == qualname for i in range(len(parts)))
    holder = any(parts[-k:] == qualname[:k] for k in range(1, size))
    return inside or holder


def _asks_for_source(tree: ast.AST, targets: dict) -> str | None:
    """The first key of ``targets`` ({qualname: label}) whose source a call in ``tree`` asks for."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = (
            func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        )
        if called not in SOURCE_CALLS:
            continue
        for arg in node.args:
            dotted = _dotted(arg)
            for qualname, label in targets.items():
                if dotted and _names(dotted, qualname):
                    return label
    return None


def _python(code: str) -> ast.Module:
    """A code cell as Python (IPython's ``%`` and ``!`` lines as calls, one line each)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return ast.parse(TransformerManager().transform_cell(code))


def _targets(questions: list[Question]) -> dict[tuple[str, ...], str]:
    """{qualname of each reference: the question it answers}."""
    return {_qualname(ref): q.name for q in questions for ref in q.references}


def withhold_sources(nb: dict, questions: list[Question]) -> tuple[dict, list[str]]:
    """A copy of ``nb`` whose chapter cells no longer show the code the ``questions`` ask for.

    In each code cell outside the exercise block, every top-level statement that asks for the
    source of a question's reference (a call named in :data:`SOURCE_CALLS` whose argument names
    the reference or a class holding it), and every later statement of the cell that reads a name
    such a statement assigned, is replaced by one comment line per run of such statements; the
    rest of the cell is unchanged and its outputs are cleared, so the chapter still runs.

    Returns:
        ``(copy, withheld)``: one line ``cell <index>: <question>`` per changed cell.

    Raises:
        ValueError: from :func:`resolve_reference`, for a reference that does not import.
    """
    targets = _targets(questions)
    nb = json.loads(json.dumps(nb))
    withheld = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or EXERCISE_TAG in _tags(cell) or not targets:
            continue
        lines = _source(cell).splitlines()
        spans, tainted, question = [], set(), None
        for statement in _python(_source(cell)).body:
            names = [n for n in ast.walk(statement) if isinstance(n, ast.Name)]
            reads = {n.id for n in names if isinstance(n.ctx, ast.Load)}
            found = _asks_for_source(statement, targets)
            if found is None and not reads & tainted:
                continue
            question = found or question
            tainted |= {n.id for n in names if isinstance(n.ctx, ast.Store)}
            spans.append((statement.lineno - 1, statement.end_lineno, question))
        if not spans:
            continue
        kept, end = [], 0
        for first, last, name in spans:
            kept += lines[end:first]
            if end and first == end and kept[-1].startswith("# student copy:"):
                end = last
                continue
            kept.append(
                f"# student copy: withheld here, it shows the answer to {name!r}"
            )
            end = last
        cell["source"] = "\n".join(kept + lines[end:])
        cell["outputs"] = []
        withheld.append(f"cell {index}: {question}")
    return nb, withheld


def _code_lines(obj: object) -> set[str]:
    """The lines of ``obj``'s own code (docstring, comments and lines under 30 characters left
    out), stripped."""
    source = textwrap.dedent(inspect.getsource(obj))
    definition = ast.parse(source).body[0]
    body = definition.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    ):
        body = body[1:]
    lines = (
        source.splitlines()[body[0].lineno - 1 : body[-1].end_lineno] if body else []
    )
    return {
        line.strip()
        for line in lines
        if len(line.strip()) >= 30 and not line.strip().startswith("#")
    }


def reference_leaks(chapter_nb: dict, student_nb: dict) -> list[str]:
    """What the student copy of a chapter gives away of the code its questions ask for.

    Args:
        chapter_nb: the chapter notebook (its questions and their ``reference:`` names).
        student_nb: its student copy.

    Returns:
        One line per leak, empty when there is none: a statement that asks for a reference's
        source, a line of a reference's own code in a cell or an output, an import of a reference
        (or of a class holding it) in the exercise block before its question.

    Raises:
        ValueError: from :func:`resolve_reference`, for a reference that does not import.
    """
    _, questions = parse_questions(chapter_nb)
    targets = _targets(questions)
    leaks = []
    for index, cell in enumerate(student_nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        for statement in _python(_source(cell)).body:
            found = _asks_for_source(statement, targets)
            if found:
                leaks.append(f"cell {index} prints the source that answers {found!r}")
        shown = _source(cell) + json.dumps(cell.get("outputs", []))
        for q in questions:
            for ref in q.references:
                for line in _code_lines(resolve_reference(ref)[0]):
                    if line in shown:
                        leaks.append(f"cell {index} holds {ref}'s line {line!r}")
    answered = {q.name: q.references for q in questions}
    seen: list[
        tuple[str, object]
    ] = []  # (imported name, object) before the current cell
    for cell in exercise_cells(chapter_nb):
        text = _source(cell)
        marker = _MARKER.match(text.strip()) if cell["cell_type"] == "raw" else None
        if marker and marker.group(1).upper() == "BEGIN":
            name = re.search(r"^name:\s*(\S+)", text, re.MULTILINE)
            for ref in answered.get(name.group(1) if name else "", ()):
                obj, holders = resolve_reference(ref)
                for imported, value in seen:
                    if any(value is given for given in (obj, *holders)):
                        leaks.append(
                            f"the exercise block imports {imported} (holding {ref}) "
                            f"before question {name.group(1)!r}"
                        )
        elif cell["cell_type"] == "code":
            for node in ast.walk(_python(text)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "gitutor"
                ):
                    module = importlib.import_module(node.module)
                    for alias in node.names:
                        seen.append((alias.name, getattr(module, alias.name, None)))
    return leaks


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
    """``otter assign`` every chapter into ``out/<chapter>/{student,autograder}``, the student
    copy without the sources its questions' references hold (:func:`withhold_sources`).

    Raises:
        SystemExit: naming the chapter when ``otter assign`` fails, a solution line is in a
            student copy (:func:`leaked_lines`) or it gives away referenced code
            (:func:`reference_leaks`).
    """
    for path in notebooks:
        chapter = path.stem
        master = out / "masters" / f"{chapter}.ipynb"
        master.parent.mkdir(parents=True, exist_ok=True)
        write_json(
            master,
            grading_config(grading_master(read_notebook(path))),
            indent=1,
            ensure_ascii=False,
        )
        target = out / chapter
        subprocess.run(["rm", "-rf", str(target)], check=True)
        _otter("assign", "--no-pdfs", str(master), str(target))
        chapter_nb = read_notebook(path)
        student_path = target / "student" / f"{chapter}.ipynb"
        student, withheld = withhold_sources(
            read_notebook(student_path), parse_questions(chapter_nb)[1]
        )
        write_json(student_path, student, indent=1, ensure_ascii=False)
        leaks = leaked_lines(chapter_nb, student)
        if leaks:
            raise SystemExit(
                f"{chapter}: the student notebook contains solution lines: {leaks}"
            )
        leaks = reference_leaks(chapter_nb, student)
        if leaks:
            raise SystemExit(
                f"{chapter}: the student notebook gives away referenced code: {leaks}"
            )
        print(
            f"{chapter}: {student_path} and its autograder"
            + (f" ({len(withheld)} source cells withheld)" if withheld else "")
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
