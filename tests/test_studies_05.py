"""Chapter 05's study code: offline substitutes and budgets, the server's view, identity test, tables, rows."""
import numpy as np
import pytest
import torch

import gitutor
from gitutor.federated import client_gradients
from gitutor.federated.case import gradient_case
from gitutor.metrics import LPIPS_NA
from gitutor.chapters.diffusion_user_level.profile import SMOKE_PARAMETERS, chapter_settings, missing_inputs
from gitutor.results import save_results, verdict
from gitutor.stats import NOT_RESOLVED as NOT_RESOLVED_WORD
from gitutor.chapters.diffusion_user_level import experiments as study
from gitutor.chapters.diffusion_user_level import report


def test_substitutes_and_smoke_budget_replace_only_what_is_offline(tmp_path):
    full = gitutor.get_profile("05_diffusion_user_level", "full")
    assert missing_inputs(chapter_settings(full), tmp_path)  # CelebA and the hub prior are not here
    smoke = chapter_settings(full, SMOKE_PARAMETERS["BUDGET"], SMOKE_PARAMETERS["DATA_ROOT"],
                             SMOKE_PARAMETERS["PRETRAINED"])
    assert missing_inputs(smoke, tmp_path) == []
    assert (smoke.data, smoke.prior, smoke.model, smoke.image_size, smoke.channels) == ("lfw", "untrained", "resnet18", 64, 3)
    assert smoke.steps < full.steps and smoke.users == [81, 84]  # the budget's users survive the substitute
    assert chapter_settings(full, None, "bundled").users == gitutor.get_profile("05_diffusion_user_level", "quick").users
    quick = gitutor.get_profile("05_diffusion_user_level", "quick")
    assert chapter_settings(quick) == quick
    with pytest.raises(ValueError, match="BUDGET"):
        chapter_settings(full, "huge")


def test_untrained_prior_is_seeded_and_leaves_the_global_generator_alone():
    state = torch.random.get_rng_state()
    a, b = study.untrained_face_ddpm(16, 3, seed=1), study.untrained_face_ddpm(16, 3, seed=1)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(p, q) for p, q in zip(a.unet.parameters(), b.unet.parameters()))
    x = torch.zeros(1, 3, 16, 16)
    assert a.unet(x, torch.tensor([10])).sample.shape == (1, 3, 16, 16) and a.image_size == 16


def test_diffula_attacks_the_server_view_and_recovers_an_image_of_the_user():
    cfg = gitutor.get_profile("05_diffusion_user_level", "quick").replace(steps=3, record_every=3)
    torch.manual_seed(0)
    model = study.shared_model(cfg.model, cfg)
    x, y = study.chapter_users(cfg, "data", 0)[0]
    case = gradient_case(model, x[:4], y[:4], labels_known=True)
    assert all(torch.equal(a, b) for a, b in zip(case.server_view["update"], client_gradients(model, x[:4], y[:4])))
    prior = study.load_prior(cfg)
    result = study.diffula(case, prior, cfg, study.attack_schedules(cfg), seed=0)
    assert result.images.shape == (1, 1, 32, 32) and len(result.history["zeta"]) == 3
    with pytest.raises(ValueError, match="model"):
        study.shared_model("vgg", cfg)


def test_mean_pairwise_mse_measures_how_alike_the_representatives_are():
    means = [torch.full((1, 1, 8, 8), v) for v in (0.2, 0.5, 0.8)]
    assert report.mean_pairwise_mse(means) == pytest.approx((0.09 + 0.36 + 0.09) / 3)
    assert report.mean_pairwise_mse([means[0], means[0]]) == 0.0
    with pytest.raises(ValueError, match="images"):
        report.mean_pairwise_mse(means[:1])


