"""The image priors of stepwise GradInversion at the scale of Ye et al. (AAAI 2024) Eq. 11.

Eq. 11 *sums* R_tv over pixels and R_BN over layers; λ_tv = 0.01 and λ_BN = 1e-4 (§Experiments)
were tuned for those sums at 224 px. These tests pin the scale the attack actually optimises: a
prior computed as a mean would pass ``total_variation``'s own unit tests and still be 148 176 times
weaker than the paper's at 224 px.
"""
import pytest
import torch
from torch import nn

from gitutor.attacks.bn_prior import BatchNormPrior
from gitutor.attacks.stepwise import StepwiseObjective
from gitutor.attacks.stepwise_schedule import StepwiseSchedule
from gitutor.federated.client import client_gradients

PAPER_TV, PAPER_BN = 0.01, 1e-4


def _ramp(size: int, batch: int = 1) -> torch.Tensor:
    """x_{i,j} = j / (size − 1) in every channel: Δ_h = 1/(size − 1), Δ_v = 0."""
    return torch.linspace(0, 1, size).expand(batch, 3, size, size).clone()


def _paper_r_tv(x: torch.Tensor, beta: float = 2.0) -> float:
    """Eq. 11 term by term: Σ_{b,c,i,j} ((x_{i,j+1} − x_{ij})² + (x_{i+1,j} − x_{ij})²)^{β/2} over every
    pixel, a difference past the last column or row counting 0 (so no pixel is left out)."""
    total = 0.0
    b, c, h, w = x.shape
    xs = x.double()
    zero = torch.zeros(b, c, 1, dtype=xs.dtype)
    for i in range(h):
        dh = torch.cat([xs[:, :, i, 1:] - xs[:, :, i, :-1], zero], dim=2)  # the last column's Δ_h is 0
        dv = xs[:, :, i + 1] - xs[:, :, i] if i + 1 < h else torch.zeros(b, c, w, dtype=xs.dtype)
        total += float(((dh ** 2 + dv ** 2) ** (beta / 2)).sum())
    return total


class _TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=4, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))


def test_stepwise_tv_term_is_the_papers_sum_at_224_px():
    torch.manual_seed(0)
    model = _TinyNet().eval()
    x = _ramp(224)
    labels = torch.tensor([1])
    shared = client_gradients(model, torch.rand(1, 3, 224, 224), labels)
    schedule = StepwiseSchedule.all_tensors(10)
    objective = StepwiseObjective(model, shared, labels, schedule, distance="cosine", dropout=0.0,
                                  tv_weight=PAPER_TV, bn_weight=PAPER_BN,
                                  generator=torch.Generator().manual_seed(0))
    terms = objective(x, 0)
    objective.close()
    # per channel: 224 rows × 223 steps × (1/223)² = 224/223, so R_tv = 3·224/223 and λ_tv·R_tv ≈ 0.03
    assert _paper_r_tv(x) == pytest.approx(3 * 224 / 223)
    assert terms["tv"].item() == pytest.approx(_paper_r_tv(x), rel=1e-5)
    assert PAPER_TV * terms["tv"].item() == pytest.approx(0.03 * 224 / 223, rel=1e-5)
    # the loss is the gradient distance plus both weighted priors at t ≥ T1, T2 = 0
    expected = terms["gradient_distance"] + PAPER_TV * terms["tv"] + PAPER_BN * terms["r_bn"]
    assert terms["loss"].item() == pytest.approx(expected.item(), rel=1e-6)


def test_tv_sum_grows_with_pixels_and_images():
    random = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    from gitutor.attacks import total_variation

    assert total_variation(random, beta=2.0, reduction="sum").item() == pytest.approx(
        _paper_r_tv(random), rel=1e-5)
    assert total_variation(random, beta=2.0, reduction="sum").item() == pytest.approx(
        2 * 3 * 32 * 32 * total_variation(random, beta=2.0).item(), rel=1e-5)
    with pytest.raises(ValueError, match="reduction"):
        total_variation(random, reduction="max")


def test_r_bn_is_deepinversions_sum_of_norms_over_layers():
    """R_BN = Σ_l ‖μ_l − μ̄_l‖₂ + Σ_l ‖σ²_l − σ̄²_l‖₂ (Eq. 11; Yin et al. 2020, Eq. 4 without the
    per-layer weights), summed over layers, not averaged, with biased batch variances."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 5, 3), nn.BatchNorm2d(5), nn.ReLU(), nn.Conv2d(5, 4, 3),
                          nn.BatchNorm2d(4)).eval()
    for layer in (model[1], model[4]):
        layer.running_mean.uniform_(-1, 1)
        layer.running_var.uniform_(0.5, 2)
    x = torch.rand(3, 3, 12, 12)
    expected, features = 0.0, x
    for module in model:
        if isinstance(module, nn.BatchNorm2d):
            mean = features.mean(dim=(0, 2, 3))
            var = features.permute(1, 0, 2, 3).reshape(features.shape[1], -1).var(dim=1, unbiased=False)
            expected += (mean - module.running_mean).norm().item() + (var - module.running_var).norm().item()
        features = module(features)
    with BatchNormPrior(model) as prior:
        model(x)
        assert prior.value().item() == pytest.approx(expected, rel=1e-5)
