"""The chapters' graded exercises: structure, reference solutions, and one typical wrong answer each.

The checks of every exercise are otter's exception-based test functions stored in the chapter
notebook; ``gitutor.assignments.run_tests`` calls them as otter does. Each wrong answer below is run
on top of the reference namespace (so only the answer changes) and must be rejected by at least one
check. ``make check-assignments`` grades the same notebooks end to end with ``otter run``.
"""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from gitutor.assignments import (
    GRADING_EXTRAS,
    GRADING_PYTHON,
    Question,
    build,
    exercise_cells,
    grading_config,
    grading_master,
    grading_requirements,
    parse_questions,
    read_notebook,
    reference_leaks,
    check_names,
    resolve_reference,
    run_tests,
    solution_lines,
    withhold_sources,
)

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("0*.ipynb"))

#: One easy-to-make mistake per exercise (question name -> code replacing the answer).
WRONG_ANSWERS = {
    # forgets the number of local steps: reads −Δ/η as the gradient of a multi-step update
    "update_to_gradient": """
def as_gradient(sent, start, lr, steps):
    return [-(w_k - w) / lr for w_k, w in zip(sent, start)]
""",
    # picks the largest σ that meets the budget instead of the smallest (most utility)
    "epsilon_budget": """
def smallest_sigma(target, steps, delta, sigmas):
    fitting = [s for s in sigmas if epsilon(s, 1.0, steps, delta) <= target]
    return max(fitting) if fitting else None
""",
    # the norm instead of its square: the terms no longer sum to DLG's distance
    "dlg_layer_distances": """
def layer_distances(model, dummy_x, dummy_logits, target_grads):
    soft = torch.softmax(dummy_logits, dim=-1)
    dummy_grads = client_gradients(model, dummy_x, soft, create_graph=True)
    return [(d - t).norm() for d, t in zip(dummy_grads, target_grads)]
""",
    # off by one in the list: the last rate at which DLG still succeeds
    "dlg_pruning": "first_stopping_rate = max(r for r, v in ex_psnr_by_rate.items() if v >= EX_PSNR_BAR)",
    # sign error: the most positive row
    "idlg_sign_rule": """
def sign_rule_label(fc_weight_grad):
    return int(fc_weight_grad.sum(dim=1).argmax())
""",
    # sign error in Eq. 4: + ρ/λ
    "lambda_label": """
def label_at(lam, fc_weight, fc_weight_grad):
    weight, grad = fc_weight.double(), fc_weight_grad.double()
    row_r = grad[grad.sum(dim=1).abs().argmax()]
    return torch.softmax(lam * (weight @ row_r), dim=0) + (grad @ row_r / row_r.dot(row_r)) / lam
""",
    # forgets that the true class also receives ε / C
    "recovered_epsilon": "epsilon_hat = 1 - float(ex_recovered.label.max())",
    # no sorting: the CV of each raw feature entry
    "sorted_cv": """
def sorted_feature_cv(features):
    return features.std(dim=0) / features.mean(dim=0)
""",
    # not like for like: the median unsorted CV instead of the largest of the EX_TOP_M smallest
    "cv_after_sorting": "unsorted_kept_cv_max = float((ex_column_std / ex_column_mean)[ex_column_mean > 0].median())",
    # off by one in the schedule: steps after interval − 1 iterations
    "stepwise_start_index": """
def start_index(t, start, floor, step, interval):
    return max(floor, start - step * ((t + 1) // interval))
""",
    # keeps an entry with probability `rate` instead of 1 − rate
    "dropout_masks": """
def dropout_keep_masks(grads, rate, generator):
    return [(torch.rand(g.shape, generator=generator) < rate).to(g.dtype) for g in grads]
""",
    # the shallow tensors instead of the deep ones
    "deep_layers_offset": "distance_deep = float(cosine_gradient_distance(ex_shifted_grads, ex_grads, indices=range(ex_start)))",
    # always rescales to ζ ||g_p||, also when g_gm is already smaller
    "zeta_clipping": """
def clip_to_prior(g_gm, g_prior, zeta):
    return g_gm * float(zeta * g_prior.norm() / g_gm.norm())
""",
    # off by one: f = i / S never reaches 1, so the schedule stops short of t_min
    "tau_schedule": """
def tau_mean(steps, t_max=999, t_min=500):
    f = torch.arange(steps, dtype=torch.float64) / steps
    return t_min + (t_max - t_min) * (1 - f) * (1 + torch.cos(math.pi * f)) / 2
""",
    # the mean of the errors to the faces instead of the error to the mean face
    "mean_face": "mse_to_mean = sum(float(mse(ex_representative, face[None])) for face in ex_user) / len(ex_user)",
    # overwrites instead of summing the coordinates that share a bin
    "feature_hashing": """
def hash_vector(vector, bins, k):
    out = torch.zeros(k, dtype=vector.dtype)
    out[bins] = vector
    return out
""",
    # no matching: the outputs are compared with the images in the given order
    "lti_loss": """
def lti_loss(reconstructed, images):
    return ((reconstructed - images) ** 2).mean()
""",
    # averages per-tensor cosines instead of the cosine of the whole gradient
    "sign_keeps_direction": "cos_sign = sum(float(torch.cosine_similarity(a.reshape(-1), b.reshape(-1), dim=0)) for g in ex_client_grads for a, b in zip(g, sign_compress(g))) / sum(len(g) for g in ex_client_grads)",
    # forgets the factor 2 (the dual update doubles the step)
    "admm_closed_form": """
def closed_form_pseudo_gradient(grads, dual):
    return [g + pi for g, pi in zip(grads, dual)]
""",
    # compares with the gradient instead of twice the gradient
    "admm_local_steps": "relative_gap = float(torch.cat([(s - g).reshape(-1) for s, g in zip(ex_sent10, ex_true)]).norm() / torch.cat([g.reshape(-1) for g in ex_true]).norm())",
}


