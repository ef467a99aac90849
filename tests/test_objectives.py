import pytest
import torch

from gitutor.attacks.objectives import (check_input_shape, check_target_gradients, cosine_gradient_distance,
                                        gradient_l2_distance, total_variation)


def test_gradient_l2_distance_value():
    a = [torch.tensor([1.0, 2.0]), torch.tensor([[0.0]])]
    b = [torch.tensor([0.0, 0.0]), torch.tensor([[3.0]])]
    assert float(gradient_l2_distance(a, b)) == pytest.approx(1 + 4 + 9)


def test_cosine_distance_scale_invariance_indices_and_masks():
    a = [torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])]
    assert float(cosine_gradient_distance(a, [2 * t for t in a])) == pytest.approx(0.0, abs=1e-6)
    assert float(cosine_gradient_distance(a, [-t for t in a])) == pytest.approx(2.0)
    b = [torch.tensor([1.0, 0.0]), torch.tensor([1.0, 0.0])]
    assert float(cosine_gradient_distance(a, b, indices=[0])) == pytest.approx(0.0, abs=1e-6)
    assert float(cosine_gradient_distance(a, b)) == pytest.approx(1 - 1 / 2)
    masks = [torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0])]
    assert float(cosine_gradient_distance(a, b, masks=masks)) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="masks"):
        cosine_gradient_distance(a, b, masks=masks[:1])
    with pytest.raises(ValueError, match="no gradient"):
        cosine_gradient_distance(a, b, indices=[])


def test_total_variation_known_values():
    x = torch.zeros(1, 1, 3, 3)
    x[..., :, 2] = 1.0  # one vertical edge: 3 horizontal jumps of 1 among 6 pairs
    assert float(total_variation(x)) == pytest.approx(3 / 6)
    assert float(total_variation(x, beta=2.0)) == pytest.approx(3 / 9)  # every pixel, Neumann boundary
    assert float(total_variation(torch.ones(2, 3, 4, 4))) == 0.0
    with pytest.raises(ValueError):
        total_variation(torch.zeros(3, 3))


def test_check_target_gradients_names_the_parameter(tiny_lenet):
    grads = [torch.zeros_like(p) for p in tiny_lenet.parameters()]
    assert len(check_target_gradients(tiny_lenet, grads)) == len(grads)
    with pytest.raises(ValueError, match="model has"):
        check_target_gradients(tiny_lenet, grads[:-1])
    bad = list(grads)
    bad[-1] = torch.zeros(3)
    with pytest.raises(ValueError, match="fc.bias"):
        check_target_gradients(tiny_lenet, bad)
    bad[-1] = torch.full_like(grads[-1], float("nan"))
    with pytest.raises(ValueError, match="NaN"):
        check_target_gradients(tiny_lenet, bad)
    with pytest.raises(ValueError, match="input_shape"):
        check_input_shape((1, 3, 32))
