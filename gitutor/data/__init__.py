"""Image sources: real images bundled in packages (quick profile) and torchvision datasets (full).

Quick profiles run offline, so they use photographs shipped inside scikit-image, the LFW subset
of scikit-image and scikit-learn's handwritten digits, and real labelled samples that registry packages
ship (:mod:`gitutor.data.samples`: foolbox's 20 ImageNet, CIFAR-10/100, MNIST and Fashion-MNIST samples,
Debian's whole Fashion-MNIST; sha256-checked). Full profiles use torchvision's own loaders;
offline they fail fast with :class:`OfflineDataError`, which says what to download and where.

All images are float tensors ``(N, C, H, W)`` in [0, 1].
"""

from __future__ import annotations

from pathlib import Path

import torch

from gitutor.checks import check_flag, check_int, check_num_classes, check_seed
from gitutor.data.bundled import (
    ATTACKED_PHOTOGRAPHS,
    BUNDLED_CROP,
    BUNDLED_PHOTOGRAPHS,
    TRAINING_PHOTOGRAPHS,
    attacked_photographs,
    PHOTOGRAPHS,
    POOLS,
    REAL_PHOTOGRAPHS,
    WHOLE_PHOTOGRAPHS,
    bundled_crops,
    digits,
    lfw_faces,
    natural_images,
    resize,
    whole_photographs,
)
from gitutor.data.folders import TORCHVISION_DATASETS, image_folder, torchvision_images
from gitutor.data.samples import (
    FASHION_MNIST_CLASSES,
    SAMPLE_SETS,
    debian_fashion_mnist,
    resize_centre_crop,
    sample_set,
)
from gitutor.errors import OfflineDataError
from gitutor.seeding import make_generator

__all__ = [
    "ATTACKED_PHOTOGRAPHS",
    "BUNDLED_CROP",
    "BUNDLED_PHOTOGRAPHS",
    "TRAINING_PHOTOGRAPHS",
    "attacked_photographs",
    "KINDS",
    "OfflineDataError",
    "bundled_crops",
    "PHOTOGRAPHS",
    "POOLS",
    "REAL_PHOTOGRAPHS",
    "TORCHVISION_DATASETS",
    "WHOLE_PHOTOGRAPHS",
    "digits",
    "image_folder",
    "lfw_faces",
    "load",
    "natural_images",
    "resize",
    "torchvision_images",
    "whole_photographs",
    "FASHION_MNIST_CLASSES",
    "SAMPLE_SETS",
    "debian_fashion_mnist",
    "resize_centre_crop",
    "sample_set",
]

#: Image sources of :func:`load`.
KINDS = (
    "photos",
    "digits",
    "lfw",
    "imagefolder",
    *TORCHVISION_DATASETS,
    *(kind for kind in SAMPLE_SETS if kind not in TORCHVISION_DATASETS),
    "fashion_mnist_debian",
)
#: Sources whose whole set ``n=None`` takes, in its own order.
WHOLE_SETS = ("digits", "lfw", "fashion_mnist_debian")
#: Sources read from a folder (``root``): the torchvision datasets and image folders.
ROOT_KINDS = ("imagefolder", *TORCHVISION_DATASETS)


