"""Chapter 04's setting study: which network, BatchNorm statistics, prior scale and batch size let
the attacks recover photographs (:mod:`.settings`), summarised (:mod:`.summary`) and drawn
(:mod:`.figures`) from the record ``book/studies/04_setting_study.json``; the trained network's
study and Table 1 (:mod:`.trained`, :mod:`.trained_summary`, in words :mod:`.trained_reading`) from
``book/studies/04_trained_network.json``."""

from gitutor.chapters.stepwise_gradinversion.setting_study.figures import (
    curve_figure,
    factor_figure,
)
from gitutor.chapters.stepwise_gradinversion.setting_study.settings import (
    BASE,
    CHECKPOINTS,
    FACTORS,
    IG_TV,
    METHODS,
    NETWORKS,
    PAPER_BN,
    PAPER_TV,
    Setting,
    study_batch,
    study_model,
    study_trials,
    trial,
)
from gitutor.chapters.stepwise_gradinversion.setting_study.summary import (
    best_setting,
    curves,
    final_images,
    load_record,
    recorded_table,
    seconds_per_iteration,
    summary_rows,
)

__all__ = [
    "BASE",
    "CHECKPOINTS",
    "FACTORS",
    "IG_TV",
    "METHODS",
    "PAPER_BN",
    "PAPER_TV",
    "Setting",
    "best_setting",
    "curve_figure",
    "curves",
    "factor_figure",
    "final_images",
    "load_record",
    "recorded_table",
    "seconds_per_iteration",
    "study_batch",
    "study_model",
    "study_trials",
    "summary_rows",
    "trial",
]
