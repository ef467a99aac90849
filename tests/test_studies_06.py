"""Chapter 06's experiments (gitutor.chapters.learning_to_invert.experiments, lti_report) on tiny cases."""
import json
import pytest
import torch

from gitutor import stats

from gitutor.federated import observed_gradient, paper_defenses
from gitutor.chapters import get_profile
from gitutor.chapters.learning_to_invert.profile import SMOKE_PARAMETERS
from gitutor.chapters.learning_to_invert import experiments as study
from gitutor.chapters.learning_to_invert import report as lti_report
from gitutor.chapters.learning_to_invert.report import PAPER_MSE, defense_names, results_rows, table1_markdown

TINY = dict(n_aux=60, n_heldout=8, n_ig_targets=2, n_ig_batches=1, b4_batches=12, epochs=2, ig_iterations=2,
            hidden={1: 16, 4: 16}, image_size=8, train_batch=16, dlg_iterations=2)


@pytest.fixture(scope="module")
def cfg():
    return get_profile("06_learning_to_invert", "quick").replace(**TINY)


def test_split_keeps_targets_out_of_the_auxiliary_set_and_is_seeded(cfg):
    aux_x, aux_y, target_x, target_y = study.load_split(cfg, seed=1)
    assert aux_x.shape == (60, 1, 8, 8) and target_x.shape == (8, 1, 8, 8) and aux_y.shape == (60,)
    assert torch.cdist(target_x.flatten(1), aux_x.flatten(1)).min() > 0  # no target image among the auxiliary ones
    assert torch.equal(study.load_split(cfg, seed=1)[2], target_x)
    assert not torch.equal(study.load_split(cfg, seed=2)[2], target_x)
    with pytest.raises(ValueError, match="n_heldout"):
        study.load_split(cfg.replace(n_heldout=0), seed=1)


def test_bundled_root_replaces_the_full_profiles_cifar10_offline():
    full = get_profile("06_learning_to_invert", "full", budget=SMOKE_PARAMETERS["BUDGET"])
    aux_x, _, target_x, _ = study.load_split(full, 0, SMOKE_PARAMETERS["DATA_ROOT"])
    assert aux_x.shape == (full.n_aux, 3, 32, 32) and target_x.shape == (full.n_heldout, 3, 32, 32)
    with pytest.raises(ValueError, match="BUDGET"):
        get_profile("06_learning_to_invert", "full", budget="smok")


def test_model_hasher_and_observation(cfg):
    model = study.build_model("lenet", cfg)
    again = study.build_model("lenet", cfg)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))
    assert float(next(model.parameters()).detach().abs().max()) <= cfg.init_a
    hasher = study.build_hasher("lenet", model, cfg, seed=0)
    m = sum(p.numel() for p in model.parameters())
    assert hasher.out_dim == int(cfg.hash_fraction["lenet"] * m)
    assert study.build_hasher("lenet", model, cfg.replace(hash_fraction={"lenet": None}), 0) is None
    with pytest.raises(ValueError, match="name"):
        study.build_model("vgg", cfg)
    x, y = study.load_split(cfg, 0)[2:]
    groups, observed, features = study.observe(model, None, None, x[:5], y[:5], batch_size=2)
    assert groups.tolist() == [[0, 1], [2, 3]] and features.shape == (2, m)  # the fifth target is left out
    expected = observed_gradient(model, x[2:4], y[2:4])   # the mean of two clients' gradients
    assert all(torch.allclose(a, b) for a, b in zip(observed[1], expected))
    with pytest.raises(ValueError, match="batch_size"):
        study.observe(model, None, None, x[:5], y[:5], batch_size=6)


