"""Chapter 08, ``notebooks/08_flower_dp``: attacks on what a Flower server records, against Flower's and Opacus' defenses.

- :mod:`.profile`: settings
- :mod:`.faces`: the LFW faces / non-faces, the test set and the clients' partitions
- :mod:`.experiments`: the federation, the attack and the DP sweep
- :mod:`.defenses`: Flower's own defenses against the same attack
- :mod:`.strongest`: the strongest adversary per defense and per σ of the DP sweep (IG restarts, LTI) and
  their envelope
- :mod:`.curve`: the DP-SGD curve along σ (one-start IG beside the envelopes), its threshold as a bound
  or a bracket, the noise's scale there and the longer attack that checks the budget there
- :mod:`.report`: figures, tables and rows
- :mod:`.accuracy`: test accuracy in words (chance, paired differences) and its paper row
- :mod:`.decision`: the defense tables and the decision table
"""
