"""Chapter 08, ``notebooks/08_flower_dp``: attacks on what a Flower server records, against Flower's and Opacus' defenses.

- :mod:`.profile`: settings
- :mod:`.experiments`: the federation, the attack and the DP sweep
- :mod:`.defenses`: Flower's own defenses against the same attack
- :mod:`.report`: figures, tables and rows
- :mod:`.decision`: the defense tables and the decision table
"""
