"""Our stepwise objective under the authors' options against the authors' own code, at fixed inputs.

Ye et al. (AAAI 2024) released their attack as a fork of breaching (``MiLab-HITSZ/2023YeHFGradInv``,
config ``breaching/config/attack/our_res34_pretrained.yaml``). This script imports *their* objective
(``DynaLayerRandPickedCosineSimilarity``, objectives.py:516–560), *their* regularisers
(``TotalVariation``, ``DeepInversion``, ``NormRegularization``, ``GroupRegular``, regularizers.py) and
*their* quantised sign (``_optim_signed_quantify``, optimization_based_attack.py:386–396, taken out of
that file with ``ast`` because the file's imports need RANSAC-Flow) from a checkout, builds their
objective the way their closure does (optimization_based_attack.py:320–354: gradient term + Σ
regularisers, backward to the candidate), and compares it with ``StepwiseObjective`` under
``StepwiseOptions.authors()`` on the same network, batch, labels, candidate, iteration and dropout
draws. Nothing of theirs is copied into this repository; the checkout is an argument::

    git --git-dir=<mirror> archive HEAD breaching | tar -x -C /tmp/ye   # or a clone
    python benchmarks/authors_equivalence.py /tmp/ye [--size 32] [--batch 2]

Network: torchvision ResNet34 (their ``case.model = "resnet34"``, 110 tensors, so their config's
1-based ``start: 100``/``min_start: 25`` apply unchanged) with seeded random weights and random
BatchNorm running statistics (so that R_BN is not inert), eval mode; their network takes normalised
images, ours (:class:`gitutor.models.Normalized`) images in [0, 1] with the same parameters. Their
total objective carries a constant 100 for every regulariser that is off at t (regularizers.py:135,
204, 226, 262); it changes neither the gradient nor, within a phase, which iterate is best, and the
script compares the sum of their varying terms (same gradient; the 100s would only cost float32
digits). ``--dtype float64`` runs both sides in double precision. Prints one line per iteration t
and the maxima, then compares a few steps of both whole loops (``--trajectory``; their loop is
rewritten from optimization_based_attack.py:195–236, with their objects inside it).

Measured (CPU, torch 2.14, their commit 6faa004; t = 0, 101, 498, 499, 2999, 3000, 5000, 9999):

* float64: max |Δ objective| 4.4e-16, max |Δ ∂/∂z| 1.3e-17 (1.9e-14 of max |∂/∂z|); their and our
  quantised sign identical on the same gradient, and on each side's own gradient; 12 steps of both
  loops (compressed schedule): objectives to 6.7e-16, returned images to 1.1e-16, same best step.
* float32: max |Δ objective| 2.0e-6 (1.7e-5 relative), max |Δ ∂/∂z| 7.9e-9 (3.3e-5 of the max);
  the 12-step trajectories part by up to 1.1e-2 px, where a quantisation threshold falls between
  the two float32 gradients.
"""
from __future__ import annotations

import argparse
import ast
import copy
import importlib
import sys
import types
import warnings
from pathlib import Path

import torch
import torchvision
import yaml

from gitutor.attacks.stepwise import StepwiseObjective, stepwise_inversion
from gitutor.attacks.stepwise_options import StepwiseOptions, quantised_sign
from gitutor.attacks.stepwise_schedule import StepwiseSchedule
from gitutor.federated.client import client_gradients
from gitutor.models import Normalized
from gitutor.models.resnet import IMAGENET_MEAN, IMAGENET_STD

TIMES = (0, 101, 498, 499, 2_999, 3_000, 5_000, 9_999)


def load_authors(checkout: Path):
    """Their objective and regulariser modules, and their quantiser, imported from ``checkout``."""
    aux = checkout / "breaching" / "attacks" / "auxiliaries"
    if not (aux / "objectives.py").is_file():
        raise SystemExit(f"{checkout} is not a checkout of MiLab-HITSZ/2023YeHFGradInv (no {aux}/objectives.py)")
    package = types.ModuleType("ye_aux")  # their auxiliaries package without breaching/__init__ (hydra, …)
    package.__path__ = [str(aux)]
    sys.modules["ye_aux"] = package
    objectives = importlib.import_module("ye_aux.objectives")
    regularizers = importlib.import_module("ye_aux.regularizers")
    source = (checkout / "breaching" / "attacks" / "optimization_based_attack.py").read_text()
    tree = ast.parse(source)
    function = next(node for node in ast.walk(tree)
                    if isinstance(node, ast.FunctionDef) and node.name == "_optim_signed_quantify")
    namespace = {"torch": torch}
    module = ast.Module(body=[function], type_ignores=[])
    exec(compile(module, "optimization_based_attack.py", "exec"), namespace)  # noqa: S102 - their own source
    config = yaml.safe_load((checkout / "breaching" / "config" / "attack" / "our_res34_pretrained.yaml").read_text())
    return objectives, regularizers, namespace["_optim_signed_quantify"], config


