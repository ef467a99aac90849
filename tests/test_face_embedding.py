"""dlib's face-recognition embedding offline (gitutor.models.face_embedding) on real photographs that ship in
packages: views of one photograph lie close, two different people lie beyond dlib's threshold."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gitutor.models import FACE_MATCH_THRESHOLD, face_distance, face_embedding

pytest.importorskip("dlib")


def _photo(name: str) -> torch.Tensor:
    """Grace Hopper (matplotlib's sample data) or Eileen Collins (scikit-image's astronaut), (1, 3, H, W) in [0, 1]."""
    if name == "hopper":
        import matplotlib
        from PIL import Image

        with Image.open(f"{matplotlib.get_data_path()}/sample_data/grace_hopper.jpg") as image:
            array = np.asarray(image.convert("RGB"))
    else:
        import skimage.data

        array = skimage.data.astronaut()
    return torch.from_numpy(array.astype(np.float32) / 255).permute(2, 0, 1)[None]


def _views(photo: torch.Tensor) -> torch.Tensor:
    """Four views of one photograph: as it is, mirrored, a third of its size, darkened, (4, 3, H, W)."""
    small = torch.nn.functional.interpolate(photo, scale_factor=1 / 3, mode="bilinear", antialias=True)
    small = torch.nn.functional.pad(small, [0, photo.shape[-1] - small.shape[-1], 0, photo.shape[-2] - small.shape[-2]])
    return torch.cat([photo, photo.flip(-1), small.clamp(0, 1), photo * 0.6])


def test_same_photograph_close_different_people_apart():
    embed = face_embedding()
    hopper, collins = embed(_views(_photo("hopper"))), embed(_views(_photo("astronaut")))
    assert not torch.isnan(hopper).any() and not torch.isnan(collins).any()  # every view has a detected face
    same = torch.cat([face_distance(hopper[:1].expand(3, -1), hopper[1:]),
                      face_distance(collins[:1].expand(3, -1), collins[1:])])
    different = face_distance(hopper, collins)
    assert same.max() < FACE_MATCH_THRESHOLD < different.min(), (same, different)  # measured 0.10–0.34, 0.67–0.70


def test_no_face_gives_nan_and_unaligned_crops_embed():
    embed = face_embedding()
    blank = torch.full((1, 3, 64, 64), 0.5)
    assert torch.isnan(embed(blank)).all()
    crop = _photo("astronaut")[:, :, 20:220, 110:310]
    assert embed(crop, align=False).shape == (1, 128)


def test_bad_descriptors():
    with pytest.raises(ValueError, match="128"):
        face_distance(torch.zeros(2, 64), torch.zeros(2, 64))
