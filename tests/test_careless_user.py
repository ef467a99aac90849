"""Issue 43, items 1–3, on the library: inputs tried as a careless user would try them.

Each bad input gives a ``TypeError`` / ``ValueError`` that names the argument before anything is read,
run or written (a failed writer leaves its record's sha256 as it was); a legitimate input that looks
odd — a client update that is exactly zero, ``num_classes`` on a labelled source, a metric name in
lower case — gives the right result. Every test here fails on the code before the fix.
"""
import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from gitutor import checks
from gitutor.chapters.flower_dp import curve, experiments, strongest
from gitutor.controls import (
    batch_controls,
    check_threshold,
    control_images,
    control_scores,
    start_images,
)
from gitutor.data import load
from gitutor.metrics import label_accuracy, lpips_distance, score_batch
from gitutor.paired import compare_paired, oriented, paired_difference, paired_ordering
from gitutor.results import (
    interval_fields,
    read_record,
    results_table,
    save_results,
    timing_rows,
    verdict,
)
from gitutor.stats import interval

ROOT = Path(__file__).resolve().parents[1]
ROW = {"quantity": "PSNR", "setting": "B = 1", "paper": 20.0, "this_run": 25.0, "unit": "dB",
       "differences": "none", "better": "higher"}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the shared checkers (gitutor.checks) ------------------------------------------------------------


@pytest.mark.parametrize("check, value, error", [
    (lambda v: checks.check_flag(v, "flag"), "False", TypeError),
    (lambda v: checks.check_flag(v, "flag"), 0, TypeError),
    (lambda v: checks.check_flag(v, "flag"), None, TypeError),
    (lambda v: checks.check_real(v, "flag"), "0.5", TypeError),
    (lambda v: checks.check_real(v, "flag"), True, TypeError),
    (lambda v: checks.check_real(v, "flag"), math.nan, ValueError),
    (lambda v: checks.check_real(v, "flag"), math.inf, ValueError),
    (lambda v: checks.check_real(v, "flag", low=0.0, low_open=True), 0.0, ValueError),
    (lambda v: checks.check_int(v, "flag"), 2.0, TypeError),
    (lambda v: checks.check_int(v, "flag"), 0, ValueError),
    (lambda v: checks.check_seed(v, "flag"), 2**64, ValueError),
    (lambda v: checks.check_choice(v, "flag", ("a", "b")), "A", ValueError),
    (lambda v: checks.check_choice(v, "flag", ("a", "b")), ["a"], TypeError),
])
def test_the_shared_checkers_name_the_argument(check, value, error):
    with pytest.raises(error, match="flag"):
        check(value)


def test_the_shared_checkers_pass_good_values_through():
    assert checks.check_flag(np.bool_(True), "f") is True
    assert checks.check_real(torch.tensor(0.5), "x", low=0.0) == 0.5
    assert checks.check_real(math.inf, "x", finite=False) == math.inf
    assert checks.check_int(np.int64(3), "n") == 3 and checks.check_seed(-1) == -1
    assert checks.check_choice("lpips", "metric", ("LPIPS", "PSNR"), ignore_case=True) == "LPIPS"


# --- 1. pretrained: every bool flag is a bool -----------------------------------------------------------


@pytest.mark.parametrize("normalize", ["False", "True", 0, 1, None])
def test_pretrained_refuses_a_flag_that_is_not_a_bool_before_reading_the_weights(normalize, monkeypatch):
    import importlib

    module = importlib.import_module("gitutor.models.pretrained")
    monkeypatch.setattr(module, "lite0_state_dict", lambda: pytest.fail("the weights were read"))
    with pytest.raises(TypeError, match="normalize"):
        module.pretrained("efficientnet_lite0", normalize=normalize)
    with pytest.raises(TypeError, match="name"):
        module.pretrained(0)


@pytest.mark.parametrize("mean, std, error, name", [
    ((0.5, 0.5, math.nan), (0.2,) * 3, ValueError, r"mean\[2\]"), ((0.5,) * 3, (0.2, 0.0, 0.2), ValueError, r"std\[1\]"),
    ((0.5,) * 3, (0.2,) * 2, ValueError, "mean and std"), ("0.5", (0.2,), TypeError, "mean"),
    ((0.5,) * 3, (0.2, "0.2", 0.2), TypeError, r"std\[1\]"),
])
def test_normalized_checks_its_mean_and_std(mean, std, error, name):
    from gitutor.models.pretrained import Normalized

    with pytest.raises(error, match=name):
        Normalized(nn.Identity(), mean, std)


