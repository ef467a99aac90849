"""Users for user-level gradient inversion (Li et al. 2023, §3 "Setup"): one batch of one person.

Scores of a representative image against a user live in :mod:`gitutor.attacks.user_level.evaluation`.

- Quick profile (:func:`lfw_user`): the bundled LFW subset has no identities, so a user is ONE
  held-out LFW face (index >= ``gitutor.priors.PRIOR_TRAIN_FACES``, never seen by the DDPM prior)
  and B photometric/geometric variations of it — small rotation, scale and shift, horizontal flip,
  brightness and contrast — standing in for B photos of the same person. Binary task: is the
  person's face brighter than the median LFW face — an attribute of the person, so all B photos of
  a user share the label, as CelebA's "Attractive" mostly does within one identity.
- Full profile (:func:`celeba_users`): CelebA through torchvision, grouped by identity, the first
  users with at least B images, resized to 64×64, binary label "Attractive" (as in the paper).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torchvision.transforms.v2.functional as TF

from gitutor.data import OfflineDataError, lfw_faces, resize
from gitutor.priors import PRIOR_TRAIN_FACES
from gitutor.seeding import make_generator

NUM_LFW_FACES = 100
#: Files torchvision's CelebA loader needs under ``root/celeba``.
CELEBA_FILES = (
    "img_align_celeba",
    "list_attr_celeba.txt",
    "identity_CelebA.txt",
    "list_eval_partition.txt",
    "list_bbox_celeba.txt",
    "list_landmarks_align_celeba.txt",
)


def _uniform(generator: torch.Generator, low: float, high: float) -> float:
    return float(
        low + (high - low) * torch.rand(1, generator=generator, dtype=torch.float64)
    )


def brightness_attribute(face_index: int) -> int:
    """The quick profile's binary attribute of an LFW face: 1 if its mean grey value is above the
    median over the 100 faces, else 0."""
    means = lfw_faces().mean(dim=(1, 2, 3))
    return int(means[face_index] > means.median())


def lfw_user(
    face_index: int,
    batch_size: int = 30,
    *,
    size: int = 32,
    channels: int = 1,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A quick-profile user: B variations of one held-out LFW face, all labelled with the face's
    :func:`brightness_attribute`.

    Each photo: rotation ±10°, scale 0.9–1.1, shift ±2 px (bilinear ``affine``; uncovered corners
    are filled with 0), horizontal flip with p = 0.5, brightness ×(0.8–1.2) and contrast
    ×(0.8–1.2) around the image mean; clamped to [0, 1]. All draws come from ``seed``.

    Args:
        face_index: index into the 100 LFW faces; must be a held-out face, i.e. in
            [PRIOR_TRAIN_FACES, 100).
        batch_size: B.
        size, channels: image side and channels (grey replicated for 3).

    Returns:
        ``images`` ``(B, channels, size, size)`` in [0, 1] and ``labels`` ``(B,)`` int64.

    Raises:
        ValueError: for a face the prior was trained on, an index out of range or ``batch_size < 2``.
    """
    if not PRIOR_TRAIN_FACES <= face_index < NUM_LFW_FACES:
        raise ValueError(
            f"face_index must be a held-out face in [{PRIOR_TRAIN_FACES}, {NUM_LFW_FACES}) so "
            f"that the DDPM prior has never seen it, got {face_index}"
        )
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or batch_size < 2
    ):
        raise ValueError(f"batch_size must be an int >= 2, got {batch_size!r}")
    face = lfw_faces(size=size, channels=channels)[face_index : face_index + 1]
    generator = make_generator(seed * NUM_LFW_FACES + face_index)
    photos = []
    for _ in range(batch_size):
        x = TF.affine(
            face,
            angle=_uniform(generator, -10, 10),
            translate=[_uniform(generator, -2, 2), _uniform(generator, -2, 2)],
            scale=_uniform(generator, 0.9, 1.1),
            shear=[0.0, 0.0],
            interpolation=TF.InterpolationMode.BILINEAR,
        )
        if torch.rand(1, generator=generator) < 0.5:
            x = x.flip(-1)
        mean = x.mean()
        x = (x - mean) * _uniform(generator, 0.8, 1.2) + mean * _uniform(
            generator, 0.8, 1.2
        )
        photos.append(x.clamp(0, 1))
    images = torch.cat(photos)
    return images, torch.full(
        (batch_size,), brightness_attribute(face_index), dtype=torch.int64
    )


def celeba_users(
    n_users: int,
    batch_size: int = 30,
    *,
    root: str | Path = "data",
    size: int = 64,
    attribute: str = "Attractive",
    download: bool = False,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Full-profile users: the first ``n_users`` CelebA identities with >= ``batch_size`` images.

    Each user is ``(images (B, 3, size, size) in [0, 1], labels (B,) int64)`` with the first B
    images of that identity (dataset order) and the binary ``attribute`` as label (Li et al. §3).

    Raises:
        OfflineDataError: if CelebA is not under ``root`` (torchvision cannot download it reliably:
            fetch img_align_celeba.zip, list_attr_celeba.txt, identity_CelebA.txt,
            list_eval_partition.txt, list_bbox_celeba.txt and list_landmarks_align_celeba.txt into
            ``root/celeba``).
        ValueError: for an unknown attribute or too few qualifying identities.
    """
    import torchvision

    try:
        dataset = torchvision.datasets.CelebA(
            str(root),
            split="all",
            target_type=["identity", "attr"],
            transform=torchvision.transforms.ToTensor(),
            download=download,
        )
    except (
        Exception
    ) as error:  # RuntimeError when missing, gdown/URL errors when downloading
        raise OfflineDataError(
            f"CelebA is not in {Path(root).resolve() / 'celeba'}: download img_align_celeba.zip and the "
            "list_*.txt / identity_CelebA.txt files from the CelebA website (or Google Drive) into that "
            f"folder, or set DATA_ROOT to where they are. ({error})"
        ) from error
    if attribute not in dataset.attr_names:
        raise ValueError(
            f"unknown CelebA attribute {attribute!r}; choose one of {dataset.attr_names}"
        )
    column = dataset.attr_names.index(attribute)
    identity = dataset.identity[:, 0]
    counts = torch.bincount(identity)
    chosen = [
        int(i) for i in torch.unique_consecutive(identity) if counts[i] >= batch_size
    ]
    chosen = list(dict.fromkeys(chosen))[:n_users]
    if len(chosen) < n_users:
        raise ValueError(f"only {len(chosen)} identities have >= {batch_size} images")
    users = []
    for person in chosen:
        indices = torch.nonzero(identity == person)[:batch_size, 0]
        images = torch.stack([dataset[int(i)][0] for i in indices])
        users.append((resize(images, size), dataset.attr[indices, column].long()))
    return users


def celeba_missing(root: str | Path = "data") -> list[str]:
    """The CelebA files (of :data:`CELEBA_FILES`) absent from ``root/celeba``; empty when all are there.

    Checks the disk only, so a notebook can list everything the full profile lacks at once, offline.
    """
    folder = Path(root) / "celeba"
    return [str(folder / name) for name in CELEBA_FILES if not (folder / name).exists()]
