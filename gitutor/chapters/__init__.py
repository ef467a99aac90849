"""One package per notebook: what only that chapter uses.

Each chapter package, named after its chapter, holds

- ``profile``: the chapter's ``QUICK`` / ``FULL`` settings (and ``BUDGETS``), read through
  :func:`get_profile` (:mod:`gitutor.chapters.settings` makes them frozen, checked profiles);
- its experiments (set-up, trials, sweeps: ``experiments``, ``sweeps``, ``rounds`` …);
- ``report``: the paper-vs-run rows, verdict inputs, tables and the sentences whose words a result
  decides (fixed prose lives in the notebook's Markdown, with glued numbers);
- ``figures``: every figure the chapter draws.

====================================  ===========================  =====================================
notebook                              package                      paper
====================================  ===========================  =====================================
``01_dlg``                            :mod:`.dlg`                  Zhu et al. 2019 (DLG)
``02_idlg_soft_labels``               :mod:`.idlg_soft_labels`     Wang et al. 2024 (+ iDLG)
``03_cv_batch_labels``                :mod:`.cv_batch_labels`      Ye et al. 2024, Stage I
``04_stepwise_gradinversion``         :mod:`.stepwise_gradinversion` Ye et al. 2024, Stage II (and the
                                                                   setting study, ``.setting_study``)
``05_diffusion_user_level``           :mod:`.diffusion_user_level`  Li et al. 2023
``06_learning_to_invert``             :mod:`.learning_to_invert`   Wu et al. 2022
``07_admm_comparison``                :mod:`.admm_comparison`      the DLG reproduction report, §4
``08_flower_dp``                      :mod:`.flower_dp`            Flower and Opacus
====================================  ===========================  =====================================

A chapter package imports the shared layers (``data`` → ``models`` → ``federated`` → ``labels`` /
``attacks`` → ``metrics`` / ``stats`` → ``results``, with ``viz`` and ``tables``) and never another
chapter's package; no shared layer imports a chapter package (``tests/test_layers.py``). What two
chapters need moves down into a shared layer. A new chapter's code goes into a new package here,
registered in :data:`NOTEBOOK_MODULES`.
"""

from gitutor.chapters.settings import (
    DEFAULTS,
    NOTEBOOK_MODULES,
    PROFILES,
    SETTING_RULES,
    Profile,
    get_profile,
)

__all__ = [
    "DEFAULTS",
    "NOTEBOOK_MODULES",
    "PROFILES",
    "Profile",
    "SETTING_RULES",
    "get_profile",
]
