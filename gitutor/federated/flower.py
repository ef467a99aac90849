"""A Flower federation whose server keeps every client's update: the attacker's view.

The server of the threat model is a Flower ``ServerApp`` running :class:`RecordingFedAvg`, a
``flwr.serverapp.strategy.FedAvg`` whose aggregation step first stores each reply's arrays —
the parameters a Flower ``ClientApp`` sends back after local training — and then averages as
usual (McMahan et al. 2017). The update of client k in round t is Δ_k = W_k − W, the model it
returned minus the model it received; for one local SGD step on a batch (FedSGD) Δ_k = −η·∇W,
so the server holds the client's gradient up to the public factor −η.

Two ways to run the same ``ServerApp``/``ClientApp`` pair (``run_federation(engine=...)``):

- ``"in-process"``: :class:`LoopbackGrid`, a ``flwr.serverapp.Grid`` that hands each message to
  the ``ClientApp`` in this process, serialised to Flower's protobuf wire format and back in
  both directions (what a SuperLink forwards). No Ray, no sockets: milliseconds per round.
- ``"simulation"``: ``flwr.simulation.run_simulation``, Flower's simulation engine (a local Ray
  cluster, ``flwr[simulation]``); the deployment engine (``flower-superlink``,
  ``flower-supernode``, ``flwr run``) runs the same two apps across machines.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gitutor.checks import check_choice, check_int, check_real, check_seed
from gitutor.federated.client import check_client_batch, check_partitions
from gitutor.federated.client_secrets import (
    check_no_server_seed,
    check_secrets,
    client_secrets,
    draw_seed,
    next_draw,
)
from gitutor.federated.dp import check_opacus_model
from gitutor.federated.flower_engine import ENGINES, quiet_flower, run_federation

__all__ = [
    "ENGINES",
    "ClientUpdate",
    "check_config",
    "client_rng_mod",
    "federated_round",
    "local_training",
    "make_client_app",
    "make_server_app",
    "recording_fedavg",
    "run_federation",
    "update_as_gradient",
]


@dataclass(frozen=True)
class ClientUpdate:
    """What the server received from one client in one round.

    Attributes:
        round: the server round (1, 2, …).
        partition: the client's partition id (which dataset shard it holds).
        arrays: the parameters it sent, one tensor per ``model.parameters()`` entry.
        metrics: the numbers it reported (``num-examples``, ``local-steps``, …).
    """

    round: int
    partition: int
    arrays: list[torch.Tensor]
    metrics: dict

    def update(self, global_parameters: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Δ = W_k − W: the sent parameters minus the ``global_parameters`` it trained from."""
        return [sent - start for sent, start in zip(self.arrays, global_parameters)]


def _strategy_class():
    from flwr.serverapp.strategy import FedAvg

    class RecordingFedAvg(FedAvg):
        """FedAvg that stores every client's reply (:class:`ClientUpdate`) before averaging.

        ``self.updates`` lists what arrived, round by round; ``parameter_names`` picks the
        trainable tensors out of the state dict (buffers are not updates).
        """

        def __init__(self, parameter_names: Sequence[str], **kwargs):
            super().__init__(**kwargs)
            self.parameter_names = list(parameter_names)
            self.updates: list[ClientUpdate] = []

        def aggregate_train(self, server_round, replies):
            replies = list(replies)
            for message in replies:  # the hook: the server's view of each client
                if message.has_error():
                    continue
                state = message.content["arrays"].to_torch_state_dict()
                metrics = dict(message.content["metrics"])
                self.updates.append(
                    ClientUpdate(
                        server_round,
                        int(metrics["partition-id"]),
                        [state[name].clone() for name in self.parameter_names],
                        metrics,
                    )
                )
            return super().aggregate_train(server_round, replies)

    return RecordingFedAvg


def recording_fedavg(model: nn.Module, **kwargs):
    """A :class:`RecordingFedAvg` for ``model`` (``kwargs`` go to Flower's ``FedAvg``)."""
    names = [name for name, _ in model.named_parameters()]
    return _strategy_class()(names, **kwargs)


