"""Exceptions shared by several rooms of gitutor (data sources and pretrained weights)."""


class OfflineDataError(RuntimeError):
    """A dataset or weight file is not on disk and cannot be downloaded here."""


class MissingAssetError(OfflineDataError):
    """A registry package that holds a data or weight file is not installed (the message names it and
    the command that installs it)."""


class AssetChecksumError(OfflineDataError):
    """A packaged data or weight file differs from the one gitutor was written for (its sha256)."""
