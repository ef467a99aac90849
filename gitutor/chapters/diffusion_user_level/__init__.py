"""Chapter 05, ``notebooks/05_diffusion_user_level``: user-level inversion with a diffusion prior (Li et al. 2023).

- :mod:`.profile`: settings
- :mod:`.experiments`: classifier, prior, users and the per-user evaluation
- :mod:`.weight`: λ = 1 against the profile's λ, paired per user
- :mod:`.identity`: the identity test, its controls and the prior's effect
- :mod:`.report`: tables and rows
- :mod:`.figures`: every figure
- :mod:`.ig_budget`: the two Inverting Gradients baselines at their own best budget (recorded study)
"""
