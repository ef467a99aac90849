"""Chapter 08's real systems: a Flower server's recorded updates and Opacus DP-SGD's ε.

The Flower test runs a 2-client, 1-round federation (Flower's ServerApp, ClientApp and FedAvg
strategy, messages through Flower's protobuf wire format) and checks that the FedSGD update the
server recorded is −η · ``client_gradients`` on the client's batch: the book's client model is
what a real framework sends. The Opacus tests check ε against Opacus' own accountant.
"""
import math

import pytest
import torch
from torch import nn

pytest.importorskip("flwr", reason="the fl extra: pip install -e '.[fl]'")
pytest.importorskip("opacus", reason="the fl extra: pip install -e '.[fl]'")

from gitutor.attacks.objectives import total_variation  # noqa: E402
from gitutor.federated import client_gradients  # noqa: E402
from gitutor.federated.dp import epsilon, private_sgd  # noqa: E402
from gitutor.federated.flower import (  # noqa: E402
    federated_round,
    run_federation,
    update_as_gradient,
)
from gitutor.models import LeNet  # noqa: E402

LR = 0.1


def _setting(seed=0, clients=2, size=12):
    torch.manual_seed(seed)
    model = LeNet(2, 1, size, activation="tanh")
    gen = torch.Generator().manual_seed(seed + 1)
    partitions = [(torch.rand(2, 1, size, size, generator=gen), torch.tensor([0, 1]))
                  for _ in range(clients)]
    return model, partitions


def test_recorded_fedsgd_update_equals_client_gradients():
    model, partitions = _setting()
    updates, _ = federated_round(model, partitions, {"lr": LR})
    assert sorted(u.partition for u in updates) == [0, 1] and {u.round for u in updates} == {1}
    start = [p.detach() for p in model.parameters()]
    for update in updates:
        images, labels = partitions[update.partition]
        seen = update_as_gradient(update.update(start), LR)
        sent = client_gradients(model, images, labels)
        assert update.metrics["local-steps"] == 1 and update.metrics["num-examples"] == 2
        for got, want in zip(seen, sent):
            assert torch.allclose(got, want, rtol=1e-4, atol=1e-6)
    moved = [(u.arrays[0] - start[0]).abs().max() for u in updates]
    assert min(moved) > 0  # the clients really trained


def test_fedavg_local_steps_and_rounds_are_recorded():
    model, partitions = _setting(clients=3)
    config = {"lr": LR, "local-epochs": 2, "batch-size": 1}
    updates, history = federated_round(model, partitions, config, num_rounds=2,
                                       evaluate_fn=lambda m: 0.25)
    assert len(updates) == 6 and {u.round for u in updates} == {1, 2}
    assert all(u.metrics["local-steps"] == 4 for u in updates)  # 2 epochs × 2 batches
    assert history == [(0, 0.25), (1, 0.25), (2, 0.25)]


def test_dp_sgd_without_noise_or_clipping_is_the_plain_gradient_step():
    """σ = 0 and a clipping norm no gradient reaches: Opacus' step is −η·∇W (q = 1)."""
    model, partitions = _setting()
    images, labels = partitions[0]
    trained, spent = private_sgd(model, images, labels, lr=LR, steps=1, noise_multiplier=0.0,
                                 max_grad_norm=1e6)
    assert spent["sample_rate"] == 1.0
    sent = client_gradients(model, images, labels)
    for new, old, grad in zip(trained.parameters(), model.parameters(), sent):
        assert torch.allclose((old - new) / LR, grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("sigma, rate, steps", [(1.0, 1.0, 3), (2.0, 0.5, 4)])
def test_epsilon_is_opacus_accountants_value_for_the_steps_taken(sigma, rate, steps):
    from opacus.accountants import RDPAccountant

    model, _ = _setting()
    gen = torch.Generator().manual_seed(3)
    images, labels = torch.rand(4, 1, 12, 12, generator=gen), torch.tensor([0, 1, 0, 1])
    _, spent = private_sgd(model, images, labels, lr=LR, steps=steps, noise_multiplier=sigma,
                           max_grad_norm=1.0, batch_size=int(4 * rate))
    accountant = RDPAccountant()
    accountant.history = spent["history"]  # what the client's PrivacyEngine recorded
    want = accountant.get_epsilon(delta=1e-5)
    got = epsilon(sigma, spent["sample_rate"], spent["steps"], 1e-5)
    assert spent["steps"] == steps and got == pytest.approx(want, rel=1e-9)
    assert math.isfinite(got) and got > 0


def test_known_epsilon_and_monotone_in_sigma():
    # one full-batch Gaussian-mechanism step at σ = 1, δ = 1e-5 (Opacus RDP): ε ≈ 4.73
    assert epsilon(1.0, 1.0, 1, 1e-5) == pytest.approx(4.73, abs=0.01)
    values = [epsilon(s, 1.0, 5, 1e-5) for s in (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)]
    assert values[0] == math.inf
    assert all(a > b for a, b in zip(values, values[1:]))
    assert epsilon(2.0, 1.0, 5, 1e-5, accountant="prv") <= values[3] * 1.01


@pytest.mark.parametrize("kwargs, name", [
    (dict(noise_multiplier=-1.0), "noise_multiplier"),
    (dict(sample_rate=0.0), "sample_rate"),
    (dict(sample_rate=1.5), "sample_rate"),
    (dict(steps=0), "steps"),
    (dict(delta=1.0), "delta"),
    (dict(accountant="moments"), "accountant"),
])
def test_epsilon_rejects_bad_inputs_naming_the_argument(kwargs, name):
    arguments = dict(noise_multiplier=1.0, sample_rate=1.0, steps=1, delta=1e-5) | kwargs
    accountant = arguments.pop("accountant", "rdp")
    with pytest.raises(ValueError, match=name):
        epsilon(**arguments, accountant=accountant)


def test_private_sgd_and_federation_reject_bad_inputs_naming_the_argument():
    model, partitions = _setting()
    images, labels = partitions[0]
    dp = dict(lr=LR, steps=1, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="max_grad_norm"):
        private_sgd(model, images, labels, max_grad_norm=0.0, **dp)
    with pytest.raises(ValueError, match="batch_size"):
        private_sgd(model, images, labels, max_grad_norm=1.0, batch_size=5, **dp)
    with_bn = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(),
                            nn.Linear(200, 2))
    with pytest.raises(ValueError, match="model.*GroupNorm"):
        private_sgd(with_bn, images, labels, max_grad_norm=1.0, **dp)
    with pytest.raises(ValueError, match="engine"):
        run_federation(None, None, 2, engine="ray")
    with pytest.raises(ValueError, match="num_rounds"):
        federated_round(model, partitions, {"lr": LR}, num_rounds=0)
    with pytest.raises(ValueError, match="lr"):
        federated_round(model, partitions, {})
    with pytest.raises(ValueError, match="lr"):
        update_as_gradient([torch.zeros(1)], 0.0)


