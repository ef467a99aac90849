"""Chapter 03's experiments (gitutor.chapters.cv_batch_labels.experiments*): Stage I of Ye et al., AAAI 2024, on the
chapter's random ResNet34 and on a random vs the trained substitute ResNet-20."""
import inspect
import textwrap
import types

import pytest
import torch
from torch import nn

from gitutor import get_profile, stats
from gitutor.data import OfflineDataError
from gitutor.labels import FeatureCV, coarse_labels, evolve_label_counts
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
    assert "short" not in sweep["ours"]  # no statistics given: the search's misses are not told apart
    stats = setting[2]
    checked, _ = study.batch_size_sweep(None, 64, fc_gradient, recover, CFG, make_generator(0), stats=stats)
    assert checked["ours"]["short"] == [0, 0] and checked["ours"]["flags"] == sweep["ours"]["flags"]
    with_plus, _ = study.batch_size_sweep(None, 64, fc_gradient, recover, CFG, make_generator(0),
                                          llg_plus=fit_llg_plus(fc, class_features[:20]))
    assert with_plus["LLG+"]["exact"] == [1.0, 1.0]  # equal feature sums: every image has the same impact


def test_eq6_scores_and_settled_generation(setting):
    _, _, stats, fc_gradient, _ = setting
    trials = _trials(2)
    assert study.eq6_scores(trials, [fc_gradient(i, l) for i, l in trials], 8, stats) == (1.0, 1.0, [1.0, 1.0])


def test_settled_generation_is_a_settling_rule_not_a_cap():
    # the best J last changes at generation 2 and stays for 3 more: settled with patience 3, not with 4
    assert study.settled_generation([0.5, 0.2, 0.1, 0.1, 0.1, 0.1], patience=3) == 2
    assert study.settled_generation([0.5, 0.2, 0.1, 0.1, 0.1, 0.1], patience=4) is None
    # a history that still falls at its last generation (a cap) has not settled
    assert study.settled_generation(list(range(300, 0, -1)), patience=1) is None
    with pytest.raises(ValueError, match="empty"):
        study.settled_generation([])


def test_search_until_settled_reads_the_long_search_beside_the_paper_budget(setting):
    _, _, stats, fc_gradient, _ = setting
    (indices, labels), = _trials(1)
    w, _ = fc_gradient(indices, labels)
    classes = coarse_labels(w)
    run = study.search_until_settled(w, classes, 8, stats, CFG, seed=0, labels=labels)
    assert len(run["history"]) == study.SETTLE_CAP + 1
    assert run["settled"] is not None and run["settled"] <= CFG.iterations  # Eq. 6 exact here: found early
    assert run["wrong"] == run["wrong_budget"] == 0 and run["j_final"] <= run["j_budget"]
    assert run["j_truth"] == pytest.approx(run["j_final"])
    table = report.settle_table([run, {**run, "settled": None}], CFG.iterations, study.SETTLE_CAP)
    assert f"not settled at {study.SETTLE_CAP}" in table
    wrong_set = study.search_until_settled(w, classes[:-1], 8, stats, CFG, seed=0, labels=labels)
    assert wrong_set["wrong"] is None and wrong_set["j_truth"] is None  # no truth for a wrong class set


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
    sweep = {"ours": {"flags": [[1.0, 0.0]] * (len(cfg.batch_sizes) - 1) + [[0.0] * 8],
                      "short": [0] * len(cfg.batch_sizes)}}
    rows = paper_rows(cfg, "quick", scores=scores, sweep=sweep, figure_exact=False, figure_accuracy=0.984,
                      figure_classes=20, settled=12, cap=5000)
    assert not cfg.pretrained
    for row in rows:  # every row on the random ResNet34, the search's speed included: no verdict
        assert verdict(row) == ("not comparable" if row.get("not_comparable") else "not judged") and (
            row["paper"] == "not reported" or "not comparable" in
                                                      row["differences"] or not isinstance(row["paper"], float))
    b64 = next(r for r in rows if r["setting"].endswith("batch-size sweep"))
    assert b64["this_run"] == 0.0 and 0 <= b64["low"] <= b64["high"] <= 1  # 0 of 8: Wilson [0, 0.32]
    assert "cap does not set this rate" in b64["differences"]
    # 3 of the 8 wrong batches stopped short of a truth Eq. 6 prefers: the interval reaches 3 of 8 exact
    sweep["ours"]["short"][-1] = 3
    widened = next(r for r in paper_rows(cfg, "quick", scores=scores, sweep=sweep, figure_exact=False,
                                         figure_accuracy=0.984, figure_classes=20, settled=12, cap=5000)
                   if r["setting"].endswith("batch-size sweep"))
    assert widened["low"] == b64["low"] and widened["high"] > b64["high"] and "3 of the 8" in widened["differences"]
    accuracy = rows[0]
    assert 0 <= accuracy["low"] <= accuracy["this_run"] <= accuracy["high"] <= 1  # cut to [0, 1]
    assert rows[-1]["this_run"] == 12 and rows[-1]["n"] == 1 and "fewer than 200" in rows[-1]["not_comparable"]
    pretrained = paper_rows(cfg.replace(pretrained=True), "full", scores=scores, sweep=sweep, figure_exact=True,
                            figure_accuracy=1.0, figure_classes=20, settled=12, cap=5000)
    assert verdict(next(r for r in pretrained if r["quantity"] == "exact counts, ours")) == "meets"
    assert verdict(pretrained[-1]) == "meets"  # settled at 12 ≤ 200 on the pretrained network: judged
    unsettled = paper_rows(cfg.replace(pretrained=True), "full", scores=scores, sweep=sweep, figure_exact=True,
                           figure_accuracy=1.0, figure_classes=20, settled=None, cap=5000)
    assert unsettled[-1]["this_run"] == "not settled at 5000" and verdict(unsettled[-1]) == "not judged"


