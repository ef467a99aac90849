"""Stage I of Ye et al. (AAAI 2024): coarse labels, CV statistics, evolutionary counts, baselines."""
import numpy as np
import pytest
import torch
from torch import nn

from gitutor.federated import client_gradients
from gitutor.labels import (FeatureCV, batch_label_scores, bias_label_counts, class_evidence, coarse_labels,
                            evolve_label_counts, exhaustive_label_counts, fc_input_features, idlg_batch_labels,
                            label_count_objective, last_linear, recover_batch_labels, rescale_counts,
                            sample_pool_batch, sample_repeated_labels, yin_batch_labels)
from gitutor.seeding import make_generator

NUM_CLASSES, WIDTH = 100, 64


def _profile_features(n: int, generator: torch.Generator) -> torch.Tensor:
    """n non-negative feature vectors that share one sorted profile (each a random permutation of it)."""
    profile = torch.linspace(2.0, 0.0, WIDTH) ** 2
    return torch.stack([profile[torch.randperm(WIDTH, generator=generator)] for _ in range(n)])


def _head() -> nn.Linear:
    """FC layer with zero weights: p_k = 1/C for every input, the early-training regime of Eq. 2."""
    fc = nn.Linear(WIDTH, NUM_CLASSES)
    nn.init.zeros_(fc.weight)
    nn.init.zeros_(fc.bias)
    return fc


def _constructed_batch(counts, classes, generator):
    """Images of one class share a feature vector, so sort(Σ_i h_i) = n_k · sort(h) holds exactly."""
    per_class = _profile_features(len(counts), generator)
    features = per_class.repeat_interleave(torch.tensor(counts), dim=0)
    labels = torch.tensor(classes).repeat_interleave(torch.tensor(counts))
    return features, labels


@pytest.fixture
def stats():
    return FeatureCV.from_features(_profile_features(40, make_generator(1)), top_m=20)


def test_rescale_counts_are_valid_for_any_positive_vectors():
    rng = np.random.default_rng(0)
    for length, batch_size in [(2, 2), (3, 8), (5, 8), (7, 64), (30, 32)]:
        vectors = rng.random((200, length)) ** 4  # heavy tails push Φ3 below 1 without the repair
        counts = rescale_counts(vectors, batch_size)
        assert counts.dtype == np.int64 and (counts >= 1).all()
        assert (counts.sum(axis=1) == batch_size).all()
    assert rescale_counts(np.array([3.0, 1.0, 4.0]), 8).tolist() == [3, 1, 4]  # valid counts are kept


def test_evolution_recovers_known_counts_and_matches_exhaustive(stats):
    classes = [7, 21, 40, 93]
    features, labels = _constructed_batch([3, 1, 2, 2], classes, make_generator(2))
    weight_grad, _ = client_gradients(_head(), features, labels)
    found = coarse_labels(weight_grad)
    assert found.tolist() == classes
    search = evolve_label_counts(weight_grad, found, 8, stats, seed=0)
    assert search.counts.tolist() == [3, 1, 2, 2]
    assert torch.equal(search.counts, exhaustive_label_counts(weight_grad, found, 8, stats))
    assert len(search.history) == 201 and all(a >= b for a, b in zip(search.history, search.history[1:]))
    objective = label_count_objective(torch.tensor([[3, 1, 2, 2], [2, 2, 2, 2]]), weight_grad, found, stats)
    assert objective[0] < 1e-3 and objective[0] < objective[1]  # not 0: the p_k terms of Eq. 2
    ratio = class_evidence(weight_grad, found, stats) / torch.tensor([3, 1, 2, 2])
    assert float(ratio.std() / ratio.mean()) < 0.01  # a_k ∝ n_k: the model of Eq. 6 holds exactly here