def test_lti_beats_the_mean_image_without_defense_and_reports_both_attacks(cfg):
    cfg = cfg.replace(n_aux=400, epochs=30, hidden={1: 64, 4: 64}, lr=3e-3, hash_fraction={"lenet": None})
    aux_x, aux_y, target_x, target_y = study.load_split(cfg, 0)
    model = study.build_model("lenet", cfg)
    setup = study.Setup(cfg, 0, "cpu", False, tuple(aux_x.shape[1:]))
    defense = paper_defenses()["none"]
    aux = study.make_gradient_dataset(model, aux_x, aux_y, defense, 1)
    cell = study.lti_vs_ig(setup, model, None, defense, aux, (target_x, target_y), 1)
    assert cell.ig_images.shape == (2, 1, 1, 8, 8) and cell.lti_images.shape == (8, 1, 1, 8, 8)
    mean_mse = float(((aux_x.mean(0) - target_x) ** 2).mean())
    assert cell.scores["LTI (all held-out)"]["mse"] < 0.8 * mean_mse   # g_θ learned something from the gradient
    assert len(cell.per_batch_mse("IG")) == 2 and cell.history["val_loss"][-1] < cell.history["val_loss"][0]
    assert cell.dlg_images.shape == (2, 1, 1, 8, 8) and 0 <= cell.dlg_images.min() and cell.dlg_images.max() <= 1
    assert len(cell.per_batch_mse("DLG")) == 2 and "DLG" in cell.scores
    with pytest.raises(ValueError, match="method"):
        cell.per_batch_mse("GI-GIP")
    with pytest.raises(ValueError, match="method"):
        _comparison([0.1], [0.1]).per_batch_mse("DLG")  # a cell DLG did not attack (B = 4)
    errors = study.aux_size_errors(setup, aux[0], aux_x, [20, 400], cell.features, target_x)
    assert len(errors) == 2 and len(errors[0]) == 8
    assert sum(errors[1]) < sum(errors[0])   # more auxiliary data, a better inverse
    with pytest.raises(ValueError, match="sizes"):
        study.aux_size_errors(setup, aux[0], aux_x, [401], cell.features, target_x)
    from gitutor.chapters.learning_to_invert import checks as lti_checks  # the same g_θ raw, standardised and trained twice as long
    names = defense_names(0.99, 0.1)
    check = lti_checks.input_scale_check(setup, {"none": aux[0] * 0.1, "sign": aux[0]}, aux_x,
                                         {("lenet", 1, "none"): cell, ("lenet", 1, "sign"): cell}, "lenet", names)
    assert check["size"]["none"] == pytest.approx(0.1 * check["size"]["sign"])
    assert set(check["verdicts"]) == {"raw", "standardised"} and "(Table 1)" in check["table"]
    assert check["epochs"]["standardised"]["none"] == len(cell.history["val_loss"])
    assert check["standardised"]["none"].mean == pytest.approx(cell.scores["LTI (all held-out)"]["mse"], rel=1e-4)


def test_report_rows_and_table_carry_the_papers_numbers():
    names = defense_names(0.99, 0.1)
    scores = {"mse": 0.01234, "psnr": 19.1, "ssim": 0.5}
    table1 = {("lenet", 1, d): {"IG": scores, "LTI": scores, "LTI (all held-out)": scores} for d in names}
    ood = {d: stats.Interval(0.02, 0.01, 0.03, 20) for d in names}
    intervals = {("lenet", 1, "sign", "IG"): stats.Interval(0.0125, 0.010, 0.015, 5)}
    common = dict(scale="tiny", n_ig={1: 5}, ood_model="lenet", wins=2, smallest=(100, 1597, 1))
    rows = results_rows(table1, ood, names, comparable=True, intervals=intervals, **common)
    assert len(rows) == 1 + 4 * 2 + 4 + 1
    sign_ig = next(r for r in rows if r["setting"] == "lenet, B=1, sign comp." and "IG" in r["quantity"])
    assert sign_ig["paper"] == PAPER_MSE["lenet", 1]["IG"][1] and sign_ig["this_run"] == 0.0125
    assert (sign_ig["low"], sign_ig["high"]) == (0.01, 0.015)
    assert all(r["better"] == "lower" for r in rows[1:-1]) and rows[-2]["low"] == 0.01
    headline = [r for r in rows if r.get("headline")]
    assert headline == [rows[0]] and (rows[0]["paper"], rows[0]["this_run"]) == (3, 2)
    assert rows[-1]["this_run"] == 1 and "100 of 1597" in rows[-1]["setting"] and rows[-1]["better"] == "higher"
    # the run's setting is stated once, in the first row; the others point to it
    assert rows[0]["differences"].startswith("tiny;") and all(r["differences"].startswith("as the first row")
                                                              for r in rows[1:])
    # MSE on other images than the paper's carries no verdict; the counts still do
    other = results_rows(table1, ood, names, comparable=False, **common)
    assert not any("better" in r for r in other[1:-1]) and all(r["better"] == "higher" for r in (other[0], other[-1]))
    assert "| IG | 0.0123 / 19.1 / 0.50" in table1_markdown(table1, "lenet", 1, names, 5, 200)
    # a broken baseline (worse than the mean image) is not a row; the reversal without a defense is judged
    reversal = stats.Interval(0.003, 0.002, 0.004, 16)
    kept = results_rows(table1, ood, names, comparable=False, broken=[("lenet", 1, "sign")], reversal=reversal,
                        **common)
    assert not any(r["quantity"] == "MSE IG (Table 1)" and r["setting"] == "lenet, B=1, sign comp." for r in kept)
    assert any(r["quantity"] == "MSE LTI (Table 1)" and r["setting"] == "lenet, B=1, sign comp." for r in kept)
    row = next(r for r in kept if "without a defense" in r["quantity"])
    assert row["paper"] == pytest.approx(0.004 - 0.022) and row["better"] == "lower"
    from gitutor.results import verdict
    assert verdict(row) == "falls short"  # IG ahead here, LTI ahead in the paper


