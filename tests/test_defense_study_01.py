"""Chapter 01's recorded defense study (DLG §5): the trial, the defenses in the paper's units, the two
thresholds, the rule that reads a level, the bound at a sweep's edge, the rows, the record and its resume."""
import importlib.util
import json
import math
import pathlib

import pytest
import torch

from gitutor.attacks import dlg
from gitutor.chapters.dlg import defense_reading as reading
from gitutor.chapters.dlg import defense_study as study
from gitutor.chapters.dlg import figures as dlg_figures
from gitutor.chapters.dlg import sweeps
from gitutor.controls import RECOGNISABLE_PSNR, control_images
from gitutor.data import sample_set
from gitutor.federated import add_laplacian_noise, client_gradients, prune_gradients
from gitutor.metrics import psnr
from gitutor.results import save_results, verdict
from gitutor.sweeps import run_trials

ROOT = pathlib.Path(__file__).resolve().parents[1]
TINY = dict(study.SETTING, size=16, iterations=3, record_every=1)  # the trial's code path, in seconds
S, G, O = reading.STOPS, reading.GETS_THROUGH, reading.OPEN


def test_laplacian_noise_has_the_variance_of_its_scale_and_is_seeded():
    zeros = [torch.zeros(200_000), torch.zeros(3, 5)]
    b = math.sqrt(1e-2 / 2)  # the paper's variance 1e-2
    first = add_laplacian_noise(zeros, b, torch.Generator().manual_seed(3))
    again = add_laplacian_noise(zeros, b, torch.Generator().manual_seed(3))
    assert all(torch.equal(a, c) for a, c in zip(first, again)) and not zeros[0].any()  # input untouched
    assert first[0].var().item() == pytest.approx(1e-2, rel=0.02)  # 2b² = the paper's variance
    assert first[0].abs().mean().item() == pytest.approx(b, rel=0.02)  # E|z| = b: Laplacian, not Gaussian
    assert first[1].shape == (3, 5)
    with pytest.raises(ValueError, match="scale"):
        add_laplacian_noise(zeros, -1.0)


def test_study_defense_is_dlg_section_5_in_the_papers_units():
    grads = [torch.randn(4, 50, generator=torch.Generator().manual_seed(0)), torch.randn(30)]
    pruned = study.study_defense("prune", 0.3, 0)(grads)
    assert all(torch.equal(a, b) for a, b in zip(pruned, prune_gradients(grads, 0.3)))
    assert study.study_defense("none", 0.0, 0) is None
    zeros = [torch.zeros(100_000)]
    for kind in ("gaussian", "laplacian"):  # variance v: standard deviation √v for both kinds
        noise = study.study_defense(kind, 1e-2, 4)(zeros)[0]
        assert noise.std().item() == pytest.approx(0.1, rel=0.02), kind
        weak = study.study_defense(kind, 1e-4, 4)(zeros)[0]
        assert torch.allclose(weak * 10, noise, atol=1e-6)  # the levels of one image scale one draw
    gauss = study.study_defense("gaussian", 1e-2, 4)(zeros)[0]
    laplace = study.study_defense("laplacian", 1e-2, 4)(zeros)[0]
    other = study.study_defense("gaussian", 1e-2, 5)(zeros)[0]
    assert not torch.allclose(gauss, laplace) and not torch.allclose(gauss, other)
    # the noise's stream is none of the attacker's: dlg draws its start from seed = image
    seeds = {study.noise_seed(k, i) for k in ("gaussian", "laplacian") for i in range(study.SAMPLES)}
    assert len(seeds) == 2 * study.SAMPLES and not seeds & set(range(study.SAMPLES))
    for args, name in ((("blur", 0.1, 0), "kind"), (("prune", 0.25, 0), "level"), (("none", 0.1, 0), "level"),
                       (("prune", 0.3, 20), "image"), (("gaussian", 1e-2, -1), "image")):
        with pytest.raises(ValueError, match=name):
            study.study_defense(*args)
    with pytest.raises(TypeError, match="level"):
        study.study_defense("prune", "0.3", 0)