#: Mistakes the public checks must reject with a message that says what was expected
#: (question name -> {mistake: code replacing the answer}).
PUBLIC_MISTAKES = {
    "stepwise_start_index": {
        "wrong sign": """
def start_index(t, start, floor, step, interval):
    return max(floor, start + step * (t // interval))
""",
        "off-by-one step": """
def start_index(t, start, floor, step, interval):
    return max(floor, start - step * ((t + 1) // interval))
""",
        "no floor": """
def start_index(t, start, floor, step, interval):
    return start - step * (t // interval)
""",
        "NumPy integers": """
import numpy as np

def start_index(t, start, floor, step, interval):
    return np.maximum(floor, start - step * (t // interval))
""",
    },
    "dropout_masks": {
        "NumPy arrays for tensors": """
def dropout_keep_masks(grads, rate, generator):
    keep = [torch.rand(g.shape, generator=generator) >= rate for g in grads]
    return [k.numpy().astype("float32") for k in keep]
""",
        "wrong sign (keeps with probability rate)": """
def dropout_keep_masks(grads, rate, generator):
    return [(torch.rand(g.shape, generator=generator) < rate).to(g.dtype) for g in grads]
""",
        "boolean masks": """
def dropout_keep_masks(grads, rate, generator):
    return [torch.rand(g.shape, generator=generator) >= rate for g in grads]
""",
        "ignores the generator": """
def dropout_keep_masks(grads, rate, generator):
    return [(torch.rand(g.shape) >= rate).to(g.dtype) for g in grads]
""",
    },
    "deep_layers_offset": {
        "tensors for floats": "distance_deep = cosine_gradient_distance(ex_shifted_grads, ex_grads)",
    },
    "idlg_sign_rule": {
        "wrong sign": """
def sign_rule_label(fc_weight_grad):
    return int(fc_weight_grad.sum(dim=1).argmax())
""",
    },
    "lambda_label": {
        "NumPy array for a tensor": """
def label_at(lam, fc_weight, fc_weight_grad):
    weight, grad = fc_weight.double(), fc_weight_grad.double()
    row_r = grad[grad.sum(dim=1).abs().argmax()]
    rho = grad @ row_r / row_r.dot(row_r)
    return (torch.softmax(lam * (weight @ row_r), dim=0) - rho / lam).numpy()
""",
    },
    "update_to_gradient": {
        "wrong sign (Δ/(η·steps))": """
def as_gradient(sent, start, lr, steps):
    return [(w_k - w) / (lr * steps) for w_k, w in zip(sent, start)]
""",
    },
    "sorted_cv": {
        "wrong axis (sorts each feature over the samples)": """
def sorted_feature_cv(features):
    ranked = features.sort(dim=0, descending=True).values
    return ranked.std(dim=0) / ranked.mean(dim=0)
""",
    },
    "tau_schedule": {
        "off-by-one step": """
def tau_mean(steps, t_max=999, t_min=500):
    f = torch.arange(steps, dtype=torch.float64) / steps
    return t_min + (t_max - t_min) * (1 - f) * (1 + torch.cos(math.pi * f)) / 2
""",
    },
}