def load(
    kind: str,
    n: int | None = None,
    *,
    size: int | None = None,
    seed: int = 0,
    channels: int | None = None,
    num_classes: int | None = None,
    pool: str = "target",
    root: str | Path | None = None,
    train: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``n`` images and labels of one source, the entry point for every chapter's data.

    Sources (``kind``): ``"photos"`` (:func:`natural_images` crops from ``pool``), ``"digits"``
    (:func:`digits`), ``"lfw"`` (:func:`lfw_faces`) — bundled, for the quick profile —; real labelled
    samples from registry packages, offline: ``"imagenet"``, ``"cifar10"``, ``"cifar100"``, ``"mnist"``,
    ``"fashion_mnist"`` (:func:`sample_set`, foolbox's 20 samples each with their true labels;
    ImageNet resized to 256 and centre-cropped to ``size``, default 224) and
    ``"fashion_mnist_debian"`` (:func:`debian_fashion_mnist`, 60 000 training or 10 000 test images);
    and, for the full profile, ``"cifar10"``, ``"cifar100"``, ``"mnist"``, ``"fashion_mnist"``,
    ``"lfw_people"`` (:func:`torchvision_images` under ``root``) and ``"imagefolder"`` (:func:`image_folder`).
    The first three of those name both: without ``root`` they are the packaged samples, with a ``root``
    the whole torchvision dataset in that folder.
    Photos and the LFW subset have no labels of their own: they get labels uniform in
    [0, ``num_classes``) when it is given, else None. A labelled source given ``num_classes`` keeps only
    its images of the classes 0 … ``num_classes`` − 1 (``load("mnist", 5, num_classes=3)``: five digits
    0, 1 or 2), so the labels fit a model of that many classes. The picks (and those labels) come from one
    generator seeded with ``seed``.

    Args:
        kind: one of :data:`KINDS`.
        n: number of images; None takes the whole of ``digits``, ``lfw``, ``fashion_mnist_debian`` or a
            sample set (20) in its own order (only the classes below ``num_classes`` when it is given);
            an int picks ``n`` at random (seeded).
        size: output side in pixels (default: the source's own; 32 for photos and torchvision, 224
            for image folders and the ImageNet samples).
        seed: seed of the picks, the crops and the labels (an int).
        channels: 3 replicates grey sources to RGB; None keeps the source's channels.
        num_classes: an int ≥ 2: the label range of sources without labels; for labelled sources, the
            classes kept (labels < ``num_classes``).
        pool: the photos' pool (:func:`natural_images`); only for ``"photos"``.
        root: folder of a torchvision dataset or image folder (None: the packaged samples; ``"data"`` for
            ``"lfw_people"`` and ``"imagefolder"``); only for the sources read from a folder.
        train: the training split (torchvision datasets, ``fashion_mnist_debian``); True only for those.

    Returns:
        ``images`` ``(n, C, size, size)`` float in [0, 1] and ``labels`` ``(n,)`` int64 or None.

    Raises:
        TypeError: naming the argument, before anything is read, for a ``kind`` that is not a string,
            an ``n``, ``size``, ``channels``, ``num_classes`` or ``seed`` that is not an int (``5.0``,
            ``"5"``, ``True``), or a ``train`` that is not True or False.
        ValueError: for an unknown ``kind`` or ``pool``, ``n`` < 1 or larger than the source (or its
            classes below ``num_classes``), ``n=None`` for another source, a ``size`` < 1, ``channels``
            other than 1 or 3, ``num_classes`` < 2, ``channels=1`` for a colour source, or a ``pool``,
            ``root`` or ``train=True`` given to a source that does not use it.
        OfflineDataError: when a full-profile source is not on disk; its subclass MissingAssetError when
            the package of a packaged source is not installed (the message gives the install command),
            AssetChecksumError when its files differ from the ones gitutor was written for.
    """
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a string, one of {KINDS}, got {kind!r}")
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose one of {KINDS}")
    samples = kind in SAMPLE_SETS and (root is None or kind not in TORCHVISION_DATASETS)
    whole = WHOLE_SETS + (kind,) * samples
    if n is None and kind not in whole:
        raise ValueError(f"n must be a positive int (None only for {whole}), got {n!r}")
    if n is not None:
        check_int(n, "n")
    if size is not None:
        check_int(size, "size")
    check_seed(seed)
    if channels is not None and check_int(channels, "channels") not in (1, 3):
        raise ValueError(f"channels must be 1, 3 or None, got {channels!r}")
    if num_classes is not None:
        check_num_classes(num_classes)
    train = check_flag(train, "train")
    if pool != "target" and kind != "photos":
        raise ValueError(f"pool={pool!r} applies only to kind='photos', not {kind!r}")
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")
    if root is not None and kind not in ROOT_KINDS:
        raise ValueError(
            f"root={str(root)!r} applies only to {ROOT_KINDS} (read from a folder), not {kind!r}"
        )
    if train and not (
        kind == "fashion_mnist_debian" or kind in TORCHVISION_DATASETS and not samples
    ):
        raise ValueError(
            f"train=True: {kind!r} has no training split here (only fashion_mnist_debian and the "
            f"torchvision datasets under a root do)"
        )
    generator = make_generator(seed)
    if kind in WHOLE_SETS or samples:
        if samples:
            images, labels = sample_set(kind, size)
        elif kind == "fashion_mnist_debian":
            images, labels = debian_fashion_mnist(train)
        else:
            images, labels = digits() if kind == "digits" else (lfw_faces(), None)
        where = f"{kind!r}"
        if labels is not None and num_classes is not None:
            kept = labels < num_classes
            images, labels = images[kept], labels[kept]
            where += f" (its classes below num_classes={num_classes})"
        if n is not None and n > len(images) or not len(images):
            raise ValueError(f"n={n} but {where} holds only {len(images)} images")
        if n is not None:
            pick = torch.randperm(len(images), generator=generator)[:n]
            images, labels = images[pick], None if labels is None else labels[pick]
    elif kind == "photos":
        images, labels = natural_images(n, size or 32, seed=seed, pool=pool), None
    elif kind == "imagefolder":
        images, labels = image_folder(
            "data" if root is None else root,
            n,
            size=size or 224,
            seed=seed,
            num_classes=num_classes,
        )
    else:
        images, labels = torchvision_images(
            kind,
            n,
            root="data" if root is None else root,
            train=train,
            size=size or 32,
            seed=seed,
            num_classes=num_classes,
        )
    if labels is None and num_classes is not None:
        labels = torch.randint(num_classes, (len(images),), generator=generator)
    images = images if size is None else resize(images, size)
    if channels is not None and channels != images.shape[1]:
        if channels == 1:
            raise ValueError(
                f"channels=1 but {kind!r} images have {images.shape[1]} channels"
            )
        images = images.repeat(1, 3, 1, 1)
    return images, labels