def _comparison(ig, lti, dlg=None):
    """A Table 1 cell whose IG, LTI (and DLG) reconstructions are off the truth by the given offsets."""
    truth = torch.full((len(ig), 1, 1, 4, 4), 0.5)
    offsets = lambda values: torch.tensor(values).view(-1, 1, 1, 1, 1)  # noqa: E731
    return study.Comparison({}, {}, truth + offsets(ig), truth + offsets(lti), truth, torch.zeros(len(ig), 2),
                            None if dlg is None else truth + offsets(dlg))


def test_paired_comparison_counts_only_differences_resolved_beyond_noise(cfg):
    from gitutor.chapters.learning_to_invert import checks as lti_checks
    names = defense_names(0.99, 0.1)
    clear = _comparison([0.30, 0.31, 0.29, 0.30], [0.01, 0.02, 0.01, 0.02])
    mixed = _comparison([0.10, 0.30, 0.02, 0.25], [0.01, 0.28, 0.20, 0.02])
    # hard and easy targets for both: unpaired intervals overlap, the paired differences do not
    ig = [0.10, 0.30, 0.15, 0.20]
    paired = _comparison(ig, [(v * v - d) ** 0.5 for v, d in zip(ig, (0.005, 0.006, 0.005, 0.006))])
    cells = {("lenet", 1, d): {"prune": mixed, "gauss": paired}.get(d, clear) for d in names}
    result = lti_checks.paired_comparison(cells, "lenet", names)
    assert result["verdicts"]["sign"] == "LTI < IG" and result["verdicts"]["prune"] == stats.NOT_RESOLVED
    assert result["verdicts"]["gauss"] == "LTI < IG" and result["n"] == 4
    assert stats.compare(result["intervals"]["gauss", "LTI"], result["intervals"]["gauss", "IG"]) == stats.NOT_RESOLVED
    assert result["wins"] == 2
    assert "| none |" in result["table"] and "[" in result["table"]
    assert all(0 <= result["intervals"][d, m].low for d in names for m in ("IG", "LTI"))
    errors = {d: [[0.0001] * 4] for d in lti_report.DEFENDED}
    ig = {d: cells["lenet", 1, d].per_batch_mse("IG") for d in names}
    small = lti_checks.smallest_aux_paired(errors | {"prune": [[0.5] * 4]}, ig)
    assert small["verdicts"]["prune"] == "LTI > IG" and small["verdicts"]["sign"] == "LTI < IG"
    assert small["wins"] == 1  # gauss: IG's per-target MSE varies too much for 4 targets
    # IG from elsewhere (the recorded study at its best budget) on the first targets replaces this run's
    better_ig = {d: [5e-5, 3.4e-4, 6e-5] for d in names}  # LTI's errors 1e-4, 4e-4, 1e-4 less 4–6e-5
    versus = lti_checks.paired_comparison(cells, "lenet", names, ig_errors=better_ig)
    assert versus["n"] == 3 and versus["verdicts"]["sign"] == "LTI > IG" and versus["wins"] == 0
    # a baseline worse than the mean image is broken: it reads so and counts nowhere
    flagged = lti_checks.paired_comparison(cells, "lenet", names, reference=[0.05, 0.06, 0.04, 0.05])
    assert flagged["broken"]["sign"] and flagged["verdicts"]["sign"] == lti_checks.BROKEN
    assert not flagged["broken"]["gauss"] and flagged["wins"] == 1  # gauss's IG (~0.02) beats the mean image
    # prune's IG (0.01, 0.09, 0.0004, 0.06) is not worse than the mean image beyond noise: not broken
    assert not flagged["broken"]["prune"]
    assert result["broken"] == {d: False for d in names}
    one = {key: _comparison([0.3], [0.01]) for key in cells}  # one batch: nothing resolved
    assert lti_checks.paired_comparison(one, "lenet", names)["wins"] == 0
    with_dlg = {key: _comparison([0.30, 0.31, 0.29, 0.30], [0.10, 0.11, 0.10, 0.11], [0.0, 0.0, 0.0, 0.001])
                for key in cells}
    both = lti_checks.paired_comparison(with_dlg, "lenet", names)
    assert both["dlg_verdicts"]["sign"] == "LTI > DLG" and both["verdicts"]["sign"] == "LTI < IG"
    assert "LTI vs DLG" in both["table"] and result["dlg_verdicts"] == {}


