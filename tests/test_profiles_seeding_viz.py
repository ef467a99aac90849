import dataclasses

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

import gitutor  # noqa: E402
from gitutor.chapters import NOTEBOOK_MODULES, get_profile  # noqa: E402
from gitutor.viz import iteration_strip, plot_curves, show_grid  # noqa: E402


def test_get_profile_quick_full_and_errors():
    quick = get_profile("01_dlg", "quick")
    full = get_profile("01_dlg", "full")
    assert quick.iterations == 300 and quick.profile == "quick" and full.profile == "full"
    assert len(full.seeds) > len(quick.seeds)
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.iterations = 1
    changed = quick.replace(iterations=1)
    assert changed.iterations == 1 and quick.iterations == 300 and changed.seeds == quick.seeds
    changed.seeds.append(99)  # values are copies: nothing reaches the next profile
    assert get_profile("01_dlg").seeds == quick.seeds != changed.seeds
    with pytest.raises(ValueError, match="not_a_setting"):
        quick.replace(not_a_setting=1)
    with pytest.raises(ValueError, match="profile"):
        quick.replace(profile="full")
    assert quick.as_dict()["iterations"] == 300 and get_profile("03_cv_batch_labels").torch_threads == 2
    with pytest.raises(ValueError, match="unknown profile"):
        get_profile("01_dlg", "medium")
    with pytest.raises(ValueError, match="unknown notebook"):
        get_profile("99_nothing")
    with pytest.raises(AttributeError, match="no setting"):
        quick.not_a_setting


@pytest.mark.parametrize("notebook", sorted(NOTEBOOK_MODULES))
def test_every_existing_profile_module_has_quick_and_full(notebook):
    import importlib.util

    name = f"gitutor.chapters.{NOTEBOOK_MODULES[notebook]}"
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} not written yet")
    assert get_profile(notebook, "quick") and get_profile(notebook, "full")


def test_a_budget_replaces_the_profile_settings_it_names_and_unknown_budgets_are_refused():
    full = get_profile("04_stepwise_gradinversion", "full")
    smoke = get_profile("04_stepwise_gradinversion", "full", budget="smoke")
    assert smoke.iterations == 4 and full.iterations == 15_000
    assert smoke.replace(iterations=full.iterations, n_batches=full.n_batches, budgets=full.budgets,
                         ablation_iterations=full.ablation_iterations, study_iterations=full.study_iterations,
                         batch_sizes=full.batch_sizes, first_blocks=full.first_blocks,
                         record_every=full.record_every, sweep_engine=full.sweep_engine) == full
    with pytest.raises(ValueError, match="BUDGET must be None or one of .*smoke"):
        get_profile("04_stepwise_gradinversion", "quick", budget="huge")


def test_generators_are_reproducible_and_checked():
    a = torch.rand(3, generator=gitutor.make_generator(5))
    assert torch.equal(a, torch.rand(3, generator=gitutor.make_generator(5)))
    with pytest.raises(TypeError):
        gitutor.make_generator(1.5)
    gitutor.seed_everything(3)
    first = torch.rand(2)
    gitutor.seed_everything(3)
    assert torch.equal(first, torch.rand(2))
    assert gitutor.resolve_device("cpu").type == "cpu"
    assert gitutor.resolve_device("auto").type in ("cpu", "cuda")


def test_resolve_device_rejects_devices_this_machine_lacks(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert gitutor.resolve_device("auto").type == "cpu"
    for device, message in (("cuda", "CUDA is not available"), ("cuda:0", "CUDA is not available"),
                            ("mps", "MPS backend is not available"), ("gpu0", "not a device name"),
                            ("meta", "runs on 'cpu', 'cuda' or 'mps'")):
        with pytest.raises(ValueError, match=message) as error:
            gitutor.resolve_device(device)
        assert "device=" in str(error.value)
    with pytest.raises(TypeError, match="device"):
        gitutor.resolve_device(0)


def test_viz_figures():
    images = torch.rand(3, 3, 8, 8)
    fig = show_grid(images, titles=["a", "b", "c"], ncols=2)
    assert len(fig.axes) == 4
    strip = iteration_strip([(i, images) for i in range(0, 50, 10)], truth=images, columns=3)
    assert len(strip.axes) == 3 * 4
    ax = plot_curves({"loss": [3, 2, 1]}, logy=True)
    assert ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="titles"):
        show_grid(images, titles=["a"])
    with pytest.raises(ValueError, match="no snapshots"):
        iteration_strip([])
