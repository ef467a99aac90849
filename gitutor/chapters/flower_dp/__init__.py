"""Chapter 08, ``notebooks/08_flower_dp``: attacks on what a Flower server records, against Opacus DP-SGD.

- :mod:`.profile`: settings
- :mod:`.experiments`: the federation, the attack and the DP sweep
- :mod:`.report`: figures, tables and rows
"""
