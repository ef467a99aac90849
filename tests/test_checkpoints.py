"""Checkpoints inside a run (gitutor.checkpoints): a killed trial resumes to the uninterrupted result."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from gitutor.attacks import gradinversion, inverting_gradients, stepwise_inversion
from gitutor.attacks.loop import optimise_images
from gitutor.attacks.stepwise_options import StepwiseOptions
from gitutor.attacks.stepwise_schedule import StepwiseSchedule
from gitutor.checkpoints import Checkpoint
from gitutor.federated import client_gradients

ROOT = Path(__file__).resolve().parents[1]


def tiny_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4)).eval()


def case():
    model = tiny_net()
    x = torch.rand(1, 3, 12, 12, generator=torch.Generator().manual_seed(3))
    y = torch.tensor([2])
    return model, x, y, client_gradients(model, x, y)


def stepwise(model, grads, y, checkpoint=None, iterations=40):
    schedule = StepwiseSchedule.paper(iterations, len(grads), floor=2, authors_timing=True)
    return stepwise_inversion(model, grads, y, (1, 3, 12, 12), iterations=iterations, schedule=schedule,
                              tv_weight=5e-3, bn_weight=1e-4, seed=1, record_every=7,
                              options=StepwiseOptions.authors(), diagnose_at=(schedule.t1, iterations - 1),
                              checkpoint=checkpoint)


def same(a, b) -> None:
    assert torch.equal(a.images, b.images)
    assert a.history == b.history
    assert [t for t, _ in a.snapshots] == [t for t, _ in b.snapshots]
    assert all(torch.equal(p, q) for (_, p), (_, q) in zip(a.snapshots, b.snapshots))
    assert a.info == b.info


class Interrupt(Exception):
    pass


def interrupted_at(objective, stop: int):
    """``objective`` that raises at iteration ``stop`` (the run is cut there, as by a kill)."""
    def wrapped(x, t):
        if t == stop:
            raise Interrupt
        return objective(x, t)
    return wrapped


def test_stepwise_resumes_bit_for_bit_after_an_interruption(tmp_path, monkeypatch):
    model, _, y, grads = case()
    reference = stepwise(model, grads, y)
    checkpoint = Checkpoint(tmp_path / "trial.pt", every=10, key="trial 0")
    import gitutor.attacks.stepwise as module

    original = module.StepwiseObjective.__call__
    monkeypatch.setattr(module.StepwiseObjective, "__call__",
                        lambda self, z, t: (_ for _ in ()).throw(Interrupt) if t == 27 else original(self, z, t))
    with pytest.raises(Interrupt):
        stepwise(model, grads, y, checkpoint)
    assert torch.load(checkpoint.path, weights_only=True)["state"]["t"] == 20
    monkeypatch.setattr(module.StepwiseObjective, "__call__", original)
    resumed = stepwise(model, grads, y, checkpoint)
    same(resumed, reference)
    assert set(reference.info["prior_gradients"]) == {"8", "39"}  # t1 and the last iteration
    # a finished checkpoint returns the result without a step: one evaluation only, at the start, to
    # fingerprint the objective
    calls = []
    monkeypatch.setattr(module.StepwiseObjective, "__call__",
                        lambda self, z, t: calls.append(t) or original(self, z, t))
    same(stepwise(model, grads, y, checkpoint), reference)
    assert calls == [0]


def test_inverting_gradients_with_restarts_resumes_each_restart(tmp_path, monkeypatch):
    model, _, y, grads = case()
    kwargs = dict(iterations=24, tv_weight=0.1, restarts=2, seed=4, record_every=5,
                  normalisation=((0.5, 0.4, 0.3), (0.2, 0.25, 0.3)))
    reference = inverting_gradients(model, grads, y, (1, 3, 12, 12), **kwargs)
    assert reference.info["restart"] in (0, 1) and len(reference.info["restart_distances"]) == 2
    assert reference.info["restart_distances"][reference.info["restart"]] == min(reference.info["restart_distances"])
    checkpoint = Checkpoint(tmp_path / "ig.pt", every=4)
    import gitutor.attacks.loop as loop

    calls = {"n": 0}
    original = loop._closure

    def counting(objective, *args):
        calls["n"] += 1
        if calls["n"] == 24 + 13:  # in the second restart's 14th step
            raise Interrupt
        return original(objective, *args)

    monkeypatch.setattr(loop, "_closure", counting)
    with pytest.raises(Interrupt):
        inverting_gradients(model, grads, y, (1, 3, 12, 12), checkpoint=checkpoint, **kwargs)
    monkeypatch.setattr(loop, "_closure", original)
    assert (tmp_path / "ig.part-restart0.pt").is_file() and (tmp_path / "ig.part-restart1.pt").is_file()
    same(inverting_gradients(model, grads, y, (1, 3, 12, 12), checkpoint=checkpoint, **kwargs), reference)


def test_lbfgs_and_extra_variables_resume(tmp_path):
    target = torch.tensor([[0.3, -0.2]])

    def objective(x, t):
        return {"loss": ((x - 0.25) ** 2).sum() + ((logits - target) ** 2).sum()}

    logits = torch.zeros(1, 2, requires_grad=True)
    x0 = torch.full((1, 1, 2, 2), 0.9)
    reference = optimise_images(objective, x0, iterations=6, lr=0.01, step_rule="lbfgs", signed=False,
                                extra_variables=[logits])
    reference_logits = logits.detach().clone()
    logits = torch.zeros(1, 2, requires_grad=True)
    checkpoint = Checkpoint(tmp_path / "lbfgs.pt", every=2)
    with pytest.raises(Interrupt):
        optimise_images(interrupted_at(objective, 3), x0, iterations=6, lr=0.01, step_rule="lbfgs", signed=False,
                        extra_variables=[logits], checkpoint=checkpoint)
    logits = torch.zeros(1, 2, requires_grad=True)
    resumed = optimise_images(objective, x0, iterations=6, lr=0.01, step_rule="lbfgs", signed=False,
                              extra_variables=[logits], checkpoint=checkpoint)
    same(resumed, reference)
    assert torch.equal(logits.detach(), reference_logits)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_checkpoint_of_another_run_or_not_a_checkpoint_is_refused_and_kept(tmp_path):
    model, _, y, grads = case()
    checkpoint = Checkpoint(tmp_path / "run.pt", every=5, key="a")
    stepwise(model, grads, y, checkpoint, iterations=10)
    before = sha(checkpoint.path)
    with pytest.raises(ValueError, match="run.pt belongs to another run.*iterations"):
        stepwise(model, grads, y, checkpoint, iterations=12)
    with pytest.raises(ValueError, match="run.pt belongs to another run.*key"):
        stepwise(model, grads, y, Checkpoint(checkpoint.path, every=5, key="b"))
    with pytest.raises(ValueError, match="run.pt belongs to another run.*start"):
        gradinversion(model, grads, y, (1, 3, 12, 12), iterations=10, seed=9, checkpoint=checkpoint)
    assert sha(checkpoint.path) == before
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"rows": [1, 2]}))
    kept = sha(record)
    with pytest.raises(ValueError, match="record.json is not a gitutor checkpoint"):
        stepwise(model, grads, y, Checkpoint(record, every=5, key="a"), iterations=10)
    assert sha(record) == kept


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(every=0), ValueError, "every must be an int ≥ 1"), (dict(every=2.5), TypeError, "every must be an int"),
    (dict(every=True), TypeError, "every must be an int"), (dict(key=3), TypeError, "key must be a str")])
def test_checkpoint_arguments_are_checked(tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        Checkpoint(tmp_path / "c.pt", **kwargs)


def test_checkpoint_path_that_is_a_folder_is_refused(tmp_path):
    with pytest.raises(ValueError, match="is a folder"):
        Checkpoint(tmp_path, every=3)
    with pytest.raises(TypeError, match="path must be a str or path"):
        Checkpoint(3, every=3)
    with pytest.raises(TypeError, match="checkpoint must be a gitutor.checkpoints.Checkpoint"):
        optimise_images(lambda x, t: {"loss": x.sum()}, torch.zeros(1, 1, 2, 2), iterations=1, lr=0.1,
                        checkpoint=str(tmp_path / "c.pt"))


CHILD = textwrap.dedent("""
    import sys, time, torch
    sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
    torch.set_num_threads(1)
    from test_checkpoints import case, stepwise
    from gitutor.checkpoints import Checkpoint
    import gitutor.attacks.stepwise as module
    slow = float(sys.argv[2])
    original = module.StepwiseObjective.__call__
    def call(self, z, t):
        time.sleep(slow)
        return original(self, z, t)
    module.StepwiseObjective.__call__ = call
    model, _, y, grads = case()
    checkpoint = Checkpoint(sys.argv[1], every=5, key="kill") if sys.argv[1] != "-" else None
    result = stepwise(model, grads, y, checkpoint, iterations=60)
    torch.save({{"images": result.images, "history": result.history, "info": result.info,
                 "snapshots": result.snapshots}}, sys.argv[3])
