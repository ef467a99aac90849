"""The one image-optimisation loop (gitutor.attacks.loop) and the input checks of the attacks built on it."""
from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from gitutor.attacks import (defended_inverting_gradients, gradinversion, inverting_gradients,
                             stepwise_inversion)
from gitutor.attacks.loop import check_hyperparameter, optimise_images, step_schedule
from gitutor.attacks.objectives import CosineToTarget, cosine_gradient_distance
from gitutor.federated import client_gradients


def quadratic(target: torch.Tensor):
    """Objective ||x − target||² with its per-iteration terms."""
    def objective(x, t):
        loss = (x - target).pow(2).sum()
        return {"loss": loss, "half": loss / 2}
    return objective


def test_signed_adam_reaches_the_target_and_records_one_entry_per_iteration():
    target = torch.full((1, 1, 2, 2), 0.25)
    result = optimise_images(quadratic(target), torch.zeros(1, 1, 2, 2), iterations=60, lr=0.05, record_every=20,
                             lr_schedule=step_schedule([30, 45], 0.5))
    assert torch.allclose(result.images, target, atol=0.03)
    assert result.history["iteration"] == list(range(60))
    assert set(result.history) == {"iteration", "lr", "loss", "half"}
    assert all(len(v) == 60 for v in result.history.values())
    assert result.history["lr"][29] == pytest.approx(0.05) and result.history["lr"][30] == pytest.approx(0.025)
    assert result.history["lr"][59] == pytest.approx(0.0125)
    assert result.history["half"][0] == pytest.approx(result.history["loss"][0] / 2)
    assert [t for t, _ in result.snapshots] == [0, 20, 40, 60]
    json.dumps(result.history), json.dumps(result.info)


def test_box_clamps_and_grad_entry_replaces_autograd():
    def push_up(x, t):  # a gradient of −1 everywhere: the step rule moves x up, the box stops it at 1
        return {"loss": x.sum().detach(), "grad": -torch.ones_like(x)}
    result = optimise_images(push_up, torch.full((1, 1, 2, 2), 0.5), iterations=30, lr=0.1, record_every=30)
    assert torch.equal(result.images, torch.ones(1, 1, 2, 2))
    unboxed = optimise_images(push_up, torch.full((1, 1, 2, 2), 0.5), iterations=30, lr=0.1, box=None)
    assert unboxed.images.min() > 1.5


def test_non_finite_loss_stops_with_the_last_finite_iterate():
    def blows_up(x, t):
        return {"loss": x.sum() * (float("nan") if t == 3 else 1.0)}
    result = optimise_images(blows_up, torch.full((1, 1, 2, 2), 0.5), iterations=10, lr=0.1)
    assert result.info == {"stopped_early": "non-finite loss at iteration 3"}
    assert torch.isfinite(result.images).all() and len(result.history["loss"]) == 3


def test_lbfgs_rule_optimises_extra_variables_and_stops_at_its_fixed_point():
    target, shift = torch.full((1, 1, 2, 2), 0.25), torch.zeros(3, requires_grad=True)

    def objective(x, t):  # x and the extra variable both move to their minimisers
        return {"loss": (x - target).pow(2).sum() + (shift - 1).pow(2).sum()}
    result = optimise_images(objective, torch.zeros(1, 1, 2, 2), iterations=30, lr=1.0, step_rule="lbfgs",
                             signed=False, box=None, record_every=5)
    assert torch.allclose(result.images, target) and torch.allclose(shift.detach(), torch.ones(3)) is False
    joint = optimise_images(objective, torch.zeros(1, 1, 2, 2), iterations=30, lr=1.0, step_rule="lbfgs",
                            signed=False, box=None, record_every=5, extra_variables=(shift,))
    assert torch.allclose(joint.images, target) and torch.allclose(shift.detach(), torch.ones(3))
    assert 1 <= joint.info["converged_at"] < 30 and len(joint.history["loss"]) == 30
    fixed = joint.info["converged_at"]  # a snapshot of the fixed point at its step, then the period's
    assert [t for t, _ in joint.snapshots] == sorted({0, fixed, 5, 10, 15, 20, 25, 30})
    assert all(torch.equal(images, joint.images) for t, images in joint.snapshots if t >= fixed)
    assert joint.history["iteration"] == list(range(30))


