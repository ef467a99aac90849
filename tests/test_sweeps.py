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


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed (pip install 'gitutor[sweeps]')")
def test_two_trial_sweep_on_a_local_ray():
    def remote_affine(context, a, b):  # defined here so that Ray pickles it by value (tests are no package)
        if a < 0:
            raise RuntimeError(f"negative a={a}")
        return context["scale"] * a + b

    outcomes = run_trials(remote_affine, [dict(a=2, b=1), dict(a=-2, b=0)], context={"scale": 3}, engine="ray", num_cpus=1)
    assert outcomes[0].value == 7 and outcomes[0].ok
    assert not outcomes[1].ok and "negative a=-2" in outcomes[1].error
