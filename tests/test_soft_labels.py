"""Soft-label λ recovery, label generators, FCN analytic inversion and iDLG (Wang et al., ICLR 2024)."""
import math

import pytest
import torch
from torch import nn

from gitutor.attacks import invert_fcn
from gitutor.federated import client_gradients, mixup, smooth_labels
from gitutor.labels import idlg_label, recover_soft_label
from gitutor.models import FCN, LeNet, init_uniform_

NUM_CLASSES = 10
TOLERANCE = 1e-3  # L1 error of a recovered label (the chapter's "label recovered")


@pytest.fixture(scope="module")
def lenet():
    model = LeNet(num_classes=NUM_CLASSES, image_size=16, fc_bias=False)
    return init_uniform_(model, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def images():
    return torch.rand(4, 3, 16, 16, generator=torch.Generator().manual_seed(1))


def _l1(result, y):
    return float((result.label - y[0].double()).abs().sum())


@pytest.mark.parametrize("index, eps", [(0, 0.05), (1, 0.3), (2, 0.49)])
def test_label_smoothing_recovered(lenet, images, index, eps):
    y = smooth_labels(torch.tensor([index + 3]), eps, NUM_CLASSES)
    grads = client_gradients(lenet, images[index:index + 1], y)
    result = recover_soft_label(lenet.fc, grads[-1], exclude_top=1)
    assert result.accepted and result.method in ("lbfgs", "pso")
    assert _l1(result, y) < TOLERANCE
    assert math.isclose(float(result.label.sum()), 1.0, abs_tol=1e-6)  # Thm. 1 (float32 gradients)
    feature = lenet.features(images[index:index + 1])[0].double()
    assert torch.allclose(result.feature, feature, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("weight", [0.15, 0.5, 0.8])
def test_mixup_recovered(lenet, images, weight):
    x, y = mixup(images[:1], torch.tensor([2]), images[1:2], torch.tensor([7]), weight, num_classes=NUM_CLASSES)
    grads = client_gradients(lenet, x, y)
    result = recover_soft_label(lenet.fc, grads[-1], exclude_top=2)
    assert _l1(result, y) < TOLERANCE


def test_one_hot_recovered_and_matches_idlg(lenet, images):
    for index, label in enumerate([0, 4, 9]):
        y = torch.tensor([label])
        grads = client_gradients(lenet, images[index:index + 1], y)
        result = recover_soft_label(lenet.fc, grads[-1])
        assert _l1(result, nn.functional.one_hot(y, NUM_CLASSES)) < TOLERANCE
        assert idlg_label(grads[-1]) == label == int(result.label.argmax())


def test_idlg_one_hot_is_wrong_for_mixup(lenet, images):
    x, y = mixup(images[:1], torch.tensor([1]), images[1:2], torch.tensor([5]), 0.5, num_classes=NUM_CLASSES)
    grads = client_gradients(lenet, x, y)
    one_hot = nn.functional.one_hot(torch.tensor(idlg_label(grads[-1])), NUM_CLASSES).double()
    assert float((one_hot - y[0].double()).abs().sum()) >= 1.0 - 1e-6


def test_large_lambda_needs_search_beyond_first_minimum():
    """A confident (trained-like) prediction: λ far from ±1 is still found (synthetic Eq. 2 gradient)."""
    generator = torch.Generator().manual_seed(3)
    weight = torch.randn(NUM_CLASSES, 24, generator=generator, dtype=torch.float64)
    feature = torch.rand(24, generator=generator, dtype=torch.float64)
    weight = weight * 8 / (weight @ feature).std()
    p = torch.softmax(weight @ feature, 0)
    y = smooth_labels(p.argmax().view(1), 0.1, NUM_CLASSES)[0].double()
    grad = torch.outer(p - y, feature)
    result = recover_soft_label(weight, grad)
    assert float((result.label - y).abs().sum()) < TOLERANCE
    assert torch.allclose(result.feature, feature, rtol=1e-4)


def test_same_seed_same_result_on_pso_path():
    generator = torch.Generator().manual_seed(4)
    weight = torch.randn(6, 8, generator=generator, dtype=torch.float64)
    grad = torch.outer(torch.tensor([0.3, -0.5, 0.1, 0.05, 0.03, 0.02], dtype=torch.float64),
                       torch.rand(8, generator=generator, dtype=torch.float64))
    grad[0, 0] += 0.05  # not a rank-one gradient: no λ is accepted, so every search runs
    first, second = (recover_soft_label(weight, grad, seed=1, bound=6.0) for _ in range(2))
    assert not first.accepted
    assert first.lam == second.lam and torch.equal(first.label, second.label)


def test_a_given_row_is_the_row_read_and_any_row_gives_the_same_label_without_noise(lenet, images):
    """r = argmax |row sum| is the authors' pick; any row of a clean gradient is λ_i h for its own λ_i, so
    the label comes back whichever row is read. A row outside [0, C) is refused by name, before anything
    runs (even on a zero gradient, which returns early)."""
    y = smooth_labels(torch.tensor([3]), 0.2, NUM_CLASSES)
    grads = client_gradients(lenet, images[:1], y)
    chosen = recover_soft_label(lenet.fc, grads[-1])
    other = (chosen.row + 1) % NUM_CLASSES
    given = recover_soft_label(lenet.fc, grads[-1], row=other)
    assert given.row == other and _l1(given, y) < TOLERANCE
    for bad in (NUM_CLASSES, -1, 1.0, True):
        with pytest.raises(ValueError, match="row"):
            recover_soft_label(lenet.fc, grads[-1], row=bad)
        with pytest.raises(ValueError, match="row"):
            recover_soft_label(torch.randn(NUM_CLASSES, 5), torch.zeros(NUM_CLASSES, 5), row=bad)


def test_zero_gradient_returns_prediction():
    weight = torch.randn(NUM_CLASSES, 5)
    prediction = torch.zeros(NUM_CLASSES)
    prediction[6] = 30.0
    result = recover_soft_label(weight, torch.zeros_like(weight), prediction=prediction)
    assert result.method == "zero-gradient" and int(result.label.argmax()) == 6 and float(result.label.sum()) == 1.0
    with pytest.raises(ValueError, match="prediction"):
        recover_soft_label(weight, torch.zeros_like(weight))


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="bias"):
        recover_soft_label(nn.Linear(5, NUM_CLASSES), torch.ones(NUM_CLASSES, 5))
    with pytest.raises(ValueError, match="bias gradient"):
        recover_soft_label(torch.ones(NUM_CLASSES, 5), torch.ones(NUM_CLASSES))
    with pytest.raises(ValueError, match="shape"):
        recover_soft_label(torch.ones(NUM_CLASSES, 5), torch.ones(NUM_CLASSES, 4))
    with pytest.raises(ValueError, match="exclude_top"):
        recover_soft_label(torch.ones(3, 5), torch.ones(3, 5), exclude_top=2)
    with pytest.raises(TypeError):
        recover_soft_label([[1.0]], torch.ones(1, 1))


def test_label_generators():
    y = smooth_labels(torch.tensor([1, 0]), torch.tensor([0.0, 0.5]), 4)
    assert torch.allclose(y, torch.tensor([[0, 1, 0, 0], [0.625, 0.125, 0.125, 0.125]]))
    x, y = mixup(torch.ones(1, 1, 2, 2), torch.tensor([0]), torch.zeros(1, 1, 2, 2), torch.tensor([2]), 0.25,
                 num_classes=3)
    assert torch.allclose(x, torch.full((1, 1, 2, 2), 0.25)) and torch.allclose(y, torch.tensor([[0.25, 0, 0.75]]))
    with pytest.raises(ValueError, match="eps"):
        smooth_labels(torch.tensor([0]), 1.5, 4)
    with pytest.raises(TypeError, match="num_classes"):
        mixup(x, torch.tensor([0]), x, torch.tensor([1]), 0.5)


def test_invert_fcn_recovers_image_from_recovered_feature():
    torch.manual_seed(5)
    model = FCN(NUM_CLASSES, image_shape=(3, 8, 8), widths=(256, 128, 64))
    image = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(6))
    y = smooth_labels(torch.tensor([3]), 0.2, NUM_CLASSES)
    grads = client_gradients(model, image, y)
    result = recover_soft_label(model.fc, grads[-1])
    reconstruction = invert_fcn(model, grads, result.feature, result.label)
    mse = float(((reconstruction - image) ** 2).mean())
    assert reconstruction.shape == image.shape and 10 * math.log10(1 / mse) > 60


