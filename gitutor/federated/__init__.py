"""The client side of federated learning: shared gradients, label transforms, defenses, FedADMM, cases."""

from gitutor.federated.admm import FedADMMUpdate, fedadmm_client_update, pseudo_gradient
from gitutor.federated.case import (
    Case,
    batchnorm_statistics,
    defended_clients_case,
    fedadmm_case,
    gradient_case,
    last_layer_case,
)
from gitutor.federated.client import (
    client_gradients,
    cross_entropy,
    gradient_dimension,
    observed_gradient,
    per_example_gradients,
)
from gitutor.federated.defenses import (
    MATCHING_TERMS,
    Defense,
    add_gaussian_noise,
    add_laplacian_noise,
    apply_defense,
    paper_defenses,
    prune_gradients,
    sign_compress,
)
from gitutor.federated.soft_labels import mixup, smooth_labels


__all__ = [
    "Case",
    "Defense",
    "FedADMMUpdate",
    "MATCHING_TERMS",
    "add_gaussian_noise",
    "add_laplacian_noise",
    "apply_defense",
    "batchnorm_statistics",
    "client_gradients",
    "cross_entropy",
    "defended_clients_case",
    "fedadmm_case",
    "fedadmm_client_update",
    "gradient_case",
    "gradient_dimension",
    "last_layer_case",
    "mixup",
    "observed_gradient",
    "paper_defenses",
    "per_example_gradients",
    "prune_gradients",
    "pseudo_gradient",
    "sign_compress",
    "smooth_labels",
]
