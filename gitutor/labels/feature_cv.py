"""Coefficient of variation of sorted features (Ye et al., AAAI 2024, §Stage I "Feature approximating", Eq. 5).

The weight gradient of the last fully connected layer is ∇W_k = (1/N) Σ_i g_ik h_iᵀ (Eq. 2–3): every
row is a weighted sum of the penultimate features h_i. Different images activate different feature
entries, so no single mean feature describes them all — but after *sorting* each feature vector the
entries at some ranks vary little across images. Ye et al. measure this on auxiliary (public) images:
the coefficient of variation CV_j = Std_i(h_i^S[j]) / E_i(h_i^S[j]) of the j-th sorted entry, keep the
M ranks t with the smallest CV, and the mean sorted feature h̄ = E_i(h_i^S) (paper Fig. 3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gitutor.checks import check_images


#: Features may fall below 0 by this much (float rounding); anything lower is refused.
FEATURE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class FeatureCV:
    """Statistics of sorted auxiliary features (Ye et al. 2024, Eq. 5 and Fig. 3).

    Attributes:
        mean_feature: h̄ = E_i(sort(h_i)), ``(m,)``, features sorted in descending order (rank 0 =
            largest activation), so that sort(∇W_k) in ascending order matches −v_k·h̄ (Eq. 6).
        cv: ``(m,)`` coefficient of variation Std/Mean of each sorted rank over the auxiliary images
            (``inf`` where the mean is 0, e.g. ranks of always-zero ReLU features).
        indices: t, ``(M,)`` int64, the ranks of the M smallest CVs, ascending CV.
        num_aux: number of auxiliary images the statistics come from.
    """

    mean_feature: torch.Tensor
    cv: torch.Tensor
    indices: torch.Tensor
    num_aux: int

    @classmethod
    def fit(
        cls,
        feature_extractor: Callable[[torch.Tensor], torch.Tensor],
        aux_images: torch.Tensor,
        top_m: int = 20,
    ) -> FeatureCV:
        """Compute h̄, the CV curve and t from auxiliary images (Eq. 5; the paper uses 40 web images, M = 20).

        Args:
            feature_extractor: Φ, maps ``(n, C, H, W)`` images to ``(n, m)`` non-negative features,
                e.g. ``functools.partial(fc_input_features, model)``.
            aux_images: ``(n, C, H, W)`` auxiliary images in [0, 1], n ≥ 2, disjoint from the attacked
                batch.
            top_m: M, how many ranks with the smallest CV to keep.

        Raises:
            ValueError / TypeError: as :meth:`from_features`, if ``aux_images`` are not float
                ``(n, C, H, W)`` images in [0, 1] (:func:`gitutor.checks.check_images`: channels-last,
                0–255 pixels or mean/std-normalised images are refused), or if the extractor does not
                return one feature row per image.
        """
        check_images(aux_images, "aux_images")
        if aux_images.shape[0] < 2:
            raise ValueError(
                "need at least 2 auxiliary images to measure a coefficient of variation"
            )
        features = feature_extractor(aux_images)
        if features.dim() != 2 or features.shape[0] != aux_images.shape[0]:
            raise ValueError(
                f"feature_extractor must return (n, m) = ({aux_images.shape[0]}, m) features, "
                f"got {tuple(features.shape)}"
            )
        return cls.from_features(features, top_m)

    @classmethod
    def from_features(cls, features: torch.Tensor, top_m: int = 20) -> FeatureCV:
        """Eq. 5 on already extracted auxiliary features ``(n, m)``, n ≥ 2 (see :meth:`fit`).

        Raises:
            ValueError: if the features are not a finite ``(n, m)`` matrix with n ≥ 2, have a negative
                entry (Eq. 5–6 assume post-ReLU features h ≥ 0: taken before the activation?), or
                ``top_m`` is not in [1, m] or exceeds the number of ranks with a finite CV.
            TypeError: if ``top_m`` is not an int.
        """
        if not isinstance(top_m, int) or isinstance(top_m, bool):
            raise TypeError(f"top_m must be an int, got {type(top_m).__name__}")
        if features.dim() != 2 or features.shape[0] < 2:
            raise ValueError(
                f"need (n, m) features of n ≥ 2 auxiliary images, got shape {tuple(features.shape)}"
            )
        if not torch.isfinite(features).all():
            raise ValueError("auxiliary features contain NaN or inf")
        if float(features.min()) < -FEATURE_TOLERANCE:
            raise ValueError(
                f"features must be non-negative (post-ReLU activations h ≥ 0, Ye et al. Eq. 5–6), "
                f"got a minimum of {float(features.min()):.4g}; were they taken before the "
                "activation? use gitutor.labels.fc_input_features"
            )
        if not 1 <= top_m <= features.shape[1]:
            raise ValueError(
                f"top_m must be in [1, {features.shape[1]}] (the feature dimension), got {top_m}"
            )
        ranked = features.detach().cpu().double().sort(dim=1, descending=True).values
        mean = ranked.mean(dim=0)
        cv = torch.where(
            mean > 0, ranked.std(dim=0) / mean, torch.full_like(mean, float("inf"))
        )
        finite = int(torch.isfinite(cv).sum())
        if top_m > finite:
            raise ValueError(
                f"only {finite} sorted ranks have a non-zero mean; choose top_m ≤ {finite}"
            )
        indices = cv.argsort(stable=True)[:top_m]
        return cls(
            mean_feature=mean.float(),
            cv=cv.float(),
            indices=indices,
            num_aux=int(features.shape[0]),
        )