def test_ood_reference_reads_table_2_against_the_mean_image():
    from gitutor.chapters.learning_to_invert import checks as lti_checks
    names = defense_names(0.99, 0.1)
    reference = [0.05, 0.06, 0.04, 0.05, 0.07]
    better, worse = [r - 0.02 for r in reference], [r + 0.03 for r in reference]
    table2 = {d: {"LTI, OOD only": worse, "LTI-OOD (+ DCT samples)": better if d == "none" else worse} for d in names}
    check = lti_checks.ood_reference(table2, reference, names)
    assert check["beats"] == {"LTI, OOD only": 0, "LTI-OOD (+ DCT samples)": 1}
    assert check["verdicts"]["sign", "LTI, OOD only"] == "worse than the mean image"
    assert "ignores the gradient" in check["table"]
    assert check["reference"].low >= 0


def test_settings_and_differences_follow_the_profile(cfg):
    assert cfg.differences.startswith("quick: sklearn digits 16×16") and cfg.patience >= 1
    full = get_profile("06_learning_to_invert", "full")
    assert full.differences == "paper settings"
    assert get_profile("06_learning_to_invert", "full", budget="smoke").differences.startswith("smoke")
    assert lti_report.same_data(full, "data") and not lti_report.same_data(full, "bundled")
    assert not lti_report.same_data(cfg)
    aux_x, target_x = torch.zeros(10, 1, 4, 4), torch.ones(3, 1, 4, 4)
    assert lti_report.mean_image_scores(aux_x, target_x)["mse"] == pytest.approx(1.0)
    assert lti_report.data_summary(aux_x, target_x, cfg) == {"n_aux": 10, "n_targets": 3, "shape": "1×4×4",
                                                             "models": "lenet"}


def test_the_claim_is_judged_from_the_paired_comparisons_against_ig_at_its_budget():
    wins = {d: "LTI < IG" for d in ("none", "sign", "prune", "gauss")}
    best = {"none": 2000, "sign": 300, "prune": 1000, "gauss": 100}
    judged = lti_report.claim_judgement(wins, 16, best)
    assert judged["claim_outcome"] == "consistent" and "§4.1.1" in judged["claim"]
    assert judged["claim_reason"] == lti_report.CLAIM_REASON.format(
        n=16, budgets="300/1000/100", sign="LTI < IG", prune="LTI < IG", gauss="LTI < IG")
    # the no-defense comparison is not part of the claim (three defenses)
    assert lti_report.claim_judgement({**wins, "none": "LTI > IG"}, 16, best)["claim_outcome"] == "consistent"
    assert lti_report.claim_judgement({**wins, "gauss": "LTI > IG"}, 16, best)["claim_outcome"] == "refuted"
    open_ = {**wins, "sign": stats.NOT_RESOLVED}
    assert lti_report.claim_judgement(open_, 16, best)["claim_outcome"] == "not resolved"
    # without the recorded budget study IG ran only at this run's budget: nothing better than not resolved
    unchecked = lti_report.claim_judgement(wins, 16, None)
    assert unchecked["claim_outcome"] == "not resolved" and "unchecked" in unchecked["claim_reason"]


