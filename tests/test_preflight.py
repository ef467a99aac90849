"""The full profile's preflight (gitutor.preflight): every missing input listed at once with its
command, a run estimated longer than LONG_RUN_S stopped unless ALLOW_SLOW, before any long work —
chapter 08's estimate and the notebooks' setup cells that call it (without running a chapter)."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import gitutor
from gitutor import preflight as pf
from gitutor.errors import OfflineDataError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("profile", "seconds", "allow_slow", "stops"),
    [
        ("full", pf.LONG_RUN_S + 1, False, True),
        ("full", pf.LONG_RUN_S + 1, True, False),  # asked to go on
        ("full", pf.LONG_RUN_S, False, False),  # not longer than the limit
        ("quick", 10 * pf.LONG_RUN_S, False, False),  # only the full profile stops
    ],
)
def test_stops_for_time_decides_by_profile_estimate_and_allow_slow(
    profile, seconds, allow_slow, stops
):
    assert pf.stops_for_time(profile, seconds, allow_slow) is stops


def test_stops_for_time_refuses_bad_arguments():
    with pytest.raises(TypeError, match="allow_slow"):
        pf.stops_for_time("full", 1.0, "yes")
    for seconds in (-1.0, math.nan, "1"):
        with pytest.raises(ValueError, match="seconds"):
            pf.stops_for_time("full", seconds, False)


def test_preflight_lists_every_missing_input_and_the_estimate_at_once(capsys):
    missing = ["CIFAR100 is not in /x: …", "MNIST is not in /x: …"]
    with pytest.raises(pf.PreflightError) as stop:
        pf.preflight(missing, profile="full", device="cpu", estimate=lambda: 7200.0)
    message = str(stop.value)
    assert isinstance(stop.value, OfflineDataError)
    assert all(line in message for line in missing)
    assert "an estimated 2.0 h" in message and "ALLOW_SLOW = True" in message
    # asked to go on: the estimate is said and nothing stops
    pf.preflight([], profile="full", device="cpu", allow_slow=True, estimate=lambda: 7200.0)
    assert "an estimated 2.0 h" in capsys.readouterr().out


def test_preflight_estimates_only_for_the_full_profile():
    def never():
        raise AssertionError("the quick profile must not time anything")

    pf.preflight([], profile="quick", device="cpu", estimate=never)
    with pytest.raises(pf.PreflightError, match="MNIST"):
        pf.preflight(["MNIST …"], profile="quick", device="cpu")
    with pytest.raises(TypeError, match="allow_slow"):
        pf.preflight([], profile="full", device="cpu", allow_slow=1)


def test_torchvision_missing_names_each_missing_set_with_its_download_command(tmp_path):
    lines = pf.torchvision_missing(["cifar100", "mnist", "cifar100_samples"], tmp_path)
    assert len(lines) == 2, lines
    assert "datasets.CIFAR100(root=" in lines[0] and "download=True" in lines[0]
    assert "datasets.MNIST(root=" in lines[1] and "DATA_ROOT" in lines[1]
    assert 'DATA_ROOT = "bundled"' in lines[0]  # the offline substitute is named


def test_weights_missing_looks_in_torch_hub_cache(tmp_path, monkeypatch):
    import urllib.error

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setattr(torch.hub, "_hub_dir", None)  # get_dir() reads TORCH_HOME
    fetched = []

    def offline(url, **kwargs):  # torch's loader on a machine without network
        fetched.append((url, kwargs))
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", offline)
    lines = pf.weights_missing("ResNet34_Weights.IMAGENET1K_V1", "PRETRAINED = False")
    assert fetched and fetched[0][1]["check_hash"] is True  # tried once, hash-checked
    assert len(lines) == 1 and "PRETRAINED = False" in lines[0] and "load_state_dict_from_url(" in lines[0]
    assert "fetching it failed" in lines[0] and "Name or service not known" in lines[0]
    fetched.clear()
    assert len(pf.weights_missing("ResNet34_Weights.IMAGENET1K_V1", "PRETRAINED = False", fetch=False)) == 1
    assert not fetched  # fetch=False: only the cache is looked at

    def online(url, **kwargs):  # an online machine: the loader writes the file into the cache
        folder = tmp_path / "hub" / "checkpoints"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / url.rsplit("/", 1)[1]).write_bytes(b"")
        return {}

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", online)
    assert pf.weights_missing("ResNet34_Weights.IMAGENET1K_V1", "PRETRAINED = False") == []
    (tmp_path / "hub" / "checkpoints" / "resnet34-b627a593.pth").unlink()
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", offline)
    lines = pf.weights_missing("ResNet34_Weights.IMAGENET1K_V1", "PRETRAINED = False")
    assert "IMAGENET1K" not in lines[0], "no name that reads as a notebook parameter"
    checkpoints = tmp_path / "hub" / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    (checkpoints / "resnet34-b627a593.pth").write_bytes(b"")
    assert pf.weights_missing("ResNet34_Weights.IMAGENET1K_V1", "PRETRAINED = False") == []
    with pytest.raises(ValueError, match="weights"):
        pf.weights_missing("ResNet34_Weights.NO_SUCH", "PRETRAINED = False")


def test_folder_and_packages_missing(tmp_path):
    assert pf.folder_missing(None, "IMAGE_ROOT", "images") == []
    assert pf.folder_missing("bundled", "IMAGE_ROOT", "images") == []
    assert pf.folder_missing(tmp_path, "IMAGE_ROOT", "images") == []
    (line,) = pf.folder_missing(tmp_path / "absent", "IMAGE_ROOT", "images")
    assert "IMAGE_ROOT" in line and 'IMAGE_ROOT = "bundled"' in line
    lines = pf.packages_missing({"json": "-", "no_such_module_47": "pip install x"})
    assert lines == ["the package 'no_such_module_47' is not installed: `pip install x`"]


def test_estimate_seconds_times_the_probe_and_scales_it(monkeypatch):
    clock, calls = [0.0], []

    def run(steps):
        calls.append(steps)
        clock[0] += 0.5 * steps  # half a second per step

    monkeypatch.setattr(pf.time, "perf_counter", lambda: clock[0])
    assert pf.estimate_seconds(run, planned_steps=1000, probe_steps=4) == 500.0
    assert calls == [1, 4]  # a warm-up step, then the timed probe
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="planned_steps"):
            pf.estimate_seconds(run, planned_steps=bad)


def test_duration_reads_minutes_then_hours():
    assert [pf.duration(s) for s in (20, 600, 5400)] == ["1 min", "10 min", "1.5 h"]


def test_chapter_08_counts_its_attack_steps():
    from gitutor.chapters.flower_dp.preflight import attack_steps

    cfg = SimpleNamespace(
        attacked_clients=2,
        local_epochs=[1, 5],
        noise_multipliers=[0.0, 1.0, 4.0],
        batch_sizes=[1, 4],
        attack_iterations=10,
        batch_iterations=100,
        secagg_k=[2, 5],
        secagg_groups=3,
    )
    # per client: (1 FedSGD + 2 for E = 5 + 3 σ) × 10 + 1 batch × 100; 6 aggregates × 100
    assert attack_steps(cfg) == 2 * (6 * 10 + 100) + 6 * 100
    full = gitutor.get_profile("08_flower_dp", "full")
    assert attack_steps(full) > 10 * attack_steps(gitutor.get_profile("08_flower_dp", "quick"))


@pytest.fixture(scope="module")
def chapter_08():
    from gitutor.chapters.flower_dp import experiments, faces

    cfg = gitutor.get_profile("08_flower_dp", "full")
    data = faces.face_data(cfg.image_size, seed=0, test_per_class=cfg.test_per_class)
    return cfg, experiments.chapter_model(cfg.image_size, seed=0), data


def test_chapter_08_full_profile_stops_with_its_estimate_unless_allowed(
    chapter_08, monkeypatch, capsys
):
    """The real probe (a few attack steps on one face); the limit lowered to 1 s so that the
    decision does not depend on this machine's speed."""
    from gitutor.chapters.flower_dp import preflight as chapter

    cfg, model, data = chapter_08
    monkeypatch.setattr(pf, "LONG_RUN_S", 1)
    state = torch.random.get_rng_state()
    with pytest.raises(pf.PreflightError, match="ALLOW_SLOW = True") as stop:
        chapter.check(cfg, model, data, torch.device("cpu"))
    assert "an estimated" in str(stop.value)
    assert "BUDGET = 'recorded' (the decisive sizes" in str(stop.value)  # the chapter's smaller run
    assert torch.equal(torch.random.get_rng_state(), state), "the probe left the RNG as it was"
    chapter.check(cfg, model, data, torch.device("cpu"), allow_slow=True)
    assert "an estimated" in capsys.readouterr().out