def _questions():
    return [(path.stem, q) for path in CHAPTERS for q in parse_questions(read_notebook(path))[1]]


@pytest.fixture(scope="module")
def reference_namespaces():
    """Per chapter: the namespace after the exercise block's setup and reference solutions."""
    cache = {}

    def namespace(chapter):
        if chapter not in cache:
            setup, questions = parse_questions(read_notebook(ROOT / "notebooks" / f"{chapter}.ipynb"))
            env: dict = {}
            with contextlib.redirect_stdout(io.StringIO()):
                for code in setup + [cell for q in questions for cell in q.solution_cells]:
                    exec(compile(code, f"<{chapter} exercises>", "exec"), env)
            cache[chapter] = env
        return cache[chapter]

    return namespace


def test_every_chapter_has_a_tagged_exercise_block_at_its_end():
    toc = (ROOT / "_toc.yml").read_text()
    assert len(CHAPTERS) == 8 and all(f"notebooks/{p.stem}" in toc for p in CHAPTERS)
    total = 0
    for path in CHAPTERS:
        nb = read_notebook(path)
        block = exercise_cells(nb)  # raises unless contiguous at the end
        assert "".join(block[0]["source"]).startswith("# ASSIGNMENT CONFIG"), path.name
        assert f"name: {path.stem}" in "".join(block[0]["source"])
        for cell in block:
            if cell["cell_type"] == "raw":
                assert "remove-cell" in cell["metadata"]["tags"], "otter's raw cells must not render"
        _, questions = parse_questions(nb)
        assert len(questions) >= 2, f"{path.name} needs at least two exercises"
        for q in questions:
            assert q.solution_cells and any(solution_lines(c) for c in q.solution_cells), q.name
            assert any("hidden: true" in t for t in q.test_cells), f"{q.name} needs a hidden check"
        total += len(questions)
    assert total >= 14


def test_a_test_cell_with_two_checks_is_refused_since_otter_runs_only_the_first():
    """otter assign keeps the first test function of a cell (student copy and autograder alike): a
    second check in the same cell would never run, so the chapters put each check in its own cell."""
    def cell(kind, text):
        return {"cell_type": kind, "metadata": {"tags": ["exercise"]}, "source": text}

    header = '""" # BEGIN TEST CONFIG\nhidden: false\n"""  # END TEST CONFIG\n'
    two = header + "def test_a(f):\n    assert f, 'expected f'\n\n\ndef test_b(f):\n    assert f, 'expected f'\n"
    nb = {"cells": [cell("raw", "# ASSIGNMENT CONFIG\nname: x"), cell("raw", "# BEGIN QUESTION\nname: q"),
                    cell("raw", "# BEGIN TESTS"), cell("code", two), cell("raw", "# END TESTS"),
                    cell("raw", "# END QUESTION")]}
    with pytest.raises(ValueError, match=r"'q' defines 2 test functions \['test_a', 'test_b'\]"):
        parse_questions(nb)
    for _, question in _questions():  # the chapters: one check per cell
        assert all(len(check_names(code)) == 1 for code in question.test_cells), question.name