def test_rebuilt_starts_are_the_servers_and_every_round_is_matched_at_its_own_model():
    """08's multi-round adversary: FedAvg's starts rebuilt from the replies equal the server's own, and the
    joint objective over a client's rounds (each at its own round's model) is zero at the client's images
    and not at another client's; a client without replies is refused by name."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp.experiments import attack_rounds, fedavg_starts, held_rounds
    from gitutor.federated.flower_defenses import defended_round

    model, partitions = _setting(clients=3)
    partitions = [(x[:1], y[:1]) for x, y in partitions]
    view = defended_round(model, partitions, {"lr": LR}, num_rounds=3, client_seeds=[1, 2, 3])
    starts = fedavg_starts(model, view.updates)
    assert len(starts) == 3
    for rebuilt, recorded in zip(starts, view.starts):
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(rebuilt, recorded))
    cfg = SimpleNamespace(attack_iterations=2, tv_weight=1e-2, record_every=1, progress=False)
    found = attack_rounds(model, held_rounds(view.updates, starts, 2), partitions[:2], cfg, lr=LR)
    for row, (truth, labels) in zip(found["rows"], partitions):
        assert float(row["objective"](truth, labels).detach()) < 1e-5
    other = found["rows"][0]["objective"](partitions[2][0], partitions[2][1])
    assert float(other.detach()) > 1e-3
    with pytest.raises(ValueError, match="starts holds 2 rounds"):
        held_rounds(view.updates, starts[:2], 2)
    with pytest.raises(ValueError, match="no reply of partition 1"):
        held_rounds([u for u in view.updates if u.partition != 1], starts, 2)
    with pytest.raises(ValueError, match="held names partitions"):
        attack_rounds(model, held_rounds(view.updates, starts, 3), partitions[:2], cfg, lr=LR)


def test_the_server_unrolls_the_local_steps_it_configured():
    """08's FedAvg attack: with E local steps the unrolled objective is zero at the client's image (the
    sanity check of the attack's objective), while reading the update as one gradient is not; with one
    step the two are the same objective, and noise is refused on an update of several steps."""
    from gitutor.chapters.flower_dp import experiments as study
    from gitutor.attacks.unrolled import simulated_update

    model, partitions = _setting(clients=1)
    truth, labels = partitions[0][0][:1], partitions[0][1][:1]
    kwargs = dict(lr=LR, iterations=2, tv_weight=1e-2, seed=0, record_every=1)
    delta = simulated_update(model, truth, labels, lr=LR, epochs=4, batch_size=1, create_graph=False)
    unrolled = study.attack(model, delta, truth, labels, epochs=4, **kwargs)
    read = study.attack(model, delta, truth, labels, epochs=4, unroll=False, **kwargs)
    assert float(unrolled["objective"](truth, labels).detach()) < 1e-5
    assert float(read["objective"](truth, labels).detach()) > 1e-4
    one = simulated_update(model, truth, labels, lr=LR, epochs=1, batch_size=1, create_graph=False)
    assert float(study.attack(model, one, truth, labels, **kwargs)["objective"](truth, labels).detach()) < 1e-5
    with pytest.raises(ValueError, match="noise_std"):
        study.attack(model, delta, truth, labels, epochs=4, noise_std=0.1, **kwargs)
    with pytest.raises(TypeError, match="unroll"):
        study.attack(model, delta, truth, labels, epochs=4, unroll="yes", **kwargs)


def test_summary_counts_recognisable_images_at_the_books_threshold_and_budget_curve_flattening():
    from gitutor.chapters.flower_dp.experiments import summarise
    from gitutor.chapters.flower_dp.report import flat_step
    from gitutor.stats import interval

    rows = [{"psnr": p, "ssim": 0.5, "lpips": None, "psnrs": [p], "label_ok": True} for p in (29.9, 30.0, 35.0)]
    found = summarise(rows)
    assert (found["recognised"], found["images"], found["lpips"]) == (2, 3, None)
    curve = {s: interval([m - 0.1, m, m + 0.1]) for s, m in ((50, 20.0), (100, 29.5), (150, 30.2), (200, 30.0))}
    assert flat_step(curve) == 100


def test_defense_run_attacks_what_the_server_holds_under_central_dp_and_local_dp():
    """08's defense study: under client-side clipping the server attacks the clipped, un-noised update;
    under LocalDpMod the noised one and every round at its own model; accuracy has an interval over the test set."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import defenses, faces
    from gitutor.chapters.flower_dp import experiments as study

    data, model = faces.face_data(16), study.chapter_model(16)
    cfg = SimpleNamespace(attacked_clients=2, utility_clients=2, rounds=2, defense_lr=0.2, engine="in-process",
                          central_clip=0.01, central_z=1.0, local_clip=0.01, table_sigma=1.0, delta=1e-5, accountant="rdp",
                          attack_iterations=2, tv_weight=1e-2, record_every=1, progress=False)
    central = defenses.defense_run(model, data, "central-dp-client-clipping", cfg)
    view = central["view"]
    held = [view.update(u) for u in view.updates if u.round == 1 and u.partition < 2]
    assert all(math.sqrt(sum(float(t.pow(2).sum()) for t in d)) <= 0.01 * (1 + 1e-5) for d in held)
    assert len(central["round1"]["rows"]) == 2 and central["held"] is None
    assert central["accuracy"].n == len(data["test_y"]) == len(central["outcomes"])
    local = defenses.defense_run(model, data, "local-dp", cfg)
    assert sorted(local["held"]) == [0, 1] and len(local["held"][0]) == 2
    assert local["view"].guarantee.level == "client"
    # the ε the page compares: add/remove adjacency, LocalDpMod at the table's matched z = σ/2 = 0.5
    # adds noise std 2zC, the Gaussian mechanism at multiplier 1 there, as DP-SGD at σ = 1
    assert local["view"].sigma == pytest.approx(2 * defenses.matched_local_z(1.0) * 0.01)
    assert local["epsilon"] == pytest.approx(epsilon(1.0, 1.0, 2, 1e-5))
    assert local["epsilon"] < local["view"].guarantee.epsilon  # replacement at z = 0.5: a larger ε
    assert central["epsilon"] == central["view"].guarantee.epsilon


@pytest.mark.parametrize("sigma, error", [(0.0, ValueError), (-1.0, ValueError), (float("nan"), ValueError),
                                          ("1", TypeError)])
def test_matched_local_z_refuses_what_is_not_a_noise_multiplier(sigma, error):
    from gitutor.chapters.flower_dp import defenses

    with pytest.raises(error, match="sigma"):
        defenses.matched_local_z(sigma)


def test_face_data_enlarges_the_test_set_and_alternates_the_clients_classes():
    """08's data: test_per_class of each class in the server's test set, disjoint from the training
    images, which alternate face / non-face so that the attacked clients (taken from the front) hold both."""
    from gitutor.chapters.flower_dp import faces as study
    from gitutor.controls import RECOGNISABLE_PSNR

    data = study.face_data(8, test_per_class=50)
    assert data["test_y"].tolist() == [1] * 50 + [0] * 50 and len(data["train_y"]) == 100
    assert data["train_y"][:4].tolist() == [1, 0, 1, 0]
    def rows(x):
        return {tuple(v.flatten().tolist()) for v in x}

    assert not rows(data["test_x"]) & rows(data["train_x"])
    parts = study.attacked_partitions(data, 5, 1)
    assert [int(y) for _, y in parts] == [1, 0, 1, 0, 1]
    flat = study.per_image_control(data["train_x"]) >= RECOGNISABLE_PSNR
    assert int(flat.sum()) == data["flat"] and flat[len(flat) - data["flat"]:].all()
    rest = study.utility_partitions(data, 4, 5)
    assert sum(len(y) for _, y in rest) == 95
    with pytest.raises(ValueError, match="test_per_class"):
        study.face_data(8, test_per_class=100)
    with pytest.raises(ValueError, match="clients × batch"):
        study.attacked_partitions(data, 26, 4)


def test_label_chance_is_the_majority_guess_and_none_when_labels_were_given():
    from gitutor.chapters.flower_dp.experiments import majority_rate, summarise
    from gitutor.chapters.flower_dp.report import label_text

    assert majority_rate([torch.tensor([1]), torch.tensor([0]), torch.tensor([1])]) == pytest.approx(2 / 3)
    assert majority_rate([torch.tensor([1, 0])]) is None
    rows = [{"psnr": 20.0, "ssim": 0.5, "lpips": None, "psnrs": [20.0], "label_ok": ok,
             "truth_labels": torch.tensor([y])} for ok, y in ((True, 1), (True, 0), (False, 1), (True, 1))]
    found = summarise(rows)
    assert (found["label_rate"], found["label_chance"]) == (0.75, 0.75)
    assert label_text(found) == "75% (chance 75%)"
    assert label_text(summarise([r | {"truth_labels": torch.tensor([1, 0])} for r in rows])) == "given"


def _sweep_point(sigma, epsilon, correct):
    from gitutor.stats import success_interval

    outcomes = [True] * correct + [False] * (100 - correct)
    return {"sigma": sigma, "epsilon": epsilon, "outcomes": outcomes,
            "accuracy_interval": success_interval(outcomes)}


def test_smallest_accuracy_row_judges_the_claim_by_the_paired_difference_and_states_chance():
    """The row carries the smallest ε's accuracy with its interval, says where it lies against chance,
    and judges "strict DP costs utility" consistent only when the paired loss is resolved."""
    from gitutor.chapters.flower_dp.accuracy import smallest_accuracy_row
    from gitutor.results.verdicts import verdict_text

    plain = _sweep_point(0.0, math.inf, 85)
    row = smallest_accuracy_row([plain, _sweep_point(1.0, 19.1, 84), _sweep_point(12.0, 1.07, 35)])
    assert row["this_run"] == 0.35 and row["low"] < 0.35 < row["high"] and row["n"] == 100
    assert row["claim_outcome"] == "consistent" and "below chance" in row["setting"]
    assert "σ = 12" in row["setting"] and "ε = 1.07 per example" in row["setting"]
    assert "**consistent**" in verdict_text({"quantity": "q", "differences": "d"} | row)
    same = smallest_accuracy_row([plain, _sweep_point(12.0, 1.07, 85)])
    assert same["claim_outcome"] == "not resolved" and "above chance" in same["setting"]


def _tiny_attack_setting():
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import experiments as study

    model = study.chapter_model(12)
    gen = torch.Generator().manual_seed(3)
    partitions = [(torch.rand(1, 1, 12, 12, generator=gen), torch.tensor([k % 2])) for k in range(3)]
    deltas = {k: [-LR * g for g in client_gradients(model, *p)] for k, p in enumerate(partitions)}
    cfg = SimpleNamespace(attack_iterations=4, tv_weight=1e-2, record_every=2, progress=False, restarts=3,
                          lti_hidden=8, lti_epochs=2, lti_lr=1e-3, lti_copies=2)
    return model, partitions, study.attack_deltas(model, deltas, partitions, cfg, lr=LR), cfg


def test_restarts_keep_the_start_with_the_lowest_objective_never_the_psnr():
    from gitutor.chapters.flower_dp import strongest
    from gitutor.chapters.flower_dp.experiments import attack_gradient

    model, _, single, cfg = _tiny_attack_setting()
    kept = strongest.restarted(model, single, cfg)
    for row, first in zip(kept["rows"], single["rows"]):
        tries = [first] + [attack_gradient(model, first["gradient"], first["truth"], first["truth_labels"],
                                           iterations=4, tv_weight=1e-2, record_every=2,
                                           seed=row["partition"] + strongest.RESTART_STRIDE * r) for r in (1, 2)]
        def whole(t):  # what each start minimised: matching + λ_TV · TV
            return t["matching"] + 1e-2 * float(total_variation(t["images"]))
        assert whole(row) == pytest.approx(min(whole(t) for t in tries))
    with pytest.raises(ValueError, match="restarts"):
        strongest.restarted(model, single, type(cfg)(**{**vars(cfg), "restarts": 0}))
    assert sorted(strongest.psnr_curve(kept)) == [2, 4]


def test_defense_transform_clips_then_adds_noise_of_the_stated_std():
    from gitutor.chapters.flower_dp.strongest import defense_transform

    grads = [torch.full((100, 100), 1.0), torch.full((10,), 1.0)]
    clipped = defense_transform(0.5, 0.0, torch.Generator())(grads)
    assert math.sqrt(sum(float(g.pow(2).sum()) for g in clipped)) == pytest.approx(0.5)
    noised = defense_transform(None, 2.0, torch.Generator().manual_seed(0))(grads)
    assert float((noised[0] - grads[0]).std()) == pytest.approx(2.0, rel=0.05)


def test_learned_inversion_and_the_envelopes_pick_by_what_each_may_know():
    """LTI returns one scored row per client with its gradient distance; the attacker's envelope keeps
    the lowest gradient distance per client, the oracle the highest PSNR, and each counts its wins."""
    from gitutor.chapters.flower_dp import strongest

    model, _, single, cfg = _tiny_attack_setting()
    aux = (torch.rand(6, 1, 12, 12, generator=torch.Generator().manual_seed(5)), torch.tensor([0, 1] * 3))
    g = strongest.train_lti(model, aux, 1, cfg, clip=1.0, noise_std=0.1)
    lti = strongest.learned_inversion(model, single, g)
    assert len(lti["rows"]) == 3 and all(0 <= r["matching"] <= 2 for r in lti["rows"])
    found = strongest.envelope({"IG": single, "rounds": None, "LTI": lti}, single)
    for i, row in enumerate(found["attacker"]["rows"]):
        def whole(r, i=i):  # what the reference attack minimised: matching + λ_TV · TV
            return r["matching"] + single["rows"][i]["tv_weight"] * float(total_variation(r["images"]))
        assert row["criterion"] == pytest.approx(min(whole(single["rows"][i]), whole(lti["rows"][i])))
    best = [max(single["rows"][i]["psnr"], lti["rows"][i]["psnr"]) for i in range(3)]
    assert [r["psnr"] for r in found["oracle"]["rows"]] == best
    assert sum(found["wins"].values()) == 3 and set(found["wins"]) == {"IG", "LTI"}
    with pytest.raises(ValueError, match="aux"):
        strongest.train_lti(model, (aux[0][:1], aux[1][:1]), 1, cfg)


def _dp_setting(sigma=0.5, clip=2.0):
    """A DP-SGD sweep point built from the tiny attack (its own runs as every round's) and the
    profile fields :func:`dp_sgd_strongest` reads."""
    from types import SimpleNamespace

    model, _, single, cfg = _tiny_attack_setting()
    cfg = SimpleNamespace(**vars(cfg), max_grad_norm=clip, lr=LR)
    aux = torch.rand(6, 1, 12, 12, generator=torch.Generator().manual_seed(5))
    data = {"test_x": aux, "test_y": torch.tensor([0, 1] * 3)}
    return model, data, single | {"sigma": sigma, "held": {}}, cfg


def test_each_sigmas_lti_is_trained_through_that_sigmas_dp_sgd_step_and_the_oracle_covers_one_start(
        monkeypatch):
    """One σ of the sweep: LTI learns from gradients clipped to C with noise σ·C (the server's units),
    the attacker's pick never drops below the restarts' gradient distance, and the oracle is the best
    PSNR of all four adversaries — the one-start run included."""
    from gitutor.chapters.flower_dp import strongest

    seen, train = [], strongest.train_lti
    monkeypatch.setattr(strongest, "train_lti", lambda *a, **k: seen.append(k) or train(*a, **k))
    every, tuned = {}, []  # the every-round attack needs a federation's rounds: the tiny attack's own runs
    monkeypatch.setattr(strongest, "every_round",
                        lambda model, point, *a, tv_weight: every.update(run=point, tv=tv_weight) or point)
    monkeypatch.setattr(strongest, "tuned_tv_weight",
                        lambda *a, **k: tuned.append(k) or {"tv_weight": 0.03, "psnr": {0.03: 20.0}})
    for sigma in (0.5, 3.0):
        model, data, point, cfg = _dp_setting(sigma, clip=2.0)
        found = strongest.dp_sgd_strongest(model, data, point, cfg)
        assert seen[-1]["clip"] == 2.0 and seen[-1]["noise_std"] == pytest.approx(2.0 * sigma)
        # the prior weight is chosen through the same defense, and the every-round attack runs at it
        assert tuned[-1]["clip"] == 2.0 and tuned[-1]["noise_std"] == pytest.approx(2.0 * sigma)
        assert every["tv"] == 0.03 and found["tuning"]["tv_weight"] == 0.03
    assert found["single"] is point and found["rounds"] is every["run"]
    for i, row in enumerate(found["oracle"]["rows"]):
        tries = [found[k]["rows"][i]["psnr"] for k in ("single", "restarts", "rounds", "lti")]
        assert row["psnr"] == max(tries)
        assert found["attacker"]["rows"][i]["matching"] <= found["restarts"]["rows"][i]["matching"]
    # the one-start run is a candidate of its own: with restarts that scored worse, the oracle keeps it,
    # while the attacker still takes the restarts (restart 0 ties with it)
    from gitutor.chapters.flower_dp.experiments import summarise

    def worse(by):
        return lambda *a, **k: summarise([r | {"psnr": r["psnr"] * by} for r in point["rows"]])
    monkeypatch.setattr(strongest, "restarted", worse(0.9))
    monkeypatch.setattr(strongest, "learned_inversion", worse(0.8))
    found = strongest.adversaries(model, point, worse(0.7)(), None, cfg)
    assert [r["psnr"] for r in found["oracle"]["rows"]] == [r["psnr"] for r in point["rows"]]
    assert found["wins"] == {"IG, restarts": 3, "IG, one start": 0, "IG, every round": 0, "LTI": 0}
    two = point | {"rows": [r | {"truth": r["truth"].repeat(2, 1, 1, 1)} for r in point["rows"]]}
    with pytest.raises(ValueError, match="point"):
        strongest.dp_sgd_strongest(model, data, two, cfg)


def _psnr_point(sigma, psnrs):
    return {"sigma": sigma, "rows": [{"partition": k, "psnrs": [v]} for k, v in enumerate(psnrs)]}


def test_the_sweep_skips_only_the_sigmas_where_one_start_recovers_every_client_above_its_controls(
        monkeypatch):
    from gitutor.chapters.flower_dp import strongest

    monkeypatch.setattr(strongest, "dp_sgd_strongest", lambda model, data, p, cfg, seed=0: {"ran": p["sigma"]})
    controls = {"mean colour": torch.tensor([12.0, 14.0, 11.0]), "thumbnail": torch.tensor([20.0, 36.0, 18.0])}
    points = [_psnr_point(0.0, [40, 41, 42]),        # every client recovered, above its controls: skipped
              _psnr_point(0.01, [40, 29.9, 42]),     # one client below 30 dB: run
              _psnr_point(0.1, [40, 35, 42]),        # client 1 under its own thumbnail control (36 dB): run
              _psnr_point(1.0, [45, 45, 45])]        # recovered, but the decision table's σ: run
    along = strongest.sweep_strongest(None, None, points, controls, None, keep=1.0)
    assert along == [None, {"ran": 0.01}, {"ran": 0.1}, {"ran": 1.0}]
    assert strongest.sweep_strongest(None, None, points[:1], controls, None) == [None]
    with pytest.raises(ValueError, match="keep"):
        strongest.sweep_strongest(None, None, points, controls, None, keep=2.0)
    with pytest.raises(ValueError, match="controls"):
        strongest.recovers_every_client(_psnr_point(0.0, [40, 40, 40, 40]), controls)


def _curve_point(sigma, eps, one_start, attacker=None, oracle=None, n=5):
    """A sweep point whose one-start IG recognises ``one_start`` photographs, and its envelope run
    (None: not run) recognising ``attacker`` / ``oracle``."""
    point = {"sigma": sigma, "epsilon": eps, "recognised": one_start, "images": n}
    found = None if attacker is None else {"attacker": {"recognised": attacker}, "oracle": {"recognised": oracle}}
    return point, found


def _curve(*pairs):
    return [p for p, _ in pairs], [f for _, f in pairs]


def test_the_threshold_comes_from_the_envelope_and_is_a_bound_at_the_sweeps_edge():
    """The σ from which no photograph is recognisable: a bound (0, b] when b is the smallest σ > 0 run,
    a bracket (a, b] inside, σ > the largest when that still recognises one; a σ skipped because one
    start recovered everything counts as recognising; a recovery above the bracket moves it."""
    from gitutor.chapters.flower_dp import curve

    inf = float("inf")
    points, along = _curve(_curve_point(0.0, inf, 5), _curve_point(0.01, 5.5e4, 0, 0, 2),
                           _curve_point(1.0, 3.0, 0, 0, 0), _curve_point(12.0, 1.07, 0, 0, 0))
    assert curve.threshold_sigma_text(points, along) == "(0, 0.01]"
    assert curve.threshold_text(points, along) == "≥ 5.5e+04"
    assert curve.threshold_sigma_text(points, along, "oracle") == "(0.01, 1]"
    assert curve.threshold_text(points, along, "oracle") == "[3, 5.5e+04)"
    along[2] = {"attacker": {"recognised": 1}, "oracle": {"recognised": 1}}  # σ = 1 still leaks
    assert curve.threshold_sigma_text(points, along) == "(1, 12]"
    along[3] = {"attacker": {"recognised": 0}, "oracle": {"recognised": 4}}
    assert curve.threshold_sigma_text(points, along, "oracle") == "> 12"
    assert curve.threshold_text(points, along, "oracle") == "< 1.07"
    skipped, _ = _curve(_curve_point(0.0, inf, 5), _curve_point(0.1, 655, 5), _curve_point(1.0, 3.0, 0, 0, 0))
    assert curve.threshold_sigma_text(skipped, [None, None, along[1]]) == "(0.1, 1]"
    quiet, found = _curve(_curve_point(0.0, inf, 0, 0, 0), _curve_point(1.0, 3.0, 0, 0, 0))
    assert curve.threshold_sigma_text(quiet, found).startswith("not located")
    with pytest.raises(ValueError, match="along"):
        curve.threshold_sigma_text(points, along[:2])
    with pytest.raises(ValueError, match="which"):
        curve.threshold(points, along, "best")

def test_the_sweep_table_and_figure_show_both_envelopes_where_run_and_say_where_not():
    import matplotlib

    matplotlib.use("Agg")
    from gitutor.chapters.flower_dp import curve
    from gitutor.chapters.flower_dp.experiments import summarise
    from gitutor.stats import interval, success_interval

    def summary(psnrs):
        return summarise([{"psnr": p, "ssim": 0.0, "lpips": None, "psnrs": [p], "label_ok": True}
                          for p in psnrs])

    def point(sigma, psnrs):
        return summary(psnrs) | {"sigma": sigma, "epsilon": 10.0 / (sigma + 1e-3),
                                 "accuracy_interval": success_interval([True] * 8 + [False] * 2)}

    points = [point(0.0, [40, 41, 42]), point(1.0, [6, 7, 8])]
    run = {"attacker": summary([9, 10, 11]), "oracle": summary([12, 13, 31]), "rounds": summary([9, 9, 9]),
           "curve": {50: interval([5.0, 6.0]), 100: interval([5.5, 6.0])}}
    table = curve.sweep_table(points, [None, run], 1e-5)
    psnr, rest = table.split("\n\n")  # two tables, one line per σ in each, σ first in both
    (psnr_header, _, skipped, ran), (rest_header, _, skipped_rest, ran_rest) = (
        psnr.splitlines(), rest.splitlines())
    assert psnr_header.count("|") == curve.SWEEP_PSNR_COLUMNS + 1 and "(dB)" in psnr_header
    assert rest_header.startswith("| σ | recognisable") and rest_header.endswith("| test accuracy |")
    assert skipped.startswith("| 0 |") and skipped_rest.startswith("| 0 |") and ran_rest.startswith("| 1 |")
    assert "not run | not run" in skipped and "3 / — / — of 3" in skipped_rest
    assert "10.0 [" in ran and "18.7 [" in ran and "0 / 0 / 1 of 3" in ran_rest and "50 of 100" in ran_rest
    assert curve.run_sigmas(points, [None, run]) == "1"
    fig = curve.epsilon_figure(points, [None, run], 30.0, 20.0, 0.5)
    assert any(t.get_text() == "envelopes\nnot run" for t in fig.axes[0].texts)
    assert "oracle envelope (upper bound)" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_defenses_leaving_the_same_updates_share_one_run_and_the_swept_ones_are_the_sweeps(monkeypatch):
    """Both central-DP clippings hand the server bitwise the same clipped updates: their adversaries run
    once; a defense whose updates differ in one entry runs its own; DP-SGD's and LocalDpMod's entries are
    the sweeps' runs passed in."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import strongest

    _, _, single, cfg = _tiny_attack_setting()
    cfg = SimpleNamespace(**vars(cfg), defense_lr=0.1, local_clip=0.01, central_clip=0.1, batch_iterations=7)
    calls, every = [], []
    monkeypatch.setattr(strongest, "train_lti", lambda *a, **k: "g")
    monkeypatch.setattr(strongest, "adversaries",
                        lambda model, s, rounds, *a, **k: calls.append((s, rounds)) or {"of": s})
    monkeypatch.setattr(strongest, "attack_rounds",
                        lambda model, held, batches, cfg, **k: every.append((held, batches, k)) or "every round")

    def copy(summary, bump=0.0):
        rows = [r | {"gradient": [g.clone() for g in r["gradient"]]} for r in summary["rows"]]
        rows[-1]["gradient"][0][0] += bump
        return summary | {"rows": rows}

    runs = {"none": {"round1": single},
            "central-dp-server-clipping": {"round1": copy(single)},
            "central-dp-client-clipping": {"round1": copy(single)}}
    held, batches = {0: ["round 1", "round 2"]}, ["group 0"]
    aggregates = {2: copy(single, bump=1e-3) | {"held": held, "batches": batches}}
    data, swept = {"test_x": None, "test_y": None}, {"dp-sgd": {"dp": 1}, "local-dp": {"local": 1}}
    best = strongest.strongest_by_defense(None, data, runs, aggregates, swept, cfg)
    assert len(calls) == 3 and best["dp-sgd"] == {"dp": 1} and best["local-dp"] == {"local": 1}
    assert best["central-dp-client-clipping"] is best["central-dp-server-clipping"]
    # SecAgg+ leaves the same group's aggregate every round: its adversaries include the every-round
    # attack at the batch budget; the un-noised single-client rows do not run it
    assert [rounds for _, rounds in calls] == [None, "every round", None]
    assert every == [(held, batches, {"lr": 0.1, "seed": 0, "iterations": 7})]
    runs["central-dp-client-clipping"]["round1"] = copy(single, bump=1e-6)
    calls.clear()
    best = strongest.strongest_by_defense(None, data, runs, aggregates, swept, cfg)
    assert len(calls) == 4 and best["central-dp-client-clipping"]["of"] is runs["central-dp-client-clipping"]["round1"]


def test_secagg_aggregates_hold_every_rounds_aggregate_at_its_own_model():
    """A SecAgg+ group federates for every round: the server holds each round's aggregate against that
    round's start — round 1's is the batch's FedSGD step (−Δ/η = the batch gradient, up to SecAgg+'s
    quantisation), each later start is the previous start plus its aggregate — and the round-1 attack
    runs the batch budget."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import defenses, faces
    from gitutor.chapters.flower_dp import experiments as study

    data, model = faces.face_data(12, test_per_class=10), study.chapter_model(12)
    cfg = SimpleNamespace(secagg_k=[2], secagg_groups=2, rounds=3, defense_lr=0.1, engine="in-process",
                          attack_iterations=2, batch_iterations=3, tv_weight=1e-2, record_every=1, progress=False)
    found = defenses.secagg_aggregates(model, data, cfg)[2]
    assert [r["iterations"] for r in found["rows"]] == [3, 3] and len(found["batches"]) == 2
    for g, rounds in found["held"].items():
        assert len(rounds) == 3
        images, labels = found["batches"][g]
        assert torch.equal(images, found["rows"][g]["truth"])
        start, delta = rounds[0]
        for d, want in zip(delta, client_gradients(model, images, labels)):
            assert torch.allclose(-d / 0.1, want, atol=1e-4, rtol=1e-3)
        for (s0, d0), (s1, _) in zip(rounds, rounds[1:]):
            assert all(torch.allclose(a + b, c, atol=1e-6) for a, b, c in zip(s0, d0, s1))


