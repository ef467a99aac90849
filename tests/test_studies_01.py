"""Chapter 01's study code: settings and budgets, the DLG sweeps built on gradient_case, figures, rows."""
import math

import pytest
import torch

import gitutor
from gitutor.attacks import dlg
from gitutor.controls import RECOGNISABLE_PSNR, check_threshold, control_images
from gitutor.federated import client_gradients
from gitutor.metrics import psnr
from gitutor.chapters.dlg.profile import BUDGETS, SMOKE_PARAMETERS, chapter_settings
from gitutor.results import ledger_rows, save_results, verdict
from gitutor.stats import success_interval
from gitutor.chapters.dlg import figures as dlg_figures
from gitutor.chapters.dlg import sweeps
from gitutor.chapters.dlg import report as dlg_report
from gitutor.chapters.dlg.report import chapter_rows

CASE = dict(size=16, num_classes=100)  # the DLG LeNet for CIFAR-100, the real samples (default source)


def test_settings_apply_the_budget_and_the_bundled_sources():
    full = gitutor.get_profile("01_dlg", "full")
    smoke = chapter_settings(full, SMOKE_PARAMETERS["BUDGET"], SMOKE_PARAMETERS["DATA_ROOT"])
    assert smoke.source == "cifar100_samples" and smoke.extra_sources == ["mnist_samples"]
    assert smoke.image_size == full.image_size == 32
    assert smoke.iterations == BUDGETS["smoke"]["iterations"] < full.iterations
    assert not hasattr(smoke, "known_iterations")  # the label-known run takes the main run's budget
    quick = gitutor.get_profile("01_dlg", "quick")
    assert chapter_settings(quick) == quick and chapter_settings(full, None, "data").source == "cifar100"
    assert quick.source == "cifar100_samples" and quick.image_size == 32
    assert quick.num_classes == 100 and len(set(quick.seeds)) == len(quick.seeds) <= 20  # distinct images
    with pytest.raises(ValueError, match="BUDGET"):
        chapter_settings(full, "huge")


def test_noise_ladder_hits_the_requested_psnr_and_stays_an_image():
    image = torch.full((1, 3, 32, 32), 0.5)
    rungs = sweeps.noise_ladder(image, [12.0, 20.0], seed=0)
    assert [round(value) for value, _ in rungs] == [12, 20]   # no clipping at mid-grey
    assert all(0 <= float(noisy.min()) and float(noisy.max()) <= 1 for _, noisy in rungs)
    with pytest.raises(ValueError, match="levels"):
        sweeps.noise_ladder(image, [])
    fig = dlg_figures.ladder({"grey": rungs}, {"grey": image}, 15.0)
    assert [ax.get_title() for ax in fig.axes[:3]] == ["grey\ntruth", f"{rungs[0][0]:.1f} dB ✗", f"{rungs[1][0]:.1f} dB ✓"]
    fig = dlg_figures.ladder({"grey": rungs}, {"grey": image}, 15.0, ["a", "b"], "controls")
    assert fig.axes[1].get_title() == f"a\n{rungs[0][0]:.1f} dB ✗" and fig._suptitle.get_text() == "controls"
    with pytest.raises(ValueError, match="column"):
        dlg_figures.ladder({"grey": rungs}, {"grey": image}, 15.0, ["a"])
    with pytest.raises(ValueError, match="truth"):
        dlg_figures.ladder({"grey": rungs}, {}, 15.0)