# --- 2. data.load: num_classes is honoured, every number checked ----------------------------------------


def test_load_keeps_only_the_classes_below_num_classes():
    images, labels = load("digits", 40, num_classes=3, seed=2)
    assert images.shape == (40, 1, 8, 8) and set(labels.tolist()) == {0, 1, 2}  # before: labels 0–9
    whole, labels = load("digits", num_classes=3)
    assert len(whole) == int(sum((load("digits")[1] < 3).tolist())) and int(labels.max()) == 2
    assert torch.equal(load("digits", 5, seed=1)[1], load("digits", 5, seed=1, num_classes=10)[1])  # all kept


def test_load_mnist_with_num_classes_gives_those_classes_or_names_num_classes():
    images, labels = load("mnist", 5, num_classes=3)  # the call: before, labels 0–9
    assert images.shape == (5, 1, 28, 28) and int(labels.max()) < 3
    _, every = load("mnist")
    with pytest.raises(ValueError, match=r"num_classes=2.*holds only"):
        load("mnist", int((every < 2).sum()) + 1, num_classes=2)


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(n=5.0), TypeError, "n"), (dict(n="5"), TypeError, "n"), (dict(n=True), TypeError, "n"),
    (dict(n=5, size=16.0), TypeError, "size"), (dict(n=5, size=0), ValueError, "size"),
    (dict(n=5, seed=1.5), TypeError, "seed"), (dict(n=5, seed="0"), TypeError, "seed"),
    (dict(n=5, channels=True), TypeError, "channels"), (dict(n=5, channels=3.0), TypeError, "channels"),
    (dict(n=5, channels=2), ValueError, "channels"), (dict(n=5, num_classes=1), ValueError, "num_classes"),
    (dict(n=5, num_classes=3.0), TypeError, "num_classes"), (dict(n=5, train="False"), TypeError, "train"),
    (dict(n=5, train=True), ValueError, "train"), (dict(n=5, pool="aux"), ValueError, "pool"),
    (dict(n=5, root="data"), ValueError, "root"), (dict(kind=None, n=5), TypeError, "kind"),
    (dict(kind="photos", n=2, pool="train"), ValueError, "pool"),
])
def test_load_refuses_careless_arguments_naming_them(kwargs, error, name, monkeypatch):
    from gitutor import data

    monkeypatch.setattr(data, "digits", lambda: pytest.fail("the source was read"))
    monkeypatch.setattr(data, "natural_images", lambda *a, **k: pytest.fail("the source was read"))
    with pytest.raises(error, match=name):
        load(**{"kind": "digits", **kwargs})


def test_an_image_folder_keeps_the_first_num_classes_folders(tmp_path):
    from PIL import Image

    for k, name in enumerate(("a", "b", "c")):
        (tmp_path / name).mkdir()
        for i in range(2):
            Image.new("RGB", (20, 20), (80 * k, 40 * i, 9)).save(tmp_path / name / f"{i}.png")
    _, labels = load("imagefolder", 4, root=tmp_path, size=8, num_classes=2)
    assert sorted(labels.tolist()) == [0, 0, 1, 1]
    with pytest.raises(ValueError, match=r"num_classes=2.*holds only 4"):
        load("imagefolder", 5, root=tmp_path, size=8, num_classes=2)


# --- 3–5. clip_update, defense_transform, equivalent_noise_multiplier ----------------------------------


@pytest.mark.parametrize("clip, error", [(-1.0, ValueError), (math.nan, ValueError), (0.0, ValueError),
                                         (math.inf, ValueError), ("1", TypeError), (True, TypeError)])
def test_clip_update_refuses_a_clip_that_is_no_norm(clip, error):
    from gitutor.federated.flower_defenses import clip_update

    with pytest.raises(error, match="clip"):
        clip_update([torch.ones(3)], clip)  # before: −1 flipped the sign, NaN returned it unclipped


def test_clip_update_checks_the_update_and_passes_a_zero_update_unchanged():
    from gitutor.federated.flower_defenses import clip_update

    zero = [torch.zeros(2, 3), torch.zeros(4)]
    assert all(torch.equal(a, b) for a, b in zip(clip_update(zero, 0.5), zero))
    assert math.isclose(float(torch.cat([t.flatten() for t in clip_update([torch.full((4,), 3.0)], 0.5)]).norm()), 0.5,
                        rel_tol=1e-6)
    for update, error in (([torch.tensor([math.nan])], ValueError), ([], ValueError), (torch.ones(3), TypeError),
                          ([torch.ones(3, dtype=torch.int64)], TypeError)):
        with pytest.raises(error, match="update"):
            clip_update(update, 1.0)


