"""SecAgg+ as Flower's secure-aggregation example runs it, around the book's client training.

Flower 1.42 implements SecAgg+ (Bell et al. 2020, "Secure single-server aggregation with
(poly)logarithmic overhead") only for the legacy server API: ``SecAggPlusWorkflow`` as the fit workflow
of a ``DefaultWorkflow`` over a ``flwr.server.strategy.FedAvg`` in a ``LegacyContext``, and
``flwr.client.mod.secaggplus_mod`` on a ``ClientApp(client_fn=...)`` whose ``NumPyClient.fit`` trains.
Each client quantises N_k/max_weight · W_k (clipped to [-8, 8], 2²² levels, stochastic rounding), adds a
private mask and pairwise masks (uniform modulo 2³²), and the server, after the unmask stage, holds only
Σ_k N_k W_k / Σ_k N_k: FedAvg's weighted average, up to n · 16/2²² · max_weight/Σ_k N_k per coordinate.
The strategy's ``aggregate_fit`` receives that average in every client's ``FitRes``: no individual
update reaches it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from gitutor.federated.client_secrets import check_no_server_seed
from gitutor.federated.flower import client_rng_mod, local_training
from gitutor.federated.flower_engine import run_federation

__all__ = ["secagg_round"]


def secagg_round(
    model: nn.Module,
    partitions: Sequence[tuple[torch.Tensor, torch.Tensor]],
    config: Mapping,
    num_rounds: int,
    engine: str,
    secrets: Sequence[int],
    shares: float,
    threshold: float,
    uniform: bool = False,
):
    """Run the book's federation with SecAgg+ and return ``(starts, [], None, aggregates)``.

    ``starts`` / ``aggregates``: per round, the global parameters the clients trained from / the
    unmasked FedAvg average (one tensor per ``model.parameters()`` entry, float32). ``secrets``: each
    client's own secret (:func:`~gitutor.federated.flower.client_rng_mod` seeds its stochastic
    rounding); ``shares``, ``threshold``: ``SecAggPlusWorkflow``'s ``num_shares`` and
    ``reconstruction_threshold``; ``max_weight`` is the largest client's example count, so each
    client's weight ratio N_k / max_weight ≤ 1 keeps the quantisation error small; ``uniform``: every
    client reports weight 1 (FedAvg's average unweighted; max_weight 1). Inputs are checked by
    :func:`~gitutor.federated.flower_defenses.defended_round`.
    """
    from flwr.client import ClientApp, NumPyClient
    from flwr.client.mod import secaggplus_mod
    from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays
    from flwr.server import LegacyContext, ServerApp, ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow

    count, keys = len(partitions), list(model.state_dict())
    picks = [keys.index(name) for name, _ in model.named_parameters()]
    starts, aggregates = [], []

    class BookClient(NumPyClient):  # the book's client training, as a NumPyClient
        def __init__(self, partition):
            self.partition = partition

        def fit(self, parameters, cfg):
            check_no_server_seed(cfg)
            local = copy.deepcopy(model)
            local.load_state_dict(
                {k: torch.from_numpy(np.array(v)) for k, v in zip(keys, parameters)}
            )
            images, labels = partitions[self.partition]
            trained, metrics = local_training(
                local,
                images,
                labels,
                lr=float(cfg["lr"]),
                epochs=int(cfg.get("local-epochs", 1)),
                batch_size=int(cfg.get("batch-size", 0)) or None,
            )
            return (
                [v.detach().numpy() for v in trained.state_dict().values()],
                1 if uniform else len(labels),
                {**metrics, "partition-id": self.partition},
            )

    class Recording(FedAvg):
        def configure_fit(self, server_round, parameters, client_manager):
            starts.append(parameters_to_ndarrays(parameters))
            return super().configure_fit(server_round, parameters, client_manager)

        def aggregate_fit(self, server_round, results, failures):
            out = super().aggregate_fit(server_round, results, failures)
            if out[0] is not None:
                aggregates.append(parameters_to_ndarrays(out[0]))
            return out

    def client_fn(context):
        return BookClient(int(context.node_config["partition-id"])).to_client()

    client = ClientApp(
        client_fn=client_fn, mods=[client_rng_mod(secrets), secaggplus_mod]
    )
    initial = ndarrays_to_parameters(
        [v.detach().numpy() for v in model.state_dict().values()]
    )
    strategy = Recording(
        fraction_fit=1.0,
        fraction_evaluate=0.0,
        min_fit_clients=count,
        min_available_clients=count,
        initial_parameters=initial,
        on_fit_config_fn=lambda r: {**dict(config), "server-round": r},
    )
    server = ServerApp()
    max_weight = 1.0 if uniform else float(max(len(labels) for _, labels in partitions))

    @server.main()
    def main(grid, context):
        legacy = LegacyContext(
            context=context,
            config=ServerConfig(num_rounds=num_rounds),
            strategy=strategy,
        )
        DefaultWorkflow(
            fit_workflow=SecAggPlusWorkflow(
                num_shares=shares,
                reconstruction_threshold=threshold,
                max_weight=max_weight,
            )
        )(grid, legacy)

    run_federation(server, client, count, engine=engine)

    def pick(arrays):  # the trainable tensors, as the model holds them
        return [torch.from_numpy(np.array(arrays[i], dtype=np.float32)) for i in picks]

    return [pick(a) for a in starts], [], None, [pick(a) for a in aggregates]
