"""Chapter 01, ``notebooks/01_dlg``: Deep Leakage from Gradients (Zhu, Liu & Han, NeurIPS 2019).

- :mod:`.profile`: settings
- :mod:`.sweeps`: the seed study, the batch / data / defense sweeps and the noise ladder
- :mod:`.report`: the paper-vs-run rows and the tables
- :mod:`.figures`: every figure
"""