@pytest.mark.parametrize("clip, noise_std, generator, error, name", [
    (None, math.nan, torch.Generator(), ValueError, "noise_std"), (None, -0.1, torch.Generator(), ValueError, "noise_std"),
    (None, "0.1", torch.Generator(), TypeError, "noise_std"), (math.nan, 0.1, torch.Generator(), ValueError, "clip"),
    (-1.0, 0.1, torch.Generator(), ValueError, "clip"), (1.0, 0.1, 0, TypeError, "generator"),
])
def test_defense_transform_refuses_when_it_is_made(clip, noise_std, generator, error, name):
    with pytest.raises(error, match=name):  # before: NaN noise returned NaN gradients
        strongest.defense_transform(clip, noise_std, generator)
    apply = strongest.defense_transform(1.0, 0.0, torch.Generator())
    assert torch.equal(apply([torch.zeros(3)])[0], torch.zeros(3))


@pytest.mark.parametrize("variance, batch, norm, error, name", [
    (-0.01, 1, 1.0, ValueError, "variance"), (math.nan, 1, 1.0, ValueError, "variance"),
    ("0.01", 1, 1.0, TypeError, "variance"), (0.01, 2.0, 1.0, TypeError, "batch"), (0.01, 0, 1.0, ValueError, "batch"),
    (0.01, 1, 0.0, ValueError, "example_norm"), (0.01, 1, math.inf, ValueError, "example_norm"),
])
def test_equivalent_noise_multiplier_checks_all_its_numbers(variance, batch, norm, error, name):
    with pytest.raises(error, match=name):  # before: −0.01 gave a complex number
        experiments.equivalent_noise_multiplier(variance, batch, norm)
    assert experiments.equivalent_noise_multiplier(0.01, 4, 2.0) == pytest.approx(0.2)


# --- 6. defended_round: an honest guarantee, every argument checked before the federation ---------------


def _tiny(sizes=(2, 2)):
    torch.manual_seed(0)
    from gitutor.models import LeNet

    model = LeNet(2, 1, 12, activation="tanh")
    gen = torch.Generator().manual_seed(1)
    return model, [(torch.rand(n, 1, 12, 12, generator=gen), torch.arange(n) % 2) for n in sizes]


