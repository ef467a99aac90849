"""Chapter 02 on the ImageNet-trained network (gitutor.chapters.idlg_soft_labels.imagenet) and the λ search with a
last-layer bias (gitutor.labels.recover_soft_label's ``fc_bias``): Wang, Liang & He, ICLR 2024, Table 1."""
import pytest
import torch
from torch import nn

from gitutor.chapters.idlg_soft_labels import imagenet as study
from gitutor.federated import client_gradients, mixup, smooth_labels
from gitutor.labels import lambda_problem, recover_soft_label
from gitutor.results import verdict

C = 10


def _biased_cnn(seed=0):
    """A small trained-looking classifier whose last layer has a bias (as EfficientNet-Lite0's)."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                          nn.Linear(32, 24), nn.ReLU(), nn.Linear(24, C))
    with torch.no_grad():
        model[-1].weight.mul_(4.0)
        model[-1].bias.copy_(torch.linspace(-2, 2, C))
    return model.eval()


def _images(n=6, seed=1):
    return torch.rand(n, 3, 8, 8, generator=torch.Generator().manual_seed(seed))


def test_last_layer_gradient_is_the_clients_gradient():
    model, x = _biased_cnn(), _images(1)
    y = smooth_labels(torch.tensor([3]), 0.3, C)
    want = client_gradients(model, x, y)[-2]  # the last Linear's weight (its bias comes last)
    features = nn.Sequential(*model[:-1])(x).detach()
    assert torch.allclose(study.last_layer_gradient(model[-1], features, y), want, atol=1e-6)
    with pytest.raises(ValueError, match="entries"):
        study.last_layer_gradient(model[-1], features[:, :5], y)


def test_bias_in_the_logits_recovers_smoothed_and_mixup_labels():
    model, x = _biased_cnn(), _images(2)
    fc, body = model[-1], nn.Sequential(*model[:-1])
    cases = [(x[:1], smooth_labels(torch.tensor([2]), 0.4, C), 1),
             (*mixup(x[:1], torch.tensor([2]), x[1:], torch.tensor([7]), 0.35, num_classes=C), 2)]
    for image, y, top in cases:
        grad = study.last_layer_gradient(fc, body(image).detach(), y)
        result = recover_soft_label(fc.weight, grad, fc_bias=fc.bias, exclude_top=top)
        assert result.accepted and (result.label - y[0].double()).abs().sum() < 1e-3
        assert torch.allclose(result.feature.float(), body(image)[0].detach(), rtol=1e-3, atol=1e-5)
    with pytest.raises(ValueError, match="fc_bias"):
        recover_soft_label(fc, grad)  # an nn.Linear with a bias names the fix
    with pytest.raises(ValueError, match="shape"):
        recover_soft_label(fc.weight, grad, fc_bias=torch.zeros(C + 1))


def test_top_k_loss_equals_the_sorted_variance():
    weight, grad = torch.randn(C, 16), torch.randn(C, 16)
    for top in (1, 2):
        problem = lambda_problem(weight, grad, exclude_top=top, fc_bias=torch.randn(C))
        lam = torch.linspace(-9, 9, 101, dtype=torch.float64)
        rest = torch.sort(problem.labels(lam), dim=-1, descending=True).values[..., top:]
        assert torch.allclose(problem.loss(lam), 1000 * rest.var(dim=-1, unbiased=False), rtol=1e-9, atol=1e-15)


def test_imagenet_label_recovery_on_a_small_biased_network():
    model, images = _biased_cnn(), _images(6)
    labels = torch.tensor([1, 1, 4, 6, 6, 9])
    run = study.imagenet_label_recovery(model, images, labels, ("smoothing", "mixup", "one-hot"),
                                        torch.Generator().manual_seed(0))
    for key in ("errors", "lam_errors", "methods", "seconds"):
        assert all(len(values) == 6 for values in run[key].values())
    assert max(max(v) for v in run["errors"].values()) < 1e-3
    assert max(max(v) for v in run["lam_errors"].values()) < 1e-2
    assert len(run["idlg"]) == len(run["top1"]) == 6
    barred = study.imagenet_label_recovery(model, images, labels, ("smoothing", "mixup", "one-hot"),
                                           torch.Generator().manual_seed(0), progress=True)
    assert barred["errors"] == run["errors"] and barred["lam_stars"] == run["lam_stars"]  # same draws
    table, _, _ = study.summary(run, 1e-3)
    assert all(accuracy == 100.0 for accuracy, _ in table.values())
    rows = study.imagenet_rows(run, 1e-3)
    assert [verdict(row) for row in rows if "Table 1" in row["quantity"]] and all(verdict(r) for r in rows)
    merged = study.insert_rows([{"quantity": "headline"}, {"quantity": "label accuracy (Table 2)"},
                                {"quantity": "FCN"}], rows)
    assert merged[2:2 + len(rows)] == rows and merged[-1]["quantity"] == "FCN"


def test_mixup_partner_is_the_next_photograph_of_another_class():
    labels = torch.tensor([5, 5, 3, 5])
    assert [study.mixup_partner(labels, i) for i in range(4)] == [2, 2, 3, 2]
    with pytest.raises(ValueError, match="two classes"):
        study.mixup_partner(torch.tensor([1, 1]), 0)
    with pytest.raises(ValueError, match="unknown label kinds"):
        study.imagenet_label_recovery(_biased_cnn(), _images(2), labels[:2], ("hard",), torch.Generator())


def test_efficientnet_last_layer_gradient_matches_autograd():
    from gitutor.data import load
    from gitutor.models import fc_input_features, last_linear, pretrained

    model = pretrained("efficientnet_lite0")
    images, labels = load("imagenet")
    x, y = images[:1], smooth_labels(labels[:1], 0.2, 1000)
    fc = last_linear(model)
    want = dict(zip([n for n, _ in model.named_parameters()], client_gradients(model, x, y)))
    got = study.last_layer_gradient(fc, fc_input_features(model, x), y)
    reference = want["network.classifier.weight"]
    assert torch.allclose(got, reference, atol=1e-5 * float(reference.abs().max()))


def test_worst_label_is_the_largest_label_error_with_its_gap_and_acceptance():
    run = {"errors": {"smoothing": [1e-6, 2e-3], "mixup": [1e-5]}, "lam_errors": {"smoothing": [0.0, 0.01],
           "mixup": [0.0]}, "lam_stars": {"smoothing": [2.0, -50.0], "mixup": [3.0]},
           "accepted": {"smoothing": [True, False], "mixup": [True]}}
    worst = study.worst_label(run)
    assert (worst["kind"], worst["index"], worst["error"], worst["gap"]) == ("smoothing", 1, 2e-3, 0.01)
    assert worst["relative"] == pytest.approx(0.01 / 50) and worst["accepted"] is False
    run["errors"]["mixup"][0] = 1.0
    assert study.worst_label(run)["kind"] == "mixup" and study.worst_label(run)["accepted"] is True
    with pytest.raises(ValueError, match="no ImageNet label"):
        study.worst_label({"errors": {"smoothing": []}})


def test_labels_needed_is_the_fewest_all_right_labels_that_meet_the_paper():
    from gitutor.stats import success_interval

    n = study.labels_needed(100.0)
    assert success_interval([True] * n).low >= 0.95 > success_interval([True] * (n - 1)).low
    assert study.labels_needed(99.7) <= n
