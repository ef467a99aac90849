"""Trained substitutes: the chapter's network trained offline on photographs that ship with
scikit-image, because no ImageNet-pretrained weights can be downloaded here.

Gradient inversion of a deep network depends on what the network has learned: its filters, and
the BatchNorm running statistics that R_BN matches (Ye et al., AAAI 2024, Eq. 11; Yin et al.,
CVPR 2021, Eq. 4). A substitute is trained to tell
:data:`gitutor.data.TRAINING_PHOTOGRAPHS` apart (class = photograph) from augmented crops; the
photographs the book attacks, :data:`gitutor.data.ATTACKED_PHOTOGRAPHS`, never enter training.

:func:`train_substitute` is deterministic (explicit seed, pinned thread count) and writes
safetensors; :func:`substitute_sha256` is the digest a manifest records and
:func:`load_substitute` checks.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm.auto import tqdm

from gitutor.data import TRAINING_PHOTOGRAPHS, resize
from gitutor.data.bundled import photograph
from gitutor.files import atomic_paths, read_json
from gitutor.models.resnet import IMAGENET_MEAN, IMAGENET_STD, resnet34
from gitutor.models.resnet20 import resnet20

ARCHITECTURES = ("resnet34", "resnet20")


#: Trained substitutes go here (``GITUTOR_SUBSTITUTES`` overrides it); the ResNet-20 ships.
SUBSTITUTE_CACHE = Path(
    os.environ.get(
        "GITUTOR_SUBSTITUTES",
        Path(__file__).resolve().parents[2] / "build" / "substitutes",
    )
)
SHIPPED = Path(__file__).resolve().parent / "weights"


class SubstituteChecksumError(RuntimeError):
    """A substitute's weights do not have the sha256 its manifest records."""


@dataclass(frozen=True)
class TrainingConfig:
    """How a substitute is trained (recorded beside its weights).

    ``image_size`` px crops of a random side between ``min_scale`` and 1 of the photograph's
    shorter side, horizontal flips, brightness/contrast jitter of ±``jitter``; SGD with
    momentum 0.9, weight decay 5e-4 and a cosine learning rate from ``lr`` over ``steps`` steps
    of ``batch_size`` crops.
    """

    architecture: str = "resnet34"
    image_size: int = 64
    steps: int = 300
    batch_size: int = 32
    lr: float = 0.05
    min_scale: float = 0.15
    jitter: float = 0.2
    seed: int = 0
    threads: int = 1

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(
                f"architecture must be one of {ARCHITECTURES}, "
                f"got {self.architecture!r}"
            )
        for name in ("image_size", "steps", "batch_size", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        for name, inside, rule in (
            ("min_scale", lambda v: 0 < v <= 1, "in (0, 1]"),
            ("lr", lambda v: 0 < v < math.inf, "a finite learning rate > 0"),
            ("jitter", lambda v: 0 <= v <= 1, "in [0, 1]"),
        ):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not inside(value)
            ):
                raise ValueError(f"{name} must be {rule}, got {value!r}")
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or self.seed < 0
        ):
            raise ValueError(f"seed must be an int ≥ 0, got {self.seed!r}")


#: The recipes: the CIFAR ResNet-20 (shipped, ~1 MB) and the chapter's ResNet34 (~85 MB, trained
#: once into :data:`SUBSTITUTE_CACHE`), both on 32-px crops.
RECIPES = {
    "resnet20": TrainingConfig(
        architecture="resnet20", image_size=32, steps=400, batch_size=32
    ),
    "resnet34": TrainingConfig(
        architecture="resnet34", image_size=32, steps=600, batch_size=32
    ),
}


