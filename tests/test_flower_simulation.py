"""Flower's simulation engine (``engine="simulation"``: ``flwr.simulation.run_simulation`` on a local
Ray) runs under the book's network guard, and its recorded FedSGD update is the in-process grid's and
``client_gradients``; the in-process grid fails loudly, naming Flower's version, when the private
fields it sets move.

The federation runs in a child process started as the Makefile's GUARD starts the build's processes
(``scripts/netguard`` first on PYTHONPATH, ``GITUTOR_NET_LOG`` set), so every Ray process it starts
carries the guard. Ray's API server looks up cloud metadata hosts at start-up whatever its settings
(see :mod:`gitutor.federated.flower_engine`): the guard refuses that look-up and files it as known,
so the guard's log stays empty while any other attempt would fill it.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

pytest.importorskip("flwr", reason="the fl extra: pip install -e '.[fl]'")
pytest.importorskip("ray", reason="the sweeps extra: pip install -e '.[sweeps]'")

from gitutor.federated import flower_engine

ROOT = Path(__file__).resolve().parents[1]
GUARD = ROOT / "scripts" / "netguard"

FEDERATION = textwrap.dedent("""
    import json
    import torch
    from gitutor.federated import client_gradients
    from gitutor.federated.flower import federated_round, update_as_gradient
    from gitutor.models import LeNet

    torch.manual_seed(0)
    model = LeNet(2, 1, 12, activation="tanh")
    gen = torch.Generator().manual_seed(1)
    partitions = [(torch.rand(2, 1, 12, 12, generator=gen), torch.tensor([0, 1])) for _ in range(2)]
    config = {"lr": 0.1}
    simulated, _ = federated_round(model, partitions, config, engine="simulation")
    in_process, _ = federated_round(model, partitions, config)
    start = [p.detach() for p in model.parameters()]
    by_partition = {u.partition: u for u in in_process}
    report = {"partitions": sorted(u.partition for u in simulated), "equal": [], "gradient": []}
    for update in simulated:
        twin = by_partition[update.partition]
        report["equal"].append(all(torch.equal(a, b) for a, b in zip(update.arrays, twin.arrays)))
        seen = update_as_gradient(update.update(start), 0.1)
        sent = client_gradients(model, *partitions[update.partition])
        report["gradient"].append(all(torch.allclose(g, w, rtol=1e-4, atol=1e-6) for g, w in zip(seen, sent)))
    print("REPORT " + json.dumps(report))
""")


def test_simulation_engine_under_the_network_guard_matches_the_in_process_update(tmp_path):
    log = tmp_path / "network-attempts.log"
    script = tmp_path / "federation.py"
    script.write_text(FEDERATION)
    env = dict(os.environ, GITUTOR_NET_LOG=str(log), PYTHONPATH=f"{GUARD}:{ROOT}", TQDM_DISABLE="1")
    env.pop("RAY_ADDRESS", None)
    run = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=400)
    lines = [line for line in run.stdout.splitlines() if line.startswith("REPORT ")]
    assert run.returncode == 0 and lines, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(lines[-1].removeprefix("REPORT "))
    assert report["partitions"] == [0, 1]  # both clients' updates arrived through Ray
    assert report["equal"] == [True, True]  # bit for bit what the in-process grid recorded
    assert report["gradient"] == [True, True]  # = −η · client_gradients (FedSGD)
    assert not log.exists() or not log.read_text(), log.read_text()  # nothing else tried the network
    known = Path(f"{log}.known")
    for line in known.read_text().splitlines() if known.exists() else []:
        assert "Ray API server" in line and ("169.254.169.254" in line or "metadata.google.internal" in line)


def test_the_known_ray_probe_is_filed_apart_only_for_rays_api_server(tmp_path):
    """The same look-up from any other process fills the guard's log (and fails the build)."""
    log = tmp_path / "net.log"
    probe = ("import socket, sys\nsys.argv[0] = sys.argv[1]\ntry:\n"
             "    socket.getaddrinfo('metadata.google.internal', 80)\nexcept OSError as e:\n    print('disabled' in str(e))")
    env = dict(os.environ, PYTHONPATH=str(GUARD), GITUTOR_NET_LOG=str(log))
    for argv0, logged in (("/x/site-packages/ray/dashboard/dashboard.py", False), ("/x/notebook.py", True)):
        out = subprocess.run([sys.executable, "-c", probe, argv0], env=env, capture_output=True, text=True,
                             timeout=60)
        assert out.stdout.strip() == "True"  # refused either way
        assert log.exists() == logged
    assert "UsageStatsHead" in Path(f"{log}.known").read_text()


def test_the_in_process_grid_checks_flowers_private_fields_and_names_the_version(monkeypatch):
    import flwr
    from flwr.supercore.task_identity import TaskIdentity

    flower_engine.check_flower_internals()  # the installed Flower (pinned) has them
    assert flwr.__version__ in SpecifierSet(flower_engine.FLOWER_TESTED)  # pyproject pins the same range
    monkeypatch.delattr(TaskIdentity, "_task_id")  # as if a Flower release renamed it
    with pytest.raises(RuntimeError, match=rf"Flower {flwr.__version__}.*TaskIdentity._task_id"):
        flower_engine.LoopbackGrid(None, 2)


def test_the_installed_flower_and_ray_lie_in_the_ranges_pyproject_pins():
    from importlib.metadata import version

    import tomllib
    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = {Requirement(text).name: Requirement(text).specifier for text in extras["fl"] + extras["sweeps"]}
    assert set(str(pins["flwr"]).split(",")) == set(flower_engine.FLOWER_TESTED.split(","))  # one statement
    for name in ("flwr", "ray"):
        assert version(name) in pins[name], f"{name} {version(name)} is outside pyproject's tested {pins[name]}"


class _Ray:
    """Stands in for ``ray``: initialised by the (stubbed) simulation, counts shutdowns."""

    def __init__(self, up=False):
        self.up, self.shutdowns = up, 0

    def is_initialized(self):
        return self.up

    def shutdown(self):
        self.up, self.shutdowns = False, self.shutdowns + 1


@pytest.mark.parametrize("failure", [RuntimeError("a client crashed"), KeyboardInterrupt()])
def test_simulation_engine_shuts_down_the_ray_it_started_when_the_run_stops(monkeypatch, failure):
    import flwr.simulation

    ray = _Ray()

    def run_simulation(**kwargs):
        ray.up = True  # Flower's backend initialises Ray, then the run stops
        raise failure

    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(flwr.simulation, "run_simulation", run_simulation)
    with pytest.raises(type(failure)):
        flower_engine.run_federation(object(), object(), 2, engine="simulation")
    assert ray.shutdowns == 1 and not ray.up


def test_simulation_engine_leaves_a_ray_it_did_not_start_running(monkeypatch):
    import flwr.simulation

    ray = _Ray(up=True)  # e.g. the sweeps' Ray, initialised before the federation
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(flwr.simulation, "run_simulation", lambda **kwargs: None)
    flower_engine.run_federation(object(), object(), 2, engine="simulation")
    assert ray.shutdowns == 0 and ray.up
