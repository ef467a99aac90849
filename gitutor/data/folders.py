"""Full-profile image sources on disk: torchvision datasets and ImageFolder trees. Offline they fail
fast with :class:`OfflineDataError`, which says what to download and where."""

from __future__ import annotations

from pathlib import Path

import torch

from gitutor.checks import check_flag, check_num_classes, check_seed
from gitutor.data.bundled import resize
from gitutor.errors import OfflineDataError
from gitutor.seeding import make_generator

TORCHVISION_DATASETS = {
    "cifar10": "CIFAR10",
    "cifar100": "CIFAR100",
    "mnist": "MNIST",
    "fashion_mnist": "FashionMNIST",
    "lfw_people": "LFWPeople",
}


def torchvision_images(
    name: str,
    n: int,
    *,
    root: str | Path = "data",
    train: bool = False,
    size: int = 32,
    seed: int = 0,
    download: bool = False,
    num_classes: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random images and labels of CIFAR-10, CIFAR-100, MNIST or LFW (people) through torchvision
    (full profile); ``train`` picks the training split (LFWPeople: ``split="train"``, else ``"test"``);
    ``num_classes`` keeps only the images of the classes 0 … ``num_classes`` − 1.

    Images are ``ToTensor`` only (no mean/std normalisation), as in the DLG code, resized to ``size``.

    Returns:
        ``images`` ``(n, C, size, size)`` in [0, 1] (C = 3, or 1 for MNIST) and ``labels`` ``(n,)``.

    Raises:
        TypeError: for a ``train`` or ``download`` that is not True or False, or a ``seed`` or
            ``num_classes`` that is not an int.
        ValueError: for an unknown dataset name, ``n`` not a positive int or more than the split
            (or its classes below ``num_classes``) holds, ``size`` not a positive int, or ``num_classes`` < 2.
        OfflineDataError: when the dataset is not under ``root`` and ``download`` is False or fails.
    """
    import torchvision

    if name not in TORCHVISION_DATASETS:
        raise ValueError(
            f"unknown dataset {name!r}; choose one of {sorted(TORCHVISION_DATASETS)}"
        )
    _check_size(size)
    _check_sampling(n, seed, num_classes)
    train, download = check_flag(train, "train"), check_flag(download, "download")
    cls = getattr(torchvision.datasets, TORCHVISION_DATASETS[name])
    try:
        split = (
            {"split": "train" if train else "test"}
            if name == "lfw_people"
            else {"train": train}
        )
        dataset = cls(
            root=str(root),
            download=download,
            transform=torchvision.transforms.ToTensor(),
            **split,
        )
    except (
        Exception
    ) as error:  # torchvision raises RuntimeError/URLError depending on the failure
        raise OfflineDataError(
            f"{TORCHVISION_DATASETS[name]} is not in {Path(root).resolve()}. On a machine with internet, "
            f"run torchvision.datasets.{TORCHVISION_DATASETS[name]}(root={str(root)!r}, download=True) "
            f"once, or set DATA_ROOT to the folder that holds it. ({error})"
        ) from error
    images, labels = _sample(
        dataset,
        n,
        seed,
        f"{TORCHVISION_DATASETS[name]} in {Path(root).resolve()}",
        num_classes,
    )
    return resize(images, size), labels


def image_folder(
    root: str | Path,
    n: int,
    *,
    size: int = 224,
    seed: int = 0,
    num_classes: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random images of a ``torchvision.datasets.ImageFolder`` tree (e.g. ImageNet validation,
    one sub-folder per class, in class-index order), centre-cropped and resized to ``size``;
    ``num_classes`` keeps only the images of the first ``num_classes`` folders (labels below it).

    Returns:
        ``images`` ``(n, 3, size, size)`` in [0, 1] and ``labels`` ``(n,)`` (folder indices).

    Raises:
        OfflineDataError: if ``root`` does not exist.
        TypeError: for a ``seed`` or ``num_classes`` that is not an int.
        ValueError: if ``n`` is not a positive int, the folder (or its classes below ``num_classes``)
            holds fewer than ``n`` images, ``size`` is not a positive int, or ``num_classes`` < 2.
    """
    import torchvision
    from torchvision import transforms

    _check_size(size)
    _check_sampling(n, seed, num_classes)
    if not Path(root).is_dir():
        raise OfflineDataError(
            f"image folder {Path(root).resolve()} not found: put the ImageNet validation images there, "
            "one sub-folder per class (e.g. n01440764/...), or set IMAGE_ROOT to that folder"
        )
    transform = transforms.Compose(
        [transforms.Resize(size), transforms.CenterCrop(size), transforms.ToTensor()]
    )
    dataset = torchvision.datasets.ImageFolder(str(root), transform=transform)
    return _sample(
        dataset, n, seed, f"image folder {Path(root).resolve()}", num_classes
    )


def _check_sampling(n, seed, num_classes) -> None:
    """``n`` a positive int, ``seed`` an int and ``num_classes`` None or an int ≥ 2 (before any file is read).

    Raises:
        ValueError: naming ``n`` (not a positive int) or ``num_classes`` (< 2).
        TypeError: naming ``seed`` or ``num_classes`` when not an int.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    check_seed(seed)
    if num_classes is not None:
        check_num_classes(num_classes)


def _sample(
    dataset, n: int, seed: int, where: str, num_classes: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """n random (image, label) items of a torchvision dataset, stacked; with ``num_classes``, only
    of the items whose label (the dataset's ``targets``) is below it.

    Raises:
        ValueError: if ``n`` is not a positive int or the dataset (``where``; its classes below
            ``num_classes``) holds fewer than ``n`` items.
    """
    _check_sampling(n, seed, num_classes)
    candidates = torch.arange(len(dataset))
    if num_classes is not None:
        candidates = candidates[torch.as_tensor(list(dataset.targets)) < num_classes]
        where += f" (its classes below num_classes={num_classes})"
    if n > len(candidates):
        raise ValueError(f"n={n} but {where} holds only {len(candidates)} images")
    indices = candidates[
        torch.randperm(len(candidates), generator=make_generator(seed))[:n]
    ]
    images, labels = zip(*(dataset[int(i)] for i in indices))
    return torch.stack(images), torch.as_tensor(labels, dtype=torch.int64)


def _check_size(size: int) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive int (pixels), got {size!r}")
