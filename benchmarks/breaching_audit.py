"""Audit of our Inverting Gradients and GradInversion against the reference implementations in
``breaching`` (Geiping et al., https://github.com/JonasGeiping/breaching, commit 8bd99d5): its
``invertinggradients`` and ``seethroughgradients`` attack configurations, on the same network,
batches, labels, shared gradient and number of iterations (chapter 04's setting study, issue 26).

The case is the setting study's base (:data:`gitutor.chapters.stepwise_gradinversion.setting_study.BASE`): a random CIFAR
ResNet-18 of width 32 (seed 0) with default BatchNorm statistics (μ 0, σ² 1), in eval mode,
behind ImageNet normalisation, 32 px; batch i is ``study_batch(setting, i)`` (B = 1: astronaut,
coffee, cat) with its labels. The shared gradient is ours (``client_gradients``: batch-mean
cross-entropy); the script checks that breaching's user-side loss (``torch.nn.CrossEntropyLoss()``
on the same network) gives the same gradient and records the largest relative difference.
Breaching gets the true labels (``metadata["labels"]``, so its label strategies are not used),
the network without the normalisation layer (it optimises inside the normalisation: the
candidate x̃ = (x − m)/s, m, s the ImageNet mean and std) and the buffers from the server, so
its models run in eval mode like ours. Scores: PSNR (dB) and SSIM of ``gitutor.metrics`` after
``match_batch``, of breaching's output mapped back to pixels, x = s·x̃ + m.

Objective terms, ours → breaching (x in [0, 1] pixels; x̃ normalised; g(·) the candidate's
gradient, g* the shared one, over every parameter tensor):

Inverting Gradients (``gitutor.attacks.inverting_gradients`` → ``invertinggradients``):

- matching: 1 − ⟨g, g*⟩/(‖g‖‖g*‖) in both (ours adds 1e-12 to the denominator);
- TV: ours α = 0.01 × [mean |Δ_h x| + mean |Δ_v x|] over the interior differences, in pixels;
  breaching α = 0.2 × mean over (B, 3, H, W) of |Δ_h x̃| + |Δ_v x̃| (+1e-8 each; inner and outer
  exponent 1), in normalised units (1/s ≈ 4.4 × ours per difference) and with zero padding, so
  the last row and column add |x̃|: a pull of the border towards the dataset mean;
- optimiser: both Adam on the sign of the gradient, lr 0.1, × 0.1 at 3/8, 5/8, 7/8 of the
  budget, clamped to the box after each step — but breaching's lr is in normalised units (a step
  of 0.1·s ≈ 0.023 in pixels, ours 0.1); start: ours clamp(N(0, 1), 0, 1) in pixels, breaching
  N(0, 1) in normalised units; output: ours the last iterate, breaching the iterate after the
  step whose objective (with TV) was the lowest.

GradInversion (``gitutor.attacks.gradinversion`` at the study's prior scale → ``seethroughgradients``):

- matching: ours cosine distance (as above); breaching 1e-4 × ½ Σ‖g − g*‖² (Euclidean, Yin et
  al. 2021 Eq. 2);
- R_tv: ours λ_tv = 0.01 × 0.01 on Σ_{b,c,i,j} (Δ_h x)² + (Δ_v x)² (Ye et al. Eq. 11, β = 2, a
  sum, pixels); breaching 1e-4 × the mean L1 TV of x̃ above (β = 1, a mean, normalised);
- R_BN: ours λ_BN = 1e-4 × 0.01 on Σ_l ‖μ_l − μ̄_l‖₂ + ‖σ²_l − σ̄²_l‖₂; breaching 0.1 × the same sum
  with the first BatchNorm layer's term × 10 (DeepInversion's ``first_bn_multiplier``);
- ℓ2 prior: none in ours; breaching 1e-6 × ½ mean x̃²;
- optimiser: ours signed Adam lr 0.1 (pixels), × 0.33 at 3/8, 5/8, 7/8; breaching plain
  (unsigned) Adam lr 0.1 (normalised), 50 warm-up steps, then cosine decay to 0 at the budget,
  with Langevin noise 0.01 × lr × N(0, 1) added to the image gradient before each step; box clamp
  in both; start and output as for Inverting Gradients. Neither has Yin et al.'s group
  consistency term.

"ours at breaching's scale" reruns our functions with breaching's weights converted into our
units: the learning rate × mean(s) (a normalised step in pixels), each prior's weight set so that
our term equals breaching's term on the true batch (their ratio measured there), and for
GradInversion the Euclidean distance (``distance="l2"``, Σ‖g − g*‖², so breaching's weights are
× 2·10⁴); our step rule, schedule, start and output are kept, so the rest of a gap is theirs.

How to obtain breaching (public, MIT licence; run it from a temporary folder, never copy it
into this repository)::

    git clone https://github.com/JonasGeiping/breaching /tmp/breaching_src
    git -C /tmp/breaching_src checkout 8bd99d52cdb8c38d6b12a191e620d11d275a8d45
    pip install hydra-core omegaconf
    python3 benchmarks/breaching_audit.py --breaching /tmp/breaching_src --iterations 1000 \\
        --batches 0 1 2 --out book/studies/04_breaching_audit.json

The record is rewritten atomically after every run; a rerun with the same ``--out`` skips the
runs it already holds (same method, implementation, B, batch and iterations) and keeps them.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gitutor.attacks.bn_prior import bn_statistics_loss  # noqa: E402
from gitutor.attacks.gradinversion import gradinversion  # noqa: E402
from gitutor.attacks.inverting_gradients import inverting_gradients  # noqa: E402
from gitutor.attacks.objectives import total_variation  # noqa: E402
from gitutor.federated.client import client_gradients  # noqa: E402
from gitutor.files import read_json, write_json  # noqa: E402
from gitutor.metrics import match_batch, psnr, ssim  # noqa: E402
from gitutor.chapters.stepwise_gradinversion import setting_study as study  # noqa: E402

BREACHING_COMMIT = "8bd99d52cdb8c38d6b12a191e620d11d275a8d45"
#: Our method name → breaching's attack configuration.
CONFIGS = {"Inverting Gradients": "invertinggradients", "GradInversion": "seethroughgradients"}
IMPLEMENTATIONS = ("ours", "breaching", "ours at breaching's scale")


def scores(images: torch.Tensor, truth: torch.Tensor) -> list[float]:
    """[PSNR dB, SSIM] batch means of ``images`` ``(B, 3, H, W)`` (clamped to [0, 1]) after matching."""
    matched = match_batch(images.detach().cpu().clamp(0, 1), truth)
    return [psnr(matched, truth).mean().item(), ssim(matched, truth).mean().item()]


def breaching_case(model: torch.nn.Sequential, x: torch.Tensor, y: torch.Tensor, grads: list[torch.Tensor]):
    """Server payload and shared data as breaching's ``cases`` build them, for the network
    ``model[1]`` behind ``model[0]`` (the normalisation), and the relative gap (max over tensors
    of ‖g_ours − g_breaching‖/‖g_breaching‖) between our shared gradient and breaching's user loss."""
    body, normalise = model[1], model[0]
    loss = torch.nn.CrossEntropyLoss()(body(normalise(x)), y)
    theirs = torch.autograd.grad(loss, list(body.parameters()))
    gap = max(((a - b).norm() / b.norm()).item() for a, b in zip(grads, theirs))
    metadata = SimpleNamespace(shape=tuple(x.shape[1:]), mean=list(normalise.mean), std=list(normalise.std),
                               modality="vision", num_data_points=x.shape[0])
    payload = [dict(parameters=[p.detach() for p in body.parameters()],
                    buffers=[b.detach() for b in body.buffers()], metadata=metadata)]
    shared = [dict(gradients=[g.clone() for g in grads], buffers=None,
                   metadata=dict(num_data_points=x.shape[0], labels=y.clone(), local_hyperparams=None))]
    return body, payload, shared, gap


