"""Tests for the user-level scores and the own-user match rate (gitutor.attacks.user_level.evaluation)."""
from __future__ import annotations

import numpy as np
import pytest

from gitutor.attacks.user_level.evaluation import (intra_user_scores, mean_interval, own_user_match_rate,
                                                   representative_scores, user_distance_matrix)
from gitutor.federated.users import lfw_user
from gitutor.metrics import ssim


def test_own_user_match_rate_counts_strict_row_minima():
    matrix = np.array([[0.1, 0.2, 0.3], [0.5, 0.4, 0.1], [0.3, 0.3, 0.3]])
    assert own_user_match_rate(matrix) == pytest.approx(1 / 3)  # row 2 ties: not a match
    assert own_user_match_rate(-matrix, better="higher") == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="matrix"):
        own_user_match_rate(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="better"):
        own_user_match_rate(matrix, better="up")


def test_batch_means_identify_their_users_and_a_shared_image_does_not():
    batches = [lfw_user(face, 8)[0] for face in (81, 86, 91, 96)]
    means = [b.mean(0, keepdim=True) for b in batches]
    assert own_user_match_rate(user_distance_matrix(means, batches)) == 1.0
    assert own_user_match_rate(user_distance_matrix(means, batches, ssim), better="higher") == 1.0
    shared = [means[0]] * 4
    assert own_user_match_rate(user_distance_matrix(shared, batches)) <= 0.25
    with pytest.raises(ValueError, match="batches"):
        user_distance_matrix(means[:2], batches)


def test_representative_and_intra_user_scores():
    batch = lfw_user(85, 6)[0]
    own = representative_scores(batch[:1], batch)
    assert own["mse"] > 0 and own["ssim"] < 1
    assert representative_scores(batch.mean(0, keepdim=True), batch)["mse"] <= intra_user_scores(batch)["mse"]
    with pytest.raises(ValueError, match="representative"):
        representative_scores(batch[:2], batch)
    with pytest.raises(ValueError, match="batch"):
        intra_user_scores(batch[:1])


def test_mean_interval():
    mean, half = mean_interval([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and half == pytest.approx(3.182 * np.std([1, 2, 3, 4], ddof=1) / 2, rel=1e-3)  # t_{0.975, 3}
    with pytest.raises(ValueError, match="values"):
        mean_interval([1.0])
    with pytest.raises(ValueError, match="values"):
        mean_interval([1.0, float("nan")])


def test_interval_ordering_claims_only_separated_intervals():
    from gitutor.attacks.user_level.evaluation import interval_ordering

    low, mid, high = [0.10, 0.11, 0.12, 0.10], [0.30, 0.31, 0.29, 0.30], [0.50, 0.52, 0.49, 0.51]
    assert interval_ordering([("a", low), ("b", mid), ("c", high)]) == "holds"
    assert interval_ordering([("a", mid), ("b", low)]) == "reversed"
    assert interval_ordering([("a", [0.1, 0.5, 0.3]), ("b", [0.2, 0.4, 0.35])]) == "not resolved at this budget"
    with pytest.raises(ValueError, match="groups"):
        interval_ordering([("a", low)])
