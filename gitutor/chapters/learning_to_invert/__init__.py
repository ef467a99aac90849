"""Chapter 06, ``notebooks/06_learning_to_invert``: Learning To Invert (Wu et al. 2022).

- :mod:`.profile`: settings
- :mod:`.experiments`: LTI against Inverting Gradients (and DLG) under four defenses
- :mod:`.tuning`: the Inverting Gradients baseline tuned on auxiliary images
- :mod:`.checks`: the paired comparisons and checks behind the verdicts
- :mod:`.report`: tables and rows
- :mod:`.figures`: every figure
"""