def test_the_envelope_scores_a_batch_by_the_reference_objective_at_its_best_label_order():
    """A batch row's images are stored in the truth's order, so the attacker's criterion for another
    candidate is the reference objective at the lowest over the orders of that row's labels — never at
    the reference's own label order."""
    from gitutor.chapters.flower_dp import strongest
    from gitutor.chapters.flower_dp.experiments import summarise

    truth = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(0))

    def objective(images, labels):  # lowest when the labels come in the order (1, 0)
        return torch.tensor(0.1 if labels.tolist() == [1, 0] else 0.9)

    def row(objective_, matching, used):
        return {"psnr": 20.0, "ssim": 0.5, "lpips": None, "psnrs": [20.0, 20.0], "label_ok": True,
                "images": truth, "truth": truth, "truth_labels": torch.tensor([0, 1]), "used": used,
                "objective": objective_, "matching": matching, "tv_weight": 0.0}

    reference = summarise([row(objective, 0.5, torch.tensor([0, 1]))])
    other = summarise([row(lambda *a: torch.tensor(0.0), 0.0, torch.tensor([0, 1]))])
    found = strongest.envelope({"every round": reference, "other": other}, reference)
    assert found["wins"] == {"every round": 0, "other": 1} and found["attacker"]["rows"][0]["matching"] == pytest.approx(0.1)