def test_objective_is_one_minus_kappa_cosine_not_one_minus_cosine():
    """J(v) = 1 − κ·cos(v, a), κ = ‖a‖ / (‖h̄[t]‖ ‖G_t‖_F) ≤ 1, on a gradient whose rows are not multiples of h̄."""
    generator = make_generator(5)
    features = torch.rand(12, WIDTH, generator=generator) ** 3  # no shared profile: κ < 1
    labels = torch.tensor([4, 4, 4, 9, 9, 17, 17, 17, 17, 30, 30, 30])
    fc = nn.Linear(WIDTH, NUM_CLASSES)
    weight_grad, _ = client_gradients(fc, features, labels)
    classes = coarse_labels(weight_grad)
    stats = FeatureCV.from_features(torch.rand(40, WIDTH, generator=generator) ** 2, top_m=20)
    a = class_evidence(weight_grad, classes, stats)
    rows = weight_grad[classes].double().sort(dim=1).values[:, stats.indices]
    h_t = stats.mean_feature.double()[stats.indices]
    kappa = a.norm() / (h_t.norm() * rows.norm())
    assert 0 < kappa < 0.999  # strictly below 1 here: J ≠ 1 − cos(v, a)
    counts = torch.tensor([[3, 2, 4, 3], [1, 1, 1, 9], [6, 2, 2, 2]], dtype=torch.float64)
    cosine = counts @ a / (counts.norm(dim=1) * a.norm())
    objective = label_count_objective(counts, weight_grad, classes, stats)
    assert torch.allclose(objective, 1 - kappa * cosine, atol=1e-12)
    assert not torch.allclose(objective, 1 - cosine, atol=1e-3)


def test_evolution_counts_valid_and_deterministic(stats):
    generator = make_generator(3)
    weight_grad = -torch.rand(6, WIDTH, generator=generator)
    classes = torch.arange(6)
    first = evolve_label_counts(weight_grad, classes, 64, stats, seed=5, iterations=50)
    again = evolve_label_counts(weight_grad, classes, 64, stats, seed=5, iterations=50)
    assert (first.counts >= 1).all() and int(first.counts.sum()) == 64
    assert torch.equal(first.counts, again.counts) and first.history == again.history


def test_recover_batch_labels_through_a_model(stats):
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, WIDTH), nn.ReLU(), _head())
    assert last_linear(model) is model[3]
    features, labels = _constructed_batch([1, 4, 3], [2, 50, 99], make_generator(4))
    weight_grad, _ = client_gradients(model[3], features, labels)
    recovered = recover_batch_labels(model, weight_grad, 8, stats)
    assert recovered.tolist() == sorted(labels.tolist())
    with pytest.raises(ValueError, match="smaller than the 3 classes"):
        recover_batch_labels(model, weight_grad, 2, stats)
    with pytest.raises(ValueError, match="last Linear weight"):
        recover_batch_labels(model, weight_grad[:, :10], 8, stats)
    with pytest.raises(ValueError, match="negative mean"):
        recover_batch_labels(model, weight_grad.abs(), 8, stats)


def test_fc_features_give_the_models_fc_gradient_and_leave_the_model_unchanged():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 5))
    images = torch.rand(6, 3, 8, 8, generator=make_generator(0))
    labels = torch.tensor([0, 0, 1, 3, 3, 3])
    before = model[1].running_mean.clone()
    features = fc_input_features(model, images)  # training mode: this batch's BN statistics
    assert torch.equal(model[1].running_mean, before)
    full = client_gradients(model, images, labels)
    head = client_gradients(model[5], features, labels)
    assert torch.allclose(full[-2], head[0], atol=1e-6) and torch.allclose(full[-1], head[1], atol=1e-6)


