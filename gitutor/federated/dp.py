"""DP-SGD on the client with Opacus, and the ε its accountant states.

DP-SGD (Abadi et al. 2016, Algorithm 1) clips every example's gradient to L2 norm ≤ C
(``max_grad_norm``), sums the clipped gradients, adds Gaussian noise N(0, σ²C²·I)
(σ = ``noise_multiplier``) and divides by the expected batch size. Opacus implements it as
``opacus.PrivacyEngine.make_private`` (per-sample gradients from hooks, a ``DPOptimizer``, a
Poisson-sampling data loader) and states the privacy spent as (ε, δ) from an accountant that
composes the steps taken with their sample rate q (RDP: Mironov 2017; PRV: Gopi et al. 2021).

Here a client's local training is :func:`private_sgd` (one ``make_private`` per call, i.e. per
federated round) and :func:`epsilon` asks Opacus' accountant for ε after ``steps`` steps at
sample rate ``sample_rate``: the guarantee of every example of the client's data against anyone
who sees all its updates — the server included.

Opacus computes per-sample gradients, which BatchNorm mixes across the batch: a model with
BatchNorm is refused (``opacus.validators.ModuleValidator``; ``ModuleValidator.fix`` swaps it
for GroupNorm).
"""

from __future__ import annotations

import copy
import math
import numbers
import warnings

import torch
from torch import nn

from gitutor.federated.client import check_client_batch

ACCOUNTANTS = ("rdp", "prv")


def _real(
    value, name: str, *, positive: bool = False, upper: float | None = None
) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        kind = "> 0" if positive else "≥ 0"
        raise ValueError(f"{name} must be a finite number {kind}, got {value!r}")
    if upper is not None and value > upper:
        raise ValueError(f"{name} must be ≤ {upper}, got {value!r}")
    return value


def _count(value, name: str, minimum: int = 1) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or value < minimum
    ):
        raise ValueError(f"{name} must be an int ≥ {minimum}, got {value!r}")
    return int(value)


def check_dp_settings(
    noise_multiplier, max_grad_norm, delta
) -> tuple[float, float, float]:
    """σ ≥ 0, C > 0 and δ in (0, 1) as floats.

    Raises:
        ValueError: naming ``noise_multiplier``, ``max_grad_norm`` or ``delta`` when out of
            range or not finite.
        TypeError: for a value that is not a real number.
    """
    sigma = _real(noise_multiplier, "noise_multiplier")
    clip = _real(max_grad_norm, "max_grad_norm", positive=True)
    delta = _real(delta, "delta", positive=True)
    if delta >= 1:
        raise ValueError(f"delta must be in (0, 1) (e.g. 1e-5), got {delta!r}")
    return sigma, clip, delta


def epsilon(
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    *,
    accountant: str = "rdp",
) -> float:
    """ε of DP-SGD after ``steps`` steps, from Opacus' accountant (``math.inf`` for σ = 0).

    Args:
        noise_multiplier: σ ≥ 0, the noise standard deviation in units of the clipping norm.
        sample_rate: q in (0, 1], the probability that an example is in a step's batch
            (Poisson sampling; 1 = every step uses all the client's examples).
        steps: number of DP-SGD steps taken (≥ 1), over all rounds.
        delta: δ in (0, 1) of the (ε, δ) guarantee.
        accountant: ``"rdp"`` (Rényi DP, Opacus' ``RDPAccountant``) or ``"prv"``
            (privacy random variables, ``PRVAccountant``).

    Returns:
        ε as a float (the accountant's value for this history; larger σ gives smaller ε).

    Raises:
        ValueError: naming the argument for σ < 0, q outside (0, 1], steps < 1, δ outside
            (0, 1) or an unknown accountant.
    """
    sigma = _real(noise_multiplier, "noise_multiplier")
    rate = _real(sample_rate, "sample_rate", positive=True, upper=1.0)
    steps = _count(steps, "steps")
    _, _, delta = check_dp_settings(sigma, 1.0, delta)
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
    if sigma == 0:
        return math.inf
    from opacus.accountants import PRVAccountant, RDPAccountant

    engine = RDPAccountant() if accountant == "rdp" else PRVAccountant()
    engine.history = [(sigma, rate, steps)]
    with (
        warnings.catch_warnings()
    ):  # RDP: "optimal order is the largest alpha" at large ε
        warnings.filterwarnings("ignore", message="Optimal order is the")
        return float(engine.get_epsilon(delta=delta))


