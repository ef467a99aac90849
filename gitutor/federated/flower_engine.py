"""How the chapter's Flower apps run: in this process, or on Flower's simulation engine.

``run_federation(server_app, client_app, n, engine=...)`` runs a Flower ``ServerApp`` against
``n`` copies of a ``ClientApp``:

- ``"in-process"``: :class:`LoopbackGrid`, a ``flwr.serverapp.Grid`` that hands each message to
  the ``ClientApp`` in this process, serialised to Flower's protobuf wire format and back in both
  directions (what a SuperLink forwards). No Ray, no sockets: milliseconds per round. Flower's
  process-wide task identity is set as a SuperLink/SuperNode sets it (:func:`task_identity`).
- ``"simulation"``: ``flwr.simulation.run_simulation`` (a local Ray cluster, ``flwr[simulation]``,
  shut down when the run ends, fails or is interrupted, unless Ray was already running), with
  Flower's telemetry off (``FLWR_TELEMETRY_ENABLED=0``, held until its event threads have
  finished) and Ray's usage stats off (``RAY_USAGE_STATS_ENABLED=0``, Ray's documented setting).
  Ray still starts its API-server process, which loads ``UsageStatsHead`` even with the dashboard
  off, and that module looks up cloud metadata hosts (169.254.169.254, metadata.google.internal;
  ``ray._common.usage.usage_lib.get_cloud_from_metadata_requests``) whatever that setting says: no
  Ray setting stops it. The book's network guard refuses those look-ups and files them as this
  known Ray behaviour (``scripts/netguard``). The quick profile runs in-process (milliseconds, not
  a Ray start-up).

The in-process grid sets private fields of Flower (``Metadata._message_id``, ``_src_node_id``,
``TaskIdentity._task_id`` …); :func:`check_flower_internals` checks they are where Flower
:data:`FLOWER_TESTED` keeps them and fails naming the installed Flower version when they moved.

Flower's deployment engine (``flower-superlink``, ``flower-supernode``, ``flwr run``) runs the same
two apps across machines.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Mapping

ENGINES = ("in-process", "simulation")
#: The Flower releases whose private fields the in-process grid was tested against (pyproject pins it).
FLOWER_TESTED = ">=1.42,<1.43"
_METADATA_FIELDS = ("_message_id", "_src_node_id", "_dst_node_id", "_run_id")
_IDENTITY_FIELDS = ("_task_id", "_run_id", "_node_id")


def check_flower_internals() -> None:
    """Check that Flower keeps the private fields :class:`LoopbackGrid` and :func:`task_identity` set.

    Raises:
        RuntimeError: naming the installed Flower version, :data:`FLOWER_TESTED` and the fields that
            moved (use ``engine="simulation"``, or install a tested Flower).
    """
    import flwr
    from flwr.app import Message, RecordDict
    from flwr.supercore.task_identity import TaskIdentity

    missing = [
        f"TaskIdentity.{name}"
        for name in _IDENTITY_FIELDS
        if name not in vars(TaskIdentity)
    ]
    missing += [
        f"TaskIdentity.{name}"
        for name in ("task_id", "run_id", "node_id")
        if not isinstance(getattr(type(TaskIdentity), name, None), property)
    ]
    if not missing:
        with task_identity(1):
            fields = vars(Message(RecordDict(), 1001, "train").metadata)
        missing = [
            f"Metadata.{name}" for name in _METADATA_FIELDS if name not in fields
        ]
    if missing:
        raise RuntimeError(
            f"Flower {flwr.__version__} no longer has {', '.join(missing)}, which gitutor's "
            f"in-process grid sets (tested with flwr{FLOWER_TESTED}): run with "
            f'engine="simulation" or install flwr{FLOWER_TESTED}'
        )


class LoopbackGrid:
    """A ``flwr.serverapp.Grid`` delivering messages to ``ClientApp``s in this process.

    Every message and reply goes through Flower's protobuf serialisation
    (``flwr.common.serde.message_to_proto`` → bytes → ``message_from_proto``), so the server
    decodes exactly the bytes a SuperLink would forward. Nodes have ids 1001, 1002, … and
    ``node_config`` ``{"partition-id": k, "num-partitions": n}`` as in Flower's simulation engine.
    """

    def __new__(cls, client_app, num_clients: int):
        from flwr.app import Context, RecordDict
        from flwr.common import serde
        from flwr.proto.message_pb2 import Message as ProtoMessage
        from flwr.serverapp import Grid
        from flwr.supercore.run import Run

        def wire(message):
            data = serde.message_to_proto(message).SerializeToString()
            return serde.message_from_proto(ProtoMessage.FromString(data))

        class _Grid(Grid):
            def __init__(self):
                self._run = Run.create_empty(run_id=1)
                self._contexts = {
                    1001 + k: Context(
                        run_id=1,
                        node_id=1001 + k,
                        node_config={"partition-id": k, "num-partitions": num_clients},
                        state=RecordDict(),
                        run_config={},
                    )
                    for k in range(num_clients)
                }
                self._replies = {}

            def set_run(self, run):
                self._run = run

            @property
            def run(self):
                return self._run

            def create_message(
                self, content, message_type, dst_node_id, group_id, ttl=None
            ):
                from flwr.app import Message

                return Message(
                    content, dst_node_id, message_type, ttl=ttl, group_id=group_id
                )

            def get_node_ids(self):
                return list(self._contexts)

            def push_messages(self, messages):
                ids = []
                for message in messages:
                    message.metadata.__dict__["_message_id"] = str(uuid.uuid4())
                    message.metadata.__dict__["_src_node_id"] = (
                        1  # the SuperLink's node id
                    )
                    node = message.metadata.dst_node_id
                    with task_identity(node):  # the ClientApp runs as its SuperNode
                        reply = client_app(wire(message), self._contexts[node])
                    reply.metadata.__dict__["_message_id"] = str(uuid.uuid4())
                    self._replies[message.metadata.message_id] = wire(reply)
                    ids.append(message.metadata.message_id)
                return ids

            def pull_messages(self, message_ids):
                return [self._replies.pop(i) for i in message_ids if i in self._replies]

            def send_and_receive(self, messages, *, timeout=None):
                return self.pull_messages(self.push_messages(messages))

        if (
            isinstance(num_clients, bool)
            or not isinstance(num_clients, int)
            or num_clients < 1
        ):
            raise ValueError(f"num_clients must be an int ≥ 1, got {num_clients!r}")
        check_flower_internals()
        return _Grid()


@contextlib.contextmanager
def task_identity(node_id: int, run_id: int = 1):
    """Flower's process-wide task identity (``flwr.supercore.task_identity``) set to this
    node and run inside the block — what a SuperLink or SuperNode sets in its own process —
    and restored after."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, run_id, node_id
    try:
        yield
    finally:
        TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