@pytest.mark.parametrize("epsilon, rounds", [(0.5, 1), (5.0, 1), (5.0, 3)])
def test_local_dp_states_the_epsilon_its_noise_gives_from_opacus_rdp_over_the_rounds(epsilon, rounds):
    from gitutor.federated.dp import epsilon as rdp_epsilon
    from gitutor.federated.flower_defenses import defended_round

    model, partitions = _tiny()
    view = defended_round(model, partitions, {"lr": 0.1}, "local-dp", clip=0.01, epsilon=epsilon, delta=1e-5,
                          client_seeds=[1, 2], num_rounds=rounds)
    sigma = 2 * 0.01 * math.sqrt(2 * math.log(1.25 / 1e-5)) / epsilon
    assert view.sigma == pytest.approx(sigma)  # the noise LocalDpMod added
    stated = view.guarantee.epsilon
    assert stated == pytest.approx(rdp_epsilon(sigma / 0.02, 1.0, rounds, 1e-5))  # one accountant, every round
    assert view.guarantee.level == "client" and "server included" in view.guarantee.against
    assert "Opacus' RDP accountant" in view.guarantee.source
    if rounds > 1:  # the rounds compose: more than one round's ε
        assert stated > rdp_epsilon(sigma / 0.02, 1.0, 1, 1e-5)


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(epsilon="0.5"), TypeError, "epsilon"), (dict(clip=True), TypeError, "clip"),
    (dict(clip="1"), TypeError, "clip"), (dict(sensitivity=0.0), ValueError, "sensitivity"),
    (dict(epsilon=math.nan), ValueError, "epsilon"), (dict(delta=math.nan), ValueError, "delta"),
    (dict(noise_multiplier=math.inf), ValueError, "noise_multiplier"), (dict(num_rounds=1.0), TypeError, "num_rounds"),
    (dict(server_seed=-1), ValueError, "server_seed"), (dict(server_seed=0.5), TypeError, "server_seed"),
    (dict(secagg_shares=2), ValueError, "secagg_shares"), (dict(secagg_shares=1.5), ValueError, "secagg_shares"),
    (dict(secagg_threshold=0.0), ValueError, "secagg_threshold"), (dict(secagg_threshold="1"), TypeError,
                                                                     "secagg_threshold"),
    (dict(engine="ray"), ValueError, "engine"), (dict(defense="Local-DP"), ValueError, "defense"),
    (dict(config={"lr": "0.1"}), TypeError, r"config\['lr'\]"), (dict(config={"lr": math.nan}), ValueError, "lr"),
    (dict(config={"lr": 0.1, "local-epochs": 1.5}), TypeError, "local-epochs"), (dict(config=[("lr", 0.1)]), TypeError,
                                                                                  "config"),
])
def test_defended_round_names_a_careless_argument_before_the_federation_runs(kwargs, error, name, monkeypatch):
    import gitutor.federated.flower_defenses as module

    monkeypatch.setattr(module, "_message_run", lambda *a: pytest.fail("the federation ran"))
    model, partitions = _tiny()
    arguments = {"config": {"lr": 0.1}, "defense": "local-dp"} | kwargs
    with pytest.raises(error, match=name):
        module.defended_round(model, partitions, arguments.pop("config"), arguments.pop("defense"), **arguments)


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(engine="ray"), ValueError, "engine"), (dict(config={"lr": "0.1"}), TypeError, "lr"),
    (dict(config={"lr": 0.1, "batch-size": -1}), ValueError, "batch-size"),
    (dict(num_rounds=True), TypeError, "num_rounds"), (dict(evaluate_fn=3), TypeError, "evaluate_fn"),
])
def test_federated_round_names_a_careless_argument_before_the_federation_runs(kwargs, error, name, monkeypatch):
    import gitutor.federated.flower as module

    monkeypatch.setattr(module, "run_federation", lambda *a, **k: pytest.fail("the federation ran"))
    model, partitions = _tiny()
    config = kwargs.pop("config", {"lr": 0.1})
    with pytest.raises(error, match=name):
        module.federated_round(model, partitions, config, **kwargs)


def test_update_as_gradient_and_local_training_check_their_numbers():
    from gitutor.federated.flower import local_training, update_as_gradient

    for args, error, name in ((([torch.ones(2)], "0.1"), TypeError, "lr"), (([torch.ones(2)], 0.1, 1.0), TypeError,
                                                                               "steps"),
                              (([torch.tensor([math.nan])], 0.1), ValueError, "update"), (([], 0.1), ValueError,
                                                                                           "update")):
        with pytest.raises(error, match=name):
            update_as_gradient(*args)
    model, [(images, labels), _] = _tiny()
    for kwargs, error, name in ((dict(lr=0.1, epochs=2.0), TypeError, "epochs"), (dict(lr="0.1"), TypeError, "lr"),
                                (dict(lr=0.1, seed=0.5), TypeError, "seed")):
        with pytest.raises(error, match=name):
            local_training(model, images, labels, **kwargs)


def _cfg(**changes):
    from gitutor.chapters import get_profile

    return get_profile("08_flower_dp", "quick", budget="smoke").replace(**changes)


@pytest.mark.parametrize("changes, name", [(dict(attacked_clients=0), "attacked_clients"),
                                           (dict(utility_clients=-1), "utility_clients")])
def test_chapter_08_names_a_client_count_before_the_federation_runs(changes, name, monkeypatch):
    monkeypatch.setattr(experiments, "federated_round", lambda *a, **k: pytest.fail("the federation ran"))
    with pytest.raises(ValueError, match=name):  # before: attacked_clients=0 failed after the federation
        _cfg(**changes)  # the profile refuses the count itself (gitutor.chapters.settings.SETTING_RULES)