def test_the_study_lists_every_level_of_fig_7_for_every_image():
    trials = study.study_trials([0, 1])
    assert len(trials) == 2 * (1 + 6 + 4 + 4) and trials[0] == {"kind": "none", "level": 0.0, "image": 0}
    assert [t["level"] for t in trials if t["kind"] == "prune" and t["image"] == 0] == [0.01, 0.1, 0.2, 0.3, 0.5, 0.7]
    assert study.LEVELS["gaussian"] == study.LEVELS["laplacian"] == (1e-4, 1e-3, 1e-2, 1e-1)
    assert study.cpu_hours() == pytest.approx(15 * 20 * 300 * study.STEP_SECONDS / 3600)
    for bad in ([], [0, 0], [20]):
        with pytest.raises(ValueError, match="images"):
            study.study_trials(bad)


def test_a_trial_is_the_chapters_dlg_on_the_defended_gradient(monkeypatch):
    none = study.trial(TINY, kind="none", level=0.0, image=1)
    # the undefended trial is the seed study's run of that seed (same model, image, dummy start)
    row = sweeps.seed_study([1], iterations=3, record_every=1, size=16)[0]
    assert none["psnr"] == pytest.approx(row["psnr"]) and none["distance_truth"] == 0.0
    assert none["final_distance"] == pytest.approx(row["loss"])  # one definition of the final distance
    assert [step for step, _ in none["curve"]] == [0, 1, 2, 3] and none["curve"][-1][1] == pytest.approx(none["psnr"])
    pruned = study.trial(TINY, kind="prune", level=0.3, image=1)
    model, x, y = sweeps.dlg_case(1, size=16)
    sent = prune_gradients(client_gradients(model, x, y), 0.3)
    direct = dlg(model, sent, x.shape, 100, iterations=3, seed=1, record_every=1)
    assert pruned["psnr"] == pytest.approx(float(psnr(direct.images.clamp(0, 1), x)[0]))
    assert pruned["final_distance"] == pytest.approx(direct.info["final_loss"])  # the seed study's
    lost = sum(float(((g - s) ** 2).sum()) for g, s in zip(client_gradients(model, x, y), sent))
    assert pruned["distance_truth"] == pytest.approx(lost, rel=1e-4) and lost > 0  # what pruning removed
    image = study.decode_image(pruned["image"], (3, 16, 16))
    assert (image - direct.images[0].clamp(0, 1)).abs().max() <= 0.5 / 255 + 1e-6
    assert pruned["curve"][0] == none["curve"][0]  # the same dummy start, whatever the defense
    noised = study.trial(TINY, kind="gaussian", level=1e-1, image=1)
    assert noised["distance_truth"] > lost and noised["psnr"] != pruned["psnr"]
    assert json.loads(json.dumps(noised)) == noised  # the record stores it as it is

    def never(*args, **kwargs):
        raise AssertionError("the attack ran before the arguments were checked")

    monkeypatch.setattr(study, "attack", never)
    for changes, name in (({"kind": "blur"}, "kind"), ({"level": 0.25}, "level"), ({"image": 25}, "image")):
        with pytest.raises(ValueError, match=name):
            study.trial(TINY, **{"kind": "prune", "level": 0.3, "image": 0, **changes})
    with pytest.raises(ValueError, match="context"):
        study.trial({"size": 16}, kind="prune", level=0.3, image=0)


