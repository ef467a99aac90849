"""The server unrolls the client's local steps (gitutor.attacks.unrolled): the simulation equals the client's
training, the objective is zero at the truth, and it recovers what reading Δ as one gradient does not."""
from __future__ import annotations

import pytest
import torch

from gitutor.attacks import inverting_gradients
from gitutor.attacks.unrolled import rounds_distance, simulated_update, update_distance
from gitutor.federated.flower import local_training, update_as_gradient
from gitutor.metrics import psnr
from gitutor.models import LeNet, init_uniform_
from gitutor.seeding import make_generator


def case(n=2):
    model = init_uniform_(LeNet(num_classes=4, in_channels=3, image_size=12), 0.5, make_generator(0))
    ramp = torch.linspace(0, 1, 12)
    images = torch.stack([torch.stack([ramp.view(1, -1).expand(12, 12), ramp.view(-1, 1).expand(12, 12),
                                       0.5 * torch.ones(12, 12)]).roll(i, dims=0) for i in range(n)])
    return model, images, torch.arange(n) % 4


def client_delta(model, images, labels, **schedule):
    trained, _ = local_training(model, images, labels, **schedule)
    return [a.detach() - b.detach() for a, b in zip(trained.parameters(), model.parameters())]


def test_the_simulation_is_the_clients_training():
    model, images, labels = case(3)
    for schedule in (dict(lr=0.5, epochs=1, batch_size=3), dict(lr=0.5, epochs=2, batch_size=2)):
        expected = client_delta(model, images, labels, **schedule)
        found = simulated_update(model, images, labels, create_graph=False, **schedule)
        assert all(torch.allclose(a, b, atol=1e-7, rtol=1e-5) for a, b in zip(found, expected))
    assert all(not p.grad_fn for p in model.parameters())


def test_the_unrolled_objective_is_zero_at_the_truth_and_not_elsewhere():
    model, images, labels = case()
    schedule = dict(lr=0.5, epochs=2, batch_size=1)
    delta = client_delta(model, images, labels, **schedule)
    at_truth = float(update_distance(model, delta, images, labels, **schedule).detach())
    noise = torch.rand(images.shape, generator=torch.Generator().manual_seed(1))
    assert at_truth < 1e-6 and float(update_distance(model, delta, noise, labels, **schedule).detach()) > 1e-3
    start = [p.detach() + 0.01 for p in model.parameters()]
    moved = [torch.nn.Parameter(p.clone()) for p in start]
    shifted = LeNet(num_classes=4, in_channels=3, image_size=12)
    with torch.no_grad():
        for p, q in zip(shifted.parameters(), moved):
            p.copy_(q)
    later = client_delta(shifted, images, labels, **schedule)  # round 2 at its own global model
    both = [([p.detach() for p in model.parameters()], delta), (start, later)]
    assert float(rounds_distance(model, both, images, labels, **schedule).detach()) < 1e-6
    with pytest.raises(ValueError, match="rounds must hold"):
        rounds_distance(model, [], images, labels, **schedule)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(lr=0.0, epochs=1, batch_size=1), ValueError, "lr must be"), (dict(lr="1", epochs=1, batch_size=1), TypeError, "lr"),
    (dict(lr=0.1, epochs=0, batch_size=1), ValueError, "epochs"), (dict(lr=0.1, epochs=1, batch_size=3), ValueError,
                                                                    "batch_size must be an int ≥ 1 and ≤ 2"),
    (dict(lr=0.1, epochs=1.0, batch_size=1), TypeError, "epochs"), (dict(lr=float("nan"), epochs=1, batch_size=1),
                                                                    ValueError, "lr")])
def test_a_bad_schedule_is_refused(kwargs, error, match):
    model, images, labels = case()
    with pytest.raises(error, match=match):
        simulated_update(model, images, labels, **kwargs)


def test_unrolling_recovers_what_one_gradient_does_not():
    """Chapter 08's setting (tanh LeNet, PyTorch's initialisation, an LFW face, η = 0.05, E = 5), at 16 px."""
    from gitutor.chapters.flower_dp.experiments import chapter_model
    from gitutor.chapters.flower_dp.faces import face_data

    model, data = chapter_model(16, 0), face_data(16)
    images, labels = data["train_x"][:1], data["train_y"][:1]
    schedule = dict(lr=0.05, epochs=5, batch_size=1)
    delta = client_delta(model, images, labels, **schedule)
    kwargs = dict(iterations=200, tv_weight=1e-2, seed=0, lr=0.1)
    one_gradient = inverting_gradients(model, update_as_gradient(delta, 0.05, 5), labels, images.shape, **kwargs)
    unrolled = inverting_gradients(model, delta, labels, images.shape, **kwargs,
                                   matching_distance=lambda x: update_distance(model, delta, x, labels, **schedule))
    found, baseline = float(psnr(unrolled.images, images)), float(psnr(one_gradient.images, images))
    assert found > 28 and found - baseline > 10, (found, baseline)