def recipe_hash() -> str:
    """First 12 hex digits of the sha256 of this module's source (it holds the recipes)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


def substitute_path(name: str) -> Path:
    """Where recipe ``name`` lives: the shipped ResNet-20, or the ResNet34 in
    :data:`SUBSTITUTE_CACHE` keyed by :func:`recipe_hash` (a changed recipe trains a new file).

    Raises:
        ValueError: for a name that is not in :data:`RECIPES`.
    """
    if name not in RECIPES:
        raise ValueError(f"substitute must be one of {sorted(RECIPES)}, got {name!r}")
    if name == "resnet20":
        return SHIPPED / "substitute_resnet20.safetensors"
    return SUBSTITUTE_CACHE / f"substitute_{name}-{recipe_hash()}.safetensors"


def substitute_network(
    architecture: str, num_classes: int = len(TRAINING_PHOTOGRAPHS), seed: int = 0
) -> nn.Sequential:
    """The untrained substitute: ImageNet normalisation, then ResNet34 (torchvision, ImageNet
    stem) or the CIFAR ResNet-20; input ``(B, 3, H, W)`` in [0, 1], output ``(B, num_classes)``.

    Raises:
        ValueError: for an unknown ``architecture``.
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(
            f"architecture must be one of {ARCHITECTURES}, got {architecture!r}"
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # torchvision initialises from the global generator
        if architecture == "resnet34":
            network = resnet34(num_classes=num_classes)
        else:
            network = resnet20(num_classes=num_classes, seed=seed)
    return nn.Sequential(_normalise(), network)


def _normalise() -> nn.Module:
    import torchvision

    return torchvision.transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)


def training_photographs() -> list[torch.Tensor]:
    """The :data:`TRAINING_PHOTOGRAPHS` as ``(3, H, W)`` tensors in [0, 1] (grey → RGB)."""
    return [photograph(name) for name in TRAINING_PHOTOGRAPHS]


