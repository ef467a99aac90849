"""The client side of federated learning: shared gradients, label transforms, defenses, FedADMM."""
from gitutor.federated.admm import FedADMMUpdate, fedadmm_client_update, pseudo_gradient
from gitutor.federated.client import client_gradients, cross_entropy
from gitutor.federated.defenses import add_gaussian_noise, prune_gradients, sign_compress
from gitutor.federated.soft_labels import mixup, smooth_labels


__all__ = ["FedADMMUpdate", "add_gaussian_noise", "client_gradients", "cross_entropy", "fedadmm_client_update",
           "prune_gradients", "pseudo_gradient", "sign_compress", "mixup", "smooth_labels"]