def test_chapter_08_quick_profile_times_nothing(chapter_08, monkeypatch):
    from gitutor.chapters.flower_dp import preflight as chapter

    _, model, data = chapter_08

    def never(*args, **kwargs):
        raise AssertionError("the quick profile must not time anything")

    monkeypatch.setattr(chapter, "estimate_seconds", never)
    chapter.check(gitutor.get_profile("08_flower_dp", "quick"), model, data, "cpu")


def _setup_cell(notebook: str) -> tuple[str, str]:
    """The parameters cell and the first code cell after it (the setup cell)."""
    cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    index = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
    setup = next(c for c in cells[index + 1 :] if c["cell_type"] == "code")
    return "".join(cells[index]["source"]), "".join(setup["source"])


@pytest.mark.parametrize(
    ("notebook", "call"),
    [
        ("01_dlg", "preflight(needed, profile=cfg.profile, device=device)"),
        ("02_idlg_soft_labels", "preflight(needed, profile=cfg.profile, device=device)"),
        ("03_cv_batch_labels", "preflight(needed, profile=cfg.profile, device=device)"),
        ("04_stepwise_gradinversion", "preflight.check(cfg, device, allow_slow=ALLOW_SLOW)"),
        ("05_diffusion_user_level", "preflight.check(cfg, DATA_ROOT, device, allow_slow=ALLOW_SLOW)"),
        ("06_learning_to_invert", "preflight(torchvision_missing(data_sets, DATA_ROOT)"),
        ("07_admm_comparison", "preflight.check(cfg, DATA_ROOT, device, allow_slow=ALLOW_SLOW)"),
        ("08_flower_dp", "preflight.check(cfg, model, data, device, allow_slow=ALLOW_SLOW)"),
    ],
)
def test_setup_cell_runs_the_preflight_before_any_long_work(notebook, call):
    """The call stands in the first code cell after the parameters: every later cell runs after it."""
    parameters, setup = _setup_cell(notebook)
    assert call in setup, f"{notebook}'s setup cell does not call the preflight"
    if "ALLOW_SLOW" in call:
        assert "\nALLOW_SLOW = False" in parameters


