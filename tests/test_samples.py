"""Real labelled samples from registry packages (gitutor.data.samples): foolbox's 20 per set and Debian's Fashion-MNIST."""
from __future__ import annotations

import pytest
import torch

from gitutor.assets import DEBIAN_FASHION_MNIST
from gitutor.data import SAMPLE_SETS, load, sample_set

SHAPES = {"imagenet": (3, 224, 224), "cifar10": (3, 32, 32), "cifar100": (3, 32, 32), "mnist": (1, 28, 28),
          "fashion_mnist": (1, 28, 28)}


@pytest.mark.parametrize("kind", sorted(SAMPLE_SETS))
def test_every_sample_set_loads_with_its_labels(kind):
    images, labels = load(kind)
    classes = SAMPLE_SETS[kind][1]
    assert images.shape == (20, *SHAPES[kind]) and images.dtype == torch.float32
    assert 0 <= images.min() and images.max() <= 1 and images.std() > 0.1  # real pictures, not blank
    assert labels.shape == (20,) and labels.dtype == torch.int64
    assert 0 <= labels.min() and labels.max() < classes
    assert len(labels.unique()) >= 8  # many classes among the 20 (ImageNet: 19)


def test_known_labels_come_from_the_file_names():
    assert load("imagenet")[1][:3].tolist() == [243, 559, 438]  # bull mastiff, folding chair, beaker
    assert load("cifar100")[1][:3].tolist() == [49, 33, 72]
    assert load("mnist")[1][0] == 7


def test_imagenet_size_is_the_centre_crop_of_the_evaluation_transform():
    images, labels = load("imagenet", 3, size=64, seed=1)
    assert images.shape == (3, 3, 64, 64)
    full, all_labels = sample_set("imagenet", 64)
    assert torch.equal(labels, all_labels[torch.randperm(20, generator=torch.Generator().manual_seed(1))[:3]])
    assert full.shape == (20, 3, 64, 64)


def test_picks_are_seeded_and_resized():
    a, la = load("cifar100", 5, size=16, seed=3, channels=3)
    b, lb = load("cifar100", 5, size=16, seed=3)
    assert a.shape == (5, 3, 16, 16) and torch.equal(a, b) and torch.equal(la, lb)
    assert load("mnist", 2, channels=3)[0].shape == (2, 3, 28, 28)
    with pytest.raises(ValueError, match="holds only 20"):
        load("cifar10", 21)


def test_root_selects_the_torchvision_dataset_instead(tmp_path):
    from gitutor.data import OfflineDataError

    with pytest.raises(OfflineDataError, match="CIFAR100"):
        load("cifar100", 2, root=tmp_path)


@pytest.mark.skipif(not DEBIAN_FASHION_MNIST.is_dir(),
                    reason="Debian's dataset-fashion-mnist is not installed (apt-get install dataset-fashion-mnist)")
def test_debian_fashion_mnist_is_the_whole_dataset():
    images, labels = load("fashion_mnist_debian", train=False)
    assert images.shape == (10_000, 1, 28, 28) and 0 <= images.min() and images.max() == 1
    assert torch.equal(labels.bincount(), torch.full((10,), 1000))
    few, few_labels = load("fashion_mnist_debian", 6, train=True, seed=0, size=32)
    assert few.shape == (6, 1, 32, 32) and few_labels.max() < 10
