"""Chapter 06's experiments (gitutor.studies.learning_to_invert, lti_report) on tiny cases."""
import pytest
import torch

from gitutor.federated import observed_gradient, paper_defenses
from gitutor.profiles import get_profile
from gitutor.profiles.learning_to_invert import SMOKE_PARAMETERS
from gitutor.studies import learning_to_invert as study
from gitutor.studies.lti_report import PAPER_MSE, defense_names, results_rows, table1_markdown

TINY = dict(n_aux=60, n_heldout=8, n_ig_targets=2, n_ig_batches=1, b4_batches=12, epochs=2, ig_iterations=2,
            hidden={1: 16, 4: 16}, image_size=8, train_batch=16)


@pytest.fixture(scope="module")
def cfg():
    return get_profile("06_learning_to_invert", "quick").replace(**TINY)


def test_split_keeps_targets_out_of_the_auxiliary_set_and_is_seeded(cfg):
    aux_x, aux_y, target_x, target_y = study.load_split(cfg, seed=1)
    assert aux_x.shape == (60, 1, 8, 8) and target_x.shape == (8, 1, 8, 8) and aux_y.shape == (60,)
    assert torch.cdist(target_x.flatten(1), aux_x.flatten(1)).min() > 0  # no target image among the auxiliary ones
    assert torch.equal(study.load_split(cfg, seed=1)[2], target_x)
    assert not torch.equal(study.load_split(cfg, seed=2)[2], target_x)
    with pytest.raises(ValueError, match="n_heldout"):
        study.load_split(cfg.replace(n_heldout=0), seed=1)


def test_bundled_root_replaces_the_full_profiles_cifar10_offline():
    full = get_profile("06_learning_to_invert", "full", budget=SMOKE_PARAMETERS["BUDGET"])
    aux_x, _, target_x, _ = study.load_split(full, 0, SMOKE_PARAMETERS["DATA_ROOT"])
    assert aux_x.shape == (full.n_aux, 3, 32, 32) and target_x.shape == (full.n_heldout, 3, 32, 32)
    with pytest.raises(ValueError, match="BUDGET"):
        get_profile("06_learning_to_invert", "full", budget="smok")


def test_model_hasher_and_observation(cfg):
    model = study.build_model("lenet", cfg)
    again = study.build_model("lenet", cfg)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))
    assert float(next(model.parameters()).detach().abs().max()) <= cfg.init_a
    hasher = study.build_hasher("lenet", model, cfg, seed=0)
    m = sum(p.numel() for p in model.parameters())
    assert hasher.out_dim == int(cfg.hash_fraction["lenet"] * m)
    assert study.build_hasher("lenet", model, cfg.replace(hash_fraction={"lenet": None}), 0) is None
    with pytest.raises(ValueError, match="name"):
        study.build_model("vgg", cfg)
    x, y = study.load_split(cfg, 0)[2:]
    groups, observed, features = study.observe(model, None, None, x[:5], y[:5], batch_size=2)
    assert groups.tolist() == [[0, 1], [2, 3]] and features.shape == (2, m)  # the fifth target is left out
    expected = observed_gradient(model, x[2:4], y[2:4])   # the mean of two clients' gradients
    assert all(torch.allclose(a, b) for a, b in zip(observed[1], expected))
    with pytest.raises(ValueError, match="batch_size"):
        study.observe(model, None, None, x[:5], y[:5], batch_size=6)


def test_lti_beats_the_mean_image_without_defense_and_reports_both_attacks(cfg):
    cfg = cfg.replace(n_aux=400, epochs=30, hidden={1: 64, 4: 64}, lr=3e-3, hash_fraction={"lenet": None})
    aux_x, aux_y, target_x, target_y = study.load_split(cfg, 0)
    model = study.build_model("lenet", cfg)
    setup = study.Setup(cfg, 0, "cpu", False, tuple(aux_x.shape[1:]))
    defense = paper_defenses()["none"]
    aux = study.make_gradient_dataset(model, aux_x, aux_y, defense, 1)
    cell = study.lti_vs_ig(setup, model, None, defense, aux, (target_x, target_y), 1)
    assert cell.ig_images.shape == (2, 1, 1, 8, 8) and cell.lti_images.shape == (8, 1, 1, 8, 8)
    mean_mse = float(((aux_x.mean(0) - target_x) ** 2).mean())
    assert cell.scores["LTI (all held-out)"]["mse"] < 0.8 * mean_mse   # g_θ learned something from the gradient
    assert len(cell.per_target_mse("IG")) == 2 and cell.history["val_loss"][-1] < cell.history["val_loss"][0]
    with pytest.raises(ValueError, match="B = 1"):
        cell.per_target_mse("DLG")
    errors = study.aux_size_errors(setup, aux[0], aux_x, [20, 400], cell.features, target_x)
    assert len(errors) == 2 and len(errors[0]) == 8
    assert sum(errors[1]) < sum(errors[0])   # more auxiliary data, a better inverse
    with pytest.raises(ValueError, match="sizes"):
        study.aux_size_errors(setup, aux[0], aux_x, [401], cell.features, target_x)


def test_report_rows_and_table_carry_the_papers_numbers():
    names = defense_names(0.99, 0.1)
    scores = {"mse": 0.01234, "psnr": 19.1, "ssim": 0.5}
    table1 = {("lenet", 1, d): {"IG": scores, "LTI": scores, "LTI (all held-out)": scores} for d in names}
    rows = results_rows(table1, {d: 0.02 for d in names}, names, scale="tiny", n_ig={1: 5}, ood_model="lenet",
                        smallest="100 of 1597 images: 2/3 defenses")
    assert len(rows) == 4 * 2 + 4 + 1
    sign_ig = next(r for r in rows if r["setting"] == "lenet, B=1, sign comp." and "IG" in r["quantity"])
    assert sign_ig["paper"] == PAPER_MSE["lenet", 1]["IG"][1] and sign_ig["this_run"] == 0.0123
    assert all(r["better"] == "lower" for r in rows[:-1])
    assert "| IG | 0.0123 / 19.1 / 0.50" in table1_markdown(table1, "lenet", 1, names, 5, 200)