def test_running_page_states_the_time_limit_the_code_applies():
    assert f"exceeds {pf.LONG_RUN_S // 60} minutes" in (ROOT / "book" / "running.md").read_text()


def test_assets_missing_names_each_absent_asset_with_its_install_command(monkeypatch):
    from gitutor import assets

    def absent(name):
        raise assets.MissingAssetError(f"{name} is not installed")

    monkeypatch.setattr(assets, "asset_files", absent)
    (line,) = pf.assets_missing(["efficientnet_lite0", "efficientnet_lite0"])  # each asset once
    assert "efficientnet_lite0" in line and assets.ASSETS["efficientnet_lite0"].install in line
    with pytest.raises(ValueError, match="names"):
        pf.assets_missing(["no_such_asset"])


# --- chapter 04 (gitutor.chapters.stepwise_gradinversion.preflight) ----------------------------


def _settings_04(profile="full", **overrides):
    from gitutor.chapters.stepwise_gradinversion.profile import chapter_settings

    return chapter_settings(gitutor.get_profile("04_stepwise_gradinversion", profile), **overrides)


def test_chapter_04_counts_the_steps_of_its_trials():
    from gitutor.chapters.stepwise_gradinversion.preflight import planned_steps

    quick = _settings_04("quick")
    # per batch: budgets 30 + 100 for 3 methods; DLG at 100; 3 more ablation variants at 30;
    # Fig. 7's B = 1 and Fig. 8's two first blocks at 30 (B = 2 shares the budget-30 Stepwise run)
    assert planned_steps(quick, {"layer4": 40, "layer2": 4}) == 3 * (390 + 100 + 90 + 30 + 60)
    full = _settings_04(pretrained=False, image_root="bundled")
    blocks = {"layer4": 90, "layer3": 50, "layer2": 20, "layer1": 5}
    assert planned_steps(full, blocks) > 100 * planned_steps(quick, {"layer4": 40, "layer2": 4})


