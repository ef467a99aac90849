"""Threat-model cases and the one buffer-preserving context manager, with BatchNorm in training mode."""
import functools

import pytest
import torch

from gitutor.attacks.lti import make_gradient_dataset
from gitutor.federated import (Case, batchnorm_statistics, client_gradients, defended_clients_case, fedadmm_case,
                               gradient_case, last_layer_case, observed_gradient, paper_defenses,
                               per_example_gradients, pseudo_gradient)
from gitutor.labels import FeatureCV
from gitutor.models import fc_input_features, last_linear, preserved_buffers
from gitutor.seeding import make_generator


def _bn_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5)).train()


def _batch(n=3):
    return torch.rand(n, 1, 8, 8, generator=make_generator(1)), torch.tensor([0, 4, 2, 1, 3][:n])


def _snapshot(model):
    return {name: buffer.clone() for name, buffer in model.named_buffers()}


def _unchanged(model, before):
    return all(torch.equal(buffer, before[name]) for name, buffer in model.named_buffers())


def test_preserved_buffers_restores_running_statistics_and_keeps_graphs_valid():
    model, (x, y) = _bn_model(), _batch()
    before = _snapshot(model)
    x = x.requires_grad_(True)
    with preserved_buffers(model):
        loss = model(x).logsumexp(1).sum()
        assert not _unchanged(model, before)  # training mode did move the statistics inside the block
    assert _unchanged(model, before)
    loss.backward()
    assert torch.isfinite(x.grad).all()
    model.eval()
    model[1].train()  # a BatchNorm layer left in training mode inside an evaluation-mode model still updates
    with preserved_buffers(model):
        model(x)
    assert _unchanged(model, before)
    with pytest.raises(TypeError, match="model"):
        with preserved_buffers("not a model"):
            pass


@pytest.mark.parametrize("path", ["client_gradients", "per_example_gradients", "observed_gradient", "fc_input_features",
                                  "batchnorm_statistics", "gradient_case", "defended_clients_case", "fedadmm_case",
                                  "make_gradient_dataset"])
def test_every_client_path_leaves_batchnorm_buffers_alone_in_training_mode(path):
    model, (x, y) = _bn_model(), _batch()
    before = _snapshot(model)
    params = [p.detach().clone() for p in model.parameters()]
    calls = {
        "client_gradients": lambda: client_gradients(model, x, y),
        "per_example_gradients": lambda: list(per_example_gradients(model, x, y)),
        "observed_gradient": lambda: observed_gradient(model, x, y, paper_defenses()["sign"]),
        "fc_input_features": lambda: fc_input_features(model, x),
        "batchnorm_statistics": lambda: batchnorm_statistics(model, x),
        "gradient_case": lambda: gradient_case(model, x, y, share_bn_statistics=True),
        "defended_clients_case": lambda: defended_clients_case(model, x, y, None),
        "fedadmm_case": lambda: fedadmm_case(model, x, y, global_params=params, dual=[torch.zeros_like(p) for p in params],
                                             rho=0.01, lr=0.1, local_steps=2),
        "make_gradient_dataset": lambda: make_gradient_dataset(model, x, y, None, 1),
    }
    calls[path]()
    assert model.training and _unchanged(model, before)


def test_gradient_case_separates_client_and_server():
    model, (x, y) = _bn_model(), _batch()
    case = gradient_case(model, x, y, share_bn_statistics=True)
    assert isinstance(case, Case) and case.public["batch_size"] == 3
    view = case.server_view
    assert view["labels"] is None and "inputs" not in view  # the private batch never reaches the attack
    assert all(torch.equal(a, b) for a, b in zip(view["update"], client_gradients(model, x, y)))
    mean, var = view["bn_statistics"][0]
    conv = model[0](x).detach()
    assert torch.allclose(mean, conv.mean(dim=(0, 2, 3)), atol=1e-6)
    assert torch.allclose(var, conv.var(dim=(0, 2, 3), unbiased=False), atol=1e-6)
    known = gradient_case(model, x, y, labels_known=True, defense=paper_defenses()["prune"])
    assert torch.equal(known.server_view["labels"], y) and known.server_view["defense"].name == "prune"
    assert (known.update[0] == 0).float().mean() >= 0.95  # 99 % of each tensor pruned (rounded down)
    with pytest.raises(AttributeError):
        case.update = []  # a case is frozen


def test_last_layer_case_is_the_fc_part_of_the_whole_gradient_in_eval_mode():
    model, (x, y) = _bn_model().eval(), _batch()
    fc = last_linear(model)
    case = last_layer_case(fc, fc_input_features(model, x), y)
    whole = client_gradients(model, x, y)
    assert torch.allclose(case.update[0], whole[-2], atol=1e-6) and torch.allclose(case.update[1], whole[-1], atol=1e-6)
    with pytest.raises(TypeError, match="fc"):
        last_layer_case(model, x, y)


def test_fedadmm_case_exposes_what_the_server_knows():
    model, (x, y) = _bn_model(), _batch(2)
    z = [p.detach().clone() for p in model.parameters()]
    case = fedadmm_case(model, x, y, global_params=z, dual=[torch.zeros_like(p) for p in z], rho=0.01, lr=0.1,
                        local_steps=1)
    assert {"rho", "lr", "local_steps", "global_params", "dual", "pseudo_gradient"} <= set(case.server_view)
    for got, expected in zip(case.server_view["pseudo_gradient"], pseudo_gradient(case.update, 0.1)):
        assert torch.equal(got, expected)


def test_defended_clients_case_averages_per_example_defended_gradients():
    model, (x, y) = _bn_model().eval(), _batch()
    sign = paper_defenses()["sign"]
    case = defended_clients_case(model, x, y, sign)
    per_example = [[g.sign() for g in client_gradients(model, x[i:i + 1], y[i:i + 1])] for i in range(3)]
    assert all(torch.allclose(u, torch.stack(layer).mean(0)) for u, layer in zip(case.update, zip(*per_example)))
    assert case.server_view["defense"] is sign and case.server_view["labels"] is None


def test_feature_cv_fit_through_a_training_mode_model_keeps_it():
    model, (x, _) = _bn_model(), _batch()
    before = _snapshot(model)
    FeatureCV.fit(functools.partial(fc_input_features, model), x, top_m=2)
    assert _unchanged(model, before)
