"""Chapter 08's Flower defenses do what Flower says, seen from the book's recording server.

Each test runs a tiny federation (LeNet at 12 px, 2–4 clients, one FedSGD round) in-process: every
message goes through Flower's wire format to Flower's own strategy wrappers, client mods and SecAgg+
workflow. The reference for each client is the no-defense run: FedSGD is deterministic, so the raw
update a client would send is known exactly, and what each defense did to it can be measured.
"""
import math
import os

import numpy as np
import pytest
import torch

pytest.importorskip("flwr", reason="the fl extra: pip install -e '.[fl]'")

from gitutor.federated.dp import epsilon as dp_epsilon  # noqa: E402
from gitutor.federated.flower import federated_round  # noqa: E402
from gitutor.federated.flower_defenses import (  # noqa: E402
    DEFENSES,
    client_rng_mod,
    clip_update,
    defended_round,
)
from gitutor.federated.flower_engine import task_identity  # noqa: E402
from gitutor.models import LeNet  # noqa: E402

LR, SEEDS = 0.1, [11, 22, 33, 44]


def _setting(sizes=(2, 2, 2), seed=0):
    torch.manual_seed(seed)
    model = LeNet(2, 1, 12, activation="tanh")
    gen = torch.Generator().manual_seed(seed + 1)
    partitions = [(torch.rand(n, 1, 12, 12, generator=gen), torch.arange(n) % 2) for n in sizes]
    return model, partitions


def _norm(tensors):
    return math.sqrt(sum(float(t.double().pow(2).sum()) for t in tensors))


def _flat(tensors):
    return torch.cat([t.flatten().double() for t in tensors])


def _raw(view_none):
    """partition -> the raw update Δ_k of the no-defense run."""
    return {u.partition: view_none.update(u) for u in view_none.updates}


def _weighted_mean(view, replies, partitions):
    """FedAvg of the given per-client parameters (weights: examples), as flat float64."""
    sizes = {k: len(labels) for k, (_, labels) in enumerate(partitions)}
    total = sum(sizes[u.partition] for u in replies)
    return sum(_flat(u.arrays) * sizes[u.partition] for u in replies) / total


def test_no_defense_records_what_federated_round_records():
    model, partitions = _setting()
    view = defended_round(model, partitions, {"lr": LR}, client_seeds=SEEDS[:3])
    plain, _ = federated_round(model, partitions, {"lr": LR})
    assert view.noise_by == "none" and view.sigma == 0 and view.clipped is None
    assert view.guarantee.level == "none" and view.guarantee.epsilon is None
    twins = {u.partition: u for u in plain}
    for update in view.updates:
        assert all(torch.equal(a, b) for a, b in zip(update.arrays, twins[update.partition].arrays))
    assert torch.allclose(_flat(view.aggregates[0]), _weighted_mean(view, view.updates, partitions), atol=1e-6)


def test_secagg_plus_aggregate_equals_the_fedavg_average_and_no_update_is_recorded():
    model, partitions = _setting(sizes=(1, 2, 3))  # unequal: FedAvg weights 1/6, 2/6, 3/6
    plain = defended_round(model, partitions, {"lr": LR}, client_seeds=SEEDS[:3])
    secure = defended_round(model, partitions, {"lr": LR}, "secagg+", client_seeds=SEEDS[:3])
    assert secure.updates == [] and secure.clipped is None and secure.guarantee.level == "none"
    got, want = _flat(secure.aggregates[0]), _flat(plain.aggregates[0])
    bound = 3 * (16 / 2**22) * 3 / 6  # n · quantisation step · max N_k / Σ N_k
    assert (got - want).abs().max() <= bound
    spread = min((_flat(u.arrays) - want).abs().max() for u in plain.updates)
    assert spread > 100 * bound  # the aggregate is the average, not one client's parameters
    unweighted = sum(_flat(u.arrays) for u in plain.updates) / 3
    assert (got - unweighted).abs().max() > 100 * bound  # and it is weighted by examples, as FedAvg
    assert all(torch.equal(a, b) for a, b in zip(secure.starts[0], plain.starts[0]))