def test_chapter_04_lists_every_missing_input_at_once(tmp_path, monkeypatch):
    from gitutor.chapters.stepwise_gradinversion import preflight as chapter

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # an empty hub cache
    monkeypatch.setattr(torch.hub, "_hub_dir", None)
    monkeypatch.setattr(chapter, "RAY_PACKAGES", {"no_such_module_47": "pip install x"})
    monkeypatch.setattr(chapter, "estimate_seconds", lambda run, steps, **_: 10 * pf.LONG_RUN_S)
    cfg = _settings_04()  # the paper's setting: ImageNet weights, IMAGE_ROOT, Ray
    with pytest.raises(pf.PreflightError) as stop:
        chapter.check(cfg, "cpu")
    lines = str(stop.value).splitlines()[1:]
    assert len(lines) == 4, lines
    assert "PRETRAINED = False" in lines[0] and "IMAGE_ROOT = 'bundled'" in lines[1]
    assert "no_such_module_47" in lines[2] and "ALLOW_SLOW = True" in lines[3]


def test_chapter_04_full_profile_stops_on_a_slow_estimate_unless_allowed(monkeypatch, capsys):
    from gitutor.chapters.stepwise_gradinversion import preflight as chapter

    monkeypatch.setattr(chapter, "estimate_seconds", lambda run, steps, **_: 2 * pf.LONG_RUN_S)
    fallback = _settings_04(pretrained=False, image_root="bundled", sweep_engine="local")
    with pytest.raises(pf.PreflightError, match="ALLOW_SLOW = True") as stop:
        chapter.check(fallback, "cpu")
    assert len(str(stop.value).splitlines()) == 2, "the fallback lacks nothing but time"
    chapter.check(fallback, "cpu", allow_slow=True)
    assert "an estimated 30 min" in capsys.readouterr().out


def test_chapter_04_probe_runs_its_attack_and_leaves_the_random_streams(monkeypatch):
    """The real probe (a few Stepwise steps) on the quick network, read as a full profile; the
    limit lowered to 1 s so that the decision does not depend on this machine's speed."""
    from types import SimpleNamespace

    from gitutor.chapters.stepwise_gradinversion import preflight as chapter

    cfg = SimpleNamespace(**(vars(_settings_04("quick")) | {"profile": "full"}))
    monkeypatch.setattr(pf, "LONG_RUN_S", 1)
    state = torch.random.get_rng_state()
    with pytest.raises(pf.PreflightError, match="an estimated"):
        chapter.check(cfg, torch.device("cpu"))
    assert torch.equal(torch.random.get_rng_state(), state), "the probe left the RNG as it was"


def test_chapter_04_quick_profile_times_nothing(monkeypatch):
    from gitutor.chapters.stepwise_gradinversion import preflight as chapter

    def never(*args, **kwargs):
        raise AssertionError("the quick profile must not time anything")

    monkeypatch.setattr(chapter, "estimate_seconds", never)
    chapter.check(_settings_04("quick"), "cpu")


# --- chapter 05 (gitutor.chapters.diffusion_user_level.preflight) ------------------------------


def _settings_05(profile="full", *args):
    from gitutor.chapters.diffusion_user_level.profile import chapter_settings

    return chapter_settings(gitutor.get_profile("05_diffusion_user_level", profile), *args)


def test_chapter_05_counts_its_attack_steps():
    from gitutor.chapters.diffusion_user_level.preflight import planned_steps

    assert planned_steps(_settings_05("quick")) == 100 * (10 + 2 * 5)  # users, λ = 1, no prior
    assert planned_steps(_settings_05()) == 4000 * (50 + 2 * 10)


def test_chapter_05_lists_every_missing_input_at_once(tmp_path, monkeypatch):
    from gitutor import priors
    from gitutor.chapters.diffusion_user_level import preflight as chapter

    monkeypatch.setattr(priors, "hub_prior_cached", lambda model_id: False)
    monkeypatch.setattr(chapter, "estimate_seconds", lambda run, steps, **_: 10 * pf.LONG_RUN_S)
    with pytest.raises(pf.PreflightError) as stop:
        chapter.check(_settings_05(), tmp_path, "cpu")
    lines = str(stop.value).splitlines()[1:]
    assert len(lines) == 3, lines
    assert "PRETRAINED = False" in lines[0] and "DATA_ROOT = 'bundled'" in lines[1]
    assert "ALLOW_SLOW = True" in lines[2]