def test_seed_study_runs_dlg_for_the_whole_budget_and_match_loss_only_flags_failures(monkeypatch):
    full = sweeps.seed_study([0], iterations=40, record_every=5, **CASE)[0]
    # no stop rule: the run matched the gradient long before step 40 and still ran every step
    assert full["loss"] < 1e-5 and full["psnr"] > 40 and full["label_ok"] and 0 <= full["ssim"] <= 1
    info = full["result"].info
    assert "stopped_at" not in info and full["steps"] == info.get("converged_at", 40)
    assert len(full["result"].history["loss"]) == 40 and full["result"].snapshots[-1][0] == 40
    with pytest.raises(TypeError, match="stop_loss"):  # the study has no stop rule to pass
        sweeps.seed_study([0], iterations=2, stop_loss=1e-5, **CASE)
    # every seed is one call of gitutor.attacks.dlg, never with a stop rule
    calls = []

    def recorded(*args, **kwargs):
        calls.append(kwargs)
        return dlg(*args, **kwargs)

    monkeypatch.setattr(sweeps, "dlg", recorded)
    rows = sweeps.seed_study([0, 1], iterations=3, record_every=1, **CASE)
    assert [c["seed"] for c in calls] == [0, 1] and all("stop_loss" not in c for c in calls)
    assert all(row["steps"] == row["result"].info.get("converged_at", 3) for row in rows)
    # a run whose final distance is not below match_loss is the failure an attacker sees; it restarts
    calls.clear()
    again = sweeps.restart_failures([dict(full, loss=1.0), dict(full, seed=1)], match_loss=1e-5, iterations=2,
                                    record_every=1, **CASE)
    assert list(again) == [0] and again[0]["result"].snapshots[0][1].shape == (1, 3, 16, 16)
    assert [c["seed"] for c in calls] == [1000] and "stop_loss" not in calls[0]  # a new dummy start
    limited = sweeps.restart_failures([dict(full, loss=1.0), dict(full, seed=1, loss=1.0)], match_loss=1e-5,
                                      limit=1, iterations=1, **CASE)
    assert list(limited) == [0]  # a CPU budget: only the first failure is rerun
    with pytest.raises(ValueError, match="match_loss"):
        sweeps.restart_failures([full], match_loss=0.0, iterations=2, **CASE)


def test_the_showcase_is_the_seed_studys_median_run():
    rows = [{"seed": s, "psnr": v} for s, v in enumerate([5.0, 41.0, 12.0, 33.0, 20.0])]
    assert sweeps.showcase_row(rows)["seed"] == 4  # 20 dB: two runs below, two above
    assert sweeps.showcase_row(rows[:4])["seed"] == 3  # even n: the upper median, 33 dB
    assert sweeps.showcase_row(rows[:1]) is rows[0]
    with pytest.raises(ValueError, match="rows"):
        sweeps.showcase_row([])


def test_the_page_runs_and_shows_the_packages_dlg():
    """Chapter 01's visible cells print the package's DLG objective, run the seed study (one ``dlg`` per
    seed, no stop rule) and show its median run, not a run of their own."""
    import json
    from pathlib import Path

    notebook = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "01_dlg.ipynb").read_text())
    cells = [c for c in notebook["cells"] if "exercise" not in c["metadata"].get("tags", [])]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    visible = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"
               and not {"remove-input", "hide-input", "remove-cell"} & set(c["metadata"].get("tags", []))]
    assert any("from gitutor.attacks import dlg, dlg_distance" in cell for cell in code)
    assert any("print(inspect.getsource(dlg_distance))" in cell for cell in visible)
    assert any("sweeps.seed_study(cfg.seeds" in cell and "sweeps.showcase_row(seed_rows)" in cell
               for cell in visible)
    text = "\n".join(code) + "\n".join("".join(c["source"]) for c in cells)
    assert "stop_loss" not in text and "batched_dlg" not in text
    # the one written-out loop (a closure of its own) is checked equal to the package's dlg in its cell
    written = [cell for cell in visible if "def closure" in cell]
    assert len(written) == 1 and sum("def closure" in "".join(c["source"]) for c in cells) == 1
    assert "assert torch.equal(by_hand, by_package.images)" in written[0]


def test_psnr_curves_follow_the_snapshots_and_find_the_first_success():
    truth = torch.full((1, 3, 4, 4), 0.5)
    far, near = truth + 0.2, truth + 0.001
    result = gitutor.attacks.AttackResult(images=near, labels=torch.zeros(1, dtype=torch.long),
                                          snapshots=[(0, far), (10, near), (20, near)])
    curves, reached = sweeps.psnr_curves({"run": [{"seed": 3, "truth": truth, "result": result}]}, 30.0)
    steps, values = curves["run, seed 3"]
    assert steps == (0, 10, 20) and values[0] < 30 < values[1]
    assert reached == {("run", 3): 10}


