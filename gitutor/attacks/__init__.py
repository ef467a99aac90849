"""Reconstruction attacks: each takes tensors and returns an :class:`AttackResult`."""

from gitutor.attacks.admm import (
    adaptive_admm_inversion,
    dlg_admm,
    fc_weight_index,
    idlg_admm,
)
from gitutor.attacks.bn_prior import BatchNormPrior, bn_statistics_loss
from gitutor.attacks.dct_augment import dct_gaussian_augment
from gitutor.attacks.defended_ig import defended_inverting_gradients
from gitutor.attacks.dlg import dlg, dlg_distance
from gitutor.attacks.fcn_inversion import invert_fcn
from gitutor.attacks.feature_hashing import FeatureHasher
from gitutor.attacks.gradinversion import gradinversion
from gitutor.attacks.inverting_gradients import inverting_gradients
from gitutor.attacks.lti import (
    InversionMLP,
    aggregate_batches,
    apply_defense,
    make_gradient_dataset,
    paper_defenses,
    permutation_invariant_mse,
    reconstruct,
    train_inversion_model,
)
from gitutor.attacks.objectives import (
    breaching_total_variation,
    check_target_gradients,
    cosine_gradient_distance,
    gradient_l2_distance,
    total_variation,
)
from gitutor.attacks.result import AttackResult
from gitutor.attacks.stepwise import (
    StepwiseSchedule,
    gradient_dropout_masks,
    stepwise_inversion,
)
from gitutor.attacks.stepwise_options import StepwiseOptions, quantised_sign
from gitutor.attacks.stepwise_schedule import stage_floor
from gitutor.attacks.user_level import (
    user_level_inversion,
    user_level_inverting_gradients,
)

__all__ = [
    "AttackResult",
    "BatchNormPrior",
    "FeatureHasher",
    "InversionMLP",
    "StepwiseOptions",
    "StepwiseSchedule",
    "adaptive_admm_inversion",
    "aggregate_batches",
    "apply_defense",
    "bn_statistics_loss",
    "breaching_total_variation",
    "check_target_gradients",
    "cosine_gradient_distance",
    "dct_gaussian_augment",
    "defended_inverting_gradients",
    "dlg",
    "dlg_admm",
    "dlg_distance",
    "fc_weight_index",
    "gradient_dropout_masks",
    "gradient_l2_distance",
    "gradinversion",
    "idlg_admm",
    "invert_fcn",
    "inverting_gradients",
    "make_gradient_dataset",
    "paper_defenses",
    "permutation_invariant_mse",
    "quantised_sign",
    "reconstruct",
    "stage_floor",
    "stepwise_inversion",
    "total_variation",
    "train_inversion_model",
    "user_level_inversion",
    "user_level_inverting_gradients",
]
