"""Chapter 02's experiments (Wang, Liang & He, ICLR 2024, §4 and App. E): the iDLG sign rule on soft
labels, label recovery per network (Table 2), the λ landscape (Fig. 1), analytic FCN inversion
(Table 6) and recovery under gradient noise (Table 5); gradient matching with each label (Table 3) lives in
:mod:`gitutor.chapters.idlg_soft_labels.matching` (re-exported here).

Every experiment takes a ``sample(kind, index)`` callable returning ``(x (1, C, H, W), soft label
(1, K), exclude_top)`` (:func:`~gitutor.chapters.idlg_soft_labels.trials.labelled_sample` bound to the
chapter's images and generator) and calls it in a fixed order, so one seed gives the same numbers.
The server's view of each sample is :func:`~gitutor.federated.gradient_case`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from gitutor.attacks import invert_fcn
from gitutor.federated import add_gaussian_noise, gradient_case
from gitutor.labels import idlg_label, lambda_problem, recover_soft_label
from gitutor.metrics import lpips_or_none, psnr, ssim
from gitutor.models import last_linear
from gitutor.chapters.idlg_soft_labels.matching import (
    MATCHING_SETTINGS,
    cosine_diagnosis,
    matching_table,
)  # noqa: F401
from gitutor.chapters.idlg_soft_labels.trials import (
    KINDS,
    label_l1,
    local_minima,
    true_lambda,
)

Sample = Callable[[str, int], tuple[torch.Tensor, torch.Tensor, int]]


def _check_count(n, name: str) -> None:
    if type(n) is not int or n < 1:
        raise ValueError(f"{name} must be a positive int, got {n!r}")


def observed(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    device: torch.device | str = "cpu",
):
    """The update the server observes for one sample (``gradient_case``), moved to the CPU."""
    return [g.cpu() for g in gradient_case(model, x.to(device), y.to(device)).update]


def idlg_rule_accuracy(
    model: nn.Module, sample: Sample, n: int, tolerance: float, device="cpu"
) -> dict:
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
            exact.append(
                label_l1(F.one_hot(torch.tensor(guess), y.shape[-1]), y) <= tolerance
            )
        rates[kind] = (100 * float(np.mean(top_class)), 100 * float(np.mean(exact)))
    return rates


def label_recovery_table(
    networks: Mapping[str, tuple[nn.Module, Sample]],
    n: int,
    tolerance: float,
    device="cpu",
    progress: bool = False,
):
    """Table 2: per ``(network, kind)`` the accuracy (%) and mean L1 error L_r of ``recover_soft_label``
    over ``n`` samples, the mean seconds per recovery, how often each search method was used and every L_r.
    ``progress``: a tqdm bar over the samples of each ``(network, kind)``.

    Returns:
        ``(table, seconds, methods, errors)``, four dicts keyed by ``(network name, kind)``; ``errors`` holds
        the list of the ``n`` L1 errors (a label is recovered when its L_r is at most ``tolerance``).

    Raises:
        ValueError: if ``n`` is not a positive int.
    """
    _check_count(n, "n")
    table, seconds, methods, all_errors = {}, {}, {}, {}
    for name, (model, sample) in networks.items():
        for kind in KINDS:
            errors, took, used = [], [], []
            bar = tqdm(range(n), desc=f"Table 2, {name} {kind}", disable=not progress)
            for index in bar:
                x, y, k = sample(kind, index)
                grad = observed(model, x, y, device)[-1]
                start = time.perf_counter()
                result = recover_soft_label(
                    last_linear(model),
                    grad,
                    exclude_top=k,
                    seed=index,
                    prediction=model(x.to(device))[0].detach().cpu(),
                )
                took.append(time.perf_counter() - start)
                errors.append(label_l1(result.label, y))
                used.append(result.method)
            all_errors[name, kind] = errors
            errors = np.array(errors)
            table[name, kind] = (
                100 * float((errors <= tolerance).mean()),
                float(errors.mean()),
            )
            seconds[name, kind] = float(np.mean(took))
            methods[name, kind] = {m: used.count(m) for m in sorted(set(used))}
    return table, seconds, methods, all_errors


def landscape_example(
    model: nn.Module, sample: Sample, n: int, *, first: bool, device="cpu"
) -> dict:
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
        result = recover_soft_label(last_linear(model), grad, exclude_top=k)
        if first or result.method == "pso" or abs(result.lam) > 3:
            break
    return {
        "grad": grad,
        "exclude_top": k,
        "result": result,
        "scanned": index + 1,
        "lam_star": true_lambda(model, x.to(device), y, result.row),
    }


def landscape_examples(
    cases: Mapping[str, tuple[nn.Module, Sample, bool]], n: int, device="cpu"
) -> dict:
    """Fig. 1's examples: per name, :func:`landscape_example` of ``(model, sample, first)`` plus the λ
    ``problem`` (:func:`~gitutor.labels.lambda_problem`, Eq. 4–5) and the λ of its local ``minima`` on
    [−reach, reach], reach = max(8, 1.3 |recovered λ|) (:func:`~gitutor.chapters.idlg_soft_labels.trials.local_minima`).

    Raises:
        ValueError: if ``n`` is not a positive int.
    """
    examples = {}
    for name, (model, sample, first) in cases.items():
        example = landscape_example(model, sample, n, first=first, device=device)
        problem = lambda_problem(
            last_linear(model), example["grad"], exclude_top=example["exclude_top"]
        )
        reach = max(8.0, 1.3 * abs(example["result"].lam))
        examples[name] = example | {
            "problem": problem,
            "minima": local_minima(problem, reach),
        }
    return examples


def pso_share(
    methods: Mapping[tuple[str, str], Mapping[str, int]], network: str
) -> list[bool]:
    """One bool per label of ``network`` in :func:`label_recovery_table`'s ``methods``: whether the λ search
    needed particle swarm optimisation (App. E: L-BFGS from ±1 found no λ below the acceptance bar)."""
    counts = [used for (name, _), used in methods.items() if name == network]
    return [True] * sum(c.get("pso", 0) for c in counts) + [False] * sum(
        n for c in counts for m, n in c.items() if m != "pso"
    )


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
    scores = (
        float(ssim(reconstructions, truths).mean()),
        float(psnr(reconstructions, truths).mean()),
        None if lp is None else float(lp.mean()),
    )
    return truths, reconstructions, scores


#: Table 5's hit: the authors' code counts a λ right when |x − x*| < 1 for its scalar x = 4λ (``pso_noise``;
#: the feature is x · g_r / coefficient, coefficient = 4 in ``label_smooth_cifar10.py``): |λ − λ*| < 0.25.
NOISE_HIT = 0.25
#: Where Table 5's noise goes: ``"row"`` on g_r only, r picked on the clean gradient (the authors' ``setup``);
#: ``"all"`` on every entry of the last-layer weight gradient, r picked on the noisy one (beyond the paper).
NOISE_ROWS = ("row", "all")


def noise_table(
    model: nn.Module,
    sample: Sample,
    cfg,
    generator: torch.Generator,
    device="cpu",
    *,
    rows: str = "row",
    progress: bool = False,
):
    """Table 5 (Wang et al. 2024, §5.2): Gaussian noise N(0, σ²) for each σ in ``cfg.noise_sigmas`` on the
    last-layer weight gradient of ``cfg.noise_samples`` smoothed labels, λ searched by the authors' noise
    search (``search="pso-noise"`` of :func:`gitutor.labels.recover_soft_label`: PSO only, |λ| ≤ 2.575).

    σ is the table's value, as the authors' code draws it (``torch.normal(0, std)`` in ``recovering.py``,
    ``setup``; the paper's text says "variance"): the paper's L_s grows tenfold per decade of it, linear
    in σ. ``rows="row"`` (the authors'): the noise lands on g_r only, the row r of largest |row sum| of the
    clean gradient, and the search reads that row; ``rows="all"``: on every entry, r picked on the noisy
    gradient, as a server holding a noised gradient would (a variant beyond the paper). A λ is right
    when |λ − λ*| < :data:`NOISE_HIT` (the authors' criterion in their units, 4λ). Each sample is drawn
    once from ``sample`` and used at every σ, so the levels are paired.

    L_s scales with σ over the size of the row it perturbs, so rows of two settings compare at equal
    σ / RMS(g_r), not at equal σ; and noise adds its own energy to the row, which the fit absorbs by
    shrinking |λ| (Eq. 4's ratio g_i / g_r, read by least squares over the row's entries), so the error leans
    towards λ = 0.

    Returns:
        ``{σ: (% right, mean |λ − λ*|, mean L1 label error)}``, the RMS per entry of every clean row g_r
        (a list, one per sample and σ) and per σ the samples' ``{"hits": [bool, ...], "gaps":
        [|λ − λ*|, ...], "ratios": [σ / RMS(g_r), ...], "shrunk": [|λ| < |λ*|, ...]}`` (the ratio's row is
        the one the search read: r of the clean gradient for ``rows="row"``, of the noisy one for
        ``"all"``; RMS of its clean entries). ``progress``: a tqdm bar over the σ.

    Raises:
        ValueError: naming ``rows`` when it is not one of :data:`NOISE_ROWS`, before anything runs.
    """
    if rows not in NOISE_ROWS:
        raise ValueError(f"rows must be one of {NOISE_ROWS}, got {rows!r}")
    table, signal, samples = {}, [], {}
    # one draw per sample, shared by every σ: the levels are paired
    drawn = [sample("smoothing", index) for index in range(cfg.noise_samples)]
    for sigma in tqdm(cfg.noise_sigmas, desc=f"Table 5, {rows}", disable=not progress):
        gaps, errors, hits, ratios, shrunk = [], [], [], [], []
        for index, (x, y, k) in enumerate(drawn):
            clean = observed(model, x, y, device)[-1]
            largest = int(clean.sum(dim=1).abs().argmax())  # r of the clean gradient
            signal.append(float(clean[largest].pow(2).mean().sqrt()))
            if rows == "all":
                grad, row = (
                    add_gaussian_noise([clean], sigma, generator=generator)[0],
                    None,
                )
            else:
                row = largest
                grad = clean.clone()
                grad[row] = add_gaussian_noise(
                    [clean[row]], sigma, generator=generator
                )[0]
            result = recover_soft_label(
                last_linear(model),
                grad,
                exclude_top=k,
                seed=index,
                search="pso-noise",
                row=row,
            )
            lam_star = true_lambda(model, x.to(device), y, result.row)
            gaps.append(abs(result.lam - lam_star))
            errors.append(label_l1(result.label, y))
            hits.append(gaps[-1] < NOISE_HIT)
            read = clean[result.row].pow(2).mean().sqrt()  # the row the search read
            ratios.append(sigma / float(read))
            shrunk.append(abs(result.lam) < abs(lam_star))
        table[sigma] = (
            100 * float(np.mean(hits)),
            float(np.mean(gaps)),
            float(np.mean(errors)),
        )
        samples[sigma] = {
            "hits": hits,
            "gaps": gaps,
            "ratios": ratios,
            "shrunk": shrunk,
        }
    return table, signal, samples
