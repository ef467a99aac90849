"""Chapter 07, ``notebooks/07_admm_comparison``: DLG / iDLG against SGD gradients and FedADMM increments (the DLG reproduction report, §4).

- :mod:`.profile`: settings
- :mod:`.rounds`: data and FedADMM client rounds
- :mod:`.compare`: the Fig. 1–2 comparison
- :mod:`.report`: tables, sentences and rows
- :mod:`.figures`: every figure
"""
