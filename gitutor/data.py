"""Image sources: real images bundled in packages (quick profile) and torchvision datasets (full).

Quick profiles run offline, so they use photographs shipped inside scikit-image, the LFW subset
of scikit-image and scikit-learn's handwritten digits. Full profiles use torchvision's own loaders;
offline they fail fast with :class:`OfflineDataError`, which says what to download and where.

All images are float tensors ``(N, C, H, W)`` in [0, 1].
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from gitutor.errors import OfflineDataError
from gitutor.seeding import make_generator

#: Photographs bundled in the scikit-image wheel (names of ``skimage.data`` functions).
PHOTOGRAPHS = ("astronaut", "coffee", "chelsea", "rocket", "retina", "hubble_deep_field",
               "immunohistochemistry", "colorwheel")
POOLS = ("all", "target", "aux")
TORCHVISION_DATASETS = {"cifar10": "CIFAR10", "cifar100": "CIFAR100", "mnist": "MNIST", "lfw_people": "LFWPeople"}


def _check_size(size: int) -> None:
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"size must be a positive int (pixels), got {size!r}")


def _check_channels(channels: int) -> None:
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 (grey) or 3 (grey replicated to RGB), got {channels!r}")


def resize(images: torch.Tensor, size: int) -> torch.Tensor:
    """Resize ``(N, C, H, W)`` images to ``(N, C, size, size)`` (bilinear, antialiased), kept in [0, 1].

    Raises:
        ValueError: if ``images`` is not 4-D or ``size`` is not a positive int.
    """
    _check_size(size)
    if images.dim() != 4:
        raise ValueError(f"images must be (N, C, H, W), got shape {tuple(images.shape)}")
    if images.shape[-2:] == (size, size):
        return images.clone()
    out = F.interpolate(images, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return out.clamp(0.0, 1.0)  # interpolation overshoot only; inputs are already in [0, 1]


def _photograph(name: str) -> torch.Tensor:
    import skimage.data

    array = np.asarray(getattr(skimage.data, name)(), dtype=np.float32)
    if array.max() > 1.0:
        array = array / 255.0
    if array.ndim == 2:
        array = np.repeat(array[..., None], 3, axis=2)
    return torch.from_numpy(array[..., :3].copy()).permute(2, 0, 1)


def natural_images(n: int, size: int = 32, seed: int = 0, pool: str = "all") -> torch.Tensor:
    """Random square crops of the photographs bundled in scikit-image.

    Each crop picks a photograph, a side between 20 % and 50 % of the available region's shorter
    side and a position, all from a generator seeded with ``seed``, then resizes to ``size``.
    ``pool="target"`` crops only from the left half of every photograph and ``pool="aux"`` only
    from the right half, so an attacked batch and an auxiliary set never share a pixel.

    Args:
        n: number of crops.
        size: output side in pixels.
        seed: seed of the crop generator.
        pool: ``"all"``, ``"target"`` or ``"aux"``.

    Returns:
        ``(n, 3, size, size)`` float tensor in [0, 1].

    Raises:
        ValueError: for ``n < 1``, an unknown ``pool``, or a ``size`` that is not a positive int or
            is larger than the smallest photograph region of the pool.
    """
    if type(n) is not int or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    _check_size(size)
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")
    photos = [_photograph(name) for name in PHOTOGRAPHS]
    regions = {"all": lambda w: w, "target": lambda w: w // 2, "aux": lambda w: w - w // 2}[pool]
    largest = min(min(photo.shape[1], regions(photo.shape[2])) for photo in photos)
    if size > largest:
        raise ValueError(f"size={size} exceeds the smallest {pool!r} region of the photographs ({largest} px)")
    generator = make_generator(seed)
    crops = []
    for _ in range(n):
        photo = photos[int(torch.randint(len(photos), (1,), generator=generator))]
        height, width = photo.shape[1:]
        left, right = {"all": (0, width), "target": (0, width // 2), "aux": (width // 2, width)}[pool]
        shorter = min(height, right - left)
        fraction = 0.2 + 0.3 * float(torch.rand((), generator=generator))
        side = max(size, int(fraction * shorter))
        top = int(torch.randint(height - side + 1, (1,), generator=generator))
        x0 = left + int(torch.randint(right - left - side + 1, (1,), generator=generator))
        crops.append(resize(photo[None, :, top:top + side, x0:x0 + side], size))
    return torch.cat(crops)


def lfw_faces(size: int = 25, channels: int = 1) -> torch.Tensor:
    """The 100 face images of ``skimage.data.lfw_subset()`` (Labeled Faces in the Wild, 25×25 grey).

    Returns:
        ``(100, channels, size, size)`` float tensor in [0, 1]; ``channels=3`` replicates the grey
        channel.

    Raises:
        ValueError: for a bad ``size`` or ``channels``.
    """
    import skimage.data

    _check_size(size)
    _check_channels(channels)
    faces = torch.as_tensor(np.asarray(skimage.data.lfw_subset()[:100], dtype=np.float32))
    return resize(faces[:, None], size).repeat(1, channels, 1, 1)


def digits(size: int = 8, channels: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's 1 797 handwritten digits (8×8, 10 classes), an offline stand-in for MNIST.

    Returns:
        ``images`` ``(1797, channels, size, size)`` float in [0, 1] and ``labels`` ``(1797,)`` int64.

    Raises:
        ValueError: for a bad ``size`` or ``channels``.
    """
    from sklearn.datasets import load_digits

    _check_size(size)
    _check_channels(channels)
    bunch = load_digits()
    images = torch.as_tensor(bunch.images, dtype=torch.float32)[:, None] / 16.0
    return resize(images, size).repeat(1, channels, 1, 1), torch.as_tensor(bunch.target, dtype=torch.int64)


