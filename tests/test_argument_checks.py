"""Bad input gets a clear error naming the argument or the file, and every writer of a record leaves
the old record byte-identical when it fails (issue 28)."""
import hashlib
import importlib.util
import json
import math
import pathlib
import shutil
from pathlib import Path

import pytest
import torch
from PIL import Image

from gitutor.attacks.inverting_gradients import step_milestones
from gitutor.attacks.loop import step_schedule
from gitutor.data import load
from gitutor.files import atomic_paths, read_json, write_json
from gitutor.models.substitute import (
    SHIPPED,
    TrainingConfig,
    load_substitute,
    save_substitute,
)
from gitutor.chapters import get_profile
from gitutor.results import collect_results, save_results
from gitutor.budgets import budget_for
from gitutor.stats import Interval, compare
from gitutor.chapters.stepwise_gradinversion.recording import (
    load_reconstructions,
    save_reconstructions,
)
from gitutor.sweeps import run_trials

ROOT = Path(__file__).resolve().parents[1]
ROW = {"quantity": "PSNR", "setting": "B = 1", "paper": 30.0, "this_run": 31.0, "unit": "dB",
       "differences": "none", "better": "higher"}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the examples of the issue ----------------------------------------------------------------------

@pytest.mark.parametrize("change, name", [({"lr": -0.05}, "lr"), ({"lr": math.nan}, "lr"), ({"lr": math.inf}, "lr"),
                                          ({"jitter": 1.5}, "jitter"), ({"seed": -1}, "seed"),
                                          ({"min_scale": 0.0}, "min_scale"), ({"steps": 0}, "steps")])
def test_training_config_refuses_bad_rates_and_counts(change, name):
    with pytest.raises(ValueError, match=f"^{name} must be"):
        TrainingConfig(**change)


def test_an_interval_with_low_above_high_cannot_be_made_so_compare_cannot_be_fooled():
    with pytest.raises(ValueError, match="low ≤ mean ≤ high"):
        compare(Interval(1.0, low=2.0, high=0.0, n=3), Interval(0.5, 0.4, 0.6, 3))
    for bad in [dict(mean=math.nan, low=0.0, high=1.0, n=3), dict(mean=0.5, low=0.0, high=1.0, n=0),
                dict(mean=2.0, low=0.0, high=1.0, n=3)]:
        with pytest.raises(ValueError, match="Interval needs"):
            Interval(**bad)
    with pytest.raises(TypeError, match="n must be an int"):
        Interval(0.5, 0.0, 1.0, 2.5)
    assert Interval(1.0, -math.inf, math.inf, 1).n == 1  # one trial: unbounded, allowed


def test_an_image_folder_with_fewer_images_than_asked_is_refused(tmp_path):
    for i in range(2):
        (tmp_path / "class_a").mkdir(exist_ok=True)
        Image.new("RGB", (40, 40), (40 * i, 80, 120)).save(tmp_path / "class_a" / f"{i}.png")
    images, _ = load("imagefolder", 2, root=tmp_path, size=16)
    assert images.shape == (2, 3, 16, 16)
    with pytest.raises(ValueError, match=r"n=5 but image folder .* holds only 2 images"):
        load("imagefolder", 5, root=tmp_path, size=16)


def _recording(path: Path) -> None:
    truth = [torch.rand(1, 3, 8, 8)]
    run = {"images": truth[0].clone(), "snapshots": [(0, torch.rand(1, 3, 8, 8)), (5, truth[0])]}
    save_reconstructions(path, truth, {"Inverting Gradients": [run]})


def test_a_truncated_or_incomplete_recording_is_named(tmp_path):
    path = tmp_path / "04.safetensors"
    _recording(path)
    assert len(load_reconstructions(path)["truth"]) == 1
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=f"{path} is not a readable safetensors file"):
        load_reconstructions(path)
    with pytest.raises(FileNotFoundError, match="no chapter 04 reconstructions"):
        load_reconstructions(tmp_path / "missing.safetensors")