def test_lbfgs_non_finite_loss_inside_a_step_restores_every_variable():
    logits = torch.zeros(2, requires_grad=True)

    def objective(x, t):  # finite at the start, NaN once x has moved (inside L-BFGS's inner evaluations)
        loss = (x - 1).pow(2).sum() + logits.pow(2).sum()
        return {"loss": loss if t == 0 and x.detach().abs().max() == 0 else loss * float("nan")}
    result = optimise_images(objective, torch.zeros(1, 1, 2, 2), iterations=5, lr=0.5, step_rule="lbfgs",
                             signed=False, box=None, extra_variables=(logits,))
    assert result.info == {"stopped_early": "non-finite loss at iteration 0"}
    assert torch.equal(result.images, torch.zeros(1, 1, 2, 2)) and torch.equal(logits.detach(), torch.zeros(2))
    assert result.history == {}


@pytest.mark.parametrize("value, error", [(float("nan"), ValueError), (float("inf"), ValueError), (-0.1, ValueError),
                                          ("0.1", TypeError), (True, TypeError)])
def test_check_hyperparameter_rejects_and_names(value, error):
    with pytest.raises(error, match="tv_weight"):
        check_hyperparameter(value, "tv_weight")
    assert check_hyperparameter(0, "tv_weight") == 0.0
    with pytest.raises(ValueError, match="lr"):
        check_hyperparameter(0, "lr", positive=True)


def test_loop_rejects_bad_settings():
    objective = quadratic(torch.zeros(1, 1, 2, 2))
    with pytest.raises(ValueError, match="iterations"):
        optimise_images(objective, torch.zeros(1, 1, 2, 2), iterations=0, lr=0.1)
    with pytest.raises(ValueError, match="record_every"):
        optimise_images(objective, torch.zeros(1, 1, 2, 2), iterations=1, lr=0.1, record_every=0)
    with pytest.raises(ValueError, match="lr"):
        optimise_images(objective, torch.zeros(1, 1, 2, 2), iterations=1, lr=float("nan"))
    with pytest.raises(ValueError, match="x0"):
        optimise_images(objective, torch.full((1, 1, 2, 2), float("inf")), iterations=1, lr=0.1)
    with pytest.raises(ValueError, match="loss"):
        optimise_images(lambda x, t: {"distance": x.sum()}, torch.zeros(1, 1, 2, 2), iterations=1, lr=0.1)
    with pytest.raises(ValueError, match="step_rule"):
        optimise_images(objective, torch.zeros(1, 1, 2, 2), iterations=1, lr=0.1, step_rule="sgd")
    with pytest.raises(ValueError, match="signed=False"):
        optimise_images(objective, torch.zeros(1, 1, 2, 2), iterations=1, lr=0.1, step_rule="lbfgs")
    with pytest.raises(ValueError, match="extra_variables"):
        optimise_images(objective, torch.zeros(1, 1, 2, 2), iterations=1, lr=0.1, extra_variables=(torch.zeros(2),))
    with pytest.raises(ValueError, match="extra_variables"):
        optimise_images(lambda x, t: {"loss": x.sum(), "grad": torch.ones_like(x)}, torch.zeros(1, 1, 2, 2),
                        iterations=1, lr=0.1, extra_variables=(torch.zeros(2, requires_grad=True),))


# --- the fused cosine distance -----------------------------------------------------------------------