def test_chapter_08_experiments_check_their_numbers_before_running(monkeypatch):
    monkeypatch.setattr(experiments, "federated_round", lambda *a, **k: pytest.fail("the federation ran"))
    cfg, model, data = _cfg(), experiments.chapter_model(12), {}
    for call, error, name in (
            (lambda: experiments.dp_point(model, data, math.nan, cfg), ValueError, "sigma"),
            (lambda: experiments.dp_point(model, data, "1", cfg), TypeError, "sigma"),
            (lambda: experiments.regime(model, data, clients=0, batch=1, epochs=1, cfg=cfg), ValueError, "clients"),
            (lambda: experiments.regime(model, data, clients=1, batch=1, epochs=1, cfg=cfg, noise_std=math.nan),
             ValueError, "noise_std"),
            (lambda: experiments.regime(model, data, clients=1, batch=2, epochs=1, cfg=cfg, batch_size=3), ValueError,
             "batch_size"),
            (lambda: experiments.chapter_model(12, seed=1.5), TypeError, "seed"),
            (lambda: experiments.dlg_lenet(12, seed="0"), TypeError, "seed"),
            (lambda: experiments.summarise([]), ValueError, "rows"),
            (lambda: experiments.budget_curve({}, data, cfg, clients=0), ValueError, "clients"),
            (lambda: experiments.attack(model, [torch.zeros(1)], None, None, lr=0.1, iterations=1,
                                        tv_weight=0.0, seed=0, noise_std=math.nan), ValueError, "noise_std"),
            (lambda: strongest.train_lti(model, (None, None), 0, cfg), ValueError, "batch"),
            (lambda: strongest.train_lti(model, (None, None), 1, cfg, noise_std=math.nan), ValueError, "noise_std"),
            (lambda: strongest.psnr_curve({"rows": []}), ValueError, "summary"),
            (lambda: strongest.recovers_every_client({"rows": []}, {}), ValueError, "controls"),
            (lambda: strongest.envelope({"IG": {"rows": [{}]}}, {"rows": [{}, {}]}), ValueError, "IG"),
    ):
        with pytest.raises(error, match=name):
            call()
    assert experiments.majority_rate([]) is None  # before: max() of an empty sequence


# --- 7. save_results and the record's rows: refused before the write -------------------------------------


@pytest.mark.parametrize("profile, rows, error, message", [
    ("quick", [dict(ROW, this_run=40.0, low=24.0, high=26.0, n=3)], ValueError, "outside its own interval"),
    ("qiuck", [ROW | {"n": 1}], ValueError, "profile"),
    ("Quick", [ROW | {"n": 1}], ValueError, "profile"),
    (None, [ROW | {"n": 1}], TypeError, "profile"),
    ("quick", [dict(ROW, this_run=math.nan, low=24.0, high=26.0, n=3)], ValueError, "'this_run' is nan"),
    ("quick", [dict(ROW, this_run="nan", low=24.0, high=26.0, n=3)], ValueError, "'this_run' is 'nan'"),
    ("quick", [dict(ROW, this_run=math.inf, low=24.0, high=26.0, n=3)], ValueError, "'this_run' is inf"),
    ("quick", [dict(ROW, better="Higher", n=1)], ValueError, "better"),
])
def test_save_results_refuses_a_careless_row_and_leaves_the_record_as_it_was(profile, rows, error, message, tmp_path):
    path = save_results("08_flower_dp", "quick", [ROW | {"n": 1}], tmp_path)
    before = sha(path)
    with pytest.raises(error, match=message):
        save_results("08_flower_dp", profile, rows, tmp_path)
    assert sha(path) == before


def test_a_run_rounded_coarser_than_its_interval_still_lies_inside_it(tmp_path):
    exact = interval([0.3541, 0.3542, 0.3543, 0.3544])
    row = dict(ROW, quantity="SSIM", unit="", paper=0.3, this_run=round(exact.mean, 2), **interval_fields(exact, 4))
    assert row["this_run"] < row["low"]  # 0.35 stands for a mean in [0.345, 0.355)
    assert save_results("08_flower_dp", "quick", [row], tmp_path).exists()
    assert verdict(row) in ("meets", "not resolved")


def test_read_record_refuses_an_unknown_profile_and_timing_rows_check_their_numbers(tmp_path):
    path = tmp_path / "08_flower_dp.json"
    path.write_text(json.dumps({"notebook": "08_flower_dp", "profile": "qiuck", "rows": [ROW | {"n": 1}]}))
    with pytest.raises(ValueError, match="profile"):
        read_record(path)
    for args, error, name in ((("qiuck", "cpu", 1.0, 1.0), ValueError, "profile"),
                              (("quick", "cpu", math.nan, 1.0), ValueError, "wall_s"),
                              (("quick", "cpu", 1.0, "2"), TypeError, "cpu_s"),
                              (("quick", None, 1.0, 1.0), TypeError, "device")):
        with pytest.raises(error, match=name):
            timing_rows(*args)
    with pytest.raises(ValueError, match="digits"):
        interval_fields(interval([1.0, 2.0]), -1)


