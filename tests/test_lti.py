"""Learning To Invert (Wu et al. 2022): feature hashing, Eq. 3, per-example defenses, training, DCT augmentation."""
import itertools

import pytest
import torch

from gitutor.attacks import (FeatureHasher, InversionMLP, aggregate_batches, apply_defense, dct_gaussian_augment,
                             defended_inverting_gradients, make_gradient_dataset, permutation_invariant_mse,
                             train_inversion_model)
from gitutor.attacks.defended_ig import sign_matching_loss
from gitutor.attacks.lti import gradient_dimension, observed_gradient
from gitutor.data import digits
from gitutor.federated import client_gradients, sign_compress
from gitutor.models import LeNet, init_uniform_, resnet20
from gitutor.seeding import make_generator


@pytest.fixture(scope="module")
def lenet():
    model = LeNet(num_classes=10, in_channels=1, image_size=8)
    return init_uniform_(model, a=0.5, generator=make_generator(1234))


@pytest.fixture(scope="module")
def small_digits():
    images, labels = digits(size=8)
    return images[:300], labels[:300]


def test_hasher_is_a_fixed_linear_map_that_preserves_sums():
    hasher = FeatureHasher(1000, 64, seed=3)
    u, v = torch.randn(2, 1000, generator=make_generator(0), dtype=torch.float64)
    assert torch.allclose(hasher(2.0 * u - 3.0 * v), 2.0 * hasher(u) - 3.0 * hasher(v))
    assert torch.allclose(hasher(u).sum(), u.sum())
    batch = torch.stack([u, v])
    assert hasher(batch).shape == (2, 64) and torch.allclose(hasher(batch)[1], hasher(v))


def test_hasher_is_deterministic_by_seed():
    x = torch.randn(500, generator=make_generator(1))
    assert torch.equal(FeatureHasher(500, 50, seed=7)(x), FeatureHasher(500, 50, seed=7)(x))
    assert not torch.equal(FeatureHasher(500, 50, seed=7).bins, FeatureHasher(500, 50, seed=8).bins)


def test_hasher_rejects_wrong_length():
    with pytest.raises(ValueError, match="length 500"):
        FeatureHasher(500, 50)(torch.zeros(499))
    with pytest.raises(ValueError, match="out_dim"):
        FeatureHasher(500, 0)


def test_hungarian_loss_equals_minimum_over_permutations():
    generator = make_generator(0)
    reconstructed = torch.rand(2, 3, 1, 4, 4, generator=generator)
    images = torch.rand(2, 3, 1, 4, 4, generator=generator)
    brute = 0.0
    for n in range(2):
        brute += min(sum(((reconstructed[n, i] - images[n, p[i]]) ** 2).mean() for i in range(3))
                     for p in itertools.permutations(range(3))) / 3
    assert torch.isclose(permutation_invariant_mse(reconstructed, images), torch.as_tensor(brute / 2), atol=1e-6)
    # a permuted copy of the truth costs nothing
    assert permutation_invariant_mse(images[:, [2, 0, 1]], images).item() < 1e-12
    assert torch.isclose(permutation_invariant_mse(reconstructed[:, :1], images[:, :1]),
                         ((reconstructed[:, 0] - images[:, 0]) ** 2).mean())


def test_hungarian_loss_rejects_shape_mismatch():
    with pytest.raises(ValueError, match="same shape"):
        permutation_invariant_mse(torch.rand(2, 3, 1, 4, 4), torch.rand(2, 2, 1, 4, 4))


def test_defense_is_applied_per_example_before_averaging(lenet, small_digits):
    images, labels = small_digits[0][:2], small_digits[1][:2]
    features, batches = make_gradient_dataset(lenet, images, labels, sign_compress, 2, num_batches=1)
    per_example = [torch.cat([g.sign().flatten() for g in client_gradients(lenet, images[i:i + 1], labels[i:i + 1])])
                   for i in range(2)]
    assert torch.allclose(features[0], (per_example[0] + per_example[1]) / 2)
    assert (features[0] == 0).any()  # the two signs disagree somewhere: not the sign of the averaged gradient
    assert batches.shape == (1, 2, 1, 8, 8)
    observed = torch.cat([g.flatten() for g in observed_gradient(lenet, images, labels, sign_compress)])
    assert torch.allclose(observed, features[0])


