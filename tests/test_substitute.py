"""Trained substitutes (gitutor.models.substitute): the shipped ResNet-20's sha256, held-out
photographs, deterministic training, and the checksum check."""
import json
import shutil

import pytest
import torch

from gitutor.data import ATTACKED_PHOTOGRAPHS, TRAINING_PHOTOGRAPHS, attacked_photographs
from gitutor.models.substitute import (RECIPES, SubstituteChecksumError, TrainingConfig,
                                       load_substitute, save_substitute, substitute_path,
                                       substitute_record, substitute_sha256, train_substitute)

#: sha256 of gitutor/models/weights/substitute_resnet20.safetensors as trained by
#: `python scripts/train_substitute.py resnet20` (recipe RECIPES["resnet20"]).
SHIPPED_RESNET20_SHA256 = "e12d4e455f8dd784678aa88ea28eb9e05999ee07cb2c17f305d7dec52d70f267"


def test_shipped_resnet20_has_its_recorded_sha256_and_recipe():
    path = substitute_path("resnet20")
    assert substitute_sha256(path) == SHIPPED_RESNET20_SHA256
    record = substitute_record("resnet20")
    assert record["sha256"] == SHIPPED_RESNET20_SHA256
    assert TrainingConfig(**record["config"]) == RECIPES["resnet20"]
    assert record["final_accuracy"] > 3 / len(TRAINING_PHOTOGRAPHS)  # well above chance


def test_shipped_resnet20_loads_and_classifies_its_training_photographs():
    model = load_substitute(substitute_path("resnet20"))
    assert not model.training
    from gitutor.data.bundled import photograph
    from gitutor.data import resize
    photos = torch.cat([resize(photograph(name)[None], 32) for name in TRAINING_PHOTOGRAPHS])
    with torch.no_grad():
        accuracy = (model(photos).argmax(1) == torch.arange(len(photos))).float().mean()
    assert accuracy >= 0.5


def test_attacked_photographs_are_held_out_of_training():
    assert not set(ATTACKED_PHOTOGRAPHS) & set(TRAINING_PHOTOGRAPHS)
    x = attacked_photographs(16, 4, 1)
    assert x.shape == (4, 3, 16, 16) and 0 <= x.min() and x.max() <= 1
    assert torch.equal(attacked_photographs(16, 1, 4)[0], x[0])  # batch 1 of 4 starts at photo 4
    with pytest.raises(ValueError, match="batch_size"):
        attacked_photographs(16, 7)


def test_training_is_deterministic_and_the_checksum_is_checked(tmp_path):
    config = TrainingConfig(architecture="resnet20", image_size=16, steps=3, batch_size=4)
    first, log = train_substitute(config)
    second, _ = train_substitute(config)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(),
                                                   second.state_dict().values()))
    digest = save_substitute(first, log, tmp_path / "s.safetensors")
    assert json.loads((tmp_path / "s.json").read_text())["sha256"] == digest
    loaded = load_substitute(tmp_path / "s.safetensors")
    x = torch.rand(2, 3, 16, 16)
    assert torch.equal(loaded(x), first(x))
    shutil.copy(tmp_path / "s.safetensors", tmp_path / "t.safetensors")
    shutil.copy(tmp_path / "s.json", tmp_path / "t.json")
    with open(tmp_path / "t.safetensors", "r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x00\x01\x02\x03")
    with pytest.raises(SubstituteChecksumError, match="sha256"):
        load_substitute(tmp_path / "t.safetensors")


def test_bad_recipes_and_missing_substitutes_are_refused(tmp_path):
    with pytest.raises(ValueError, match="architecture"):
        TrainingConfig(architecture="vgg")
    with pytest.raises(ValueError, match="steps"):
        TrainingConfig(steps=0)
    with pytest.raises(ValueError, match="substitute"):
        substitute_path("resnet50")
    with pytest.raises(FileNotFoundError, match="train_substitute"):
        load_substitute(tmp_path / "missing.safetensors")


def test_bundled_batches_hold_out_the_substitutes_photographs_only_when_it_is_attacked():
    from gitutor.chapters.stepwise_gradinversion.trials import private_batches

    held_out = private_batches([4], 1, image_size=16, num_classes=10, seed=0)[(4, 0)][0]
    assert torch.equal(held_out, attacked_photographs(16, 4, 0))
    with pytest.raises(ValueError, match=r"batch_size must be an int in \[1, 6\]"):
        private_batches([8], 1, image_size=16, num_classes=10, seed=0)
    x, y = private_batches([8], 1, image_size=16, num_classes=1000, seed=0, held_out=False)[(8, 0)]
    assert x.shape == (8, 3, 16, 16) and len(set(y.tolist())) == 8  # the paper's B = 8, offline
