"""Chapter 02's experiments (Wang, Liang & He, ICLR 2024, §4 and App. E): the iDLG sign rule on soft
labels, label recovery per network (Table 2), the λ landscape (Fig. 1), analytic FCN inversion
(Table 6), gradient matching with each label (Table 3) and recovery under gradient noise (Table 5).

Every experiment takes a ``sample(kind, index)`` callable returning ``(x (1, C, H, W), soft label
(1, K), exclude_top)`` (:func:`~gitutor.studies.soft_label_trials.labelled_sample` bound to the
chapter's images and generator) and calls it in a fixed order, so one seed gives the same numbers.
The server's view of each sample is :func:`~gitutor.federated.gradient_case`.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from gitutor.attacks import dlg, invert_fcn, inverting_gradients
from gitutor.federated import add_gaussian_noise, gradient_case
from gitutor.labels import idlg_label, lambda_problem, recover_soft_label
from gitutor.metrics import lpips_or_none, psnr, ssim
from gitutor.studies.soft_label_trials import KINDS, label_l1, local_minima, true_lambda

Sample = Callable[[str, int], tuple[torch.Tensor, torch.Tensor, int]]
#: Table 3's settings: gradient distance / label given to the attack (Wang et al. §4.3).
MATCHING_SETTINGS = ("cos / GT", "cos / iDLG", "cos / Ours", "L2 / GT", "L2 / Ours", "L2 / iDLG", "L2 / DLG")


def _check_count(n, name: str) -> None:
    if type(n) is not int or n < 1:
        raise ValueError(f"{name} must be a positive int, got {n!r}")


def observed(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device: torch.device | str = "cpu"):
    """The update the server observes for one sample (``gradient_case``), moved to the CPU."""
    return [g.cpu() for g in gradient_case(model, x.to(device), y.to(device)).update]


def idlg_rule_accuracy(model: nn.Module, sample: Sample, n: int, tolerance: float, device="cpu") -> dict:
    """Per kind in ``("one-hot", "smoothing", "mixup")``: (% where iDLG's class is the label's largest entry,
    % where iDLG's one-hot answer is within L1 ``tolerance`` of the label), over ``n`` samples each.

    Raises:
        ValueError: if ``n`` is not a positive int.
    """
    _check_count(n, "n")
    rates = {}
    for kind in ("one-hot", "smoothing", "mixup"):
        top_class, exact = [], []
        for index in range(n):
            x, y, _ = sample(kind, index)
            guess = idlg_label(observed(model, x, y, device)[-1])
            top_class.append(guess == int(y.argmax()))
            exact.append(label_l1(F.one_hot(torch.tensor(guess), y.shape[-1]), y) <= tolerance)
        rates[kind] = (100 * float(np.mean(top_class)), 100 * float(np.mean(exact)))
    return rates


def label_recovery_table(networks: Mapping[str, tuple[nn.Module, Sample]], n: int, tolerance: float, device="cpu"):
    """Table 2: per ``(network, kind)`` the accuracy (%) and mean L1 error L_r of ``recover_soft_label``
    over ``n`` samples, the mean seconds per recovery and how often each search method was used.

    Returns:
        ``(table, seconds, methods)``, three dicts keyed by ``(network name, kind)``.

    Raises:
        ValueError: if ``n`` is not a positive int.
    """
    _check_count(n, "n")
    table, seconds, methods = {}, {}, {}
    for name, (model, sample) in networks.items():
        for kind in KINDS:
            errors, took, used = [], [], []
            for index in range(n):
                x, y, k = sample(kind, index)
                grad = observed(model, x, y, device)[-1]
                start = time.perf_counter()
                result = recover_soft_label(model.fc, grad, exclude_top=k, seed=index,
                                            prediction=model(x.to(device))[0].detach().cpu())
                took.append(time.perf_counter() - start)
                errors.append(label_l1(result.label, y))
                used.append(result.method)
            errors = np.array(errors)
            table[name, kind] = (100 * float((errors <= tolerance).mean()), float(errors.mean()))
            seconds[name, kind] = float(np.mean(took))
            methods[name, kind] = {m: used.count(m) for m in sorted(set(used))}
    return table, seconds, methods


def landscape_example(model: nn.Module, sample: Sample, n: int, *, first: bool, device="cpu") -> dict:
    """The sample whose λ landscape Fig. 1 shows: the first one (``first``), else the first of ``n``
    label-smoothing samples whose search needed PSO or found |λ| > 3 (a far minimum), else the last.

    Returns:
        dict with ``grad`` (the observed ``(K, d)`` last-layer gradient), ``exclude_top``, ``result``
        (:class:`~gitutor.labels.SoftLabelResult`), ``lam_star`` (the true λ) and ``scanned`` (samples looked at).

    Raises:
        ValueError: if ``n`` is not a positive int.
    """
    _check_count(n, "n")
    for index in range(n):
        x, y, k = sample("smoothing", index)
        grad = observed(model, x, y, device)[-1]
        result = recover_soft_label(model.fc, grad, exclude_top=k)
        if first or result.method == "pso" or abs(result.lam) > 3:
            break
    return {"grad": grad, "exclude_top": k, "result": result, "scanned": index + 1,
            "lam_star": true_lambda(model, x.to(device), y, result.row)}


def landscape_examples(cases: Mapping[str, tuple[nn.Module, Sample, bool]], n: int, device="cpu") -> dict:
    """Fig. 1's examples: per name, :func:`landscape_example` of ``(model, sample, first)`` plus the λ
    ``problem`` (:func:`~gitutor.labels.lambda_problem`, Eq. 4–5) and the λ of its local ``minima`` on
    [−reach, reach], reach = max(8, 1.3 |recovered λ|) (:func:`~gitutor.studies.soft_label_trials.local_minima`).

    Raises:
        ValueError: if ``n`` is not a positive int.
    """
    examples = {}
    for name, (model, sample, first) in cases.items():
        example = landscape_example(model, sample, n, first=first, device=device)
        problem = lambda_problem(model.fc, example["grad"], exclude_top=example["exclude_top"])
        reach = max(8.0, 1.3 * abs(example["result"].lam))
        examples[name] = example | {"problem": problem, "minima": local_minima(problem, reach)}
    return examples


def pso_share(methods: Mapping[tuple[str, str], Mapping[str, int]], network: str) -> list[bool]:
    """One bool per label of ``network`` in :func:`label_recovery_table`'s ``methods``: whether the λ search
    needed particle swarm optimisation (App. E: L-BFGS from ±1 found no λ below the acceptance bar)."""
    counts = [used for (name, _), used in methods.items() if name == network]
    return [True] * sum(c.get("pso", 0) for c in counts) + [False] * sum(
        n for c in counts for m, n in c.items() if m != "pso")


def fcn_inversion(fcn: nn.Module, sample: Sample, n: int, kind: str):
    """Table 6: recover label and feature from the last layer, then invert the bias-free FCN analytically
    (§4.2, Eq. 6–7) for ``n`` samples of ``kind``. Returns ``(truths, reconstructions)``, each ``(n, C, H, W)``,
    and ``(mean SSIM, mean PSNR dB, mean LPIPS or None when its weights are not on disk)``.

    Raises:
        ValueError: if ``n`` is not a positive int.
    """
    _check_count(n, "n")
    truths, reconstructions = [], []
    for index in range(n):
        x, y, k = sample(kind, index)
        grads = observed(fcn, x, y)
        result = recover_soft_label(fcn.fc, grads[-1], exclude_top=k)
        reconstructions.append(invert_fcn(fcn, grads, result.feature, result.label))
        truths.append(x)
    truths, reconstructions = torch.cat(truths), torch.cat(reconstructions)
    lp = lpips_or_none(reconstructions.clamp(0, 1), truths)
    scores = (float(ssim(reconstructions, truths).mean()), float(psnr(reconstructions, truths).mean()),
              None if lp is None else float(lp.mean()))
    return truths, reconstructions, scores


def matching_runs(model: nn.Module, x: torch.Tensor, grads,
                  labels: Mapping[str, torch.Tensor], repeat: int, cfg,
                  device="cpu") -> dict[str, torch.Tensor]:
    """One repeat of Table 3 on one sample (§4.3): the ``(1, C, H, W)``
    reconstruction of every :data:`MATCHING_SETTINGS` entry. Cosine: Inverting
    Gradients (signed Adam, TV). L2: DLG's L-BFGS. ``labels`` maps "GT", "iDLG",
    "Ours" to the label the attack is given; "L2 / DLG" optimises the label too."""
    shape, classes = tuple(x.shape), cfg.num_classes
    cosine = dict(iterations=cfg.table3_ig_iterations, tv_weight=cfg.table3_tv_weight)
    runs = {}
    for name in ("GT", "iDLG", "Ours"):
        label = labels[name].to(device)
        runs[f"cos / {name}"] = inverting_gradients(
            model, grads, label, shape, seed=repeat, **cosine).images
    for name in ("GT", "Ours", "iDLG"):
        label = labels[name].to(device)
        runs[f"L2 / {name}"] = dlg(model, grads, shape, classes, labels=label,
                                   iterations=cfg.table3_iterations, seed=repeat).images
    runs["L2 / DLG"] = dlg(model, grads, shape, classes,
                           iterations=cfg.table3_iterations, seed=repeat).images
    return runs


def matching_table(model: nn.Module, sample: Sample, cfg, device="cpu") -> dict:
    """Reduced Table 3: ``cfg.table3_samples[kind]`` samples (images 0, 2, 4, …) × ``cfg.table3_repeats``
    repeats of :func:`matching_runs` per kind in ("mixup", "smoothing").

    Returns:
        dict with ``table`` ``{(kind, setting): (mean PSNR dB, mean SSIM)}``, ``scores`` (the same keys, the
        list of every run's ``(PSNR dB, SSIM)``, for intervals), ``images`` and ``titles`` (truth and every
        setting for each kind's first sample) and ``first`` ``{kind: (x, true label, grads)}``.
    """
    scores, images, titles, first = {}, [], [], {}
    for kind in ("mixup", "smoothing"):
        for index in range(cfg.table3_samples[kind]):
            x, y, k = sample(kind, 2 * index)
            grads = observed(model, x, y, device)
            labels = {"GT": y, "iDLG": torch.tensor([idlg_label(grads[-1])]),
                      "Ours": recover_soft_label(model.fc, grads[-1], exclude_top=k).label.float().view(1, -1)}
            for repeat in range(cfg.table3_repeats):
                runs = matching_runs(model, x, grads, labels, repeat, cfg, device)
                for setting, image in runs.items():
                    scores.setdefault((kind, setting), []).append((float(psnr(image, x)),
                                                                   float(ssim(image.clamp(0, 1), x))))
            if index == 0:
                images += [x, *(runs[s] for s in MATCHING_SETTINGS)]
                titles += [f"{kind}: truth"] + [f"{kind}: {s}" for s in MATCHING_SETTINGS]
                first[kind] = (x, y, grads)
    table = {key: tuple(np.mean(values, axis=0)) for key, values in scores.items()}
    return {"table": table, "scores": scores, "images": images, "titles": titles, "first": first}


def cosine_diagnosis(model: nn.Module, matching: dict, cfg, device="cpu") -> dict[str, dict[str, float]]:
    """For each kind whose first "cos / GT" run of :func:`matching_table` stays below
    ``cfg.table3_success_psnr``: its PSNR (dB) as run and with 3× the steps, without TV, from another start."""
    diagnosis = {}
    for kind, (x, y, grads) in matching["first"].items():
        base = float(psnr(matching["images"][matching["titles"].index(f"{kind}: cos / GT")], x))
        if base >= cfg.table3_success_psnr:
            continue
        steps, tv = cfg.table3_ig_iterations, cfg.table3_tv_weight
        variants = {"3× steps": dict(iterations=3 * steps, tv_weight=tv, seed=0),
                    "no TV": dict(iterations=steps, tv_weight=0.0, seed=0),
                    "another start": dict(iterations=steps, tv_weight=tv, seed=1)}
        diagnosis[kind] = {"as run": base} | {
            name: float(psnr(inverting_gradients(model, grads, y.to(device), tuple(x.shape), **options).images, x))
            for name, options in variants.items()}
    return diagnosis


def noise_table(model: nn.Module, sample: Sample, cfg, generator: torch.Generator, device="cpu"):
    """Table 5: Gaussian noise of each variance in ``cfg.noise_variances`` on the last-layer gradient of
    ``cfg.noise_samples`` smoothed labels, λ searched by PSO only up to ``cfg.noise_bound``.

    Returns:
        ``{variance: (% with |λ − λ*| < 0.1|λ*|, mean |λ − λ*|, mean L1 label error)}`` and the RMS of
        every clean gradient (a list, to compare σ with the gradient's scale).
    """
    table, signal = {}, []
    for variance in cfg.noise_variances:
        gaps, errors, hits = [], [], []
        for index in range(cfg.noise_samples):
            x, y, k = sample("smoothing", index)
            clean = observed(model, x, y, device)[-1]
            signal.append(float(clean.pow(2).mean().sqrt()))
            grad = add_gaussian_noise([clean], math.sqrt(variance), generator=generator)[0]
            result = recover_soft_label(model.fc, grad, exclude_top=k, seed=index, bound=cfg.noise_bound, search="pso")
            lam_star = true_lambda(model, x.to(device), y, result.row)
            gaps.append(abs(result.lam - lam_star))
            errors.append(label_l1(result.label, y))
            hits.append(gaps[-1] < 0.1 * abs(lam_star))
        table[variance] = (100 * float(np.mean(hits)), float(np.mean(gaps)), float(np.mean(errors)))
    return table, signal