def test_the_envelope_and_the_restarts_rank_by_the_whole_objective_at_the_references_prior_weight(
        monkeypatch):
    """Under noise a candidate fitted to the noise can match the updates better than a smooth one; the
    attacker ranks by what its attack minimised — the reference's matching term + its λ_TV · TV — so at
    the server's λ_TV the smooth candidate wins, and at λ_TV = 0 the noisy one. The restarts keep the
    start of the lowest whole objective the same way."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import strongest
    from gitutor.chapters.flower_dp.experiments import summarise

    generator = torch.Generator().manual_seed(0)
    truth = torch.full((1, 1, 8, 8), 0.5)
    noisy = torch.rand(1, 1, 8, 8, generator=generator)  # TV ≈ 2/3, the smooth one's 0

    def objective(images, labels):  # the noisy candidate matches a little better
        return torch.tensor(0.40 if float(total_variation(images)) > 0.1 else 0.45)

    def row(images, weight):
        return {"psnr": 20.0, "ssim": 0.5, "lpips": None, "psnrs": [20.0], "label_ok": True,
                "images": images, "truth": truth, "truth_labels": torch.tensor([0]),
                "used": torch.tensor([0]), "objective": objective,
                "matching": float(objective(images, None)), "tv_weight": weight, "partition": 0}

    for weight, winner in ((1.0, "smooth"), (0.0, "fitted to the noise")):
        reference = summarise([row(truth, weight)])
        found = strongest.envelope(
            {"smooth": reference, "fitted to the noise": summarise([row(noisy, weight)])}, reference
        )
        assert found["wins"][winner] == 1
        want = float(objective(found["attacker"]["rows"][0]["images"], None))
        assert found["attacker"]["rows"][0]["matching"] == pytest.approx(want)
    # the restarts: restart 0 is the run fitted to the noise, restart 1 the smooth one
    cfg = SimpleNamespace(restarts=2, record_every=50)
    for weight, kept in ((1.0, truth), (0.0, noisy)):
        monkeypatch.setattr(strongest, "attack_gradient", lambda *a, w=weight, **k: row(truth, w))
        first = summarise([row(noisy, weight) | {"gradient": None, "iterations": 5}])
        assert torch.equal(strongest.restarted(None, first, cfg)["rows"][0]["images"], kept)


def test_the_envelope_ranks_every_start_of_the_restarts_by_its_own_criterion(monkeypatch):
    """Review N4: the restarts keep a start by round 1's objective at round 1's λ_TV; the envelope, at the
    reference's λ_TV, sees all the starts (``"starts"``), so a start the first ranking dropped can be kept.
    The oracle looks at every start too."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import strongest
    from gitutor.chapters.flower_dp.experiments import summarise

    generator = torch.Generator().manual_seed(0)
    truth = torch.full((1, 1, 8, 8), 0.5)
    noisy = torch.rand(1, 1, 8, 8, generator=generator)

    def objective(images, labels):  # the noisy start matches a little better
        return torch.tensor(0.40 if float(total_variation(images)) > 0.1 else 0.45)

    def row(images, weight, psnr):
        return {"psnr": psnr, "ssim": 0.5, "lpips": None, "psnrs": [psnr], "label_ok": True,
                "images": images, "truth": truth, "truth_labels": torch.tensor([0]),
                "used": torch.tensor([0]), "objective": objective,
                "matching": float(objective(images, None)), "tv_weight": weight, "partition": 0,
                "gradient": None, "iterations": 5}

    # round 1 ranks at λ_TV = 0: the noisy start (restart 0) is kept; the smooth restart 1 is not
    monkeypatch.setattr(strongest, "attack_gradient", lambda *a, **k: row(truth, 0.0, 30.0))
    cfg = SimpleNamespace(restarts=2, record_every=50)
    restarts = strongest.restarted(None, summarise([row(noisy, 0.0, 10.0)]), cfg)
    assert torch.equal(restarts["rows"][0]["images"], noisy) and len(restarts["rows"][0]["starts"]) == 2
    # the reference ranks at λ_TV = 1 and matches worse than either start: the smooth start wins
    reference = summarise([row(truth, 1.0, 20.0) | {"objective": lambda *a: torch.tensor(0.9), "matching": 0.95}])
    found = strongest.envelope({"reference": reference, "IG, restarts": restarts}, reference)
    assert found["wins"] == {"reference": 0, "IG, restarts": 1}
    assert found["attacker"]["rows"][0]["psnr"] == 30.0 and found["oracle"]["rows"][0]["psnr"] == 30.0