def network(seed: int) -> torch.nn.Module:
    """torchvision ResNet34, seeded weights, random BatchNorm statistics and affine parameters, eval mode."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = torchvision.models.resnet34(num_classes=10)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                c = module.num_features
                module.running_mean.copy_(0.2 * torch.randn(c, generator=generator))
                module.running_var.copy_(0.5 + torch.rand(c, generator=generator))
                module.weight.copy_(0.5 + torch.rand(c, generator=generator))
                module.bias.copy_(0.1 * torch.randn(c, generator=generator))
    return net.eval()


def _numbers(settings: dict) -> dict:
    """PyYAML reads ``5e-3`` as a string (YAML 1.1); their hydra config reads it as a float."""
    def convert(value):
        try:
            return float(value) if isinstance(value, str) else value
        except ValueError:
            return value
    return {k: convert(v) for k, v in settings.items()}


def their_terms(objectives, regularizers, config, net, targets, z, labels, t: int, seed: int):
    """Their closure at iteration t: (total objective, its gradient w.r.t. z, the constant 100s in it)."""
    cfg = {k: v for k, v in _numbers(config["objective"]).items() if k != "type"}
    objective = objectives.DynaLayerRandPickedCosineSimilarity(**cfg)
    objective.initialize(torch.nn.CrossEntropyLoss(), types.SimpleNamespace(mixed_precision=False))
    # the state their objective reaches after t calls: start lowered floor(t / period) times, iter = t
    period, step = int(cfg["peroid_Add10"]), objective.add10
    objective.iter = t
    objective.start = max(int(cfg["min_start"]), int(cfg["start"]) - step * (t // period))
    setup = {"device": torch.device("cpu"), "dtype": z.dtype}
    regs = []
    for key, settings in config["regularization"].items():
        settings = _numbers(settings)
        if settings["scale"] > 0:
            regs.append(regularizers.regularizer_lookup[key](setup, **settings))
    for reg in regs:
        reg.initialize([net], None, labels)
    z = z.detach().clone().requires_grad_(True)
    torch.manual_seed(seed)  # their masks: torch.rand_like per matched tensor, global generator
    total, _ = objective(net, targets, z, labels)
    varying = total  # the same sum without the constant 100s (which would cost float32 digits)
    constants = 0.0
    for reg in regs:
        value = reg(z, avgImg=z.detach(), iter=t)
        if isinstance(value, torch.Tensor):
            varying = varying + value
        else:
            constants += value
        total = total + value
    total.backward(inputs=z)
    for reg in regs:  # remove their hooks
        for hook in getattr(reg, "losses", [[]])[0]:
            hook.close()
    return varying.detach(), z.grad.detach(), constants


def our_terms(model, targets, z, labels, t: int, seed: int, config):
    """Our StepwiseObjective under the authors' options: (loss, its gradient w.r.t. z)."""
    reg = config["regularization"]
    schedule = StepwiseSchedule.paper(15_000, len(targets), authors_timing=True)
    objective = StepwiseObjective(model, targets, labels, schedule, distance="cosine", dropout=0.3,
                                  tv_weight=float(reg["total_variation"]["scale"]),
                                  bn_weight=float(reg["deep_inversion"]["scale"]),
                                  generator=torch.Generator().manual_seed(seed),
                                  options=StepwiseOptions.authors(
                                      bn_layer_weights=(float(reg["deep_inversion"]["first_bn_multiplier"]),
                                                        float(reg["deep_inversion"]["second_bn_multiplier"]))))
    z = z.detach().clone().requires_grad_(True)
    try:
        terms = objective(z, t)
        grad, = torch.autograd.grad(terms["loss"], z)
    finally:
        objective.close()
    return terms["loss"].detach(), grad, terms["start_index"]


