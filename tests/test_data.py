import pytest
import torch

from gitutor.data import OfflineDataError, digits, image_folder, lfw_faces, natural_images, resize, torchvision_images


def test_natural_images_shape_range_and_determinism():
    a = natural_images(5, size=16, seed=3)
    assert a.shape == (5, 3, 16, 16) and a.dtype == torch.float32
    assert a.min() >= 0 and a.max() <= 1
    assert torch.equal(a, natural_images(5, size=16, seed=3))
    assert not torch.equal(a, natural_images(5, size=16, seed=4))
    assert a.std() > 0.05  # real photographs, not constant images


def test_natural_image_pools_are_disjoint_halves(monkeypatch):
    import gitutor.data.bundled as data

    photo = torch.zeros(3, 64, 128)
    photo[:, :, 64:] = 1.0  # left half black, right half white
    monkeypatch.setattr(data, "photograph", lambda name: photo)
    assert natural_images(6, size=8, seed=0, pool="target").max() == 0
    assert natural_images(6, size=8, seed=0, pool="aux").min() > 0.999


def test_natural_images_errors():
    with pytest.raises(ValueError, match="pool"):
        natural_images(2, pool="train")
    with pytest.raises(ValueError, match="positive"):
        natural_images(0)
    with pytest.raises(ValueError, match="size"):
        natural_images(2, size=0)


def test_lfw_faces_and_digits():
    faces = lfw_faces(size=16, channels=3)
    assert faces.shape == (100, 3, 16, 16) and 0 <= faces.min() and faces.max() <= 1
    assert torch.equal(faces[:, 0], faces[:, 2])
    images, labels = digits(size=12)
    assert images.shape == (1797, 1, 12, 12) and labels.shape == (1797,)
    assert set(labels.tolist()) == set(range(10)) and images.max() <= 1
    with pytest.raises(ValueError, match="channels"):
        digits(channels=2)


def test_resize_checks_shape():
    assert resize(torch.rand(2, 1, 8, 8), 4).shape == (2, 1, 4, 4)
    with pytest.raises(ValueError, match=r"images must be \(B, C, H, W\), got shape \(8, 8\)"):
        resize(torch.rand(8, 8), 4)


def test_full_profile_loaders_fail_fast_offline(tmp_path):
    with pytest.raises(OfflineDataError, match="download=True"):
        torchvision_images("cifar100", 4, root=tmp_path)
    with pytest.raises(ValueError, match="unknown dataset"):
        torchvision_images("imagenet", 4, root=tmp_path)
    with pytest.raises(OfflineDataError, match="ImageNet validation"):
        image_folder(tmp_path / "missing", 4)


def test_load_dispatches_every_quick_source_like_its_function():
    from gitutor.data import KINDS, digits, lfw_faces, load, natural_images, resize

    images, labels = load("photos", 4, size=16, seed=3, num_classes=10)
    assert torch.equal(images, natural_images(4, 16, seed=3, pool="target"))
    assert labels.shape == (4,) and labels.dtype == torch.int64 and int(labels.max()) < 10
    assert load("photos", 2, size=16)[1] is None  # photos have no labels of their own
    images, labels = load("digits", 5, size=12, channels=3, seed=1)
    pool, pool_labels = digits(size=12)
    pick = torch.randperm(len(pool), generator=torch.Generator().manual_seed(1))[:5]
    assert torch.equal(images, pool[pick].repeat(1, 3, 1, 1)) and torch.equal(labels, pool_labels[pick])
    faces, _ = load("lfw", 3, size=32, seed=0)
    pick = torch.randperm(100, generator=torch.Generator().manual_seed(0))[:3]
    assert torch.equal(faces, resize(lfw_faces()[pick], 32))
    assert load("digits")[0].shape == (1797, 1, 8, 8)
    assert {"photos", "digits", "lfw", "imagefolder", "cifar10", "mnist", "lfw_people"} <= set(KINDS)


def test_load_errors(tmp_path):
    from gitutor.data import OfflineDataError, load

    for kwargs, message in ((dict(kind="imagenet21k"), "unknown kind"), (dict(kind="photos"), "n must be"),
                            (dict(kind="digits", n=0), "n must be"), (dict(kind="digits", n=1800), "holds only"),
                            (dict(kind="photos", n=2, channels=1), "channels=1"),
                            (dict(kind="digits", n=2, channels=2), "channels"),
                            (dict(kind="lfw", n=2, num_classes=0), "num_classes"),
                            (dict(kind="photos", n=1, size=1000), "size=1000")):
        with pytest.raises(ValueError, match=message):
            load(**kwargs)
    with pytest.raises(OfflineDataError, match="IMAGE_ROOT"):
        load("imagefolder", 2, root=tmp_path / "missing")
    with pytest.raises(OfflineDataError, match="LFWPeople"):
        load("lfw_people", 2, root=tmp_path)
