"""Learning To Invert (Wu et al. 2022): a learned inversion model from defended gradients to images.

- :mod:`gitutor.attacks.lti.dataset`: training pairs (defended, aggregated gradients → images).
- :mod:`gitutor.attacks.lti.model`: the MLP g_θ, its permutation-invariant training loss (Eq. 3),
  training and the attack (:func:`reconstruct`).
The per-example client gradients and the defenses live in :mod:`gitutor.federated`; the scores in
:mod:`gitutor.metrics` (``reconstruction_scores`` is :func:`gitutor.metrics.score_batch`).
"""

from gitutor.attacks.lti.dataset import (
    aggregate_batches,
    gradient_features,
    make_gradient_dataset,
)
from gitutor.attacks.lti.model import (
    InversionMLP,
    epochs_without_gain,
    permutation_invariant_mse,
    reconstruct,
    train_epoch,
    train_inversion_model,
)
from gitutor.federated.client import (
    gradient_dimension,
    observed_gradient,
    per_example_gradients,
)
from gitutor.federated.defenses import Defense, apply_defense, paper_defenses
from gitutor.metrics import hungarian_assignment
from gitutor.metrics import score_batch as reconstruction_scores

__all__ = [
    "Defense",
    "InversionMLP",
    "aggregate_batches",
    "apply_defense",
    "epochs_without_gain",
    "gradient_dimension",
    "gradient_features",
    "hungarian_assignment",
    "make_gradient_dataset",
    "observed_gradient",
    "paper_defenses",
    "per_example_gradients",
    "permutation_invariant_mse",
    "reconstruct",
    "reconstruction_scores",
    "train_epoch",
    "train_inversion_model",
]
