"""Issue 33: the scripts resolve and check their paths before they act (a chapter of this repository,
an output folder that is not and holds no sources), and library calls check models, sizes and seeds
before torch sees them; each refusal names the argument or path and leaves the records byte-identical."""
import hashlib
import importlib.util
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the scripts: chapters of this repository only -------------------------------------------------------

def _script(name):
    spec = importlib.util.spec_from_file_location(f"script33_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree_sums(folder: Path) -> dict:
    return {str(p): sha(p) for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["record", "smoke"])
def test_an_edited_copy_of_a_chapter_outside_notebooks_is_refused(name, tmp_path, monkeypatch, capsys):
    copy = tmp_path / "04_stepwise_gradinversion.ipynb"
    shutil.copyfile(ROOT / "notebooks" / copy.name, copy)
    recorded = ROOT / "book" / "recorded"
    before = _tree_sums(recorded)
    module = _script(name)
    if name == "record":
        monkeypatch.setattr(module, "record", lambda *a, **k: pytest.fail("nothing may run"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        module.main([str(copy.with_suffix("")), "--profile", "quick"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"{copy.with_suffix('')} is not a chapter of this repository" in err
    assert _tree_sums(recorded) == before


def test_the_executed_copy_never_replaces_its_notebook(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # notebooks given relative to the working directory, as make does
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text("{}")
    before = sha(notebook)
    module = _script("execute_notebooks")
    with pytest.raises(SystemExit) as stop:
        module.main(["nb", "--stage", ".", "--results", "r"])
    assert stop.value.code == 2 and "--stage" in capsys.readouterr().err and sha(notebook) == before
    with pytest.raises(SystemExit):
        module.main([str(tmp_path.parent / "elsewhere"), "--stage", "s", "--results", "r"])


# --- library calls: checked before torch sees them -----------------------------------------------------

def _lenet_setting(size=12):
    from gitutor.models import LeNet

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    return LeNet(2, 1, size, activation="tanh"), gen


def test_opacus_refuses_in_place_activations_by_name():
    pytest.importorskip("opacus")
    from gitutor.federated.dp import private_sgd

    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(inplace=True), nn.Flatten(), nn.Linear(2 * 10 * 10, 2))
    with pytest.raises(ValueError, match=r"model: Opacus.*1 \(ReLU\(inplace=True\)\).*inplace=False"):
        private_sgd(model, torch.rand(2, 1, 12, 12), torch.tensor([0, 1]), lr=0.1, steps=1,
                    noise_multiplier=1.0, max_grad_norm=1.0)


def test_federated_round_names_the_client_whose_images_do_not_fit(monkeypatch):
    pytest.importorskip("flwr")
    from gitutor.federated import flower
    from gitutor.models import FCN

    model = FCN(2, (1, 12, 12), (8,))
    gen = torch.Generator().manual_seed(1)
    partitions = [(torch.rand(2, 1, 12, 12, generator=gen), torch.tensor([0, 1])),
                  (torch.rand(2, 1, 16, 16, generator=gen), torch.tensor([0, 1]))]
    monkeypatch.setattr(flower, "run_federation", lambda *a, **k: pytest.fail("no client may run"))
    with pytest.raises(ValueError, match=r"partitions\[1\].*\(2, 1, 16, 16\).*does not fit"):
        flower.federated_round(model, partitions, {"lr": 0.1})
    with pytest.raises(ValueError, match=r"partitions\[0\].*classes in \[0, 2\)"):
        flower.federated_round(model, [(partitions[0][0], torch.tensor([0, 5]))], {"lr": 0.1})


def test_a_round_whose_clients_sent_no_update_fails(monkeypatch):
    """On the simulation engine a client's exception comes back as an error reply, which FedAvg skips:
    a round that lost an update must fail, not return the others (here: no client ran at all)."""
    pytest.importorskip("flwr")
    from gitutor.federated import flower

    model, gen = _lenet_setting()
    partitions = [(torch.rand(2, 1, 12, 12, generator=gen), torch.tensor([0, 1])) for _ in range(2)]
    monkeypatch.setattr(flower, "run_federation", lambda *a, **k: None)
    with pytest.raises(RuntimeError, match="received 0 of 2 client updates"):
        flower.federated_round(model, partitions, {"lr": 0.1})


def test_sizes_and_seeds_must_be_ints():
    from gitutor.attacks.batched_dlg import batched_dlg
    from gitutor.attacks.batched_ig import batched_inverting_gradients
    from gitutor.models import LeNet, resnet18, resnet20

    with pytest.raises(TypeError, match=r"width must be an int.*8\.0"):
        resnet20(width=8.0)
    with pytest.raises(TypeError, match="num_classes must be an int"):
        resnet18(num_classes=10.0)
    with pytest.raises(TypeError, match="image_size must be an int"):
        LeNet(2, 1, 12.0)
    model, _ = _lenet_setting()
    target = [torch.zeros_like(p) for p in model.parameters()]
    with pytest.raises(TypeError, match=r"seeds must be a sequence of 1 int seeds.*got 0"):
        batched_dlg([model], [target], (1, 12, 12), 2, seeds=0)
    with pytest.raises(TypeError, match="seeds must be a sequence"):
        batched_inverting_gradients([model], [target], torch.tensor([0]), (1, 12, 12), seeds=0, iterations=1,
                                    tv_weight=0.0)
    with pytest.raises(ValueError, match="seeds must hold 1 seeds"):
        batched_dlg([model], [target], (1, 12, 12), 2, seeds=[0, 1])
