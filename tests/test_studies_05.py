"""Chapter 05's study code: offline substitutes and budgets, the server's view, identity test, tables, rows."""
import numpy as np
import pytest
import torch

import gitutor
from gitutor.federated import client_gradients
from gitutor.federated.case import gradient_case
from gitutor.metrics import LPIPS_NA
from gitutor.profiles.diffusion_user_level import SMOKE_PARAMETERS, chapter_settings, missing_inputs
from gitutor.results import save_results, verdict
from gitutor.studies import diffusion_user_level as study, user_level_report as report


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
    prior, note = study.load_prior(cfg)
    result = study.diffula(case, prior, cfg, study.attack_schedules(cfg), seed=0)
    assert result.images.shape == (1, 1, 32, 32) and len(result.history["zeta"]) == 3 and "sha256" in note
    with pytest.raises(ValueError, match="model"):
        study.shared_model("vgg", cfg)


def test_identity_study_finds_each_user_when_representatives_are_the_users():
    means = [torch.full((1, 1, 8, 8), v) + 0.05 * torch.rand(1, 1, 8, 8, generator=torch.Generator().manual_seed(i))
             for i, v in enumerate((0.2, 0.5, 0.8))]
    matrices, match = report.identity_study({"perfect": means, "same face": [means[1]] * 3}, means)
    assert match["perfect"] == (1.0, 1.0) and match["same face"][0] == pytest.approx(1 / 3)
    assert matrices["perfect"][0].shape == (3, 3) and np.allclose(np.diag(matrices["perfect"][0]), 0)
    assert report.mean_pairwise_mse([means[0], means[0]]) == 0.0
    with pytest.raises(ValueError, match="images"):
        report.mean_pairwise_mse(means[:1])


def test_table_and_rows_average_over_users(tmp_path):
    def user(mse, lpips=None):
        return {"mse": mse, "psnr": 10.0, "ssim": 0.5, "lpips": lpips, "face_rate": 1.0}
    rows = {name: [user(0.1), user(0.3)] for name in study.METHODS}
    assert report.average(rows, "intra-user", "mse") == pytest.approx(0.2)
    assert report.average(rows, "intra-user", "lpips") is None
    table = report.method_table(rows)
    assert "0.2000" in table and table.count("\n") == len(study.METHODS) + 1
    out = report.chapter_rows(rows, match=(0.6, 0.4), spread_ratio=0.5, ordering="holds",
                              intervals={"IG sample-level (matched)": (0.1, 0.01), "DiffULA (diffusion prior)": (0.2, 0.01),
                                         "intra-user": (0.3, 0.01)}, users=5, differences="test")
    save_results("05_diffusion_user_level", "quick", out, tmp_path)
    assert out[3]["this_run"].startswith("holds: IG sample-level 0.1000 ± 0.0100")
    assert verdict(out[4]) == "meets" and out[-1]["this_run"] == LPIPS_NA


def test_differences_name_the_profile_and_flag_offline_substitutes():
    quick = chapter_settings(gitutor.get_profile("05_diffusion_user_level", "quick"))
    assert report.differences(quick, "quick", 5, 6e5).startswith("quick profile: 32×32 grey LFW users")
    full = gitutor.get_profile("05_diffusion_user_level", "full")
    assert "SUBSTITUTES" not in report.differences(chapter_settings(full), "full", 50, 1e8)
    assert "SUBSTITUTES" in report.differences(chapter_settings(full, None, "bundled", False), "full", 5, 1e6)