def test_question_names_are_unique_and_each_has_a_wrong_answer():
    names = [q.name for _, q in _questions()]
    assert len(names) == len(set(names))
    assert set(names) == set(WRONG_ANSWERS)


def test_exercise_cells_are_stored_without_outputs():
    for path in CHAPTERS:
        for cell in exercise_cells(json.loads(path.read_text())):
            assert cell.get("outputs", []) == [] and cell.get("execution_count") is None, path.name


@pytest.mark.parametrize("chapter,question", _questions(), ids=[q.name for _, q in _questions()])
def test_reference_passes_and_wrong_answer_fails(chapter, question, reference_namespaces):
    env = reference_namespaces(chapter)
    reference = run_tests(question, env)
    assert reference and all(passed for _, passed, _ in reference), reference
    wrong = dict(env)
    exec(compile(WRONG_ANSWERS[question.name], f"<wrong answer to {question.name}>", "exec"), wrong)
    results = run_tests(question, wrong)
    assert not all(passed for _, passed, _ in results), f"the checks of {question.name} accept the wrong answer"


def _checks(question, hidden):
    """The question with only its hidden (or only its public) checks."""
    flag = f"hidden: {str(hidden).lower()}"
    return Question(question.name, test_cells=[c for c in question.test_cells if flag in c])


@pytest.mark.parametrize(
    "chapter,question",
    [(c, q) for c, q in _questions() if q.name in PUBLIC_MISTAKES],
    ids=[q.name for c, q in _questions() if q.name in PUBLIC_MISTAKES],
)
def test_public_checks_reject_common_mistakes_saying_what_was_expected(
    chapter, question, reference_namespaces
):
    env = reference_namespaces(chapter)
    assert all(passed for _, passed, _ in run_tests(_checks(question, hidden=False), env))
    for mistake, code in PUBLIC_MISTAKES[question.name].items():
        wrong = dict(env)
        exec(compile(code, f"<{mistake} in {question.name}>", "exec"), wrong)
        failed = [message for _, passed, message in run_tests(_checks(question, hidden=False), wrong) if not passed]
        assert failed, f"{question.name}: the public checks accept the {mistake}"
        assert any("expected" in message for message in failed), (question.name, mistake, failed)
        hidden = [m for _, passed, m in run_tests(_checks(question, hidden=True), wrong) if not passed]
        assert all(m.split(":", 1)[1].strip() for m in hidden), (question.name, mistake, hidden)
        # a hidden check fails on what it asserts (saying what it expected), not on a crash
        # such as NumPy's AttributeError for .double()
        assert all(m.startswith("AssertionError") for m in hidden), (question.name, mistake, hidden)


def test_every_check_says_why_it_failed():
    """No bare ``assert`` in a check: otter would print only ``AssertionError:``."""
    import ast

    bare = [
        (q.name, ast.unparse(node)[:60])
        for _, q in _questions()
        for code in q.test_cells
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Assert) and node.msg is None
    ]
    assert not bare, bare


def test_every_hidden_check_says_what_was_expected():
    """A hidden check's failure reaches the student after grading: its message says what was expected."""
    import ast

    def words(message) -> str:  # the message's own text, not the names it formats
        return " ".join(n.value for n in ast.walk(message) if isinstance(n, ast.Constant) and isinstance(n.value, str))

    vague = [
        (q.name, ast.unparse(node.msg)[:60])
        for _, q in _questions()
        for code in q.test_cells
        if "hidden: true" in code
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Assert) and not any(w in words(node.msg) for w in ("expected", "want "))
    ]
    assert not vague, vague


