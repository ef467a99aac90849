"""Quick and full settings for every notebook.

Each notebook's settings live in one module of this package that defines two dicts, ``QUICK``
(CPU, offline, bundled data, a few minutes on 2 cores) and ``FULL`` (the paper's settings, for a
GPU). Notebooks call ``get_profile("01_dlg", PROFILE)``.
"""
from __future__ import annotations

import importlib

NOTEBOOK_MODULES = {
    "01_dlg": "dlg",
    "02_idlg_soft_labels": "idlg_soft_labels",
    "03_cv_batch_labels": "cv_batch_labels",
    "04_stepwise_gradinversion": "stepwise_gradinversion",
    "05_diffusion_user_level": "diffusion_user_level",
    "06_learning_to_invert": "learning_to_invert",
    "07_admm_comparison": "admm_comparison",
}
PROFILES = ("quick", "full")


class Profile(dict):
    """A dict of settings whose keys can also be read as attributes (``cfg.iterations``)."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"profile has no setting {name!r}; settings: {sorted(self)}") from None


def get_profile(notebook: str, profile: str = "quick") -> Profile:
    """Settings of ``notebook`` (e.g. ``"01_dlg"``) for ``profile`` (``"quick"`` or ``"full"``).

    Returns a fresh copy, so a notebook may change a setting without affecting another.

    Raises:
        ValueError: for an unknown notebook or profile name.
    """
    if notebook not in NOTEBOOK_MODULES:
        raise ValueError(f"unknown notebook {notebook!r}; choose one of {sorted(NOTEBOOK_MODULES)}")
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose 'quick' (CPU, minutes) or 'full' (paper scale, GPU)")
    module = importlib.import_module(f"gitutor.profiles.{NOTEBOOK_MODULES[notebook]}")
    settings = module.QUICK if profile == "quick" else module.FULL
    return Profile(dict(settings, profile=profile, notebook=notebook))
