"""Named budgets on top of a profile: a chapter's profile module may define ``BUDGETS = {name: settings}``
(e.g. ``"smoke"``: the profile's code path for a few iterations, run by ``scripts/smoke.py``), and the
notebook's ``BUDGET`` parameter picks one."""
from __future__ import annotations

from collections.abc import Mapping

from gitutor.profiles import Profile


def with_budget(cfg: Profile, budgets: Mapping[str, Mapping[str, object]], budget: str | None) -> Profile:
    """``cfg`` with the settings of ``budgets[budget]`` replaced (``budget`` None: ``cfg`` unchanged).

    Raises:
        ValueError: for a ``budget`` that is not None or a key of ``budgets``, or (from
            :meth:`Profile.replace`) a budget setting the profile does not have.
    """
    if budget is not None and budget not in budgets:
        raise ValueError(f"BUDGET must be None or one of {sorted(budgets)}, got {budget!r}")
    return cfg if budget is None else cfg.replace(**budgets[budget])
