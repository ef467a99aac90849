"""Flower's own defenses, run against the book's recording server: what the server sees under each.

:func:`defended_round` runs the federation of :func:`gitutor.federated.flower.federated_round` (same
``partitions``, model, config) under one of :data:`DEFENSES`, built as Flower 1.42's documentation shows:

- ``"none"``: ``flwr.serverapp.strategy.FedAvg``.
- ``"central-dp-server-clipping"``: ``DifferentialPrivacyServerSideFixedClipping(FedAvg, z, C, n)``: the
  server receives each raw update, clips it to L2 norm C itself, averages, and adds Gaussian noise of
  std z·C/n to the average (McMahan et al. 2018, "Learning differentially private recurrent language
  models"): client-level (ε, δ) for whoever sees the released model, never against the server.
- ``"central-dp-client-clipping"``: ``DifferentialPrivacyClientSideFixedClipping`` with
  ``flwr.clientapp.mod.fixedclipping_mod`` on each client: the client clips, the server adds the noise.
- ``"local-dp"``: ``flwr.clientapp.mod.LocalDpMod(C, s, ε, δ)``: each client clips its update to C and
  adds noise of std s·√(2 ln(1.25/δ))/ε to every parameter it sends (the Gaussian mechanism, Dwork &
  Roth 2014, Thm A.1, for ε < 1): (ε, δ) per update, against the server too.
- ``"secagg+"``: ``flwr.server.workflow.SecAggPlusWorkflow`` in a ``DefaultWorkflow`` (legacy ``FedAvg``,
  ``LegacyContext``) with ``flwr.client.mod.secaggplus_mod`` on a ``NumPyClient``, as Flower's
  secure-aggregation example (Bell et al. 2020): the server unmasks only the weighted sum.

Client-side randomness (LocalDpMod's noise, SecAgg+'s stochastic rounding: both from NumPy's global
generator) is seeded by the client's own secret (:mod:`~gitutor.federated.client_secrets`) and a count of
its own draws in its ``Context.state`` (:func:`client_rng_mod`): the server can neither seed nor replay
it. Every defense runs in-process and, with ``engine="simulation"``, on Flower's simulation engine.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gitutor.federated.client import check_partitions
from gitutor.federated.client_secrets import check_no_server_seed, check_secrets, client_secrets, draw_seed, next_draw
from gitutor.federated.dp import epsilon as dp_epsilon
from gitutor.federated.flower import ClientUpdate, ModelBuilder, make_client_app, make_server_app, recording_fedavg
from gitutor.federated.flower_engine import quiet_flower, run_federation

__all__ = ["DEFENSES", "WEIGHTINGS", "Guarantee", "ServerView", "client_rng_mod", "clip_update", "defended_round"]

DEFENSES = ("none", "central-dp-server-clipping", "central-dp-client-clipping", "local-dp", "secagg+")
_STATE_KEY = "gitutor.client-rng"
_UNIFORM_KEY = "client-weight"
WEIGHTINGS = ("examples", "uniform")


@dataclass(frozen=True)
class Guarantee:
    """What a defense promises. ``level``: ``"client"`` (central DP: a client's whole data, every round
    composed), ``"update"`` (LocalDpMod: one update, per round) or ``"none"``; ``epsilon``/``delta`` (None
    without DP; ``math.inf`` at z = 0); ``against``: who it protects against; ``source``: the formula or
    accountant it comes from."""

    level: str
    epsilon: float | None
    delta: float | None
    against: str
    source: str


@dataclass(frozen=True)
class ServerView:
    """What the server of :func:`defended_round` sees; tensors as ``model.parameters()``.

    ``starts``: per round, the global parameters the clients trained from. ``updates``: each reply as the
    server received it (:class:`ClientUpdate`: raw under ``"none"`` and server-side clipping, clipped
    under client-side clipping, clipped and noised under LocalDpMod, none under SecAgg+). ``clipped``: the
    clipped, un-noised per-client parameters the server holds (server-side clipping: what it computed
    and averaged; client-side: what it received), else None. ``aggregates``: per round, the new global
    parameters (after the server's noise). ``sigma``: the Gaussian noise's std per coordinate, parameter
    units, on the aggregate (central DP: z·C/n) or on each sent parameter (LocalDpMod), else 0. ``clip``:
    C (None without clipping). ``noise_by``: ``"server"``, ``"client"`` or ``"none"``.
    """

    defense: str
    starts: list
    updates: list
    clipped: list | None
    aggregates: list
    sigma: float
    clip: float | None
    noise_by: str
    guarantee: Guarantee

    def update(self, reply: ClientUpdate) -> list[torch.Tensor]:
        """Δ = W_k − W of a recorded reply, against the parameters of its round."""
        return reply.update(self.starts[reply.round - 1])


def clip_update(update: Sequence[torch.Tensor], clip: float) -> list[torch.Tensor]:
    """Flower's fixed clipping (``compute_clip_model_update``): Δ · min(1, C / ‖Δ‖₂), the norm taken
    over all tensors together (FlatClip, McMahan et al. 2018)."""
    norm = math.sqrt(sum(float(t.double().pow(2).sum()) for t in update))
    return [t * min(1.0, clip / norm) if norm > 0 else t.clone() for t in update]


def client_rng_mod(secrets: Sequence[int]):
    """A Flower client mod (outermost) that runs the client's TRAIN messages with NumPy's global
    generator seeded by ``secrets[partition-id]`` and the client's own draw count (in its ``Context``
    state), restoring the generator after: Flower's LocalDpMod and SecAgg+ draw from it."""
    from flwr.app.message_type import MessageType

    def mod(msg, ctxt, call_next):
        if msg.metadata.message_type != MessageType.TRAIN:
            return call_next(msg, ctxt)
        draws = next_draw(ctxt, _STATE_KEY)
        saved = np.random.get_state()
        secret = secrets[int(ctxt.node_config["partition-id"])]
        seed = draw_seed(secret, draws)  # 63 bits, as 32-bit words for NumPy's legacy generator
        np.random.set_state(np.random.RandomState([seed & 0xFFFFFFFF, seed >> 32]).get_state())
        try:
            return call_next(msg, ctxt)
        finally:
            np.random.set_state(saved)

    return mod


