"""Chapter 02's recorded Table 3 study (Wang et al. ICLR 2024, §4.3): paired trials, curves to the budget, the
journal's resume, arguments refused by name, the record's check; and the options of gitutor.attacks.dlg the
study runs (TV, step decay, lowest-objective iterate: the authors' L2 recipe)."""

import copy
import importlib.util
import itertools
import json
import pathlib

import pytest
import torch

from gitutor.attacks import dlg, dlg_distance
from gitutor.attacks.loop import optimise_images
from gitutor.attacks.objectives import total_variation
from gitutor.chapters.idlg_soft_labels import table3_study as study
from gitutor.federated import client_gradients
from gitutor.models import LeNet, init_uniform_
from gitutor.sweeps import run_trials

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: The trial's code path in well under a second: 16×16, 3 L-BFGS and 6 Adam steps, 3 curve points.
TINY = dict(
    study.SETTING,
    size=16,
    points=3,
    methods={
        "L2": dict(study.METHODS["L2"], iterations=3),
        "cos": dict(study.METHODS["cos"], iterations=6),
    },
)


def _script():
    spec = importlib.util.spec_from_file_location(
        "table3_study_02", ROOT / "scripts" / "table3_study_02.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def one_start():
    """Every setting of one (kind, image, repeat): mixup, sample 2, start 1."""
    return {
        s: study.trial(TINY, kind="mixup", setting=s, image=2, repeat=1)
        for s in study.SETTINGS
    }


def test_trials_are_paired_same_sample_and_start_in_every_setting(one_start):
    trials = study.study_trials([0, 3], 2)
    assert len(trials) == len(study.KINDS) * len(study.SETTINGS) * 2 * 2
    cells = {}
    for t in trials:
        cells.setdefault((t["kind"], t["image"], t["repeat"]), set()).add(t["setting"])
    assert all(s == set(study.SETTINGS) for s in cells.values())
    # the start depends on (kind, image, repeat) only; starts and samples differ between trials
    starts = {study.start_seed(k, i, r) for k, i, r in cells}
    assert len(starts) == len(cells)
    assert study.sample_seed("mixup", 0) != study.sample_seed("smoothing", 0)
    # the same start in all seven settings: the step-0 iterate scores the same PSNR (z ~ N(0, 1) mapped
    # to pixels by the same standardisation, L2 through dlg and cos through inverting_gradients)
    at_start = [value["curve"][0] for value in one_start.values()]
    assert all(step == 0 for step, _ in at_start)
    assert max(p for _, p in at_start) - min(p for _, p in at_start) < 1e-3
    # the same sample: the given labels' errors are those of one sample (GT exact)
    assert one_start["cos / GT"]["label_l1"] == one_start["L2 / GT"]["label_l1"] == 0
    assert one_start["L2 / Ours"]["label_l1"] == pytest.approx(
        one_start["cos / Ours"]["label_l1"]
    )
    assert one_start["L2 / DLG"]["label_l1"] is None


def test_a_trials_curve_rises_in_step_and_ends_at_its_budget(one_start):
    for setting, value in one_start.items():
        budget = TINY["methods"][setting.split(" / ")[0]]["iterations"]
        steps = [step for step, _ in value["curve"]]
        assert steps[0] == 0 and steps[-1] == budget == value["iterations"], setting
        assert all(a < b for a, b in itertools.pairwise(steps)), setting
        assert value["psnr_last"] == value["curve"][-1][1]
        assert 1 <= value["best_iteration"] <= budget
        assert [s for s, _ in value["loss_curve"]] == [s for s in steps if s < budget]
        if setting.startswith(
            "cos"
        ):  # TV weighed against the matching term at a quarter of the budget
            assert value["prior"]["step"] == budget // 4
            assert value["prior"]["tv_over_matching"] > 0
            assert 0 <= value["prior"]["sign_agreement"] <= 1
        else:
            assert value["prior"] is None


def test_resume_from_the_journal_skips_done_trials(tmp_path, capsys):
    script = _script()
    record = tmp_path / "t3.json"
    args = ["--images", "1", "--repeats", "1", "--size", "16", "--l2-iterations", "3",
            "--cos-iterations", "6", "--record", str(record)]  # fmt: skip
    context = script.context_of(script.parse(args))
    assert context == dict(
        TINY, points=study.SETTING["points"]
    )  # the script's curve keeps 30 points
    *_, code = script.code_version(ROOT)
    journal = script.journal_path(record, code)
    trials = study.study_trials([0], 1)
    first = run_trials(study.trial, trials[:3], context=context, journal=journal)
    assert all(o.ok for o in first)
    assert script.main(args) == 0
    out = capsys.readouterr().out
    assert f"{len(trials)} trials" in out and "3 already in" in out
    saved = json.loads(
        record.read_text()
    )  # a short check's record: not the study's setting
    assert saved["provenance"]["resumed_trials"] == 3
    assert len(saved["trials"]) == len(trials) and not journal.exists()
    for outcome, kept in zip(
        first, saved["trials"]
    ):  # the journaled trials, not run again
        assert kept["value"]["curve"] == outcome.value["curve"]
    assert set(saved["controls"]) == set(study.KINDS)


def test_the_record_check_refuses_a_wrong_setting_or_a_missing_trial(tmp_path):
    value = {"psnr": 20.0, "iterations": 300, "curve": [[0, 10.0], [300, 20.0]]}
    trials = [dict(t, value=value) for t in study.study_trials([0], 1)]
    controls = {kind: [{"control": "mean colour", "psnr": 12.0}] for kind in study.KINDS}
    record = {"study": "02_table3", "setting": study.SETTING, "images": [0], "repeats": 1,
              "trials": trials, "controls": controls, "provenance": {}}  # fmt: skip
    path = tmp_path / "02_table3.json"
    path.write_text(json.dumps(record))
    assert study.read_record(path)["repeats"] == 1
    wrong = copy.deepcopy(record)
    wrong["setting"]["methods"]["cos"]["iterations"] = 200  # the quick page's budget
    path.write_text(json.dumps(wrong))
    with pytest.raises(ValueError, match="not the study's setting"):
        study.read_record(path)
    path.write_text(json.dumps(dict(record, trials=trials[1:])))
    with pytest.raises(ValueError, match="distinct trials"):
        study.read_record(path)
    path.write_text(json.dumps(dict(record, study="01_defenses")))
    with pytest.raises(ValueError, match="not a Table 3 study record"):
        study.read_record(path)


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda: study.trial(TINY, kind="blur", setting="L2 / GT", image=0, repeat=0), ValueError, "kind"),
        (lambda: study.trial(TINY, kind="mixup", setting="L1 / GT", image=0, repeat=0), ValueError, "setting"),
        (lambda: study.trial(TINY, kind="mixup", setting="L2 / GT", image=19, repeat=0), ValueError, "image"),
        (lambda: study.trial(TINY, kind="mixup", setting="L2 / GT", image=0, repeat=10), ValueError, "repeat"),
        (lambda: study.trial(TINY, kind="mixup", setting="L2 / GT", image=0, repeat="0"), TypeError, "repeat"),
        (lambda: study.trial({"size": 16}, kind="mixup", setting="L2 / GT", image=0, repeat=0), ValueError,
         "context"),
        (lambda: study.study_trials([], 1), ValueError, "images"),
        (lambda: study.study_trials([0, 0], 1), ValueError, "images"),
        (lambda: study.study_trials([0], 0), ValueError, "repeats"),
        (lambda: study.cpu_hours(images=20), ValueError, "images"),
        (lambda: study.cpu_hours(size=24), ValueError, "size"),
        (lambda: study.start_seed("mixup", 0, -1), ValueError, "repeat"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_by_name_before_anything_runs(call, error, name):
    with pytest.raises(error, match=name):
        call()


def test_the_script_refuses_bad_arguments_by_name(capsys):
    script = _script()
    for args, name in ((["--images", "20"], "--images"), (["--repeats", "11"], "--repeats"),
                       (["--cos-iterations", "200"], "--cos-iterations"), (["--images", "5"], "--images"),
                       (["--record", "x.txt"], "--record"), (["--sanity", "--repeats", "2"], "--repeats"),
                       (["--sanity", "--pilot"], "--pilot"), (["--sanity", "--images", "5"], "--images")):  # fmt: skip
        with pytest.raises(SystemExit):
            script.parse(args)
        assert name in capsys.readouterr().err


def test_cpu_hours_counts_every_trial_at_its_budget():
    per_pair = sum(
        study.METHODS[s.split(" / ")[0]]["iterations"]
        * study.STEP_SECONDS[32, s.split(" / ")[0]]
        for s in study.SETTINGS
    )
    assert study.cpu_hours(10, 3) == pytest.approx(2 * 10 * 3 * per_pair / 3600)
    assert study.cpu_hours(19, 10) > study.cpu_hours(10, 3)


# --- gitutor.attacks.dlg's options for the authors' L2 recipe (Wang et al.'s recovering.py) ---


def _case(seed=0):
    gen = torch.Generator().manual_seed(seed)
    model = init_uniform_(
        LeNet(5, in_channels=3, image_size=8, fc_bias=False), generator=gen
    )
    x, y = torch.rand(1, 3, 8, 8, generator=gen), torch.tensor([2])
    return model, x, y, [g.detach() for g in client_gradients(model, x, y)]


def test_dlg_defaults_are_unchanged_by_the_new_options():
    model, x, y, grads = _case()
    plain = dlg(model, grads, x.shape, 5, labels=y, iterations=4)
    named = dlg(
        model,
        grads,
        x.shape,
        5,
        labels=y,
        iterations=4,
        tv_weight=0.0,
        lr_steps=(),
        keep_best=False,
    )
    assert torch.equal(plain.images, named.images)
    assert plain.history["loss"] == named.history["loss"]


def test_dlg_tv_weight_adds_the_total_variation_to_the_distance():
    model, x, y, grads = _case(1)
    run = dlg(model, grads, x.shape, 5, labels=y, iterations=2, tv_weight=1e-2)
    start = run.snapshots[0][1]
    distance = float(dlg_distance(model, start, None, grads, labels=y).detach())
    tv = float(total_variation(start))
    assert run.history["loss"][0] == pytest.approx(distance + 1e-2 * tv, rel=1e-5)
    assert run.history["tv"][0] == pytest.approx(tv, rel=1e-5)


def test_dlg_lr_steps_decay_the_learning_rate_at_the_milestones():
    model, x, y, grads = _case(2)
    run = dlg(
        model, grads, x.shape, 5, labels=y, iterations=8, lr_steps=(0.375, 0.625, 0.875)
    )
    assert run.history["lr"] == pytest.approx(
        [1.0] * 3 + [0.1] * 2 + [0.01] * 2 + [0.001]
    )


def test_dlg_keep_best_returns_the_lowest_objective_iterate():
    model, x, _, grads = _case(3)
    after = dlg(model, grads, x.shape, 5, iterations=6, keep_best=True, record_every=1)
    losses, best = after.history["loss"], after.info["best_iteration"]
    assert losses[best - 1] == min(
        losses
    )  # the step whose recorded objective was the lowest
    assert torch.equal(after.images, dict(after.snapshots)[best])
    # "scored" (Wang et al.'s pick_best): the iterate the lowest objective was scored at, the final one
    # included; a step that blows up (lr 50, no line search) is not what it returns
    for lr in (1.0, 50.0):
        run = dlg(
            model,
            grads,
            x.shape,
            5,
            iterations=6,
            keep_best="scored",
            record_every=1,
            lr=lr,
        )
        scored = [*run.history["loss"], run.info["final_objective"]]
        best = run.info["best_iteration"]
        assert scored[best] == min(scored)
        assert torch.equal(run.images, dict(run.snapshots)[best])
        assert scored[best] <= run.history["loss"][0]  # never worse than the start


def test_an_lbfgs_inner_iterate_that_leaves_the_finite_numbers_stops_the_run():
    """L-BFGS's fixed step may jump to inf inside a step (mixup sample 1, L2 / DLG, at 32×32); the objective
    (like client_gradients) refuses a non-finite x, so the loop must stop there, not raise."""

    def objective(x, t):
        if not torch.isfinite(x).all():
            raise ValueError("x contains NaN or inf")
        # unbounded below, and finite in float64 where x (float32) is not
        return {"loss": -x.double().sum()}

    x0 = torch.full((1, 1, 2, 2), 3.0)
    run = optimise_images(objective, x0, iterations=5, lr=1e37, step_rule="lbfgs", signed=False,
                          box=None, best_resets=lambda t: False, best_at="scored")  # fmt: skip
    assert "stopped_early" in run.info and torch.isfinite(run.images).all()
    held = run.snapshots[-1]  # the snapshots end with the iterate the run holds
    assert held[0] == len(run.history["loss"]) and torch.isfinite(held[1]).all()
    assert not torch.equal(held[1], x0)  # steps were taken before the one that failed


@pytest.mark.parametrize(
    "options, error, name",
    [({"tv_weight": -1.0}, ValueError, "tv_weight"), ({"lr_steps": (1.5,)}, ValueError, "lr_steps"),
     ({"keep_best": "yes"}, TypeError, "keep_best"), ({"keep_best": 1}, TypeError, "keep_best")],
)  # fmt: skip
def test_dlg_refuses_bad_new_options_by_name(options, error, name):
    model, x, y, grads = _case()
    with pytest.raises(error, match=name):
        dlg(model, grads, x.shape, 5, labels=y, iterations=1, **options)


def test_the_sanity_arm_starts_at_the_truth_and_is_recorded_and_checked(tmp_path, capsys):
    value = study.sanity_trial(TINY, kind="smoothing", setting="cos / GT", image=1)
    assert 30 < value["start_psnr"] < 40 and value["curve"][0][1] == pytest.approx(value["start_psnr"], abs=0.5)
    l2 = study.sanity_trial(TINY, kind="smoothing", setting="L2 / GT", image=1)
    assert l2["curve"][0][1] == pytest.approx(value["start_psnr"], abs=0.5)  # the same start, in z for L2
    with pytest.raises(ValueError, match="setting"):
        study.sanity_trial(TINY, kind="mixup", setting="L2 / DLG", image=0)  # its own label is not known
    script = _script()
    record = tmp_path / "sanity.json"
    args = ["--sanity", "--images", "1", "--size", "16", "--l2-iterations", "3", "--cos-iterations", "6",
            "--record", str(record)]  # fmt: skip
    assert script.main(args) == 0 and "table 3 sanity arm: 4 trials" in capsys.readouterr().out
    saved = json.loads(record.read_text())
    assert saved["study"] == "02_table3_sanity" and "repeats" not in saved
    assert {(t["kind"], t["setting"]) for t in saved["trials"]} == set(
        itertools.product(study.KINDS, study.SANITY_SETTINGS)
    )
    with pytest.raises(ValueError, match="setting"):  # a short check is not the study's setting
        study.read_sanity(record)
    saved["setting"] = study.SETTING
    record.write_text(json.dumps(saved))
    assert study.read_sanity(record)["images"] == [0]
    record.write_text(json.dumps(dict(saved, trials=saved["trials"][1:])))
    with pytest.raises(ValueError, match="distinct trials"):
        study.read_sanity(record)
