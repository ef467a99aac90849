"""LLG and LLG+ (Wainakh et al., PoPETs 2022, Algorithm 1): label counts from the row sums of the last layer's
weight gradient, the published count baseline of chapter 03."""
import pytest
import torch
from torch import nn

from gitutor.federated import client_gradients
from gitutor.labels.llg import LLGPlus, fit_llg_plus, llg_label_counts

C, WIDTH = 30, 48


def _features(n, seed):
    """n non-negative features with one sum (permutations of one profile), as after a ReLU."""
    g = torch.Generator().manual_seed(seed)
    profile = torch.linspace(1.5, 0.0, WIDTH) ** 2
    return torch.stack([profile[torch.randperm(WIDTH, generator=g)] for _ in range(n)])


def _fc_grad(head, features, labels):
    return client_gradients(head, features, labels)[0]


@pytest.fixture
def head():
    fc = nn.Linear(WIDTH, C)
    nn.init.normal_(fc.weight, std=1e-3, generator=torch.Generator().manual_seed(0))
    nn.init.zeros_(fc.bias)
    return fc


@pytest.mark.parametrize("labels", [[3, 3, 3, 3, 3, 7, 7, 9], [1, 1, 2, 2, 2, 2, 4, 4], [5] * 8, [0, 1, 2, 3]])
def test_llg_and_llg_plus_count_repeated_labels_when_outputs_are_small(head, labels):
    labels = torch.tensor(labels)
    w = _fc_grad(head, _features(len(labels), 1), labels)
    truth = torch.bincount(labels, minlength=C)
    assert torch.equal(llg_label_counts(w, len(labels)), truth)
    assert torch.equal(llg_label_counts(w, len(labels), fit_llg_plus(head, _features(40, 2))), truth)


def test_fit_llg_plus_is_the_average_of_the_authors_one_class_batches(head):
    """The authors feed a batch of N auxiliary images all labelled i, for every class i: the row sum of i over N is
    the impact, the other rows' sums the offsets. The closed form averages exactly that."""
    torch.manual_seed(0)
    aux = torch.rand(6, WIDTH)
    impacts, offsets = [], torch.zeros(C)
    for i in range(C):
        sums = _fc_grad(head, aux, torch.full((6,), i)).double().sum(dim=1)
        impacts.append(float(sums[i]))
        offsets += torch.where(torch.arange(C) == i, 0.0, sums.float() / (C - 1))
    fit = fit_llg_plus(head, aux)
    assert fit.impact == pytest.approx(sum(impacts) / C * (1 + 1 / C), rel=1e-5)  # × N / N: per-sample impact
    assert torch.allclose(fit.offset.float(), offsets, rtol=1e-4, atol=1e-7)


def test_llg_fails_where_its_premise_fails_a_confident_head(head):
    """A head that puts most probability on one present class: LLG's equal-impact premise breaks."""
    labels = torch.tensor([3, 3, 3, 7, 7, 7, 7, 9])
    features = _features(8, 1)
    with torch.no_grad():
        head.weight[3] = 5 * features.mean(0)  # class 3 gets p ≈ 1 on every image
    w = _fc_grad(head, features, labels)
    assert not torch.equal(llg_label_counts(w, 8), torch.bincount(labels, minlength=C))


def test_bad_arguments_are_named(head):
    w = _fc_grad(head, _features(4, 1), torch.tensor([1, 1, 2, 3]))
    with pytest.raises(ValueError, match="batch_size"):
        llg_label_counts(w, 0)
    with pytest.raises(ValueError, match="offset"):
        llg_label_counts(w, 4, LLGPlus(impact=-1.0, offset=torch.zeros(C + 1)))
    with pytest.raises(ValueError, match="impact"):
        llg_label_counts(torch.ones(C, WIDTH), 4)  # no negative row: nothing to count with
    with pytest.raises(TypeError):
        llg_label_counts(w.long(), 4)
    with pytest.raises(ValueError, match="aux_features"):
        fit_llg_plus(head, torch.rand(5, WIDTH + 1))
    with pytest.raises(TypeError, match="nn.Linear"):
        fit_llg_plus(nn.Sequential(head), torch.rand(5, WIDTH))