def test_each_image_is_judged_against_its_own_best_control():
    controls = study.image_controls()
    images, _ = sample_set("cifar100", 32)
    found = control_images(images, study.THUMBNAIL)
    found["N(0, 1) start"] = sweeps.dummy_start(images.shape, 0)  # as the chapter draws it
    best = torch.stack([psnr(c, images) for c in found.values()]).max(dim=0).values
    assert [c["psnr"] for c in controls] == pytest.approx(best.tolist())
    assert all(c["control"] in found for c in controls) and max(best) < RECOGNISABLE_PSNR
    assert reading.outcome(30.0, 20.0) == "recovered" and reading.outcome(29.9, 20.0) == "not resolved"
    assert reading.outcome(20.0, 20.0) == "stopped" and reading.outcome(math.inf, 20.0) == "recovered"
    # the same PSNR is stopped for an image a thumbnail imitates well, not for a busy one
    assert reading.outcome(22.0, 23.5) == "stopped" and reading.outcome(22.0, 16.0) == "not resolved"
    with pytest.raises(ValueError, match="recognisable"):
        reading.outcome(25.0, 31.0)  # a control above 30 dB: the two thresholds cross
    with pytest.raises(ValueError, match="psnr_db"):
        reading.outcome(math.nan, 20.0)
    with pytest.raises(TypeError, match="control_db"):
        reading.outcome(25.0, "20")


def test_a_level_stops_dlg_only_when_most_images_are_stopped_beyond_noise():
    assert reading.level_state(10, 10) == S and reading.level_state(9, 10) == S
    assert reading.level_state(8, 10) == O  # 8 of 10: [0.49, 0.94] could be a minority
    assert reading.level_state(5, 10) == O and reading.level_state(2, 10) == O
    assert reading.level_state(1, 10) == G and reading.level_state(0, 10) == G
    assert reading.level_state(5, 20) == G and reading.level_state(1, 1) == O  # one image: no interval
    with pytest.raises(ValueError, match="attackable"):
        reading.level_state(0, 0)
    with pytest.raises(ValueError, match="stopped"):
        reading.level_state(11, 10)
    with pytest.raises(TypeError, match="stopped"):
        reading.level_state(True, 10)


def _states(*readings, levels=study.LEVELS["prune"]):
    return dict(zip(levels, readings))


def test_the_stopping_level_is_a_bound_at_the_sweeps_edges():
    monotone = reading.threshold(_states(G, G, G, S, S, S), "prune")
    assert (monotone.tolerance, monotone.stops, monotone.unresolved) == (0.2, 0.3, ())
    never = reading.threshold(_states(G, G, G, G, G, G), "prune")
    assert (never.tolerance, never.stops, never.unresolved) == (0.7, None, ())
    always = reading.threshold(_states(S, S, S, S, S, S), "prune")
    assert (always.tolerance, always.stops, always.unresolved) == (0.0, 0.01, ())
    between = reading.threshold(_states(G, O, O, S, S, S), "prune")
    assert (between.tolerance, between.stops, between.unresolved) == (0.01, 0.3, (0.1, 0.2))
    # a weaker level that stops DLG between two it gets through is no stopping point
    bumpy = reading.threshold(_states(G, S, G, S, S, S), "prune")
    assert (bumpy.tolerance, bumpy.stops) == (0.2, 0.3)
    last_open = reading.threshold(_states(G, G, G, S, S, O), "prune")
    assert (last_open.tolerance, last_open.stops, last_open.unresolved) == (0.2, None, (0.7,))
    noise = reading.threshold(_states(G, G, S, S, levels=study.LEVELS["gaussian"]), "gaussian")
    assert (noise.tolerance, noise.stops) == (1e-3, 1e-2)
    table = reading.threshold_table({"prune": never, "gaussian": noise}).splitlines()
    assert "| pruning | fraction pruned | 0.01, 0.1, 0.2, 0.3, 0.5, 0.7 | ≥ 0.7 | – | none tried (> 0.7) | 0.2 |" in table
    assert "| Gaussian noise | variance | 0.0001, 0.001, 0.01, 0.1 | 0.001 | – | 0.01 | 0.001 |" in table
    assert "| 0.01 | 0.1, 0.2 | 0.3 |" in reading.threshold_table({"prune": between})
    with pytest.raises(ValueError, match="kind"):
        reading.threshold(_states(G, G, G, S, S, S), "blur")
    with pytest.raises(ValueError, match="states"):
        reading.threshold({0.1: "stopped"}, "prune")


