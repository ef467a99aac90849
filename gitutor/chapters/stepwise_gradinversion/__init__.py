"""Chapter 04, ``notebooks/04_stepwise_gradinversion``: Stage II of Ye et al. (AAAI 2024), and its setting study (``book/studies/04_setting_study.json``).

- :mod:`.profile`: settings
- :mod:`.experiments`: Table 1–2 trials and their summaries
- :mod:`.recording`: the recorded Table 1 (reconstructions, rows)
- :mod:`.figures`: every figure
- :mod:`.setting_study`: which network, statistics, prior scale and batch size let the attacks recover photographs
"""
