import pytest
import torch

from gitutor.attacks import dlg, inverting_gradients
from gitutor.data import digits
from gitutor.federated import client_gradients
from gitutor.metrics import psnr


@pytest.fixture
def digit_case(tiny_lenet):
    images, labels = digits(size=12)
    x, y = images[:1], labels[:1]
    return tiny_lenet, x, y, client_gradients(tiny_lenet, x, y)


def test_dlg_recovers_image_and_label(digit_case):
    model, x, y, grads = digit_case
    result = dlg(model, grads, x.shape, 10, iterations=40, seed=0)
    assert int(result.labels[0]) == int(y[0])
    assert float(psnr(result.images, x)[0]) > 30
    assert result.history["loss"][-1] < 1e-3 * result.history["loss"][0]
    assert result.snapshots[0][0] == 0 and result.snapshots[-1][0] == 40


def test_dlg_with_known_label_and_determinism(digit_case):
    model, x, y, grads = digit_case
    first = dlg(model, grads, x.shape, 10, labels=y, iterations=15, seed=3)
    second = dlg(model, grads, x.shape, 10, labels=y, iterations=15, seed=3)
    assert torch.equal(first.images, second.images)
    assert torch.equal(first.labels, y)
    assert first.history["loss"][-1] < first.history["loss"][0]


def test_dlg_errors(digit_case):
    model, x, y, grads = digit_case
    with pytest.raises(ValueError, match="body.0.weight"):
        dlg(model, [torch.zeros(1)] + grads[1:], x.shape, 10)
    with pytest.raises(ValueError, match="parameters"):
        dlg(model, grads[:2], x.shape, 10)
    with pytest.raises(ValueError, match="input_shape"):
        dlg(model, grads, (1, 12, 12), 10)
    with pytest.raises(ValueError, match="labels"):
        dlg(model, grads, x.shape, 10, labels=torch.tensor([1, 2]))


def test_inverting_gradients_improves_psnr_and_stays_in_box(digit_case):
    model, x, y, grads = digit_case
    result = inverting_gradients(model, grads, y, x.shape, iterations=150, tv_weight=1e-4, lr=0.1, record_every=50)
    start = result.snapshots[0][1]
    assert float(psnr(result.images, x)[0]) > float(psnr(start, x)[0]) + 5
    assert result.images.min() >= 0 and result.images.max() <= 1
    assert result.history["gradient_distance"][-1] < result.history["gradient_distance"][0]
    with pytest.raises(ValueError, match="labels for a batch"):
        inverting_gradients(model, grads, torch.tensor([1, 2]), x.shape, iterations=1, tv_weight=0)


def test_dlg_accepts_soft_labels(digit_case):
    model, x, y, grads = digit_case
    soft = dlg(model, grads, x.shape, 10, labels=torch.nn.functional.one_hot(y, 10).float(), iterations=5, seed=1)
    hard = dlg(model, grads, x.shape, 10, labels=y, iterations=5, seed=1)
    assert torch.allclose(soft.images, hard.images, atol=1e-4)


def test_dlg_strong_wolfe_option_recovers_and_is_validated(digit_case):
    model, x, y, grads = digit_case
    result = dlg(model, grads, x.shape, 10, iterations=40, seed=0, line_search="strong_wolfe")
    assert int(result.labels[0]) == int(y[0])
    assert float(psnr(result.images, x)[0]) > 30
    plain = dlg(model, grads, x.shape, 10, iterations=3, seed=0)
    wolfe = dlg(model, grads, x.shape, 10, iterations=3, seed=0, line_search="strong_wolfe")
    assert not torch.equal(plain.images, wolfe.images)  # the option reaches the optimiser
    with pytest.raises(ValueError, match="line_search"):
        dlg(model, grads, x.shape, 10, iterations=1, line_search="wolfe")
    for lr in (0.0, float("nan"), -1.0):
        with pytest.raises(ValueError, match="lr"):
            dlg(model, grads, x.shape, 10, iterations=1, lr=lr)


def test_dlg_rejects_labels_outside_the_classes(digit_case):
    model, x, y, grads = digit_case
    for bad in (torch.tensor([-100]), torch.tensor([10])):
        with pytest.raises(ValueError, match="num_classes"):
            dlg(model, grads, x.shape, 10, labels=bad, iterations=1)
    with pytest.raises(ValueError, match="finite"):
        dlg(model, grads, x.shape, 10, labels=torch.full((1, 10), float("nan")), iterations=1)


def test_dlg_stops_at_an_lbfgs_fixed_point_with_the_full_budget_result(digit_case):
    model, x, y, grads = digit_case
    short = dlg(model, grads, x.shape, 10, iterations=200, seed=0, line_search="strong_wolfe")
    assert short.info["converged_at"] < 200 and len(short.history["loss"]) == 200 and short.snapshots[-1][0] == 200
    longer = dlg(model, grads, x.shape, 10, iterations=400, seed=0, line_search="strong_wolfe")
    assert torch.equal(short.images, longer.images) and longer.history["loss"][:200] == short.history["loss"]
    # the snapshots from the fixed point on hold the fixed point (the final image), not an older snapshot
    fixed = short.info["converged_at"]
    assert fixed in [step for step, _ in short.snapshots]
    assert all(torch.equal(images, short.images) for step, images in short.snapshots if step >= fixed)
