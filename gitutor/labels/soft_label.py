"""Soft-label and last-layer feature recovery through one scalar λ (Wang, Liang & He, ICLR 2024, §3).

For one sample and a bias-free last layer z = W h with cross-entropy on a (soft) label y, row i of
the weight gradient is g_i = (p_i − y_i) hᵀ (Eq. 2). Every row is a multiple of the feature h, so
h = λ g_r for one unknown scalar λ = (p_r − y_r)⁻¹, and the label is a function of λ alone (Eq. 4):

    ŷ(λ) = softmax(W λ g_r) − g / (λ g_r),

where g / g_r is the per-row ratio (p_i − y_i) / (p_r − y_r). Every ŷ(λ) sums to 1 (Thm. 1); the
true λ is picked by the label-variance loss of Eq. 5: the variance of all entries but the largest
``exclude_top`` (1 for label smoothing and one-hot labels, 2 for mixup), which is 0 at the truth.
The search (:mod:`gitutor.labels.lambda_search`) follows the authors' code (App. E): L-BFGS from
λ = +1 and from λ = −1, then particle swarm optimisation (pyswarms) over widening windows of λ up to
|λ| = 70; a candidate is accepted when 1000 × variance < 1e-9 (App. B.1).

A last layer with a bias, z = W h + b, changes only the logits: the rows of ∂L/∂W are still
(p_i − y_i) hᵀ, so with the server's known b the label is ŷ(λ) = softmax(λ W g_r + b) − g / (λ g_r)
and the search uses the weight gradient alone ("regardless of the existence of the bias term", §1);
pass ``fc_bias=``. (With the bias gradient too, λ_r = 1 / ∂L/∂b_r directly: the bias attack of
Aono et al. 2017, no search.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from gitutor.labels.lambda_search import (
    ACCEPT_LOSS,
    LAMBDA_BOUND,
    PSO_START,
    SEARCHES,
    search_lambda,
)

#: The authors scale the variance by 1000 before comparing it with the acceptance bar (App. B.1).
LOSS_SCALE = 1000.0
METHODS = ("lbfgs", "pso", "zero-gradient")
#: How :func:`lambda_problem` reads Eq. 4's ratio g / g_r: at one entry (the authors' code) or by least
#: squares over the row (this book's option).
RATIOS = ("entry", "least-squares")


@dataclass(frozen=True)
class SoftLabelResult:
    """Outcome of :func:`recover_soft_label`.

    Attributes:
        label: recovered label ŷ(λ), shape ``(C,)``, float64, sums to 1 (Thm. 1).
        feature: recovered last-layer input h = λ g_r, shape ``(d,)``, float64 (NaN for a zero
            gradient, which carries no feature information).
        lam: the scalar λ = (p_r − y_r)⁻¹ (``inf`` for a zero gradient).
        loss: scaled label-variance loss 1000 · Eq. 5 at ``lam``.
        method: ``"lbfgs"``, ``"pso"`` or ``"zero-gradient"`` (App. B.3).
        accepted: whether ``loss`` is below the acceptance bar; if False, ``lam`` is the best
            candidate found over all searches (e.g. on noisy gradients, Table 5).
        row: the gradient row r used (largest |row sum|).
    """

    label: torch.Tensor
    feature: torch.Tensor
    lam: float
    loss: float
    method: str
    accepted: bool
    row: int


@dataclass(frozen=True)
class LambdaProblem:
    """The one-dimensional problem of Eq. 4–5 for one gradient.

    ``logit_direction`` u = W g_r ``(C,)`` (so the logits at λ are λ u + b) and ``ratios``
    (p_i − y_i)/(p_r − y_r) ``(C,)``, both float64; ``row`` is r; ``logit_offset`` is the last
    layer's known bias b ``(C,)`` float64, or None for a bias-free layer; ``negative_ratios``: the
    ratios used where λ < 0 when they are read at one entry that depends on the sign of the feature
    λ g_r (:func:`lambda_problem`'s ``ratio="entry"``), else None.
    """

    logit_direction: torch.Tensor
    ratios: torch.Tensor
    row_gradient: torch.Tensor
    row: int
    exclude_top: int
    logit_offset: torch.Tensor | None = None
    negative_ratios: torch.Tensor | None = None

    def labels(self, lam: torch.Tensor) -> torch.Tensor:
        """ŷ(λ) of Eq. 4 for a tensor of λ values ``(...)`` → ``(..., C)``."""
        lam = lam.unsqueeze(-1)
        logits = lam * self.logit_direction
        if self.logit_offset is not None:
            logits = logits + self.logit_offset
        ratios = self.ratios
        if self.negative_ratios is not None:
            ratios = torch.where(lam < 0, self.negative_ratios, self.ratios)
        return torch.softmax(logits, dim=-1) - ratios / lam

    def loss(self, lam: torch.Tensor) -> torch.Tensor:
        """1000 × the variance of all but the top ``exclude_top`` entries of ŷ(λ) (Eq. 5), ``(...)``."""
        label = self.labels(lam)
        top = label.topk(
            self.exclude_top, dim=-1
        ).values  # left out; no full sort (1000 classes, 500 λ)
        n = label.shape[-1] - self.exclude_top
        mean = ((label.sum(-1) - top.sum(-1)) / n).unsqueeze(-1)  # mean of the rest
        squares = (label - mean).pow(2).sum(-1) - (top - mean).pow(2).sum(
            -1
        )  # the rest's squared deviations
        return LOSS_SCALE * (squares / n).clamp_min(0)


def _as_weight(fc_weight: torch.Tensor | nn.Linear) -> torch.Tensor:
    if isinstance(fc_weight, nn.Linear):
        if fc_weight.bias is not None:
            raise ValueError(
                "the last layer has a bias; the λ recovery of Wang et al. (Eq. 2) needs a bias-free "
                "last layer z = W h — build the model with fc_bias=False (LeNet, resnet18) or FCN, or pass "
                "its weight and fc_bias=layer.bias (the bias then enters the logits only)"
            )
        fc_weight = fc_weight.weight
    if not isinstance(fc_weight, torch.Tensor):
        raise TypeError(
            f"fc_weight must be a torch.Tensor (C, d) or an nn.Linear, got {type(fc_weight).__name__}"
        )
    return fc_weight.detach()


def lambda_problem(
    fc_weight: torch.Tensor | nn.Linear,
    fc_weight_grad: torch.Tensor,
    *,
    exclude_top: int = 1,
    fc_bias: torch.Tensor | None = None,
    row: int | None = None,
    ratio: str = "entry",
) -> LambdaProblem:
    """Set up Eq. 4–5 from the last layer's weight and its gradient for ONE sample.

    Eq. 4's ratio g / g_r = (p_i − y_i)/(p_r − y_r) is the same at every entry of an exact gradient.
    ``ratio="entry"`` (the authors' code, ``recovering.py``, ``_fake_y``) reads it at the one entry where
    the feature h = λ g_r is largest (its smallest when that largest is 0), so the entry depends on the
    sign of λ; ``ratio="least-squares"`` (this book's option) fits it over every entry of the row,
    which averages noise on g_r out (Table 5).

    Args:
        fc_weight: bias-free last layer, an ``nn.Linear`` without bias or its weight ``(C, d)``.
        fc_weight_grad: ∂L/∂W of that layer, ``(C, d)``.
        exclude_top: entries left out of the variance (1: smoothing / one-hot, 2: mixup).
        fc_bias: the layer's bias b ``(C,)`` when it has one (pass the weight, not the ``nn.Linear``);
            it enters the logits only, the gradient used is the weight's.
        row: the row r whose gradient g_r is read as λ·h (None: the row of largest |row sum| of
            ``fc_weight_grad``, as the authors' code picks it). Given, e.g., when noise was added to
            row r only and r was picked on the clean gradient, as the authors' noise study does
            (``recovering.py``, ``setup``).
        ratio: one of :data:`RATIOS` (see above).

    Returns:
        :class:`LambdaProblem` with that r.

    Raises:
        TypeError: if the inputs are not tensors (or an ``nn.Linear``).
        ValueError: for a last layer with bias, a gradient whose shape differs from the weight's
            (e.g. a bias gradient ``(C,)``), fewer than ``exclude_top + 2`` classes, non-finite
            values, an all-zero gradient (use :func:`recover_soft_label`, which handles it), a
            ``row`` that is not an int in [0, C), or a ``ratio`` not in :data:`RATIOS`.
    """
    if ratio not in RATIOS:
        raise ValueError(f"ratio must be one of {RATIOS}, got {ratio!r}")
    weight = _as_weight(fc_weight).to(torch.float64)
    if not isinstance(fc_weight_grad, torch.Tensor):
        raise TypeError(
            f"fc_weight_grad must be a torch.Tensor (C, d), got {type(fc_weight_grad).__name__}"
        )
    grad = fc_weight_grad.detach().to(torch.float64)
    if weight.dim() != 2:
        raise ValueError(
            f"fc_weight must be 2-D (C, d), got shape {tuple(weight.shape)}"
        )
    if grad.shape != weight.shape:
        hint = (
            " (this looks like a bias gradient; pass the weight gradient)"
            if grad.dim() == 1
            else ""
        )
        raise ValueError(
            f"fc_weight_grad must have the weight's shape {tuple(weight.shape)}, "
            f"got {tuple(grad.shape)}{hint}"
        )
    if (
        not isinstance(exclude_top, int)
        or isinstance(exclude_top, bool)
        or exclude_top < 1
    ):
        raise ValueError(
            f"exclude_top must be a positive int (1 smoothing, 2 mixup), got {exclude_top!r}"
        )
    if weight.shape[0] < exclude_top + 2:
        raise ValueError(
            f"need at least exclude_top + 2 = {exclude_top + 2} classes for a variance, "
            f"got C = {weight.shape[0]}"
        )
    if not (torch.isfinite(weight).all() and torch.isfinite(grad).all()):
        raise ValueError("fc_weight and fc_weight_grad must be finite")
    offset = None
    if fc_bias is not None:
        offset = fc_bias.detach().to(torch.float64).reshape(-1)
        if offset.shape != (weight.shape[0],) or not torch.isfinite(offset).all():
            raise ValueError(
                f"fc_bias must be finite with shape ({weight.shape[0]},), got {tuple(fc_bias.shape)}"
            )
    if row is None:
        row = int(grad.sum(dim=1).abs().argmax())
    _check_row(row, weight.shape[0])
    row_gradient = grad[row]
    norm2 = row_gradient.dot(row_gradient)
    if norm2 == 0:
        raise ValueError(
            "the weight gradient is all zero; recover_soft_label handles this case (App. B.3)"
        )
    direction = weight @ row_gradient
    if (
        ratio == "least-squares"
    ):  # g_i / g_r fitted over the row, exact for noise-free gradients
        ratios = grad @ row_gradient / norm2
        return LambdaProblem(direction, ratios, row_gradient, row, exclude_top, offset)
    # the authors' entry: where h = λ g_r is largest — g_r's largest for λ > 0, its smallest for
    # λ < 0 — or, when that largest is 0, where h is smallest
    high, low = int(row_gradient.argmax()), int(row_gradient.argmin())
    positive = high if row_gradient[high] != 0 else low
    negative = low if row_gradient[low] != 0 else high
    at = lambda entry: grad[:, entry] / row_gradient[entry]  # noqa: E731
    return LambdaProblem(
        direction, at(positive), row_gradient, row, exclude_top, offset, at(negative)
    )


def _check_row(row, classes: int) -> None:
    if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < classes:
        raise ValueError(f"row must be an int in [0, {classes}), got {row!r}")


def _result(
    problem: LambdaProblem, lam: float, loss: float, method: str, tol: float
) -> SoftLabelResult:
    lam_t = torch.tensor(lam, dtype=torch.float64)
    return SoftLabelResult(
        label=problem.labels(lam_t).detach(),
        feature=(lam_t * problem.row_gradient).detach(),
        lam=lam,
        loss=loss,
        method=method,
        accepted=loss < tol,
        row=problem.row,
    )


def recover_soft_label(
    fc_weight: torch.Tensor | nn.Linear,
    fc_weight_grad: torch.Tensor,
    *,
    exclude_top: int = 1,
    seed: int = 0,
    tol: float = ACCEPT_LOSS,
    bound: float | None = None,
    prediction: torch.Tensor | None = None,
    search: str = "lbfgs+pso",
    fc_bias: torch.Tensor | None = None,
    row: int | None = None,
    ratio: str = "entry",
) -> SoftLabelResult:
    """Recover a sample's soft label and last-layer feature from the last-layer gradient (§3, Eq. 2–5).

    Search order (App. E, ``search="lbfgs+pso"``): L-BFGS (lr 0.5, up to 100 steps, left early on a loss
    plateau) from λ = +1, then from λ = −1; if neither reaches a scaled loss below ``tol``, PSO (pyswarms, 500
    particles, 40 iterations) over the windows [0.7, 6], [−6.3, −1], [5.7, 11], … up to |λ| = 70.
    Our additions to the paper's recipe: each window's swarm best and the best personal best of
    each tenth of the window are polished by L-BFGS. The first accepted λ is returned; if none is
    accepted the lowest-loss candidate is returned with ``accepted=False``. The truth is never
    consulted. ``search="pso"`` skips the L-BFGS starts, as the paper's noise study says ("only the
    PSO algorithm is utilized", §5.2, Table 5); ``search="pso-noise"`` is the search of the authors' noise
    study (``recovering.py``, ``pso_noise``): fixed windows |λ| ≤ 2.575
    (:data:`~gitutor.labels.lambda_search.NOISE_WINDOWS`), 200 particles × 30 iterations, no L-BFGS, the
    lowest-loss candidate of every window (never accepted early).

    Args:
        fc_weight: bias-free last layer (``nn.Linear`` without bias) or its weight ``(C, d)``.
        fc_weight_grad: gradient of the batch-of-one cross-entropy w.r.t. that weight, ``(C, d)``.
        exclude_top: entries left out of Eq. 5's variance: 1 for label smoothing and one-hot
            labels, 2 for mixup of two classes.
        seed: seeds the PSO (pyswarms uses NumPy's global generator; its state is restored).
        tol: acceptance bar on the scaled loss (1e-9 as in App. B.1).
        bound: largest |λ| searched by ``"lbfgs+pso"`` and ``"pso"`` (None: 70, as in the authors'
            code; App. B.2). Since |p_r − y_r| ≤ 1, every true λ has |λ| ≥ 1. ``"pso-noise"`` has
            fixed windows and takes no ``bound``.
        prediction: the model's output (logits or probabilities, ``(C,)``) for the sample; only
            used when the gradient is exactly zero: the model then predicts the one-hot label
            perfectly and the label is the one-hot of its argmax (App. B.3).
        search: ``"lbfgs+pso"`` (App. E), ``"pso"`` (PSO windows only, §5.2) or ``"pso-noise"`` (the
            authors' noise search).
        fc_bias: the known bias ``(C,)`` of a last layer z = W h + b (give ``fc_weight`` as the weight);
            only the weight gradient is used (see the module docstring).
        row: the row r of g_r (None: largest |row sum|; :func:`lambda_problem`).
        ratio: how Eq. 4's ratio g / g_r is read (:func:`lambda_problem`): ``"entry"`` (the authors')
            or ``"least-squares"``.

    Returns:
        :class:`SoftLabelResult` (``label`` ``(C,)``, ``feature`` ``(d,)``, ``lam``, ``loss``,
        ``method`` in {"lbfgs", "pso", "zero-gradient"}, ``accepted``, ``row``).

    Raises:
        TypeError: if the inputs are not tensors (or an ``nn.Linear``).
        ValueError: for a last layer with bias, a gradient of the wrong shape, too few classes,
            non-finite values, ``bound`` ≤ 1 (or given with ``search="pso-noise"``), an unknown
            ``search`` or ``ratio``, a ``row`` outside [0, C), or a zero gradient without ``prediction``.
    """
    if search not in SEARCHES:
        raise ValueError(f"search must be one of {SEARCHES}, got {search!r}")
    if ratio not in RATIOS:
        raise ValueError(f"ratio must be one of {RATIOS}, got {ratio!r}")
    if search == "pso-noise" and bound is not None:
        raise ValueError(
            f"bound is not used by search='pso-noise' (its windows are fixed), got {bound!r}"
        )
    bound = LAMBDA_BOUND if bound is None else bound
    weight = _as_weight(fc_weight)
    if row is not None:
        _check_row(row, weight.shape[0])
    if (
        isinstance(fc_weight_grad, torch.Tensor)
        and fc_weight_grad.shape == weight.shape
        and not torch.any(fc_weight_grad)
    ):
        return _zero_gradient_result(weight, prediction)
    problem = lambda_problem(
        weight,
        fc_weight_grad,
        exclude_top=exclude_top,
        fc_bias=fc_bias,
        row=row,
        ratio=ratio,
    )
    if not bound > PSO_START:
        raise ValueError(
            f"bound must exceed {PSO_START} (every true λ has |λ| ≥ 1), got {bound!r}"
        )
    lam, loss, method = search_lambda(problem, seed, tol, bound, search=search)
    return _result(problem, lam, loss, method, tol)


def _zero_gradient_result(
    weight: torch.Tensor, prediction: torch.Tensor | None
) -> SoftLabelResult:
    num_classes, dim = weight.shape
    if prediction is None:
        raise ValueError(
            "the weight gradient is exactly zero, so it carries no label information: the model "
            "already predicts a one-hot label perfectly (App. B.3); pass prediction= (the "
            "model's output for the sample) to return that label"
        )
    if prediction.shape != (num_classes,):
        raise ValueError(
            f"prediction must have shape ({num_classes},), got {tuple(prediction.shape)}"
        )
    label = torch.zeros(num_classes, dtype=torch.float64)
    label[int(prediction.argmax())] = 1.0
    return SoftLabelResult(
        label=label,
        feature=torch.full((dim,), float("nan"), dtype=torch.float64),
        lam=float("inf"),
        loss=0.0,
        method="zero-gradient",
        accepted=True,
        row=-1,
    )
