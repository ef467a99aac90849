"""Exceptions shared by several rooms of gitutor (data sources and pretrained weights)."""


class OfflineDataError(RuntimeError):
    """A dataset or weight file is not on disk and cannot be downloaded here."""