def test_the_records_profiles_are_the_chapters_profiles():
    from gitutor.chapters import PROFILES
    from gitutor.results.records import PROFILES as RECORD_PROFILES

    assert RECORD_PROFILES == PROFILES


# --- 8. verdict: a row is a row, a direction is spelled as the rule spells it -----------------------------


@pytest.mark.parametrize("change, name", [({"better": "Higher"}, "better"), ({"better": "up"}, "better"),
                                          ({"quantity": None}, "quantity"), ({"setting": None}, "setting"),
                                          ({"unit": None}, "unit"), ({"Better": "higher"}, "Better")])
def test_verdict_names_the_key_of_a_row_it_cannot_judge(change, name):
    row = {k: v for k, v in (ROW | {"n": 1} | change).items() if v is not None}
    with pytest.raises(ValueError, match=name):  # before: "not comparable", or "meets" without the keys
        verdict(row)
    assert verdict(ROW | {"n": 1}) == "meets"


def test_results_table_checks_its_flag_and_its_notebook_column():
    rows = [ROW | {"n": 1}]
    with pytest.raises(TypeError, match="verdicts"):
        results_table(rows, verdicts="False")
    with pytest.raises(ValueError, match="notebook_column"):
        results_table(rows, notebook_column=["01_dlg", "02_idlg_soft_labels"])
    assert "meets" in results_table(rows) and "meets" not in results_table(rows, verdicts=False)


# --- 9. metric names: the known set, in any letter case -------------------------------------------------


def test_oriented_reads_a_metric_name_in_any_case_and_refuses_an_unknown_one():
    assert oriented("lpips", [0.2, 0.3]) == [-0.2, -0.3]  # before: not negated
    assert oriented("Mse", [1.0]) == [-1.0] and oriented("psnr", [20.0]) == [20.0]
    assert oriented("layout r", [0.5]) == [0.5]
    with pytest.raises(ValueError, match="metric.*LPIPS"):
        oriented("accuracy", [0.5])
    with pytest.raises(TypeError, match="metric"):
        oriented(None, [0.5])
    with pytest.raises(TypeError, match=r"values\[0\]"):
        oriented("PSNR", ["20"])


def test_paired_comparisons_check_their_numbers_and_names():
    with pytest.raises(TypeError, match=r"a\[0\]"):
        paired_difference(["0.5", 0.7], [0.1, 0.2])  # before: NumPy read the text as 0.5
    with pytest.raises(TypeError, match=r"b\[1\]"):
        paired_difference([0.5, 0.7], [0.1, True])
    with pytest.raises(TypeError, match="a must be"):
        paired_difference("12", [1.0, 2.0])
    for margin, error in (("0.5", TypeError), (math.nan, ValueError), (math.inf, ValueError)):
        with pytest.raises(error, match="margin"):
            compare_paired([1.0, 2.0], [0.0, 1.0], margin=margin)
    with pytest.raises(ValueError, match="names"):
        compare_paired([1.0, 2.0], [0.0, 1.0], names="AB")
    with pytest.raises(TypeError, match="expected"):
        paired_ordering({"A": [1.0], "B": [2.0]}, "AB")
    with pytest.raises(ValueError, match="expected"):
        paired_ordering({"A": [1.0], "B": [2.0]}, ["A", "A"])


# --- 10. Flower's clippings and a client that did not move -----------------------------------------------