def test_bad_images_flags_rounds_and_a_zero_update_are_refused():
    model, images, labels = case()
    schedule = dict(lr=0.5, epochs=1, batch_size=1)
    with pytest.raises(ValueError, match="images hold NaN"):
        simulated_update(model, torch.full_like(images, float("nan")), labels, **schedule)
    with pytest.raises(ValueError, match=r"images must be a \(N, C, H, W\)"):
        simulated_update(model, images[0], labels, **schedule)
    with pytest.raises(TypeError, match="create_graph must be True or False"):
        simulated_update(model, images, labels, create_graph="False", **schedule)
    zero = [torch.zeros_like(p) for p in model.parameters()]
    with pytest.raises(ValueError, match="all-zero update"):
        update_distance(model, zero, images, labels, **schedule)
    with pytest.raises(ValueError, match=r"\(start, update\) pairs"):
        rounds_distance(model, [zero], images, labels, **schedule)
    import numpy as np

    found = simulated_update(model, images, labels, lr=np.float32(0.5), epochs=np.int64(1), batch_size=1,
                             create_graph=False)  # NumPy numbers are numbers
    assert len(found) == len(list(model.parameters()))


def test_the_vectorised_rounds_are_the_rounds_one_by_one():
    """rounds_distance runs its R simulations as one vmap: value and gradient in the images equal the mean of
    update_distance's, round by round; a zero update and a model with buffers are refused."""
    model, images, labels = case(2)
    schedule = dict(lr=0.5, epochs=2, batch_size=1)
    g = torch.Generator().manual_seed(3)
    rounds = []
    for r in range(3):
        start = [p.detach() + 0.05 * r * torch.randn(p.shape, generator=g) for p in model.parameters()]
        rounds.append((start, [torch.randn(p.shape, generator=g) for p in model.parameters()]))
    x = torch.rand(images.shape, generator=g, requires_grad=True)
    joint = rounds_distance(model, rounds, x, labels, **schedule)
    (expected_grad,) = torch.autograd.grad(joint, x)
    one_by_one = sum(update_distance(model, d, x, labels, start=s, **schedule) for s, d in rounds) / 3
    (grad,) = torch.autograd.grad(one_by_one, x)
    assert torch.allclose(joint, one_by_one, atol=1e-6) and torch.allclose(grad, expected_grad, atol=1e-6, rtol=1e-4)
    zero = [torch.zeros_like(p) for p in model.parameters()]
    with pytest.raises(ValueError, match=r"rounds\[1\] update is all zeros"):
        rounds_distance(model, [rounds[0], (rounds[1][0], zero)], x, labels, **schedule)
    normed = torch.nn.Sequential(torch.nn.Conv2d(3, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.Flatten(),
                                 torch.nn.Linear(200, 4))
    params = [p.detach() for p in normed.parameters()]
    with pytest.raises(ValueError, match="model has buffers"):
        rounds_distance(normed, [(params, params)], images, labels, **schedule)


def test_a_batchnorm_client_is_simulated_with_its_running_statistics_and_the_model_is_left_alone():
    """A model with BatchNorm in training mode: the simulated update equals the client's training (which
    updates the running statistics step by step), is differentiable in the images, and leaves the model's
    own buffers as they were."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.Flatten(),
                                torch.nn.Linear(200, 4)).train()
    images = torch.rand(2, 3, 12, 12, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 1])
    before = [b.clone() for b in model.buffers()]
    schedule = dict(lr=0.1, epochs=2, batch_size=1)
    expected = client_delta(model, images, labels, **schedule)
    x = images.clone().requires_grad_(True)
    found = simulated_update(model, x, labels, **schedule)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(found, expected))
    (grad,) = torch.autograd.grad(sum(t.sum() for t in found), x)
    assert bool(grad.abs().sum() > 0)
    assert all(torch.equal(a, b) for a, b in zip(before, model.buffers()))