def _tensors(arrays, names) -> list[torch.Tensor]:
    state = arrays.to_torch_state_dict()
    return [state[name].clone() for name in names]


def _recorder(inner, names):
    from flwr.serverapp.strategy import Strategy

    class Recorder(Strategy):
        """Records the round's start, every reply as it arrives, and the released aggregate."""

        def __init__(self):
            super().__init__()
            self.inner, self.starts, self.updates, self.aggregates = inner, [], [], []

        def configure_train(self, server_round, arrays, config, grid):
            self.starts.append(_tensors(arrays, names))
            return self.inner.configure_train(server_round, arrays, config, grid)

        def aggregate_train(self, server_round, replies):
            replies = list(replies)
            for message in replies:
                if not message.has_error():
                    metrics = dict(message.content["metrics"])
                    self.updates.append(ClientUpdate(server_round, int(metrics["partition-id"]),
                                                     _tensors(message.content["arrays"], names), metrics))
            arrays, metrics = self.inner.aggregate_train(server_round, replies)
            if arrays is not None:
                self.aggregates.append(_tensors(arrays, names))
            return arrays, metrics

        def configure_evaluate(self, *args):  # evaluation, summary: the inner strategy's
            return self.inner.configure_evaluate(*args)

        def aggregate_evaluate(self, *args):
            return self.inner.aggregate_evaluate(*args)

        def summary(self):
            self.inner.summary()

    return Recorder()