def _zero_and_moved():
    """A linear model without bias: the client whose image is all zeros has a gradient of exactly 0."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(144, 2, bias=False))
    moved = torch.rand(1, 1, 12, 12, generator=torch.Generator().manual_seed(1))
    return model, [(torch.zeros(1, 1, 12, 12), torch.tensor([0])), (moved, torch.tensor([1]))]


def _norm(tensors):
    return math.sqrt(sum(float(t.double().pow(2).sum()) for t in tensors))


@pytest.mark.parametrize("defense", ["central-dp-server-clipping", "central-dp-client-clipping", "local-dp"])
def test_a_zero_update_passes_flowers_clipping_unchanged(defense):
    from gitutor.federated.flower_defenses import clip_update, defended_round

    model, partitions = _zero_and_moved()
    raw = defended_round(model, partitions, {"lr": 0.1}, client_seeds=[1, 2])
    assert {u.partition: _norm(raw.update(u)) for u in raw.updates}[0] == 0.0  # the client did not move
    view = defended_round(model, partitions, {"lr": 0.1}, defense, clip=0.01, noise_multiplier=0.0,
                          client_seeds=[1, 2], server_seed=0, weighting="uniform")  # before: ZeroDivisionError
    if defense == "local-dp":
        sent = {u.partition: torch.cat([t.flatten() for t in view.update(u)]) for u in view.updates}
        assert sent[0].std() == pytest.approx(view.sigma, rel=0.2)  # the zero update still gets its noise
        return
    clipped = {u.partition: view.update(u) for u in view.clipped}
    assert _norm(clipped[0]) == 0.0
    expected = clip_update(next(raw.update(u) for u in raw.updates if u.partition == 1), 0.01)
    assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(clipped[1], expected))
    mean = [(a + b) / 2 for a, b in zip(clipped[0], clipped[1])]  # z = 0: the aggregate is the clipped mean
    start = view.starts[0]
    assert all(torch.allclose(g - s, m, atol=1e-7) for g, s, m in zip(view.aggregates[0], start, mean))


@pytest.mark.skipif(os.environ.get("GITUTOR_RAY_TESTS") != "1",
                    reason="starts Ray (Flower's simulation engine): set GITUTOR_RAY_TESTS=1")
def test_a_zero_update_passes_flowers_clipping_on_the_simulation_engine():
    from gitutor.federated.flower_defenses import defended_round

    model, partitions = _zero_and_moved()
    for defense in ("central-dp-server-clipping", "local-dp"):
        kwargs = dict(clip=0.01, noise_multiplier=0.5, client_seeds=[1, 2], server_seed=0, weighting="uniform")
        simulated = defended_round(model, partitions, {"lr": 0.1}, defense, engine="simulation", **kwargs)
        in_process = defended_round(model, partitions, {"lr": 0.1}, defense, **kwargs)
        for sim, inp in zip(simulated.aggregates, in_process.aggregates, strict=True):
            assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(sim, inp))


# --- 11. metrics -------------------------------------------------------------------------------------


def test_lpips_names_the_shape_of_images_that_are_neither_grey_nor_rgb():
    x = torch.rand(2, 2, 32, 32)
    with pytest.raises(ValueError, match=r"\(2, 2, 32, 32\)"):  # before: a tensor size mismatch inside lpips
        lpips_distance(x, x)
    with pytest.raises(ValueError, match="net"):
        lpips_distance(torch.rand(1, 3, 32, 32), torch.rand(1, 3, 32, 32), net="squeeze")
    with pytest.raises(ValueError, match="grey or RGB"):
        score_batch(x, x, lpips=True)
    for flag in ("match", "lpips"):
        with pytest.raises(TypeError, match=flag):
            score_batch(torch.rand(1, 3, 8, 8), torch.rand(1, 3, 8, 8), **{flag: "False"})
    with pytest.raises(TypeError, match="predicted"):
        label_accuracy([1, 2], torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="no label"):
        label_accuracy(torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64))


# --- 12. controls ------------------------------------------------------------------------------------


def test_start_images_and_the_controls_check_their_arguments():
    x = torch.rand(2, 3, 8, 8)
    with pytest.raises(TypeError, match="seed"):  # before: inside torch's manual_seed
        start_images(x, (0.5,) * 3, (0.2,) * 3, seed=1.5)
    for mean, std, error, name in (((0.5, 0.5, math.nan), (0.2,) * 3, ValueError, r"mean\[2\]"),
                                   ((0.5,) * 3, (0.2, 0.0, 0.2), ValueError, r"std\[1\]"),
                                   ("0.5", (0.2,) * 3, TypeError, "mean")):
        with pytest.raises(error, match=name):
            start_images(x, mean, std, seed=0)
    with pytest.raises(TypeError, match="lpips"):
        batch_controls([x], (0.5,) * 3, (0.2,) * 3, lpips="yes")
    with pytest.raises(TypeError, match="seed"):
        batch_controls([x], (0.5,) * 3, (0.2,) * 3, seed=0.5)
    with pytest.raises(TypeError, match="thumbnail"):
        control_images(torch.rand(2, 3, 16, 16), thumbnail=2.5)
    with pytest.raises(ValueError, match="images"):
        control_images(torch.rand(2, 3, 16, 16) * 255)
    with pytest.raises(TypeError, match="metric"):
        control_scores(torch.rand(2, 3, 16, 16), metric="psnr")
    scores = control_scores(torch.rand(2, 3, 16, 16))
    with pytest.raises(ValueError, match="threshold"):  # before: NaN passed every comparison
        check_threshold(scores, math.nan)
    with pytest.raises(ValueError, match="scores"):
        check_threshold({})
    with pytest.raises(ValueError, match="NaN"):
        check_threshold({"mean colour": torch.tensor([math.nan, 10.0])})
    assert check_threshold(scores) == max(float(v.max()) for v in scores.values())


# --- 13. chapter 08's curve --------------------------------------------------------------------------


def _point(sigma, recognised=0):
    return {"sigma": sigma, "epsilon": math.inf if sigma == 0 else 1.0 / sigma, "recognised": recognised, "images": 2}


def test_the_curve_names_an_empty_or_careless_sweep():
    with pytest.raises(ValueError, match="points"):  # before: an IndexError
        curve.threshold([], [], "attacker")
    with pytest.raises(ValueError, match="which"):
        curve.threshold([_point(0.0, 2)], [None], "Attacker")
    with pytest.raises(ValueError, match=r"points\[1\]\['sigma'\]"):
        curve.threshold([_point(0.0, 2), _point(math.nan)], [None, None], "attacker")
    with pytest.raises(TypeError, match="points"):
        curve.run_sigmas("0.1", "x")
    with pytest.raises(ValueError, match="delta"):
        curve.sweep_table([_point(0.0, 2)], [None], 1.5)
    assert curve.threshold([_point(0.0, 2), _point(1.0)], [None, None], "attacker") == (0, 1)


def test_run_federation_refuses_a_backend_config_that_is_not_a_mapping():
    from gitutor.federated.flower_engine import run_federation

    with pytest.raises(TypeError, match="backend_config"):
        run_federation(None, None, 2, engine="simulation", backend_config=["num_cpus", 1])
    with pytest.raises(TypeError, match="engine"):
        run_federation(None, None, 2, engine=None)


@pytest.mark.parametrize("name", ["04_stepwise_gradinversion", "08_flower_dp"])
def test_the_recorded_records_pass_the_new_checks(name):
    record = read_record(ROOT / "book" / "recorded" / f"{name}.json")  # profile, runs inside their intervals
    assert record["profile"] in ("quick", "full") and all(verdict(row) for row in record["rows"])


@pytest.mark.parametrize("name, value", [("secagg_k", [0]), ("secagg_k", [2, -1]), ("attacked_clients", 0),
                                         ("utility_clients", 1.5), ("secagg_groups", 0)])
def test_chapter_08_counts_are_refused_when_the_profile_is_made(name, value):
    from gitutor import get_profile

    cfg = get_profile("08_flower_dp", "quick")
    with pytest.raises(ValueError, match=name):
        cfg.replace(**{name: value})


@pytest.mark.parametrize("header, rows, error, match", [
    (["a"], [[float("nan")]], ValueError, r"rows\[0\]\[0\] is nan"),
    (["a", "b"], [[1, float("inf")]], ValueError, r"rows\[0\]\[1\] is inf"),
    ("ab", [[1, 2]], TypeError, "header must be a list"),
    (["a"], "x", TypeError, "rows an iterable of rows"),
    (["a"], ["x"], TypeError, r"rows\[0\] must be a list of cells"),
    (["a"], [[np.float32("nan")]], ValueError, "is nan"), (["a", "b"], [{"a": 1, "b": 2}], TypeError, "got dict"),
    (None, [[1]], TypeError, "header must be a list"), (["a"], [1], TypeError, "got int"),
    (["a", "b"], [[1]], ValueError, r"rows\[0\] has 1 cells")])
def test_a_table_refuses_what_it_would_print_wrongly(header, rows, error, match):
    from gitutor.tables import markdown_table

    with pytest.raises(error, match=match):
        markdown_table(header, rows)


def test_local_dp_refuses_a_sensitivity_below_what_clipping_allows():
    from gitutor.federated.flower_defenses import defended_round

    model, partitions = _tiny()
    with pytest.raises(ValueError, match="sensitivity must be ≥ clip"):
        defended_round(model, partitions, {"lr": 0.1}, "local-dp", clip=0.01, epsilon=5.0, sensitivity=0.001,
                       client_seeds=[1, 2])