def test_the_attackers_choices_read_no_truth_labels_or_order(monkeypatch):
    """Review S1/S2: the envelope scores every candidate at the reference's labels (a candidate's own
    round-1 label may be wrong where the rounds' mean reads it right), and the restarts rank by each
    start's own matching (computed before its images were put in the photographs' order for scoring),
    never by the objective re-evaluated at the truth-ordered images."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import strongest
    from gitutor.chapters.flower_dp.experiments import summarise

    flat = torch.full((1, 1, 4, 4), 0.5)  # TV 0: only the matching term ranks

    def objective(images, labels):  # right label 1 matches better
        return torch.tensor(0.2 if labels.tolist() == [1] else 0.9)

    def row(used, matching, **extra):
        return {"psnr": 20.0, "ssim": 0.5, "lpips": None, "psnrs": [20.0], "label_ok": True, "images": flat,
                "truth": flat, "truth_labels": torch.tensor([1]), "used": torch.tensor([used]),
                "objective": objective, "matching": matching, "tv_weight": 1.0, "partition": 0, **extra}

    reference = summarise([row(1, 0.5)])  # the every-round run: label 1, matching 0.5
    wrong_label = summarise([row(0, 0.9) | {"objective": lambda *a: torch.tensor(0.9)}])
    found = strongest.envelope({"every round": reference, "LTI": wrong_label}, reference)
    # at the reference's label the LTI image scores 0.2 < 0.5: kept (at its own label it scored 0.9)
    assert found["wins"] == {"every round": 0, "LTI": 1}
    assert found["attacker"]["rows"][0]["matching"] == pytest.approx(0.2)
    # restarts: start 0 matched 0.3 at its own order, start 1 0.6; the objective re-evaluated at the
    # (truth-ordered) images says the opposite, and must not decide
    monkeypatch.setattr(strongest, "attack_gradient", lambda *a, **k: row(1, 0.6))
    first = summarise([row(1, 0.3) | {"gradient": None, "iterations": 5,
                                      "objective": lambda images, labels: torch.tensor(9.0)}])
    kept = strongest.restarted(None, first, SimpleNamespace(restarts=2, record_every=50))
    assert kept["rows"][0]["matching"] == 0.3


def test_localdpmod_at_noise_multiplier_z_states_its_epsilon_under_add_remove():
    """The LocalDpMod sweep: the mod's ε set from z makes Flower's own noise std z·s per coordinate
    (s = 2C); the ε the point states is under add/remove adjacency, the DP-SGD sweep's relation —
    Opacus' RDP ε of multiplier 2z over the rounds —, while the run's own guarantee (replacement,
    sensitivity 2C) is that of multiplier z; a z that is not a positive number is refused by name."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import defenses, faces
    from gitutor.chapters.flower_dp import experiments as study
    from gitutor.federated.dp import epsilon

    data, model = faces.face_data(12), study.chapter_model(12)
    cfg = SimpleNamespace(attacked_clients=1, utility_clients=1, rounds=2, defense_lr=0.1, engine="in-process",
                          local_clip=0.01, delta=1e-5, table_sigma=1.0, accountant="rdp", attack_iterations=1, tv_weight=1e-2,
                          record_every=1, progress=False)
    point = defenses.local_dp_point(model, data, 0.7, cfg)
    view = point["run"]["view"]
    assert view.sigma == pytest.approx(0.7 * 2 * 0.01, rel=1e-9)
    assert point["epsilon"] == pytest.approx(epsilon(1.4, 1.0, 2, 1e-5), rel=1e-9)
    assert view.guarantee.epsilon == pytest.approx(epsilon(0.7, 1.0, 2, 1e-5), rel=1e-9)
    assert point["sigma"] == 0.7 and len(point["held"][0]) == 2
    for bad, error in ((0.0, ValueError), ("1", TypeError), (math.nan, ValueError)):
        with pytest.raises(error, match="noise_multiplier"):
            defenses.local_dp_point(model, data, bad, cfg)

def test_dp_sgd_point_states_a_whole_clients_epsilon_and_localdpmod_at_z_half_sigma_matches_it():
    """DP-SGD's sweep point: ε per example (multiplier σ) and, for its largest client of k images as a
    whole, group privacy of the full-batch Gaussian mechanism (multiplier σ/k); LocalDpMod at z = σ/2
    (``matched_local_z``) states DP-SGD's per-example ε over the same rounds — the decision table's match."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import defenses, faces
    from gitutor.chapters.flower_dp import experiments as study
    from gitutor.federated.dp import epsilon

    data, model = faces.face_data(12), study.chapter_model(12)
    cfg = SimpleNamespace(attacked_clients=1, utility_clients=1, rounds=2, lr=0.1, defense_lr=0.1, max_grad_norm=1.0,
                          engine="in-process", local_clip=0.01, delta=1e-5, table_sigma=1.0, accountant="rdp",
                          attack_iterations=1, tv_weight=1e-2, record_every=1, progress=False, weighting="examples")
    point = study.dp_point(model, data, 1.0, cfg)
    k = point["client_examples"]
    assert k > 1 and point["epsilon"] == pytest.approx(epsilon(1.0, 1.0, 2, 1e-5), rel=1e-9)
    assert point["client_epsilon"] == pytest.approx(epsilon(1.0 / k, 1.0, 2, 1e-5), rel=1e-9)
    assert point["client_epsilon"] > point["epsilon"]
    local = defenses.local_dp_point(model, data, defenses.matched_local_z(1.0), cfg)
    assert local["epsilon"] == pytest.approx(point["epsilon"], rel=1e-9)


def test_clients_to_resolve_is_the_first_all_correct_count_whose_wilson_interval_clears_the_level():
    from gitutor.chapters.flower_dp.report import clients_to_resolve
    from gitutor.stats import success_interval

    n = clients_to_resolve(0.95)
    assert success_interval([True] * n).low >= 0.95 > success_interval([True] * (n - 1)).low
    assert clients_to_resolve(0.5) < n
    for bad in (0.0, 1.0):
        with pytest.raises(ValueError, match="level"):
            clients_to_resolve(bad)


def test_the_label_row_carries_its_interval_and_the_n_that_would_resolve_it():
    """5 of 5 labels right under chapter 01's noise, with the setting saying how many clients would resolve
    it; not comparable with Wang et al.'s λ search (2 classes against many), and the row says why."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp.report import chapter_rows, clients_to_resolve
    from gitutor.results.verdicts import verdict
    from gitutor.stats import interval

    cfg = SimpleNamespace(profile="quick", image_size=32, attack_iterations=200, attacked_clients=5,
                          handwritten_variance=1e-2, max_grad_norm=1.0, delta=1e-5, rounds=10)
    rows = [{"mse": 0.01, "label_ok": True} for _ in range(5)]
    points = [_sweep_point(0.0, math.inf, 85), _sweep_point(12.0, 1.07, 35)]
    epochs = {1: {"ssim": interval([0.9, 0.95]), "rows": [{"psnrs": [40.0]}]},
              5: {"ssim": interval([0.1, 0.2]), "rows": [{"psnrs": [12.0]}, {"psnrs": [14.0]}]}}
    found = chapter_rows(cfg, fedsgd={"rows": rows}, handwritten={"rows": rows, "label_chance": 0.6},
                         points=points, threshold="≥ 5.5e+04", epochs=epochs)
    headline = next(r for r in found if r.get("headline"))  # the claim the chapter judges: E = 5's leak
    assert headline["quantity"].startswith("SSIM after E = 5") and headline["claim_outcome"] == "not resolved"
    label = next(r for r in found if r["quantity"].startswith("label accuracy"))
    assert label["n"] == 5 and label["low"] < 0.95 and label["high"] == 1.0 and label["this_run"] == 1.0
    assert f"n = {clients_to_resolve(0.95)} clients" in label["setting"]
    assert verdict(label) == "not comparable" and "2 classes" in label["not_comparable"]
    rows[0] = {"mse": 0.01, "label_ok": False}
    label = next(r for r in chapter_rows(cfg, fedsgd={"rows": rows}, handwritten={"rows": rows, "label_chance": 0.6},
                                         points=points, threshold="x", epochs=epochs)
                 if r["quantity"].startswith("label accuracy"))
    assert label["this_run"] == 0.8 and label["low"] < 0.8 < label["high"]