def test_budget_study_scores_ig_at_the_budget_chosen_on_auxiliary_images():
    from gitutor.chapters.learning_to_invert import budget
    names = {"none": "none", "sign": "sign comp."}
    errors = {"none": {100: [0.02, 0.02], 300: [0.019, 0.019], 1000: [0.019, 0.019]},
              "sign": {100: [0.2, 0.2], 300: [0.1, 0.1], 1000: [0.05, 0.05]}}
    choice = {"none": {100: [0.03], 300: [0.01], 1000: [0.02]}, "sign": {100: [0.3], 300: [0.2], 1000: [0.1]}}
    cells = {("lenet", 1, "none"): _comparison([0.02 ** 0.5] * 2, [0.01, 0.01]),
             ("lenet", 1, "sign"): _comparison([0.2 ** 0.5] * 2, [0.01, 0.012])}
    record = {"targets": 2, "budgets": [100, 300, 1000], "table_budget": 100, "errors": errors,
              "choice": {"images": [3], "errors": choice}, "chosen_budget": {"none": 300, "sign": 1000}}
    versus = budget.against_recorded(record, cells, "lenet", names)
    assert versus["agreement"] == pytest.approx(0.0, abs=1e-6)  # the record's IG at 100 is this run's IG
    assert versus["best"] == {"none": 300, "sign": 1000}  # chosen on the auxiliary images, not on the targets
    assert versus["ig_errors"] == {"none": [0.019, 0.019], "sign": [0.05, 0.05]}
    assert "IG, 1000 its" in versus["table"] and "**0.0500**" in versus["table"] and "auxiliary" in versus["table"]
    with pytest.raises(ValueError, match="budgets"):
        budget.ig_budget_errors(None, None, {}, torch.zeros(1, 1, 4, 4), torch.zeros(1), [300, 100])


def test_recognisable_uses_the_books_threshold_after_its_controls():
    from gitutor.chapters.learning_to_invert import checks as lti_checks
    names = {"none": "none"}
    targets = torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    truth = targets[:2, None]
    exact = study.Comparison({}, {}, truth, (truth + 0.1).clamp(0, 1), truth, torch.zeros(2, 1), truth.mean() + 0 * truth)
    found = lti_checks.recognisable({("lenet", 1, "none"): exact}, "lenet", names, targets)
    assert found["counts"] == {("none", "IG"): 2, ("none", "DLG"): 0, ("none", "LTI"): 0} and found["best_control"] < 30
    # LTI (every pixel 0.1 off) beats each target's controls on random pixels; DLG (a flat grey) does not
    assert found["above_controls"] == {("none", "IG"): 2, ("none", "DLG"): 0, ("none", "LTI"): 2}
    assert "| IG | 2 / 2 · 2 / 2 |" in found["table"] and "4×4 thumbnail" in found["controls_table"]
    assert found["controls"]["mean colour"]["max"] <= found["best_control"]


def test_ig_tuning_chooses_on_the_tuning_images_and_the_profile_runs_the_recorded_choice(monkeypatch):
    import json
    from pathlib import Path

    from gitutor.chapters.learning_to_invert import tuning

    cfg = get_profile("06_learning_to_invert", "quick").replace(image_size=8)
    aux_x, aux_y = study.load_split(cfg, 0)[:2]
    model = study.build_model("lenet", cfg)
    defenses = paper_defenses()
    x, y = aux_x[:2], aux_y[:2]
    observed = {d: study.observe(model, None, defenses[d], x, y, 1)[1] for d in ("none", "sign")}
    monkeypatch.setattr(tuning, "GRID", {"tv_weight": (0.0, 10.0), "lr": (0.1,)})
    tuned = tuning.tune_ig(model, observed, x, y, 30, 0)
    assert [row[:2] for row in tuned["grid"]["none"]] == [[0.0, 0.1], [10.0, 0.1]]
    best = min(tuned["grid"]["none"], key=lambda row: row[2])
    assert (tuned["chosen"]["none"]["tv_weight"], tuned["chosen"]["none"]["lr"]) == tuple(best[:2])
    assert tuned["chosen"]["none"]["tv_weight"] == 0.0   # a TV weight of 10 flattens the digit
    assert set(tuned["stage2"]["sign"]) == {"chosen (steps, best iterate, 1 start)", "constant learning rate",
                                            "last iterate", f"{tuning.RESTARTS} restarts"}
    # restarts keep the start of lowest matching loss: never a higher loss than the first start alone
    one = {**tuned["chosen"]["none"], "restarts": 1}
    first = tuning.run_ig(model, observed["none"][0], x[:1], y[:1], "none", 30, one, 0)
    three = tuning.run_ig(model, observed["none"][0], x[:1], y[:1], "none", 30, {**one, "restarts": 3}, 0)
    assert first.shape == three.shape == (1, 1, 1, 8, 8)
    with pytest.raises(ValueError, match="restarts"):
        tuning.run_ig(model, observed["none"][0], x[:1], y[:1], "none", 30, {**one, "restarts": 0}, 0)
    with pytest.raises(ValueError, match="observed"):
        tuning.tune_ig(model, {"none": observed["none"][:1]}, x, y, 30, 0)
    names = {"none": "none", "sign": "sign comp."}
    tables = tuning.tuning_tables(tuned, names, tuned["chosen"])
    assert tables["matches"] and "**" in tables["grid"] and "| none | 0 | 0.1 |" in tables["chosen"]
    other = {**tuned["chosen"], "sign": {**tuned["chosen"]["sign"], "restarts": 7}}
    assert not tuning.tuning_tables(tuned, names, other)["matches"]
    # the book's record: the quick profile runs the settings its tuning chose
    record = json.loads((Path(__file__).parents[1] / "book" / "studies" / "06_ig_budget.json").read_text())
    quick = get_profile("06_learning_to_invert", "quick")
    assert record["tuning"]["chosen"] == quick.ig_settings and record["tuning"]["iterations"] == quick.ig_iterations