def local_training(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    lr: float,
    epochs: int = 1,
    batch_size: int | None = None,
    noise_multiplier: float | None = None,
    max_grad_norm: float = 1.0,
    seed: int = 0,
) -> tuple[nn.Module, dict]:
    """A client's local training: ``epochs`` passes of SGD over mini-batches, in order.

    Steps = epochs · ⌈N / batch_size⌉. One epoch with ``batch_size = N`` is FedSGD (the update
    is −η·∇W of the batch-mean loss); more steps are FedAvg (McMahan et al. 2017, Alg. 1).
    With ``noise_multiplier`` set, the steps are Opacus DP-SGD instead
    (:func:`gitutor.federated.dp.private_sgd`, Poisson sampling at q = batch_size / N).

    Returns:
        ``(trained copy, metrics)`` with ``local-steps`` and, for DP-SGD, ``sample-rate``,
        ``noise-multiplier`` and ``max-grad-norm``.

    Raises:
        ValueError: naming ``lr``, ``epochs``, ``batch_size`` or the DP settings when invalid,
            or for a bad batch (as :func:`~gitutor.federated.client_gradients`).
        TypeError: naming ``lr``, ``epochs``, ``batch_size`` or ``seed`` when not a number of the right
            kind (``"0.1"``, ``2.0`` epochs, ``True``).
    """
    check_client_batch(images, labels, model)
    count = images.shape[0]
    batch_size = count if batch_size is None else batch_size
    check_int(batch_size, "batch_size", low=1, high=count)
    check_int(epochs, "epochs")
    check_real(lr, "lr", low=0.0, low_open=True)
    check_seed(seed)
    steps = epochs * -(-count // batch_size)
    if noise_multiplier is not None:
        from gitutor.federated.dp import private_sgd

        trained, spent = private_sgd(
            model,
            images,
            labels,
            lr=lr,
            steps=steps,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            batch_size=batch_size,
            seed=seed,
        )
        return trained, {
            "local-steps": steps,
            "sample-rate": spent["sample_rate"],
            "noise-multiplier": spent["noise_multiplier"],
            "max-grad-norm": spent["max_grad_norm"],
        }
    trained = copy.deepcopy(model).train()
    optimizer = torch.optim.SGD(trained.parameters(), lr=lr)
    for _ in range(epochs):
        for start in range(0, count, batch_size):
            optimizer.zero_grad()
            end = start + batch_size
            nn.functional.cross_entropy(
                trained(images[start:end]), labels[start:end]
            ).backward()
            optimizer.step()
    return trained, {"local-steps": steps}


#: Where a client counts the draws of :func:`client_rng_mod` in its own ``Context.state``.
_RNG_KEY = "gitutor.client-rng"


def client_rng_mod(secrets: Sequence[int]):
    """A Flower client mod (outermost) that runs the client's TRAIN messages with NumPy's global
    generator seeded by ``secrets[partition-id]`` and the client's own draw count (in its ``Context``
    state), restoring the generator after: Flower's LocalDpMod and SecAgg+ draw from it."""
    from flwr.app.message_type import MessageType

    def mod(msg, ctxt, call_next):
        if msg.metadata.message_type != MessageType.TRAIN:
            return call_next(msg, ctxt)
        draws = next_draw(ctxt, _RNG_KEY)
        saved = np.random.get_state()
        secret = secrets[int(ctxt.node_config["partition-id"])]
        seed = draw_seed(
            secret, draws
        )  # 63 bits, as 32-bit words for NumPy's legacy generator
        np.random.set_state(
            np.random.RandomState([seed & 0xFFFFFFFF, seed >> 32]).get_state()
        )
        try:
            return call_next(msg, ctxt)
        finally:
            np.random.set_state(saved)

    return mod


def make_client_app(
    model_fn: Callable[[], nn.Module],
    partitions: Sequence[tuple[torch.Tensor, torch.Tensor]],
    client_seeds: Sequence[int] | None = None,
):
    """A ``flwr.clientapp.ClientApp`` whose node ``partition-id`` = k trains on ``partitions[k]``.

    The server's ``ConfigRecord`` sets ``lr``, ``local-epochs``, ``batch-size`` (0: the whole
    partition) and, for DP-SGD, ``noise-multiplier`` and ``max-grad-norm``. Client k seeds its
    DP-SGD sampling and noise with its own secret ``client_seeds[k]`` and its own draw count
    (:mod:`gitutor.federated.client_secrets`); None: secrets from the operating system. The reply
    carries the trained parameters (``ArrayRecord``) and a ``MetricRecord`` (``num-examples``,
    ``partition-id``, ``local-steps``, DP settings).

    Raises:
        ValueError: for empty ``partitions``, bad ``client_seeds``, a config that carries a seed.
    """
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    if not partitions:
        raise ValueError("partitions must hold at least one (images, labels) pair")
    own = (
        client_secrets(len(partitions))
        if client_seeds is None
        else check_secrets(client_seeds, len(partitions))
    )
    app = ClientApp()

    @app.train()
    def train(message, context):
        partition = int(context.node_config["partition-id"])
        images, labels = partitions[partition]
        config = message.content["config"]
        check_no_server_seed(config)
        model = model_fn()
        model.load_state_dict(message.content["arrays"].to_torch_state_dict())
        dp = (
            {
                "noise_multiplier": float(config["noise-multiplier"]),
                "max_grad_norm": float(config["max-grad-norm"]),
            }
            if "noise-multiplier" in config
            else {}
        )
        batch = int(config.get("batch-size", 0)) or None
        seed = draw_seed(
            own[partition], next_draw(context)
        )  # the client's secret and count, never the server's
        trained, metrics = local_training(
            model,
            images,
            labels,
            lr=float(config["lr"]),
            epochs=int(config.get("local-epochs", 1)),
            batch_size=batch,
            seed=seed,
            **dp,
        )
        metrics.update({"num-examples": len(labels), "partition-id": partition})
        content = RecordDict(
            {
                "arrays": ArrayRecord(trained.state_dict()),
                "metrics": MetricRecord(metrics),
            }
        )
        return Message(content=content, reply_to=message)

    return app


def check_config(config: Mapping) -> dict:
    """The server's training ``config`` checked before a federation starts: a mapping that sets ``lr``
    (a finite number > 0) and, if at all, ``local-epochs`` (an int ≥ 1), ``batch-size`` (an int ≥ 0; 0:
    the whole partition), ``noise-multiplier`` (a finite number ≥ 0) and ``max-grad-norm`` (a finite
    number > 0). A seed is refused by :func:`~gitutor.federated.client_secrets.check_no_server_seed`.

    Raises:
        TypeError: naming ``config`` when it is not a mapping, or ``config['lr']`` (…) when a value is
            not a number of the right kind (``"0.1"``, ``2.0`` epochs, ``True``).
        ValueError: naming ``config`` when it sets no ``lr``, or ``config['lr']`` (…) when a value is out
            of range (NaN, ≤ 0, …).
    """
    if not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a mapping such as {{'lr': 0.1}}, got {type(config).__name__}"
        )
    if "lr" not in config:
        raise ValueError(
            f"config must set 'lr' (the clients' learning rate), got {dict(config)}"
        )
    for key, low, is_int in (
        ("lr", 0.0, False),
        ("local-epochs", 1, True),
        ("batch-size", 0, True),
        ("noise-multiplier", 0.0, False),
        ("max-grad-norm", 0.0, False),
    ):
        if key in config:
            name = f"config[{key!r}]"
            if is_int:
                check_int(config[key], name, low=low)
            else:
                check_real(
                    config[key], name, low=low, low_open=key != "noise-multiplier"
                )
    return dict(config)