def test_the_defense_table_shows_dp_sgd_round_1_and_every_round():
    from gitutor.chapters.flower_dp.decision import defense_table
    from gitutor.chapters.flower_dp.experiments import summarise
    from gitutor.stats import success_interval

    def summary(psnrs):
        return summarise([{"psnr": p, "ssim": 0.1, "lpips": 0.5, "psnrs": [p], "label_ok": True,
                           "truth_labels": torch.tensor([k % 2])} for k, p in enumerate(psnrs)])

    acc = success_interval([True] * 8 + [False] * 2)
    runs = {"none": {"round1": summary([40, 41]), "accuracy": acc}}  # no "rounds": no every-round line
    point = summary([6, 7]) | {"sigma": 1.0, "rounds": summary([8, 9]), "accuracy_interval": acc}
    scores, rest = defense_table(runs, 10, point).split("\n\n")  # two tables: scores, then labels and accuracy
    lines, others = scores.splitlines(), rest.splitlines()
    assert len(lines) == len(others) == 5
    assert [len(t.splitlines()) for t in defense_table(runs, 10).split("\n\n")] == [3, 3]
    assert lines[3].startswith("| Opacus DP-SGD, σ = 1 | round 1's update as received | 6.5 [")
    assert lines[4].startswith("| Opacus DP-SGD, σ = 1 | all 10 rounds' updates, each at its own model | 8.5 [")
    assert "| 0.500 [" in lines[3] and lines[3].endswith("| 0/2 |")
    assert others[0] == "| defense | the server attacks | labels | test accuracy |"
    assert others[3].startswith("| Opacus DP-SGD, σ = 1 | round 1's update as received | 100% (chance 50%) | 0.80 [")



def _decision_inputs(server_delta=1e-5):
    """Two defenses and DP-SGD for the decision and strongest-adversary tables: the undefended run and
    LocalDpMod (the client's noise), each with its attacker's envelope."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp.experiments import summarise
    from gitutor.stats import success_interval

    def summary(psnrs, k=1):
        return summarise([{"psnr": p, "ssim": 0.1, "lpips": None, "psnrs": [p], "label_ok": True,
                           "truth": torch.zeros(k, 1, 4, 4)} for p in psnrs])

    def view(eps, noise_by):
        return SimpleNamespace(noise_by=noise_by, guarantee=SimpleNamespace(epsilon=eps, delta=server_delta))

    outcomes = [True] * 8 + [False] * 2
    runs = {
        "none": {"view": view(None, "none"), "epsilon": None, "accuracy": success_interval(outcomes),
                 "outcomes": outcomes},
        "secagg+": {"view": view(None, "none"), "epsilon": None, "accuracy": success_interval(outcomes),
                    "outcomes": outcomes},
        # LocalDpMod's own guarantee (replacement, 48.8) is not the table's ε (add/remove, 19.1): it is the
        # ε for one example of a client with several images
        "local-dp": {"view": view(48.8, "client"), "epsilon": 19.1,
                     "accuracy": success_interval(outcomes[2:] + [False] * 2), "outcomes": outcomes[2:] + [False] * 2},
    }
    curve = {50: summary([5.0, 6.0])["psnr"], 100: summary([20.0, 21.0])["psnr"]}

    def found(psnrs, wins, k=1, rounds=True):
        return {"restarts": summary(psnrs, k), "rounds": summary(psnrs, k) if rounds else None,
                "lti": summary([9.0, 9.5], k), "attacker": summary(psnrs, k),
                "oracle": summary([p + 1 for p in psnrs], k), "wins": wins, "curve": curve}

    strongest = {
        "none": found([40.0, 42.0], {"IG, restarts": 2, "LTI": 0}, rounds=False),
        "secagg+": found([20.0, 22.0], {"IG, restarts": 1, "IG, every round": 1}, k=2),
        "local-dp": found([6.0, 7.0], {"IG, every round": 2}),
        "dp-sgd": found([6.5, 7.5], {"IG, every round": 1, "LTI": 1}),
    }
    point = {"sigma": 1.0, "epsilon": 19.1, "client_epsilon": 904.0, "client_examples": 12,
             "accuracy_interval": success_interval(outcomes), "outcomes": outcomes}
    return runs, strongest, point


def test_the_decision_table_is_two_tables_that_keep_every_defense_in_one_order():
    """What each defense promises, then what the attacker's envelope left and the accuracy it cost: the
    columns the page reads (recognisable, test accuracy, minus undefended) in one table, each table
    narrow enough for the page's column; δ in the header where every ε shares it."""
    from gitutor.chapters.flower_dp import decision

    runs, strongest, point = _decision_inputs()
    promises, outcome = decision.decision_table(runs, strongest, point, point, 10, 1e-5).split("\n\n")
    promises, outcome = promises.splitlines(), outcome.splitlines()
    assert promises[0] == ("| defense | who must be trusted | ε over 10 rounds (δ = 1e-05, Opacus RDP, add/remove) "
                           "| ε holds for | adversary kept (per client) |")
    assert outcome[0] == ("| defense | PSNR (dB) | recognisable | test accuracy (chance 0.5) | minus undefended |")
    names = ["none (FedAvg)", "SecAgg+ (k = 2)", "LocalDpMod", "Opacus DP-SGD, σ = 1"]
    for lines in (promises, outcome):
        assert [line.split(" | ")[0][2:] for line in lines[2:]] == names
    assert promises[2] == ("| none (FedAvg) | the server (it holds every update) | none (no DP) | — "
                           "| IG, restarts 2/2 |")
    # each defense's ε at its own level, and at the other's: a whole client under DP-SGD (group privacy),
    # one example of a multi-image client under LocalDpMod (its replacement ε)
    assert promises[4].endswith("| 19.1 | one client's update, zero-out, the server included; one example of a "
                                "client with several images: ε = 48.8 | IG, every round 2/2 |")
    assert promises[5].endswith("| 19.1 | one example, zero-out, the server included; a client of 12 "
                                "images as a whole (zero-out): ε = 904 | IG, every round 1/2; LTI 1/2 |")
    assert outcome[2].startswith("| none (FedAvg) | 41.0 [")
    assert outcome[2].endswith("| 2/2 | 0.80 [0.49, 0.94] | — |")
    assert outcome[4].endswith("| 0/2 | 0.60 [0.31, 0.83] | -0.20 [-0.50, 0.10] |")
    assert outcome[5].endswith("| 0/2 | 0.80 [0.49, 0.94] | 0.00 [0.00, 0.00] |")
    runs, strongest, point = _decision_inputs(server_delta=1e-6)  # δ differs: each ε carries its own
    promises = decision.decision_table(runs, strongest, point, point, 10, 1e-5).split("\n\n")[0].splitlines()
    assert "| ε over 10 rounds (Opacus RDP, add/remove) |" in promises[0]
    assert "| 19.1 (δ = 1e-06) |" in promises[4] and "| 19.1 (δ = 1e-05) |" in promises[5]


def test_the_strongest_table_is_the_adversaries_then_the_envelopes_ending_on_the_flat_step():
    from gitutor.chapters.flower_dp import decision

    _, strongest, _ = _decision_inputs()
    adversaries, envelopes = decision.strongest_table(strongest, 1.0, 2).split("\n\n")
    adversaries, envelopes = adversaries.splitlines(), envelopes.splitlines()
    assert adversaries[0] == "| defense | IG, restarts | IG, every round | LTI |"
    assert envelopes[0] == ("| defense | attacker's envelope | recognisable | oracle envelope "
                            "| IG flat from step |")
    assert adversaries[2].startswith("| none (FedAvg) | 41.0 [") and "| — |" in adversaries[2]
    assert envelopes[3].startswith("| SecAgg+, k = 2 | 21.0 [")
    assert envelopes[3].endswith("| 0/2 | 22.0 [9.3, 34.7] | not flat by 100 |")  # the last column: the flat step
    assert [line.split(" | ")[0] for line in adversaries[2:]] == [line.split(" | ")[0] for line in envelopes[2:]]


def test_the_chapters_figures_fit_the_page_column_with_text_at_body_size_and_legends_off_the_data():
    """Every figure is at most FIGURE_WIDTH wide (a 612 px column shows it at about its own size), every
    text at least the body's size, and the legends sit above the axes, covering no interval."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.text import Text

    from gitutor.chapters.flower_dp import curve, report
    from gitutor.chapters.flower_dp.experiments import summarise
    from gitutor.stats import interval, success_interval
    from gitutor.viz import BODY_PT

    def summary(psnrs):
        return summarise([{"psnr": p, "ssim": 0.5, "lpips": None, "psnrs": [p], "label_ok": True} for p in psnrs])

    steps = {name: {s: interval([s / 5, s / 4, s / 3]) for s in (50, 100, 150, 200)} for name in ("a", "b")}
    studies = {k: summary([40 - k, 35 - k, 30]) for k in (1, 2, 5)}
    acc = success_interval([True] * 8 + [False] * 2)
    points = [summary([40, 41]) | {"sigma": s, "epsilon": e, "accuracy_interval": acc}
              for s, e in ((0.0, math.inf), (0.01, 5.5e4), (1.0, 19.1))]
    run = {"attacker": summary([9, 10]), "oracle": summary([12, 13]), "rounds": summary([9, 9])}
    images = torch.rand(3, 1, 8, 8)
    figures = {
        "budget": report.budget_figure(steps, 30.0),
        "degradation": report.degradation_figure(studies, studies, 30.0, studies),
        "epsilon": curve.epsilon_figure(points, [None, run, run], 30.0, 20.0, 0.5),
        "grid": report.reconstruction_grid(images, {"central DP, server-side clipping": images}, "a title " * 12,
                                           columns=["σ = 0.001"] * 3),
    }
    for name, fig in figures.items():
        assert fig.get_size_inches()[0] <= report.FIGURE_WIDTH + 1e-9, name
        fig.canvas.draw()
        texts = [t for t in fig.findobj(Text) if t.get_text() and t.get_visible()]
        assert min(t.get_fontsize() for t in texts) >= BODY_PT, name
        width = fig.get_window_extent().width  # what a tight bounding box may add: nothing past the figure
        assert all(t.get_window_extent().x1 <= width + 1 and t.get_window_extent().x0 >= -1 for t in texts), name
    for name in ("budget", "degradation", "epsilon"):
        ax = figures[name].axes[0]
        legend = ax.get_legend().get_window_extent()
        assert legend.y0 >= ax.get_window_extent().y1, f"{name}: the legend overlaps its axes"
    grid = figures["grid"]
    assert grid.axes[0].yaxis.label.get_text() == "private"
    assert grid.axes[3].yaxis.label.get_text() == "central DP,\nserver-side\nclipping"

def test_trained_outcomes_are_the_federations_last_round_on_the_clients_training_images():
    """The network choice never reads the server's test set: one outcome per training image after cfg.rounds
    undefended rounds; the sweep's federation is the same code, so its accuracy history ends on the share of
    those outcomes; the test set is the default, and another set is refused by name."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import experiments as study
    from gitutor.chapters.flower_dp import faces

    data, model = faces.face_data(12, test_per_class=10), study.chapter_model(12)
    cfg = SimpleNamespace(attacked_clients=2, utility_clients=2, rounds=2, lr=0.05, engine="in-process")
    outcomes = study.trained_outcomes(model, data, cfg)  # on the clients' training images
    assert len(outcomes) == len(data["train_y"]) and all(isinstance(v, bool) for v in outcomes)
    updates, history, again = study.federation(model, data, cfg, {"lr": 0.05}, on="train")
    assert again == outcomes and history[-1][1] == sum(outcomes) / len(outcomes) and len(updates) == 4 * 2
    on_test = study.federation(model, data, cfg, {"lr": 0.05})[2]
    assert len(on_test) == 20
    with pytest.raises(ValueError, match="on"):
        study.federation(model, data, cfg, {"lr": 0.05}, on="validation")


