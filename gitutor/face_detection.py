"""Face detection rate: the semantic metric of Li et al. 2023 (§3, "Evaluation Metrics", Table 1b).

The paper counts a reconstruction as a face when an MTCNN detector finds one. Offline we use
scikit-image's LBP frontal-face cascade (``skimage.feature.Cascade`` with
``skimage.data.lbp_frontal_face_cascade_filename()``, a 24×24 detection window) at a working side
of 32 px. Calibration on the bundled LFW subset at 32×32 with the defaults below: 96 of the 100
faces and 0 of the 100 non-face crops are detected.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from gitutor.checks import check_images

DETECTION_SIDE = 32


@lru_cache(maxsize=1)
def _cascade():
    import skimage.data
    from skimage.feature import Cascade

    return Cascade(skimage.data.lbp_frontal_face_cascade_filename())


def detect_faces(
    image: torch.Tensor,
    *,
    scale_factor: float = 1.1,
    min_size: int = 16,
    min_neighbor_number: int = 1,
) -> list[dict]:
    """Faces found in one image by the LBP cascade.

    Args:
        image: ``(C, H, W)`` float in [0, 1] (colour is averaged to grey); resized to
            :data:`DETECTION_SIDE` px, the side the cascade was calibrated at.
        scale_factor, min_size, min_neighbor_number: passed to ``Cascade.detect_multi_scale``
            (``min_size`` in pixels of the 32 px image).

    Returns:
        List of detections (dicts with ``r``, ``c``, ``width``, ``height``), possibly empty.

    Raises:
        TypeError: if ``image`` is not a float tensor.
        ValueError: if ``image`` is not ``(C, H, W)`` (e.g. channels-last) or leaves [0, 1]
            (:func:`gitutor.checks.check_images`).
    """
    check_images(image, "image", leading=0)
    grey = image.detach().float().cpu().mean(0, keepdim=True)[None]
    grey = (
        F.interpolate(
            grey,
            size=(DETECTION_SIDE, DETECTION_SIDE),
            mode="bilinear",
            antialias=True,
            align_corners=False,
        )
        .clamp(0, 1)[0, 0]
        .numpy()
        .astype(np.float64)
    )
    return _cascade().detect_multi_scale(
        img=grey,
        scale_factor=scale_factor,
        step_ratio=1,
        min_size=(min_size, min_size),
        max_size=(DETECTION_SIDE, DETECTION_SIDE),
        min_neighbor_number=min_neighbor_number,
    )


def face_detection_rate(images: torch.Tensor, **detector_options) -> float:
    """Fraction of ``images`` ``(N, C, H, W)`` in [0, 1] with at least one detected face.

    ``detector_options`` go to :func:`detect_faces`.

    Raises:
        TypeError: if ``images`` is not a float tensor.
        ValueError: if ``images`` is not a non-empty ``(N, C, H, W)`` batch in [0, 1]
            (:func:`gitutor.checks.check_images`: e.g. channels-last, 0–255 pixels).
    """
    check_images(images, "images")
    if images.shape[0] == 0:
        raise ValueError(
            f"images must be a non-empty (N, C, H, W) batch, got shape {tuple(images.shape)}"
        )
    return float(
        np.mean([len(detect_faces(image, **detector_options)) > 0 for image in images])
    )