def test_the_recorded_ig_budget_study_is_read_only_for_the_profiles_own_targets(tmp_path):
    """A named budget (``BUDGET = "smoke"``) or overrides attack other targets than the record's: the
    page then runs without it rather than pairing its errors with another run's."""
    from gitutor.chapters.learning_to_invert import budget

    record = {"profile": "quick", "seed": 0, "chosen_budget": {}, "errors": {"none": {"10": [0.1]}},
              "choice": {"errors": {"none": {"10": [0.2]}}}}
    path = tmp_path / "06_ig_budget.json"
    path.write_text(json.dumps(record))
    found = budget.recorded_study(path, "quick", 0, {})
    assert found is not None and found["errors"]["none"] == {10: [0.1]}
    assert budget.recorded_study(path, "quick", 0, {}, "smoke") is None
    assert budget.recorded_study(path, "quick", 0, {"epochs": 2}) is None
    assert budget.recorded_study(path, "quick", 1, {}) is None
    assert budget.recorded_study(tmp_path / "absent.json", "quick", 0, {}) is None


def test_dlg_worse_than_the_mean_image_is_broken_and_the_mean_image_is_paired():
    """Review 46 M1/M2: DLG gets IG's broken-baseline rule; the know-nothing control is paired."""
    from gitutor.chapters.learning_to_invert import checks as lti_checks
    names = defense_names(0.99, 0.1)
    # per-target MSE = offset²: IG 0.0009–0.0016, LTI 1e-4, DLG ≈ 0.09 (worse than the mean image's 0.01)
    cell = _comparison([0.03, 0.04, 0.035, 0.03], [0.01, 0.01, 0.01, 0.01], [0.30, 0.31, 0.29, 0.30])
    cells = {("lenet", 1, d): cell for d in names}
    reference = [0.01, 0.011, 0.009, 0.01]
    result = lti_checks.paired_comparison(cells, "lenet", names, reference=reference)
    assert all(result["dlg_broken"].values()) and not any(result["broken"].values())
    assert all(v == lti_checks.BROKEN for v in result["dlg_verdicts"].values())
    assert result["verdicts"]["sign"] == "LTI < IG" and result["wins"] == 3
    # without the control DLG is judged as before
    plain = lti_checks.paired_comparison(cells, "lenet", names)
    assert plain["dlg_verdicts"]["sign"] == "LTI < DLG" and plain["dlg_broken"] == {d: False for d in names}
    assert plain["vs_mean"] == {} and "mean image" not in plain["table"]
    # the mean-image control paired with IG and LTI on the same targets
    assert result["vs_mean"]["sign"] == "IG < mean image"
    gap = result["intervals"]["sign", "IG − mean image"]
    assert gap.mean == pytest.approx(sum(o * o for o in (0.03, 0.04, 0.035, 0.03)) / 4 - 0.01)
    assert result["intervals"]["sign", "LTI − mean image"].high < 0
    assert "LTI − mean image (paired)" in result["table"] and "IG − mean image (paired)" in result["table"]
    # IG at the mean image's level: plain "not resolved", not "… at this budget"
    level = _comparison([0.1, 0.09, 0.11, 0.1], [0.01] * 4)
    tied = lti_checks.paired_comparison({("lenet", 1, d): level for d in names}, "lenet", names,
                                        reference=[0.012, 0.007, 0.011, 0.010])
    assert tied["vs_mean"]["gauss"] == lti_checks.NOT_RESOLVED == "not resolved"
    assert not tied["broken"]["gauss"]
    with pytest.raises(ValueError, match="reference"):
        lti_checks.paired_comparison(cells, "lenet", names, reference=[0.01, 0.01])
    with pytest.raises(ValueError, match="verdict"):
        lti_checks.plain(None)
    assert lti_checks.plain(stats.NOT_RESOLVED) == "not resolved" and lti_checks.plain("LTI < IG") == "LTI < IG"


