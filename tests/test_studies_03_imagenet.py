"""Chapter 03's headline setting (gitutor.chapters.cv_batch_labels.imagenet*): Stage I of Ye et al. (AAAI 2024) on
an ImageNet-trained network with real photographs and true labels. Synthetic features stand in for the network
here (the network itself is tested in test_pretrained.py); the chapter runs the real one."""
import pytest
import torch
from torch import nn

from gitutor.chapters.cv_batch_labels import imagenet
from gitutor.chapters.cv_batch_labels import imagenet_report as irep
from gitutor.chapters.cv_batch_labels import report
from gitutor.chapters.settings import get_profile
from gitutor.federated import client_gradients
from gitutor.results import headline_row, ledger_rows, verdict
from gitutor.stats import Interval


def _bank(views=4, classes=1000, m=64, seed=0):
    """A bank of 6 photographs (labels 3, 3, 7, 11, 20, 42: two photographs of class 3) with sparse
    non-negative features, each photograph its own pattern, its views near it."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.tensor([3, 3, 7, 11, 20, 42])
    base = torch.rand(len(labels), 1, m, generator=gen) * (torch.rand(len(labels), 1, m, generator=gen) < 0.5)
    features = base * (1 + 0.05 * torch.rand(len(labels), views, m, generator=gen))
    return imagenet.ViewBank(torch.rand(len(labels), views, 3, 8, 8, generator=gen), features, base[:, 0] * 1.02,
                             labels, torch.full((len(labels), views), 1 / classes))


def test_augmented_views_are_seeded_crops_in_range():
    images = torch.rand(2, 3, 40, 40, generator=torch.Generator().manual_seed(0))
    first = imagenet.augmented_views(images, 3, 16, torch.Generator().manual_seed(1))
    again = imagenet.augmented_views(images, 3, 16, torch.Generator().manual_seed(1))
    assert first.shape == (2, 3, 3, 16, 16) and torch.equal(first, again)
    assert 0 <= float(first.min()) and float(first.max()) <= 1
    assert not torch.allclose(first[0, 0], first[0, 1])  # different crops of one photograph
    with pytest.raises(ValueError, match="views"):
        imagenet.augmented_views(images, 0, 16, torch.Generator())


def test_sampled_batches_repeat_true_labels_with_distinct_views():
    bank = _bank(views=4)
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        picks, labels = imagenet.sample_view_batch(bank, 8, 4, gen)
        assert len(labels) == 8 and len(labels.unique()) < 8  # a class repeats
        assert torch.equal(labels, bank.labels[picks[:, 0]])  # every image keeps its photograph's true label
        assert len({tuple(p) for p in picks.tolist()}) == 8  # no view twice
        counts = torch.bincount(labels)
        assert all(int(counts[c]) <= 4 * int((bank.labels == c).sum()) for c in labels.unique())
    with pytest.raises(ValueError, match="views per photograph"):
        imagenet.sample_view_batch(_bank(views=1), 8, 2, gen, tries=20)


def test_premise_gradient_is_the_fc_gradient_without_the_softmax():
    classes, features = 10, torch.rand(6, 5)
    labels = torch.tensor([1, 1, 4, 4, 4, 9])
    head = nn.Linear(5, classes)
    nn.init.zeros_(head.weight), nn.init.zeros_(head.bias)  # uniform softmax p = 1/C
    w = client_gradients(head, features, labels)[0]
    expected = w - features.mean(dim=0) / classes  # drop the (1/N) Σ p h term
    assert torch.allclose(imagenet.premise_gradient(classes, features, labels), expected, atol=1e-6)


def test_trials_score_every_method_and_keep_batch_photographs_out_of_the_auxiliary_set():
    cfg = get_profile("03_cv_batch_labels", "quick").replace(top_m=10, iterations=30)
    bank = _bank(views=4, m=64)
    head = nn.Linear(64, 1000)
    nn.init.zeros_(head.weight), nn.init.zeros_(head.bias)  # early training: p ≈ 0, Eq. 6's premise
    result = imagenet.imagenet_trials(head, bank, cfg, 6, 12, 3, torch.Generator().manual_seed(0))
    assert set(result["scores"]) == set(imagenet.METHODS) and all(len(v) == 12 for v in result["scores"].values())
    assert all(2 <= n <= 5 for n in result["n_aux"])  # 6 photographs minus those of 2–3 batch classes
    summary = imagenet.imagenet_summary(result)
    assert summary["coarse_right"] == 12  # p ≈ 0: the negative rows are exactly the batch's classes
    assert summary["exact"]["bias count"].mean == 1.0  # and the bias count is exact
    assert summary["premise"].mean >= summary["exact"]["Eq. 6 exhaustive"].mean - 1e-9


def test_summary_pairs_methods_on_the_same_batches():
    scores = {name: [{"exact": e, "accuracy": e} for e in flags] for name, flags in {
        "ours": [1, 1, 0, 0], "Eq. 6 exhaustive": [1, 1, 0, 0], "bias count": [0, 1, 0, 1],
        "LLG": [1, 1, 0, 0], "LLG+": [0, 0, 0, 0]}.items()}
    result = {"scores": scores, "coarse": [1, 1, 1, 0], "premise": [1, 1, 1, 1], "seconds": [0.1] * 4,
              "n_aux": [14, 15, 16, 17], "refused": 0, "short": [0, 0, 1, 0]}
    summary = imagenet.imagenet_summary(result)
    assert summary["discordant"]["bias count"] == (1, 1) and summary["paired"]["bias count"].mean == 0
    assert summary["discordant"]["LLG+"] == (2, 0) and summary["paired"]["LLG+"].mean == 0.5
    assert summary["given_coarse"]["ours"].n == 3 and summary["given_coarse"]["ours"].mean == pytest.approx(2 / 3)
    assert summary["premise_paired"].mean == 0.5 and summary["premise_paired"].n == 4  # p = 0 − ours, paired
    assert summary["short"] == 1  # batches on which the truth scores a lower J than the search's counts
    table = irep.headline_table(summary)
    assert "exact, coarse set right (n = 3)" in table and "| 1 / 1 |" in table


def _summary(ours, bias_paired, premise=0.9):
    rate = lambda mean: Interval(mean, max(0.0, mean - 0.08), min(1.0, mean + 0.08), 100, (0.0, 1.0))
    paired = Interval(bias_paired, bias_paired - 0.07, bias_paired + 0.07, 100, (-1.0, 1.0))
    names = ("ours", "Eq. 6 exhaustive", "bias count", "LLG", "LLG+")
    return {"exact": {n: rate(ours) for n in names}, "given_coarse": {n: rate(ours) for n in names},
            "accuracy": {n: rate(0.8) for n in names}, "paired": {n: paired for n in imagenet.BASELINES},
            "discordant": {n: (18, 0) for n in imagenet.BASELINES}, "coarse": rate(0.99), "coarse_right": 99,
            "trials": 100, "premise": rate(premise), "n_aux": (14, 18), "refused": 0, "seconds": 0.1, "short": 0,
            "premise_paired": Interval(premise - ours, premise - ours - 0.1, premise - ours + 0.1, 100, (-1.0, 1.0))}


def test_rows_hold_one_headline_judged_by_the_verdict_rule_whatever_the_networks_confidence():
    cfg = get_profile("03_cv_batch_labels", "quick")
    sweep = {"ours": {"flags": [[1.0, 0.0]] * len(cfg.imagenet_batch_sizes), "short": [0] * 4}}
    rows = irep.imagenet_rows(_summary(0.2, 0.18), sweep, [2] * len(cfg.imagenet_batch_sizes), cfg, "quick", 0.65)
    headline = headline_row(rows)
    assert sum(bool(r.get("headline")) for r in rows) == 1 and headline["this_run"] == 0.2
    # the paper's claim (every count of every batch right: 1.0) against the interval [0.12, 0.28], by the rule;
    # a mean p = 0.65 on the true class does not gate it: no threshold of the book's decides the verdict
    assert headline["paper"] == 1.0 and headline["better"] == "higher" and not headline.get("not_comparable")
    assert verdict(headline) == "falls short" and "claim_outcome" not in headline
    assert headline["claim"] == irep.CLAIM and "Stage I. Label Inference" in irep.CLAIM
    assert ledger_rows([{"notebook": "03_cv_batch_labels", "rows": rows}])[2]["outcome"] == "not reproduced"
    assert verdict(irep.imagenet_rows(_summary(0.97, 0.18), sweep, [2] * 4, cfg, "quick", 0.65)[0]) == "not resolved"
    # the p = 0 diagnostic sits beside the headline as its own row, with the network's p and the paired difference
    premise = next(r for r in rows if "p = 0 imposed" in r["quantity"])
    assert premise["this_run"] == 0.9 and "0.65" in premise["differences"] and verdict(premise) == "not judged"


def test_a_wrong_batch_is_the_searchs_error_only_when_the_truth_scores_a_lower_j():
    """The truth's Eq. 6 J beside the search's: a batch counts as cut short by the search's cap only when the
    true counts are in the search space and score lower than the found ones."""
    from gitutor.labels import FeatureCV, coarse_labels, label_count_objective

    bank = _bank(views=4, m=64)
    head = nn.Linear(64, 1000)
    nn.init.zeros_(head.weight), nn.init.zeros_(head.bias)
    labels = torch.tensor([3, 3, 3, 7, 7, 11])
    features = bank.features[[0, 1, 0, 2, 2, 3], [0, 0, 1, 0, 1, 0]]
    w = client_gradients(head, features, labels)[0]
    classes = coarse_labels(w)
    assert classes.tolist() == [3, 7, 11]
    stats = FeatureCV.from_features(bank.centre_features[4:], top_m=10)
    truth = torch.tensor([3, 2, 1])
    outcomes = []
    for counts in ([1, 1, 4], [4, 1, 1], [2, 3, 1], [1, 4, 1]):
        found = classes.repeat_interleave(torch.tensor(counts))
        j = label_count_objective(torch.stack([truth, torch.tensor(counts)]), w, classes, stats)
        outcomes.append(imagenet.search_fell_short(w, classes, stats, found, labels))
        assert outcomes[-1] == bool(j[0] < j[1]), counts
    assert True in outcomes  # the truth beats a poor count vector
    shuffled = labels[torch.randperm(6, generator=torch.Generator().manual_seed(0))]
    assert not imagenet.search_fell_short(w, classes, stats, shuffled, labels)  # right as a multiset
    missed = torch.tensor([3, 3, 3, 7, 7, 20])  # class 20 is not a coarse label: out of the search's reach
    assert not imagenet.search_fell_short(w, classes, stats, classes.repeat_interleave(truth), missed)
    assert not imagenet.search_fell_short(w, classes, stats, torch.empty(0, dtype=torch.int64), labels)
    with pytest.raises(ValueError, match="found and labels"):
        imagenet.search_fell_short(w, classes, stats, labels[:5], labels)


def test_a_rate_the_cap_may_set_is_widened_to_what_a_longer_search_could_reach():
    rate = Interval(0.2, 0.1, 0.35, 20, (0.0, 1.0))
    same, note = report.capped_rate(rate, 0, 200)
    assert same is rate and "does not set this rate" in note and "16 wrong batches" in note
    widened, note = report.capped_rate(rate, 6, 200)
    assert (widened.mean, widened.low, widened.n) == (0.2, 0.1, 20) and widened.high > 0.35
    assert widened.high == pytest.approx(irep.success_interval([1.0] * 10 + [0.0] * 10).high)
    assert "6 of the 16 wrong batches" in note
    with pytest.raises(ValueError, match="short"):
        report.capped_rate(rate, 17, 200)
