"""Chapter 08's data: the 200 LFW images of ``skimage.data.lfw_subset()`` (the first 100 faces, label 1;
the rest non-faces, label 0), resized; ``test_per_class`` of each form the server's test set; the
rest are the attacked clients' photographs (from the front, faces and non-faces alternating) and the
utility clients' data.
"""

from __future__ import annotations

import numpy as np
import torch

from gitutor.controls import RECOGNISABLE_PSNR, control_scores
from gitutor.data.bundled import resize


def face_data(
    size: int, seed: int = 0, test_per_class: int = 50
) -> dict[str, torch.Tensor]:
    """LFW faces / non-faces at ``size`` px: ``test_x``/``test_y`` (``test_per_class`` of each, the
    server's test set) and ``train_x``/``train_y`` (the rest). Training images that a control knowing
    only their 4×4 thumbnail or mean already reproduces at ≥ :data:`~gitutor.controls.RECOGNISABLE_PSNR`
    (flat patches among the non-faces: no attack could show it recognises them) go last, to the
    utility clients; before them faces and non-faces alternate, so the attacked clients (taken from
    the front) hold both classes. ``flat``: how many went last.

    Raises:
        ValueError: for a ``size`` below 8, or a ``test_per_class`` outside [1, 99].
    """
    import skimage.data

    if isinstance(size, bool) or not isinstance(size, int) or size < 8:
        raise ValueError(f"size must be an int ≥ 8 (pixels), got {size!r}")
    if (
        isinstance(test_per_class, bool)
        or not isinstance(test_per_class, int)
        or not 1 <= test_per_class <= 99
    ):
        raise ValueError(
            f"test_per_class must be an int in [1, 99], got {test_per_class!r}"
        )
    images = torch.as_tensor(np.asarray(skimage.data.lfw_subset(), dtype=np.float32))
    images = resize(images[:, None], size).clamp(0, 1)
    order = torch.randperm(100, generator=torch.Generator().manual_seed(seed))
    faces, others = images[:100][order], images[100:][order]
    t = test_per_class
    test_x = torch.cat([faces[:t], others[:t]])
    test_y = torch.cat([torch.ones(t), torch.zeros(t)]).long()
    pools = [faces[t:], others[t:]]
    flat = [per_image_control(pool) >= RECOGNISABLE_PSNR for pool in pools]
    (f, o), n = (
        [pool[~mask] for pool, mask in zip(pools, flat)],
        min(int((~m).sum()) for m in flat),
    )
    train_x = torch.cat(
        [
            torch.stack([f[:n], o[:n]], dim=1).flatten(0, 1),
            f[n:],
            o[n:],
            pools[0][flat[0]],
            pools[1][flat[1]],
        ]
    )
    train_y = torch.cat(
        [
            torch.tensor([1, 0]).repeat(n),
            torch.ones(len(f) - n),
            torch.zeros(len(o) - n),
            torch.ones(int(flat[0].sum())),
            torch.zeros(int(flat[1].sum())),
        ]
    ).long()
    return {
        "train_x": train_x,
        "train_y": train_y,
        "test_x": test_x,
        "test_y": test_y,
        "flat": sum(int(m.sum()) for m in flat),
    }


def per_image_control(images: torch.Tensor) -> torch.Tensor:
    """PSNR (dB) per image ``(N,)`` of the best control that knows only that image's mean or 4×4
    thumbnail (:func:`gitutor.controls.control_scores`; the batch controls depend on the set)."""
    scores = control_scores(images)
    return torch.maximum(scores["mean colour"], scores["4×4 thumbnail"])


def attacked_partitions(data: dict, clients: int, batch: int) -> list:
    """``clients`` partitions of ``batch`` distinct training images each, from the front of
    ``train_x`` (faces and non-faces alternate there)."""
    images, labels = data["train_x"], data["train_y"]
    if clients * batch > len(images):
        raise ValueError(
            f"clients × batch = {clients * batch} exceeds the {len(images)} training images"
        )
    return [
        (images[k * batch : (k + 1) * batch], labels[k * batch : (k + 1) * batch])
        for k in range(clients)
    ]


def utility_partitions(data: dict, clients: int, skip: int) -> list:
    """The training images left after the first ``skip``, shuffled and dealt to ``clients`` clients."""
    images, labels = data["train_x"][skip:], data["train_y"][skip:]
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(1))
    images, labels = images[order], labels[order]
    return [(images[k::clients], labels[k::clients]) for k in range(clients)]
