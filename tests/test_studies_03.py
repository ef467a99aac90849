"""Chapter 03's experiments (gitutor.studies.cv_batch_labels*): Stage I of Ye et al., AAAI 2024."""
import types

import pytest
import torch
from torch import nn

from gitutor import get_profile
from gitutor.data import OfflineDataError
from gitutor.labels import FeatureCV
from gitutor.profiles.cv_batch_labels import BUDGETS
from gitutor.seeding import make_generator
from gitutor.studies import cv_batch_labels as study
from gitutor.studies.cv_batch_labels_report import paper_rows

NUM_CLASSES, WIDTH = 50, 64
CFG = types.SimpleNamespace(population=20, iterations=60, crossover=0.5, num_classes=NUM_CLASSES, head_steps=10,
                            head_lr=0.5, batch_sizes=[4, 8], sweep_trials=2, sweep_class_fraction=0.5)


def _profile_features(n, generator):
    """n non-negative features sharing one sorted profile (each a permutation of it)."""
    profile = torch.linspace(2.0, 0.0, WIDTH) ** 2
    return torch.stack([profile[torch.randperm(WIDTH, generator=generator)] for _ in range(n)])


@pytest.fixture(scope="module")
def setting():
    """A zero FC head (p = 1/C) and per-class features: every image of a class has the same feature, so Eq. 6 is exact."""
    fc = nn.Linear(WIDTH, NUM_CLASSES)
    nn.init.zeros_(fc.weight)
    nn.init.zeros_(fc.bias)
    class_features = _profile_features(NUM_CLASSES, make_generator(3))
    stats = FeatureCV.from_features(_profile_features(40, make_generator(1)), top_m=20)

    def fc_gradient(indices, labels, head=fc):
        return study.observed_fc_update(head, class_features[labels], labels)

    def recover(w, batch_size, seed, head=fc):
        return study.timed_recovery(head, w, batch_size, stats, CFG, seed)

    return fc, class_features, stats, fc_gradient, recover


def _trials(n, batch_size=8):
    labels = [torch.tensor([3, 3, 3, 3, 3, 7, 7, 9]), torch.tensor([1, 1, 2, 2, 2, 2, 4, 4])]
    return [(torch.arange(i * batch_size, (i + 1) * batch_size), labels[i % 2]) for i in range(n)]


def test_compare_methods_ours_exact_where_eq6_holds_and_yin_fails_on_repeats(setting):
    fc, _, stats, fc_gradient, recover = setting
    out = study.compare_methods(_trials(2), fc_gradient, recover, stats, 8)
    assert study.summary(out["scores"]["ours"]) == (1.0, 1.0)
    assert study.summary(out["scores"]["Eq. 6 exhaustive"]) == (1.0, 1.0)
    assert study.summary(out["scores"]["Yin et al."])[1] == 0.0  # one label per class cannot repeat
    assert out["agree"] == 2 and out["coarse_right"] == 2 and out["failures"] == []
    assert len(out["spread"]["exact"]) == 2 and max(out["spread"]["exact"]) < 0.1  # a_k / n_k nearly equal


def test_confident_head_makes_the_true_class_likely_and_breaks_the_bias_count(setting):
    fc, class_features, stats, fc_gradient, recover = setting
    trials = _trials(2)
    pool = torch.cat([class_features[labels] for _, labels in trials])  # pool[indices] is what fc_gradient sees
    late, probabilities, rejected = study.late_training(trials, fc, pool, fc_gradient, recover, CFG)
    assert min(probabilities) > 0.5
    assert study.summary(late["ours (bias-free FC)"])[0] == 1.0
    assert study.summary(late["bias count (confident head)"])[0] < 1.0
    assert 0 <= rejected <= 2


def test_batch_size_sweep_has_one_point_per_size(setting):
    _, _, _, fc_gradient, recover = setting
    sweep, seconds = study.batch_size_sweep(None, 64, fc_gradient, recover, CFG, make_generator(0))
    assert set(sweep) == {"ours", "Yin et al.", "iDLG rule", "bias count"} and len(seconds) == 2
    assert sweep["ours"]["accuracy"] == [1.0, 1.0]  # Eq. 6 exact in this setting
    assert sweep["bias count"]["exact"] == [1.0, 1.0]  # p = 1/C exactly: the bias count is exact


def test_eq6_scores_and_settled_generation(setting):
    _, _, stats, fc_gradient, _ = setting
    trials = _trials(2)
    assert study.eq6_scores(trials, [fc_gradient(i, l) for i, l in trials], 8, stats) == (1.0, 1.0)
    assert study.settled_generation([0.5, 0.2, 0.1, 0.1]) == 2


def test_chapter_images_bundled_and_missing_tree(tmp_path):
    cfg = get_profile("03_cv_batch_labels", "full").replace(**BUDGETS["smoke"], image_root="bundled",
                                                           aux_root="bundled", image_size=160)
    aux, pool, labels = study.chapter_images(cfg, 0)
    assert aux.shape == (max(cfg.aux_counts), 3, 160, 160) and pool.shape == (cfg.target_pool, 3, 160, 160)
    assert labels is None
    with pytest.raises(OfflineDataError, match="AUX_ROOT"):
        study.chapter_images(cfg.replace(aux_root=str(tmp_path / "missing")), 0)


def test_paper_rows_give_the_fig4_row_a_verdict():
    cfg = get_profile("03_cv_batch_labels", "quick")
    rows = paper_rows(cfg, "quick", accuracy=0.9, exact=0.5, exact_exhaustive=0.55, yin_accuracy=0.6,
                      figure_accuracy=0.97, figure_classes=20, settled=12)
    assert [r.get("better") for r in rows] == [None, None, "higher", None, "lower"]
    assert rows[2]["this_run"] == 0.97 and rows[4]["this_run"] == 12


def test_empty_inputs_are_refused(setting):
    _, _, stats, fc_gradient, recover = setting
    with pytest.raises(ValueError, match="trials is empty"):
        study.compare_methods([], fc_gradient, recover, stats, 8)
    with pytest.raises(ValueError, match="values is empty"):
        study.summary([])
