import pytest
import torch

from gitutor.federated import add_gaussian_noise, client_gradients, cross_entropy, prune_gradients, sign_compress
from gitutor.seeding import make_generator


def test_client_gradients_match_autograd_and_soft_labels(tiny_lenet):
    x = torch.rand(3, 1, 12, 12, generator=make_generator(0))
    y = torch.tensor([1, 4, 4])
    grads = client_gradients(tiny_lenet, x, y)
    assert [g.shape for g in grads] == [p.shape for p in tiny_lenet.parameters()]
    loss = torch.nn.functional.cross_entropy(tiny_lenet(x), y)
    expected = torch.autograd.grad(loss, list(tiny_lenet.parameters()))
    assert all(torch.allclose(g, e) for g, e in zip(grads, expected))
    one_hot = torch.nn.functional.one_hot(y, 10).float()
    soft = client_gradients(tiny_lenet, x, one_hot)
    assert all(torch.allclose(g, s, atol=1e-6) for g, s in zip(grads, soft))
    assert all(p.grad is None for p in tiny_lenet.parameters())


def test_client_gradients_errors(tiny_lenet):
    x = torch.rand(2, 1, 12, 12)
    with pytest.raises(ValueError, match="batch size mismatch"):
        client_gradients(tiny_lenet, x, torch.tensor([1]))
    with pytest.raises(TypeError, match="int64"):
        client_gradients(tiny_lenet, x, torch.tensor([1, 2], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"\(B, 10\)"):
        client_gradients(tiny_lenet, x, torch.rand(2, 7))
    with pytest.raises(ValueError, match="NaN"):
        client_gradients(tiny_lenet, torch.full_like(x, float("nan")), torch.tensor([1, 2]))


def test_cross_entropy_soft_label_value():
    logits = torch.tensor([[2.0, 0.0]])
    y = torch.tensor([[0.25, 0.75]])
    log_p = torch.log_softmax(logits, dim=1)
    assert torch.isclose(cross_entropy(logits, y), -(y * log_p).sum())


def test_prune_gradients_sparsity_keeps_largest():
    g = [torch.arange(1.0, 101.0).view(10, 10) * torch.tensor([1.0, -1.0]).repeat(5)]
    pruned = prune_gradients(g, 0.7)[0]
    assert int((pruned == 0).sum()) == 70
    assert torch.equal(pruned[pruned != 0].abs().sort().values, torch.arange(71.0, 101.0))
    assert torch.equal(g[0].abs().sort().values.flatten()[:3], torch.tensor([1.0, 2.0, 3.0]))  # input unchanged
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        prune_gradients(g, 1.0)


def test_sign_compress_and_noise_statistics():
    g = [torch.tensor([-2.0, 0.0, 3.0]), torch.zeros(200, 200)]
    assert torch.equal(sign_compress(g)[0], torch.tensor([-1.0, 0.0, 1.0]))
    noisy = add_gaussian_noise(g, 0.1, make_generator(0))
    assert abs(float(noisy[1].std()) - 0.1) < 0.003 and abs(float(noisy[1].mean())) < 0.003
    again = add_gaussian_noise(g, 0.1, make_generator(0))
    assert all(torch.equal(a, b) for a, b in zip(noisy, again))
    with pytest.raises(ValueError, match="sigma"):
        add_gaussian_noise(g, -1.0)
    with pytest.raises(TypeError, match="list of tensors"):
        sign_compress(torch.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        sign_compress([torch.tensor([float("nan")])])


def test_client_gradients_leave_batchnorm_statistics_alone():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 5)).train()
    before = [b.clone() for b in model.buffers()]
    x = torch.rand(2, 3, 8, 8, requires_grad=True)
    grads = client_gradients(model, x, torch.tensor([0, 1]), create_graph=True)
    assert all(torch.equal(a, b) for a, b in zip(before, model.buffers()))
    sum(g.pow(2).sum() for g in grads).backward()  # the attacks' second derivative still works
    assert x.grad is not None and torch.isfinite(x.grad).all()