def _record(psnr_of, images=range(10), control=20.0):
    """A study record whose runs score ``psnr_of(kind, level, image)`` dB against a best control of
    ``control`` dB; the stopped runs end above the truth's distance on even images."""
    images = list(images)
    return {
        "study": "01_defenses", "setting": dict(study.SETTING), "images": images,
        "controls": [{"control": "4×4 thumbnail", "psnr": control}] * study.SAMPLES,
        "gradient_scale": [{"rms": 0.02, "median_abs": 0.001, "max_abs": 1.0}] * study.SAMPLES,
        "trials": [{**t, "value": {"psnr": psnr_of(t["kind"], t["level"], t["image"]), "ssim": 0.5,
                                   "label_ok": True, "final_distance": 2.0 if t["image"] % 2 == 0 else 0.5,
                                   "distance_truth": 1.0, "steps": 300, "curve": [[0, 5.0]],
                                   "image": study.encode_image(torch.full((3, 32, 32), 0.5))}}
                   for t in study.study_trials(images)],
        "provenance": {"commit": "0" * 40},
    }


def _paper_like(kind, level, image):
    if kind == "none":
        return 45.0 if image < 8 else 6.0  # DLG fails on two images without a defense
    if kind == "prune":
        return 45.0 if level < 0.2 else 25.0 if level == 0.2 else 10.0  # 20 %: artifacts, then stopped
    if kind == "gaussian":
        return 45.0 if level < 1e-3 else 10.0  # stopped a level earlier than the paper
    return 45.0  # Laplacian: DLG gets through every variance