def test_server_side_clipping_server_holds_raw_and_clipped_updates_and_noises_only_the_aggregate():
    model, partitions = _setting(sizes=(2, 2, 2, 2))
    clip, z = 0.02, 2.0
    raw = _raw(defended_round(model, partitions, {"lr": LR}, client_seeds=SEEDS))
    assert min(_norm(d) for d in raw.values()) > clip  # clipping is active for every client
    view = defended_round(model, partitions, {"lr": LR}, "central-dp-server-clipping", clip=clip,
                          noise_multiplier=z, client_seeds=SEEDS, server_seed=5)
    for update in view.updates:  # the server received each raw update
        assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(view.update(update), raw[update.partition]))
    for update in view.clipped:  # it clipped them itself, without noise
        delta = view.update(update)
        assert _norm(delta) <= clip * (1 + 1e-5)
        want = clip_update(raw[update.partition], clip)
        assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(delta, want))
    noise = _flat(view.aggregates[0]) - _weighted_mean(view, view.clipped, partitions)
    assert view.sigma == pytest.approx(z * clip / 4) and view.noise_by == "server"
    assert float(noise.std()) == pytest.approx(view.sigma, rel=0.05)
    assert abs(float(noise.mean())) < 5 * view.sigma / math.sqrt(noise.numel())


def test_client_side_clipping_server_receives_clipped_unnoised_updates():
    model, partitions = _setting(sizes=(2, 2, 2))
    clip, z = 0.02, 1.0
    raw = _raw(defended_round(model, partitions, {"lr": LR}, client_seeds=SEEDS[:3]))
    view = defended_round(model, partitions, {"lr": LR}, "central-dp-client-clipping", clip=clip,
                          noise_multiplier=z, client_seeds=SEEDS[:3], server_seed=6)
    assert view.clipped == view.updates
    for update in view.updates:
        delta = view.update(update)
        assert _norm(delta) <= clip * (1 + 1e-5)
        want = clip_update(raw[update.partition], clip)
        assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(delta, want))
    noise = _flat(view.aggregates[0]) - _weighted_mean(view, view.updates, partitions)
    assert float(noise.std()) == pytest.approx(z * clip / 3, rel=0.05)


def test_local_dp_mod_adds_noise_of_the_stated_scale_to_the_clipped_update():
    model, partitions = _setting(sizes=(2, 2))
    clip, eps, delta = 0.02, 0.8, 1e-5
    raw = _raw(defended_round(model, partitions, {"lr": LR}, client_seeds=SEEDS[:2]))
    view = defended_round(model, partitions, {"lr": LR}, "local-dp", clip=clip, epsilon=eps,
                          delta=delta, client_seeds=SEEDS[:2])
    sigma = 2 * clip * math.sqrt(2 * math.log(1.25 / delta)) / eps  # s = 2C by default
    assert view.sigma == pytest.approx(sigma) and view.noise_by == "client" and view.clipped is None
    # the ε its noise gives over the one round, from the book's one accountant (Opacus RDP), not the mod's ε
    stated = dp_epsilon(sigma / (2 * clip), 1.0, 1, delta)
    assert (view.guarantee.level, view.guarantee.epsilon, view.guarantee.delta) == ("client", stated, delta)
    for update in view.updates:
        noise = _flat(view.update(update)) - _flat(clip_update(raw[update.partition], clip))
        assert float(noise.std()) == pytest.approx(sigma, rel=0.05)
        assert abs(float(noise.mean())) < 5 * sigma / math.sqrt(noise.numel())
    half = defended_round(model, partitions, {"lr": LR}, "local-dp", clip=clip, epsilon=eps,
                          delta=delta, sensitivity=clip, client_seeds=SEEDS[:2])
    noise = _flat(half.update(half.updates[0])) - _flat(clip_update(raw[half.updates[0].partition], clip))
    assert float(noise.std()) == pytest.approx(sigma / 2, rel=0.05)


def test_flowers_mods_run_without_their_per_reply_info_lines_and_keep_flowers_level(caplog):
    """LocalDpMod logs two INFO lines per reply (hundreds on a page, in every Ray actor's stderr, where
    the in-process run's quiet block does not reach): the book's wrapper silences Flower's INFO lines
    inside the mod only, keeps its warnings, and leaves Flower's logger as it found it."""
    import logging
    from types import SimpleNamespace

    from flwr.common.logger import FLOWER_LOGGER

    from gitutor.federated.flower_defenses import _zero_safe_mod

    def chatty(msg, ctxt, call_next):
        FLOWER_LOGGER.info("LocalDpMod: parameters are clipped")
        FLOWER_LOGGER.warning("a warning stays")
        return call_next(msg, ctxt)

    failed = SimpleNamespace(has_error=lambda: True)  # an error reply goes straight to Flower's mod
    caplog.set_level(logging.INFO, logger=FLOWER_LOGGER.name)
    assert _zero_safe_mod(chatty)(SimpleNamespace(), None, lambda *_: failed) is failed
    messages = [r.getMessage() for r in caplog.records]
    assert "a warning stays" in messages and not [m for m in messages if "LocalDpMod" in m]
    assert FLOWER_LOGGER.level == logging.INFO


