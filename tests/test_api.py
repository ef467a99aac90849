"""Names the chapters import stay importable from where they were (issue 12 moved their code)."""
import importlib

import pytest

KEPT = {
    "gitutor.attacks": ["AttackResult", "FeatureHasher", "InversionMLP", "adaptive_admm_inversion", "aggregate_batches",
                        "apply_defense", "dct_gaussian_augment", "dlg_admm", "fc_weight_index", "idlg_admm",
                        "make_gradient_dataset", "paper_defenses", "permutation_invariant_mse", "reconstruct",
                        "train_inversion_model"],
    "gitutor.attacks.lti": ["InversionMLP", "aggregate_batches", "apply_defense", "gradient_dimension",
                            "gradient_features", "make_gradient_dataset", "observed_gradient", "paper_defenses",
                            "per_example_gradients", "permutation_invariant_mse", "reconstruct",
                            "reconstruction_scores", "train_inversion_model"],
    "gitutor.labels": ["FeatureCV", "LabelCountSearch", "batch_label_scores", "bias_label_counts", "class_evidence",
                       "coarse_labels", "evolve_label_counts", "exhaustive_label_counts", "fc_input_features",
                       "idlg_batch_labels", "label_count_objective", "last_linear", "recover_batch_labels",
                       "rescale_counts", "sample_pool_batch", "sample_repeated_labels", "yin_batch_labels"],
    "gitutor.federated": ["FedADMMUpdate", "add_gaussian_noise", "add_laplacian_noise", "client_gradients", "cross_entropy",
                          "fedadmm_client_update", "mixup", "prune_gradients", "pseudo_gradient", "sign_compress",
                          "smooth_labels"],
    "gitutor.federated.client": ["check_parameter_list", "client_gradients", "cross_entropy"],
    "gitutor.models": ["FCN", "GapCNN", "LeNet", "calibrate_batchnorm", "init_uniform_", "resnet18", "resnet20",
                       "resnet34"],
    "gitutor.metrics": ["LPIPSUnavailable", "LPIPS_NA", "alexnet_weights_path", "label_accuracy", "lpips_distance",
                        "lpips_or_none", "match_batch", "mse", "psnr", "ssim"],
    "gitutor.data": ["OfflineDataError", "PHOTOGRAPHS", "POOLS", "TORCHVISION_DATASETS", "digits", "image_folder",
                     "lfw_faces", "natural_images", "resize", "torchvision_images"],
}


@pytest.mark.parametrize("module", sorted(KEPT))
def test_names_stay_importable(module):
    imported = importlib.import_module(module)
    assert [name for name in KEPT[module] if not hasattr(imported, name)] == []


def test_moved_helpers_are_the_same_objects_in_their_new_home():
    from gitutor import attacks, data, errors, federated, labels, metrics, models

    assert labels.last_linear is models.last_linear and labels.fc_input_features is models.fc_input_features
    assert attacks.fc_weight_index is models.fc_weight_index
    assert attacks.paper_defenses is federated.paper_defenses and attacks.apply_defense is federated.apply_defense
    assert attacks.lti.reconstruction_scores is metrics.score_batch
    assert data.OfflineDataError is errors.OfflineDataError
