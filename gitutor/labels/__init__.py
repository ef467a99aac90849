"""Label recovery from the last layer's gradient."""

from gitutor.labels.batch_labels import (
    class_evidence,
    coarse_labels,
    label_count_objective,
)
from gitutor.labels.count_search import (
    LabelCountSearch,
    evolve_label_counts,
    exhaustive_label_counts,
    recover_batch_labels,
    rescale_counts,
)
from gitutor.labels.feature_cv import FeatureCV
from gitutor.labels.idlg import idlg_label
from gitutor.labels.label_baselines import (
    bias_label_counts,
    idlg_batch_labels,
    yin_batch_labels,
)
from gitutor.labels.label_trials import (
    batch_label_scores,
    sample_pool_batch,
    sample_repeated_labels,
)
from gitutor.labels.soft_label import (
    LambdaProblem,
    SoftLabelResult,
    lambda_problem,
    recover_soft_label,
)
from gitutor.models.introspect import (
    fc_input_features,
    last_linear,
)  # re-exported: their home is gitutor.models


__all__ = [
    "FeatureCV",
    "LabelCountSearch",
    "batch_label_scores",
    "bias_label_counts",
    "class_evidence",
    "coarse_labels",
    "evolve_label_counts",
    "exhaustive_label_counts",
    "fc_input_features",
    "idlg_batch_labels",
    "label_count_objective",
    "last_linear",
    "recover_batch_labels",
    "rescale_counts",
    "sample_pool_batch",
    "sample_repeated_labels",
    "yin_batch_labels",
    "idlg_label",
    "LambdaProblem",
    "SoftLabelResult",
    "lambda_problem",
    "recover_soft_label",
]