def test_no_defense_lets_the_server_seed_a_clients_noise():
    model, partitions = _setting(sizes=(2, 2))
    run = lambda **kw: defended_round(model, partitions, {"lr": LR}, "local-dp", clip=0.02, **kw)
    np.random.seed(0)
    first = run(client_seeds=SEEDS[:2], server_seed=0)
    np.random.seed(1)  # the server's process-wide generator, reseeded: nothing changes for the clients
    second = run(client_seeds=SEEDS[:2], server_seed=1)
    twins = {u.partition: u for u in second.updates}
    for a in first.updates:
        assert all(torch.equal(x, y) for x, y in zip(a.arrays, twins[a.partition].arrays))
    other = run(client_seeds=[5, 6], server_seed=0)  # other client secrets: other noise
    assert not torch.equal(first.updates[0].arrays[0], {u.partition: u for u in other.updates}[
        first.updates[0].partition].arrays[0])
    fresh = [run(server_seed=0) for _ in range(2)]  # secrets from the OS: never the same twice
    assert not torch.equal(fresh[0].updates[0].arrays[0], fresh[1].updates[0].arrays[0])
    state = np.random.get_state()[1].copy()
    run(client_seeds=SEEDS[:2], server_seed=3)
    assert np.array_equal(np.random.get_state()[1], state)  # the global generator is restored
    for defense in DEFENSES:
        with pytest.raises(ValueError, match="seed"):
            defended_round(model, partitions, {"lr": LR, "seed": 1}, defense)


def test_a_replayed_message_gets_fresh_client_noise():
    """The client's noise seed counts its own draws: a server that resends a round (same model, same
    round number) to subtract the noise gets other noise; a client that restarts from its secret repeats."""
    from flwr.app import Context, Message, RecordDict

    def draw(message, context):
        return float(np.random.normal())

    def context():
        return Context(run_id=1, node_id=1001, node_config={"partition-id": 1}, state=RecordDict(),
                       run_config={})

    mod = client_rng_mod([7, 8])
    with task_identity(1):
        message = Message(RecordDict(), 1001, "train")
    np.random.seed(0)
    ctxt = context()
    first, replay = mod(message, ctxt, draw), mod(message, ctxt, draw)
    np.random.seed(1)
    assert first != replay and mod(message, context(), draw) == first
    assert client_rng_mod([7, 9])(message, context(), draw) != first


def test_guarantees_name_their_level_and_epsilon():
    model, partitions = _setting(sizes=(2, 2))
    central = defended_round(model, partitions, {"lr": LR}, "central-dp-client-clipping", clip=0.1,
                             noise_multiplier=1.5, delta=1e-5, num_rounds=2, client_seeds=SEEDS[:2])
    assert central.guarantee.level == "client" and "NOT the server" in central.guarantee.against
    assert central.guarantee.epsilon == pytest.approx(dp_epsilon(1.5, 1.0, 2, 1e-5))
    assert len(central.aggregates) == 2 and {u.round for u in central.updates} == {1, 2}
    model, unequal = _setting(sizes=(1, 3))
    skewed = defended_round(model, unequal, {"lr": LR}, "central-dp-server-clipping", client_seeds=SEEDS[:2])
    assert skewed.guarantee.epsilon is None  # FedAvg's example weights void the C/n sensitivity
    secure = defended_round(model, unequal, {"lr": LR}, "secagg+", client_seeds=SEEDS[:2])
    assert secure.guarantee.epsilon is None and secure.sigma == 0


