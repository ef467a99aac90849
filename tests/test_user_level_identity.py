"""The identity test brightness cannot win (gitutor.attacks.user_level.identity) and chapter 05's
identity and prior-effect study (gitutor.chapters.diffusion_user_level.identity)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gitutor.attacks.user_level.identity import correlation_matrix, pairing_scores, score_interval, standardise
from gitutor.federated.users import lfw_user
from gitutor.stats import NOT_RESOLVED
from gitutor.chapters.diffusion_user_level import identity as study


def _means(faces=(81, 84, 86, 89, 91, 95)):
    return [lfw_user(face, 6)[0].mean(0, keepdim=True) for face in faces]


def test_standardised_images_ignore_brightness_and_contrast():
    means = _means()
    changed = [(m - 0.5) * 0.4 + 0.2 for m in means]  # darker, flatter copies
    assert np.allclose(correlation_matrix(changed, means), correlation_matrix(means, means))
    z = standardise(torch.cat(means))
    assert torch.allclose(z.flatten(1).mean(1), torch.zeros(6, dtype=torch.float64), atol=1e-9)
    assert torch.equal(standardise(torch.full((1, 1, 4, 4), 0.3)), torch.zeros(1, 1, 4, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="images"):
        standardise(torch.zeros(4, 4))
    with pytest.raises(ValueError, match="means"):
        correlation_matrix(means[:1], means[:1])


def test_pairing_score_finds_real_users_and_gives_chance_to_a_shared_or_flat_image():
    means = _means()
    own = pairing_scores(correlation_matrix(means, means))
    assert np.all(own == 1.0)
    shared = pairing_scores(correlation_matrix([means[0]] * 6, means))
    assert np.all(shared == 0.5)  # the same image for every user: every pairing ties
    flat = study.brightness_only(means)  # knows only the brightness: the MSE match can still pick users
    assert np.all(pairing_scores(correlation_matrix(flat, means)) == 0.5)
    # a hub: one user's photos resemble everything; the pairing is blind to it
    hub = np.array([[0.9, 0.2, 0.8], [0.1, 0.5, 0.7], [0.0, 0.1, 0.6]])
    assert pairing_scores(hub).tolist() == [1.0, 1.0, 1.0]
    swapped = np.array([[0.1, 0.9], [0.8, 0.2]])
    assert pairing_scores(swapped).tolist() == [0.0, 0.0]


def test_same_label_pairs_and_users_alone_with_their_label():
    s = np.eye(3)
    scores = pairing_scores(s, labels=[0, 0, 1])
    assert scores[:2].tolist() == [1.0, 1.0] and np.isnan(scores[2])
    with pytest.raises(ValueError, match="labels"):
        pairing_scores(s, labels=[0, 1])
    with pytest.raises(ValueError, match="similarity"):
        pairing_scores(np.zeros((2, 3)))


def test_score_interval_stays_in_the_unit_interval_and_widens_with_few_users():
    few, many = score_interval([1.0] * 5), score_interval([1.0] * 40)
    assert few.mean == 1.0 and few.high == 1.0 and 0.5 < few.low < many.low < 1.0
    assert type(few.low) is float and type(few.high) is float  # glued into prose as plain numbers
    half = score_interval([0.5, 0.4, 0.6, float("nan")])
    assert half.n == 3 and 0.0 <= half.low < 0.5 < half.high <= 1.0
    with pytest.raises(ValueError, match="scores"):
        score_interval([1.5])
    assert study.above_chance(many) == "above chance" and study.above_chance(half) == NOT_RESOLVED
    assert study.above_chance(score_interval([0.0] * 40)) == "at or below chance"


def test_identity_study_and_prior_effect_read_the_paired_differences():
    means = _means()
    labels = [0, 0, 1, 1, 0, 1]
    candidates = {"real": means, "flat": study.brightness_only(means)}
    identity = study.identity_study(candidates, means, labels)
    assert identity["intervals"]["real"].mean == 1.0 and identity["intervals"]["flat"].mean == 0.5
    assert identity["same_intervals"]["real"].n == 6 and "| flat |" in identity["table"]

    def user(mse, psnr, ssim):
        return {"mse": mse, "psnr": psnr, "ssim": ssim}
    rows = {"real": [user(0.01, 20.0 + i, 0.6) for i in range(6)],
            "flat": [user(0.03 + 0.001 * i, 15.0, 0.6 + 0.01 * (-1) ** i) for i in range(6)]}
    effect = study.prior_effect(rows, identity, "real", "flat")
    assert effect["helps"] == {"mse": "helps", "psnr": "helps", "ssim": NOT_RESOLVED, "pairing": "helps"}
    worse = study.prior_effect(rows, identity | {"scores": {"flat": np.full(6, 0.5), "real": np.full(6, 0.5)}},
                               "flat", "real")
    assert worse["helps"]["mse"] == "hurts" and worse["helps"]["pairing"] == NOT_RESOLVED
    assert "| MSE | lower |" in worse["table"]
    # LPIPS joins the paired differences when every user has a value; a mixed effect names both sides
    scored = {name: [{**r, "lpips": (0.1 if name == "real" else 0.3) + 0.01 * i} for i, r in enumerate(users)]
              for name, users in rows.items()}
    mixed = study.prior_effect(scored, identity, "flat", "real")
    assert mixed["helps"]["lpips"] == "hurts" and mixed["helps"]["mse"] == "hurts"
    assert "| LPIPS | lower |" in mixed["table"]
    reverse = study.prior_effect(scored, identity, "real", "flat")
    assert reverse["helps"]["lpips"] == "helps" and reverse["helps"]["pairing"] == "helps"
    assert "lpips" not in effect["intervals"]  # rows without LPIPS (no backbone): not compared
    bounded = study.interval([0.001, 0.002, 0.0], bounds=(0.0, 1.0))
    assert bounded.low >= 0.0 and bounded.high <= 1.0



def test_users_and_their_attacks_draw_independent_seeds(monkeypatch):
    """Pooled users share no noise: each user's variations, DiffULA run and baselines get their own seed."""
    from types import SimpleNamespace

    from gitutor.chapters.diffusion_user_level import experiments
    from gitutor.seeding import trial_seeds

    seeds = trial_seeds(0, 10, "users")
    assert len(set(seeds)) == 10 and seeds == trial_seeds(0, 10, "users") != trial_seeds(1, 10, "users")
    assert seeds != trial_seeds(0, 10, "DiffULA")
    with pytest.raises(ValueError):
        trial_seeds(0, 0, "users")
    used = []
    result = SimpleNamespace(images=torch.zeros(1, 1, 4, 4), info={"seconds": 0.0})
    monkeypatch.setattr(experiments, "baselines", lambda case, cfg, augment, seed: used.append(seed) or (result, result))
    for name in ("match_batch", "intra_user_scores", "paired_scores", "representative_scores", "face_detection_rate"):
        monkeypatch.setattr(experiments, name, lambda *args: {})
    case = SimpleNamespace(inputs=torch.zeros(2, 1, 4, 4))
    experiments.evaluate_users([case] * 3, lambda index, c: result, None, None, seed=0)
    assert used == trial_seeds(0, 3, "baseline starts") and len(set(used)) == 3