def check_opacus_model(model: nn.Module) -> None:
    """Check that ``model`` has no in-place module (``nn.ReLU(inplace=True)`` …): Opacus' per-sample
    gradient hooks need the layer inputs they saved, which an in-place activation overwrites (torch
    then fails with "a view … modified inplace").

    Raises:
        TypeError: if ``model`` is not an ``nn.Module``.
        ValueError: naming the in-place modules.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    inplace = [
        f"{name or type(model).__name__} ({module})"
        for name, module in model.named_modules()
        if getattr(module, "inplace", False) is True
    ]
    if inplace:
        raise ValueError(
            f"model: Opacus (DP-SGD) needs out-of-place activations, but {', '.join(inplace[:3])}"
            f"{' …' if len(inplace) > 3 else ''} work in place: build them with "
            "inplace=False (e.g. nn.ReLU())"
        )


def private_sgd(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    lr: float,
    steps: int,
    noise_multiplier: float,
    max_grad_norm: float,
    batch_size: int | None = None,
    seed: int = 0,
) -> tuple[nn.Module, dict]:
    """``steps`` DP-SGD steps of a client with Opacus; the trained copy and what was spent.

    The client wraps a copy of ``model`` with ``opacus.PrivacyEngine.make_private``
    (Poisson sampling at rate q = batch_size / N, flat clipping at C, noise σ·C) and runs plain
    SGD (no momentum) on the batch-mean cross-entropy.

    Args:
        model: the global model received from the server (not modified; no BatchNorm).
        images: ``(N, C, H, W)`` the client's images in [0, 1].
        labels: ``(N,)`` int64 labels.
        lr: η > 0, SGD learning rate.
        steps: DP-SGD steps (≥ 1).
        noise_multiplier: σ ≥ 0 (0: clipping only, no privacy: ε = ∞).
        max_grad_norm: C > 0, per-example clipping norm (L2 over all parameters).
        batch_size: expected batch size (default N: q = 1, every step sees every example).
        seed: seeds the sampling and the noise (``noise_generator``), so runs repeat.

    Returns:
        ``(trained, spent)``: the trained copy (a plain module, hooks removed) and
        ``{"steps", "sample_rate", "noise_multiplier", "max_grad_norm", "history"}``: what
        the accountant composes (:func:`epsilon`); ``"history"`` is the engine's own
        accountant history, ``[(σ, q, steps)]``.

    Raises:
        ValueError: naming the argument for a bad batch, σ, C, lr, steps or batch_size, or a
            model Opacus cannot make private (BatchNorm: use GroupNorm,
            ``opacus.validators.ModuleValidator.fix``) or an in-place activation
            (:func:`check_opacus_model`).
        TypeError: for non-float images or non-int64 labels.
    """
    from opacus.validators import ModuleValidator

    check_client_batch(images, labels, model)
    sigma, clip, _ = check_dp_settings(noise_multiplier, max_grad_norm, 0.5)
    lr = _real(lr, "lr", positive=True)
    steps = _count(steps, "steps")
    count = images.shape[0]
    batch_size = count if batch_size is None else _count(batch_size, "batch_size")
    if batch_size > count:
        raise ValueError(
            f"batch_size must be ≤ the client's {count} examples, got {batch_size}"
        )
    check_opacus_model(model)
    problems = ModuleValidator.validate(model, strict=False)
    if problems:
        raise ValueError(
            f"model: Opacus cannot compute per-sample gradients for it ({problems[0]}); "
            "replace BatchNorm with GroupNorm (opacus.validators.ModuleValidator.fix)"
        )
    trained = copy.deepcopy(model).train()
    generator = torch.Generator().manual_seed(int(seed))
    data = torch.utils.data.TensorDataset(images.detach(), labels.detach())
    with warnings.catch_warnings():  # Opacus' notes for a simulation, not for a reader:
        warnings.filterwarnings("ignore", message="Secure RNG turned off")
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        warnings.filterwarnings("ignore", message="Optimal order is the")
        private, optimizer = _train(
            trained, data, batch_size, lr, sigma, clip, generator, steps
        )
    private.remove_hooks()
    spent = {
        "steps": steps,
        "sample_rate": float(optimizer.expected_batch_size / count),
        "noise_multiplier": sigma,
        "max_grad_norm": clip,
        "history": list(private.accountant_history),
    }
    return trained, spent


def _train(model, data, batch_size, lr, sigma, clip, generator, steps):
    """The Opacus lines: make the model, optimizer and loader private, then step."""
    from opacus import PrivacyEngine

    loader = torch.utils.data.DataLoader(
        data, batch_size=batch_size, generator=generator
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    engine = PrivacyEngine(accountant="rdp")
    private, optimizer, loader = engine.make_private(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=sigma,
        max_grad_norm=clip,
        poisson_sampling=True,
        noise_generator=generator,
    )
    loss_fn = nn.CrossEntropyLoss()
    done = 0
    while done < steps:
        for batch_images, batch_labels in loader:
            optimizer.zero_grad()
            loss_fn(private(batch_images), batch_labels).backward()
            optimizer.step()
            done += 1
            if done == steps:
                break
    private.accountant_history = list(engine.accountant.history)
    return private, optimizer