def make_server_app(
    strategy,
    model: nn.Module,
    num_rounds: int,
    config: Mapping,
    evaluate_fn: Callable[[nn.Module], float] | None = None,
    history: list | None = None,
):
    """A ``flwr.serverapp.ServerApp`` that runs ``strategy.start`` for ``num_rounds`` rounds.

    ``model`` is the initial global model; ``config`` the training ``ConfigRecord`` sent each
    round; ``evaluate_fn(model) -> accuracy`` is evaluated on the server after every round
    (and before the first), appended to ``history`` as ``(round, accuracy)``.
    """
    from flwr.app import ArrayRecord, ConfigRecord, MetricRecord
    from flwr.serverapp import ServerApp

    app = ServerApp()

    def evaluate(server_round, arrays):
        if evaluate_fn is None:
            return None
        current = copy.deepcopy(model)
        current.load_state_dict(arrays.to_torch_state_dict())
        accuracy = float(evaluate_fn(current))
        if history is not None:
            history.append((server_round, accuracy))
        return MetricRecord({"accuracy": accuracy})

    @app.main()
    def main(grid, context):
        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(model.state_dict()),
            num_rounds=num_rounds,
            train_config=ConfigRecord(dict(config)),
            evaluate_fn=evaluate,
        )

    return app