def test_chapter_05_full_profile_stops_on_a_slow_estimate_unless_allowed(
    tmp_path, monkeypatch, capsys
):
    from gitutor.chapters.diffusion_user_level import preflight as chapter

    monkeypatch.setattr(chapter, "estimate_seconds", lambda run, steps, **_: 2 * pf.LONG_RUN_S)
    fallback = _settings_05("full", None, "bundled", False)  # DATA_ROOT, PRETRAINED suggested
    with pytest.raises(pf.PreflightError, match="ALLOW_SLOW = True") as stop:
        chapter.check(fallback, "bundled", "cpu")
    assert len(str(stop.value).splitlines()) == 2, "the fallback lacks nothing but time"
    chapter.check(fallback, "bundled", "cpu", allow_slow=True)
    assert "an estimated 30 min" in capsys.readouterr().out


def test_chapter_05_probe_runs_its_attack_and_leaves_the_random_streams(monkeypatch):
    """The real probe (a few steps of Algorithm 1) at the smoke budget's settings; the limit set
    to 0 s so that the decision does not depend on this machine's speed."""
    from gitutor.chapters.diffusion_user_level import preflight as chapter

    smoke = _settings_05("full", "smoke", "bundled", False)
    monkeypatch.setattr(pf, "LONG_RUN_S", 0)
    state = torch.random.get_rng_state()
    with pytest.raises(pf.PreflightError, match="an estimated"):
        chapter.check(smoke, "bundled", torch.device("cpu"))
    assert torch.equal(torch.random.get_rng_state(), state), "the probe left the RNG as it was"


def test_chapter_05_quick_profile_times_nothing(monkeypatch):
    from gitutor.chapters.diffusion_user_level import preflight as chapter

    def never(*args, **kwargs):
        raise AssertionError("the quick profile must not time anything")

    monkeypatch.setattr(chapter, "estimate_seconds", never)
    chapter.check(_settings_05("quick"), "data", "cpu")


# --- chapter 07 (gitutor.chapters.admm_comparison.preflight) -----------------------------------


def _settings_07(profile="full", data_root="data", budget=None):
    from gitutor.chapters.admm_comparison.profile import chapter_settings

    cfg = gitutor.get_profile("07_admm_comparison", profile, budget=budget)
    return chapter_settings(cfg, data_root)


def test_chapter_07_counts_its_attack_steps_per_kind():
    from gitutor.chapters.admm_comparison.preflight import planned_steps

    # 10 images per kind; the ablation kind (MNIST samples) again at each of its 2 settings
    quick = _settings_07("quick")
    assert planned_steps(quick) == {"mnist_samples": 3 * 200, "cifar100_samples": 300, "lfw": 200}
    full = planned_steps(_settings_07())
    assert full == {"mnist": 5 * 20 * 300, "cifar100": 20 * 300, "lfw_people": 20 * 300}


def test_chapter_07_lists_every_missing_data_set_at_once(tmp_path, monkeypatch):
    from gitutor.chapters.admm_comparison import preflight as chapter

    def never(*args, **kwargs):
        raise AssertionError("a run that lacks its data is not timed")

    monkeypatch.setattr(chapter, "estimate_seconds", never)
    with pytest.raises(pf.PreflightError) as stop:
        chapter.check(_settings_07(data_root=tmp_path), tmp_path, "cpu")
    lines = str(stop.value).splitlines()[1:]
    assert len(lines) == 3, lines
    for line, name in zip(lines, ("MNIST", "CIFAR100", "LFWPeople")):
        assert f"datasets.{name}(root=" in line and "DATA_ROOT" in line


def test_chapter_07_full_profile_stops_on_a_slow_estimate_unless_allowed(monkeypatch, capsys):
    from gitutor.chapters.admm_comparison import preflight as chapter

    monkeypatch.setattr(chapter, "estimate_seconds", lambda run, steps, **_: pf.LONG_RUN_S)
    fallback = _settings_07(data_root="bundled")  # the suggested DATA_ROOT
    with pytest.raises(pf.PreflightError, match="ALLOW_SLOW = True") as stop:
        chapter.check(fallback, "bundled", "cpu")
    assert len(str(stop.value).splitlines()) == 2, "the fallback lacks nothing but time"
    chapter.check(fallback, "bundled", "cpu", allow_slow=True)
    assert "an estimated 45 min" in capsys.readouterr().out