def run_breaching(breaching, method: str, model, x, y, grads, iterations: int, seed: int) -> dict:
    """Breaching's attack for ``method`` at ``iterations`` steps (its lr schedule spans them), with
    snapshots of the current iterate at the study's checkpoints; the final scores are those of
    the candidate breaching returns."""
    start = time.perf_counter()
    cfg = breaching.get_attack_config(CONFIGS[method])
    cfg.optim.max_iterations, cfg.optim.callback = iterations, iterations
    body, payload, shared, gap = breaching_case(model, x, y, grads)
    attacker = breaching.attacks.prepare_attack(body, torch.nn.CrossEntropyLoss(), cfg,
                                                dict(dtype=torch.float, device=torch.device("cpu")))
    mean, std = (torch.tensor(v)[None, :, None, None] for v in (payload[0]["metadata"].mean,
                                                                 payload[0]["metadata"].std))
    wanted, curve = {t for t in study.CHECKPOINTS if t <= iterations}, []
    build = attacker._init_optimizer

    def init_optimizer(candidates):  # record the iterate after each scheduler step (the box clamp follows it)
        optimizer, scheduler = build(candidates)
        candidate, step, steps = candidates[0], scheduler.step, [0]
        curve.append([0, *scores(candidate.detach() * std + mean, x)])

        def recording_step(*args, **kwargs):
            step(*args, **kwargs)
            steps[0] += 1
            if steps[0] in wanted:
                curve.append([steps[0], *scores(candidate.detach() * std + mean, x)])
        scheduler.step = recording_step
        return optimizer, scheduler
    attacker._init_optimizer = init_optimizer
    torch.manual_seed(seed)  # breaching draws its start and Langevin noise from the global generator
    output, _ = attacker.reconstruct(payload, shared, {}, dryrun=False)
    final = scores(output["data"] * std + mean, x)
    return {"PSNR": final[0], "SSIM": final[1], "curve": curve, "seconds": time.perf_counter() - start,
            "gradient_gap": gap}