def their_run(objectives, regularizers, quantise, config, net, targets, labels, shape, dtype, *, iterations: int,
              period: int, tv_start: int, bn_start: int, seed: int):
    """Their trial loop (optimization_based_attack.py:195–236 with the closure of 320–384), shortened.

    The config's period, TV and R_BN starts and budget are replaced by ``period``, ``tv_start``,
    ``bn_start`` and ``iterations`` (everything else as in the yaml). Returns (best candidate in
    normalised units, the iteration count when it was stored, the varying part of the objective per step).
    """
    cfg = {k: v for k, v in _numbers(config["objective"]).items() if k != "type"}
    objective = objectives.DynaLayerRandPickedCosineSimilarity(**{**cfg, "peroid_Add10": period})
    objective.initialize(torch.nn.CrossEntropyLoss(), types.SimpleNamespace(mixed_precision=False))
    setup = {"device": torch.device("cpu"), "dtype": dtype}
    regs = []
    for key, settings in config["regularization"].items():
        settings = _numbers(settings)
        settings.update({"tv_start": tv_start} if key == "total_variation" else {})
        settings.update({"deep_inv_start": bn_start} if key == "deep_inversion" else {})
        if settings["scale"] > 0:
            regs.append(regularizers.regularizer_lookup[key](setup, **settings))
    for reg in regs:
        reg.initialize([net], None, labels)
    mean = torch.tensor(IMAGENET_MEAN, dtype=dtype).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, dtype=dtype).view(1, 3, 1, 1)
    torch.manual_seed(seed)
    candidate = torch.randn(shape, dtype=dtype).requires_grad_(True)  # base_attack.py:228–229
    optim = _numbers(config["optim"])
    optimizer = torch.optim.Adam([candidate], lr=optim["step_size"])  # common.py:6–7
    scheduler = torch.optim.lr_scheduler.MultiStepLR(  # common.py:26–28
        optimizer, milestones=[iterations // 2.667, iterations // 1.6, iterations // 1.142], gamma=0.33)
    minimal, best, best_at, values = torch.as_tensor(float("inf"), dtype=dtype), None, None, []
    for iteration in range(iterations):
        def closure(iteration=iteration):
            optimizer.zero_grad()
            total, _ = objective(net, targets, candidate, labels)
            varying = total
            for reg in regs:
                value = reg(candidate, avgImg=candidate.detach(), iter=iteration)
                total = total + value
                varying = varying + value if isinstance(value, torch.Tensor) else varying
            total.backward(inputs=candidate)
            with torch.no_grad():
                quantise(None, candidate, iteration, mul_scale=optim["mul_scale"])
            values.append(float(varying.detach()))
            return total
        objective_value = optimizer.step(closure)
        scheduler.step()
        with torch.no_grad():
            candidate.data = torch.max(torch.min(candidate, (1 - mean) / std), -mean / std)
            if objective_value < minimal or (iteration + 1) % period == 0:
                minimal, best, best_at = objective_value.detach(), candidate.detach().clone(), iteration + 1
    for reg in regs:
        for hook in getattr(reg, "losses", [[]])[0]:
            hook.close()
    return best, best_at, values


def trajectory(objectives, regularizers, quantise, config, net, ours, targets, labels, shape, dtype,
               iterations: int = 12) -> dict:
    """Both loops for ``iterations`` steps on a compressed schedule (period 4, TV from 5, R_BN from 8)."""
    period, tv_start, bn_start, seed = 4, 5, 8, 11
    if iterations <= bn_start:
        raise SystemExit(f"--trajectory needs more than {bn_start} steps (R_BN comes in at step {bn_start})")
    best, best_at, values = their_run(objectives, regularizers, quantise, config, copy.deepcopy(net), targets, labels,
                                      shape, dtype, iterations=iterations, period=period, tv_start=tv_start,
                                      bn_start=bn_start, seed=seed)
    reg = _numbers(config["regularization"]["deep_inversion"])
    schedule = StepwiseSchedule(iterations=iterations, start=99, floor=24, step=10, interval=period, t1=tv_start,
                                t2=bn_start, lr_milestones=tuple(int(iterations // d) for d in (2.667, 1.6, 1.142)),
                                offset=1)
    result = stepwise_inversion(ours, targets, labels, shape, iterations=iterations, schedule=schedule, dropout=0.3,
                                tv_weight=_numbers(config["regularization"]["total_variation"])["scale"],
                                bn_weight=reg["scale"], lr=_numbers(config["optim"])["step_size"], seed=seed,
                                options=StepwiseOptions.authors(bn_layer_weights=(reg["first_bn_multiplier"],
                                                                                  reg["second_bn_multiplier"])))
    mean = torch.tensor(IMAGENET_MEAN, dtype=dtype).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, dtype=dtype).view(1, 3, 1, 1)
    return {"images": float((best * std + mean - result.images).abs().max()),
            "objective": max(abs(a - b) for a, b in zip(values, result.history["loss"])),
            "best_iteration": (best_at, result.info.get("best_iteration"))}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a checkout of MiLab-HITSZ/2023YeHFGradInv")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--times", type=int, nargs="*", default=list(TIMES))
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--trajectory", type=int, default=12, help="steps of both loops compared (0: none)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch.jit.script in their objectives.py
    objectives, regularizers, their_quantise, config = load_authors(args.checkout)
    dtype = getattr(torch, args.dtype)
    net = network(args.seed).to(dtype)
    theirs = copy.deepcopy(net)  # separate modules: each side's BatchNorm hooks see only its own forward
    ours = Normalized(net, IMAGENET_MEAN, IMAGENET_STD).eval()
    ours.mean = torch.tensor(IMAGENET_MEAN, dtype=dtype).view(1, 3, 1, 1)  # the constants to_pixels uses,
    ours.std = torch.tensor(IMAGENET_STD, dtype=dtype).view(1, 3, 1, 1)    # not float32 ones made double
    generator = torch.Generator().manual_seed(args.seed + 1)
    shape = (args.batch, 3, args.size, args.size)
    private = torch.rand(shape, generator=generator).to(dtype)
    labels = torch.randint(0, 10, (args.batch,), generator=generator)
    targets = client_gradients(ours, private, labels)
    z = torch.randn(shape, generator=generator).to(dtype)  # a candidate in normalised units (their init)
    worst = {"objective": 0.0, "objective_rel": 0.0, "grad": 0.0, "grad_rel": 0.0, "quantised": 0.0,
             "quantised_flips": 0}
    print(f"ResNet34 (random weights, random BN statistics), B = {args.batch}, {args.size} px, "
          f"labels {labels.tolist()}, {args.dtype}")
    print(f"{'t':>6} {'start':>5} {'theirs':>14} {'ours':>14} {'|Δ obj|':>9} {'max|Δ ∂/∂z|':>11} "
          f"{'rel':>8} {'|Δ q|, flips':>13}")
    for t in args.times:
        seed = 1000 + t
        value, grad, _constants = their_terms(objectives, regularizers, config, theirs, targets, z, labels, t, seed)
        our_value, our_grad, start = our_terms(ours, targets, z, labels, t, seed, config)
        d_obj = abs(float(value) - float(our_value))
        d_grad = float((grad - our_grad).abs().max())
        rel = d_grad / float(grad.abs().max())
        carrier = types.SimpleNamespace(grad=grad.clone())
        their_quantise(None, carrier, t, mul_scale=config["optim"]["mul_scale"])
        d_q = float((carrier.grad - quantised_sign(grad, t)).abs().max())  # the two quantisers, same input
        flips = int((quantised_sign(our_grad, t) != carrier.grad).sum())  # our gradient through ours
        worst.update(objective=max(worst["objective"], d_obj),
                     objective_rel=max(worst["objective_rel"], d_obj / abs(float(our_value))),
                     grad=max(worst["grad"], d_grad), grad_rel=max(worst["grad_rel"], rel),
                     quantised=max(worst["quantised"], d_q), quantised_flips=max(worst["quantised_flips"], flips))
        print(f"{t:>6} {start:>5} {float(value):>14.8f} {float(our_value):>14.8f} {d_obj:>9.2e} "
              f"{d_grad:>11.2e} {rel:>8.1e} {d_q:>6.1e}, {flips:>3}/{grad.numel()}")
    print("max |Δ objective| = {objective:.2e} (relative {objective_rel:.1e}); max |Δ ∂/∂z| = {grad:.2e} "
          "(relative to max |∂/∂z|: {grad_rel:.1e}); quantisers on the same gradient: max |Δ| = {quantised:.1e}; "
          "entries whose quantised step differs between their gradient and ours: ≤ {quantised_flips}".format(**worst))
    if args.trajectory:
        steps = trajectory(objectives, regularizers, their_quantise, config, theirs, ours, targets, labels, shape,
                           dtype, args.trajectory)
        worst["trajectory"] = steps
        print(f"{args.trajectory} steps of both loops (Adam on the quantised sign, lr steps, box, best iterate; "
              f"start stepping every 4, TV from 5, R_BN from 8): max |Δ objective| = {steps['objective']:.2e}, "
              f"max |Δ returned image| = {steps['images']:.2e} px, best iterate after step "
              f"{steps['best_iteration'][0]} (theirs) / {steps['best_iteration'][1]} (ours)")
    return worst


if __name__ == "__main__":
    main()