def test_smallest_aux_row_counts_only_resolved_comparisons():
    """Review 46 M4/N4/N2: an unresolved small-aux comparison makes the row not resolved, not short."""
    from gitutor.chapters.learning_to_invert import checks as lti_checks
    from gitutor.results import verdict
    names = defense_names(0.99, 0.1)
    errors = {d: [[0.0001] * 4] for d in lti_report.DEFENDED}
    ig = {"sign": [0.0001, 0.02, 0.0002, 0.01], "prune": [0.3] * 4, "gauss": [0.2, 0.21, 0.19, 0.2]}
    small = lti_checks.smallest_aux_paired(errors, ig)
    assert small["verdicts"]["sign"] == "not resolved" and small["wins"] == 2 and small["unresolved"] == 1
    scores = {"mse": 0.01234, "psnr": 19.1, "ssim": 0.5}
    table1 = {("lenet", 1, d): {"IG": scores, "LTI": scores, "LTI (all held-out)": scores} for d in names}
    ood = {d: stats.Interval(0.02, 0.01, 0.03, 20) for d in names}
    common = dict(scale="tiny", n_ig={1: 5}, ood_model="lenet", wins=2, comparable=False)
    rows = results_rows(table1, ood, names, smallest=(100, 1597, 2, 1), **common)
    row = rows[-1]
    assert (row["this_run"], row["low"], row["high"]) == (2, 2, 3) and "n" not in row
    assert verdict(row) == "not resolved"
    assert "6%" in row["differences"] and "500 / 50 000 = 1 %" in row["differences"]
    # every comparison resolved: the count is judged as before
    short = results_rows(table1, ood, names, smallest=(100, 1597, 2, 0), **common)[-1]
    assert verdict(short) == "falls short" and short["n"] == 1
    assert verdict(results_rows(table1, ood, names, smallest=(100, 1597, 2), **common)[-1]) == "falls short"
    with pytest.raises(ValueError, match="smallest"):
        results_rows(table1, ood, names, smallest=(100, 1597, 2, 2), **common)
    # the no-defense row's paper value is derived from Table 1, and says so
    reversal = stats.Interval(0.003, 0.002, 0.004, 16)
    none = next(r for r in results_rows(table1, ood, names, smallest=(100, 1597, 2), reversal=reversal,
                                        **common) if "without a defense" in r["quantity"])
    assert "derived from Table 1" in none["differences"]


def test_table1_labels_this_runs_ig_and_adds_ig_at_its_chosen_budget():
    """Review 46 M3: one quantity, two values, each said what it is."""
    names = defense_names(0.99, 0.1)
    scores = {"mse": 0.0291, "psnr": 16.0, "ssim": 0.5}
    table1 = {("lenet", 1, d): {"IG": scores, "LTI": scores} for d in names}
    chosen = {d: (300, [0.01, 0.001]) for d in names}
    text = table1_markdown(table1, "lenet", 1, names, 2, 16, ig_iterations=100, chosen=chosen)
    assert "| IG, 100 iterations (not its chosen budget) | 0.0291" in text
    # mean MSE 0.0055, mean PSNR (20 + 30) / 2 = 25.0 dB, SSIM/LPIPS not recorded
    assert "| IG at its chosen budget | 0.0055 / 25.0 / – / – (300 its)" in text
    assert text.index("IG, 100 iterations") < text.index("IG at its chosen budget") < text.index("| LTI |")
    assert "| IG | 0.0291" in table1_markdown(table1, "lenet", 1, names, 2, 16)
    with pytest.raises(ValueError, match="chosen"):
        table1_markdown(table1, "lenet", 1, names, 2, 16, chosen={d: (300, []) for d in names})
