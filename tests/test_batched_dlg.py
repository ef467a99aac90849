"""Batched DLG (gitutor.attacks.batched_dlg) solves each problem as dlg() does; the stacked LeNet keeps them apart."""
import pytest
import torch

from gitutor.attacks import dlg
from gitutor.attacks import stacked_lenet as stacked
from gitutor.attacks.batched_dlg import batched_dlg
from gitutor.federated import client_gradients
from gitutor.models import LeNet, init_uniform_


def _problems(count, size=8, classes=5, dtype=torch.float32):
    models, targets, xs, ys = [], [], [], []
    for seed in range(count):
        generator = torch.Generator().manual_seed(seed)
        model = init_uniform_(LeNet(classes, in_channels=1, image_size=size), generator=generator).to(dtype)
        x = torch.rand(1, 1, size, size, generator=generator, dtype=dtype)
        y = torch.randint(classes, (1,), generator=generator)
        models.append(model), targets.append(client_gradients(model, x, y)), xs.append(x), ys.append(y)
    return models, targets, torch.cat(xs), torch.cat(ys)


def test_stacked_gradients_are_each_models_own_gradient():
    models, targets, x, y = _problems(3)
    params = [p.requires_grad_(True) for p in stacked.stacked_parameters(models)]
    got = stacked.gradients(params, x, y)
    want = stacked.stack(targets)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, want))
    soft = torch.nn.functional.one_hot(y, 5).float()
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(stacked.gradients(params, x, soft), want))
    with pytest.raises(ValueError, match="Sigmoid"):
        stacked.stacked_parameters([LeNet(5, 1, 8, activation="relu")])
    with pytest.raises(ValueError, match="architecture"):
        stacked.stacked_parameters([LeNet(5, 1, 8), LeNet(6, 1, 8)])


def test_batched_dlg_follows_dlg_per_problem_to_rounding():
    torch.set_default_dtype(torch.float64)  # float64: the two agree to rounding, step after step
    try:
        models, targets, x, y = _problems(3, dtype=torch.float64)
        batch = batched_dlg(models, targets, (1, 8, 8), 5, seeds=[0, 1, 2], iterations=3, record_every=1)
        for model, target, seed, result in zip(models, targets, [0, 1, 2], batch):
            single = dlg(model, target, (1, 1, 8, 8), 5, iterations=3, seed=seed, record_every=1)
            assert result.history["loss"] == pytest.approx(single.history["loss"], rel=1e-6)
            assert torch.allclose(result.images, single.images, atol=1e-5)
            assert [s for s, _ in result.snapshots] == [s for s, _ in single.snapshots]
        labelled = batched_dlg(models, targets, (1, 8, 8), 5, seeds=[0, 1, 2], labels=y, iterations=2)
        single = dlg(models[1], targets[1], (1, 1, 8, 8), 5, labels=y[1:2], iterations=2, seed=1)
        assert labelled[1].history["loss"] == pytest.approx(single.history["loss"], rel=1e-6)
        assert torch.equal(labelled[1].labels, y[1:2])
    finally:
        torch.set_default_dtype(torch.float32)


def test_batched_dlg_recovers_images_and_stops_per_problem():
    models, targets, x, y = _problems(2)
    results = batched_dlg(models, targets, (1, 8, 8), 5, seeds=[0, 1], iterations=60, record_every=10,
                          stop_loss=1e-6)
    for result, truth in zip(results, x):
        assert result.info.get("stopped_at") or result.info.get("converged_at")
        steps = result.info.get("stopped_at", 60)
        assert len(result.history["loss"]) == steps and result.snapshots[-1][0] == steps
        assert float(((result.images.clamp(0, 1) - truth) ** 2).mean()) < 1e-4


def test_batched_dlg_refuses_bad_arguments():
    models, targets, _, y = _problems(2)
    with pytest.raises(ValueError, match="same length"):
        batched_dlg(models, targets[:1], (1, 8, 8), 5, seeds=[0, 1])
    with pytest.raises(ValueError, match="input_shape"):
        batched_dlg(models, targets, (1, 1, 8, 8), 5, seeds=[0, 1])
    with pytest.raises(ValueError, match="labels"):
        batched_dlg(models, targets, (1, 8, 8), 5, seeds=[0, 1], labels=y[:1])
    with pytest.raises(ValueError, match="stop_loss"):
        batched_dlg(models, targets, (1, 8, 8), 5, seeds=[0, 1], stop_loss=-1.0)