def test_observed_gradient_without_defense_is_the_batch_gradient(lenet, small_digits):
    images, labels = small_digits[0][:4], small_digits[1][:4]
    for a, b in zip(observed_gradient(lenet, images, labels), client_gradients(lenet, images, labels)):
        assert torch.allclose(a, b, atol=1e-6)


def test_aggregate_batches_uses_distinct_examples():
    features = torch.arange(10.0)[:, None]
    images = torch.arange(10.0).view(10, 1, 1, 1)
    mean, batches = aggregate_batches(features, images, 4, num_batches=7, seed=0)
    assert mean.shape == (7, 1) and batches.shape == (7, 4, 1, 1, 1)
    for row in batches.flatten(1):
        assert len(set(row.tolist())) == 4
    assert torch.allclose(mean[:, 0], batches.flatten(1).mean(1))


def test_make_gradient_dataset_errors(lenet, small_digits):
    images, labels = small_digits
    with pytest.raises(ValueError, match="labels must be"):
        make_gradient_dataset(lenet, images[:5], labels[:4])
    with pytest.raises(ValueError, match="hasher expects"):
        make_gradient_dataset(lenet, images[:5], labels[:5], hasher=FeatureHasher(10, 5))
    with pytest.raises(ValueError, match="batch_size"):
        make_gradient_dataset(lenet, images[:5], labels[:5], batch_size=6)


def test_apply_defense_rejects_invalid_defenses(lenet, small_digits):
    grads = client_gradients(lenet, small_digits[0][:1], small_digits[1][:1])
    with pytest.raises(ValueError, match="changed the shape"):
        apply_defense(lambda g: [t.flatten() for t in g], grads)
    with pytest.raises(TypeError, match="list of tensors"):
        apply_defense(lambda g: torch.cat([t.flatten() for t in g]), grads)
    with pytest.raises(ValueError, match="NaN"):
        apply_defense(lambda g: [t / 0 for t in g], grads)
    assert apply_defense(None, grads) == grads


def test_inversion_mlp_shapes_and_errors():
    mlp = InversionMLP(20, (1, 8, 8), batch_size=4, hidden=16)
    out = mlp(torch.randn(3, 20))
    assert out.shape == (3, 4, 1, 8, 8) and out.min() >= 0 and out.max() <= 1
    with pytest.raises(ValueError, match=r"\(N, 20\)"):
        mlp(torch.randn(3, 21))
    with pytest.raises(ValueError, match="image_shape"):
        InversionMLP(20, (8, 8))
    with pytest.raises(ValueError, match="hidden must be a positive int"):
        InversionMLP(20, (1, 8, 8), hidden=2.5)
    with pytest.raises(ValueError, match="features contain NaN"):
        aggregate_batches(torch.full((4, 2), float("nan")), torch.rand(4, 1, 2, 2), 2)


def test_tiny_training_run_lowers_validation_loss(lenet, small_digits):
    images, labels = small_digits
    features, batches = make_gradient_dataset(lenet, images, labels, sign_compress, 1)
    assert features.shape == (300, gradient_dimension(lenet))
    mlp = InversionMLP(features.shape[1], (1, 8, 8), 1, hidden=64, seed=0)
    history = train_inversion_model(mlp, features, batches, epochs=8, lr=1e-3, batch_size=32, seed=0,
                                    progress=False)
    assert len(history["val_loss"]) == 8 and history["lr"][-1] == pytest.approx(1e-4)
    mean_image_mse = ((images - images.mean(0)) ** 2).mean().item()
    assert history["val_loss"][-1] < 0.8 * history["val_loss"][0]
    assert history["val_loss"][-1] < mean_image_mse  # better than guessing the average digit


