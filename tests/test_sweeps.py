"""gitutor.sweeps: independent trials in-process or on a local Ray; a failing trial is reported, not fatal."""
import importlib.util

import pytest

from gitutor.sweeps import failures, run_trials


def affine(context, a, b):
    if a < 0:
        raise RuntimeError(f"negative a={a}")
    return context["scale"] * a + b


def test_local_sweep_keeps_order_and_reports_a_failing_trial():
    outcomes = run_trials(affine, [dict(a=1, b=2), dict(a=-1, b=0), dict(a=3, b=1)], context={"scale": 10})
    assert [o.value for o in outcomes] == [12, None, 31]
    assert [o.ok for o in outcomes] == [True, False, True]
    assert outcomes[1].error == "RuntimeError: negative a=-1"
    assert failures(outcomes) == "* trial {'a': -1, 'b': 0}: RuntimeError: negative a=-1"


def test_sweep_in_two_processes_keeps_order_and_reports_a_failing_trial():
    outcomes = run_trials(affine, [dict(a=1, b=2), dict(a=-1, b=0), dict(a=3, b=1)], context={"scale": 10},
                          engine="processes", num_cpus=2)
    assert [o.value for o in outcomes] == [12, None, 31]
    assert outcomes[1].error == "RuntimeError: negative a=-1"
    with pytest.raises(ValueError, match="num_cpus"):
        run_trials(affine, [dict(a=1, b=2)], engine="processes", num_cpus=0)


def test_bad_engine_and_trials_raise():
    with pytest.raises(ValueError, match="engine"):
        run_trials(affine, [], engine="spark")
    with pytest.raises(ValueError, match="mappings"):
        run_trials(affine, [(1, 2)])


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install -e '.[sweeps]')")
def test_two_trial_sweep_on_a_local_ray():
    def remote_affine(context, a, b):  # defined here so that Ray pickles it by value (tests are no package)
        if a < 0:
            raise RuntimeError(f"negative a={a}")
        return context["scale"] * a + b

    outcomes = run_trials(remote_affine, [dict(a=2, b=1), dict(a=-2, b=0)], context={"scale": 3}, engine="ray", num_cpus=1)
    assert outcomes[0].value == 7 and outcomes[0].ok
    assert not outcomes[1].ok and "negative a=-2" in outcomes[1].error


WORKERS = """
import os, sys, time
from gitutor.sweeps import run_trials

def trial(context, a):
    with open(os.path.join(sys.argv[1], f"worker-{a}"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
    return a

if __name__ == "__main__":
    run_trials(trial, [dict(a=0), dict(a=1)], engine="processes", num_cpus=2)
"""


def test_workers_end_when_their_parent_is_killed(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    script = tmp_path / "sweep.py"
    script.write_text(WORKERS)
    root = Path(__file__).resolve().parents[1]
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)],
                              env={**os.environ, "PYTHONPATH": str(root)})
    files = [tmp_path / "worker-0", tmp_path / "worker-1"]
    deadline = time.monotonic() + 120
    while not all(f.is_file() and f.read_text() for f in files) and time.monotonic() < deadline:
        time.sleep(0.2)
    pids = [int(f.read_text()) for f in files]
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [pid for pid in pids if _running(pid)]
    assert alive == [], "workers outlived their killed parent"


def _running(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie waiting for init to reap it has ended
        return stat.read().split()[2] != "Z"


def test_a_journaled_trial_gets_its_checkpoint_and_it_is_removed_once_journaled(tmp_path):
    from gitutor.checkpoints import Checkpoint

    seen = []

    def trial(context, a, checkpoint=None):
        assert isinstance(checkpoint, Checkpoint) and checkpoint.path.parent.name == "sweep.jsonl.checkpoints"
        checkpoint.save({}, {"a": a})
        seen.append(checkpoint)
        return a

    outcomes = run_trials(trial, [dict(a=0), dict(a=1)], journal=tmp_path / "sweep.jsonl", checkpoint_every=7)
    assert [o.value for o in outcomes] == [0, 1] and {c.every for c in seen} == {7}
    assert len({c.path for c in seen}) == 2 and not any(c.path.exists() for c in seen)
    assert len({c.key for c in seen}) == 2
    unjournaled = []
    run_trials(lambda context, a, checkpoint=None: unjournaled.append(checkpoint), [dict(a=0)])
    assert unjournaled == [None]


def test_run_trials_takes_a_generator_and_refuses_bad_resources():
    assert [o.value for o in run_trials(lambda context, a: a, (dict(a=a) for a in range(3)))] == [0, 1, 2]
    for kwargs, error, match in ((dict(cpus_per_trial="1"), TypeError, "cpus_per_trial"),
                                 (dict(cpus_per_trial=True), TypeError, "cpus_per_trial"),
                                 (dict(num_cpus=2.0), TypeError, "num_cpus"),
                                 (dict(checkpoint_every=10), ValueError, "checkpoint_every needs a journal"),
                                 (dict(engine="Ray"), ValueError, "engine")):
        with pytest.raises(error, match=match):
            run_trials(lambda context, a: a, [dict(a=1)], **kwargs)
