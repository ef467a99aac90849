"""Our stepwise objective under the authors' options, against values worked out by hand from their code.

The authors' code (``MiLab-HITSZ/2023YeHFGradInv``, a breaching fork; ``our_res34_pretrained.yaml``)
is not needed here: each reference below is written out from their formula, small enough to check
by reading. ``benchmarks/authors_equivalence.py`` runs their code itself against ours on a ResNet34
(float64: objectives equal to 4e-16, ∂/∂x to 1e-14 relative).
"""
import pytest
import torch
from torch import nn

from gitutor.attacks import (
    BatchNormPrior,
    StepwiseOptions,
    StepwiseSchedule,
    breaching_total_variation,
    quantised_sign,
    stage_floor,
    total_variation,
)
from gitutor.attacks.loop import optimise_images
from gitutor.attacks.objectives import cosine_gradient_distance
from gitutor.attacks.stepwise import StepwiseObjective
from gitutor.federated.client import client_gradients
from gitutor.models import cifar_resnet18, resnet34

X = torch.tensor([[[[1.0, 2.0], [3.0, 5.0]]]])  # (1, 1, 2, 2)


def test_breaching_tv_zero_pads_the_image():
    # regularizers.py:122–152: conv with zero padding, so past the edge the image is 0.
    # |Δh| = |2−1|, |0−2|, |5−3|, |0−5| = 1, 2, 2, 5;  |Δv| = |3−1|, |5−2|, |0−3|, |0−5| = 2, 3, 3, 5
    # mean over the 4 pixels of (|Δv| + ε) + (|Δh| + ε) = (3 + 5 + 5 + 10) / 4 + 2ε
    assert breaching_total_variation(X).item() == pytest.approx(23 / 4 + 2e-8, abs=1e-6)
    assert breaching_total_variation(X, eps=0.0).item() == pytest.approx(5.75)
    # a typical wrong answer, differences only inside the image (no padding): (1 + 2 + 2 + 3) / 4
    assert breaching_total_variation(X).item() != pytest.approx(2.0)


def test_paper_tv_counts_the_bottom_right_pixel():
    # Eq. 11, β = 2, every pixel, a difference past the edge counting 0:
    # (0,0): 1² + 2² = 5; (0,1): 0 + 3² = 9; (1,0): 2² + 0 = 4; (1,1): 0  → 18 (the old sum gave 5)
    x = X.clone().requires_grad_(True)
    tv = total_variation(x, beta=2.0, reduction="sum")
    assert tv.item() == pytest.approx(18.0)
    tv.backward()
    # ∂/∂x₁₁ = 2·(x₁₁ − x₀₁) + 2·(x₁₁ − x₁₀) = 6 + 4: the corner is regularised
    assert x.grad[0, 0, 1, 1].item() == pytest.approx(10.0)


def test_quantised_sign_levels_floor_and_boost():
    # optimization_based_attack.py:386–396. |g| sorted: 0, .04, .1, .2, .4, .4, 1, 3 → torch.median = .2
    # (lower middle); 2g/m = 10 g, rounded, halved, clamped to ±1, × 0.8, + 0.2·sign(g)
    g = torch.tensor([0.0, 0.04, -0.1, 0.2, -0.4, 0.4, 1.0, -3.0])
    expected = torch.tensor([0.0, 0.2, -0.6, 1.0, -1.0, 1.0, 1.0, -1.0])
    assert torch.allclose(quantised_sign(g, 101), expected, atol=1e-6)
    assert torch.allclose(quantised_sign(g, 100), 2 * expected, atol=1e-6)  # × 2 while t ≤ 100
    assert not torch.allclose(quantised_sign(g, 101), torch.sign(g))  # not the paper's Sign


def test_r_bn_weights_its_first_two_layers():
    # regularizers.py:266–269: rescale = [1.3, 3] + [1] * (n − 2), in module order. Three identity
    # BatchNorms (eps 0, running mean 0, var 1) on a constant input 2: each term |2 − 0| + |0 − 1| = 3
    net = nn.Sequential(*[nn.BatchNorm2d(1, eps=0.0) for _ in range(3)]).eval()
    x = torch.full((2, 1, 3, 3), 2.0)
    for weights, expected in (((), 9.0), ((1.3, 3.0), 1.3 * 3 + 3 * 3 + 3)):
        with BatchNormPrior(net, weights) as prior:
            net(x)
            assert prior.value().item() == pytest.approx(expected)
    with pytest.raises(ValueError, match="layer_weights"):
        BatchNormPrior(net, (1.0, 1.0, 1.0, 1.0))


