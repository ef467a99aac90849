"""Real images that ship inside packages (the quick profile, offline): photographs and the LFW
subset of scikit-image, scikit-learn's handwritten digits. All images are float tensors
``(N, C, H, W)`` in [0, 1]."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from gitutor.checks import check_images
from gitutor.seeding import make_generator

#: Photographs bundled in the scikit-image wheel (names of ``skimage.data`` functions).
PHOTOGRAPHS = (
    "astronaut",
    "coffee",
    "chelsea",
    "rocket",
    "retina",
    "hubble_deep_field",
    "immunohistochemistry",
    "colorwheel",
)
POOLS = ("all", "target", "aux")
#: Largest side of a bundled crop (px): both halves of every bundled photograph hold it; larger sizes are upsampled.
BUNDLED_CROP = 128


def _check_size(size: int) -> None:
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"size must be a positive int (pixels), got {size!r}")


def _check_channels(channels: int) -> None:
    if channels not in (1, 3):
        raise ValueError(
            f"channels must be 1 (grey) or 3 (grey replicated to RGB), got {channels!r}"
        )


def resize(images: torch.Tensor, size: int) -> torch.Tensor:
    """Resize ``(N, C, H, W)`` images in [0, 1] to ``(N, C, size, size)`` (bilinear, antialiased),
    kept in [0, 1] (the interpolation's overshoot is clipped; the input is never clipped).

    Raises:
        TypeError: if ``images`` is not a float tensor (8-bit pixels: ``images.float() / 255``).
        ValueError: if ``size`` is not a positive int, or ``images`` is not ``(N, C, H, W)`` in
            [0, 1] (:func:`gitutor.checks.check_images`: e.g. channels-last ``(N, H, W, C)``, 0–255
            pixels or images normalised with a mean and std).
    """
    _check_size(size)
    check_images(images, "images")
    if images.shape[-2:] == (size, size):
        return images.clone()
    out = F.interpolate(
        images, size=(size, size), mode="bilinear", antialias=True, align_corners=False
    )
    return out.clamp(
        0.0, 1.0
    )  # interpolation overshoot only; inputs are already in [0, 1]


def photograph(name: str) -> torch.Tensor:
    """The ``skimage.data`` image ``name`` as a ``(3, H, W)`` float tensor in [0, 1] (grey images
    replicated to RGB, an alpha channel dropped; ``stereo_motorcycle`` gives its left view).

    The scale follows the stored dtype, not the values: integer images are divided by their dtype's
    maximum (255 for uint8, so a dark 8-bit photograph stays dark), boolean images become 0/1 and
    float images must already lie in [0, 1].

    Raises:
        AttributeError: if ``skimage.data`` has no function ``name``.
        ValueError: for a float image outside [0, 1].
    """
    import skimage.data

    image = getattr(skimage.data, name)()
    raw = np.asarray(image[0] if isinstance(image, tuple) else image)
    array = raw.astype(np.float32)
    if np.issubdtype(raw.dtype, np.integer):
        array = array / float(np.iinfo(raw.dtype).max)
    elif (
        raw.dtype != bool
        and raw.size
        and not (0.0 <= float(raw.min()) and float(raw.max()) <= 1.0)
    ):
        raise ValueError(
            f"skimage.data.{name}() is a float image with values in [{raw.min():.4g}, "
            f"{raw.max():.4g}], not in [0, 1]"
        )
    if array.ndim == 2:
        array = np.repeat(array[..., None], 3, axis=2)
    return torch.from_numpy(array[..., :3].copy()).permute(2, 0, 1)


def natural_images(
    n: int, size: int = 32, seed: int = 0, pool: str = "all"
) -> torch.Tensor:
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
    photos = [photograph(name) for name in PHOTOGRAPHS]
    regions = {
        "all": lambda w: w,
        "target": lambda w: w // 2,
        "aux": lambda w: w - w // 2,
    }[pool]
    largest = min(min(photo.shape[1], regions(photo.shape[2])) for photo in photos)
    if size > largest:
        raise ValueError(
            f"size={size} exceeds the smallest {pool!r} region of the photographs ({largest} px)"
        )
    generator = make_generator(seed)
    crops = []
    for _ in range(n):
        photo = photos[int(torch.randint(len(photos), (1,), generator=generator))]
        height, width = photo.shape[1:]
        left, right = {
            "all": (0, width),
            "target": (0, width // 2),
            "aux": (width // 2, width),
        }[pool]
        shorter = min(height, right - left)
        fraction = 0.2 + 0.3 * float(torch.rand((), generator=generator))
        side = max(size, int(fraction * shorter))
        top = int(torch.randint(height - side + 1, (1,), generator=generator))
        x0 = left + int(
            torch.randint(right - left - side + 1, (1,), generator=generator)
        )
        crops.append(resize(photo[None, :, top : top + side, x0 : x0 + side], size))
    return torch.cat(crops)


def bundled_crops(n: int, size: int, seed: int = 0, pool: str = "all") -> torch.Tensor:
    """``(n, 3, size, size)`` crops of :func:`natural_images`, drawn at most :data:`BUNDLED_CROP` px (what
    every half holds) and upsampled to a larger ``size`` (e.g. a full profile's 224 px in smoke runs).

    Raises:
        ValueError: as :func:`natural_images`.
    """
    return resize(
        natural_images(n, size=min(size, BUNDLED_CROP), seed=seed, pool=pool), size
    )


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
    faces = torch.as_tensor(
        np.asarray(skimage.data.lfw_subset()[:100], dtype=np.float32)
    )
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
    return resize(images, size).repeat(1, channels, 1, 1), torch.as_tensor(
        bunch.target, dtype=torch.int64
    )


#: Whole pictures a reader recognises at 32×32, all bundled in the scikit-image wheel: an astronaut,
#: a coffee cup, a cat, a rocket, a retina, a colour wheel, a cameraman, coins, a horse, the
#: scikit-image logo, stained tissue and the Hubble deep field (grey ones replicated to RGB).
WHOLE_PHOTOGRAPHS = (
    "astronaut",
    "coffee",
    "chelsea",
    "rocket",
    "retina",
    "colorwheel",
    "camera",
    "coins",
    "horse",
    "logo",
    "immunohistochemistry",
    "hubble_deep_field",
)


#: Whole photographs of real scenes among them (no drawing, logo, silhouette or colour wheel): the CIFAR
#: stand-in where a chapter's claim is about photographs (chapters 01 and 07).
REAL_PHOTOGRAPHS = (
    "astronaut",
    "coffee",
    "chelsea",
    "rocket",
    "camera",
    "coins",
    "moon",
    "clock",
    "stereo_motorcycle",
    "retina",
    "immunohistochemistry",
    "hubble_deep_field",
)


def whole_photographs(
    size: int = 32, names: tuple[str, ...] = WHOLE_PHOTOGRAPHS
) -> torch.Tensor:
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
    unknown = [
        name for name in names if not callable(getattr(skimage.data, name, None))
    ]
    if unknown:
        raise ValueError(
            f"names {unknown} are not skimage.data photographs; e.g. {WHOLE_PHOTOGRAPHS[:3]}"
        )
    squares = []
    for name in names:
        photo = photograph(name)
        height, width = photo.shape[1:]
        side = min(height, width)
        top, left = (height - side) // 2, (width - side) // 2
        squares.append(
            resize(photo[None, :, top : top + side, left : left + side], size)
        )
    return torch.cat(squares)


#: Whole photographs the book attacks in chapter 04; the trained substitutes never see them.
ATTACKED_PHOTOGRAPHS = ("astronaut", "coffee", "chelsea", "rocket", "camera", "horse")
#: Photographs a trained substitute learns to tell apart (class i = photograph i).
TRAINING_PHOTOGRAPHS = (
    "colorwheel",
    "retina",
    "immunohistochemistry",
    "hubble_deep_field",
    "coins",
    "logo",
    "brick",
    "grass",
    "gravel",
    "moon",
    "page",
    "text",
    "cell",
    "clock",
    "stereo_motorcycle",
    "shepp_logan_phantom",
)


#: Every distinct whole photograph a batch can draw on when no trained substitute is attacked
#: (a pretrained or random network saw none of them).
BUNDLED_PHOTOGRAPHS = ATTACKED_PHOTOGRAPHS + TRAINING_PHOTOGRAPHS


def attacked_photographs(
    size: int,
    batch_size: int,
    index: int = 0,
    names: tuple[str, ...] = ATTACKED_PHOTOGRAPHS,
) -> torch.Tensor:
    """Batch ``index`` of ``names`` (by default :data:`ATTACKED_PHOTOGRAPHS`, held out of the
    trained substitutes; :data:`BUNDLED_PHOTOGRAPHS` for a network that saw none):
    ``batch_size`` consecutive whole photographs from photograph ``index · batch_size`` on
    (cyclically), ``(B, 3, size, size)`` in [0, 1] (:func:`whole_photographs`).

    Raises:
        ValueError: for a bad ``size``, ``batch_size`` outside [1, len(names)] (distinct
            photographs) or a negative ``index``.
    """
    count = len(names)
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or not 1 <= batch_size <= count
    ):
        raise ValueError(
            f"batch_size must be an int in [1, {count}] (distinct bundled photographs; "
            f"larger batches need an image folder), got {batch_size!r}"
        )
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"index must be an int ≥ 0, got {index!r}")
    chosen = tuple(names[(index * batch_size + j) % count] for j in range(batch_size))
    return whole_photographs(size, chosen)