def test_baselines_fail_with_repeated_labels_and_bias_count_breaks_when_confident():
    features, labels = _constructed_batch([4, 3, 1], [10, 11, 12], make_generator(5))
    head = _head()
    weight_grad, bias_grad = client_gradients(head, features, labels)
    yin = yin_batch_labels(weight_grad, 8)
    assert len(set(yin.tolist())) == 8  # one label per row: 5 of the 8 must be wrong
    assert batch_label_scores(yin, labels)["accuracy"] == pytest.approx(3 / 8)
    idlg = idlg_batch_labels(weight_grad, 8)
    assert set(idlg.tolist()) == {10, 11, 12} and batch_label_scores(idlg, labels)["exact"] == 0.0
    assert torch.equal(bias_label_counts(bias_grad, 8), torch.bincount(labels, minlength=NUM_CLASSES))
    with torch.no_grad():  # a confident ("trained") head: p of the true class ≈ 1, so −N·∂L/∂b_k ≈ 0
        head.weight.copy_(torch.zeros(NUM_CLASSES, WIDTH).index_fill_(0, torch.tensor([10, 11, 12]), 0.0))
        head.bias[[10, 11, 12]] = 12.0
    _, bias_grad = client_gradients(head, features, labels)
    assert int(bias_label_counts(bias_grad, 8).sum()) < 8
    with pytest.raises(ValueError, match="no bias"):
        bias_label_counts(None, 8)
    with pytest.raises(ValueError, match="one distinct class per image"):
        yin_batch_labels(weight_grad, NUM_CLASSES + 1)


def test_scores_and_repeated_batches():
    generator = make_generator(6)
    for batch_size in (3, 8, 64):
        labels = sample_repeated_labels(batch_size, 1000, 5, generator)
        distinct = torch.unique(labels).numel()
        assert labels.shape == (batch_size,) and 2 <= distinct <= min(5, batch_size - 1)
    pool_labels = torch.arange(4).repeat_interleave(6)
    indices, labels = sample_pool_batch(pool_labels, 24, 6, 4, 2, generator)
    assert torch.equal(pool_labels[indices], labels) and torch.unique(labels).numel() == 2
    with pytest.raises(ValueError, match="fewer than batch_size"):
        sample_pool_batch(None, 4, 8, 10, 3, generator)
    with pytest.raises(ValueError, match="min_classes"):
        sample_repeated_labels(8, 10, 3, generator, min_classes=4)
    truth = torch.tensor([1, 1, 1, 4])
    assert batch_label_scores(torch.tensor([1, 1, 4, 4]), truth) == {"accuracy": 0.75, "exact": 0.0}
    assert batch_label_scores(torch.tensor([4, 1, 1, 1]), truth) == {"accuracy": 1.0, "exact": 1.0}


def test_errors(stats):
    weight_grad = -torch.rand(10, WIDTH)
    classes = torch.arange(3)
    with pytest.raises(ValueError, match="classes, features"):
        coarse_labels(torch.zeros(10))
    with pytest.raises(ValueError, match="NaN"):
        coarse_labels(torch.full((3, 4), float("nan")))
    with pytest.raises(TypeError, match="fc_weight_grad must be a float"):
        coarse_labels(-torch.ones(3, 4, dtype=torch.int64))
    with pytest.raises(TypeError, match="fc_bias_grad must be a float"):
        bias_label_counts(-torch.ones(3, dtype=torch.int64), 2)
    with pytest.raises(TypeError, match="batch_size"):
        evolve_label_counts(weight_grad, classes, 8.0, stats)
    with pytest.raises(TypeError, match="population and iterations must be ints"):
        evolve_label_counts(weight_grad, classes, 8, stats, population=2.5)
    with pytest.raises(ValueError, match="smaller than the 3 classes"):
        evolve_label_counts(weight_grad, classes, 2, stats)
    with pytest.raises(ValueError, match="features per row"):
        evolve_label_counts(weight_grad[:, :8], classes, 8, stats)
    with pytest.raises(ValueError, match="population"):
        evolve_label_counts(weight_grad, classes, 8, stats, population=1)
    with pytest.raises(ValueError, match="crossover"):
        evolve_label_counts(weight_grad, classes, 8, stats, crossover=1.5)
    with pytest.raises(TypeError, match="FeatureCV"):
        evolve_label_counts(weight_grad, classes, 8, {"mean_feature": None})
    with pytest.raises(ValueError, match="too many"):
        exhaustive_label_counts(-torch.rand(40, WIDTH), torch.arange(40), 64, stats)
    with pytest.raises(ValueError, match="top_m"):
        FeatureCV.from_features(torch.rand(5, WIDTH), top_m=WIDTH + 1)
    with pytest.raises(ValueError, match="n ≥ 2"):
        FeatureCV.from_features(torch.rand(1, WIDTH))