def test_schedule_follows_the_authors_one_based_counter():
    # objectives.py:541–549, written out: the test `(iter + 1) % period == 0` comes before matching,
    # and tensor `count` is matched when `start <= count + 1` (1-based)
    schedule = StepwiseSchedule.paper(15_000, 110, authors_timing=True)
    start, expected = 100, []
    for it in range(15_000):
        if (it + 1) % 500 == 0:
            start = start - 10 if start - 10 > 25 else 25  # noqa: FURB136 - their line, as written
        expected.append(start - 1)  # the first matched 0-based index
    assert [schedule.start_index(t) for t in range(15_000)] == expected
    # common.py:26–28, T // 2.667, T // 1.6, T // 1.142 in floats (15000 // 1.6 is 9374.0: 1.6 is a hair above 1.6)
    assert schedule.lr_milestones == (5624, 9374, 13134)
    names = [n for n, _ in resnet34().named_parameters()]
    assert (names[schedule.start], names[schedule.floor]) == ("layer4.1.conv2.weight", "layer2.0.conv2.weight")


def test_floor_placed_by_structure_stays_out_of_the_first_stage():
    assert stage_floor(resnet34()) == 24  # the authors' min_start 25 (1-based)
    cifar = cifar_resnet18(width=8)
    names = [n for n, _ in cifar.named_parameters()]
    assert names[StepwiseSchedule.paper(300, len(names)).floor].startswith("layers.0.")  # scaled: inside layer1
    assert names[stage_floor(cifar)] == "layers.1.0.conv2.weight"


def test_best_iterate_with_resets():
    # optimization_based_attack.py:228–232: keep the iterate *after* a step whose (pre-step) loss is the
    # lowest so far, or whatever its loss at a reset. x moves by −lr every step (sign of d(sum x)/dx = 1)
    shifts = [0.0, 0.0, -10.0, 0.0, 5.0, 6.0]

    def objective(x, t):
        return {"loss": x.sum() + shifts[t]}

    x0 = torch.full((1, 1, 1, 1), 0.5)
    run = {"iterations": 6, "lr": 0.01, "box": None}
    best = optimise_images(objective, x0, best_resets=lambda t: False, **run)
    assert best.info["best_iteration"] == 3 and best.images.item() == pytest.approx(0.47)
    reset = optimise_images(objective, x0, best_resets=lambda t: t == 4, **run)
    assert reset.info["best_iteration"] == 5 and reset.images.item() == pytest.approx(0.45)
    assert optimise_images(objective, x0, **run).images.item() == pytest.approx(0.44)  # last


class _Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))


def test_objective_under_the_authors_options_is_their_sum_in_normalised_units():
    # their closure (optimization_based_attack.py:344–354) at t ≥ T2: cosine over the matched tensors
    # with masks u > 0.3, + 5e-3 · breaching TV *of the normalised image z*, + 1e-4 · weighted R_BN
    torch.manual_seed(0)
    model = _Tiny().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 1.5)
    options = StepwiseOptions.authors(bn_layer_weights=(1.3,))
    labels = torch.tensor([0, 2])
    targets = client_gradients(model, torch.rand(2, 3, 6, 6), labels)
    schedule = StepwiseSchedule.fixed(4, 2, t1=1, t2=2)
    z = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(1))
    objective = StepwiseObjective(model, targets, labels, schedule, distance="cosine", dropout=0.3, tv_weight=5e-3,
                                  bn_weight=1e-4, generator=torch.Generator().manual_seed(7), options=options)
    terms = objective(z, 3)
    objective.close()
    x = z * torch.tensor(options.std).view(1, 3, 1, 1) + torch.tensor(options.mean).view(1, 3, 1, 1)
    generator = torch.Generator().manual_seed(7)
    masks = [(torch.rand(t.shape, generator=generator) > 0.3).float() for t in targets[2:]]
    candidate = client_gradients(model, x, labels)
    with BatchNormPrior(model, (1.3,)) as prior:
        model(x)
        r_bn = prior.value()
    expected = (cosine_gradient_distance(candidate, targets, indices=range(2, len(targets)), masks=masks)
                + 5e-3 * breaching_total_variation(z) + 1e-4 * r_bn)
    assert terms["loss"].item() == pytest.approx(expected.item(), rel=1e-5)
    assert terms["tv"].item() != pytest.approx(breaching_total_variation(x).item(), rel=1e-3)  # z, not pixels
    low, high = options.box()
    assert torch.allclose(low.flatten(), -torch.tensor(options.mean) / torch.tensor(options.std))
    assert torch.allclose(high.flatten(), (1 - torch.tensor(options.mean)) / torch.tensor(options.std))
