import pytest
import torch

from gitutor.data import OfflineDataError
from gitutor.models import LeNet, init_uniform_, resnet18, resnet34
from gitutor.seeding import make_generator


def test_lenet_matches_dlg_architecture():
    model = LeNet()
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.stride[0] for c in convs] == [2, 2, 1]
    assert all(c.out_channels == 12 and c.kernel_size == (5, 5) and c.padding == (2, 2) for c in convs)
    assert model.fc.in_features == 768 and model.fc.out_features == 100
    assert any(isinstance(m, torch.nn.Sigmoid) for m in model.modules())
    assert model(torch.rand(2, 3, 32, 32)).shape == (2, 100)


def test_lenet_options_and_errors():
    assert LeNet(num_classes=10, in_channels=1, image_size=28).fc.in_features == 12 * 7 * 7
    assert LeNet(fc_bias=False).fc.bias is None
    with pytest.raises(ValueError, match="activation"):
        LeNet(activation="gelu")
    with pytest.raises(ValueError, match="32×32"):
        LeNet()(torch.rand(1, 3, 28, 28))


def test_init_uniform_range_and_determinism():
    a = init_uniform_(LeNet(), 0.5, make_generator(1))
    b = init_uniform_(LeNet(), 0.5, make_generator(1))
    values = torch.cat([p.flatten() for p in a.parameters()])
    assert values.min() >= -0.5 and values.max() <= 0.5 and values.std() > 0.25
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    with pytest.raises(ValueError):
        init_uniform_(LeNet(), 0)


def test_resnets():
    assert resnet18(10, fc_bias=False).fc.bias is None
    assert resnet18(10)(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    assert resnet34(num_classes=7).fc.out_features == 7
    with pytest.raises(ValueError, match="1000"):
        resnet34(num_classes=10, pretrained=True)


def test_resnet34_pretrained_fails_fast_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    import torchvision.models._api as api

    def offline(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(api, "load_state_dict_from_url", offline)
    with pytest.raises(OfflineDataError, match="PRETRAINED=False"):
        resnet34(pretrained=True)


def test_introspection_helpers_find_the_last_linear_layer():
    from gitutor.models import fc_weight_index, imagenet_resnet34, last_linear

    model = LeNet(num_classes=10, in_channels=1, image_size=12)
    assert last_linear(model) is model.fc
    assert list(model.parameters())[fc_weight_index(model)] is model.fc.weight
    sequential = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    assert last_linear(sequential) is sequential[3] and fc_weight_index(sequential) == 2
    with pytest.raises(ValueError, match="no nn.Linear"):
        last_linear(torch.nn.Sequential(torch.nn.ReLU()))
    with pytest.raises(TypeError, match="model"):
        last_linear("resnet")
    state = torch.get_rng_state()
    a, b = imagenet_resnet34(10, seed=3), imagenet_resnet34(10, seed=3)
    assert torch.equal(torch.get_rng_state(), state)  # the global generator is left alone
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert last_linear(a) is a[1].fc and a.eval()(torch.rand(1, 3, 32, 32)).shape == (1, 10)