def test_training_rejects_mismatched_images(lenet):
    mlp = InversionMLP(10, (1, 8, 8), 1, hidden=8)
    with pytest.raises(ValueError, match="images must be"):
        train_inversion_model(mlp, torch.randn(20, 10), torch.rand(20, 1, 1, 4, 4), epochs=1, progress=False)
    with pytest.raises(ValueError, match="features must be"):
        train_inversion_model(mlp, torch.randn(19, 10), torch.rand(20, 1, 1, 8, 8), epochs=1, progress=False)


def test_dct_gaussian_augment_matches_pixel_mean_and_is_seeded(small_digits):
    images = 0.25 + 0.5 * small_digits[0]  # mid-grey range, so the final clamp to [0, 1] rarely acts
    samples = dct_gaussian_augment(images, 4000, seed=0)
    assert samples.shape == (4000, 1, 8, 8) and samples.min() >= 0 and samples.max() <= 1
    assert torch.equal(samples[:5], dct_gaussian_augment(images, 4000, seed=0)[:5])
    assert not torch.equal(samples[:5], dct_gaussian_augment(images, 4000, seed=1)[:5])
    # the DCT is orthonormal and linear: the pixel mean and the total variance (trace) are preserved
    assert (samples.mean(0) - images.mean(0)).abs().max() < 0.02
    assert samples.var(0).sum().item() == pytest.approx(images.var(0).sum().item(), rel=0.1)
    with pytest.raises(ValueError, match="at least 2"):
        dct_gaussian_augment(images[:1], 3)


def test_sign_matching_loss_is_zero_iff_signs_agree():
    target = [torch.tensor([1.0, -1.0, 0.0])]
    assert sign_matching_loss([torch.tensor([0.5, -2.0, 3.0])], target).item() == 0.0
    assert sign_matching_loss([torch.tensor([-0.5, -2.0, 3.0])], target).item() == pytest.approx(0.25)


def test_defended_ig_rejects_unknown_defense(lenet, small_digits):
    grads = client_gradients(lenet, small_digits[0][:1], small_digits[1][:1])
    with pytest.raises(ValueError, match="defense must be one of"):
        defended_inverting_gradients(lenet, grads, small_digits[1][:1], (1, 1, 8, 8), "dropout",
                                     iterations=1, tv_weight=0.0)


def test_resnet20_has_270k_parameters_and_parameter_free_shortcuts():
    model = resnet20(num_classes=10, seed=0)
    assert 0.26e6 < gradient_dimension(model) < 0.28e6
    assert model(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    same = resnet20(num_classes=10, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), same.parameters()))


def test_lti_dataset_path_rejects_nan_images_and_bad_labels(lenet, small_digits):
    images, labels = small_digits[0][:3].clone(), small_digits[1][:3]
    images[1, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="images contain NaN"):
        make_gradient_dataset(lenet, images, labels)
    with pytest.raises(ValueError, match=r"labels y must lie in \[0, 10\)"):
        make_gradient_dataset(lenet, small_digits[0][:2], torch.tensor([1, -100]))
    with pytest.raises(ValueError, match="images must be a float"):
        make_gradient_dataset(lenet, (small_digits[0][:2] * 16).long(), small_digits[1][:2])


def test_reconstruct_returns_an_attack_result_with_json_info(lenet, small_digits):
    import json

    from gitutor.attacks import AttackResult, reconstruct

    mlp = InversionMLP(7, (1, 8, 8), batch_size=2, hidden=8)
    result = reconstruct(mlp, torch.randn(5, 7), chunk=2)
    assert isinstance(result, AttackResult) and result.images.shape == (5, 2, 1, 8, 8) and result.labels is None
    assert json.loads(json.dumps(result.info)) == {"observations": 5, "batch_size": 2}
    assert not result.images.requires_grad and result.images.device.type == "cpu"
    with pytest.raises(ValueError, match="features contain NaN"):
        reconstruct(mlp, torch.full((1, 7), float("nan")))
    with pytest.raises(TypeError, match="InversionMLP"):
        reconstruct(torch.nn.Linear(7, 7), torch.randn(1, 7))