def _shipped_copy(tmp_path: Path) -> Path:
    path = tmp_path / "substitute.safetensors"
    shutil.copyfile(SHIPPED / "substitute_resnet20.safetensors", path)
    shutil.copyfile(SHIPPED / "substitute_resnet20.json", path.with_suffix(".json"))
    return path


def test_a_substitute_whose_manifest_names_another_architecture_is_named(tmp_path):
    path = _shipped_copy(tmp_path)
    manifest = json.loads(path.with_suffix(".json").read_text())
    manifest["config"]["architecture"] = "resnet34"
    path.with_suffix(".json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"substitute\.json names the architecture 'resnet34' but the weights "
                                         r"in substitute\.safetensors are those of 'resnet20'"):
        load_substitute(path)
    path.with_suffix(".json").write_text(json.dumps(manifest)[:50])
    with pytest.raises(ValueError, match=r"substitute\.json is not valid JSON \(truncated\?\)"):
        load_substitute(path)


def test_collect_results_names_a_truncated_or_malformed_record(tmp_path):
    save_results("01_dlg", "quick", [ROW], tmp_path)
    record = tmp_path / "01_dlg.json"
    assert collect_results(tmp_path)[0]["rows"][0]["this_run"] == 31.0
    record.write_text(record.read_text()[:-20])
    with pytest.raises(ValueError, match=r"01_dlg\.json is not valid JSON \(truncated\?\)"):
        collect_results(tmp_path)
    record.write_text(json.dumps({"notebook": "01_dlg", "rows": [{"quantity": "x"}]}))
    with pytest.raises(ValueError, match=r"01_dlg\.json is not a results record: rows\[0\]"):
        collect_results(tmp_path)


# --- the same classes elsewhere ---------------------------------------------------------------------

@pytest.mark.parametrize("change", [{"iterations": 0}, {"iterations": 2.5}, {"record_every": 0},
                                    {"image_size": -32}, {"torch_threads": 0}])
def test_profile_settings_named_as_counts_are_checked(change):
    name = next(iter(change))
    with pytest.raises(ValueError, match=f"setting {name} of the quick profile of 01_dlg is a count"):
        get_profile("01_dlg").replace(**change)


def test_profile_learning_rates_and_rates_are_checked():
    cfg = get_profile("07_admm_comparison")
    with pytest.raises(ValueError, match="setting lr .* is a learning rate"):
        cfg.replace(lr=0.0)
    cfg = get_profile("06_learning_to_invert")
    with pytest.raises(ValueError, match="setting val_fraction .* is a rate or fraction"):
        cfg.replace(val_fraction=1.5)


def test_schedules_refuse_bad_milestones_gammas_and_iterations():
    with pytest.raises(ValueError, match="gamma"):
        step_schedule([10], -0.1)
    with pytest.raises(ValueError, match="milestones"):
        step_schedule([-3], 0.1)
    with pytest.raises(ValueError, match="iterations"):
        step_milestones(0)
    with pytest.raises(ValueError, match="fractions"):
        step_milestones(100, (0.5, 1.5))
    with pytest.raises(ValueError, match="max_factor"):
        budget_for([1, 2], [1.0, 2.0], 3.0, max_factor=0.5)


def test_sweeps_refuse_non_finite_resources_and_bad_worker_counts():
    for bad in [dict(cpus_per_trial=math.nan), dict(gpus_per_trial=math.inf), dict(num_cpus=0)]:
        with pytest.raises(ValueError):
            run_trials(lambda context, a: a, [{"a": 1}], **bad)
    with pytest.raises(TypeError, match="num_cpus must be an int"):
        run_trials(lambda context, a: a, [{"a": 1}], num_cpus=1.5)
    with pytest.raises(TypeError, match="callable"):
        run_trials("not a function", [{"a": 1}])


