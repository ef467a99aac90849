"""Chapter 04's native recording (setting_study.native): each method as its authors configure it, the sanity
arm, the prior-to-matching ratios, and the checks on its arguments."""
from __future__ import annotations

import pytest
import torch

from gitutor.attacks import inverting_gradients
from gitutor.attacks.loop import optimise_images, prior_gradients
from gitutor.chapters.stepwise_gradinversion.setting_study import native
from gitutor.federated import client_gradients

pytest.importorskip("timm")


@pytest.fixture(scope="module")
def lite():
    from gitutor.chapters.stepwise_gradinversion.setting_study.trained import trained_model

    try:
        return trained_model()
    except Exception as error:  # noqa: BLE001 - the offline assets are an extra
        pytest.skip(f"EfficientNet-Lite0 weights not installed: {error}")


def test_a_sanity_arm_starts_at_the_truth_and_reports_its_priors(lite):
    setting = native.NativeSetting(image_size=64, start_noise=native.SANITY_SIGMA)
    out = native.trial({}, setting=setting, method="Stepwise", batch=1, iterations=12, seed=0)
    first = out["curve"][0]
    assert first[0] == 0 and first[1] > 35 and first[2] > 0.9  # the truth plus σ = 0.01 noise
    assert out["distance"]["truth+noise"] < 1 and out["distance"]["final"] >= 0
    ratios = out["prior_gradients"]
    assert set(ratios) and all({"matching", "TV", "R_BN", "TV/matching", "R_BN/matching", "sign_agreement"}
                               <= set(r) for r in ratios.values())
    assert [t for t, _ in out["loss"]][:2] == [0, 1] and len(out["gradient_distance"]) == 12
    assert out["images"].shape == (1, 3, 64, 64)


def test_the_attack_arm_starts_from_noise(lite):
    out = native.trial({}, setting=native.NativeSetting(image_size=64), method="Inverting Gradients", batch=0,
                       iterations=3, seed=0)
    assert out["curve"][0][1] < 15  # noise, not the photograph
    assert set(next(iter(out["prior_gradients"].values()))) == {"matching", "TV", "TV/matching", "sign_agreement"}


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(image_size=100), ValueError, "image_size"), (dict(start_noise=-0.01), ValueError, "start_noise"),
    (dict(start_noise=float("nan")), ValueError, "start_noise"), (dict(start_noise="0.01"), TypeError, "start_noise"),
    (dict(restarts=0), ValueError, "restarts"), (dict(restarts=2.0), TypeError, "restarts"),
    (dict(lr=0.0), ValueError, "lr"), (dict(lr="0.1"), TypeError, "lr")])
def test_native_setting_checks_its_fields(kwargs, error, match):
    with pytest.raises(error, match=match):
        native.NativeSetting(**kwargs)


def test_trial_and_attack_refuse_bad_arguments(lite):
    with pytest.raises(ValueError, match="batch must be one of"):
        native.trial({}, setting=native.NativeSetting(image_size=64), method="Stepwise", batch=4, iterations=2)
    shared = [torch.zeros_like(p) for p in lite.parameters()]
    with pytest.raises(ValueError, match="method must be one of"):
        native.authors_attack(lite, shared, torch.tensor([1]), (1, 3, 64, 64), "DLG", 2, seed=0)
    with pytest.raises(ValueError, match="restarts are an Inverting Gradients setting"):
        native.authors_attack(lite, shared, torch.tensor([1]), (1, 3, 64, 64), "Stepwise", 2, seed=0, restarts=2)


def tiny():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 3))
    x, y = torch.rand(1, 3, 8, 8), torch.tensor([1])
    return model, x, y, client_gradients(model, x, y)


@pytest.mark.parametrize("start, restarts, error, match", [
    (torch.rand(2, 3, 8, 8), 1, ValueError, "start must have the batch's shape"),
    (torch.full((1, 3, 8, 8), 1.5), 1, ValueError, r"start must hold finite images in \[0, 1\]"),
    (torch.full((1, 3, 8, 8), float("nan")), 1, ValueError, "start must hold finite"),
    (torch.zeros(1, 3, 8, 8, dtype=torch.int64), 1, TypeError, "start must be a float tensor"),
    (torch.rand(1, 3, 8, 8), 2, ValueError, "restarts must be 1")])
def test_a_bad_start_is_refused(start, restarts, error, match):
    model, _, y, grads = tiny()
    with pytest.raises(error, match=match):
        inverting_gradients(model, grads, y, (1, 3, 8, 8), iterations=2, tv_weight=0.1, start=start,
                            restarts=restarts)


