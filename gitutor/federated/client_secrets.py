"""Each client's own secret for its privacy noise: nothing the server sends or can derive seeds it.

A client's DP-SGD noise (and its Poisson sampling) must be unpredictable to the server, or the
server regenerates the noise and subtracts it: the guarantee is void. So a client seeds them from a
secret it alone holds, mixed with its own count of draws (fresh noise for every message it answers). By default each client draws its secret from
the operating system (:func:`secrets.randbits`): no one can regenerate the noise and runs do not
repeat. The second input is the client's own count of its draws (:func:`next_draw`), not the server's
round number, so a replayed message gets fresh noise. A simulation that must repeat (the book's pages) passes secrets drawn on the *client side*
from a seed the server never receives (:func:`client_secrets`). Opacus' own alternative is its
secure RNG (``PrivacyEngine(secure_mode=True)``, a cryptographically secure generator from
``torchcsprng``), which cannot be seeded at all.
"""

from __future__ import annotations

import hashlib
import numbers
import secrets
from collections.abc import Mapping, Sequence

import numpy as np

#: Keys of a server's training config that would let it seed (and so regenerate) a client's noise.
SERVER_SEED_KEYS = ("seed", "noise-seed", "client-seed")


def client_secrets(count: int, seed: int | None = None) -> list[int]:
    """``count`` client secrets (ints in [0, 2⁶³)): from the operating system when ``seed`` is
    None, else drawn from ``numpy.random.SeedSequence(seed)`` so that a simulation repeats (the
    seed is the simulation's, held on the clients' side; a server must never receive it).

    Raises:
        ValueError: for ``count`` < 1 or a ``seed`` that is not an int ≥ 0.
    """
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
        raise ValueError(f"count must be an int ≥ 1, got {count!r}")
    if seed is None:
        return [secrets.randbits(63) for _ in range(count)]
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be None or an int ≥ 0, got {seed!r}")
    state = np.random.SeedSequence([int(seed), 0x6C69656E74]).generate_state(
        count, dtype=np.uint64
    )
    return [int(value) >> 1 for value in state]


def check_secrets(client_seeds: Sequence[int], count: int) -> list[int]:
    """The secrets as a list, one int ≥ 0 per client.

    Raises:
        ValueError: naming ``client_seeds`` when its length is not ``count`` or an entry is not an int ≥ 0.
    """
    values = list(client_seeds)
    if len(values) != count:
        raise ValueError(
            f"client_seeds must hold one secret per client ({count}), got {len(values)}"
        )
    for k, value in enumerate(values):
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Integral)
            or value < 0
        ):
            raise ValueError(f"client_seeds[{k}] must be an int ≥ 0, got {value!r}")
    return [int(value) for value in values]


#: Where a client keeps how many noise draws it has made: its own ``Context.state``, never sent.
DRAWS_KEY = "gitutor.client-draws"


def next_draw(context, key: str = DRAWS_KEY) -> int:
    """The client's next draw number (1, 2, …), counted in its own Flower ``context.state`` — not the
    server's round number, which the server sets: a server that re-sent the same round (with the same
    or another model) would otherwise get the same noise twice and cancel it in the difference."""
    from flwr.app import ConfigRecord

    draws = int(context.state[key]["draws"]) + 1 if key in context.state else 1
    context.state[key] = ConfigRecord({"draws": draws})
    return draws


def draw_seed(secret: int, draw: int) -> int:
    """The seed of a client's noise and sampling for its ``draw``-th message: SHA-256 of the secret and
    the client's own draw count (:func:`next_draw`), 63 bits. Without the secret nothing determines it."""
    digest = hashlib.sha256(f"{int(secret)}/{int(draw)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def check_no_server_seed(config: Mapping) -> None:
    """Refuse a server config that carries a seed for the clients (:data:`SERVER_SEED_KEYS`).

    Raises:
        ValueError: naming the key: a client's privacy noise is seeded by the client alone.
    """
    sent = [key for key in SERVER_SEED_KEYS if key in config]
    if sent:
        raise ValueError(
            f"config sets {sent}: a client's DP noise and sampling are seeded by the client "
            "alone (client_seeds), never by anything the server sends"
        )