def test_read_json_names_a_missing_empty_or_binary_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="record .*nothing.json does not exist"):
        read_json(tmp_path / "nothing.json")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(ValueError, match="empty.json is not valid JSON"):
        read_json(tmp_path / "empty.json")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="binary.json is not UTF-8"):
        read_json(tmp_path / "binary.json")


# --- every writer, run into a failure, leaves the old record byte-identical ---------------------------

class DiskFull(OSError):
    pass


def test_atomic_paths_leave_the_targets_and_no_temporary_file_on_failure(tmp_path):
    old = [tmp_path / "a.json", tmp_path / "b.bin"]
    old[0].write_text("old a")
    old[1].write_bytes(b"old b")
    before = {p: sha(p) for p in old}
    with pytest.raises(DiskFull), atomic_paths(*old) as (a, b):
        a.write_text("new a")
        b.write_bytes(b"half of b")
        raise DiskFull
    assert {p: sha(p) for p in old} == before and sorted(tmp_path.iterdir()) == sorted(old)
    with atomic_paths(*old) as (a, b):
        a.write_text("new a")
        b.write_bytes(b"new b")
    assert old[0].read_text() == "new a" and old[1].read_bytes() == b"new b"
    assert oct(old[0].stat().st_mode & 0o777) == "0o644"
    with pytest.raises(ValueError, match="differ"), atomic_paths(old[0], old[0]):
        pass


def _fail_half_way(monkeypatch):
    """Every text write writes half of its text, then the disk is full."""
    def write_text(self, text, *args, **kwargs):
        with open(self, "w") as file:
            file.write(text[: len(text) // 2])
        raise DiskFull(f"no space left writing {self}")
    monkeypatch.setattr(pathlib.Path, "write_text", write_text)


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"script_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_text_writers_failing_half_way_leave_the_old_files_byte_identical(tmp_path, monkeypatch):
    save_results("01_dlg", "quick", [ROW], tmp_path)
    notebook = tmp_path / "page.ipynb"
    notebook.write_text(json.dumps({"cells": [{"id": "colab-setup", "cell_type": "code", "source": ["old"],
                                               "metadata": {"tags": ["injected-parameters"]}}]}))
    write_json(tmp_path / "study.json", {"trials": []})
    before = {p: sha(p) for p in tmp_path.iterdir()}
    execute_notebooks, sync_colab_cell = _script("execute_notebooks"), _script("sync_colab_cell")
    _fail_half_way(monkeypatch)
    writers = [lambda: save_results("01_dlg", "quick", [{**ROW, "this_run": 1.0}], tmp_path),
               lambda: execute_notebooks.hide_injected_parameters(notebook),
               lambda: sync_colab_cell.sync(notebook, "new source"),
               lambda: write_json(tmp_path / "study.json", {"trials": [1]})]
    for writer in writers:
        with pytest.raises(DiskFull):
            writer()
    assert {p: sha(p) for p in tmp_path.iterdir()} == before


def test_binary_writers_failing_half_way_leave_the_old_files_byte_identical(tmp_path, monkeypatch):
    from gitutor.models import substitute
    from gitutor.chapters.stepwise_gradinversion import recording as stepwise_recording

    weights = _shipped_copy(tmp_path)
    _recording(tmp_path / "04.safetensors")
    before = {p: sha(p) for p in tmp_path.iterdir()}

    def save_file(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half a file")
        raise DiskFull(filename)

    monkeypatch.setattr(substitute, "save_file", save_file)
    monkeypatch.setattr(stepwise_recording, "save_file", save_file)
    model = load_substitute(weights)
    with pytest.raises(DiskFull):
        save_substitute(model, {"config": {"architecture": "resnet20"}}, weights)
    with pytest.raises(DiskFull):
        _recording(tmp_path / "04.safetensors")
    assert {p: sha(p) for p in tmp_path.iterdir()} == before
