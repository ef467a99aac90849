"""Chapter 03's experiments (gitutor.chapters.cv_batch_labels.experiments*): Stage I of Ye et al., AAAI 2024, on the
chapter's random ResNet34 and on a random vs the trained substitute ResNet-20."""
import types

import pytest
import torch
from torch import nn

from gitutor import get_profile, stats
from gitutor.data import OfflineDataError
from gitutor.labels import FeatureCV
from gitutor.labels.llg import fit_llg_plus
from gitutor.models import last_linear
from gitutor.chapters.cv_batch_labels.profile import BUDGETS
from gitutor.seeding import make_generator
from gitutor.stats import Interval
from gitutor.chapters.cv_batch_labels import experiments as study
from gitutor.chapters.cv_batch_labels import report
from gitutor.chapters.cv_batch_labels import substitute
from gitutor.chapters.cv_batch_labels import substitute_report as sub_report
from gitutor.chapters.cv_batch_labels.report import paper_rows

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
    fc, class_features = setting[:2]
    sweep, seconds = study.batch_size_sweep(None, 64, fc_gradient, recover, CFG, make_generator(0))
    assert set(sweep) == {"ours", "Yin et al.", "iDLG rule", "bias count", "LLG"} and len(seconds) == 2
    assert sweep["ours"]["accuracy"] == [1.0, 1.0]  # Eq. 6 exact in this setting
    assert sweep["bias count"]["exact"] == [1.0, 1.0]  # p = 1/C exactly: the bias count is exact
    assert [len(flags) for flags in sweep["ours"]["flags"]] == [CFG.sweep_trials] * 2
    with_plus, _ = study.batch_size_sweep(None, 64, fc_gradient, recover, CFG, make_generator(0),
                                          llg_plus=fit_llg_plus(fc, class_features[:20]))
    assert with_plus["LLG+"]["exact"] == [1.0, 1.0]  # equal feature sums: every image has the same impact


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


def test_paper_rows_random_network_rows_are_not_comparable_and_carry_bounded_intervals():
    from gitutor.results import verdict
    cfg = get_profile("03_cv_batch_labels", "quick")
    scores = {name: [{"accuracy": 1.0, "exact": 1.0}, {"accuracy": 0.5, "exact": 0.0}]
              for name in ("ours", "Eq. 6 exhaustive", "Yin et al.")}
    sweep = {"ours": {"flags": [[1.0, 0.0]] * (len(cfg.batch_sizes) - 1) + [[0.0] * 8]}}
    rows = paper_rows(cfg, "quick", scores=scores, sweep=sweep, figure_exact=False, figure_accuracy=0.984,
                      figure_classes=20, settled=12)
    assert not cfg.pretrained
    for row in rows:  # every row on the random ResNet34, the search's speed included: no verdict
        assert verdict(row) == ("not comparable" if row.get("not_comparable") else "not judged") and (
            row["paper"] == "not reported" or "not comparable" in
                                                      row["differences"] or not isinstance(row["paper"], float))
    b64 = next(r for r in rows if r["setting"].endswith("batch-size sweep"))
    assert b64["this_run"] == 0.0 and 0 <= b64["low"] <= b64["high"] <= 1  # 0 of 8: Wilson [0, 0.32]
    accuracy = rows[0]
    assert 0 <= accuracy["low"] <= accuracy["this_run"] <= accuracy["high"] <= 1  # cut to [0, 1]
    assert rows[-1]["this_run"] == 12 and rows[-1]["n"] == 1 and "fewer than 200" in rows[-1]["not_comparable"]
    pretrained = paper_rows(cfg.replace(pretrained=True), "full", scores=scores, sweep=sweep, figure_exact=True,
                            figure_accuracy=1.0, figure_classes=20, settled=12)
    assert verdict(next(r for r in pretrained if r["quantity"] == "exact counts, ours")) == "meets"


def test_sweep_wins_says_where_a_method_leads_and_where_beyond_noise():
    sweep = {"bias count": {"flags": [[1.0] * 8, [1.0] * 8]}, "ours": {"flags": [[1.0] * 8, [0.0] * 8]}}
    sentence = report.sweep_wins(sweep, "bias count", "ours", [4, 64])
    assert "at N = 64 (8 batches per N, the same for both" in sentence and "other N" in sentence
    wide = {"bias count": {"flags": [[1.0] * 8, [1.0] * 8]}, "ours": {"flags": [[1.0] * 7 + [0.0], [1.0] * 8]}}
    assert "does not separate" in report.sweep_wins(wide, "bias count", "ours", [4, 64])
    assert "no more batches" in report.sweep_wins(sweep, "ours", "bias count", [4, 64])


def test_empty_inputs_are_refused(setting):
    _, _, stats, fc_gradient, recover = setting
    with pytest.raises(ValueError, match="trials is empty"):
        study.compare_methods([], fc_gradient, recover, stats, 8)
    with pytest.raises(ValueError, match="values is empty"):
        study.summary([])


# ---- random vs trained network (issue 21, item 5) ----------------------------------------------------------


