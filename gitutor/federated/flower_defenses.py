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
  adds noise of std s·√(2 ln(1.25/δ))/ε_mod to every parameter it sends (the classic Gaussian mechanism's
  calibration, Dwork & Roth 2014, Thm A.1, whose (ε_mod, δ) holds only for ε_mod < 1). The guarantee
  stated is not ε_mod but what that noise gives: Opacus' RDP accountant (:func:`gitutor.federated.dp.epsilon`,
  the accountant of every ε in the book) of this Gaussian mechanism, noise multiplier σ/s, composed over
  the rounds — client level (the client's data, all rounds), against the server too.
- ``"secagg+"``: ``flwr.server.workflow.SecAggPlusWorkflow`` in a ``DefaultWorkflow`` (legacy ``FedAvg``,
  ``LegacyContext``) with ``flwr.client.mod.secaggplus_mod`` on a ``NumPyClient``, as Flower's
  secure-aggregation example (Bell et al. 2020): the server unmasks only the weighted sum.

Client-side randomness (LocalDpMod's noise, SecAgg+'s stochastic rounding: both from NumPy's global
generator) is seeded by the client's own secret (:mod:`~gitutor.federated.client_secrets`) and a count of
its own draws in its ``Context.state`` (:func:`~gitutor.federated.flower.client_rng_mod`): the server can neither seed nor replay
it. Every defense runs in-process and, with ``engine="simulation"``, on Flower's simulation engine.

A client whose update is exactly zero (it did not move: e.g. a step too small to change a float32
parameter) is no error: Flower's fixed clipping divides C by the update's norm and ends in a bare
``ZeroDivisionError``, so where gitutor calls Flower's clippings (``fixedclipping_mod``, ``LocalDpMod``,
``DifferentialPrivacyServerSideFixedClipping``) an update of norm 0 passes the clipping unchanged, as
:func:`clip_update` does, and every other update goes through Flower's own code. LocalDpMod's noise is
still added to it.
"""

from __future__ import annotations

import copy
import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gitutor.checks import check_choice, check_int, check_real
from gitutor.federated.client import check_partitions
from gitutor.federated.client_secrets import (
    check_no_server_seed,
    check_secrets,
    client_secrets,
)
from gitutor.federated.dp import epsilon as dp_epsilon
from gitutor.federated.flower import (
    ClientUpdate,
    ModelBuilder,
    check_config,
    client_rng_mod,
    make_client_app,
    make_server_app,
    recording_fedavg,
)
from gitutor.federated.flower_engine import ENGINES, quiet_flower, run_federation

__all__ = [
    "DEFENSES",
    "WEIGHTINGS",
    "Guarantee",
    "ServerView",
    "client_rng_mod",
    "clip_update",
    "defended_round",
]

DEFENSES = (
    "none",
    "central-dp-server-clipping",
    "central-dp-client-clipping",
    "local-dp",
    "secagg+",
)
_UNIFORM_KEY = "client-weight"
WEIGHTINGS = ("examples", "uniform")


@dataclass(frozen=True)
class Guarantee:
    """What a defense promises. ``level``: ``"client"`` (central DP and LocalDpMod: a client's whole data,
    every round composed) or ``"none"``; ``epsilon``/``delta`` (None
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
    over all tensors together (FlatClip, McMahan et al. 2018). An update of norm 0 is returned
    unchanged (a copy).

    Args:
        update: Δ, one float tensor per parameter (any shapes).
        clip: C, a finite number > 0.

    Raises:
        TypeError: naming ``clip`` when it is not a real number (``"1"``, ``True``), or ``update`` when it
            is not a sequence of float tensors.
        ValueError: naming ``clip`` when it is NaN, infinite or ≤ 0 (a negative C would flip the update's
            sign), or ``update`` when it is empty or holds NaN/inf.
    """
    clip = check_real(clip, "clip", low=0.0, low_open=True)
    update = _check_update(update, "update")
    norm = math.sqrt(sum(float(t.double().pow(2).sum()) for t in update))
    return [t * min(1.0, clip / norm) if norm > 0 else t.clone() for t in update]


def _check_update(update, name: str) -> list[torch.Tensor]:
    """``update`` as a list of finite float tensors (at least one).

    Raises:
        TypeError: naming ``name`` when it is not a sequence of float tensors.
        ValueError: naming ``name`` when it is empty or holds NaN/inf.
    """
    if isinstance(update, torch.Tensor) or not isinstance(update, Sequence):
        raise TypeError(
            f"{name} must be a list of tensors, one per parameter, got {type(update).__name__}"
        )
    update = list(update)
    if not update:
        raise ValueError(f"{name} must hold at least one tensor")
    for i, t in enumerate(update):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
            raise TypeError(f"{name}[{i}] must be a float tensor, got {got}")
        if not torch.isfinite(t).all():
            raise ValueError(f"{name}[{i}] holds NaN or inf")
    return update


def _unmoved(start, arrays) -> bool:
    """Whether the update ``arrays`` − ``start`` (NumPy arrays, in order) has norm 0 as Flower computes
    it (``get_norm``): the case in which Flower's fixed clipping divides C by 0."""
    from flwr.supercore.differential_privacy import get_norm

    return (
        get_norm([np.subtract(x, y) for x, y in zip(arrays, start, strict=True)]) == 0
    )


def _zero_safe_mod(mod, noise_std: float | None = None):
    """Flower's client clipping ``mod`` (``fixedclipping_mod``, or a ``LocalDpMod`` whose noise std is
    ``noise_std``) for a client whose update may be zero: an update of norm 0 passes the clipping
    unchanged (as :func:`clip_update`; Flower's clip would divide by its norm) and, for LocalDpMod, gets
    its noise as LocalDpMod adds it (``add_gaussian_noise_inplace``, std ``noise_std``); every other
    reply, and every reply Flower refuses (an error, several records, other keys), goes through ``mod``."""
    from flwr.app import Array, ArrayRecord
    from flwr.supercore.differential_privacy import add_gaussian_noise_inplace

    def safe(msg, ctxt, call_next):
        reply = call_next(msg, ctxt)

        # the reply, to Flower's own mod (LocalDpMod logs two INFO lines per reply)
        def flower(*_):
            with quiet_flower(logging.WARNING):
                return mod(msg, ctxt, lambda *_: reply)

        if (
            reply.has_error()
            or len(msg.content.array_records) != 1
            or len(reply.content.array_records) != 1
        ):
            return flower()
        start = next(iter(msg.content.array_records.values()))
        key, record = next(iter(reply.content.array_records.items()))
        if list(start.keys()) != list(record.keys()):
            return flower()
        arrays = record.to_numpy_ndarrays()
        if not _unmoved(start.to_numpy_ndarrays(), arrays):
            return flower()
        if noise_std is not None:
            add_gaussian_noise_inplace(arrays, noise_std)
        reply.content[key] = ArrayRecord(
            {
                k: Array(np.asarray(v))
                for k, v in zip(record.keys(), arrays, strict=True)
            }
        )
        return reply

    return safe


def _server_side_clipping():
    """Flower's ``DifferentialPrivacyServerSideFixedClipping`` for replies that may be zero updates.

    Rounds without a zero update run Flower's own ``aggregate_train``. A round with one runs Flower
    1.42's steps (validate the replies, clip each, aggregate, add the noise, compose the privacy
    event) with the zero update passed unclipped (Δ · min(1, C/‖Δ‖) → Δ = 0: Flower's clip divides
    by its norm), every other reply clipped by Flower's ``compute_clip_model_update``."""
    from flwr.app import Array, ArrayRecord
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping
    from flwr.serverapp.strategy.dp_fixed_clipping import validate_replies
    from flwr.supercore.differential_privacy import compute_clip_model_update

    class ZeroSafeServerSideClipping(DifferentialPrivacyServerSideFixedClipping):
        def aggregate_train(self, server_round, replies):
            replies = list(replies)
            start = self.current_arrays.to_numpy_ndarrays()
            if not any(
                not reply.has_error() and _unmoved(start, record.to_numpy_ndarrays())
                for reply in replies
                for record in reply.content.array_records.values()
            ):
                return super().aggregate_train(server_round, replies)
            event = self._pop_pending_event(server_round)
            if not validate_replies(
                replies, self.num_sampled_clients, strict=self.accountant is not None
            ):
                return None, None
            self._validate_uniform_weights(replies)
            for reply in replies:
                for key, record in reply.content.array_records.items():
                    arrays = record.to_numpy_ndarrays()
                    if not _unmoved(start, arrays):
                        compute_clip_model_update(
                            param1=arrays,
                            param2=start,
                            clipping_norm=self.clipping_norm,
                        )
                    reply.content[key] = ArrayRecord(
                        dict(
                            zip(
                                record.keys(),
                                (Array(np.asarray(v)) for v in arrays),
                                strict=True,
                            )
                        )
                    )
            aggregated, metrics = self.strategy.aggregate_train(server_round, replies)
            if aggregated:
                aggregated = self._add_noise_to_aggregated_arrays(aggregated)
                self._compose_release(event)
            return aggregated, metrics

    return ZeroSafeServerSideClipping


def _local_dp_sigma(dp) -> float:
    """LocalDpMod's noise std per coordinate, as LocalDpMod computes it (NumPy): s·√(2 ln(1.25/δ))/ε."""
    return float(
        dp["sensitivity"] * np.sqrt(2 * np.log(1.25 / dp["delta"])) / dp["epsilon"]
    )


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
                    self.updates.append(
                        ClientUpdate(
                            server_round,
                            int(metrics["partition-id"]),
                            _tensors(message.content["arrays"], names),
                            metrics,
                        )
                    )
            arrays, metrics = self.inner.aggregate_train(server_round, replies)
            if arrays is not None:
                self.aggregates.append(_tensors(arrays, names))
            return arrays, metrics

        def configure_evaluate(
            self, *args
        ):  # evaluation, summary: the inner strategy's
            return self.inner.configure_evaluate(*args)

        def aggregate_evaluate(self, *args):
            return self.inner.aggregate_evaluate(*args)

        def summary(self):
            self.inner.summary()

    return Recorder()


def _message_run(
    defense, model, partitions, config, num_rounds, engine, secrets, dp, uniform
):
    from flwr.clientapp import ClientApp
    from flwr.clientapp.mod import LocalDpMod, fixedclipping_mod
    from flwr.serverapp.strategy import (
        DifferentialPrivacyClientSideFixedClipping as ClientSide,
    )

    count, names = len(partitions), [name for name, _ in model.named_parameters()]
    with quiet_flower():  # FedAvg warns that client-side evaluation is off (on purpose)
        fedavg = recording_fedavg(
            model,
            fraction_evaluate=0.0,
            min_train_nodes=count,
            min_available_nodes=count,
            weighted_by_key=_UNIFORM_KEY if uniform else "num-examples",
        )
    wrapper = {
        "central-dp-server-clipping": _server_side_clipping(),
        "central-dp-client-clipping": ClientSide,
    }.get(defense)
    inner = fedavg if wrapper is None else wrapper(fedavg, dp["z"], dp["clip"], count)
    mods = {
        "central-dp-client-clipping": [
            _zero_safe_mod(fixedclipping_mod)
        ],  # zero updates: see the module
        "local-dp": [
            _zero_safe_mod(
                LocalDpMod(dp["clip"], dp["sensitivity"], dp["epsilon"], dp["delta"]),
                _local_dp_sigma(dp),
            )
        ],
    }
    book_client = make_client_app(ModelBuilder(model), partitions, secrets)
    client = ClientApp(mods=[client_rng_mod(secrets)] + mods.get(defense, []))

    @client.train()
    def train(message, context):
        reply = book_client(message, context)
        if uniform:  # every reply weighs 1 in FedAvg's average
            reply.content["metrics"][_UNIFORM_KEY] = 1
        return reply

    recorder = _recorder(inner, names)
    run_federation(
        make_server_app(recorder, model, num_rounds, config),
        client,
        count,
        engine=engine,
    )
    clipped = {
        "central-dp-server-clipping": fedavg.updates,
        "central-dp-client-clipping": recorder.updates,
    }.get(defense)
    return recorder.starts, recorder.updates, clipped, recorder.aggregates


def defended_round(
    model: nn.Module,
    partitions: Sequence[tuple[torch.Tensor, torch.Tensor]],
    config: Mapping,
    defense: str = "none",
    *,
    clip: float = 1.0,
    noise_multiplier: float = 1.0,
    epsilon: float = 0.5,
    delta: float = 1e-5,
    sensitivity: float | None = None,
    num_rounds: int = 1,
    engine: str = "in-process",
    client_seeds: Sequence[int] | None = None,
    server_seed: int | None = None,
    secagg_shares: float = 1.0,
    secagg_threshold: float = 1.0,
    weighting: str = "examples",
) -> ServerView:
    """Run the book's Flower federation under ``defense`` and return what its server sees.

    Args:
        model: the initial global model (not modified); partitions: one ``(images, labels)`` per
            client; config: the training config (``lr``, ``local-epochs``, ``batch-size``; no seed,
            no DP-SGD settings), as :func:`~gitutor.federated.flower.federated_round`.
        defense: one of :data:`DEFENSES`; clip: C, the L2 norm a client update is clipped to.
        noise_multiplier: z of central DP (noise std z·C on the sum, z·C/n on the average).
        epsilon, delta: LocalDpMod's per-update (ε, δ); delta is also central DP's δ.
        sensitivity: LocalDpMod's L2 sensitivity s (default 2·C: two clipped updates differ by ≤ 2C; an
            s below C is refused under ``"local-dp"``).
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

    Under ``"local-dp"`` the guarantee is the ε that LocalDpMod's noise gives over ``num_rounds`` rounds,
    from Opacus' RDP accountant (the module docstring), not the ε the mod was given. A client whose update is exactly
    zero passes every clipping unchanged (see the module docstring).

    Raises:
        ValueError: naming ``defense``, ``weighting``, ``engine``, ``clip``, ``noise_multiplier``,
            ``epsilon``, ``delta``, ``sensitivity`` (> 0), ``num_rounds``, ``server_seed``,
            ``secagg_shares``, ``secagg_threshold``, ``config`` (a seed, DP-SGD settings, no ``lr`` or a
            bad value), ``client_seeds`` or ``partitions``, before any client runs.
        TypeError: naming the argument, for a number given as something else (``"0.5"``, ``True``,
            None), a ``defense``/``weighting``/``engine`` that is not a string, or a ``config`` that is
            not a mapping; before any client runs.
        RuntimeError: if the server did not receive every client's reply.
    """
    for name, value, allowed in (
        ("defense", defense, DEFENSES),
        ("weighting", weighting, WEIGHTINGS),
        ("engine", engine, ENGINES),
    ):
        check_choice(value, name, allowed)
    check_config(config)
    check_partitions(model, partitions)
    check_no_server_seed(config)
    if "noise-multiplier" in config:
        raise ValueError(
            f"config must set 'lr' and no DP-SGD settings (Opacus DP-SGD is federated_round's), "
            f"got {dict(config)}"
        )
    dp = {
        "z": _number("noise_multiplier", noise_multiplier, positive=False),
        "clip": _number("clip", clip),
        "epsilon": _number("epsilon", epsilon),
        "delta": _number("delta", delta, below=1.0),
    }
    dp["sensitivity"] = _number(
        "sensitivity", 2.0 * dp["clip"] if sensitivity is None else sensitivity
    )
    if defense == "local-dp" and dp["sensitivity"] < dp["clip"]:
        raise ValueError(
            f"sensitivity must be ≥ clip = {dp['clip']:g} (an update clipped to C moves by up to C when the "
            f"client's data are left out, 2C when replaced; a smaller s adds less noise than the ε stated for "
            f"it), got {dp['sensitivity']:g}"
        )
    num_rounds = check_int(num_rounds, "num_rounds")
    if server_seed is not None:
        check_int(server_seed, "server_seed", low=0)
    count = len(partitions)
    _check_secagg(secagg_shares, secagg_threshold, count)
    secrets = (
        client_secrets(count)
        if client_seeds is None
        else check_secrets(client_seeds, count)
    )
    global_model = copy.deepcopy(model)
    saved = np.random.get_state()
    np.random.seed(
        np.random.SeedSequence(server_seed).generate_state(4)
    )  # the server's own noise
    try:
        with quiet_flower():
            if defense == "secagg+":
                from gitutor.federated.flower_secagg import secagg_round

                run = secagg_round(
                    global_model,
                    partitions,
                    config,
                    num_rounds,
                    engine,
                    secrets,
                    secagg_shares,
                    secagg_threshold,
                    weighting == "uniform",
                )
            else:
                run = _message_run(
                    defense,
                    global_model,
                    partitions,
                    config,
                    num_rounds,
                    engine,
                    secrets,
                    dp,
                    weighting == "uniform",
                )
    finally:
        np.random.set_state(saved)
    starts, updates, clipped, aggregates = run
    received = len(updates) if defense != "secagg+" else count * len(aggregates)
    if received != count * num_rounds or len(aggregates) != num_rounds:
        raise RuntimeError(
            f"the server received {received} of {count * num_rounds} client replies "
            f"({defense}, {engine}): a client failed (Flower logged its error above)"
        )
    equal = (
        weighting == "uniform" or len({len(labels) for _, labels in partitions}) == 1
    )
    return ServerView(
        defense,
        starts,
        updates,
        clipped,
        aggregates,
        *_noise(defense, dp, count, num_rounds, equal),
    )


def _number(name, value, *, positive=True, below=math.inf) -> float:
    """A finite real ≥ 0 (> 0 when ``positive``, < ``below``): TypeError / ValueError naming ``name``."""
    return check_real(
        value, name, low=0.0, low_open=positive, high=below, high_open=True
    )


def _check_secagg(shares, threshold, count: int) -> None:
    """SecAggPlusWorkflow's ``num_shares`` and ``reconstruction_threshold`` as Flower reads them: a float in
    (0, 1] (a fraction of the clients / of the shares) or an int (shares: 1, or 3 … clients; threshold: 1,
    or 2 … below an int ``num_shares``).

    Raises:
        TypeError: naming ``secagg_shares`` / ``secagg_threshold`` when not a real number.
        ValueError: naming it when out of those ranges.
    """
    for name, value in (("secagg_shares", shares), ("secagg_threshold", threshold)):
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            low, high = (
                (3, count)
                if name == "secagg_shares"
                else (
                    2,
                    shares - 1
                    if isinstance(shares, numbers.Integral) and shares > 1
                    else count,
                )
            )
            if value != 1 and not low <= value <= high:
                raise ValueError(
                    f"{name} as an int must be 1 or in [{low}, {high}] (Flower's SecAggPlusWorkflow, "
                    f"{count} clients), got {value}; or give a fraction in (0, 1]"
                )
        else:
            check_real(value, name, low=0.0, high=1.0, low_open=True)


def _noise(defense, dp, count, num_rounds, equal):
    """(sigma, clip, noise_by, guarantee) of a defense, as Flower states them."""
    if defense == "none":
        return (
            0.0,
            None,
            "none",
            Guarantee("none", None, None, "nobody", "FedAvg: no defense"),
        )
    if defense == "secagg+":
        return (
            0.0,
            None,
            "none",
            Guarantee(
                "none",
                None,
                None,
                "a server that sees only the aggregate (honest-but-"
                "curious, fewer colluding parties than the reconstruction threshold): it "
                "sees the sum of the sampled clients",
                "SecAggPlusWorkflow + "
                "secaggplus_mod (Bell et al. 2020): no DP, the aggregate is exact",
            ),
        )
    if defense == "local-dp":
        sigma = _local_dp_sigma(dp)
        eps = dp_epsilon(sigma / dp["sensitivity"], 1.0, num_rounds, dp["delta"])
        source = (
            f"LocalDpMod(ε = {dp['epsilon']:g}) adds σ = s·√(2 ln(1.25/δ))/ε = {sigma:.4g} per coordinate "
            "(the classic Gaussian mechanism's calibration, whose ε holds only below 1); the ε stated is Opacus' "
            f"RDP accountant of that Gaussian mechanism (noise multiplier σ/s) over {num_rounds} round(s)"
        )
        return (
            sigma,
            dp["clip"],
            "client",
            Guarantee(
                "client",
                eps,
                dp["delta"],
                "everyone, the server included (a client's data, every round composed)",
                source,
            ),
        )
    eps = dp_epsilon(dp["z"], 1.0, num_rounds, dp["delta"]) if equal else None
    return (
        dp["z"] * dp["clip"] / count,
        dp["clip"],
        "server",
        Guarantee(
            "client",
            eps,
            dp["delta"],
            "whoever sees the released model, NOT the server (it holds every clipped update "
            "un-noised)",
            "Gaussian mechanism on the clipped sum, std z·C (McMahan et al. 2018); ε from Opacus' RDP "
            "accountant, no sampling amplification (all clients every round); None when clients' weights differ",
        ),
    )