def test_invert_fcn_bad_inputs():
    model = FCN(NUM_CLASSES, image_shape=(1, 4, 4), widths=(8,))
    grads = [torch.zeros_like(p) for p in model.parameters()]
    with pytest.raises(TypeError):
        invert_fcn(LeNet(NUM_CLASSES), grads, torch.ones(8), torch.ones(NUM_CLASSES))
    with pytest.raises(ValueError, match="aligned"):
        invert_fcn(model, grads[:1], torch.ones(8), torch.ones(NUM_CLASSES))
    with pytest.raises(ValueError, match="feature"):
        invert_fcn(model, grads, torch.ones(7), torch.ones(NUM_CLASSES))


def test_pso_only_search_recovers_and_leaves_threads_alone(lenet, images):
    """Table 5's setting: PSO without the L-BFGS starts still finds the smoothed label; no global state changes."""
    y = smooth_labels(torch.tensor([6]), 0.2, NUM_CLASSES)
    grads = client_gradients(lenet, images[3:4], y)
    threads = torch.get_num_threads()
    result = recover_soft_label(lenet.fc, grads[-1], search="pso", bound=6.0)
    assert torch.get_num_threads() == threads
    assert result.method == "pso" and result.accepted
    assert _l1(result, y) < TOLERANCE
    with pytest.raises(ValueError, match="search"):
        recover_soft_label(lenet.fc, grads[-1], search="adam")