def _message_run(defense, model, partitions, config, num_rounds, engine, secrets, dp, uniform):
    from flwr.clientapp import ClientApp
    from flwr.clientapp.mod import LocalDpMod, fixedclipping_mod
    from flwr.serverapp.strategy import DifferentialPrivacyClientSideFixedClipping as ClientSide
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping as ServerSide

    count, names = len(partitions), [name for name, _ in model.named_parameters()]
    with quiet_flower():  # FedAvg warns that client-side evaluation is off (on purpose)
        fedavg = recording_fedavg(model, fraction_evaluate=0.0, min_train_nodes=count,
                                  min_available_nodes=count,
                                  weighted_by_key=_UNIFORM_KEY if uniform else "num-examples")
    wrapper = {"central-dp-server-clipping": ServerSide, "central-dp-client-clipping": ClientSide}.get(defense)
    inner = fedavg if wrapper is None else wrapper(fedavg, dp["z"], dp["clip"], count)
    mods = {"central-dp-client-clipping": [fixedclipping_mod],
            "local-dp": [LocalDpMod(dp["clip"], dp["sensitivity"], dp["epsilon"], dp["delta"])]}
    book_client = make_client_app(ModelBuilder(model), partitions, secrets)
    client = ClientApp(mods=[client_rng_mod(secrets)] + mods.get(defense, []))

    @client.train()
    def train(message, context):
        reply = book_client(message, context)
        if uniform:  # every reply weighs 1 in FedAvg's average
            reply.content["metrics"][_UNIFORM_KEY] = 1
        return reply

    recorder = _recorder(inner, names)
    run_federation(make_server_app(recorder, model, num_rounds, config), client, count, engine=engine)
    clipped = {"central-dp-server-clipping": fedavg.updates,
               "central-dp-client-clipping": recorder.updates}.get(defense)
    return recorder.starts, recorder.updates, clipped, recorder.aggregates


def defended_round(model: nn.Module, partitions: Sequence[tuple[torch.Tensor, torch.Tensor]],
                   config: Mapping, defense: str = "none", *, clip: float = 1.0,
                   noise_multiplier: float = 1.0, epsilon: float = 0.5, delta: float = 1e-5,
                   sensitivity: float | None = None, num_rounds: int = 1, engine: str = "in-process",
                   client_seeds: Sequence[int] | None = None, server_seed: int | None = None,
                   secagg_shares: float = 1.0, secagg_threshold: float = 1.0,
                   weighting: str = "examples") -> ServerView:
    """Run the book's Flower federation under ``defense`` and return what its server sees.

    Args:
        model: the initial global model (not modified); partitions: one ``(images, labels)`` per
            client; config: the training config (``lr``, ``local-epochs``, ``batch-size``; no seed,
            no DP-SGD settings), as :func:`~gitutor.federated.flower.federated_round`.
        defense: one of :data:`DEFENSES`; clip: C, the L2 norm a client update is clipped to.
        noise_multiplier: z of central DP (noise std z·C on the sum, z·C/n on the average).
        epsilon, delta: LocalDpMod's per-update (ε, δ); delta is also central DP's δ.
        sensitivity: LocalDpMod's L2 sensitivity s (default 2·C: two clipped updates differ by ≤ 2C).
        num_rounds: federated rounds; engine: ``"in-process"`` or ``"simulation"``.
        client_seeds: each client's own secret (:func:`~gitutor.federated.client_secrets.client_secrets`;
            None: from the operating system); server_seed: seeds the server's central-DP noise (NumPy's
            global generator, restored after; None: fresh entropy).
        secagg_shares, secagg_threshold: ``SecAggPlusWorkflow``'s ``num_shares`` and
            ``reconstruction_threshold`` (floats: fractions of the clients / of the shares).
        weighting: ``"examples"`` (FedAvg: client k weighs N_k, its examples) or ``"uniform"`` (each reply
            weighs 1; only then is a client's sensitivity C/n: Flower's accounted central DP refuses others).

    Returns:
        :class:`ServerView`. Under SecAgg+ the aggregate is FedAvg's weighted average up to the
        quantisation: per coordinate within n·(16/2²²)·max_k N_k/Σ_k N_k (N_k: client k's examples).

    Raises:
        ValueError: naming ``defense``, ``weighting``, ``clip``, ``noise_multiplier``, ``epsilon``, ``delta``,
            ``sensitivity``, ``num_rounds``, ``config`` (a seed, DP-SGD settings, no ``lr``),
            ``client_seeds`` or ``partitions``, before any client runs.
        RuntimeError: if the server did not receive every client's reply.
    """
    for name, value, allowed in (("defense", defense, DEFENSES), ("weighting", weighting, WEIGHTINGS)):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    check_partitions(model, partitions)
    check_no_server_seed(config)
    if "lr" not in config or "noise-multiplier" in config:
        raise ValueError(f"config must set 'lr' and no DP-SGD settings (Opacus DP-SGD is federated_round's), "
                         f"got {dict(config)}")
    sensitivity = 2.0 * clip if sensitivity is None else sensitivity
    dp = {"z": _number("noise_multiplier", noise_multiplier, positive=False), "clip": _number("clip", clip),
          "epsilon": _number("epsilon", epsilon), "delta": _number("delta", delta, below=1.0),
          "sensitivity": _number("sensitivity", sensitivity, positive=False)}
    if isinstance(num_rounds, bool) or not isinstance(num_rounds, int) or num_rounds < 1:
        raise ValueError(f"num_rounds must be an int ≥ 1, got {num_rounds!r}")
    count = len(partitions)
    secrets = client_secrets(count) if client_seeds is None else check_secrets(client_seeds, count)
    global_model = copy.deepcopy(model)
    saved = np.random.get_state()
    np.random.seed(np.random.SeedSequence(server_seed).generate_state(4))  # the server's own noise
    try:
        with quiet_flower():
            if defense == "secagg+":
                from gitutor.federated.flower_secagg import secagg_round

                run = secagg_round(global_model, partitions, config, num_rounds, engine, secrets,
                                   secagg_shares, secagg_threshold, weighting == "uniform")
            else:
                run = _message_run(defense, global_model, partitions, config, num_rounds, engine, secrets, dp,
                                   weighting == "uniform")
    finally:
        np.random.set_state(saved)
    starts, updates, clipped, aggregates = run
    received = len(updates) if defense != "secagg+" else count * len(aggregates)
    if received != count * num_rounds or len(aggregates) != num_rounds:
        raise RuntimeError(f"the server received {received} of {count * num_rounds} client replies "
                           f"({defense}, {engine}): a client failed (Flower logged its error above)")
    equal = weighting == "uniform" or len({len(labels) for _, labels in partitions}) == 1
    return ServerView(defense, starts, updates, clipped, aggregates, *_noise(defense, dp, count, num_rounds, equal))