def test_uniform_weighting_averages_every_reply_once_and_gives_central_dp_its_epsilon():
    model, unequal = _setting(sizes=(1, 3))  # FedAvg would weigh them 1/4 and 3/4
    plain = defended_round(model, unequal, {"lr": LR}, client_seeds=SEEDS[:2], weighting="uniform")
    unweighted = sum(_flat(u.arrays) for u in plain.updates) / 2
    assert torch.allclose(_flat(plain.aggregates[0]), unweighted, atol=1e-6)
    secure = defended_round(model, unequal, {"lr": LR}, "secagg+", client_seeds=SEEDS[:2], weighting="uniform")
    assert (_flat(secure.aggregates[0]) - unweighted).abs().max() <= 2 * 16 / 2**22
    central = defended_round(model, unequal, {"lr": LR}, "central-dp-client-clipping", clip=0.1,
                             noise_multiplier=1.5, client_seeds=SEEDS[:2], weighting="uniform")
    assert central.guarantee.epsilon == pytest.approx(dp_epsilon(1.5, 1.0, 1, 1e-5))
    assert central.sigma == pytest.approx(1.5 * 0.1 / 2)


@pytest.mark.parametrize("kwargs, name", [
    (dict(defense="fedprox"), "defense"), (dict(weighting="by-size"), "weighting"), (dict(clip=0.0), "clip"),
    (dict(noise_multiplier=-1.0), "noise_multiplier"), (dict(epsilon=0.0), "epsilon"),
    (dict(delta=1.0), "delta"), (dict(sensitivity=-1.0), "sensitivity"), (dict(num_rounds=0), "num_rounds"),
    (dict(client_seeds=[1]), "client_seeds"), (dict(config={"lr": LR, "noise-multiplier": 1.0}), "config"),
    (dict(config={}), "config"),
])
def test_defended_round_rejects_bad_inputs_naming_the_argument(kwargs, name):
    model, partitions = _setting(sizes=(2, 2))
    arguments = {"config": {"lr": LR}, "defense": "local-dp"} | kwargs
    with pytest.raises(ValueError, match=name):
        defended_round(model, partitions, arguments.pop("config"), arguments.pop("defense"), **arguments)


@pytest.mark.skipif(os.environ.get("GITUTOR_RAY_TESTS") != "1",
                    reason="starts Ray (Flower's simulation engine): set GITUTOR_RAY_TESTS=1")
@pytest.mark.parametrize("defense", DEFENSES)
def test_defenses_on_the_simulation_engine_match_in_process(defense):
    """Every defense, run on Flower's simulation engine (Ray), leaves the server what the in-process
    grid does: the same replies per client (raw, clipped or noised), the same clipped updates and the
    same released aggregate (the server's central-DP noise and the clients' own noise are seeded)."""
    model, partitions = _setting(sizes=(2, 2, 2))
    kwargs = dict(clip=0.02, client_seeds=SEEDS[:3], server_seed=0, num_rounds=2)
    simulated = defended_round(model, partitions, {"lr": LR}, defense, engine="simulation", **kwargs)
    in_process = defended_round(model, partitions, {"lr": LR}, defense, **kwargs)
    for sim, inp in zip(simulated.aggregates, in_process.aggregates, strict=True):
        assert torch.allclose(_flat(sim), _flat(inp), atol=1e-6)

    def by_client(replies):
        return {(u.round, u.partition): _flat(u.arrays) for u in replies or []}

    for name in ("updates", "clipped"):
        sim, inp = by_client(getattr(simulated, name)), by_client(getattr(in_process, name))
        assert sim.keys() == inp.keys(), name
        assert all(torch.allclose(sim[k], inp[k], atol=1e-6) for k in sim), name
    if defense != "secagg+":
        assert len(in_process.updates) == 2 * len(partitions)


def test_secagg_aggregate_of_one_image_fedsgd_clients_is_the_gradient_of_their_batch():
    """What SecAgg+ leaves the server for k one-image FedSGD clients (equal weights): −η × the mean
    gradient of the k images, i.e. exactly the update of one client holding the batch of k."""
    from gitutor.federated import client_gradients

    model, partitions = _setting(sizes=(1, 1, 1))
    secure = defended_round(model, partitions, {"lr": LR}, "secagg+", client_seeds=SEEDS[:3], weighting="uniform")
    batch = (torch.cat([x for x, _ in partitions]), torch.cat([y for _, y in partitions]))
    want = _flat([-LR * g for g in client_gradients(model, *batch)])
    got = _flat(secure.aggregates[0]) - _flat(secure.starts[0])
    assert (got - want).abs().max() <= 3 * 16 / 2**22 + 1e-6