def test_batch_and_source_sweeps_score_matched_reconstructions():
    rows = sweeps.batch_sweep([2], iterations=1, **CASE)
    assert rows[0]["B"] == 2 and rows[0]["images"].shape == (4, 3, 16, 16) and math.isfinite(rows[0]["psnr"])
    truth = rows[0]["images"][:2]
    assert rows[0]["psnr"] == pytest.approx(float(psnr(rows[0]["images"][2:], truth).mean()))
    extra = sweeps.source_sweep(["mnist_samples"], iterations=5, **CASE)
    value, run, truth = extra["mnist_samples"]
    assert truth.shape == (1, 3, 16, 16) and torch.equal(truth[:, 0], truth[:, 2])  # grey to three channels
    assert [step for step, _ in run.snapshots][-1] == 5 and value == pytest.approx(float(psnr(run.images, truth)[0]))


def test_figures_mark_success_and_refuse_empty_input():
    assert dlg_figures._mark(31, 30) == "✓" and dlg_figures._mark(25, 30, 20) == "~" and dlg_figures._mark(10, 30, 20) == "✗"
    with pytest.raises(ValueError, match="rows"):
        dlg_figures.seed_grid([], 30.0, 15.0)


def _seed_rows(psnrs, labels=None, losses=None):
    """Seed-study rows; by default a run matched the gradient (distance 1e-6) exactly when it is recognisable."""
    losses = losses or [1e-6 if v >= RECOGNISABLE_PSNR else 1e2 for v in psnrs]
    return [{"seed": i, "psnr": v, "ssim": 0.5, "label_ok": True if labels is None else labels[i], "loss": losses[i],
             "steps": 100} for i, v in enumerate(psnrs)]


def _rows(cfg, psnrs, **changes):
    seed_rows = _seed_rows(psnrs)
    failed = [r["seed"] for r in seed_rows if r["psnr"] < cfg.recognisable_psnr]
    arguments = dict(main={"psnr": 41.234}, known_psnr=12.0, seed_rows=seed_rows,
                     rescued={"restart": {s: {"psnr": 40.0} for s in failed}},
                     batch_rows=[{"B": 4, "psnr": 9.5}])
    return chapter_rows(cfg, 0, **{**arguments, **changes})