def test_photograph_crops_are_seeded_halves_in_range():
    target = substitute.photograph_crops(6, 32, seed=0, pool="target")
    assert target.shape == (6, 3, 32, 32) and 0 <= float(target.min()) and float(target.max()) <= 1
    assert torch.equal(target, substitute.photograph_crops(6, 32, seed=0, pool="target"))
    assert not torch.equal(target, substitute.photograph_crops(6, 32, seed=0, pool="aux"))
    assert not torch.equal(target, substitute.photograph_crops(6, 32, seed=1, pool="target"))
    with pytest.raises(ValueError, match="pool"):
        substitute.photograph_crops(2, 32, seed=0, pool="all")
    with pytest.raises(ValueError, match="size"):
        substitute.photograph_crops(2, 4096, seed=0)


@pytest.fixture(scope="module")
def substitutes():
    cfg = get_profile("03_cv_batch_labels", "quick").replace(aux_images=12, substitute_pool=24)
    aux, pool = substitute.substitute_images(cfg, 0)
    return cfg, aux, pool, substitute.substitute_networks(cfg.substitute, aux, seed=0)


def test_substitute_networks_share_trained_features_but_not_heads(substitutes):
    cfg, aux, pool, networks = substitutes
    assert tuple(networks) == substitute.SUBSTITUTE_VARIANTS
    trained, new_head, random = networks["trained"], networks["trained, new head"], networks["random"]
    features = study.penultimate_features(trained, pool)
    assert torch.equal(features, study.penultimate_features(new_head, pool))  # the same feature extractor
    assert not torch.allclose(features, study.penultimate_features(random, pool))
    heads = {name: last_linear(model) for name, model in networks.items()}
    assert {h.out_features for h in heads.values()} == {16}
    assert not torch.equal(heads["trained"].weight, heads["trained, new head"].weight)
    # the trained head is confident on crops it never saw; a fresh head is not
    assert substitute.top_probability(heads["trained"], features) > substitute.top_probability(heads["trained, new head"],
                                                                                     features) + 0.2
    bn = next(m for m in random.modules() if isinstance(m, nn.BatchNorm2d))
    assert float(bn.running_mean.abs().sum()) > 0  # calibrated on the auxiliary crops, not the defaults
    with pytest.raises(ValueError, match="substitute must be one of"):
        substitute.substitute_networks("resnet18", aux)


def test_network_comparison_scores_every_network_on_the_same_batches(substitutes):
    cfg, aux, pool, networks = substitutes
    cfg = cfg.replace(substitute_trials=3, iterations=10)
    summaries, trials = substitute.network_comparison(networks, pool, aux, cfg, seed=4)
    assert list(summaries) == list(networks) and len(trials) == 3
    again, same_trials = substitute.network_comparison({"trained": networks["trained"]}, pool, aux, cfg, seed=4)
    assert all(torch.equal(a[1], b[1]) for a, b in zip(trials, same_trials))
    assert again["trained"]["exact"] == summaries["trained"]["exact"]  # deterministic
    for s in summaries.values():
        assert s["trials"] == 3 and 0 <= s["coarse_right"] <= 3 and s["classes"] == 16 and s["image_size"] == 32
        exact = s["exact"]  # Wilson interval: its ends may miss the mean by a rounding error at 0/n
        assert 0 <= exact.low <= exact.mean + 1e-12 and exact.mean <= exact.high <= 1
        assert 1 / 16 <= s["top_probability"] <= 1 and s["kept_cv"] > 0
    with pytest.raises(ValueError, match="networks is empty"):
        substitute.network_comparison({}, pool, aux, cfg, seed=4)
    with pytest.raises(ValueError, match="share one number of classes"):
        substitute.network_comparison({"a": networks["trained"], "b": nn.Sequential(nn.Flatten(), nn.Linear(3072, 5))},
                                 pool, aux, cfg, seed=4)


def test_comparison_summary_counts_exact_batches(setting):
    _, _, stats, _, _ = setting
    comparison = {"scores": {"ours": [{"accuracy": a, "exact": e} for a, e in
                                      [(1.0, 1.0), (0.75, 0.0), (1.0, 1.0), (1.0, 1.0)]]}, "coarse_right": 3}
    s = substitute.comparison_summary(comparison, stats, 0.3, classes=50, image_size=32)
    assert s["exact"].mean == 0.75 and s["exact"].n == 4 and s["exact"].low < 0.75 < s["exact"].high < 1
    assert s["accuracy"].mean == pytest.approx(0.9375) and s["coarse_right"] == 3 and s["trials"] == 4
    assert s["kept_cv"] == pytest.approx(float(stats.cv[stats.indices].mean()))
    with pytest.raises(ValueError, match="no batch"):
        substitute.comparison_summary({"scores": {"ours": []}, "coarse_right": 0}, stats, 0.3, 50, 32)


def _summary(low, mean, high):
    exact = Interval(mean, low, high, 100)
    return {"exact": exact, "accuracy": Interval(0.9, 0.85, 0.95, 100), "coarse_right": 80,
            "methods": {"ours": exact, "bias count": Interval(0.1, 0.05, 0.2, 100), "LLG": Interval(0.2, 0.1, 0.3, 100)},
            "trials": 100, "kept_cv": 0.3, "top_probability": 0.5, "classes": 16, "image_size": 32}