@contextlib.contextmanager
def quiet_flower(level: int = logging.ERROR):
    """Flower's INFO log lines silenced inside the block; the level is restored after."""
    from flwr.common.logger import (
        FLOWER_LOGGER as logger,  # importing flwr sets its level
    )

    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def run_federation(
    server_app,
    client_app,
    num_clients: int,
    *,
    engine: str = "in-process",
    backend_config: Mapping | None = None,
) -> None:
    """Run ``server_app`` against ``num_clients`` copies of ``client_app``.

    Args:
        engine: ``"in-process"`` (:class:`LoopbackGrid`) or ``"simulation"``
            (``flwr.simulation.run_simulation``, a local Ray cluster, shut down when the run
            ends, fails or is interrupted unless Ray was already initialised; Flower's telemetry
            and Ray's usage stats are off for the run, see the module docstring).
        backend_config: the simulation engine's ``backend_config`` (e.g. client resources).

    Raises:
        ValueError: naming ``engine`` or ``num_clients`` when invalid.
        TypeError: naming ``engine`` when it is not a string, or ``backend_config`` when it is not a
            mapping (or None).
        RuntimeError: for ``"in-process"`` when the installed Flower moved the private fields the
            grid sets (:func:`check_flower_internals`).
    """
    from flwr.app import Context, RecordDict

    if not isinstance(engine, str):
        raise TypeError(
            f"engine must be a string, one of {ENGINES}, got {type(engine).__name__}"
        )
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if (
        isinstance(num_clients, bool)
        or not isinstance(num_clients, int)
        or num_clients < 1
    ):
        raise ValueError(f"num_clients must be an int ≥ 1, got {num_clients!r}")
    if backend_config is not None and not isinstance(backend_config, Mapping):
        raise TypeError(
            f"backend_config must be a mapping such as {{'client_resources': {{'num_cpus': 1}}}} or None, "
            f"got {type(backend_config).__name__}"
        )
    with quiet_flower():
        if engine == "in-process":
            grid = LoopbackGrid(client_app, num_clients)
            with task_identity(1):  # the ServerApp runs as the SuperLink (node 1)
                server_app(
                    grid,
                    Context(
                        run_id=1,
                        node_id=1,
                        node_config={},
                        state=RecordDict(),
                        run_config={},
                    ),
                )
            return
        import ray
        from flwr.simulation import run_simulation

        ray_was_up = ray.is_initialized()
        try:
            with _telemetry_off():
                run_simulation(
                    server_app=server_app,
                    client_app=client_app,
                    num_supernodes=num_clients,
                    backend_config=dict(backend_config or {}),
                )
        finally:  # Ray's processes end with the run, also when it fails or is interrupted
            if not ray_was_up and ray.is_initialized():
                ray.shutdown()


@contextlib.contextmanager
def _telemetry_off():
    """Flower's telemetry and Ray's usage stats off inside the block, restored after (Flower sends its
    events from daemon threads that read the flag when they run: they are joined before it is)."""
    import threading

    from flwr.supercore import telemetry

    names = ("FLWR_TELEMETRY_ENABLED", "RAY_USAGE_STATS_ENABLED")
    saved = (
        telemetry.FLWR_TELEMETRY_ENABLED,
        {name: os.environ.get(name) for name in names},
    )
    telemetry.FLWR_TELEMETRY_ENABLED = "0"  # read once at import: set it for this run
    os.environ.update(dict.fromkeys(names, "0"))  # and for the Ray processes it starts
    try:
        yield
    finally:
        for thread in (
            threading.enumerate()
        ):  # Flower's pending events, sent (as "disabled") before
            target = getattr(thread, "_target", None)
            if getattr(target, "__module__", "") == telemetry.__name__:
                thread.join(timeout=30)
        telemetry.FLWR_TELEMETRY_ENABLED = saved[0]
        for name, value in saved[1].items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