""")


def test_sigkill_mid_run_then_resume_equals_the_uninterrupted_run(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(root=str(ROOT), tests=str(ROOT / "tests")))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, str(script), "-", "0", str(tmp_path / "reference.pt")], check=True, env=env)
    checkpoint = tmp_path / "killed.pt"
    child = subprocess.Popen([sys.executable, str(script), str(checkpoint), "0.05", str(tmp_path / "never.pt")],
                             env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        if checkpoint.is_file() and torch.load(checkpoint, weights_only=True)["state"]["t"] >= 15:
            break
        time.sleep(0.05)
    assert child.poll() is None, "the run ended before it could be killed"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    saved = torch.load(checkpoint, weights_only=True)["state"]
    assert 15 <= saved["t"] < 60 and not saved["done"]
    subprocess.run([sys.executable, str(script), str(checkpoint), "0", str(tmp_path / "resumed.pt")], check=True,
                   env=env)
    reference, resumed = (torch.load(tmp_path / name, weights_only=True) for name in ("reference.pt", "resumed.pt"))
    assert not (tmp_path / "never.pt").exists()
    assert torch.equal(reference["images"], resumed["images"])
    assert reference["history"] == resumed["history"] and reference["info"] == resumed["info"]
    assert all(torch.equal(p, q) for (_, p), (_, q) in zip(reference["snapshots"], resumed["snapshots"]))


def test_a_checkpoint_of_another_objective_target_or_schedule_is_refused(tmp_path):
    model, x, y, grads = case()
    checkpoint = Checkpoint(tmp_path / "ig.pt", every=2)
    kwargs = dict(iterations=4, tv_weight=0.1, seed=0, record_every=2)
    inverting_gradients(model, grads, y, (1, 3, 12, 12), checkpoint=checkpoint, **kwargs)
    before = sha(checkpoint.path)
    other = client_gradients(model, torch.rand(1, 3, 12, 12, generator=torch.Generator().manual_seed(9)), y)
    for call in (lambda: inverting_gradients(model, other, y, (1, 3, 12, 12), checkpoint=checkpoint, **kwargs),
                 lambda: inverting_gradients(model, grads, y, (1, 3, 12, 12), checkpoint=checkpoint,
                                             **{**kwargs, "tv_weight": 5.0})):
        with pytest.raises(ValueError, match="belongs to another run.*objective at the start"):
            call()
    with pytest.raises(ValueError, match="belongs to another run.*schedule"):
        inverting_gradients(model, grads, y, (1, 3, 12, 12), checkpoint=checkpoint, lr_steps=(0.5,), **kwargs)
    assert sha(checkpoint.path) == before


def test_remove_deletes_its_parts_and_no_other_file(tmp_path):
    run, other = Checkpoint(tmp_path / "run.pt"), tmp_path / "run.v2.pt"
    for path in (run.path, run.part("restart0").path, other, tmp_path / "run[1].pt"):
        path.write_bytes(b"x")
    run.remove()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.v2.pt", "run[1].pt"]