def test_rows_judge_dlgs_tolerance_against_the_papers(tmp_path):
    record = _record(_paper_like)
    summary = reading.summarise(record)
    none = summary["none", 0.0]
    assert none.attackable == 8 and none.counts["recovered"].mean == 0.8 and none.state is None
    stopped = summary["prune", 0.3]
    assert stopped.stopped == 8 and stopped.state == S and stopped.counts["stopped"].mean == 1.0
    assert (stopped.above_truth, stopped.stopped_runs) == (5, 10)  # even images end above the truth's distance
    assert summary["prune", 0.2].state == G and summary["prune", 0.2].counts["not resolved"].mean == 1.0
    rows = reading.result_rows(record, summary)
    assert [r["paper"] for r in rows] == [0.2, 1e-3, 1e-3]
    assert all("Zhu et al. 2019, §5, Fig. 7" in r["quantity"] for r in rows)  # each paper value cites the paper
    prune, gauss, laplace = rows
    assert prune["this_run"] == 0.2 and "weakest level that stops DLG: 0.3" in prune["unit"]
    assert gauss["this_run"] == 1e-4 and laplace["this_run"] == 0.1 and "stops DLG: none tried" in laplace["unit"]
    assert [verdict(r) for r in rows] == ["meets", "falls short", "meets"]
    assert prune["n"] == 8 and "8 recovered without a defense" in prune["setting"]
    save_results("01_dlg", "quick", rows, tmp_path)  # well-formed rows, inside their ranges
    table = reading.level_table(summary)
    assert "| pruning | 0.3 | 0 | 0 | 10 | 8 of 8 [0.68, 1.00] | stops DLG | 0 | 5 of 10 |" in table
    assert "| no defense | – | 8 | 0 | 2 | – | – | – | 1 of 2 |" in table
    # a run that ends ≥ 10× the truth's distance stalled: set aside, not counted stopped. Pruning 0.1 stopped
    # on images 0–3 by stalled starts reads "DLG gets through" (0 of the 4 others), not "not resolved" (4 of 8)
    stall = _record(lambda k, v, i: 6.0 if k == "prune" and v == 0.1 and i < 4 else _paper_like(k, v, i))
    for t in stall["trials"]:
        if t["kind"] == "prune" and t["level"] == 0.1 and t["image"] < 4:
            t["value"]["final_distance"] = reading.STALL_FACTOR * t["value"]["distance_truth"]
    stalled = reading.summarise(stall)["prune", 0.1]
    assert (stalled.stalled, stalled.stopped, stalled.stopped_rate.n, stalled.state) == (4, 0, 4, G)
    assert stalled.counts["stopped"].mean == 0.4  # the outcome counts still show every run
    assert "| pruning | 0.1 | 6 | 0 | 4 | 0 of 4 [0.00, 0.49] | DLG gets through | 4 | 0 of 0 |" in (
        reading.level_table(reading.summarise(stall)))
    unstalled = _record(lambda k, v, i: 6.0 if k == "prune" and v == 0.1 and i < 4 else _paper_like(k, v, i))
    assert reading.summarise(unstalled)["prune", 0.1].state == O  # the same PSNRs from converged runs: 4 of 8
    every = _record(lambda k, v, i: 6.0 if k == "prune" and v == 0.1 else _paper_like(k, v, i))
    for t in every["trials"]:
        if t["kind"] == "prune" and t["level"] == 0.1:
            t["value"]["final_distance"] = 100.0
    all_stalled = reading.summarise(every)["prune", 0.1]
    assert (all_stalled.stalled, all_stalled.stopped_rate, all_stalled.state) == (8, None, O)
    assert not reading.stalled_run({"final_distance": 5.0, "distance_truth": 0.0})  # undefended: no stall
    assert reading.stalled_run({"final_distance": 5.0, "distance_truth": 1.0}, factor=2.0)
    lenient = reading.summarise(stall, stall_factor=1000.0)["prune", 0.1]  # a factor no run reaches
    assert (lenient.stalled, lenient.stopped, lenient.state) == (0, 4, O)
    with pytest.raises(ValueError, match="factor"):
        reading.stalled_run({"final_distance": 5.0, "distance_truth": 1.0}, factor=1.0)
    with pytest.raises(ValueError, match="final_distance"):
        reading.stalled_run({"final_distance": -1.0, "distance_truth": 0.1})
    # half the images stopped at 20 %: not resolved, and so is the row
    half = _record(lambda k, v, i: 10.0 if k == "prune" and v == 0.2 and i < 4 else _paper_like(k, v, i))
    row = reading.result_rows(half)[0]
    assert (row["low"], row["high"], verdict(row)) == (0.1, 0.2, "not resolved")
    # a threshold at the sweep's edge is a bound: noise that stops DLG at every variance tried, Laplacian
    # noise that never does
    edge = _record(lambda k, v, i: 10.0 if k == "gaussian" else _paper_like(k, v, i))
    found = reading.thresholds(reading.summarise(edge))
    assert reading.tolerance_text(found["gaussian"]) == "< 0.0001"
    assert reading.stops_text(found["gaussian"]) == "≤ 0.0001"
    assert reading.tolerance_text(found["laplacian"]) == "≥ 0.1"
    assert reading.stops_text(found["laplacian"]) == "none tried (> 0.1)"
    assert "| < 0.0001 | – | ≤ 0.0001 |" in reading.threshold_table(found)
    gauss = reading.result_rows(edge)[1]
    assert (gauss["low"], gauss["high"], verdict(gauss)) == (0.0, 1e-4, "falls short")
    assert "tolerance < 0.0001" in gauss["unit"] and "stops DLG: ≤ 0.0001" in gauss["unit"]
    # no study file: the rows say so and are not judged — never "not comparable"
    absent = reading.result_rows(None)
    assert {verdict(r) for r in absent} == {"not judged"} and all("not recorded" in r["this_run"] for r in absent)
    with pytest.raises(ValueError, match="recovers none"):
        reading.summarise(_record(lambda k, v, i: 6.0))