def converted_weights(breaching, method: str, model, x) -> dict[str, float]:
    """Breaching's hyper-parameters of ``method`` in our units (module docstring): ``lr``, and the
    prior weights that make our terms equal to breaching's on the true batch ``x``."""
    cfg, setup = breaching.get_attack_config(CONFIGS[method]), dict(dtype=torch.float, device=torch.device("cpu"))
    from breaching.attacks.auxiliaries.regularizers import regularizer_lookup
    normalise = model[0]
    x_tilde = normalise(x)
    lr = cfg.optim.step_size * float(torch.tensor(list(normalise.std)).mean())
    tv = regularizer_lookup["total_variation"](setup, **cfg.regularization.total_variation)(x_tilde).item()
    if method == "Inverting Gradients":
        return {"lr": lr, "tv_weight": tv / total_variation(x).item()}
    matching = 1 / (2 * cfg.objective.scale)  # breaching's objective × this = Σ‖g − g*‖² + converted priors
    deep_inversion = regularizer_lookup["deep_inversion"](setup, **cfg.regularization.deep_inversion)
    deep_inversion.initialize([model[1]])
    model(x)
    bn = deep_inversion(x_tilde).item()
    for hook in deep_inversion.losses[0]:
        hook.close()
    return {"lr": lr, "tv_weight": matching * tv / total_variation(x, beta=2.0, reduction="sum").item(),
            "bn_weight": matching * bn / bn_statistics_loss(model, x).item()}


def run_ours_converted(breaching, method: str, model, x, y, grads, iterations: int, seed: int) -> dict:
    """Our attack with breaching's weights in our units (:func:`converted_weights`)."""
    start = time.perf_counter()
    weights = converted_weights(breaching, method, model, x)
    shape = tuple(x.shape)
    if method == "Inverting Gradients":
        result = inverting_gradients(model, grads, y, shape, iterations=iterations, seed=seed, record_every=10,
                                     **weights)
    else:
        result = gradinversion(model, grads, y, shape, iterations=iterations, seed=seed, record_every=10,
                               distance="l2", **weights)
    wanted = {t for t in study.CHECKPOINTS if t <= iterations} | {iterations}
    curve = [[t, *scores(images, x)] for t, images in result.snapshots if t in wanted]
    return {"PSNR": curve[-1][1], "SSIM": curve[-1][2], "curve": curve, "seconds": time.perf_counter() - start,
            "weights": weights}