def test_training_rejects_bad_hyperparameters(lenet):
    mlp = InversionMLP(4, (1, 2, 2), hidden=4)
    features, images = torch.randn(10, 4), torch.rand(10, 1, 1, 2, 2)
    for kwargs, message in ((dict(lr=float("nan")), "lr must be"), (dict(lr=-1.0), "lr must be"),
                            (dict(lr_drop_at=0.0), "lr_drop_at"), (dict(batch_size=0), "batch_size")):
        with pytest.raises(ValueError, match=message):
            train_inversion_model(mlp, features, images, epochs=1, progress=False, **kwargs)


def test_reconstruction_scores_are_score_batch():
    from gitutor.attacks.lti import reconstruction_scores
    from gitutor.metrics import score_batch

    assert reconstruction_scores is score_batch


def test_standardised_input_makes_training_blind_to_the_features_scale():
    """g_θ's input standardisation (chapter 06): features ×0.01 train exactly as the originals."""
    from gitutor.attacks.lti import InversionMLP, train_inversion_model
    gen = torch.Generator().manual_seed(0)
    features, images = torch.randn(40, 12, generator=gen), torch.rand(40, 1, 1, 4, 4, generator=gen)
    curves = []
    for scale in (1.0, 0.01):
        model = InversionMLP(12, (1, 4, 4), 1, 16, seed=0)
        curves.append(train_inversion_model(model, features * scale, images, epochs=3, lr=1e-2, batch_size=8,
                                            seed=0, progress=False, standardise=True)["val_loss"])
    assert curves[0] == pytest.approx(curves[1], rel=1e-4)
    model = InversionMLP(12, (1, 4, 4), 1, 16, seed=0)
    model.standardise_from(torch.stack([torch.zeros(12), torch.full((12,), 2.0)]))
    assert torch.allclose(model.shift, torch.ones(12)) and torch.allclose(model.scale, torch.full((12,), 2 ** 0.5))
    model.standardise_from(torch.ones(3, 12))  # constant coordinates keep scale 1
    assert torch.equal(model.scale, torch.ones(12))
    with pytest.raises(ValueError, match="features"):
        model.standardise_from(torch.ones(1, 12))


def test_defended_ig_keeps_the_best_iterate_and_runs_a_constant_rate_on_request(lenet, small_digits):
    x, y = small_digits[0][:1], small_digits[1][:1]
    grads = observed_gradient(lenet, x, y)
    common = dict(iterations=12, tv_weight=0.0, lr=0.3, seed=0)
    last = defended_inverting_gradients(lenet, grads, y, (1, 1, 8, 8), "none", **common)
    best = defended_inverting_gradients(lenet, grads, y, (1, 1, 8, 8), "none", keep_best=True, **common)
    assert last.history["loss"] == best.history["loss"]  # the same run, another image returned
    assert best.info["best_iteration"] == 1 + min(range(12), key=best.history["loss"].__getitem__)
    assert "best_iteration" not in last.info
    stepped = {round(lr, 6) for lr in last.history["lr"]}
    assert stepped == {0.3, 0.03, 0.003, 0.0003}  # Geiping et al.'s steps at 3/8, 5/8, 7/8
    flat = defended_inverting_gradients(lenet, grads, y, (1, 1, 8, 8), "none", lr_steps=(), **common)
    assert set(flat.history["lr"]) == {0.3}
    with pytest.raises(ValueError, match="fractions"):
        defended_inverting_gradients(lenet, grads, y, (1, 1, 8, 8), "none", lr_steps=(1.5,), **common)
    with pytest.raises(TypeError, match="keep_best"):
        defended_inverting_gradients(lenet, grads, y, (1, 1, 8, 8), "none", keep_best=1, **common)


