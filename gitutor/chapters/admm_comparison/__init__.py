"""Chapter 07, ``notebooks/07_admm_comparison``: DLG / iDLG against SGD gradients and FedADMM increments (the DLG reproduction report, §4–5).

- :mod:`.profile`: settings
- :mod:`.rounds`: data and FedADMM client rounds
- :mod:`.compare`: the Fig. 1–2 comparison
- :mod:`.local_steps`: the three round-1 attacks on the increment at more local steps, paired with E = 1
- :mod:`.losses`: the report's Fig. 2 claim that the ADMM attacks' loss grows
- :mod:`.report`: tables, sentences and rows
- :mod:`.figures`: every figure
"""