def run_one(breaching, implementation: str, method: str, batch_size: int, batch: int, iterations: int) -> dict:
    """One run on batch ``batch`` of the study's base setting at ``batch_size`` (seed = batch)."""
    setting = replace(study.BASE, batch_size=batch_size)
    if implementation == "ours":
        value = study.trial({}, setting=setting, method=method, batch=batch, iterations=iterations, seed=batch)
        return {"PSNR": value["curve"][-1][1], "SSIM": value["curve"][-1][2], "curve": value["curve"],
                "seconds": value["seconds"]}
    model = study.study_model(setting.architecture, setting.width, setting.weights, setting.bn_statistics,
                              setting.image_size, None).eval()
    x, y = study.study_batch(setting, batch)
    grads = client_gradients(model, x, y)
    run = run_breaching if implementation == "breaching" else run_ours_converted
    return run(breaching, method, model, x, y, grads, iterations, batch)


def _cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                platform.processor() or platform.machine())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--breaching", type=Path, required=True, help="folder of a breaching checkout (commit 8bd99d5)")
    parser.add_argument("--iterations", type=int, default=1000, help="steps of every run (≥ 1)")
    parser.add_argument("--batches", type=int, nargs="+", default=[0, 1, 2], help="study_batch indices")
    parser.add_argument("--batch-size", type=int, default=1, help="B of the batches")
    parser.add_argument("--methods", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--implementations", nargs="+", default=list(IMPLEMENTATIONS), choices=IMPLEMENTATIONS)
    parser.add_argument("--out", type=Path, default=ROOT / "book/studies/04_breaching_audit.json")
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error(f"--iterations must be ≥ 1, got {args.iterations}")
    if not (args.breaching / "breaching" / "attacks").is_dir():
        parser.error(f"--breaching {args.breaching}: no breaching/attacks folder there (see the docstring)")
    torch.set_num_threads(1)
    sys.path.insert(0, str(args.breaching.resolve()))
    import breaching
    git = lambda *a, cwd=ROOT: subprocess.run(["git", *a], cwd=cwd, capture_output=True, text=True).stdout.strip()
    theirs = git("rev-parse", "HEAD", cwd=args.breaching) if (args.breaching / ".git").exists() else BREACHING_COMMIT
    if theirs != BREACHING_COMMIT:
        parser.error(f"--breaching {args.breaching} is at {theirs}, the audit is of {BREACHING_COMMIT}")
    record = read_json(args.out, "breaching audit") if args.out.is_file() else {"runs": [], "provenance": []}
    done = {tuple(r["key"]) for r in record["runs"]}
    provenance = {"breaching_commit": theirs, "commit": git("rev-parse", "HEAD"),
                  "dirty": bool(git("status", "--porcelain", "gitutor", "benchmarks")),
                  "device": f"CPU: {_cpu_name()}, 1 torch thread",
                  "torch": torch.__version__, "python": platform.python_version(),
                  "command": shlex.join(["python3", "benchmarks/breaching_audit.py", *(argv or sys.argv[1:])]),
                  "date": datetime.date.today().isoformat()}
    record["provenance"].append(provenance)
    for batch in args.batches:
        for method in args.methods:
            for implementation in args.implementations:
                key = [method, implementation, args.batch_size, batch, args.iterations]
                if tuple(key) in done:
                    continue
                value = run_one(breaching, implementation, method, args.batch_size, batch, args.iterations)
                record["runs"].append({"key": key, **value})
                print(f"{key}: PSNR {value['PSNR']:.2f} dB, SSIM {value['SSIM']:.3f}, "
                      f"{value['seconds']:.0f} s", flush=True)
                write_json(args.out, record, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
