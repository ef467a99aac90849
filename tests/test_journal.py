"""A sweep with a journal resumes: a killed sweep reruns only its missing trials and returns what an
uninterrupted one returns; failed trials are not journaled; bad journals are named."""
import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from gitutor.journal import Journal, from_json, to_json, trial_key
from gitutor.sweeps import run_trials

ROOT = Path(__file__).resolve().parents[1]

SWEEP = textwrap.dedent("""
    import json, os, sys
    from gitutor.sweeps import run_trials

    def trial(context, a, b):
        if a == int(os.environ.get("CRASH_AT", -1)):
            os._exit(9)  # the machine is taken back in the middle of this trial
        print("ran", a, flush=True)
        return {"sum": a + b, "pair": (a, b)}

    if __name__ == "__main__":
        outcomes = run_trials(trial, [dict(a=a, b=10 * a) for a in range(6)], journal=sys.argv[1])
        print(json.dumps([[o.trial, repr(o.value), o.error] for o in outcomes]))
""")


def _sweep(script: Path, journal: Path, crash_at: int | None = None) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    if crash_at is not None:
        env["CRASH_AT"] = str(crash_at)
    return subprocess.run([sys.executable, str(script), str(journal)], capture_output=True, text=True, check=False,
                          env=env, cwd=script.parent, timeout=120)


def test_a_killed_sweep_resumes_with_only_its_missing_trials_and_the_same_outcomes(tmp_path):
    script = tmp_path / "sweep.py"
    script.write_text(SWEEP)
    killed = _sweep(script, tmp_path / "killed.jsonl", crash_at=4)
    assert killed.returncode == 9
    assert killed.stdout.split("\n")[:4] == ["ran 0", "ran 1", "ran 2", "ran 3"]
    assert len((tmp_path / "killed.jsonl").read_text().splitlines()) == 1 + 4  # header, each trial when it finished

    resumed = _sweep(script, tmp_path / "killed.jsonl")
    uninterrupted = _sweep(script, tmp_path / "whole.jsonl")
    assert resumed.returncode == 0 and uninterrupted.returncode == 0, resumed.stderr + uninterrupted.stderr
    assert [line for line in resumed.stdout.splitlines() if line.startswith("ran")] == ["ran 4", "ran 5"]
    assert resumed.stdout.splitlines()[-1] == uninterrupted.stdout.splitlines()[-1]
    assert "(0, 0)" in resumed.stdout  # tuples come back as tuples

    again = _sweep(script, tmp_path / "killed.jsonl")  # everything journaled: nothing runs
    assert not [line for line in again.stdout.splitlines() if line.startswith("ran")]
    assert again.stdout.splitlines()[-1] == uninterrupted.stdout.splitlines()[-1]


RAN: list = []  # what ran, and which trials break: kept outside the context, which is read-only and
FAIL: set = set()  # part of what a journal entry is keyed by (a changed context runs anew)


@pytest.fixture(autouse=True)
def _fresh_bookkeeping():
    RAN.clear()
    FAIL.clear()


def flaky(context, a):
    if a in FAIL:
        raise RuntimeError(f"trial {a} broke")
    RAN.append(a)
    return {"a": a, "image": torch.full((1, 2, 2), float(a) * context["scale"])}


def test_failed_trials_are_not_journaled_and_run_again(tmp_path):
    journal = tmp_path / "sweep.jsonl"
    FAIL.add(1)
    outcomes = run_trials(flaky, [dict(a=a) for a in range(3)], context={"scale": 1}, journal=journal)
    assert [o.ok for o in outcomes] == [True, False, True]
    assert outcomes[1].error == "RuntimeError: trial 1 broke"
    assert len(journal.read_text().splitlines()) == 1 + 2
    FAIL.clear()
    RAN.clear()
    outcomes = run_trials(flaky, [dict(a=a) for a in range(3)], context={"scale": 1}, journal=journal)
    assert RAN == [1] and all(o.ok for o in outcomes)
    assert torch.equal(outcomes[2].value["image"], torch.full((1, 2, 2), 2.0))