def test_the_record_is_read_whole_or_not_at_all(tmp_path):
    assert reading.read_study(tmp_path / "absent.json") is None
    path = tmp_path / "01_defenses.json"
    record = _record(_paper_like)
    path.write_text(json.dumps(record))
    assert reading.read_study(path) == record
    assert reading.trial_value(record, "prune", 0.3, 2)["psnr"] == 10.0
    assert reading.trial_value(record, "prune", 0.3, 15) is None
    assert set(reading.reconstructions(record, 2)) == {(t["kind"], t["level"]) for t in study.study_trials([2])}
    assert reading.median_scale(record)["rms"] == 0.02
    path.write_text(json.dumps({**record, "trials": record["trials"][1:]}))
    with pytest.raises(ValueError, match="lacks 1 trials"):
        reading.read_study(path)
    path.write_text(json.dumps({**record, "setting": dict(study.SETTING, iterations=100)}))
    with pytest.raises(ValueError, match=str(path)):
        reading.read_study(path)
    older = [{**t, "value": {k: v for k, v in t["value"].items() if k != "final_distance"}}
             for t in record["trials"]]  # fmt: skip
    path.write_text(json.dumps({**record, "trials": older}))  # a record of the older code
    with pytest.raises(ValueError, match="final_distance"):
        reading.read_study(path)


def test_the_study_figures_are_legible_at_page_width():
    import matplotlib.pyplot as plt
    from test_studies_01 import legible

    record = _record(_paper_like)
    summary = reading.summarise(record)
    image = reading.example_image(summary, 9)  # 9 is not recovered without a defense: the first that is
    assert image == 0 and reading.example_image(summary, 3) == 3
    fig = dlg_figures.defense_study_figure(summary, [20.0] * 10, 30.0)
    examples = dlg_figures.defense_examples(torch.rand(3, 32, 32), reading.reconstructions(record, 3), summary, 3)
    assert legible(fig) and legible(examples) and len(fig.axes) == 3
    with pytest.raises(ValueError, match="image"):
        dlg_figures.defense_examples(torch.rand(3, 32, 32), {}, summary, 15)
    plt.close("all")


def test_an_interrupted_study_resumes_from_its_journal_with_the_same_results(tmp_path):
    trials = [{"kind": "none", "level": 0.0, "image": 0}, {"kind": "prune", "level": 0.5, "image": 0},
              {"kind": "laplacian", "level": 1e-2, "image": 1}]
    context = dict(TINY, iterations=2)
    whole = run_trials(study.trial, trials, context=context, journal=tmp_path / "whole.jsonl")
    journal = tmp_path / "cut.jsonl"
    first = run_trials(study.trial, trials[:1], context=context, journal=journal)  # interrupted after one
    resumed = run_trials(study.trial, trials, context=context, journal=journal)
    assert [o.value for o in resumed] == [o.value for o in whole] and all(o.ok for o in resumed)
    assert resumed[0].seconds == first[0].seconds  # read back from the journal, not run again
    assert len(journal.read_text().splitlines()) == 1 + len(trials)  # its header, then one line per trial