def torchvision_images(name: str, n: int, *, root: str | Path = "data", train: bool = False,
                       size: int = 32, seed: int = 0, download: bool = False
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random images and labels of CIFAR-10, CIFAR-100, MNIST or LFW (people) through torchvision
    (full profile); ``train`` picks the training split (LFWPeople: ``split="train"``, else ``"test"``).

    Images are ``ToTensor`` only (no mean/std normalisation), as in the DLG code, resized to ``size``.

    Returns:
        ``images`` ``(n, C, size, size)`` in [0, 1] (C = 3, or 1 for MNIST) and ``labels`` ``(n,)``.

    Raises:
        ValueError: for an unknown dataset name.
        OfflineDataError: when the dataset is not under ``root`` and ``download`` is False or fails.
    """
    import torchvision

    if name not in TORCHVISION_DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {sorted(TORCHVISION_DATASETS)}")
    cls = getattr(torchvision.datasets, TORCHVISION_DATASETS[name])
    try:
        split = {"split": "train" if train else "test"} if name == "lfw_people" else {"train": train}
        dataset = cls(root=str(root), download=download, transform=torchvision.transforms.ToTensor(), **split)
    except Exception as error:  # torchvision raises RuntimeError/URLError depending on the failure
        raise OfflineDataError(
            f"{TORCHVISION_DATASETS[name]} is not in {Path(root).resolve()}. On a machine with internet, "
            f"run torchvision.datasets.{TORCHVISION_DATASETS[name]}(root={str(root)!r}, download=True) "
            f"once, or set DATA_ROOT to the folder that holds it. ({error})") from error
    images, labels = _sample(dataset, n, seed)
    return resize(images, size), labels


def image_folder(root: str | Path, n: int, *, size: int = 224, seed: int = 0
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random images of a ``torchvision.datasets.ImageFolder`` tree (e.g. ImageNet validation,
    one sub-folder per class, in class-index order), centre-cropped and resized to ``size``.

    Returns:
        ``images`` ``(n, 3, size, size)`` in [0, 1] and ``labels`` ``(n,)`` (folder indices).

    Raises:
        OfflineDataError: if ``root`` does not exist.
    """
    import torchvision
    from torchvision import transforms

    if not Path(root).is_dir():
        raise OfflineDataError(
            f"image folder {Path(root).resolve()} not found: put the ImageNet validation images there, "
            "one sub-folder per class (e.g. n01440764/...), or set IMAGE_ROOT to that folder")
    transform = transforms.Compose([transforms.Resize(size), transforms.CenterCrop(size), transforms.ToTensor()])
    dataset = torchvision.datasets.ImageFolder(str(root), transform=transform)
    return _sample(dataset, n, seed)


def _sample(dataset, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n random (image, label) items of a torchvision dataset, stacked."""
    indices = torch.randperm(len(dataset), generator=make_generator(seed))[:n]
    images, labels = zip(*(dataset[int(i)] for i in indices))
    return torch.stack(images), torch.as_tensor(labels, dtype=torch.int64)


#: Image sources of :func:`load`.
KINDS = ("photos", "digits", "lfw", "imagefolder", *TORCHVISION_DATASETS)


def load(kind: str, n: int | None = None, *, size: int | None = None, seed: int = 0, channels: int | None = None,
         num_classes: int | None = None, pool: str = "target", root: str | Path = "data", train: bool = False
         ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``n`` images and labels of one source, the entry point for every chapter's data.

    Sources (``kind``): ``"photos"`` (:func:`natural_images` crops from ``pool``), ``"digits"``
    (:func:`digits`), ``"lfw"`` (:func:`lfw_faces`) — bundled, for the quick profile — and, for the
    full profile, ``"cifar10"``, ``"cifar100"``, ``"mnist"``, ``"lfw_people"``
    (:func:`torchvision_images` under ``root``) and ``"imagefolder"`` (:func:`image_folder`).
    Photos and the LFW subset have no labels of their own: they get labels uniform in
    [0, ``num_classes``) when it is given, else None. The picks (and those labels) come from one generator seeded with ``seed``.

    Args:
        kind: one of :data:`KINDS`.
        n: number of images; None takes the whole of ``digits`` or ``lfw`` in its own order.
        size: output side in pixels (default: the source's own; 32 for photos and torchvision, 224
            for image folders).
        seed: seed of the picks, the crops and the labels.
        channels: 3 replicates grey sources to RGB; None keeps the source's channels.
        num_classes: label range for sources without labels.
        pool, root, train: see above.

    Returns:
        ``images`` ``(n, C, size, size)`` float in [0, 1] and ``labels`` ``(n,)`` int64 or None.

    Raises:
        ValueError: for an unknown ``kind``, ``n`` < 1 or larger than the source, ``n=None`` for
            another source, a bad ``size``, ``channels`` or ``num_classes``, or ``channels=1`` for a
            colour source.
        OfflineDataError: when a full-profile source is not on disk.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose one of {KINDS}")
    if n is None and kind not in ("digits", "lfw") or n is not None and (type(n) is not int or n < 1):
        raise ValueError(f"n must be a positive int (None only for 'digits' and 'lfw'), got {n!r}")
    if channels not in (None, 1, 3):
        raise ValueError(f"channels must be 1, 3 or None, got {channels!r}")
    if num_classes is not None and (type(num_classes) is not int or num_classes < 1):
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    generator = make_generator(seed)
    if kind in ("digits", "lfw"):
        images, labels = digits() if kind == "digits" else (lfw_faces(), None)
        if n is not None:
            if n > len(images):
                raise ValueError(f"n={n} but {kind!r} holds only {len(images)} images")
            pick = torch.randperm(len(images), generator=generator)[:n]
            images, labels = images[pick], None if labels is None else labels[pick]
    elif kind == "photos":
        images, labels = natural_images(n, size or 32, seed=seed, pool=pool), None
    elif kind == "imagefolder":
        images, labels = image_folder(root, n, size=size or 224, seed=seed)
    else:
        images, labels = torchvision_images(kind, n, root=root, train=train, size=size or 32, seed=seed)
    if labels is None and num_classes is not None:
        labels = torch.randint(num_classes, (len(images),), generator=generator)
    images = images if size is None else resize(images, size)
    if channels is not None and channels != images.shape[1]:
        if channels == 1:
            raise ValueError(f"channels=1 but {kind!r} images have {images.shape[1]} channels")
        images = images.repeat(1, 3, 1, 1)
    return images, labels


#: Whole pictures a reader recognises at 32×32, all bundled in the scikit-image wheel: an astronaut,
#: a coffee cup, a cat, a rocket, a retina, a colour wheel, a cameraman, coins, a horse, the
#: scikit-image logo, stained tissue and the Hubble deep field (grey ones replicated to RGB).
WHOLE_PHOTOGRAPHS = ("astronaut", "coffee", "chelsea", "rocket", "retina", "colorwheel", "camera", "coins", "horse",
                     "logo", "immunohistochemistry", "hubble_deep_field")


def whole_photographs(size: int = 32, names: tuple[str, ...] = WHOLE_PHOTOGRAPHS) -> torch.Tensor:
    """Whole bundled photographs, centre-cropped to a square and resized to ``size`` (CIFAR-like).

    Unlike :func:`natural_images` (small random crops), every image shows a whole scene a reader
    recognises, so a reconstruction can be judged by eye.

    Args:
        size: output side in pixels.
        names: ``skimage.data`` function names, each a photograph in the scikit-image wheel.

    Returns:
        ``(len(names), 3, size, size)`` float tensor in [0, 1], in the order of ``names``.

    Raises:
        ValueError: for a bad ``size``, an empty ``names`` or a name that is not a bundled photograph.
    """
    import skimage.data

    _check_size(size)
    if not names:
        raise ValueError("names must list at least one skimage.data photograph")
    unknown = [name for name in names if not callable(getattr(skimage.data, name, None))]
    if unknown:
        raise ValueError(f"names {unknown} are not skimage.data photographs; e.g. {WHOLE_PHOTOGRAPHS[:3]}")
    squares = []
    for name in names:
        photo = _photograph(name)
        height, width = photo.shape[1:]
        side = min(height, width)
        top, left = (height - side) // 2, (width - side) // 2
        squares.append(resize(photo[None, :, top:top + side, left:left + side], size))
    return torch.cat(squares)