def federated_round(
    model: nn.Module,
    partitions: Sequence[tuple[torch.Tensor, torch.Tensor]],
    config: Mapping,
    *,
    num_rounds: int = 1,
    engine: str = "in-process",
    evaluate_fn: Callable[[nn.Module], float] | None = None,
    client_seeds: Sequence[int] | None = None,
):
    """Run a Flower federation on ``partitions`` and return what its server recorded.

    Args:
        model: the initial global model (not modified).
        partitions: one ``(images, labels)`` pair per client.
        config: the training config the server sends (``lr``, ``local-epochs``, ``batch-size``,
            optionally ``noise-multiplier`` and ``max-grad-norm``; never a seed).
        num_rounds: federated rounds (≥ 1).
        engine: as :func:`run_federation`.
        evaluate_fn: ``model -> accuracy``, evaluated by the server after every round.
        client_seeds: each client's own secret for its DP noise (:func:`make_client_app`).

    Returns:
        ``(updates, history)``: the :class:`ClientUpdate` list (every client, every round)
        and ``[(round, accuracy), …]`` (empty without ``evaluate_fn``).

    Raises:
        ValueError: naming ``partitions[k]`` (images the model cannot take, labels outside its
            classes, a bad batch), ``num_rounds``, ``config`` (:func:`check_config`) or ``engine``, or a
            model with in-place activations when ``config`` asks for DP-SGD, a config that carries a
            seed, or bad ``client_seeds``; before any client runs.
        TypeError: naming ``num_rounds``, ``config``'s values, ``engine`` or ``evaluate_fn`` (not
            callable) when of the wrong kind; before any client runs.
        RuntimeError: if a client failed, so that the server did not receive every update.
    """
    check_choice(engine, "engine", ENGINES)
    check_config(config)
    check_partitions(model, partitions)
    check_no_server_seed(config)
    client_seeds = (
        None if client_seeds is None else check_secrets(client_seeds, len(partitions))
    )
    if "noise-multiplier" in config:
        check_opacus_model(model)
    check_int(num_rounds, "num_rounds")
    if evaluate_fn is not None and not callable(evaluate_fn):
        raise TypeError(
            f"evaluate_fn must be a function model -> accuracy or None, got {type(evaluate_fn).__name__}"
        )
    global_model = copy.deepcopy(model)
    builder = ModelBuilder(global_model)
    count = len(partitions)
    with quiet_flower():  # FedAvg warns that client-side evaluation is off (on purpose)
        strategy = recording_fedavg(
            global_model,
            fraction_evaluate=0.0,
            min_train_nodes=count,
            min_available_nodes=count,
        )
    history: list = []
    server = make_server_app(
        strategy, global_model, num_rounds, config, evaluate_fn, history
    )
    run_federation(
        server, make_client_app(builder, partitions, client_seeds), count, engine=engine
    )
    if (
        len(strategy.updates) != count * num_rounds
    ):  # a client that failed sent an error, not an update
        raise RuntimeError(
            f"the server received {len(strategy.updates)} of {count * num_rounds} client "
            f"updates ({engine}): a client failed (Flower logged its error above)"
        )
    return strategy.updates, history


class ModelBuilder:
    """Picklable ``model_fn``: a fresh copy of the template (Ray ships it to its workers)."""

    def __init__(self, template: nn.Module):
        self.template = template

    def __call__(self) -> nn.Module:
        return copy.deepcopy(self.template)


def update_as_gradient(
    update: Sequence[torch.Tensor], lr: float, steps: int = 1
) -> list[torch.Tensor]:
    """−Δ / (η · steps): a client update read as the gradient of one step.

    Exact for FedSGD (one step: Δ = −η·∇W). For FedAvg with several local steps it is the mean
    of the gradients along the client's path, which the attack treats as one gradient at the
    global model (the approximation Geiping et al. 2020 §5 improve on by unrolling the steps).

    Raises:
        ValueError: naming ``lr`` or ``steps`` when not positive (or NaN/inf), or ``update`` when it is
            empty or holds NaN/inf.
        TypeError: naming ``lr``, ``steps`` or ``update`` when of the wrong kind (``"0.1"``, ``1.0`` steps,
            a tensor instead of a list of tensors).
    """
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    steps = check_int(steps, "steps")
    if isinstance(update, torch.Tensor) or not isinstance(update, Sequence):
        raise TypeError(
            f"update must be a list of tensors, one per parameter, got {type(update).__name__}"
        )
    if not update:
        raise ValueError("update must hold at least one tensor (one per parameter)")
    for i, delta in enumerate(update):
        if not isinstance(delta, torch.Tensor) or not delta.is_floating_point():
            raise TypeError(
                f"update[{i}] must be a float tensor, got {type(delta).__name__}"
            )
        if not torch.isfinite(delta).all():
            raise ValueError(f"update[{i}] holds NaN or inf")
    return [-delta / (lr * steps) for delta in update]