def _script():
    spec = importlib.util.spec_from_file_location("script_defense_study_01", ROOT / "scripts" / "defense_study_01.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_refuses_bad_arguments_before_anything_runs(tmp_path, capsys, monkeypatch):
    script = _script()
    monkeypatch.setattr(script, "run_trials", lambda *a, **k: pytest.fail("trials ran"))
    for argv, name in ((["--images", "5"], "--images"), (["--images", "21"], "--images"),
                       (["--iterations", "10"], "--iterations"),
                       (["--record", str(tmp_path)], "--record"), (["--record", str(tmp_path / "x.txt")], "--record"),
                       (["--engine", "threads"], "--engine")):
        with pytest.raises(SystemExit):
            script.main(argv)
        assert name in capsys.readouterr().err, argv


def test_the_script_records_only_a_whole_study_and_resumes_after_a_failure(tmp_path, monkeypatch):
    script = _script()
    record = tmp_path / "01_defenses.json"
    good = [{"kind": "none", "level": 0.0, "image": 0}, {"kind": "prune", "level": 0.5, "image": 0}]
    broken = good + [{"kind": "prune", "level": 0.25, "image": 0}]  # not a level of Fig. 7: fails
    monkeypatch.setattr(study, "study_trials", lambda images: broken)
    argv = ["--record", str(record), "--iterations", "2", "--images", "10"]
    assert script.main(argv) == 1 and not record.exists()  # a failed trial is a failure
    journals = list(tmp_path.glob("01_defenses.*.journal.jsonl"))
    assert len(journals) == 1 and len(journals[0].read_text().splitlines()) == 1 + 2  # header, two trials
    monkeypatch.setattr(study, "study_trials", lambda images: good)
    assert script.main(argv) == 0
    written = json.loads(record.read_text())
    assert written["provenance"]["resumed_trials"] == 2 and written["provenance"]["failed"] == 0
    assert {"commit", "torch", "machine", "command", "wall_seconds", "threads"} <= set(written["provenance"])
    assert len(written["controls"]) == len(written["gradient_scale"]) == study.SAMPLES
    assert written["setting"]["iterations"] == 2 and len(written["trials"]) == 2
    assert not list(tmp_path.glob("*.journal.jsonl"))  # removed once the record is written


def test_a_stalled_run_restarts_once_and_the_lower_final_distance_is_kept(tmp_path):
    record = _record(_paper_like)
    stalled = next(t for t in record["trials"] if t["kind"] == "prune" and t["level"] == 0.3 and t["image"] == 1)
    stalled["value"]["final_distance"] = 50.0  # ≥ 10× the truth's 1.0
    better = dict(stalled["value"], psnr=44.0, final_distance=0.3)
    restarts = {"of": record["provenance"]["commit"], "setting": record["setting"], "provenance": {},
                "trials": [{"kind": "prune", "level": 0.3, "image": 1, "start": 1, "value": better}]}
    path = tmp_path / "01_defenses_restarts.json"
    path.write_text(json.dumps(restarts))
    assert reading.read_restarts(tmp_path / "absent.json", record) is None
    found = reading.read_restarts(path, record)
    kept = reading.with_restarts(record, found)
    value = reading.trial_value(kept, "prune", 0.3, 1)
    assert (value["psnr"], value["start"]) == (44.0, 1)
    assert reading.trial_value(kept, "prune", 0.3, 2)["start"] == 0
    worse = {**restarts, "trials": [{**restarts["trials"][0], "value": dict(better, final_distance=60.0)}]}
    path.write_text(json.dumps(worse))
    assert reading.trial_value(reading.with_restarts(record, reading.read_restarts(path, record)),
                               "prune", 0.3, 1)["start"] == 0  # the restart stalled higher: the first kept
    for bad, match in (({**restarts, "of": "1" * 40}, "restarts the study recorded"),
                       ({**restarts, "trials": [{**restarts["trials"][0], "image": 2}]}, "did not stall"),
                       ({"trials": []}, "not a restart record")):
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=match):
            reading.read_restarts(path, record)


def test_a_restart_starts_from_another_dummy():
    context = dict(study.SETTING, iterations=2, record_every=1)
    first = study.trial(context, kind="prune", level=0.3, image=1)
    again = study.trial(context, kind="prune", level=0.3, image=1, start=0)
    second = study.trial(context, kind="prune", level=0.3, image=1, start=1)
    assert first["curve"] == again["curve"] and first["curve"][0] != second["curve"][0]
    with pytest.raises(ValueError, match="start"):
        study.trial(context, kind="prune", level=0.3, image=1, start=-1)
