"""A chapter's settings: its profile, then a named budget, then the notebook's parameter overrides.

Chapters whose profile module defines ``BUDGETS`` (larger budgets for recorded runs, ``"smoke"`` for
``make smoke``) apply the notebook's ``BUDGET`` parameter with :func:`with_budget`.
"""
from __future__ import annotations

import types
from collections.abc import Mapping


def with_budget(cfg, budgets: Mapping[str, Mapping], budget: str | None = None, **overrides) -> types.SimpleNamespace:
    """Profile ``cfg`` (a :class:`~gitutor.profiles.Profile` or a dict), then ``budgets[budget]``, then
    ``overrides`` (None values skipped).

    Returns a ``types.SimpleNamespace`` (attribute access, like a profile) with ``budget`` added.

    Raises:
        ValueError: naming ``BUDGET`` for an unknown budget name, or an override or budget entry that is
            not a setting of the profile.
    """
    settings = dict(cfg) if isinstance(cfg, dict) else cfg.as_dict()
    if budget is not None and budget not in budgets:
        raise ValueError(f"BUDGET must be None or one of {sorted(budgets)}, got {budget!r}")
    chosen = dict(budgets.get(budget, {}), **{k: v for k, v in overrides.items() if v is not None})
    unknown = sorted((set(chosen) | set(overrides)) - set(settings))
    if unknown:
        raise ValueError(f"unknown settings {unknown}; settings: {sorted(settings)}")
    return types.SimpleNamespace(**dict(settings, **chosen), budget=budget)
