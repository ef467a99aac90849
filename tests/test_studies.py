"""The chapter experiments in gitutor.chapters and the whole-photograph source (chapters 01, 02, 06, 07)."""
import math

import pytest
import torch

from gitutor.data import OfflineDataError, whole_photographs
from gitutor.federated import client_gradients, pseudo_gradient
from gitutor.chapters.admm_comparison.rounds import client_round, load_kinds, relative_error
from gitutor.chapters.dlg.sweeps import dlg_case, gradient_scale
from gitutor.chapters.idlg_soft_labels.trials import label_l1, labelled_sample


def test_whole_photographs_are_distinct_square_images():
    photos = whole_photographs(16)
    assert photos.shape == (12, 3, 16, 16) and photos.min() >= 0 and photos.max() <= 1
    assert torch.cdist(photos.flatten(1), photos.flatten(1)).add(torch.eye(12)).min() > 0.5  # no duplicates
    assert torch.equal(whole_photographs(16, names=("coffee",))[0], photos[1])
    with pytest.raises(ValueError, match="names"):
        whole_photographs(16, names=("not_a_photo",))
    with pytest.raises(ValueError, match="size"):
        whole_photographs(0)


def test_dlg_case_is_seeded_and_scale_is_measured():
    model, x, y = dlg_case(3, size=16)   # 100 classes: CIFAR-100's true labels
    again = dlg_case(3, size=16)
    assert torch.equal(x, again[1]) and torch.equal(y, again[2])
    assert torch.equal(next(model.parameters()), next(again[0].parameters()))
    assert x.shape == (1, 3, 16, 16)
    from gitutor.data import sample_set

    pool, labels = sample_set("cifar100", 16)   # the default: the DLG paper's CIFAR-100, true labels
    assert torch.equal(x[0], pool[3]) and int(y[0]) == int(labels[3])
    photo = dlg_case(3, size=16, num_classes=10, source="photos")[1]
    assert torch.equal(photo[0], whole_photographs(16)[3])
    scale = gradient_scale(client_gradients(model, x, y))
    assert 0 < scale["median_abs"] <= scale["rms"] <= scale["max_abs"]
    with pytest.raises(ValueError, match="source"):
        dlg_case(0, source="imagenet")


def test_load_kinds_names_every_missing_dataset(tmp_path):
    with pytest.raises(OfflineDataError) as error:
        load_kinds(["mnist", "cifar100", "lfw_people"], 2, 32, 0, tmp_path, {"mnist": 10, "cifar100": 100,
                   "lfw_people": 10}, {"mnist": 1, "cifar100": 3, "lfw_people": 3})
    message = str(error.value)
    for name in ("MNIST(", "CIFAR100(", "LFWPeople(", "DATA_ROOT"):
        assert name in message
    data = load_kinds(["digits", "photos"], 2, 16, 0, tmp_path, {"digits": 10, "photos": 100},
                      {"digits": 1, "photos": 3})
    assert data["digits"][0].shape == (2, 1, 16, 16) and data["photos"][0].shape == (2, 3, 16, 16)
    with pytest.raises(ValueError, match="kinds"):
        load_kinds(["imagenet"], 1, 16, 0, tmp_path, {}, {})


def test_client_round_one_is_twice_the_gradient_and_round_two_carries_the_dual(tiny_lenet):
    torch.manual_seed(0)
    x, earlier = torch.rand(1, 1, 12, 12), (torch.rand(1, 1, 12, 12), torch.tensor([4]))
    y = torch.tensor([2])
    model = tiny_lenet.double()
    x, earlier = x.double(), (earlier[0].double(), earlier[1])
    _, _, pi, update = client_round(model, x, y, earlier, rho=0.01, lr=0.1, local_steps=1, round_number=1)
    gradient = client_gradients(model, x, y)
    assert relative_error(pseudo_gradient(update.delta, 0.1), [2 * g for g in gradient]) < 1e-8
    assert all(not p.any() for p in pi)
    _, _, pi2, _ = client_round(model, x, y, earlier, rho=0.01, lr=0.1, local_steps=1, round_number=2)
    assert any(p.abs().sum() > 0 for p in pi2)
    with pytest.raises(ValueError, match="round_number"):
        client_round(model, x, y, earlier, rho=0.01, lr=0.1, local_steps=1, round_number=3)


def test_labelled_sample_kinds():
    images = torch.rand(6, 3, 8, 8)
    generator = torch.Generator().manual_seed(0)
    x, y, k = labelled_sample("mixup", images, 0, 10, generator)
    assert k == 2 and (y[0] > 0).sum() == 2 and math.isclose(float(y.sum()), 1.0, rel_tol=1e-6)
    labels = torch.tensor([3, 3, 5, 1, 0, 2])
    x, y, k = labelled_sample("mixup", images, 0, 10, generator, labels=labels)
    assert set(torch.nonzero(y[0]).flatten().tolist()) == {3, 5}  # pairs with the next image of ANOTHER class
    x, y, k = labelled_sample("smoothing", images, 1, 10, generator, labels=labels)
    assert k == 1 and int(y.argmax()) == 3 and float(y.min()) > 0
    assert label_l1(y[0], y) == 0.0
    with pytest.raises(ValueError, match="kind"):
        labelled_sample("cutmix", images, 0, 10, generator)