def _number(name, value, *, positive=True, below=math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0) or value >= below:
        raise ValueError(f"{name} must be a finite number {'>' if positive else '≥'} 0"
                         f"{f' and < {below}' if below < math.inf else ''}, got {value!r}")
    return float(value)


def _noise(defense, dp, count, num_rounds, equal):
    """(sigma, clip, noise_by, guarantee) of a defense, as Flower states them."""
    if defense == "none":
        return 0.0, None, "none", Guarantee("none", None, None, "nobody", "FedAvg: no defense")
    if defense == "secagg+":
        return 0.0, None, "none", Guarantee("none", None, None, "a server that sees only the aggregate (honest-but-"
                                            "curious, fewer colluding parties than the reconstruction threshold): it "
                                            "sees the sum of the sampled clients", "SecAggPlusWorkflow + "
                                            "secaggplus_mod (Bell et al. 2020): no DP, the aggregate is exact")
    if defense == "local-dp":
        sigma = dp["sensitivity"] * math.sqrt(2 * math.log(1.25 / dp["delta"])) / dp["epsilon"]
        return sigma, dp["clip"], "client", Guarantee(
            "update", dp["epsilon"], dp["delta"], "everyone, the server included (per update; rounds compose)",
            "LocalDpMod: σ = s·√(2 ln(1.25/δ))/ε, the Gaussian mechanism (Dwork & Roth 2014, Thm A.1, ε < 1)")
    eps = dp_epsilon(dp["z"], 1.0, num_rounds, dp["delta"]) if equal else None
    return dp["z"] * dp["clip"] / count, dp["clip"], "server", Guarantee(
        "client", eps, dp["delta"], "whoever sees the released model, NOT the server (it holds every clipped update "
        "un-noised)", "Gaussian mechanism on the clipped sum, std z·C (McMahan et al. 2018); ε from Opacus' RDP "
        "accountant, no sampling amplification (all clients every round); None when clients' weights differ")