def test_chapter_07_fallback_attacks_as_many_images_as_the_stand_ins_hold():
    from gitutor.chapters.admm_comparison import rounds

    cfg = _settings_07(data_root="bundled")
    assert cfg.images_per_kind == 19 and _settings_07().images_per_kind == 20
    assert _settings_07("quick", "bundled").images_per_kind == 10  # the quick profile as it was
    n = cfg.images_per_kind + 1  # as the notebook: one more image, the earlier batch
    data = rounds.load_kinds(cfg.kinds, n, 8, 0, "bundled", cfg.num_classes, cfg.channels)
    assert all(len(images) == n for images, _ in data.values())


def test_chapter_07_probe_runs_its_comparison_and_leaves_the_random_streams(monkeypatch):
    """The real probe (a few steps of the comparison per kind) at the smoke budget; the limit set
    to 0 s so that the decision does not depend on this machine's speed."""
    from gitutor.chapters.admm_comparison import preflight as chapter

    smoke = _settings_07("full", "bundled", "smoke")
    monkeypatch.setattr(pf, "LONG_RUN_S", 0)
    state = torch.random.get_rng_state()
    with pytest.raises(pf.PreflightError, match="an estimated"):
        chapter.check(smoke, "bundled", torch.device("cpu"))
    assert torch.equal(torch.random.get_rng_state(), state), "the probe left the RNG as it was"


def test_chapter_07_quick_profile_times_nothing(monkeypatch):
    from gitutor.chapters.admm_comparison import preflight as chapter

    def never(*args, **kwargs):
        raise AssertionError("the quick profile must not time anything")

    monkeypatch.setattr(chapter, "estimate_seconds", never)
    chapter.check(_settings_07("quick"), "data", "cpu")


@pytest.mark.parametrize(
    ("notebook", "bars"),
    [
        ("02_idlg_soft_labels", 5),  # Table 2, Table 3's DLG runs, Table 5 (twice), ImageNet λ
        ("03_cv_batch_labels", 8),  # features (twice), methods, Fig. 4(a) search, sweep, late, ImageNet (2)
        ("04_stepwise_gradinversion", 1),  # the sweep of trials
        ("05_diffusion_user_level", 6),  # prior samples, DiffULA, λ = 1, baselines, no prior, GapCNN
        ("07_admm_comparison", 4),  # the kinds, the adaptive attack, the alignment grid, round two
    ],
)
def test_long_loops_of_the_full_profile_show_progress_bars(notebook, bars):
    """Each long loop asks for a bar in the full profile (``progress=cfg.profile == "full"``: an
    explicit ``progress=True`` would override the quick book's TQDM_DISABLE and put a widget, with
    its scripts from a CDN, on the offline page) or runs in tqdm (which TQDM_DISABLE turns off)."""
    import re

    cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    asked = re.findall(r'progress=cfg\.profile\s*==\s*"full"', code)
    if re.search(r'^bar = cfg\.profile == "full"', code, re.M):  # one name for the full profile's bars
        asked += re.findall(r"progress=bar\b", code)
    assert "progress=True" not in code
    assert len(asked) + code.count("in tqdm(") == bars


def test_a_chapter_loop_draws_its_bar_when_asked(capsys, monkeypatch):
    from gitutor.chapters.idlg_soft_labels import experiments
    from gitutor.chapters.idlg_soft_labels.trials import labelled_sample
    from gitutor.models import LeNet, init_uniform_

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    model = LeNet(num_classes=10, in_channels=3, image_size=16, fc_bias=False)
    model = init_uniform_(model, 0.5, gitutor.make_generator(0))
    images = torch.rand(4, 3, 16, 16, generator=gitutor.make_generator(1))
    rng = gitutor.make_generator(1)

    def sample(kind, index):
        return labelled_sample(kind, images, index, 10, rng)

    experiments.label_recovery_table({"lenet": (model, sample)}, 2, 1e-3, progress=True)
    assert "Table 2, lenet" in capsys.readouterr().err
    experiments.label_recovery_table({"lenet": (model, sample)}, 2, 1e-3)
    assert "Table 2" not in capsys.readouterr().err