def test_epochs_without_gain_counts_epochs_since_the_last_relative_fall():
    from gitutor.attacks.lti import epochs_without_gain

    assert epochs_without_gain([], 0.01) == 0
    assert epochs_without_gain([1.0], 0.01) == 0  # the first epoch is a fall from nothing
    assert epochs_without_gain([1.0, 0.5, 0.499, 0.6], 0.01) == 2  # 0.499 is not 1 % below 0.5
    assert epochs_without_gain([1.0, 0.5, 0.499, 0.49], 0.01) == 0  # 0.49 is 2 % below 0.5
    assert epochs_without_gain([1.0, 0.5, 0.499, 0.6], 0.0) == 1  # any fall counts at min_delta 0
    with pytest.raises(ValueError, match="min_delta"):
        epochs_without_gain([1.0], 1.0)


def test_stopping_rule_drops_the_rate_stops_when_flat_and_keeps_the_best_weights(lenet, small_digits):
    from gitutor.attacks.lti import reconstruct

    images, labels = small_digits
    features, batches = make_gradient_dataset(lenet, images, labels, sign_compress, 1)
    mlp = InversionMLP(features.shape[1], (1, 8, 8), 1, hidden=32, seed=0)
    history = train_inversion_model(mlp, features, batches, epochs=300, lr=1e-2, batch_size=32, seed=0,
                                    progress=False, standardise=True, patience=3, min_delta=0.01)
    epochs = len(history["val_loss"])
    assert history["flattened"] is True and epochs < 300  # stopped by the rule, not the cap
    assert history["lr"][0] == pytest.approx(1e-2) and history["lr"][-1] == pytest.approx(1e-3)  # one drop
    drop = history["lr"].index(history["lr"][-1])
    assert drop >= 4 and epochs - drop >= 4  # patience epochs flat before the drop and after it
    # the weights kept are those of the lowest validation loss
    order = torch.randperm(300, generator=make_generator(0))
    val = order[:30]
    again = permutation_invariant_mse(reconstruct(mlp, features[val]).images, batches[val]).item()
    assert again == pytest.approx(min(history["val_loss"]), rel=1e-5)
    capped = train_inversion_model(InversionMLP(features.shape[1], (1, 8, 8), 1, hidden=32, seed=0), features,
                                   batches, epochs=3, lr=1e-2, batch_size=32, seed=0, progress=False, patience=3)
    assert capped["flattened"] is False and len(capped["val_loss"]) == 3  # the cap, said so
    fixed = train_inversion_model(InversionMLP(features.shape[1], (1, 8, 8), 1, hidden=8, seed=0), features,
                                  batches, epochs=2, progress=False)
    assert fixed["flattened"] is None
    with pytest.raises(ValueError, match="validation split"):
        train_inversion_model(mlp, features, batches, epochs=2, progress=False, patience=2, val_fraction=0.0)
    with pytest.raises(ValueError, match="patience"):
        train_inversion_model(mlp, features, batches, epochs=2, progress=False, patience=0)


def test_defended_matching_distance_is_zero_at_the_truth_for_one_example(lenet, small_digits):
    from gitutor.attacks.defended_ig import defended_matching_distance
    from gitutor.federated import prune_gradients

    x, y = small_digits[0][:1], small_digits[1][:1]
    grads = client_gradients(lenet, x, y)
    assert defended_matching_distance(lenet, x, y, sign_compress(grads), "sign") == 0.0
    assert abs(defended_matching_distance(lenet, x, y, prune_gradients(grads, 0.99), "prune")) < 1e-5
    assert defended_matching_distance(lenet, torch.rand(1, 1, 8, 8), y, grads, "none") > 1e-3
    with pytest.raises(ValueError, match="defense must be one of"):
        defended_matching_distance(lenet, x, y, grads, "dropout")