def test_batched_dlg_snapshots_after_a_fixed_point_hold_the_fixed_point():
    """After an L-BFGS fixed point the padded snapshots are the iterate it stopped at (the final
    image), with a snapshot at the fixed point's own step — not copies of an older snapshot."""
    models, targets, x, y = _problems(2)
    results = batched_dlg(models, targets, (1, 8, 8), 5, seeds=[0, 1], iterations=400, record_every=7)
    stuck = [r for r in results if "converged_at" in r.info]
    assert stuck, "no problem reached a fixed point in 400 steps: the test needs one"
    for result in stuck:
        fixed = result.info["converged_at"]
        assert fixed in [step for step, _ in result.snapshots]
        assert all(torch.equal(images, result.images) for step, images in result.snapshots if step >= fixed)


@pytest.mark.parametrize("round_number", [1, 2])
def test_batched_dlg_ends_as_dlg_in_float32_on_chapter_07s_case(round_number):
    """The cases chapter 07 runs batched: its quick profile's real MNIST samples at 16×16, the DLG LeNet
    drawn from U(−0.5, 0.5) with seed 0, DLG on each image's gradient — in round 1 at the global model
    (the main table), in round 2 at the client's local model w after one FedADMM round on the chapter's
    earlier image (the round-2 table's reference) — dummy labels optimised, the profile's 20 L-BFGS
    steps, float32, the chapter's dummy seeds. DLG is chaotic, so the iterates part after a few steps;
    what must agree per image is the outcome: recognisable (≥ 30 dB) by both or by neither, and PSNR
    within 3 dB (above 60 dB both are pixel-exact and float32 rounding sets the number, so PSNR is
    capped there). Round 1's ten images hold successes and a failure."""
    import gitutor
    from gitutor.chapters.admm_comparison import rounds
    from gitutor.federated import fedadmm_client_update
    from gitutor.metrics import psnr
    from gitutor.models.parameters_at import model_at

    cfg = gitutor.get_profile("07_admm_comparison", "quick")
    kind = "mnist_samples"
    sizes = cfg.image_size, 0, "data", cfg.num_classes, cfg.channels
    data, labels = rounds.load_kinds([kind], cfg.images_per_kind + 1, *sizes)[kind]
    images, labels, earlier = data[:-1], labels[:-1], (data[-1:], labels[-1:])
    model = rounds.chapter_model(cfg, kind, 0)
    steps, classes = cfg.iterations[kind], cfg.num_classes[kind]
    assert images.dtype == torch.float32 and steps == 20
    seeds = [0] * len(images)  # the main table: one dummy seed
    if round_number == 2:  # the round-2 table: seed + i for image i, DLG at the client's w
        z = [p.detach().clone() for p in model.parameters()]
        first = fedadmm_client_update(model, *earlier, z, [torch.zeros_like(p) for p in z],
                                      rho=cfg.rho, lr=cfg.lr, local_steps=1)
        model, seeds = model_at(model, first.local_params), list(range(len(images)))
    grads = [client_gradients(model, images[i : i + 1], labels[i : i + 1]) for i in range(len(images))]
    batch = batched_dlg([model] * len(grads), grads, tuple(images.shape[1:]), classes, seeds=seeds,
                        iterations=steps, record_every=steps)
    outcomes = []
    for i, (target, stacked_run) in enumerate(zip(grads, batch)):
        truth = images[i : i + 1]
        single = dlg(model, target, truth.shape, classes, iterations=steps, seed=seeds[i], record_every=steps)
        a, b = (min(float(psnr(r.images.clamp(0, 1), truth)), 60.0) for r in (stacked_run, single))
        assert (a >= 30) == (b >= 30) and abs(a - b) <= 3.0, f"image {i}: batched {a:.1f} dB, dlg {b:.1f} dB"
        outcomes.append(b >= 30)
    if round_number == 1:
        assert any(outcomes) and not all(outcomes), "the case needs a success and a failure to test both"
