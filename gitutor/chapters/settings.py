"""Quick and full settings for every notebook, as frozen dataclasses.

Each notebook's settings live in one module of this package that defines two dicts, ``QUICK``
(CPU, offline, bundled data, a few minutes on 2 cores) and ``FULL`` (the paper's settings, for a
GPU), and may define ``BUDGETS``, named overrides applied on top of either profile (``"smoke"``:
the profile's code path for a few iterations, ``make smoke``; larger budgets for recorded runs).
Notebooks call ``cfg = get_profile("01_dlg", PROFILE, budget=BUDGET)`` and read ``cfg.iterations``; a
notebook that overrides settings makes a new profile, ``cfg = cfg.replace(iterations=50)``. A
profile never changes after it is made, so no cell can alter a setting another cell relies on, and
a setting whose name says it is a count, a learning rate or a rate is checked when the profile is
made (:data:`SETTING_RULES`): ``cfg.replace(iterations=0)`` raises a ``ValueError`` naming it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import math
import numbers
import re

NOTEBOOK_MODULES = {
    "01_dlg": "dlg",
    "02_idlg_soft_labels": "idlg_soft_labels",
    "03_cv_batch_labels": "cv_batch_labels",
    "04_stepwise_gradinversion": "stepwise_gradinversion",
    "05_diffusion_user_level": "diffusion_user_level",
    "06_learning_to_invert": "learning_to_invert",
    "07_admm_comparison": "admm_comparison",
    "08_flower_dp": "flower_dp",
}
PROFILES = ("quick", "full")


def _real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


#: What a setting's name says it holds: kind → (name pattern, check, rule). Every profile (and every
#: ``replace``) is checked; None is allowed for each (a part that is not run, a default).
SETTING_RULES = {
    "count": (
        (
            r"^n_|iterations$|steps$|epochs$|(^|_)size$|batches$|trials$|repeats$|"
            r"^record_every$|^population$|^torch_threads$|^sweep_cpus$|clients$|^secagg_k$|^secagg_groups$"
        ),
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
        "a positive int",
    ),
    "number of items": (
        r"images$|samples$",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        "an int ≥ 0",
    ),
    "learning rate": (
        r"(^|_)lr$",
        lambda v: _real(v) and 0 < v < math.inf,
        "a finite number > 0",
    ),
    "rate or fraction": (
        r"fraction$|rate$|^dropout$",
        lambda v: _real(v) and 0 <= v <= 1,
        "a number in [0, 1]",
    ),
}
#: Settings every profile has; a chapter module may leave them out. ``torch_threads`` is the
#: thread count the notebook pins with ``torch.set_num_threads`` (None: torch's default).
DEFAULTS = {"torch_threads": None}


@dataclasses.dataclass(frozen=True)
class Profile:
    """Settings of one notebook under one profile; every setting is a field (``cfg.iterations``).

    Attributes:
        notebook: e.g. ``"01_dlg"``.
        profile: ``"quick"`` or ``"full"``.
    """

    notebook: str
    profile: str

    def __post_init__(self) -> None:
        """Check the settings whose name says what they are (:data:`SETTING_RULES`).

        Raises:
            ValueError: naming the setting, for a count that is not a positive int, a learning
                rate that is not a finite number > 0, or a rate or fraction outside [0, 1].
        """
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            values = (
                value.values()
                if isinstance(value, dict)
                else value
                if isinstance(value, (list, tuple))
                else [value]
            )
            for kind, (pattern, valid, rule) in SETTING_RULES.items():
                if re.search(pattern, field.name) and not all(
                    v is None or valid(v) for v in values
                ):
                    raise ValueError(
                        f"setting {field.name} of the {self.profile} profile of {self.notebook} "
                        f"is a {kind}: it must be {rule}, got {value!r}"
                    )

    def replace(self, **changes) -> Profile:
        """A copy with some settings changed, e.g. ``cfg.replace(epochs=50)``.

        Raises:
            ValueError: naming settings this profile does not have, or for ``notebook``/``profile``
                (get another profile with :func:`get_profile` instead); naming a setting whose new value
                is a NaN or infinite number.
            TypeError: naming a setting whose new value is of another kind than the profile's (a number
                for a list, a string for a bool or a number, …).
        """
        names = {field.name for field in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names | set(changes) & {"notebook", "profile"})
        if unknown:
            raise ValueError(
                f"cannot replace {unknown} in the {self.profile} profile of {self.notebook}; "
                f"settings: {sorted(names - {'notebook', 'profile'})}"
            )
        for name, value in changes.items():
            _check_same_kind(name, getattr(self, name), value, self)
        return type(self)(
            **{**self.as_dict(), **changes}
        )  # copies: the two profiles share no list or dict

    def as_dict(self) -> dict:
        """All settings (and ``notebook``, ``profile``) as a plain dict (deep copies)."""
        return copy.deepcopy(
            {
                field.name: getattr(self, field.name)
                for field in dataclasses.fields(self)
            }
        )

    def __getattr__(self, name: str):  # only called for names that are not settings
        if name.startswith("__"):
            raise AttributeError(name)
        settings = sorted(field.name for field in dataclasses.fields(self))
        raise AttributeError(f"profile has no setting {name!r}; settings: {settings}")


def _kind(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, numbers.Real):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)):
        return "list"
    return "dict" if isinstance(value, dict) else type(value).__name__


def _check_same_kind(name: str, old, new, profile: Profile) -> None:
    """A replaced setting keeps its kind — a bool stays a bool, a string a string, a list a list (a
    number may become a list of numbers: a budget that names its items), None is allowed — and its
    numbers are finite (TypeError/ValueError naming the setting)."""
    where = f"setting {name} of the {profile.profile} profile of {profile.notebook}"
    allowed = {
        "bool": {"bool"},
        "str": {"str"},
        "list": {"list"},
        "number": {"number", "list"},
    }.get(_kind(old), {_kind(old)})
    items = list(new) if isinstance(new, (list, tuple)) else [new]
    bad_items = _kind(old) in ("number", "list") and any(
        _kind(v) not in ("number", "none")
        for v in items
        if not isinstance(v, (str, dict, list, tuple))
    )
    if old is not None and new is not None and (_kind(new) not in allowed or bad_items):
        raise TypeError(f"{where} is a {_kind(old)} like {old!r}, got {new!r}")
    if any(_kind(v) == "number" and not math.isfinite(v) for v in items):
        raise ValueError(f"{where} must hold finite numbers, got {new!r}")


@functools.cache
def _profile_class(module: str, names: tuple[str, ...]) -> type[Profile]:
    title = "".join(part.title() for part in module.split("_"))
    return dataclasses.make_dataclass(
        f"{title}Profile",
        [(name, object) for name in names],
        bases=(Profile,),
        frozen=True,
    )


def get_profile(
    notebook: str, profile: str = "quick", budget: str | None = None
) -> Profile:
    """Settings of ``notebook`` (e.g. ``"01_dlg"``) for ``profile`` (``"quick"`` or ``"full"``).

    Args:
        notebook: a key of :data:`NOTEBOOK_MODULES`.
        profile: ``"quick"`` or ``"full"``.
        budget: None, or a key of the chapter module's ``BUDGETS`` whose settings replace the
            profile's (the notebook's ``BUDGET`` parameter).

    Returns a frozen :class:`Profile` holding deep copies of the module's values (plus
    :data:`DEFAULTS` for settings the module leaves out), so nothing a notebook does to a value
    reaches another notebook or a later call.

    Raises:
        ValueError: for an unknown notebook, profile or budget name (the message lists the choices).
    """
    if notebook not in NOTEBOOK_MODULES:
        raise ValueError(
            f"unknown notebook {notebook!r}; choose one of {sorted(NOTEBOOK_MODULES)}"
        )
    if profile not in PROFILES:
        raise ValueError(
            f"unknown profile {profile!r}; choose 'quick' (CPU, minutes) or 'full' (paper scale, GPU)"
        )
    module = NOTEBOOK_MODULES[notebook]
    chapter = importlib.import_module(f"gitutor.chapters.{module}.profile")
    settings = {
        **DEFAULTS,
        **copy.deepcopy(chapter.QUICK if profile == "quick" else chapter.FULL),
    }
    for reserved in ("notebook", "profile"):
        settings.pop(reserved, None)
    cfg = _profile_class(module, tuple(settings))(
        notebook=notebook, profile=profile, **settings
    )
    if budget is None:
        return cfg
    budgets = getattr(chapter, "BUDGETS", {})
    if budget not in budgets:
        raise ValueError(
            f"BUDGET must be None or one of {sorted(budgets)} for {notebook}, got {budget!r}"
        )
    return cfg.replace(**copy.deepcopy(budgets[budget]))
