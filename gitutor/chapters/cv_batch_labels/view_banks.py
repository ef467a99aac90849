"""Chapter 03's ImageNet headline over several draws of the augmented views (Ye et al. 2023 §4, Stage I).

The page attacks batches drawn from one bank of augmented views per photograph; its 95 % interval covers the
draw of batches, not the draw of views. ``scripts/bank_study_03.py`` reruns the headline on bank seeds 0, 1,
… (bank 0 is the page's own) and records each batch's exact flags. :func:`read_record` reads the record
(refusing one without provenance, of other settings, or whose bank 0 is not the page's run) and
:func:`summary` gives each bank's rate and the rate over banks, with an interval over the banks (each bank
one observation: the batches of one bank share its views).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from gitutor.study_records import provenance, speaks_for

#: The profile's settings the headline depends on; a record of other values is refused.
SETTINGS = (
    "batch_size",
    "max_classes",
    "imagenet_trials",
    "imagenet_views",
    "imagenet_size",
    "imagenet_source",
    "imagenet_scale",
    "top_m",
    "population",
    "iterations",
    "crossover",
)
#: The methods whose exact flags a bank holds: ours (Stage I), Eq. 6's exhaustive minimum, Eq. 6 with p = 0.
FLAGS = ("ours", "exhaustive", "premise")


def read_record(path: str | Path, cfg, seed: int, page_flags: Sequence[float]) -> dict:
    """The recorded view-bank study at ``path`` (``book/studies/03_view_banks.json``), checked against this
    run: provenance, ``seed``, the settings of :data:`SETTINGS`, and bank 0's exact flags of ours against
    ``page_flags`` (the page's own, one 0/1 per headline batch).

    Returns:
        ``banks``: per bank ``{"bank_seed": int, "ours"|"exhaustive"|"premise": [0/1 per batch]}``, bank 0
        first; ``provenance``.

    Raises:
        FileNotFoundError: naming ``path`` when it does not exist.
        ValueError: naming ``path`` and the field: not a JSON object; a provenance field missing; a seed
            or setting other than this run's; fewer than two banks, a bank without its flags or with
            another number of batches; bank 0 not the page's own flags (a record made with other code).
    """
    from gitutor.study_records import read_study_record

    expected = {"seed": seed} | {f"settings.{k}": getattr(cfg, k) for k in SETTINGS}
    record = read_study_record(
        path, "view-bank record", "scripts/bank_study_03.py", expected
    )
    banks = record.get("banks")
    trials = cfg.imagenet_trials
    if not isinstance(banks, list) or len(banks) < 2:
        raise ValueError(
            f"record {path}: field 'banks' must list at least two banks, got {banks!r:.80}"
        )
    for bank in banks:
        if any(len(bank.get(name, [])) != trials for name in FLAGS):
            raise ValueError(
                f"record {path}: field 'banks' must hold {trials} flags of {FLAGS} per bank, got bank "
                f"{bank.get('bank_seed')!r}"
            )
    if (
        banks[0].get("bank_seed") != seed
        or [float(f) for f in page_flags] != banks[0]["ours"]
    ):
        raise ValueError(
            f"record {path}: its bank 0 is not this page's bank and batches (seed {seed}, the page's "
            "exact flags): rerun scripts/bank_study_03.py"
        )
    return {
        "banks": [dict(bank) for bank in banks],
        "provenance": provenance(record),
    }


def recorded_study(
    path: str | Path, cfg, seed: int, budget: str | None, page_flags: Sequence[float]
) -> dict | None:
    """:func:`read_record` where the record speaks for the run, else None: None when the notebook names a
    ``budget`` (``"smoke"``), when ``path`` does not exist or when the record is of another profile.

    Raises:
        ValueError: as :func:`read_record`, for a record of this profile that does not match the run.
    """
    if not speaks_for(path, cfg.profile, budget):
        return None
    return read_record(path, cfg, seed, page_flags)


def summary(study: Mapping, name: str = "ours") -> dict:
    """Each bank's exact rate of ``name`` (:data:`FLAGS`) and the rate over the banks.

    Returns:
        ``rates`` (one per bank, bank 0 first), ``lowest``/``highest`` of them, ``over_banks``
        (:func:`gitutor.stats.interval` of the banks' rates: mean and 95 % interval over banks, each bank
        one observation) and ``banks`` (their number).

    Raises:
        ValueError: naming ``name`` when it is not one of :data:`FLAGS`.
    """
    from gitutor.stats import interval

    if name not in FLAGS:
        raise ValueError(f"name must be one of {FLAGS}, got {name!r}")
    rates = [sum(bank[name]) / len(bank[name]) for bank in study["banks"]]
    return {
        "rates": rates,
        "lowest": min(rates),
        "highest": max(rates),
        "over_banks": interval(rates, bounds=(0.0, 1.0)),
        "banks": len(rates),
    }


def bank_row(found: Mapping, cfg, differences: str) -> dict:
    """The results row of ours' exact rate over the banks (:func:`summary`'s output ``found``): the paper's
    claim of every batch's exact counts (1.0) against the mean over banks, with the 95 % interval over the
    banks (each bank one observation), so that the draw of the views is part of what the interval covers.

    Raises:
        KeyError: when ``found`` lacks a field of :func:`summary`'s.
    """
    from gitutor.results import interval_fields

    over = found["over_banks"]
    return {
        "quantity": "exact label counts, ours (Stage I), ImageNet-trained network, over banks of views",
        "setting": f"B = {cfg.batch_size}, {cfg.imagenet_trials} batches per bank, {found['banks']} banks "
        "of augmented views (recorded)",
        "paper": 1.0,
        "this_run": round(over.mean, 3),
        "unit": "fraction",
        "better": "higher",
        **interval_fields(over, 3),
        "differences": f"{differences}; interval over the banks' rates (each bank one observation; "
        f"lowest {found['lowest']:.2f}, highest {found['highest']:.2f})",
    }