STEPWISE_CELL = """print(inspect.getsource(StepwiseSchedule.start_index).split('x')[-1])
floor = 3
source = inspect.getsource(attacks.gradient_dropout_masks)
print(source[source.index("keep") :])
print(floor)
"""


def _notebook(body: str, setup: str, masks_cell: str = "x = 1", index_cell: str = "y = 2") -> dict:
    def cell(kind, text, *tags):
        return {"cell_type": kind, "metadata": {"tags": list(tags)}, "source": text, "outputs": []}

    return {
        "cells": [
            cell("code", body),
            cell("raw", "# ASSIGNMENT CONFIG\nname: toy", "exercise"),
            cell("code", setup, "exercise"),
            cell("raw", "# BEGIN QUESTION\nname: masks\nreference: gitutor.attacks.gradient_dropout_masks", "exercise"),
            cell("code", masks_cell, "exercise"),
            cell("raw", "# END QUESTION", "exercise"),
            cell("raw", "# BEGIN QUESTION\nname: index\nreference: gitutor.attacks.StepwiseSchedule.start_index", "exercise"),
            cell("code", index_cell, "exercise"),
            cell("raw", "# END QUESTION", "exercise"),
        ]
    }


def test_withhold_sources_drops_what_prints_a_reference_and_what_reads_it():
    nb = _notebook(STEPWISE_CELL, "import torch")
    _, questions = parse_questions(nb)
    assert [q.references for q in questions] == [
        ("gitutor.attacks.gradient_dropout_masks",),
        ("gitutor.attacks.StepwiseSchedule.start_index",),
    ]
    assert len(reference_leaks(nb, nb)) == 2
    student, withheld = withhold_sources(nb, questions)
    assert student["cells"][0]["source"].splitlines() == [
        "# student copy: withheld here, it shows the answer to 'index'",
        "floor = 3",
        "# student copy: withheld here, it shows the answer to 'masks'",
        "print(floor)",
    ]
    assert withheld == ["cell 0: masks"] and reference_leaks(nb, student) == []
    assert nb["cells"][0]["source"] == STEPWISE_CELL, "the chapter itself is unchanged"


def test_reference_leaks_finds_imports_before_the_question_and_copied_code():
    # the class that holds start_index, imported in the setup cell
    nb = _notebook("x = 0", "from gitutor.attacks import StepwiseSchedule, cosine_gradient_distance")
    assert reference_leaks(nb, nb) == [
        "the exercise block imports StepwiseSchedule "
        "(holding gitutor.attacks.StepwiseSchedule.start_index) before question 'index'"
    ]
    # imported in an earlier question's cell: still before the question
    nb = _notebook("x = 0", "import torch", masks_cell="from gitutor.attacks import StepwiseSchedule")
    assert len(reference_leaks(nb, nb)) == 1
    # imported in the question's own cell (the exercise needs the class): allowed
    nb = _notebook("x = 0", "import torch", index_cell="from gitutor.attacks import StepwiseSchedule")
    assert reference_leaks(nb, nb) == []
    # a line of the reference's own code, e.g. in an output
    copied = "        torch.rand(buffer.shape, generator=generator, out=buffer)"
    nb = _notebook("x = 0", "import torch")
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": copied}]
    leaks = reference_leaks(nb, nb)
    assert len(leaks) == 1 and "gitutor.attacks.gradient_dropout_masks" in leaks[0], leaks


@pytest.mark.parametrize("name", ["torch.nn", "gitutor.attacks", "gitutor.attacks.no_such_thing"])
def test_resolve_reference_refuses_what_is_not_gitutor_code(name):
    with pytest.raises(ValueError, match="reference"):
        resolve_reference(name)


def test_every_reference_imports_and_answers_a_question_that_asks_for_code():
    for _, question in _questions():
        for ref in question.references:
            obj, _ = resolve_reference(ref)
            assert callable(obj), ref


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every chapter built with ``build`` (``otter assign``) once for this module's tests."""
    pytest.importorskip("otter")
    out = tmp_path_factory.mktemp("assignments")
    with contextlib.redirect_stdout(io.StringIO()):
        build(out, CHAPTERS)
    return out