def test_chapter_rows_headline_is_the_dlg_papers_claim_judged_from_the_seed_study(tmp_path):
    # ten seeds, as the full profile's study has at least (the quick page runs 6 live)
    cfg = chapter_settings(gitutor.get_profile("01_dlg", "quick")).replace(seeds=list(range(10)))
    rows = _rows(cfg, [38.0] * 9 + [45.0])
    save_results("01_dlg", "quick", rows, tmp_path)  # raises on a malformed row
    headline = [r for r in rows if r.get("headline")]
    # the DLG paper's own words: judged on how exact the recovered runs are, the rate beside it
    assert len(headline) == 1 and headline[0]["claim"] == dlg_report.CLAIM and "Abstract" in dlg_report.CLAIM
    assert headline[0]["claim_outcome"] == "consistent" and headline[0]["this_run"] == 1.0
    assert "end at 38.0–45.0 dB" in headline[0]["claim_reason"]  # the PSNR the matched runs reached
    assert f"PSNR ≥ {cfg.recognisable_psnr:.0f} dB" in headline[0]["quantity"] and cfg.recognisable_psnr == RECOGNISABLE_PSNR
    assert isinstance(headline[0]["paper"], str) and verdict(headline[0]) == "not judged"  # no rate stated
    assert ledger_rows([{"notebook": "01_dlg", "rows": rows}])[0]["outcome"] == "consistent"
    judged = lambda psnrs: next(r for r in _rows(cfg, psnrs) if r.get("headline"))  # noqa: E731
    assert judged([20.0] * 10)["claim_outcome"] == "refuted"  # no seed matches the gradient
    # a run that matches the gradient (distance < match_loss) with an unrecognisable image refutes the claim
    fooled = dlg_report.claim_judgement(_seed_rows([45.0, 20.0], losses=[1e-6, 1e-6]), 30.0, cfg.match_loss)
    assert fooled[0] == "refuted" and "1 of the 2 runs that match the gradient" in fooled[1]
    # the rule is not the rate: 1 of 10 matched and recognisable is still consistent (the rate is the row's number)
    assert dlg_report.claim_judgement(_seed_rows([45.0] + [5.0] * 9), 30.0, cfg.match_loss)[0] == "consistent"
    with pytest.raises(ValueError, match="seed_rows"):
        dlg_report.claim_judgement([], 30.0, cfg.match_loss)
    half = judged([45.0] * 5 + [5.0] * 5)
    assert half["claim_outcome"] == "consistent" and "depends on the seed" in half["claim_reason"]
    assert "[0.24, 0.76]" in half["claim_reason"]  # the rate, with its Wilson interval
    # iDLG Table 1: DLG's label accuracy on CIFAR-100, the one rate a paper states, judged by the rule
    labels = next(r for r in rows if r["quantity"].startswith("DLG label accuracy"))
    wilson = success_interval([True] * 10)
    assert labels["paper"] == 0.833 and (labels["low"], labels["high"]) == (round(wilson.low, 3), 1.0)
    assert verdict(labels) == "not resolved"   # ten of ten cannot tell 0.833 from 0.72
    few = [{**r, "label_ok": i < 4} for i, r in enumerate(_seed_rows([40.0] * 10))]
    assert verdict(next(r for r in _rows(cfg, [40.0] * 10, seed_rows=few)
                        if r["quantity"].startswith("DLG label accuracy"))) == "falls short"
    reached = {"label known": 90, "label unknown": None}
    known = next(r for r in _rows(cfg, [40.0] * 10, reached=reached) if r["quantity"].startswith("PSNR, label known"))
    assert verdict(known) == "not comparable" and known["n"] == 1 and known["this_run"] == 12.0
    assert f"{cfg.iterations} L-BFGS steps" in known["setting"]
    assert "label known: ≥ 30 dB from step 90, label unknown: never ≥ 30 dB" in known["setting"]
    assert next(r for r in rows if r["quantity"].startswith("PSNR, DLG"))["this_run"] == 41.23
    failures = next(r for r in _rows(cfg, [40.0] * 7 + [6.0] * 3) if r["quantity"].startswith("seeds that fail"))
    assert failures["this_run"] == 0.3 and 0 < failures["low"] < 0.3 < failures["high"] < 1
    restart = next(r for r in _rows(cfg, [40.0] * 8 + [6.0] * 2) if "restart" in r["quantity"])
    assert restart["this_run"] == "2 of 2"
    assert len({row["differences"] for row in rows}) == 1  # the table states them once
    with pytest.raises(KeyError):
        _rows(cfg, [40.0], rescued={})


def test_seeds_attack_distinct_cifar100_samples_with_their_true_labels():
    images, labels = gitutor.data.load("cifar100")
    for seed in (0, 3):
        model, x, y = sweeps.dlg_case(seed, size=32)
        assert torch.equal(x, images[seed:seed + 1]) and int(y) == int(labels[seed])
        assert model.fc.out_features == 100
    _, xb, yb = sweeps.dlg_case(19, size=32, batch_size=2)  # wraps around the 20 samples
    assert torch.equal(xb, images[[19, 0]]) and yb.tolist() == labels[[19, 0]].tolist()


def test_the_recognisable_threshold_clears_every_control_on_every_cifar100_sample():
    cfg = gitutor.get_profile("01_dlg", "quick")
    images, _ = gitutor.data.load("cifar100")
    found = control_images(images, cfg.thumbnail)
    found["N(0, 1) start"] = sweeps.dummy_start(images.shape, 0)
    assert float(found["N(0, 1) start"].min()) >= 0 and float(found["N(0, 1) start"].max()) <= 1  # clipped
    scores = {name: psnr(image, images) for name, image in found.items()}
    assert list(scores) == ["mean colour", "4×4 thumbnail", "batch mean", "different photograph", "N(0, 1) start"]
    flat, thumb = scores["mean colour"], scores["4×4 thumbnail"]
    assert flat.shape == thumb.shape == (20,) and bool((thumb > flat).all())  # the thumbnail knows more
    assert check_threshold(scores, cfg.recognisable_psnr) < cfg.recognisable_psnr < cfg.success_psnr
    assert bool((flat >= 15.0).any())  # the old 15 dB threshold: a flat colour reaches it on CIFAR-100
    assert float(scores["N(0, 1) start"].max()) < 15.0  # DLG's start carries nothing of the image
    table = dlg_report.controls_table({k: v.tolist() for k, v in scores.items()}, cfg.recognisable_psnr)
    assert "| 4×4 thumbnail |" in table and "| N(0, 1) start |" in table and "0 of 20 |" in table
    assert not hasattr(sweeps, "controls")  # one set of controls for the book: gitutor.controls
    with pytest.raises(ValueError, match="shape"):
        sweeps.dummy_start((3, 8, 8))


