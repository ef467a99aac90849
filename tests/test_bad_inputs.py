"""Bad inputs that used to slip through (issue 22, item 8): each raises a clear error naming the argument.

Three mistakes recur at every public entry point: the **value range** (8-bit pixels in 0–255), the
**layout** (channels-last ``(B, H, W, C)`` images, as NumPy / PIL / matplotlib store them) and the
**normalisation** (soft labels that are not probabilities; images standardised with a mean and std).
The shared checks live in :mod:`gitutor.checks`; every test asserts the exception type and that the
message names the argument and the expected range or layout.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from gitutor.attacks import (dct_gaussian_augment, defended_inverting_gradients, dlg, gradinversion, idlg_admm,
                             invert_fcn, inverting_gradients, stepwise_inversion, total_variation)
from gitutor.attacks.bn_prior import bn_statistics_loss
from gitutor.attacks.lti import InversionMLP, aggregate_batches, make_gradient_dataset, train_inversion_model
from gitutor.attacks.lti.model import permutation_invariant_mse
from gitutor.attacks.user_level import Augmentation, to_classifier_input, user_level_inverting_gradients
from gitutor.attacks.user_level.evaluation import intra_user_scores, representative_scores, user_distance_matrix
from gitutor.checks import check_images, check_layout, check_num_classes
from gitutor.data import resize
from gitutor.face_detection import detect_faces, face_detection_rate
from gitutor.federated import (client_gradients, cross_entropy, defended_clients_case, fedadmm_client_update,
                               gradient_case, mixup, smooth_labels)
from gitutor.labels import FeatureCV
from gitutor.metrics import lpips_distance, match_batch, mse, psnr, score_batch, ssim
from gitutor.models import FCN, LeNet, fc_input_features, init_uniform_
from gitutor.seeding import make_generator
from gitutor.viz import iteration_strip, show_grid

LAYOUT = r"\(B, C, H, W\)"


@pytest.fixture
def colour_lenet():
    """A DLG LeNet on 3×8×8 colour inputs, 10 classes."""
    return init_uniform_(LeNet(num_classes=10, in_channels=3, image_size=8), 0.5, make_generator(0))


@pytest.fixture
def batch():
    return torch.rand(2, 3, 8, 8, generator=make_generator(1)), torch.tensor([1, 4])


# --- soft labels must be probabilities -------------------------------------------------------------

@pytest.mark.parametrize("rows, message", [
    ([[0.5] * 10, [0.1] * 10], r"soft labels y .*sum to 1.*row 0 sums to 5"),      # rows summing to 5 and 1
    ([[1.5, -0.5] + [0.0] * 8] * 2, r"soft labels y must be probabilities.*negative"),  # sums to 1, negative
    ([[2.0, 0.5] + [0.0] * 8] * 2, r"soft labels y .*sum to 1.*softmax"),             # logits, not probabilities
])
def test_soft_labels_that_are_not_probabilities_are_refused(colour_lenet, batch, rows, message):
    x, _ = batch
    with pytest.raises(ValueError, match=message):
        client_gradients(colour_lenet, x, torch.tensor(rows))
    with pytest.raises(ValueError, match=message):
        cross_entropy(colour_lenet(x), torch.tensor(rows))


def test_valid_soft_labels_still_work(colour_lenet, batch):
    x, y = batch
    hard = client_gradients(colour_lenet, x, y)
    one_hot = client_gradients(colour_lenet, x, torch.nn.functional.one_hot(y, 10).float())
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(hard, one_hot))
    client_gradients(colour_lenet, x, smooth_labels(y, torch.tensor([0.1, 0.9]), 10))
    client_gradients(colour_lenet, x, torch.softmax(torch.randn(2, 10, generator=make_generator(2)), dim=-1))
    client_gradients(colour_lenet, *mixup(x, y, x.flip(0), y.flip(0), 0.3, num_classes=10))
    client_gradients(colour_lenet, x, smooth_labels(y, 0.2, 10).double())  # float64 rounding is fine


def test_soft_labels_are_checked_on_every_client_path(colour_lenet, batch):
    x, _ = batch
    bad = torch.full((2, 10), 0.5)
    params = [p.detach().clone() for p in colour_lenet.parameters()]
    with pytest.raises(ValueError, match="soft labels y .*sum to 1"):
        fedadmm_client_update(colour_lenet, x, bad, params, [torch.zeros_like(p) for p in params], rho=0.1, lr=0.1,
                              local_steps=1)
    with pytest.raises(ValueError, match="soft labels y .*sum to 1"):
        gradient_case(colour_lenet, x, bad)
    grads = client_gradients(colour_lenet, x[:1], torch.tensor([3]))
    with pytest.raises(ValueError, match="soft labels `labels` .*sum to 1"):
        dlg(colour_lenet, grads, (1, 3, 8, 8), 10, labels=torch.full((1, 10), 0.5), iterations=1)


# --- images in 0–255 or normalised: refused by the metrics, never clipped ---------------------------

METRICS = {"mse": mse, "psnr": psnr, "ssim": ssim, "match_batch": match_batch, "score_batch": score_batch,
           "lpips_distance": lpips_distance}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metrics_refuse_a_truth_outside_0_1(name):
    truth = torch.rand(2, 3, 8, 8, generator=make_generator(3))
    with pytest.raises(ValueError, match=r"truth images must lie in \[0, 1\].*divide by 255"):
        METRICS[name](truth * 255, truth * 255)  # used to give PSNR −43 dB
    with pytest.raises(ValueError, match=r"truth images must lie in \[0, 1\].*mean and std"):
        METRICS[name](truth, (truth - 0.5) / 0.25)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metrics_refuse_a_reconstruction_in_0_255(name):
    truth = torch.rand(2, 3, 8, 8, generator=make_generator(3))
    with pytest.raises(ValueError, match=r"reconstruction images must be on the \[0, 1\] scale.*divide by 255"):
        METRICS[name](truth * 255, truth)


def test_metrics_accept_float_rounding_and_unclamped_reconstructions():
    truth = torch.rand(2, 3, 8, 8, generator=make_generator(3))
    assert psnr(truth, (truth + 5e-7).clamp(max=1 + 5e-7)).min() > 100  # 1 + 5e-7 is within the tolerance
    dlg_like = torch.randn(2, 3, 8, 8, generator=make_generator(4))  # DLG returns unclamped images
    assert torch.allclose(psnr(dlg_like, truth), psnr(dlg_like.clamp(0, 1), truth))
    assert float(mse(dlg_like, truth).mean()) > float(mse(dlg_like.clamp(0, 1), truth).mean())  # measured as is
    with pytest.raises(ValueError, match=r"truth images must lie in \[0, 1\]"):
        psnr(truth, truth + 1e-3)


def test_range_is_checked_where_images_enter_the_library(colour_lenet, batch):
    x, y = batch
    message = r"images must lie in \[0, 1\]"
    with pytest.raises(ValueError, match=message):
        gradient_case(colour_lenet, x * 255, y)
    with pytest.raises(ValueError, match=message):
        defended_clients_case(colour_lenet, x * 255, y, None)
    with pytest.raises(ValueError, match=message):
        dct_gaussian_augment(x * 255, 2)
    with pytest.raises(ValueError, match=message):
        make_gradient_dataset(colour_lenet, x * 255, y)
    with pytest.raises(ValueError, match=message):
        train_inversion_model(InversionMLP(5, (3, 8, 8), hidden=4), torch.zeros(2, 5), x[:, None] * 255, epochs=1,
                              progress=False)
    with pytest.raises(ValueError, match=r"aux_images must lie in \[0, 1\].*mean and std"):
        FeatureCV.fit(functools.partial(fc_input_features, colour_lenet), (x - 0.5) / 0.25, top_m=2)
    with pytest.raises(ValueError, match=message):
        fc_input_features(colour_lenet, x * 255)
    with pytest.raises(ValueError, match=r"images .*\(B, C, H, W\)"):
        fc_input_features(colour_lenet, x.permute(0, 2, 3, 1))
    with pytest.raises(ValueError, match="empty batch"):
        fc_input_features(colour_lenet, x[:0])
    with pytest.raises(ValueError, match=r"x1 must lie in \[0, 1\]"):
        mixup(x * 255, y, x, y, 0.5, num_classes=10)
    with pytest.raises(ValueError, match=r"images must lie in \[0, 1\]"):
        face_detection_rate(x * 255)
    with pytest.raises(TypeError, match=r"x must be a float.*"):
        client_gradients(colour_lenet, (x * 255).to(torch.uint8), y)
    with pytest.raises(TypeError, match=r"images must be a float tensor .* in \[0, 1\].*8-bit pixels\? use images.float\(\) / 255"):
        check_images((x * 255).to(torch.uint8), "images")


# --- channels-last images: refused at the entry point, saying the layout --------------------------

def test_client_paths_say_the_layout(colour_lenet, batch):
    x, y = batch
    last = x.permute(0, 2, 3, 1).contiguous()  # (2, 8, 8, 3)
    for call in (lambda: client_gradients(colour_lenet, last, y),
                 lambda: gradient_case(colour_lenet, last, y),
                 lambda: defended_clients_case(colour_lenet, last, y, None),
                 lambda: make_gradient_dataset(colour_lenet, last, y)):
        with pytest.raises(ValueError, match=LAYOUT + r".*channels-last \(B, H, W, C\).*permute\(0, 3, 1, 2\)"):
            call()
    with pytest.raises(ValueError, match=r"x must be \(B, C, H, W\) with C = 3.*grey"):
        client_gradients(colour_lenet, x[:, :1], y)  # grey images into a colour model
    with pytest.raises(ValueError, match=r"x must be \(B, C, H, W\)"):
        client_gradients(colour_lenet, x[0], y[:1].expand(3))  # one image without its batch dimension


def test_attacks_say_the_layout_of_input_shape(colour_lenet, batch):
    x, y = batch
    grads = client_gradients(colour_lenet, x[:1], y[:1])
    message = r"input_shape must be \(B, C, H, W\) with C = 3.*channels-last"
    with pytest.raises(ValueError, match=message):
        dlg(colour_lenet, grads, (1, 8, 8, 3), 10, iterations=1)
    with pytest.raises(ValueError, match=message):
        inverting_gradients(colour_lenet, grads, y[:1], (1, 8, 8, 3), iterations=1, tv_weight=0.0)
    with pytest.raises(ValueError, match=message):
        defended_inverting_gradients(colour_lenet, grads, y[:1], (1, 8, 8, 3), "none", iterations=1, tv_weight=0.0)
    with pytest.raises(ValueError, match=message):
        idlg_admm(colour_lenet, grads, 0.1, (1, 8, 8, 3), 10, iterations=1)
    with pytest.raises(ValueError, match=r"input_shape must be \(C, H, W\) with C = 3.*channels-last \(H, W, C\)"):
        user_level_inverting_gradients(colour_lenet, grads, y[:1], (8, 8, 3), batch_size=1, steps=1)


def test_metrics_and_image_helpers_say_the_layout(colour_lenet, batch):
    x, _ = batch
    last = x.permute(0, 2, 3, 1)
    for name in sorted(METRICS):
        with pytest.raises(ValueError, match=r"reconstruction images must be \(B, C, H, W\).*channels-last"):
            METRICS[name](last, last)
    with pytest.raises(ValueError, match=r"\(N, B, C, H, W\).*channels-last \(N, B, H, W, C\)"):
        score_batch(last[None], last[None])
    checks = {"total_variation": (lambda: total_variation(last), "x"),
              "bn_statistics_loss": (lambda: bn_statistics_loss(colour_lenet, last), "images"),
              "show_grid": (lambda: show_grid(last), "images"),
              "iteration_strip": (lambda: iteration_strip([(0, last)]), "snapshot images"),
              "face_detection_rate": (lambda: face_detection_rate(last), "images"),
              "dct_gaussian_augment": (lambda: dct_gaussian_augment(last, 2), "images"),
              "aggregate_batches": (lambda: aggregate_batches(torch.zeros(2, 4), last, 1), "images"),
              "to_classifier_input": (lambda: to_classifier_input(last * 2 - 1, 8), "x"),
              "Augmentation": (lambda: Augmentation()(last[:1], 2, make_generator(0)), "image"),
              "mixup": (lambda: mixup(last, torch.tensor([1, 2]), last, torch.tensor([1, 2]), 0.5, num_classes=3),
                        "x1"),
              "FeatureCV.fit": (lambda: FeatureCV.fit(lambda images: images.flatten(1), last), "aux_images")}
    for function, (call, argument) in checks.items():
        with pytest.raises(ValueError, match=rf"^{argument} must be .*\(B, C, H, W\).*channels-last"):
            call()
    with pytest.raises(ValueError, match=r"image must be \(C, H, W\).*channels-last \(H, W, C\)"):
        detect_faces(last[0])
    with pytest.raises(ValueError, match=r"image_shape must be \(C, H, W\).*channels-last"):
        InversionMLP(5, (8, 8, 3), hidden=4)


def test_layout_heuristic_accepts_every_channels_first_image():
    for shape in [(2, 1, 8, 8), (2, 3, 32, 32), (1, 3, 3, 3), (4, 1, 25, 25), (2, 3, 224, 224)]:
        assert check_layout(shape, "x") == shape
    assert check_layout((3, 8, 8), "image", leading=0) == (3, 8, 8)
    with pytest.raises(ValueError, match=r"x must be \(B, C, H, W\), got shape \(8, 8\)"):
        check_layout((8, 8), "x")


# --- dlg(num_classes=...) ------------------------------------------------------------------------------

def test_dlg_names_num_classes(colour_lenet, batch):
    x, y = batch
    grads = client_gradients(colour_lenet, x[:1], y[:1])
    for bad in (0, 1, -3):
        with pytest.raises(ValueError, match=r"num_classes must be ≥ 2"):
            dlg(colour_lenet, grads, (1, 3, 8, 8), bad, iterations=1)
    with pytest.raises(TypeError, match="num_classes must be an int"):
        dlg(colour_lenet, grads, (1, 3, 8, 8), 10.0, iterations=1)
    with pytest.raises(ValueError, match=r"num_classes=100 but the model outputs 10 logits"):
        dlg(colour_lenet, grads, (1, 3, 8, 8), 100, iterations=1)
    with pytest.raises(ValueError, match=r"num_classes must be ≥ 2"):
        smooth_labels(y, 0.1, 1)
    assert check_num_classes(10) == 10
    assert dlg(colour_lenet, grads, (1, 3, 8, 8), 10, iterations=1).images.shape == (1, 3, 8, 8)


# --- the review of the other public functions (range, layout, normalisation) --------------------------

def test_stepwise_and_gradinversion_say_the_layout_of_input_shape(colour_lenet, batch):
    x, y = batch
    grads = client_gradients(colour_lenet, x[:1], y[:1])
    message = r"input_shape must be \(B, C, H, W\) with C = 3.*channels-last"
    with pytest.raises(ValueError, match=message):
        stepwise_inversion(colour_lenet, grads, y[:1], (1, 8, 8, 3), iterations=2, bn_weight=0.0)
    with pytest.raises(ValueError, match=message):
        gradinversion(colour_lenet, grads, y[:1], (1, 8, 8, 3), iterations=2, bn_weight=0.0)


def test_resize_refuses_what_it_would_silently_clip_and_reads_pixels_by_dtype():
    x = torch.rand(2, 3, 8, 8, generator=make_generator(5))
    with pytest.raises(ValueError, match=r"images must lie in \[0, 1\].*divide by 255"):
        resize(x * 255, 4)  # used to come back clipped to a white image
    with pytest.raises(ValueError, match=r"images must be \(B, C, H, W\).*channels-last"):
        resize(x.permute(0, 2, 3, 1), 4)
    with pytest.raises(TypeError, match=r"images must be a float tensor"):
        resize((x * 255).to(torch.uint8), 4)
    assert resize(x, 4).shape == (2, 3, 4, 4)


def test_photographs_are_scaled_by_their_dtype(monkeypatch):
    import skimage.data

    import gitutor.data.bundled as bundled

    dark = np.full((4, 4), 1, dtype=np.uint8)  # an 8-bit image whose brightest pixel is 1 of 255
    monkeypatch.setattr(skimage.data, "dark_test_image", lambda: dark, raising=False)
    assert float(bundled.photograph("dark_test_image").max()) == pytest.approx(1 / 255)
    monkeypatch.setattr(skimage.data, "float_test_image", lambda: np.full((4, 4), 3.0), raising=False)
    with pytest.raises(ValueError, match=r"not in \[0, 1\]"):
        bundled.photograph("float_test_image")
    assert bundled.photograph("horse").max() == 1.0  # a boolean image becomes 0/1


def test_user_level_scores_name_the_batch():
    batch = torch.rand(3, 1, 8, 8, generator=make_generator(6))
    with pytest.raises(ValueError, match=r"batch must lie in \[0, 1\].*divide by 255"):
        intra_user_scores(batch * 255)
    with pytest.raises(ValueError, match=r"batch must be \(B, C, H, W\).*channels-last"):
        representative_scores(batch[:1].permute(0, 2, 3, 1), batch.permute(0, 2, 3, 1))
    with pytest.raises(ValueError, match=r"batch must lie in \[0, 1\]"):
        user_distance_matrix([batch[:1], batch[1:2]], [batch * 255, batch * 255])


def test_invert_fcn_refuses_a_label_that_is_not_a_distribution():
    model = FCN(10, image_shape=(1, 4, 4), widths=(8,))
    grads = [torch.ones_like(p) for p in model.parameters()]
    label = torch.full((10,), 0.1)
    with pytest.raises(ValueError, match="label must be a soft label summing to 1.*softmax"):
        invert_fcn(model, grads, torch.ones(8), label * 3)
    with pytest.raises(ValueError, match="feature contains NaN"):
        invert_fcn(model, grads, torch.full((8,), float("nan")), label)


def test_lti_loss_says_the_layout():
    images = torch.rand(2, 1, 8, 8, 3)
    with pytest.raises(ValueError, match=r"images must be \(N, B, C, H, W\).*channels-last"):
        permutation_invariant_mse(images, images)


def test_feature_cv_refuses_features_before_the_relu():
    features = torch.randn(6, 12, generator=make_generator(7))  # pre-activation: half negative
    with pytest.raises(ValueError, match=r"features must be non-negative.*before the activation"):
        FeatureCV.from_features(features, top_m=2)
    assert FeatureCV.from_features(features.relu() + 0.01, top_m=2).indices.shape == (2,)
