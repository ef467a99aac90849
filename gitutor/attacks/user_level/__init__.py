"""User-level gradient inversion with a diffusion prior (Li et al. 2023), one concern per module:

- :mod:`~gitutor.attacks.user_level.schedules` — τ_i, ζ_i and the layer window (App. C, Fig. 5);
- :mod:`~gitutor.attacks.user_level.augment` — the augmentations 𝒯 (Eq. 7, App. C);
- :mod:`~gitutor.attacks.user_level.attack` — the matching term, the clip, Algorithm 1 and the
  prior-free user-level baseline;
- :mod:`~gitutor.attacks.user_level.evaluation` — Table 1a's scores and the own-user match rate;
- :mod:`~gitutor.attacks.user_level.identity` — the identity test brightness cannot win (pairing score).

DDPM sampling and noising live in :mod:`gitutor.priors.sampling`; users in :mod:`gitutor.federated.users`.
"""

from gitutor.attacks.user_level.attack import (
    clip_matching_gradient,
    diffula_gradient,
    matching_distance,
    to_classifier_input,
    user_level_inversion,
    user_level_inverting_gradients,
)
from gitutor.attacks.user_level.augment import Augmentation
from gitutor.attacks.user_level.evaluation import (
    interval_ordering,
    intra_user_scores,
    mean_interval,
    own_user_match_rate,
    own_user_matches,
    paired_scores,
    representative_scores,
    user_distance_matrix,
)
from gitutor.attacks.user_level.identity import (
    correlation_matrix,
    pairing_scores,
    score_interval,
    standardise,
)
from gitutor.attacks.user_level.schedules import LayerWindow, TauSchedule, ZetaSchedule

__all__ = [
    "Augmentation",
    "LayerWindow",
    "TauSchedule",
    "ZetaSchedule",
    "clip_matching_gradient",
    "diffula_gradient",
    "correlation_matrix",
    "pairing_scores",
    "score_interval",
    "standardise",
    "interval_ordering",
    "intra_user_scores",
    "matching_distance",
    "mean_interval",
    "own_user_match_rate",
    "own_user_matches",
    "paired_scores",
    "representative_scores",
    "to_classifier_input",
    "user_distance_matrix",
    "user_level_inversion",
    "user_level_inverting_gradients",
]