def _run(seed, value, label_ok=True):
    return {"seed": seed, "psnr": value, "ssim": 0.5, "label_ok": label_ok, "loss": 2e-5, "steps": 120}


def test_success_rates_and_seed_table_read_the_same_runs():
    studies = {"fixed": [_run(0, 35.0), _run(1, 12.0, False)], "wolfe": [_run(0, 31.0), _run(1, 30.0)]}
    rates = sweeps.success_rates(studies, 30.0)
    assert rates["fixed"].mean == 0.5 and rates["fixed"].n == 2 and rates["wolfe"].mean == 1.0
    table = dlg_report.seed_table(studies, {("fixed", 0): 10, ("fixed", 1): None, ("wolfe", 0): 20,
                                            ("wolfe", 1): 30}, 30.0, 15.0)
    lines = table.splitlines()
    assert len(lines) == 2 + 4 and "| fixed | 1 | 12.0 | 0.500 | ✗ | ✗ | 120 | 2.0e-05 | not reached |" in lines
    with pytest.raises(KeyError):
        dlg_report.seed_table(studies, {}, 30.0, 15.0)


def test_noise_table_puts_sigma_next_to_the_gradient_scale_and_summaries_read_their_sweeps():
    table = dlg_report.noise_scale_table([1e-4, 1e-2], {"rms": 0.01, "median_abs": 0.001})
    assert "| 0.01 | 0.1 | 100 | 10 |" in table.splitlines()
    with pytest.raises(ValueError, match="median_abs"):
        dlg_report.noise_scale_table([1e-2], {"rms": 0.0, "median_abs": 0.0})
    truth = torch.full((2, 3, 4, 4), 0.5)
    pair = torch.cat([truth, truth + torch.tensor([0.001, 0.2]).view(2, 1, 1, 1)])  # 60 dB and 14 dB
    table = dlg_report.batch_table([{"B": 2, "psnr": 37.0, "images": pair}], 30.0)
    assert table.splitlines()[0] == "| B | mean PSNR (dB) | images ≥ 30 dB |"
    assert "| 2 | 37.0 | 1 of 2 |" in table.splitlines()  # one image at 60 dB, one at 14 dB
    assert "| 2 | 37.0 | 0 of 2 |" in dlg_report.batch_table([{"B": 2, "psnr": 37.0, "images": pair}], 61.0)
    with pytest.raises(ValueError, match="batch"):
        dlg_report.batch_table([], 30.0)
    # with each image's best control: the 14 dB image is stopped under a 20 dB control, not under a 10 dB one
    row = [{"B": 2, "psnr": 37.0, "images": pair}]
    assert "| 2 | 37.0 | 1 of 2 | 0 of 2 | 1 of 2 |" in dlg_report.batch_table(row, 30.0, [torch.tensor([20.0, 20.0])])
    assert "| 2 | 37.0 | 1 of 2 | 1 of 2 | 0 of 2 |" in dlg_report.batch_table(row, 30.0, [torch.tensor([10.0, 10.0])])
    with pytest.raises(ValueError, match="controls"):
        dlg_report.batch_table(row, 30.0, [torch.tensor([10.0])])
    assert set(sweeps.SOURCE_NAMES) == set(sweeps.SOURCES)