def test_a_trial_cut_short_mid_line_is_dropped_and_a_broken_line_is_named(tmp_path):
    journal = tmp_path / "sweep.jsonl"
    context = {"scale": 1}
    run_trials(flaky, [dict(a=0), dict(a=1)], context=context, journal=journal)
    whole = journal.read_bytes()
    journal.write_bytes(whole[: len(whole) - 7])  # killed while writing the second line
    RAN.clear()
    outcomes = run_trials(flaky, [dict(a=0), dict(a=1)], context=context, journal=journal)
    assert RAN == [1] and [o.value["a"] for o in outcomes] == [0, 1]
    assert len(journal.read_text().splitlines()) == 1 + 2

    journal.write_text('{"gitutor_journal": 1}\n{not json}\n')
    with pytest.raises(ValueError, match=r"sweep\.jsonl, line 2"):
        run_trials(flaky, [dict(a=0)], context=context, journal=journal)


@pytest.mark.parametrize("content", [
    json.dumps({"rows": [{"quantity": "PSNR", "this_run": 12.0}]}).encode(),  # a record by json.dump: one line
    b"\x08\x00\x00\x00\x00\x00\x00\x00{}\x00\x00\x00\nnot text",  # a safetensors-like binary file
    b'{"trial": {"a": 0}, "value": 1, "seconds": 0.1}\n{"trial": {"a": 1}, "val',  # the format before the header
    b"", b"{not json}\n"])
def test_a_file_that_is_not_a_journal_is_refused_and_left_byte_identical(tmp_path, content):
    path = tmp_path / "r.json"
    path.write_bytes(content)
    RAN.clear()
    with pytest.raises(ValueError, match=r"r\.json is not a gitutor journal"):
        run_trials(flaky, [dict(a=0)], context={"scale": 1}, journal=path)
    with pytest.raises(ValueError, match=r"r\.json is not a gitutor journal"):
        Journal(path).read()
    assert path.read_bytes() == content and RAN == []


@dataclass(frozen=True)
class Knob:
    size: int = 1


def test_trials_are_keyed_by_canonical_parameters_and_duplicates_are_refused(tmp_path):
    assert trial_key({"b": 1, "a": (1, 2)}) == trial_key({"a": [1, 2], "b": 1}) == '{"a":[1,2],"b":1}'
    assert trial_key({"k": Knob(3)}) == '{"k":{"size":3}}'
    with pytest.raises(TypeError, match="cannot be journaled"):
        trial_key({"a": object()})
    with pytest.raises(ValueError, match=r"trials\[0\] and trials\[1\]"):
        run_trials(flaky, [dict(a=0), dict(a=0)], context={"scale": 1}, journal=tmp_path / "j.jsonl")


def test_values_round_trip_exactly_and_custom_codecs_apply(tmp_path):
    value = {"x": torch.randn(2, 3, dtype=torch.float64), "t": (1, [2.5, None]), "s": "ok"}
    back = from_json(json.loads(json.dumps(to_json(value))))
    assert torch.equal(back["x"], value["x"]) and back["x"].dtype == torch.float64
    assert back["t"] == (1, [2.5, None]) and back["s"] == "ok"
    with pytest.raises(TypeError, match="set"):
        to_json({"a": {1, 2}})
    book = Journal(tmp_path / "j.jsonl", encode=lambda v: {"half": v / 2}, decode=lambda v: v["half"] * 2)
    book.append({"a": 1}, 8, 0.5)
    assert book.read() == {'{"a":1}': (8, None, 0.5)}
    with pytest.raises(TypeError, match="encode"):
        Journal(tmp_path / "j.jsonl", encode=3)


def test_without_a_journal_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_trials(flaky, [dict(a=0)], context={"scale": 1})
    assert list(tmp_path.iterdir()) == []


def test_the_journals_folder_of_the_environment_journals_every_sweep(tmp_path, monkeypatch):
    monkeypatch.setenv("GITUTOR_JOURNALS", str(tmp_path / "journals"))
    context = {"scale": 1}
    run_trials(flaky, [dict(a=0), dict(a=1)], context=context)
    run_trials(flaky, [dict(a=0), dict(a=1)], context=context)
    assert RAN == [0, 1]
    (journal,) = (tmp_path / "journals").iterdir()
    assert journal.name.startswith("test_journal.flaky-") and journal.suffix == ".jsonl"