def test_difference_sentence_reads_the_paired_differences_of_the_same_batches():
    def flagged(flags):
        return {"flags": {"ours": flags}}
    # 10 of 20 vs 8 of 20 on the same batches, differing on 2: not separated
    close = {"random": flagged([1.0] * 8 + [0.0] * 12), "trained": flagged([1.0] * 10 + [0.0] * 10)}
    assert "does not separate" in sub_report.difference_sentence(close, "trained", "random")
    # 15 of 20 vs 5 of 20, the trained network exact wherever the random one is, and on 10 more: separated
    apart = {"random": flagged([1.0] * 5 + [0.0] * 15), "trained": flagged([1.0] * 15 + [0.0] * 5)}
    for order in (("trained", "random"), ("random", "trained")):
        sentence = sub_report.difference_sentence(apart, *order)
        assert sentence.startswith("the ResNet-20, trained substitute gets more batches exact") and "paired" in sentence
        assert "only: 10" in sentence and "only: 0" in sentence
    # 3 of 20 discordant, all one way: a bootstrap interval excludes 0, the exact sign test (p = 0.25) does not
    few = {"random": flagged([0.0] * 20), "trained": flagged([1.0] * 3 + [0.0] * 17)}
    sentence = sub_report.difference_sentence(few, "trained", "random")
    assert "does not separate" in sentence and "sign test p = 0.25" in sentence
    assert stats.sign_test(8, 0) == pytest.approx(2 / 256) and stats.sign_test(0, 0) == 1.0


def test_networks_table_and_rows_cover_every_network():
    cfg = get_profile("03_cv_batch_labels", "quick")
    summaries = {"chapter": _summary(0.4, 0.6, 0.8), "random": _summary(0.3, 0.4, 0.5),
                 "trained": _summary(0.2, 0.3, 0.4)}
    table = sub_report.networks_table(summaries)
    assert all(sub_report.NETWORK_NAMES[key] in table for key in summaries) and "0.40 [0.30, 0.50]" in table
    assert "n/a" in table  # LLG+ was not run in these summaries
    rows = sub_report.substitute_rows(summaries, cfg, "quick")
    assert [r["this_run"] for r in rows] == [0.4, 0.3]  # the chapter's ResNet34 is a row of paper_rows
    assert (rows[0]["low"], rows[0]["high"]) == (0.3, 0.5) and (rows[1]["low"], rows[1]["high"]) == (0.2, 0.4)
    assert not any(r.get("headline") for r in rows)  # the headline is the ImageNet row (test_studies_03_imagenet)
    trained = rows[1]
    assert trained["this_run"] == 0.3 and trained["paper"] == 1.0 and trained["not_comparable"]
    from gitutor.results import verdict
    assert verdict(trained) == "not comparable" and verdict(rows[0]) == (
        "not comparable" if rows[0].get("not_comparable") else "not judged")
    lead = sub_report.best_method_sentence({"ours": [1.0] * 6 + [0.0] * 4, "LLG": [1.0] * 5 + [0.0] * 5,
                                            "Eq. 6 exhaustive": [1.0] * 10})  # left out
    assert lead.startswith("ours gets the most") and "not separated from LLG" in lead
    lead = sub_report.best_method_sentence({"ours": [0.0] * 10, "LLG": [1.0] * 9 + [0.0]})
    assert lead.startswith("LLG gets the most") and "ahead of ours" in lead
    values = sub_report.network_values(summaries)
    assert values["sub_trained_exact"] == pytest.approx(30) and values["sub_chapter_high"] == pytest.approx(80)


def test_glued_sentences_follow_the_results():
    assert "objective's" in report.agreement_sentence(20, 20)
    assert report.agreement_sentence(18, 20).startswith("The search found that minimum in 18 of 20")
    assert "does not show" in report.spread_sentence({"exact": [0.1], "failed": []})
    assert "40 % in the failed" in report.spread_sentence({"exact": [0.1, 0.1], "failed": [0.4]})
    assert report.surface_note([5, 3], [5, 3]) == "is the truth."
    assert report.surface_note([4, 4], [5, 3]).startswith("is not the truth")
    assert report.counts_text(torch.tensor([5, 3])) == "(5, 3)"


def test_generation_loop_source_is_the_loop_of_the_search():
    loop = report.generation_loop_source()
    assert loop.startswith("for _ in tqdm") and "cosine_objective" in loop
    assert "return" not in loop.splitlines()[-1]


def test_effects_sentence_claims_no_effect_when_the_intervals_overlap():
    by_m, by_aux = {5: (0.98, 0.85), 200: (0.97, 0.80)}, {5: (0.97, 0.80), 80: (0.98, 0.85)}
    sentence = report.effects_sentence(by_m, by_aux, 20)
    assert "16 to 17 of 20" in sentence and "no measurable effect" in sentence
    assert "beyond" in report.effects_sentence({5: (1.0, 1.0)}, {5: (0.1, 0.0)}, 20)