def test_chapter_figures_draw_the_runs_and_refuse_empty_input():
    import matplotlib.pyplot as plt
    model, x, y = sweeps.dlg_case(0, **CASE)
    result = dlg(model, client_gradients(model, x, y), x.shape, 100, iterations=2, seed=0, record_every=1)
    fig = dlg_figures.attack_curves(result, x)
    assert len(fig.axes) == 2 and len(fig.axes[1].lines[0].get_xdata()) == len(result.snapshots)
    curves = {"run, seed 0": ((0, 10), (5.0, 31.0))}
    assert dlg_figures.psnr_curves(curves, 30.0).axes[0].get_lines()[-1].get_ydata()[0] == 30.0
    assert dlg_figures.psnr_curves(curves, 30.0, 15.0).axes[0].get_lines()[-1].get_ydata()[0] == 15.0
    grids = dlg_figures.batch_grids([{"B": 2, "psnr": 10.0, "images": torch.rand(4, 3, 8, 8)}])
    assert len(grids) == 1 and "B = 2" in grids[0]._suptitle.get_text()
    plt.close("all")
    with pytest.raises(ValueError, match="snapshots"):
        dlg_figures.attack_curves(gitutor.attacks.AttackResult(images=x, labels=None), x)
    with pytest.raises(ValueError):
        dlg_figures.psnr_curves({}, 30.0)
    with pytest.raises(ValueError):
        dlg_figures.batch_grids([])


def legible(fig) -> bool:
    """Every text of ``fig`` is at least the body's size once the figure is shown at page width, and no axes
    title overlaps another axes (the second-row titles hidden behind images of the old grids)."""
    from matplotlib.text import Text

    from gitutor.viz import BODY_PT, PAGE_WIDTH
    scale = min(1.0, PAGE_WIDTH / fig.get_size_inches()[0])
    sizes = [t.get_fontsize() * scale for t in fig.findobj(Text) if t.get_text()]
    renderer = fig.canvas.get_renderer()
    boxes = [ax.get_window_extent(renderer) for ax in fig.axes]
    hidden = [ax.title.get_window_extent(renderer).overlaps(other) for ax in fig.axes if ax.title.get_text()
              for other, owner in zip(boxes, fig.axes) if owner is not ax and other.width > 0]
    return min(sizes) >= BODY_PT - 1e-9 and not any(hidden)


def test_chapter_figures_are_legible_at_page_width():
    import matplotlib.pyplot as plt
    from gitutor.viz import show_grid
    model, x, y = sweeps.dlg_case(0, **CASE)
    result = dlg(model, client_gradients(model, x, y), x.shape, 100, iterations=2, seed=0, record_every=1)
    rows = [{"seed": s, "psnr": 20.0 + s, "truth": x, "result": result} for s in range(10)]
    old = show_grid(torch.cat([x] * 7), titles=[f"prune {r}: 31.0 dB ✓" for r in range(7)], ncols=5, scale=1.6)
    assert not legible(old)  # the old defense grid: 8 pt titles on an 8-inch figure
    figures = [dlg_figures.seed_grid(rows, 40.0, 30.0, "seeds"),
               dlg_figures.strip(result.snapshots, x, columns=7), dlg_figures.attack_curves(result, x),
               dlg_figures.psnr_curves({f"DLG, seed {s}": ((0, 10), (5.0, 31.0)) for s in range(10)}, 40.0, 30.0)]
    assert all(legible(fig) for fig in figures)
    plt.close("all")
    with pytest.raises(ValueError, match="positive"):
        from gitutor.viz import legible as make_legible
        make_legible(old, width=0)


def test_the_defended_run_attacks_the_first_seed_recognisable_at_its_budget():
    rows = sweeps.seed_study([0, 1], iterations=6, record_every=3, **CASE)
    at_3 = [float(psnr(dict(r["result"].snapshots)[3].clamp(0, 1), r["truth"])) for r in rows]
    level = max(at_3) - 1e-3  # only the better run of the two clears it
    assert sweeps.defense_seed(rows, 3, level) == rows[at_3.index(max(at_3))]["seed"]
    assert sweeps.defense_seed(rows, 3, 1e9) == 0  # none recognisable: the first seed
    assert sweeps.defense_seed(rows, 4, 0.0) == 0  # no snapshot at that step: the first seed
    with pytest.raises(ValueError, match="rows"):
        sweeps.defense_seed([], 3, 30.0)