def test_the_longer_attack_starts_where_the_one_start_run_did_and_runs_more_steps():
    from gitutor.chapters.flower_dp import strongest
    from gitutor.chapters.flower_dp.experiments import attack_gradient

    model, _, single, cfg = _tiny_attack_setting()
    longer = strongest.longer_attack(model, single, cfg, factor=3)
    for row, first in zip(longer["rows"], single["rows"]):
        assert max(s for s, _ in row["result"].snapshots) == 12 and row["partition"] == first["partition"]
        again = attack_gradient(model, first["gradient"], first["truth"], first["truth_labels"], iterations=12,
                                tv_weight=1e-2, seed=first["partition"], record_every=2)
        assert torch.equal(row["images"], again["images"])  # the one-start run's seed: the same start
    for bad in (1, 2.0, True):
        with pytest.raises(ValueError, match="factor"):
            strongest.longer_attack(model, single, cfg, factor=bad)


def test_restarts_and_the_longer_attack_repeat_the_rows_own_budget_not_the_profiles():
    """SecAgg+'s aggregates run ``cfg.batch_iterations`` steps: their restarts and budget check must too."""
    from gitutor.chapters.flower_dp import experiments as study
    from gitutor.chapters.flower_dp import strongest

    model, partitions, _, cfg = _tiny_attack_setting()
    deltas = {k: [-LR * g for g in client_gradients(model, *p)] for k, p in enumerate(partitions)}
    own = study.attack_deltas(model, deltas, partitions, cfg, lr=LR, iterations=6)
    assert all(r["iterations"] == 6 and max(s for s, _ in r["result"].snapshots) == 6 for r in own["rows"])
    kept = strongest.restarted(model, own, cfg)
    assert all(r["iterations"] == 6 and max(s for s, _ in r["result"].snapshots) == 6 for r in kept["rows"])
    longer = strongest.longer_attack(model, own, cfg, factor=2)
    assert all(max(s for s, _ in r["result"].snapshots) == 12 for r in longer["rows"])


def test_the_budget_check_runs_at_the_attackers_threshold():
    from gitutor.chapters.flower_dp import curve

    inf = float("inf")
    points, along = _curve(_curve_point(0.0, inf, 5), _curve_point(0.001, 5.5e6, 5),
                           _curve_point(0.003, 6.1e5, 0, 0, 1), _curve_point(0.01, 5.5e4, 0, 0, 0))
    assert curve.budget_point(points, along) is points[2]
    quiet, found = _curve(_curve_point(0.0, inf, 0, 0, 0), _curve_point(1.0, 3.0, 0, 0, 0))
    assert curve.budget_point(quiet, found) is None
    leaks, found = _curve(_curve_point(0.0, inf, 5), _curve_point(0.01, 5.5e4, 0, 2, 2))
    assert curve.budget_point(leaks, found) is None

def test_every_round_is_judged_at_every_noisy_sigma_by_its_paired_difference():
    from gitutor.chapters.flower_dp import curve
    from gitutor.chapters.flower_dp.experiments import summarise

    def summary(psnrs):
        return summarise([{"psnr": p, "ssim": 0.0, "lpips": None, "psnrs": [p], "label_ok": True}
                          for p in psnrs])

    def point(sigma, first, mean, prior):
        return summary(first) | {"sigma": sigma}, {"rounds": summary(mean), "prior": summary(prior)}

    points, along = _curve(point(0.0, [40, 41, 42], [20, 22, 21], [9, 9, 9]),
                           point(0.001, [35, 36, 34], [22, 23, 21], [9, 10, 9]),
                           point(0.01, [13, 14, 12], [19, 20, 18.5], [12, 12.5, 12]),
                           point(1.0, [6, 7, 6.5], [6.5, 6.6, 6.4], [6.4, 6.7, 6.5]))
    lines = curve.rounds_gain_table(points, along).splitlines()
    assert len(lines) == 5 and not any(line.startswith("| 0 |") for line in lines)
    assert lines[2].startswith("| 0.001 | -13.0 [") and "| loss | 12.7 [" in lines[2]
    assert lines[3].startswith("| 0.01 | 6.2 [") and "| gain | 7.0 [" in lines[3] and lines[3].endswith("| gain |")
    # σ = 1: the every-round attack is its prior's own sample — the control says so
    assert lines[4].endswith("| not resolved |") and lines[4].count("not resolved") == 2
    along[1] = None  # one start recovered every client there: not run
    assert curve.rounds_gain_table(points, along).splitlines()[2] == "| 0.001 | not run | — | not run | — |"
    with pytest.raises(ValueError, match="σ > 0"):
        curve.rounds_gain_table(points[:1], along[:1])