def test_cosine_to_target_matches_the_reference_values_and_gradients():
    generator = torch.Generator().manual_seed(0)
    shapes = [(3, 4), (5,), (2, 2, 2)]
    target = [torch.randn(s, generator=generator, dtype=torch.float64) for s in shapes]
    candidate = [torch.randn(s, generator=generator, dtype=torch.float64, requires_grad=True) for s in shapes]
    masks = [(torch.rand(s, generator=generator) > 0.3).double() for s in shapes[1:]]
    fused = CosineToTarget(target)
    for start, m in ((0, None), (1, None), (1, masks)):
        ours = fused(candidate[start:], start, m)
        reference = cosine_gradient_distance(candidate[start:], target[start:], masks=m)
        assert ours.item() == pytest.approx(reference.item(), abs=1e-12)
        for a, b in zip(torch.autograd.grad(ours, candidate[start:]), torch.autograd.grad(reference, candidate[start:])):
            assert torch.allclose(a, b, atol=1e-12)
    assert torch.autograd.gradcheck(lambda *c: fused(list(c), 1, masks), tuple(candidate[1:]))
    with pytest.raises(ValueError, match="length"):
        fused(candidate[:2])


# --- the attacks built on the loop: validation and JSON-able info --------------------------------------

@pytest.fixture()
def case():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 6 * 6, 3)).eval()
    x, y = torch.rand(2, 3, 6, 6), torch.tensor([0, 2])
    return model, x, y, client_gradients(model, x, y)


ATTACKS = {
    "inverting_gradients": lambda m, g, y, s, **k: inverting_gradients(m, g, y, s, **{"tv_weight": 0.01, **k}),
    "gradinversion": gradinversion,
    "stepwise_inversion": stepwise_inversion,
    "defended_inverting_gradients": lambda m, g, y, s, **k: defended_inverting_gradients(
        m, g, y, s, "prune", **{"tv_weight": 0.01, **k}),
}


@pytest.mark.parametrize("name", ATTACKS)
def test_every_attack_returns_json_able_info_and_history(case, name):
    model, x, y, grads = case
    result = ATTACKS[name](model, grads, y, tuple(x.shape), iterations=3, record_every=1)
    json.dumps(result.info), json.dumps(result.history)
    assert len(result.history["loss"]) == 3 and all(math.isfinite(v) for v in result.history["loss"])
    assert result.images.shape == x.shape and result.images.min() >= 0 and result.images.max() <= 1


@pytest.mark.parametrize("name", ATTACKS)
@pytest.mark.parametrize("argument", ["tv_weight", "lr", "bn_weight"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_bad_hyper_parameters_raise_naming_the_argument(case, name, argument, value):
    model, x, y, grads = case
    if argument == "bn_weight" and name in ("inverting_gradients", "defended_inverting_gradients"):
        pytest.skip("Inverting Gradients has no R_BN")
    with pytest.raises(ValueError, match=argument):
        ATTACKS[name](model, grads, y, tuple(x.shape), iterations=2, **{argument: value})


@pytest.mark.parametrize("name", ATTACKS)
def test_integer_and_nan_gradients_are_rejected(case, name):
    model, x, y, grads = case
    with pytest.raises(TypeError, match="target_grads.*float"):
        ATTACKS[name](model, [g.round().long() for g in grads], y, tuple(x.shape), iterations=1)
    nan = [g.clone() for g in grads]
    nan[0][0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        ATTACKS[name](model, nan, y, tuple(x.shape), iterations=1)
    with pytest.raises(ValueError, match="iterations"):
        ATTACKS[name](model, grads, y, tuple(x.shape), iterations=0)


def test_stepwise_dropout_outside_range_is_rejected(case):
    model, x, y, grads = case
    for value in (1.0, float("nan"), -0.1):
        with pytest.raises(ValueError, match="dropout"):
            stepwise_inversion(model, grads, y, tuple(x.shape), iterations=1, dropout=value)


def test_attack_result_info_must_be_json_able():
    import torch
    from gitutor.attacks import AttackResult
    AttackResult(torch.zeros(1, 1, 2, 2), None, info={"stopped_early": None, "steps": [1, 2]})
    for bad in ({"x": torch.ones(1)}, {"loss": float("nan")}):
        with pytest.raises(TypeError, match="info"):
            AttackResult(torch.zeros(1, 1, 2, 2), None, info=bad)