def test_paired_values_give_numbers_and_one_word_from_one_interval():
    values = report.paired_values([1.0] * 15 + [0.0] * 5, [1.0] * 5 + [0.0] * 15, "d")
    assert values["d"] == pytest.approx(50) and values["d_n"] == 20 and values["d_side"] == "above"
    assert values["d_only_first"] == 10 and values["d_only_second"] == 0 and values["d_low"] > 0
    assert report.paired_values([0.0] * 20, [1.0] * 20, "d")["d_side"] == "below"
    close = report.paired_values([1.0] * 10 + [0.0] * 10, [1.0] * 8 + [0.0] * 12, "d")
    assert close["d_side"] == "touching" and close["d_low"] == 0 < close["d_high"]  # 2 discordant, one way
    mixed = report.paired_values([1.0] * 3 + [0.0] * 17, [0.0] * 3 + [1.0] * 2 + [0.0] * 15, "d")
    assert mixed["d_side"] == "across" and mixed["d_low"] < 0 < mixed["d_high"]
    one = report.paired_values([1.0] + [0.0] * 19, [0.0] * 20, "d")  # one discordant batch
    assert one["d_low"] == 0 and one["d_side"] == "touching"  # touches 0: not separated, not "across"
    assert -100 <= close["d_low"] and close["d_high"] <= 100
    with pytest.raises(ValueError):
        report.paired_values([1.0], [1.0, 0.0], "d")


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
    assert torch.equal(features, study.penultimate_features(trained, pool, chunk=3, progress=True))  # bar, chunks
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
    values = sub_report.network_values(summaries)
    assert values["sub_trained_exact"] == pytest.approx(30) and values["sub_chapter_high"] == pytest.approx(80)


def test_generation_loop_source_is_the_code_that_runs():
    from gitutor.labels.count_search import _crossover, _mutate
    code = report.generation_loop_source()
    assert code.startswith(inspect.getsource(_crossover)) and inspect.getsource(_mutate) in code
    loop = code[code.index("rng = np.random.default_rng(seed)"):]
    assert textwrap.indent(loop, "    ") in inspect.getsource(evolve_label_counts)  # verbatim: the package's lines
    assert "cosine_objective" in loop and loop.splitlines()[-1].startswith("return LabelCountSearch(")


def test_effects_keep_per_batch_flags_for_a_paired_comparison(setting):
    _, _, stats, fc_gradient, _ = setting
    trials = _trials(2)
    cfg = types.SimpleNamespace(**vars(CFG), m_values=[5], aux_counts=[30], aux_images=30, top_m=20)
    aux = _profile_features(40, make_generator(1))
    by_m, by_aux = study.aux_and_m_effects(trials, [fc_gradient(i, l) for i, l in trials], 8, aux, cfg)
    (accuracy, exact, flags), = by_m.values()
    assert len(flags) == 2 and exact == sum(flags) / 2 and set(by_aux) == {30}
    assert "M = 5" in report.effects_table(by_m, by_aux)