def test_table_and_rows_average_over_users_and_carry_bounded_intervals(tmp_path):
    from gitutor.results import headline_row
    from gitutor.chapters.diffusion_user_level import identity as identity_study

    def user(mse, face_rate=1.0, lpips=None):
        return {"mse": mse, "psnr": 10.0 + mse, "ssim": 0.5 - mse, "lpips": lpips, "face_rate": face_rate}
    rows = {name: [user(0.1), user(0.3), user(0.2)] for name in study.METHODS}
    assert report.average(rows, "intra-user", "mse") == pytest.approx(0.2)
    assert report.average(rows, "intra-user", "lpips") is None
    table = report.method_table(rows)
    assert "0.2000" in table and table.count("\n") == len(study.METHODS) + 1
    means = [torch.rand(1, 1, 8, 8, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    candidates = {"IG user-level, no prior": means, "DiffULA (diffusion prior)": [means[0]] * 3}
    identity = identity_study.identity_study(candidates, means, [0, 0, 1])
    effect = identity_study.prior_effect(rows, identity, "DiffULA (diffusion prior)", "IG user-level, no prior")
    out = report.chapter_rows(rows, identity=identity, effect=effect, ordering="holds",
                              intervals={"IG sample-level (matched)": (0.1, 0.01), "DiffULA (diffusion prior)": (0.2, 0.01),
                                         "intra-user": (0.3, 0.01)}, users=3, differences="test",
                              claim=report.claim_judgement(effect, 3, False, "stand-in prior"))
    save_results("05_diffusion_user_level", "quick", out, tmp_path)
    head = headline_row(out)
    # the headline: the prior's paired effect on MSE (no LPIPS here), quoting the paper's claim
    assert head is out[0] and head["quantity"].startswith("difference in MSE") and verdict(head) == "not judged"
    assert head["claim_outcome"] == "not comparable" and head["claim"] == report.CLAIM
    pairing = next(r for r in out if r["quantity"] == "own user identified: pairing score, DiffULA")
    assert pairing["this_run"] == 0.5 and "chance 0.50: not resolved" in pairing["setting"]
    assert 0.0 <= pairing["low"] <= 0.5 <= pairing["high"] <= 1.0 and verdict(pairing) == "not judged"
    found = next(r for r in out if r["quantity"].startswith("own user identified among 3 users (closed set"))
    assert found["this_run"] == pytest.approx(1 / 3, abs=1e-3) and "chance 0.33: not resolved" in found["setting"]
    assert "not_comparable" not in found  # CelebA-like users: the identity rows are read
    # one photograph per user (the quick profile's LFW users): every identity row says why no verdict uses it
    blind = report.chapter_rows(rows, identity=identity, effect=effect, ordering="holds",
                                intervals={"IG sample-level (matched)": (0.1, 0.01)}, users=3, differences="test",
                                distinct_photographs=False)
    identity_rows = [r for r in blind if r["quantity"].startswith("own user identified")]
    assert len(identity_rows) == 4 and all("one photograph" in r["not_comparable"] for r in identity_rows)
    assert all("not_comparable" not in r for r in blind if r["quantity"].startswith("difference in"))
    assert not any(r["quantity"].startswith("LPIPS difference") for r in out)  # no LPIPS step given: no row
    from gitutor.stats import interval as summary
    stepped = report.chapter_rows(rows, identity=identity, effect=effect, ordering="holds",
                                  intervals={"IG sample-level (matched)": (0.1, 0.01)}, users=3, differences="test",
                                  lpips_step=(summary([-0.1, -0.2, -0.15]), "DiffULA < IG sample-level"))
    step = next(r for r in stepped if r["quantity"].startswith("LPIPS difference, DiffULA − IG sample-level"))
    prior_rows = [r for r in stepped if r["quantity"].startswith("difference in")]
    assert prior_rows and not any("steps" in r["setting"] for r in prior_rows)  # no budget given: none named
    budgeted = report.chapter_rows(rows, identity=identity, effect=effect, ordering="holds",
                                   intervals={"IG sample-level (matched)": (0.1, 0.01)}, users=3,
                                   differences="test", baseline_steps=300)
    named = [r for r in budgeted if r["quantity"].startswith("difference in")]
    assert len(named) == len(prior_rows) and all(", IG at 300 steps:" in r["setting"] for r in named)
    assert step["paper"] == pytest.approx(-0.2126) and step["this_run"] == pytest.approx(-0.15)
    assert "DiffULA < IG sample-level" in step["setting"] and verdict(step) == "not comparable"
    assert "64-px CelebA" in step["not_comparable"]  # Table 1a's LPIPS scale is not this run's
    judged = report.chapter_rows(rows, identity=identity, effect=effect, ordering="holds",
                                 intervals={"IG sample-level (matched)": (0.1, 0.01)}, users=3, differences="test",
                                 lpips_step=(summary([-0.1, -0.2, -0.15]), "DiffULA < IG sample-level"),
                                 paper_setting=True)
    step = next(r for r in judged if r["quantity"].startswith("LPIPS difference, DiffULA − IG sample-level"))
    assert step["better"] == "lower" and verdict(step) in ("meets", "falls short", "not resolved")
    ordering = next(r for r in out if r["quantity"].startswith("ordering"))
    assert ordering["this_run"].startswith("holds: IG sample-level 0.1000 ± 0.0100")
    face = next(r for r in out if r["quantity"].startswith("face detection rate, DiffULA"))
    assert face["this_run"] == 1.0 and verdict(face) == "not comparable"  # LBP detector: not the paper's scale
    assert "LBP detector" in face["not_comparable"]
    for row in out:
        if "low" in row and row["unit"] in ("MSE", "fraction", "fraction of pairs"):
            assert row["low"] >= (-1 if "−" in row["quantity"] else 0) and row["high"] <= 1
    assert out[-1]["this_run"] == LPIPS_NA


def test_differences_name_the_profile_and_flag_offline_substitutes():
    quick = chapter_settings(gitutor.get_profile("05_diffusion_user_level", "quick"))
    assert report.differences(quick, "quick", 5, 6e5).startswith("quick profile: 32×32 grey LFW users")
    full = gitutor.get_profile("05_diffusion_user_level", "full")
    assert "SUBSTITUTES" not in report.differences(chapter_settings(full), "full", 50, 1e8)
    assert "trained on CelebA-HQ" in report.differences(chapter_settings(full), "full", 50, 1e8)
    assert "SUBSTITUTES" in report.differences(chapter_settings(full, None, "bundled", False), "full", 5, 1e6)


def _result(ratio, clip, images, zeta=1.0):
    from gitutor.attacks.result import AttackResult
    return AttackResult(images=images, labels=None,
                        history={"grad_ratio": ratio, "clip_scale": clip, "zeta": [zeta] * len(ratio),
                                 "gradient_distance": [1.0] * len(ratio)},
                        snapshots=[(0, images), (2, images)])


def test_matching_weight_study_pairs_each_user_with_itself():
    """λ = 1 against the profile's λ on the same users: per-user paired differences of the own-user margin and
    the MSE to the user's photos, read by their intervals; the clip shares and the ratio as the history says."""
    from gitutor.chapters.diffusion_user_level.weight import matching_weight_study, own_user_margin

    gen = torch.Generator().manual_seed(0)
    users = [torch.rand(4, 1, 8, 8, generator=gen) for _ in range(5)]
    shared = torch.rand(1, 1, 8, 8, generator=gen)
    weighted = [_result([5.0, 5.0], [0.5, 1.0], x.mean(0, keepdim=True)) for x in users]  # each its own user's mean
    plain = [_result([1e-3, 3e-3], [1.0, 1.0], shared + 0.01 * k) for k in range(4)]  # one image for everyone
    study_ = matching_weight_study(plain, weighted, users, 1e5)
    assert study_["n"] == 4 and study_["clip_plain"] == 0.0 and study_["clip_weighted"] == 0.5
    assert study_["ratio_plain"] == pytest.approx(2e-3)
    margin, mse = study_["intervals"]["margin"], study_["intervals"]["mse"]
    assert margin.n == 4 and margin.low > 0 and mse.high < 0
    assert study_["read"] == {"margin": "λ = 100000 > λ = 1", "mse": "λ = 100000 < λ = 1"}
    # an image that does not depend on the user has margin ~0 on average; its own user's mean photo > 0
    means = [x.mean(0, keepdim=True) for x in users]
    assert (own_user_margin(means, means) > 0).all() and abs(own_user_margin([shared] * 5, means).mean()) < 1e-9
    # λ = 1's own image, one for everyone: its margin's interval holds 0
    alone = study_["margin_plain"]
    assert alone.n == 4 and alone.low <= 0 <= alone.high
    own = matching_weight_study(weighted[:4], weighted, users, 1e5)  # λ = 1 images that are their users' means
    assert own["margin_plain"].low > 0
    with pytest.raises(ValueError, match="plain"):
        matching_weight_study(plain[:1], weighted, users, 1e5)
    with pytest.raises(ValueError, match="representatives"):
        own_user_margin(means + means, means)


def test_match_outcomes_agree_with_the_rate():
    from gitutor.attacks.user_level import own_user_match_rate, own_user_matches
    matrix = np.array([[0.1, 0.5, 0.6], [0.4, 0.2, 0.3], [0.1, 0.9, 0.5]])
    assert own_user_matches(matrix) == [True, True, False]
    assert np.mean(own_user_matches(-matrix, "higher")) == own_user_match_rate(-matrix, better="higher")
    with pytest.raises(ValueError, match="better"):
        own_user_matches(matrix, "best")


def test_ordering_study_and_failure_case():
    def user(mse):
        return {"mse": mse, "psnr": 10.0, "ssim": 0.5, "lpips": None, "face_rate": 1.0}
    rows = {"IG sample-level (matched)": [user(v) for v in (0.10, 0.11, 0.12)],
            "DiffULA (diffusion prior)": [user(v) for v in (0.20, 0.21, 0.22)],
            "intra-user": [user(v) for v in (0.30, 0.31, 0.32)]}
    order = report.ordering_study(rows)
    assert order["paper_order"] == "holds"
    assert order["lpips"] is None and order["lpips_read"] is None
    lpips_rows = {name: [dict(r, lpips=v + 0.1 * k) for k, r in enumerate(rows[name])]
                  for name, v in (("IG sample-level (matched)", 0.5), ("DiffULA (diffusion prior)", 0.4),
                                  ("intra-user", 0.3))}
    with_lpips = report.ordering_study(lpips_rows)  # every user 0.1 lower with DiffULA: Table 1a's LPIPS order
    assert with_lpips["lpips"].mean == pytest.approx(-0.1) and with_lpips["lpips_read"] == "DiffULA < IG sample-level"
    assert list(order["step_read"].values()) == ["holds", "holds"]  # each step, glued on the page
    assert order["intervals"]["intra-user"][0] == pytest.approx(0.31) and "0.3100" in order["table"]
    # paired: unpaired intervals overlap, yet every user is 0.01 worse with DiffULA than with IG
    rows["IG sample-level (matched)"] = [user(v) for v in (0.10, 0.30, 0.50)]
    rows["DiffULA (diffusion prior)"] = [user(v) for v in (0.11, 0.31, 0.51)]
    rows["intra-user"] = [user(v) for v in (0.12, 0.30, 0.53)]
    order = report.ordering_study(rows)
    assert order["steps"]["IG sample-level (matched)", "DiffULA (diffusion prior)"].low > 0
    assert order["paper_order"] == "not resolved at this budget" and "(paired)" in order["table"]
    assert list(order["step_read"].values()) == ["holds", "not resolved at this budget"]
    rows["intra-user"] = [user(v) for v in (0.05, 0.25, 0.45)]
    assert report.ordering_study(rows)["paper_order"] == "reversed"
    rows["intra-user"] = [user(v) for v in (0.0, 0.5, 0.1)]
    rows["DiffULA (diffusion prior)"] = [user(v) for v in (0.2, 0.3, 0.1)]

    truth = torch.stack([torch.zeros(1, 4, 4), torch.ones(1, 4, 4)])  # mean image 0.5: MSE 0.25
    examples = [(truth, None, None, _result([1.0], [1.0], torch.full((1, 1, 4, 4), v))) for v in (0.5, 0.0, 0.4)]
    failure = report.failure_case(rows, examples)
    assert failure["user"] == 1 and failure["mse"] == pytest.approx(0.3)
    assert failure["mean_image"] == pytest.approx(0.25) and failure["intra"] == pytest.approx(0.5)
    assert failure["result"] is examples[1][3]


def test_timing_rows_keep_seconds_apart_from_results(tmp_path):
    cfg = gitutor.get_profile("05_diffusion_user_level", "quick")
    timings = report.timing_rows(cfg, {"DiffULA (diffusion prior)": [10.0, 12.0]}, 99.94, "quick", "test")
    assert [t["this_run"] for t in timings] == [11.0, 99.9] and timings[0]["paper"] == 23.3 * 60
    save_results("05_diffusion_user_level", "quick", [dict(timings[1], unit="s")], tmp_path,
                 timings=timings)


def test_chapter_figures_have_the_panels_the_page_describes():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gitutor.chapters.diffusion_user_level import figures
    users = [(torch.rand(20, 1, 8, 8), torch.zeros(20, dtype=torch.long)) for _ in range(3)]
    first, batch = figures.users_figures(users)
    assert len([a for a in first.axes if a.images]) == 3 and len([a for a in batch.axes if a.images]) == 16
    image = torch.rand(1, 1, 8, 8)
    result = _result([1e-3, 1e-3], [1.0, 1.0], image)
    fig, ax = figures.attack_figures(result, users[0][0], 100)
    assert len([a for a in fig.axes if a.images]) == 4 and ax.get_title().startswith("matching loss")
    assert ax.get_ylabel()  # the matching loss has a labelled axis
    ax, grid = figures.matching_weight_figures([result, result], [result, result], 1e5)
    assert len(ax.get_lines()) == 3 and len([a for a in grid.axes if a.images]) == 4
    with pytest.raises(ValueError, match="plain"):
        figures.matching_weight_figures([result], [result, result], 1e5)
    budget = figures.budget_figure([result, result], [result])
    assert len(budget.get_lines()) == 2 + 3 and budget.get_yscale() == "log"  # two medians, three lr drops
    with pytest.raises(ValueError, match="diffula"):
        figures.budget_figure([result], [])
    examples = [(users[0][0], users[0][0], result, result)] * 2
    assert len([a for a in figures.examples_figure(examples).axes if a.images]) == 10
    assert len([a for a in figures.failure_figure(users[0][0], result).axes if a.images]) == 9
    matrices = figures.identity_matrices({"a": np.eye(3), "b": np.ones((3, 3)) * 0.5})
    panels = [ax for ax in matrices.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["a", "b"]
    assert {ax.images[0].get_clim() for ax in panels} == {(0.0, 1.0)}  # one colour scale for both panels
    # the failure strip (6 photos + 3) on two rows, so its thumbnails stay legible at page width
    rows = {round(a.get_position().y0, 3) for a in figures.failure_figure(users[0][0], result).axes if a.images}
    assert len(rows) == 2
    with pytest.raises(ValueError, match="users"):
        figures.users_figures([])
    plt.close("all")


def test_the_claim_is_judged_from_the_priors_paired_effect_and_only_with_the_papers_kind_of_prior():
    from gitutor.stats import Interval

    def effect(**helps):
        return {"helps": helps, "intervals": {m: Interval(-0.02, -0.03, -0.01, 10) for m in helps}}

    mixed = effect(lpips="helps", mse="hurts", ssim="hurts")
    stand_in = report.claim_judgement(mixed, 10, False, "stand-in prior")
    assert stand_in["claim_outcome"] == "not comparable" and "Abstract" in stand_in["claim"]
    assert stand_in["claim_reason"] == ("stand-in prior; the prior's paired effect over 10 users: LPIPS helps "
                                        "(-0.02), MSE hurts (-0.02), SSIM hurts (-0.02)")
    unresolved = report.claim_judgement(effect(lpips="not resolved at this budget"), 10, False, "p")
    assert unresolved["claim_reason"].endswith("LPIPS not resolved at this budget (-0.02)")
    assert report.claim_judgement(mixed, 10, True, "p")["claim_outcome"] == "not resolved"
    assert report.claim_judgement(effect(lpips="helps", mse="helps"), 10, True, "p")["claim_outcome"] == "consistent"
    assert report.claim_judgement(effect(lpips="hurts", mse="helps"), 10, True, "p")["claim_outcome"] == "refuted"
    no_lpips = report.claim_judgement(effect(mse="hurts"), 10, True, "p")
    assert no_lpips["claim_outcome"] == "refuted"  # MSE decides when LPIPS has no backbone
    quick = gitutor.get_profile("05_diffusion_user_level", "quick")
    assert not report.paper_prior(quick, "quick") and "stand-in" in report.prior_note(quick, "quick", 640_000)
    full = gitutor.get_profile("05_diffusion_user_level", "full")
    assert full.prior in report.VICTIM_DATA_PRIORS  # CelebA-HQ's DDPM against CelebA users: the leak is named
    assert not report.paper_prior(full, "full") and "unrealistically strong" in report.prior_note(full, "full", 1)
    disjoint = full.replace(prior="someone/ddpm-ffhq-256")
    assert report.victim_data_leak(full) == "CelebA-HQ"  # data for the page's yes / no
    assert report.paper_prior(disjoint, "full") and report.victim_data_leak(disjoint) is None


def test_two_users_runs_do_not_share_their_noise():
    """The page seeds each user's DiffULA run with its own seed (gitutor.seeding.trial_seeds): the start x_T,
    the ε draws and the τ jitter differ between users, and the same seed repeats a run exactly."""
    cfg = gitutor.get_profile("05_diffusion_user_level", "quick").replace(steps=2, record_every=1)
    seeds = gitutor.seeding.trial_seeds(0, 2, "DiffULA")
    assert seeds[0] != seeds[1]
    torch.manual_seed(0)
    model = study.shared_model(cfg.model, cfg)
    x, y = study.chapter_users(cfg, "data", 0)[0]
    case = gradient_case(model, x[:4], y[:4], labels_known=True)
    prior = study.load_prior(cfg)
    schedules = study.attack_schedules(cfg)
    first, second, again = (study.diffula(case, prior, cfg, schedules, seed=s) for s in (*seeds, seeds[0]))
    assert not torch.equal(first.snapshots[0][1], second.snapshots[0][1])  # different noise, same user
    assert torch.equal(first.images, again.images)


def test_the_pages_users_get_their_own_seeds_and_each_user_one_seed_for_both_weights(monkeypatch):
    """diffula_users (the page's only way to run Algorithm 1 on the users) gives user k the seed
    trial_seeds(seed, U, "DiffULA")[k]: no two users share their noise, and the λ = 1 rerun of a user repeats
    its seed (the λ comparison is paired)."""
    from types import SimpleNamespace

    calls = []
    monkeypatch.setattr(study, "diffula", lambda case, prior, cfg, schedules, *, seed, matching_weight=None, **arm:
                        calls.append((case, seed, matching_weight, arm)) or SimpleNamespace(seed=seed))
    cases = [f"user {k}" for k in range(4)]
    weighted = study.diffula_users(cases, None, None, {}, 7)
    plain = study.diffula_users(cases, None, None, {}, 7, matching_weight=1.0, users=2)
    seeds = gitutor.seeding.trial_seeds(7, 4, "DiffULA")
    assert [c[:2] for c in calls[:4]] == list(zip(cases, seeds)) and len(set(seeds)) == 4
    assert [c[:2] for c in calls[4:]] == list(zip(cases[:2], seeds[:2])) and calls[4][2] == 1.0
    assert [r.seed for r in plain] == [r.seed for r in weighted[:2]]
    control = study.no_prior_users(cases, None, None, {}, 7, users=3)  # the same seeds, prior off, t* = 0
    assert [r.seed for r in control] == seeds[:3]
    assert calls[-1][3] == {"prior_weight": 0.0, "t_star": 0} and calls[0][3] == {"prior_weight": 1.0, "t_star": None}
    for bad in (0, 5, True):
        with pytest.raises(ValueError, match="users"):
            study.diffula_users(cases, None, None, {}, 7, users=bad)


def test_the_page_runs_algorithm_1_on_its_users_only_through_diffula_users():
    """The seeding that the test above pins is the page's: its code cells run Algorithm 1 on users only by
    study.diffula_users (never study.diffula with a seed of their own)."""
    import json
    from pathlib import Path

    notebook = Path(__file__).resolve().parents[1] / "notebooks" / "05_diffusion_user_level.ipynb"
    code = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code")
    assert code.count("study.diffula_users(") >= 2 and "study.diffula(" not in code


def test_new_arms_share_diffulas_seeds_and_the_no_prior_control_drops_only_the_prior():
    cfg = gitutor.get_profile("05_diffusion_user_level", "quick").replace(steps=3, record_every=3, t_star=20)
    torch.manual_seed(0)
    model = study.shared_model(cfg.model, cfg)
    cases = [gradient_case(model, x[:4], y[:4], labels_known=True)
             for x, y in study.chapter_users(cfg.replace(users=[81, 84]), "data", 0)]
    prior = study.load_prior(cfg)
    schedules = study.attack_schedules(cfg)
    runs = study.diffula_users(cases, prior, cfg, schedules, 0)
    plain = study.diffula_users(cases, prior, cfg, schedules, 0, t_star=0)
    control = study.no_prior_users(cases, prior, cfg, schedules, 0, users=1)
    for run, same in zip(runs, plain):  # t* = 0 read from the same run
        assert torch.equal(study.before_final_denoising(run), same.images)
    assert len(control) == 1
    assert control[0].history["grad_ratio"][0] == pytest.approx(runs[0].history["grad_ratio"][0])
    assert (control[0].images - plain[0].images).abs().max() > 0.01  # the prior term moved DiffULA
    runs[0].snapshots.pop()
    with pytest.raises(ValueError, match="result"):
        study.before_final_denoising(runs[0])


def test_know_nothing_controls_are_the_other_users_mean_and_a_prior_sample():
    photos = [torch.full((2, 1, 8, 8), v) for v in (0.2, 0.4, 0.9)]
    photos[2][1] = 0.5
    generic = study.generic_faces(photos)
    assert [float(g.mean()) for g in generic] == pytest.approx([(0.4 * 2 + 0.9 + 0.5) / 4, (0.2 * 2 + 0.9 + 0.5) / 4, 0.3])
    samples = torch.rand(2, 1, 16, 16)
    controls = study.know_nothing_controls(photos, samples)
    assert all(torch.equal(a, b) for a, b in zip(controls[study.GENERIC_FACE], generic, strict=True))
    prior_only = controls[study.PRIOR_SAMPLE]
    assert [p.shape for p in prior_only] == [(1, 1, 8, 8)] * 3 and torch.equal(prior_only[0], prior_only[2])
    scores = study.score_images(generic, photos)
    assert scores[2]["mse"] == pytest.approx(((0.3 - 0.9) ** 2 + (0.3 - 0.5) ** 2) / 2, rel=1e-5)
    assert set(scores[0]) == {"mse", "psnr", "ssim", "lpips", "face_rate"}
    assert study.score_images(generic[:2], photos) == scores[:2]  # an arm of the first two users
    for images in ([], generic + generic[:1]):
        with pytest.raises(ValueError, match="images"):
            study.score_images(images, photos)
    with pytest.raises(ValueError, match="photos"):
        study.generic_faces(photos[:1])
    with pytest.raises(ValueError, match="photos"):
        study.generic_faces([photos[0], torch.zeros(2, 1, 4, 4)])


def test_arm_differences_are_paired_and_read_with_each_scores_direction():
    def arm(mse, ssim):
        return [dict(mse=m, ssim=s, lpips=None) for m, s in zip(mse, ssim)]

    rows = {"a": arm([0.10, 0.20, 0.30, 0.40], [0.5, 0.6, 0.7, 0.8]),
            "b": arm([0.12, 0.23, 0.31, 0.43], [0.5, 0.6, 0.7, 0.8]),
            "c": arm([0.30, 0.10, 0.35, 0.20], [0.6, 0.5, 0.9, 0.6])}
    out = report.arm_differences(rows, {"ab": ("a", "b"), "ac": ("a", "c")})
    # a − b is small but the same sign for every user: paired, it is resolved (a's intervals overlap b's)
    assert out["values"]["ab_mse"] == pytest.approx(-0.0225) and out["values"]["ab_mse_word"] == "better"
    assert out["values"]["ab_mse_high"] < 0 and "ab_lpips" not in out["values"]
    assert out["values"]["ac_mse_word"] == NOT_RESOLVED_WORD
    assert out["values"]["ab_ssim"] == 0.0 and out["values"]["ab_ssim_word"] == NOT_RESOLVED_WORD
    assert "a − b" in out["table"] and out["intervals"]["ac"]["mse"].n == 4
    rows["short"] = rows["b"][:2]  # an arm run on the first two users only
    assert report.arm_differences(rows, {"as": ("a", "short")})["intervals"]["as"]["mse"].n == 2
    worse = report.arm_differences(rows, {"ba": ("b", "a")})
    assert worse["values"]["ba_mse_word"] == "worse"
    with pytest.raises(ValueError, match="pairs"):
        report.arm_differences(rows, {"ad": ("a", "d")})
    with pytest.raises(ValueError, match="pairs"):
        report.arm_differences(rows, {})


def test_arm_rows_record_the_controls_and_every_paired_difference(tmp_path):
    rows = {"a": [dict(mse=m, ssim=0.5, lpips=0.2) for m in (0.1, 0.2, 0.3)],
            "b": [dict(mse=m, ssim=0.4, lpips=0.3) for m in (0.2, 0.31, 0.42)],
            "ctrl": [dict(mse=m, ssim=0.1, lpips=None) for m in (0.02, 0.04, 0.06)]}
    pairs = {"ab": ("a", "b")}
    arms = report.arm_differences(rows, pairs)
    out = report.arm_rows(rows, arms, pairs, ["ctrl"], "quick profile")
    assert [r["unit"] for r in out] == ["MSE", "SSIM", "MSE difference", "SSIM difference", "LPIPS difference"]
    assert out[0]["this_run"] == pytest.approx(0.04) and out[0]["low"] <= 0.04 <= out[0]["high"]
    assert out[2]["this_run"] == pytest.approx(-0.11) and "a is better" in out[2]["setting"]
    assert all("better" not in r and r["paper"] == "not reported" for r in out)  # nothing to judge against
    save_results("05_arms_test", "quick", out, tmp_path)  # a valid results record
    with pytest.raises(ValueError, match="controls"):
        report.arm_rows(rows, arms, pairs, ["nope"], "quick profile")
    with pytest.raises(ValueError, match="arms"):
        report.arm_rows(rows, arms, {"ba": ("b", "a")}, ["ctrl"], "quick profile")
