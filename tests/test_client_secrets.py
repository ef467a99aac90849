"""A client's privacy noise is seeded by the client alone: nothing the server sends or knows can
regenerate it (the threat model of chapter 08; issue: the noise was once seeded from the server's config)."""
from __future__ import annotations

import pytest

pytest.importorskip("flwr")
pytest.importorskip("opacus")

import torch  # noqa: E402

from gitutor.federated.client_secrets import client_secrets, draw_seed  # noqa: E402
from gitutor.federated.flower import federated_round  # noqa: E402
from gitutor.models import LeNet  # noqa: E402

DP = {"lr": 0.1, "noise-multiplier": 1.0, "max-grad-norm": 1.0}


def _setting(clients=2, size=12):
    torch.manual_seed(0)
    model = LeNet(2, 1, size, activation="tanh")
    gen = torch.Generator().manual_seed(1)
    partitions = [(torch.rand(2, 1, size, size, generator=gen), torch.tensor([0, 1])) for _ in range(clients)]
    return model, partitions


def _updates(model, partitions, config=DP, client_seeds=None):
    updates, _ = federated_round(model, partitions, config, client_seeds=client_seeds)
    start = list(model.parameters())
    return {u.partition: torch.cat([d.flatten() for d in u.update(start)]) for u in updates}


def test_the_noise_follows_the_clients_secrets_not_the_server():
    model, partitions = _setting()
    first = _updates(model, partitions, client_seeds=[11, 12])
    again = _updates(model, partitions, client_seeds=[11, 12])
    other = _updates(model, partitions, client_seeds=[21, 22])
    assert all(torch.equal(first[k], again[k]) for k in first)        # a client's own secret repeats its run
    assert all(not torch.allclose(first[k], other[k]) for k in first)  # same server messages, other secrets
    assert not torch.allclose(first[0], first[1])                      # clients share no noise
    default = _updates(model, partitions)                                # secrets from the operating system
    assert all(not torch.allclose(default[k], first[k]) for k in first)


@pytest.mark.parametrize("key", ["seed", "noise-seed", "client-seed"])
def test_a_server_config_that_seeds_the_clients_is_refused(key):
    model, partitions = _setting()
    with pytest.raises(ValueError, match=key):
        federated_round(model, partitions, DP | {key: 0})


def test_secrets_are_checked_and_each_draw_is_fresh():
    model, partitions = _setting()
    with pytest.raises(ValueError, match="client_seeds"):
        federated_round(model, partitions, DP, client_seeds=[1])
    with pytest.raises(ValueError, match=r"client_seeds\[1\]"):
        federated_round(model, partitions, DP, client_seeds=[1, -2])
    assert client_secrets(3, seed=5) == client_secrets(3, seed=5) != client_secrets(3, seed=6)
    assert len(set(client_secrets(4))) == 4
    assert draw_seed(7, 1) != draw_seed(7, 2) and draw_seed(7, 1) != draw_seed(8, 1)
    with pytest.raises(ValueError, match="seed"):
        client_secrets(2, seed=-1)


def test_the_draw_count_is_the_clients_own_so_a_replayed_round_gets_fresh_noise():
    """The DP-SGD seed follows the client's own count of its draws (in its Context state), not the server's
    round number: the same message answered twice is noised twice, differently."""
    from types import SimpleNamespace

    from flwr.app import RecordDict

    from gitutor.federated.client_secrets import next_draw

    context = SimpleNamespace(state=RecordDict())
    draws = [next_draw(context) for _ in range(3)]
    assert draws == [1, 2, 3] and len({draw_seed(5, d) for d in draws}) == 3
    assert next_draw(SimpleNamespace(state=RecordDict())) == 1   # a new client starts over (its own count)