def augmented_batch(
    photos: list[torch.Tensor],
    size: int,
    batch_size: int,
    min_scale: float,
    jitter: float,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` random crops ``(B, 3, size, size)`` in [0, 1] and their labels ``(B,)``
    (index of the photograph), every random number drawn from ``generator``."""
    labels = torch.randint(len(photos), (batch_size,), generator=generator)
    crops = []
    for label in labels.tolist():
        photo = photos[label]
        height, width = photo.shape[1:]
        fraction = min_scale + (1 - min_scale) * float(
            torch.rand((), generator=generator)
        )
        side = max(8, int(fraction * min(height, width)))
        top = int(torch.randint(height - side + 1, (1,), generator=generator))
        left = int(torch.randint(width - side + 1, (1,), generator=generator))
        crop = resize(photo[None, :, top : top + side, left : left + side], size)
        if float(torch.rand((), generator=generator)) < 0.5:
            crop = crop.flip(-1)
        gain, shift = 1 + jitter * (2 * torch.rand(2, generator=generator) - 1)
        mean = crop.mean()
        crops.append(((crop - mean) * gain + mean * shift).clamp(0, 1))
    return torch.cat(crops), labels


def train_substitute(
    config: TrainingConfig, progress: bool = False
) -> tuple[nn.Sequential, dict]:
    """Train :func:`substitute_network` on augmented crops of :data:`TRAINING_PHOTOGRAPHS`.

    Deterministic for a given ``config`` on a given machine: one generator seeded with
    ``config.seed`` draws the initialisation, the crops and the batches, and torch runs with
    ``config.threads`` threads (restored afterwards).

    Returns:
        The trained model in eval mode, and a log ``{"config", "loss", "accuracy", "seconds"}``
        with the training loss and accuracy of every 10th step's batch (accuracy in [0, 1])
        and ``"final_accuracy"``: accuracy on 256 fresh crops (seed ``config.seed + 1``).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        return _train(config, progress)
    finally:
        torch.set_num_threads(threads)


def _train(config: TrainingConfig, progress: bool) -> tuple[nn.Sequential, dict]:
    start = time.perf_counter()
    model = substitute_network(config.architecture, seed=config.seed).train()
    photos = training_photographs()
    generator = torch.Generator().manual_seed(config.seed)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=config.lr, momentum=0.9, weight_decay=5e-4
    )
    log = {"config": asdict(config), "step": [], "loss": [], "accuracy": []}
    for step in tqdm(
        range(config.steps), desc="training substitute", disable=not progress
    ):
        for group in optimizer.param_groups:
            group["lr"] = (
                config.lr * 0.5 * (1 + math.cos(math.pi * step / config.steps))
            )
        x, y = augmented_batch(
            photos,
            config.image_size,
            config.batch_size,
            config.min_scale,
            config.jitter,
            generator,
        )
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 10 == 0 or step == config.steps - 1:
            log["step"].append(step)
            log["loss"].append(loss.item())
            log["accuracy"].append(float((logits.argmax(1) == y).float().mean()))
    model.eval()
    held = torch.Generator().manual_seed(config.seed + 1)
    x, y = augmented_batch(
        photos, config.image_size, 256, config.min_scale, config.jitter, held
    )
    with torch.no_grad():
        log["final_accuracy"] = float((model(x).argmax(1) == y).float().mean())
    log["seconds"] = time.perf_counter() - start
    return model, log


def substitute_sha256(path: str | Path) -> str:
    """Hex sha256 of a substitute's safetensors file."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def save_substitute(model: nn.Module, log: dict, path: str | Path) -> str:
    """Write ``model``'s state dict to ``path`` (safetensors) and ``log`` plus the weights'
    sha256 to ``path`` with suffix ``.json``; returns the sha256.

    Both files are replaced together and only once both are written (:mod:`gitutor.files`): a
    failure leaves the previous substitute byte-identical."""
    path = Path(path)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    with atomic_paths(path, path.with_suffix(".json")) as (
        weights,
        manifest,
    ):  # both or neither
        save_file(state, str(weights))
        digest = substitute_sha256(weights)
        manifest.write_text(json.dumps({**log, "sha256": digest}, indent=1))
    return digest


def load_substitute(
    path: str | Path, expected_sha256: str | None = None
) -> nn.Sequential:
    """The trained substitute at ``path`` in eval mode, after checking its sha256.

    Args:
        path: safetensors written by :func:`save_substitute`; its ``.json`` beside it names the
            architecture.
        expected_sha256: the digest to insist on (default: the one in the ``.json``).

    Raises:
        FileNotFoundError: if the weights or their ``.json`` are missing (the message says how
            to train them).
        SubstituteChecksumError: if the file's sha256 differs.
        ValueError: naming the file when the ``.json`` is truncated or names no architecture, the
            weights are not safetensors, or they belong to another architecture than the ``.json``
            names (both named).
    """
    path = Path(path)
    if not path.is_file() or not path.with_suffix(".json").is_file():
        raise FileNotFoundError(
            f"no trained substitute at {path}: train it with "
            "`python scripts/train_substitute.py` (or `make substitutes`)"
        )
    manifest = path.with_suffix(".json")
    record = read_json(manifest, "substitute manifest")
    architecture = (
        record.get("config", {}).get("architecture")
        if isinstance(record, dict)
        else None
    )
    if architecture not in ARCHITECTURES or not isinstance(record.get("sha256"), str):
        raise ValueError(
            f"substitute manifest {manifest} names no architecture of {ARCHITECTURES} "
            "and sha256 (config.architecture, sha256)"
        )
    want = expected_sha256 or record["sha256"]
    got = substitute_sha256(path)
    if got != want:
        raise SubstituteChecksumError(
            f"{path} has sha256 {got}, expected {want}: retrain it "
            "with `python scripts/train_substitute.py`"
        )
    try:
        state = load_file(str(path))
    except Exception as error:  # noqa: BLE001 - safetensors raises its own SafetensorError
        raise ValueError(f"{path} is not a safetensors file ({error})") from None
    model = substitute_network(architecture)
    try:
        model.load_state_dict(state)
    except RuntimeError:
        shapes = {
            name: t.shape for name, t in state.items()
        }  # whose weights are these?
        found = next(
            (
                a
                for a in ARCHITECTURES
                if shapes
                == {
                    name: t.shape
                    for name, t in substitute_network(a).state_dict().items()
                }
            ),
            None,
        )
        raise ValueError(
            f"{manifest} names the architecture {architecture!r} but the weights in {path.name} "
            f"are {'those of ' + repr(found) if found else 'of no known architecture'}"
        ) from None
    return model.eval()


def substitute_record(name: str) -> dict:
    """The training log of recipe ``name`` saved beside its weights (config, loss, accuracy,
    seconds, sha256).

    Raises:
        ValueError: for an unknown ``name``.
        FileNotFoundError: if it has not been trained (the message says how).
    """
    path = substitute_path(name).with_suffix(".json")
    if not path.is_file():
        raise FileNotFoundError(
            f"no trained substitute {name!r} at {path}: train it with "
            f"`python scripts/train_substitute.py {name}`"
        )
    return read_json(path, "substitute manifest")
