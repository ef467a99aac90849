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


def test_labels_out_of_range_and_nan_soft_labels_are_rejected(tiny_lenet):
    x = torch.rand(2, 1, 12, 12)
    with pytest.raises(ValueError, match=r"labels y must lie in \[0, 10\)"):
        client_gradients(tiny_lenet, x, torch.tensor([-100, 1]))  # cross-entropy's ignore_index, silently skipped
    with pytest.raises(ValueError, match=r"labels y must lie in \[0, 10\)"):
        client_gradients(tiny_lenet, x, torch.tensor([3, 10]))
    soft = torch.full((2, 10), 0.1)
    soft[0, 0] = float("nan")
    with pytest.raises(ValueError, match="soft labels y contain NaN"):
        client_gradients(tiny_lenet, x, soft)
    with pytest.raises(TypeError, match="x must be a float"):
        client_gradients(tiny_lenet, (x * 255).long(), torch.tensor([1, 2]))


def test_frozen_parameters_are_named(tiny_lenet):
    import copy

    frozen = copy.deepcopy(tiny_lenet)
    first = next(frozen.named_parameters())
    first[1].requires_grad_(False)
    with pytest.raises(ValueError, match=f"{first[0]}.*frozen"):
        client_gradients(frozen, torch.rand(1, 1, 12, 12), torch.tensor([0]))


def test_defenses_reject_integer_gradients_and_bad_strengths():
    with pytest.raises(TypeError, match="float"):
        sign_compress([torch.tensor([1, -2, 3])])
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="sigma"):
            add_gaussian_noise([torch.zeros(3)], bad)
    with pytest.raises(ValueError, match="rate"):
        prune_gradients([torch.zeros(3)], float("nan"))


def test_defense_type_carries_name_function_and_matching_term():
    from gitutor.federated import MATCHING_TERMS, Defense, apply_defense, paper_defenses

    defenses = paper_defenses(prune_rate=0.5, sigma=0.0)
    assert [d.name for d in defenses.values()] == list(defenses) == ["none", "sign", "prune", "gauss"]
    assert {d.matching for d in defenses.values()} <= set(MATCHING_TERMS)
    assert defenses["sign"].matching == "sign" and defenses["prune"].matching == "masked_cosine"
    grads = [torch.tensor([-2.0, 0.5, 3.0, -0.1])]
    assert torch.equal(defenses["sign"](grads)[0], torch.tensor([-1.0, 1.0, 1.0, -1.0]))
    assert torch.equal(apply_defense(defenses["prune"], grads)[0], torch.tensor([-2.0, 0.0, 3.0, 0.0]))
    assert torch.equal(defenses["none"](grads)[0], grads[0]) and torch.equal(defenses["gauss"](grads)[0], grads[0])
    with pytest.raises(ValueError, match="matching"):
        Defense("mine", sign_compress, "l2")
    with pytest.raises(TypeError, match="apply"):
        Defense("mine", "not callable")
    with pytest.raises(ValueError, match="prune_rate"):
        paper_defenses(prune_rate=1.5)


def test_parameter_lists_must_be_finite_floats(tiny_lenet):
    from gitutor.federated.client import check_parameter_list

    grads = [torch.zeros_like(p) for p in tiny_lenet.parameters()]
    assert len(check_parameter_list(tiny_lenet, grads, "grads")) == len(grads)
    with pytest.raises(TypeError, match="grads entry for parameter .* float"):
        check_parameter_list(tiny_lenet, [g.int() for g in grads], "grads")
    grads[1] = grads[1] + float("inf")
    with pytest.raises(ValueError, match="grads entry for parameter .* NaN or inf"):
        check_parameter_list(tiny_lenet, grads, "grads")