def test_the_prior_alone_is_the_same_attack_without_its_matching_term(monkeypatch):
    """The control runs each row's own attack (start seed, steps, λ_TV) with a matching term that is 0 with
    its gradient, and the row's reconstruction then moves by TV alone."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import strongest

    model, _, single, cfg = _tiny_attack_setting()
    seen = []
    real = strongest.attack_gradient
    monkeypatch.setattr(strongest, "attack_gradient", lambda *a, **k: seen.append(k) or real(*a, **k))
    single["rows"] = [r | {"tv_weight": 0.5} for r in single["rows"]]
    prior = strongest.prior_alone(model, single, SimpleNamespace(record_every=2), seed=3)
    assert [k["seed"] for k in seen] == [3 + r["partition"] for r in single["rows"]]
    assert all(k["tv_weight"] == 0.5 and k["iterations"] == r["iterations"] for k, r in zip(seen, single["rows"]))
    images = torch.rand(1, 1, 12, 12, requires_grad=True)
    value = seen[0]["objective"](images, torch.tensor([0]))
    value.backward()
    assert float(value.detach()) == 0.0 and not images.grad.any()
    assert len(prior["rows"]) == len(single["rows"])


def test_the_recording_table_sets_every_recorded_row_and_its_verdict_beside_this_runs_number():
    from gitutor.chapters.flower_dp.report import recording_table
    from gitutor.results.verdicts import verdict

    recorded = [{"quantity": "MSE", "setting": "no defense", "this_run": 0.0200, "paper": 0.022, "better": "lower",
                 "unit": "", "differences": "—"},
                {"quantity": "ε", "setting": "DP-SGD", "this_run": "[655, 5.51e+04)", "paper": "x", "unit": "",
                 "differences": "—"}]
    recording = {"provenance": {"commit": "8fe089065d23df1b"}, "rows": recorded}
    mine = [{"quantity": "MSE", "this_run": 0.5}, {"quantity": "only here", "this_run": 1.0}]
    lines = recording_table(mine, recording, None).splitlines()
    assert len(lines) == 4  # the recording's two rows, none of this run's own
    assert lines[2] == f"| MSE | 0.02 | {verdict(recorded[0])} | 0.5 |"
    assert lines[3].startswith("| ε | [655, 5.51e+04) |") and lines[3].endswith("| — |")
    assert "this page is the recording" in recording_table(mine, recording, "recorded")
    assert "no recording in this checkout" in recording_table(mine, None, None)


def test_localdpmods_lti_is_trained_through_the_mod_in_the_servers_units(monkeypatch):
    """Along the LocalDpMod sweep, LTI learns from gradients clipped to C/η with noise σ/η per entry (the
    mod's clipping and noise on Δ, read as −Δ/η at η = defense_lr), and the every-round attack runs at that η."""
    from types import SimpleNamespace

    from gitutor.chapters.flower_dp import strongest

    seen = {}
    monkeypatch.setattr(strongest, "train_lti", lambda *a, **k: seen.setdefault("lti", k) and "g")
    monkeypatch.setattr(strongest, "every_round",
                        lambda model, point, cfg, lr, seed, tv_weight: seen.setdefault("lr", lr))
    monkeypatch.setattr(strongest, "tuned_tv_weight",
                        lambda *a, **k: seen.setdefault("tuning", k) and {"tv_weight": 0.1})
    monkeypatch.setattr(strongest, "adversaries",
                        lambda model, point, rounds, g, cfg, seed=0: {"pair": (rounds, g)})
    monkeypatch.setattr(strongest, "prior_alone", lambda model, rounds, cfg, seed=0: ("prior of", rounds))
    cfg = SimpleNamespace(defense_lr=0.1, local_clip=0.01, lr=0.05)
    point = {"rows": [{"truth": torch.zeros(1, 1, 4, 4)}], "run": {"view": SimpleNamespace(sigma=0.002)}}
    found = strongest.local_dp_strongest(None, {"test_x": None, "test_y": None}, point, cfg)
    assert found["pair"] == (0.1, "g") and found["prior"] == ("prior of", 0.1)
    assert seen["lti"]["clip"] == pytest.approx(0.1) and seen["lti"]["noise_std"] == pytest.approx(0.02)
    assert seen["tuning"]["clip"] == pytest.approx(0.1) and seen["tuning"]["noise_std"] == pytest.approx(0.02)
    assert seen["tuning"]["lr"] == 0.1


def test_the_server_picks_lambda_tv_on_its_own_images_sent_through_the_same_defense_and_rounds(monkeypatch):
    """Under noise the prior weight is chosen per noise level on the server's test images — never an
    attacked client's — each sent through one step at every round's own global model, clipped and
    noised like the clients' updates; the λ_TV of the best mean PSNR is kept (ties: the smaller)."""
    from types import SimpleNamespace

    from gitutor.attacks.unrolled import simulated_update
    from gitutor.chapters.flower_dp import strongest
    from gitutor.federated.flower_defenses import clip_update
    from gitutor.federated.flower_defenses import defended_round

    model, partitions = _setting(clients=2)
    partitions = [(x[:1], y[:1]) for x, y in partitions]
    view = defended_round(model, partitions, {"lr": LR}, num_rounds=2, client_seeds=[1, 2])
    from gitutor.chapters.flower_dp.experiments import fedavg_starts, held_rounds

    starts = fedavg_starts(model, view.updates)
    point = {"held": held_rounds(view.updates, starts, 2)}
    aux = torch.rand(6, 1, 12, 12, generator=torch.Generator().manual_seed(9))
    data = {"test_x": aux, "test_y": torch.tensor([1, 1, 1, 0, 0, 0])}
    calls = []

    score = {0.01: 20.0, 0.1: 25.0, 0.3: 25.0, 1.0: 24.0, 3.0: 40.0}

    def fake_rounds(model, held, parts, cfg, *, lr, seed, tv_weight):
        calls.append((held, parts, tv_weight))
        return {"psnr": SimpleNamespace(mean=score[tv_weight])}

    monkeypatch.setattr(strongest, "attack_rounds", fake_rounds)
    cfg = SimpleNamespace(tv_candidates=[0.01, 0.1, 0.3, 1.0, 3.0], tuning_images=2)
    clip = 0.5
    found = strongest.tuned_tv_weight(model, data, point, cfg, clip=clip, noise_std=0.0, lr=LR)
    # in increasing order until the score turns down (at 1.0): 3.0 is never tried; ties keep the smaller
    assert found == {"tv_weight": 0.1, "psnr": {0.01: 20.0, 0.1: 25.0, 0.3: 25.0, 1.0: 24.0},
                     "at_edge": False}
    rising = strongest.tuned_tv_weight(model, data, point, SimpleNamespace(**{**vars(cfg), "tv_candidates": [0.01, 0.1]}),
                                       clip=clip, noise_std=0.0, lr=LR)
    assert rising["tv_weight"] == 0.1 and rising["at_edge"]
    held, parts, _ = calls[0]
    # the server's own images, one of each class in turn: label 0 (index 3), then label 1 (index 0)
    assert torch.equal(parts[0][0], aux[3:4]) and torch.equal(parts[1][0], aux[0:1])
    assert [int(p[1]) for p in parts] == [0, 1]
    for k, (x, y) in enumerate(parts):
        assert len(held[k]) == len(starts)
        for (start, delta), own in zip(held[k], starts):
            assert start is own
            step = simulated_update(model, x, y, lr=LR, epochs=1, batch_size=1, start=own,
                                    create_graph=False)
            clipped = clip_update([-d / LR for d in step], clip)
            assert all(torch.allclose(d, -LR * c, atol=1e-7) for d, c in zip(delta, clipped))
    noisy = strongest.tuned_tv_weight(model, data, point, cfg, clip=clip, noise_std=0.3, lr=LR)
    assert noisy["tv_weight"] == 0.1
    differs = [(d - e).abs().max() for d, e in zip(calls[-1][0][0][0][1], held[0][0][1])]
    assert max(differs) > 0.01  # noise of std 0.3·η per entry was added
    for bad, match in (({"tv_candidates": []}, "tv_candidates"), ({"tv_candidates": [-1.0]}, "tv_candidates"),
                       ({"tv_candidates": [0.1, 0.01]}, "increasing"), ({"tuning_images": 7}, "count")):
        calls.clear()
        with pytest.raises(ValueError, match=match):
            strongest.tuned_tv_weight(model, data, point, SimpleNamespace(**{**vars(cfg), **bad}),
                                      clip=clip, noise_std=0.0, lr=LR)
        assert not calls


def test_the_sanity_arm_starts_at_the_photograph_and_compares_the_objective_there_with_the_run():
    """The arm reruns each row's attack (its objective, budget, prior weight) from the photograph plus
    small noise; the whole objective (matching + λ_TV · TV) at the photograph and at the reconstruction
    say which one it prefers."""
    from gitutor.attacks.objectives import total_variation
    from gitutor.chapters.flower_dp import strongest
    from gitutor.metrics import psnr

    model, _, single, _ = _tiny_attack_setting()
    single["rows"] = [r | {"tv_weight": 0.05} for r in single["rows"]]
    checks = strongest.sanity_arm(model, single, scale=0.05, seed=4)
    generator = torch.Generator().manual_seed(4)
    for k, row in enumerate(single["rows"]):
        start = (row["truth"] + 0.05 * torch.randn(row["truth"].shape, generator=generator)).clamp(0, 1)
        assert checks["start_psnr"][k] == pytest.approx(float(psnr(start, row["truth"]).mean()))
        arm = checks["arm"]["rows"][k]
        assert arm["tv_weight"] == 0.05 and arm["iterations"] == row["iterations"]
        # the whole objective the attack minimises: matching + λ_TV · TV, at the photograph and the run's end
        def whole(images):
            return float((row["objective"](images, row["used"]) + 0.05 * total_variation(images)).detach())
        assert checks["at_truth"][k] == pytest.approx(whole(row["truth"]))
        assert checks["at_run"][k] == pytest.approx(whole(row["images"]))
        assert checks["at_run"][k] > row["matching"]  # TV > 0 at a reconstruction
    # a few steps from the photograph stay near it; from noise they do not
    assert min(r["psnr"] for r in checks["arm"]["rows"]) > max(r["psnr"] for r in single["rows"])
    assert checks["prefers_run"] == sum(r < t for r, t in zip(checks["at_run"], checks["at_truth"]))
    # the arm's step: signed Adam moves a pixel by at most lr per step, so a small step stays near the start
    lr = 1e-3
    near = strongest.sanity_arm(model, single, scale=0.05, seed=4, lr=lr)
    generator = torch.Generator().manual_seed(4)
    for row, arm in zip(single["rows"], near["arm"]["rows"]):
        start = (row["truth"] + 0.05 * torch.randn(row["truth"].shape, generator=generator)).clamp(0, 1)
        assert float((arm["images"] - start).abs().max()) <= 1.01 * lr * row["iterations"]
        assert float((arm["images"] - start).abs().max()) > 0
    with pytest.raises(ValueError, match="scale"):
        strongest.sanity_arm(model, single, scale=0.0)
    with pytest.raises(ValueError, match="lr"):
        strongest.sanity_arm(model, single, lr=-0.1)
    two = single | {"rows": [r | {"truth": r["truth"].repeat(2, 1, 1, 1)} for r in single["rows"]]}
    with pytest.raises(ValueError, match="summary"):
        strongest.sanity_arm(model, two)


def test_rows_carry_their_prior_weight_and_restarts_repeat_it(monkeypatch):
    """The every-round attack at the server's λ_TV: its rows say which, and a restart or a longer run
    repeats that weight, not the profile's."""
    from gitutor.chapters.flower_dp import strongest

    model, _, single, cfg = _tiny_attack_setting()
    assert all(r["tv_weight"] == cfg.tv_weight for r in single["rows"])
    tuned = single | {"rows": [r | {"tv_weight": 0.07} for r in single["rows"]]}
    weights, attack = [], strongest.attack_gradient
    monkeypatch.setattr(strongest, "attack_gradient",
                        lambda *a, **k: weights.append(k["tv_weight"]) or attack(*a, **k))
    strongest.restarted(model, tuned, cfg)
    strongest.longer_attack(model, tuned, cfg)
    runs = len(single["rows"]) * (cfg.restarts - 1) + len(single["rows"])
    assert weights == [0.07] * runs


def test_identification_ranks_the_clients_photograph_among_the_servers_by_the_matching_term():
    """Without noise the matching term is lowest at the client's own photograph: rank 1 among any other
    photographs; a candidate set that holds the photograph itself ties it (not lower), so still rank 1."""
    from gitutor.chapters.flower_dp import strongest

    model, partitions, single, _ = _tiny_attack_setting()
    others = torch.rand(5, 1, 12, 12, generator=torch.Generator().manual_seed(11))
    assert strongest.identification_ranks(single, others) == [1, 1, 1]
    with_truth = torch.cat([others, partitions[0][0]])
    assert strongest.identification_ranks(single, with_truth)[0] == 1
    # scored by another client's gradient, a photograph ranks below that client's own
    swapped = single | {"rows": [single["rows"][1] | {"truth": partitions[0][0]}]}
    assert strongest.identification_ranks(swapped, torch.cat([others, partitions[1][0]]))[0] >= 2
    with pytest.raises(ValueError, match="candidates"):
        strongest.identification_ranks(single, others[0])
    with pytest.raises(ValueError, match="candidates"):
        strongest.identification_ranks(single, torch.rand(2, 1, 8, 8))


def test_the_headline_judges_geiping_by_the_photographs_recognisable_from_unrolled_updates():
    from gitutor.chapters.flower_dp.report import GEIPING_CLAIM, leak_judgement

    def summary(psnrs):
        return {"rows": [{"psnrs": [p]} for p in psnrs]}

    assert leak_judgement(summary([35.0] * 8), 5)["claim_outcome"] == "consistent"
    assert leak_judgement(summary([12.0] * 8), 5)["claim_outcome"] == "refuted"
    found = leak_judgement(summary([35.0, 41.0, 29.0, 52.0, 31.0]), 5)
    assert found["claim_outcome"] == "not resolved"  # 4 of 5: the Wilson interval holds ½
    assert found["claim_reason"].startswith("4 of 5 photographs recognisable") and "E = 5" in found["claim_reason"]
    assert "several iterations" in GEIPING_CLAIM
    with pytest.raises(ValueError, match="summary"):
        leak_judgement({"rows": []}, 5)