def test_authors_noise_search_stays_in_their_windows_and_takes_no_bound(lenet, images):
    """``search="pso-noise"`` (the authors' ``pso_noise``, Table 5): windows of x = 4λ up to |x| ≤ 10, every
    window run, no L-BFGS polish, so the λ it returns lies in a window even when the true λ does not."""
    from gitutor.labels.lambda_search import NOISE_WINDOWS, _pso_windows

    inside = lambda lam: any(low <= lam <= high for low, high in NOISE_WINDOWS)  # noqa: E731
    assert max(abs(edge) for window in NOISE_WINDOWS for edge in window) == 2.575
    y = smooth_labels(torch.tensor([6]), 0.2, NUM_CLASSES)
    grads = client_gradients(lenet, images[3:4], y)
    found = recover_soft_label(lenet.fc, grads[-1], search="pso-noise")
    assert found.method == "pso" and inside(found.lam)
    # a clean gradient whose λ lies in the windows: the search finds it to the authors' bar
    exact = recover_soft_label(lenet.fc, grads[-1], search="pso")
    if inside(exact.lam):
        assert abs(found.lam - exact.lam) < 0.25 and _l1(found, y) < 10 * TOLERANCE
    # the class this network predicts (p ≈ 0.84), smoothed with ε = 0.3: |λ| = 1 / max |p_i − y_i|
    # lies beyond the windows; the book's wide search finds it, the authors' answers from inside them
    y = smooth_labels(torch.tensor([2]), 0.3, NUM_CLASSES)
    grads = client_gradients(lenet, images[3:4], y)
    wide = recover_soft_label(lenet.fc, grads[-1], search="pso", bound=20.0)
    far = recover_soft_label(lenet.fc, grads[-1], search="pso-noise")
    assert wide.accepted and abs(wide.lam) > 2.575 and _l1(wide, y) < TOLERANCE
    assert inside(far.lam) and not far.accepted
    assert list(_pso_windows(6.0))[:2] == [(0.7, 6.0), (-6.3, -1.0)]  # the book's windows, for contrast
    with pytest.raises(ValueError, match="bound"):
        recover_soft_label(lenet.fc, grads[-1], search="pso-noise", bound=6.0)


def test_the_ratio_is_read_at_the_authors_entry_by_default_and_by_least_squares_as_an_option(lenet, images):
    """Eq. 4's g / g_r: the authors' code reads it at the entry where the feature λ g_r is largest
    (``_fake_y``); least squares over the row is the option. On an exact gradient both give the label;
    with noise on g_r only (Table 5) they differ, the one entry taking that entry's noise whole."""
    from gitutor.labels import lambda_problem

    y = smooth_labels(torch.tensor([4]), 0.3, NUM_CLASSES)
    grad = client_gradients(lenet, images[1:2], y)[-1]
    entry = recover_soft_label(lenet.fc, grad)
    fitted = recover_soft_label(lenet.fc, grad, ratio="least-squares")
    assert _l1(entry, y) < TOLERANCE and _l1(fitted, y) < TOLERANCE
    problem = lambda_problem(lenet.fc, grad)
    g_r = problem.row_gradient
    top, bottom = int(g_r.argmax()), int(g_r.argmin())
    g = grad.double()
    assert torch.equal(problem.ratios, g[:, top] / g_r[top])  # λ > 0: h = λ g_r largest at g_r's max
    assert torch.equal(problem.negative_ratios, g[:, bottom] / g_r[bottom])  # λ < 0: at g_r's min
    lam = torch.tensor([-2.0, 2.0], dtype=torch.float64)
    ratios = problem.ratios.expand(2, -1).clone()
    ratios[0] = problem.negative_ratios
    assert torch.allclose(problem.labels(lam), torch.softmax(lam[:, None] * problem.logit_direction, -1) - ratios / lam[:, None])
    noisy = grad.clone()
    noisy[problem.row] += 0.05 * torch.randn(grad.shape[1], generator=torch.Generator().manual_seed(0))
    a = lambda_problem(lenet.fc, noisy, row=problem.row)
    b = lambda_problem(lenet.fc, noisy, row=problem.row, ratio="least-squares")
    assert not torch.allclose(a.ratios, b.ratios)
    for bad in ("mean", None):
        with pytest.raises(ValueError, match="ratio"):
            recover_soft_label(lenet.fc, grad, ratio=bad)
        with pytest.raises(ValueError, match="ratio"):
            lambda_problem(lenet.fc, grad, ratio=bad)


def test_the_pso_search_leaves_logging_alone_and_writes_no_report_log(lenet, images, tmp_path, monkeypatch):
    """pyswarms' Reporter reconfigures the root logger and opens ./report.log on every optimiser; the λ
    search keeps the caller's logging as it was and writes nothing into the working folder."""
    import logging
    import logging.config

    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure = logging.config.dictConfig
    y = smooth_labels(torch.tensor([6]), 0.2, NUM_CLASSES)
    grads = client_gradients(lenet, images[3:4], y)
    recover_soft_label(lenet.fc, grads[-1], search="pso-noise")
    assert root.handlers == handlers and root.level == level
    assert logging.config.dictConfig is configure  # restored
    assert not (tmp_path / "report.log").exists()