def test_controls_identification_and_the_one_photograph_setting():
    """Closed-set identification among all users with its controls: the reference itself identifies every
    user, another user's photo none, a prior sample (independent of the user) is not the user's; with one
    photograph per user the prior's effect leaves the test out."""
    photos = [lfw_user(face, 6, seed=1)[0] for face in (81, 84, 86, 89, 91, 95)]
    samples = torch.rand(4, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    controls = study.identity_controls(photos, samples)
    assert list(controls) == list(study.CONTROLS.values())
    assert all(len(images) == 6 and images[0].shape == (1, 1, 32, 32) for images in controls.values())
    means = controls[study.CONTROLS["mean_photo"]]
    assert torch.equal(controls[study.CONTROLS["other_user"]][5], photos[0][:1])  # user k gets user k + 1's photo
    candidates = controls | {"with": means, "without": controls[study.CONTROLS["real_photo"]]}
    identity = study.identity_study(candidates, means, [0, 0, 1, 1, 0, 1])
    found = identity["identified"]
    assert found[study.CONTROLS["mean_photo"]].mean == 1.0 and found[study.CONTROLS["other_user"]].mean < 0.5
    assert found[study.CONTROLS["mean_photo"]].low > 1 / 6 and "identified among 6 users" in identity["table"]
    rows = {name: [{"mse": 0.01 * (k + 1) + (0.001 if name == "with" else 0.0)} for k in range(6)]
            for name in ("with", "without")}
    effect = study.prior_effect(rows, identity, "with", "without", distinct_photographs=False)
    assert "pairing" not in effect["intervals"] and "pairing" not in effect["helps"]
    assert "pairing" in study.prior_effect(rows, identity, "with", "without")["intervals"]
    with pytest.raises(ValueError, match="users"):
        study.identity_controls(photos[:1], samples)
    with pytest.raises(ValueError, match="samples"):
        study.identity_controls(photos, torch.rand(2, 3, 16, 16))
