"""Chapter 01, ``notebooks/01_dlg``: Deep Leakage from Gradients (Zhu, Liu & Han, NeurIPS 2019).

- :mod:`.profile`: settings
- :mod:`.sweeps`: the seed study, the batch / data sweeps and the noise ladder
- :mod:`.defense_study`: the recorded defense study's trials (DLG §5, ``scripts/defense_study_01.py``)
- :mod:`.defense_reading`: that record judged with two thresholds, the rule per level, the rows
- :mod:`.report`: the paper-vs-run rows and the tables
- :mod:`.figures`: every figure
"""