def test_bad_normalisation_and_diagnose_points_are_refused():
    model, _, y, grads = tiny()
    with pytest.raises(ValueError, match="normalisation has 2 channels"):
        inverting_gradients(model, grads, y, (1, 3, 8, 8), iterations=2, tv_weight=0.1,
                            normalisation=((0.5, 0.5), (0.2, 0.2)))
    with pytest.raises(ValueError, match="mean and std"):
        inverting_gradients(model, grads, y, (1, 3, 8, 8), iterations=2, tv_weight=0.1,
                            normalisation=((0.5,) * 3, (0.2, 0.0, 0.2)))
    for points in ([-1], ["a"], [True]):
        with pytest.raises(ValueError, match="diagnose_at must hold iterations"):
            optimise_images(lambda x, t: {"loss": x.sum()}, torch.zeros(1, 1, 2, 2), iterations=2, lr=0.1,
                            diagnose_at=points)
    with pytest.raises(ValueError, match="returns 'parts'"):
        optimise_images(lambda x, t: {"loss": x.sum()}, torch.zeros(1, 1, 2, 2), iterations=2, lr=0.1,
                        diagnose_at=[0])


def test_prior_gradients_weighs_each_part_and_the_sign_it_sets():
    x = torch.tensor([[[[1.0, -2.0]]]], requires_grad=True)
    matching, prior = (x * torch.tensor([1.0, 1.0])).sum(), (x * torch.tensor([-10.0, 0.0])).sum()
    out = prior_gradients(x, matching + prior, {"matching": matching, "TV": prior})
    assert out["matching"] == pytest.approx(2 ** 0.5) and out["TV"] == pytest.approx(10.0)
    assert out["TV/matching"] == pytest.approx(10 / 2 ** 0.5)
    assert out["sign_agreement"] == pytest.approx(0.5)  # the prior flips the first pixel's update
    with pytest.raises(ValueError, match="'matching' entry"):
        prior_gradients(x, matching, {"TV": prior})


def test_the_summary_reads_a_real_record(lite, tmp_path):
    import json
    from dataclasses import asdict

    from gitutor.chapters.stepwise_gradinversion.setting_study import native_summary as summary

    setting = native.NativeSetting(image_size=64, start_noise=native.SANITY_SIGMA, lr=0.001)
    trials = []
    for method in native.METHODS:
        for batch in (0, 1):
            value = native.trial({}, setting=setting, method=method, batch=batch, iterations=4, seed=batch)
            value = {k: v for k, v in value.items() if k not in ("images", "snapshots")}
            trials.append({"phase": "native_sanity_tuned", "error": None, "value": value,
                           "trial": {"setting": asdict(setting), "method": method, "batch": batch}})
    path = tmp_path / "04_native.json"
    path.write_text(json.dumps({"trials": trials, "phases": {"native_sanity_tuned": {"trials": 6}}}))
    phases, provenance = summary.load_native(path)
    entries = phases["native_sanity_tuned"]
    sanity = summary.sanity_rows(entries)
    assert [r["method"] for r in sanity] == list(native.METHODS) and {r["lr"] for r in sanity} == {"0.001"}
    assert all(r["kept ≥ 30 dB"].endswith("of 2") and float(r["PSNR at the start (dB)"]) > 35 for r in sanity)
    priors = summary.prior_rows(entries)
    assert {r["method"] for r in priors} == set(native.METHODS)
    assert all(r["R_BN/matching"] == "—" for r in priors if r["method"] == "Inverting Gradients")
    assert len(summary.score_rows(entries)) == 3
    pairs = summary.paired_rows(entries, {"PSNR": 0.5})
    assert [(r["A"], r["B"]) for r in pairs] == [("Stepwise", "GradInversion"), ("GradInversion", "Inverting Gradients")]
    with pytest.raises(ValueError, match="do not hold the same photographs"):
        summary.paired_rows([e for e in entries if not (e["trial"]["method"] == "Stepwise"
                                                        and e["trial"]["batch"] == 1)], {})
    (tmp_path / "other.json").write_text("[]")
    with pytest.raises(ValueError, match="other.json is not a setting-study record"):
        summary.load_native(tmp_path / "other.json")


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(box=(0.0, float("nan"))), ValueError, "box must hold finite bounds"),
    (dict(box=(1.0, 0.0)), ValueError, "box must hold finite bounds"),
    (dict(box=0.5), ValueError, r"box must be \(low, high\)"),
    (dict(signed="False"), TypeError, "signed must be True, False or a function"),
    (dict(diagnose_at=5), TypeError, "diagnose_at must be a list"),
    (dict(snapshot_at=[2.5]), ValueError, "snapshot_at must hold iterations"),
    (dict(snapshot_at=[-1]), ValueError, "snapshot_at must hold iterations"),
    (dict(diagnose_at=[10]), ValueError, r"diagnose_at must hold iterations \(ints in \[0, 2\]\)")])
def test_the_loop_refuses_what_it_would_silently_ignore(kwargs, error, match):
    with pytest.raises(error, match=match):
        optimise_images(lambda x, t: {"loss": x.sum()}, torch.zeros(1, 1, 2, 2), iterations=3, lr=0.1, **kwargs)