def test_chapter_04_shows_its_references_and_the_student_copy_does_not(built):
    """``build`` (``otter assign``) every chapter: no student copy prints, holds or imports (before
    the question) the code a question asks for; chapter 04's own page does show two of them."""
    chapter_04 = read_notebook(ROOT / "notebooks" / "04_stepwise_gradinversion.ipynb")
    assert len(reference_leaks(chapter_04, grading_master(chapter_04))) == 2
    for path in CHAPTERS:
        student = read_notebook(built / path.stem / "student" / path.name)
        assert reference_leaks(read_notebook(path), student) == [], path.stem


def _zip_text(built: Path, chapter: str, name: str) -> str:
    import zipfile

    (zip_path,) = (built / chapter / "autograder").glob("*.zip")
    with zipfile.ZipFile(zip_path) as archive:
        return archive.read(name).decode()


def test_autograder_zip_installs_gitutor_from_the_launch_ref(built):
    """The zip's ``environment.yml`` (what ``otter grade``'s Docker image and Gradescope install)
    holds the Python the book supports and ``gitutor`` with its grading extras from the repository
    and ref the launch buttons open (``_config.yml``), not only otter-grader."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sync_colab_cell", ROOT / "scripts" / "sync_colab_cell.py")
    sync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    url, ref = sync.repository(ROOT)
    want = f"gitutor[{GRADING_EXTRAS}] @ git+{url}@{ref}"
    assert grading_requirements(ROOT) == [want]
    for path in CHAPTERS:
        environment = _zip_text(built, path.stem, "environment.yml")
        assert f"- python={GRADING_PYTHON}\n" in environment, (path.stem, environment)
        assert f"- {want}\n" in environment, (path.stem, environment)
        assert "otter-grader" in environment, (path.stem, environment)


def test_grading_python_is_the_one_the_book_supports():
    """:data:`GRADING_PYTHON` is environment.yml's ``python=`` and meets ``requires-python``."""
    import re

    conda = re.search(r"^\s*- python=(\S+)$", (ROOT / "environment.yml").read_text(), re.M).group(1)
    assert conda == GRADING_PYTHON
    floor = re.search(r'^requires-python = ">=(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert tuple(map(int, GRADING_PYTHON.split("."))) >= tuple(map(int, floor.groups()))
    assert "fl" in GRADING_EXTRAS.split(",") and "assets" in GRADING_EXTRAS.split(",")


def test_grading_config_replaces_earlier_requirement_lines():
    nb = {
        "cells": [
            {
                "cell_type": "raw",
                "metadata": {},
                "source": "# ASSIGNMENT CONFIG\nname: x\nrequirements: old.txt\npython_version: 3.9\n",
            }
        ]
    }
    text = "".join(grading_config(nb)["cells"][0]["source"])
    assert "old.txt" not in text and "3.9" not in text
    assert text.count("python_version:") == 1 and text.count("requirements:") == 1
    assert "name: x" in text


def test_student_copy_keeps_its_checks_in_metadata_and_starts_with_otter(built):
    """What teaching.md says of the hand-out: the student copy is one notebook whose public checks
    are in its metadata (no ``tests/`` folder, which otter 7 refuses on Colab) and whose first code
    cell imports otter, before the chapter's setup cell."""
    for path in CHAPTERS:
        student_dir = built / path.stem / "student"
        student = read_notebook(student_dir / path.name)
        assert student["metadata"]["otter"]["OK_FORMAT"] is False, path.stem
        assert student["metadata"]["otter"]["tests"], path.stem
        assert not (student_dir / "tests").exists(), path.stem
        first = next(c for c in student["cells"] if c["cell_type"] == "code")
        assert "import otter" in "".join(first["source"]), path.stem
