"""Soft-label and last-layer feature recovery through one scalar λ (Wang, Liang & He, ICLR 2024, §3).

For one sample and a bias-free last layer z = W h with cross-entropy on a (soft) label y, row i of
the weight gradient is g_i = (p_i − y_i) hᵀ (Eq. 2). Every row is a multiple of the feature h, so
h = λ g_r for one unknown scalar λ = (p_r − y_r)⁻¹, and the label is a function of λ alone (Eq. 4):

    ŷ(λ) = softmax(W λ g_r) − g / (λ g_r),

where g / g_r is the per-row ratio (p_i − y_i) / (p_r − y_r). Every ŷ(λ) sums to 1 (Thm. 1); the
true λ is picked by the label-variance loss of Eq. 5: the variance of all entries but the largest
``exclude_top`` (1 for label smoothing and one-hot labels, 2 for mixup), which is 0 at the truth.
The search follows the authors' code (App. E): L-BFGS from λ = +1 and from λ = −1, then particle
swarm optimisation (pyswarms) over widening windows of λ up to |λ| = 70; a candidate is accepted
when 1000 × variance < 1e-9 (App. B.1).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

#: The authors scale the variance by 1000 before comparing it with the acceptance bar (App. B.1).
LOSS_SCALE = 1000.0
#: Accept a λ whose scaled loss is below this (App. B.1).
ACCEPT_LOSS = 1e-9
#: L-BFGS settings of the authors' code (App. E): learning rate, steps per start, starting points.
LBFGS_LR = 0.5
LBFGS_STEPS = 100
LBFGS_STARTS = (1.0, -1.0)
#: An L-BFGS run stops when its last three losses differ by less than this fraction (authors' code).
PLATEAU = 1e-3
#: Default largest |λ| searched (App. B.2: the loss tends to 0 for |λ| → ∞, so the search is bounded).
LAMBDA_BOUND = 70.0
#: PSO settings (App. E): particles, iterations, first window start, window width, left margin.
PSO_PARTICLES = 500
PSO_ITERATIONS = 40
PSO_START = 1.0
PSO_WIDTH = 5.0
PSO_MARGIN = 0.3
#: Inertia and acceleration coefficients (the defaults of scikit-opt's PSO, used by the authors).
PSO_OPTIONS = {"w": 0.8, "c1": 0.5, "c2": 0.5}
#: Parts of a PSO window whose best personal best is polished by L-BFGS (our addition, see _pso).
PSO_POLISH_BINS = 10
METHODS = ("lbfgs", "pso", "zero-gradient")


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

    ``logit_direction`` u = W g_r ``(C,)`` (so the logits at λ are λ u) and ``ratios``
    (p_i − y_i)/(p_r − y_r) ``(C,)``, both float64; ``row`` is r.
    """

    logit_direction: torch.Tensor
    ratios: torch.Tensor
    row_gradient: torch.Tensor
    row: int
    exclude_top: int

    def labels(self, lam: torch.Tensor) -> torch.Tensor:
        """ŷ(λ) of Eq. 4 for a tensor of λ values ``(...)`` → ``(..., C)``."""
        lam = lam.unsqueeze(-1)
        return torch.softmax(lam * self.logit_direction, dim=-1) - self.ratios / lam

    def loss(self, lam: torch.Tensor) -> torch.Tensor:
        """1000 × the variance of all but the top ``exclude_top`` entries of ŷ(λ) (Eq. 5), ``(...)``."""
        rest = torch.sort(self.labels(lam), dim=-1, descending=True).values[..., self.exclude_top:]
        return LOSS_SCALE * rest.var(dim=-1, unbiased=False)


def _as_weight(fc_weight: torch.Tensor | nn.Linear) -> torch.Tensor:
    if isinstance(fc_weight, nn.Linear):
        if fc_weight.bias is not None:
            raise ValueError(
                "the last layer has a bias; the λ recovery of Wang et al. (Eq. 2) needs a bias-free "
                "last layer z = W h — build the model with fc_bias=False (LeNet, resnet18) or FCN")
        fc_weight = fc_weight.weight
    if not isinstance(fc_weight, torch.Tensor):
        raise TypeError(f"fc_weight must be a torch.Tensor (C, d) or an nn.Linear, got {type(fc_weight).__name__}")
    return fc_weight.detach()


def lambda_problem(fc_weight: torch.Tensor | nn.Linear, fc_weight_grad: torch.Tensor, *,
                   exclude_top: int = 1) -> LambdaProblem:
    """Set up Eq. 4–5 from the last layer's weight and its gradient for ONE sample.

    Args:
        fc_weight: bias-free last layer, an ``nn.Linear`` without bias or its weight ``(C, d)``.
        fc_weight_grad: ∂L/∂W of that layer, ``(C, d)``.
        exclude_top: entries left out of the variance (1: smoothing / one-hot, 2: mixup).

    Returns:
        :class:`LambdaProblem` with r = the row of largest |row sum| (authors' code).

    Raises:
        TypeError: if the inputs are not tensors (or an ``nn.Linear``).
        ValueError: for a last layer with bias, a gradient whose shape differs from the weight's
            (e.g. a bias gradient ``(C,)``), fewer than ``exclude_top + 2`` classes, non-finite
            values, or an all-zero gradient (use :func:`recover_soft_label`, which handles it).
    """
    weight = _as_weight(fc_weight).to(torch.float64)
    if not isinstance(fc_weight_grad, torch.Tensor):
        raise TypeError(f"fc_weight_grad must be a torch.Tensor (C, d), got {type(fc_weight_grad).__name__}")
    grad = fc_weight_grad.detach().to(torch.float64)
    if weight.dim() != 2:
        raise ValueError(f"fc_weight must be 2-D (C, d), got shape {tuple(weight.shape)}")
    if grad.shape != weight.shape:
        hint = " (this looks like a bias gradient; pass the weight gradient)" if grad.dim() == 1 else ""
        raise ValueError(f"fc_weight_grad must have the weight's shape {tuple(weight.shape)}, "
                         f"got {tuple(grad.shape)}{hint}")
    if not isinstance(exclude_top, int) or isinstance(exclude_top, bool) or exclude_top < 1:
        raise ValueError(f"exclude_top must be a positive int (1 smoothing, 2 mixup), got {exclude_top!r}")
    if weight.shape[0] < exclude_top + 2:
        raise ValueError(f"need at least exclude_top + 2 = {exclude_top + 2} classes for a variance, "
                         f"got C = {weight.shape[0]}")
    if not (torch.isfinite(weight).all() and torch.isfinite(grad).all()):
        raise ValueError("fc_weight and fc_weight_grad must be finite")
    row = int(grad.sum(dim=1).abs().argmax())
    row_gradient = grad[row]
    norm2 = row_gradient.dot(row_gradient)
    if norm2 == 0:
        raise ValueError("the weight gradient is all zero; recover_soft_label handles this case (App. B.3)")
    ratios = grad @ row_gradient / norm2  # least-squares g_i / g_r, exact for noise-free gradients
    return LambdaProblem(weight @ row_gradient, ratios, row_gradient, row, exclude_top)


@contextlib.contextmanager
def _numpy_global_seed(seed: int):
    """pyswarms draws from NumPy's global generator; seed it for the call and restore it after."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


@contextlib.contextmanager
def _single_thread():
    """The λ problem is a handful of C-vectors; intra-op threading only adds synchronisation cost."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _lbfgs(problem: LambdaProblem, start: float, tol: float, bound: float) -> tuple[float, float]:
    """L-BFGS on λ from ``start`` (App. E, Alg. 1); stops when accepted or |λ| leaves the bound."""
    lam = torch.tensor(start, dtype=torch.float64, requires_grad=True)
    # torch's default tolerances stop at |dloss/dλ| < 1e-7, far above the 1e-9 bar's resolution
    optimizer = torch.optim.LBFGS([lam], lr=LBFGS_LR, tolerance_grad=1e-15, tolerance_change=1e-15)

    def closure():
        optimizer.zero_grad()
        loss = problem.loss(lam)
        loss.backward()
        return loss

    best = (start, float(problem.loss(lam.detach())))
    recent: list[float] = []
    for _ in range(LBFGS_STEPS):
        value = float(problem.loss(lam.detach()))
        if not np.isfinite(value) or abs(lam.item()) > bound:
            break
        if value < best[1]:
            best = (lam.item(), value)
        recent = [*recent[-2:], value]
        if value < tol or (len(recent) == 3 and max(recent) - min(recent) < PLATEAU * sum(recent) / 3):
            break  # accepted, or stuck on a plateau / non-zero local minimum: leave it to PSO
        optimizer.step(closure)
    return best


def _pso(problem: LambdaProblem, low: float, high: float, tol: float, bound: float) -> tuple[float, float]:
    """Global-best PSO (pyswarms) on λ ∈ [low, high] (App. E, Alg. 2), then L-BFGS polishes.

    The swarm's best and the best personal best in each of ``PSO_POLISH_BINS`` equal parts of the
    window are polished: the true minimum can be a narrow basin the swarm left for a wider, shallower
    local minimum (App. B.1).
    """
    from pyswarms.single import GlobalBestPSO

    def cost(positions: np.ndarray) -> np.ndarray:
        lam = torch.from_numpy(positions[:, 0]).to(torch.float64)
        return torch.nan_to_num(problem.loss(lam), nan=np.inf).numpy()

    swarm = GlobalBestPSO(n_particles=PSO_PARTICLES, dimensions=1, options=PSO_OPTIONS,
                          bounds=(np.array([low]), np.array([high])))
    value, position = swarm.optimize(cost, iters=PSO_ITERATIONS, verbose=False)
    best = (float(position[0]), float(value))
    positions, costs = swarm.swarm.pbest_pos[:, 0], swarm.swarm.pbest_cost
    bins = np.minimum(((positions - low) / (high - low) * PSO_POLISH_BINS).astype(int), PSO_POLISH_BINS - 1)
    starts = [best[0]] + [float(positions[bins == b][np.argmin(costs[bins == b])])
                          for b in range(PSO_POLISH_BINS) if np.any(bins == b)]
    for start in starts:
        polished = _lbfgs(problem, start, tol, bound)
        best = min(best, polished, key=lambda candidate: candidate[1])
        if best[1] < tol:
            break
    return best


def _pso_windows(bound: float):
    """[0.7, 6], [−6.3, −1], [5.7, 11], [−11.3, −6], … up to |λ| = ``bound`` (authors' code)."""
    low = PSO_START
    while low < bound:
        high = min(low + PSO_WIDTH, bound)
        yield low - PSO_MARGIN, high
        yield -high - PSO_MARGIN, -low
        low = high


def _result(problem: LambdaProblem, lam: float, loss: float, method: str, tol: float) -> SoftLabelResult:
    lam_t = torch.tensor(lam, dtype=torch.float64)
    return SoftLabelResult(label=problem.labels(lam_t).detach(), feature=(lam_t * problem.row_gradient).detach(),
                           lam=lam, loss=loss, method=method, accepted=loss < tol, row=problem.row)


def recover_soft_label(fc_weight: torch.Tensor | nn.Linear, fc_weight_grad: torch.Tensor, *,
                       exclude_top: int = 1, seed: int = 0, tol: float = ACCEPT_LOSS,
                       bound: float = LAMBDA_BOUND, prediction: torch.Tensor | None = None) -> SoftLabelResult:
    """Recover a sample's soft label and last-layer feature from the last-layer gradient (§3, Eq. 2–5).

    Search order (App. E): L-BFGS (lr 0.5, up to 100 steps, left early on a loss plateau) from
    λ = +1, then from λ = −1; if neither reaches a scaled loss below ``tol``, PSO (pyswarms, 500
    particles, 40 iterations) over the windows [0.7, 6], [−6.3, −1], [5.7, 11], … up to |λ| = 70.
    Our additions to the paper's recipe: each window's swarm best and the best personal best of
    each tenth of the window are polished by L-BFGS. The first accepted λ is returned; if none is
    accepted the lowest-loss candidate is returned with ``accepted=False``. The truth is never
    consulted.

    Args:
        fc_weight: bias-free last layer (``nn.Linear`` without bias) or its weight ``(C, d)``.
        fc_weight_grad: gradient of the batch-of-one cross-entropy w.r.t. that weight, ``(C, d)``.
        exclude_top: entries left out of Eq. 5's variance: 1 for label smoothing and one-hot
            labels, 2 for mixup of two classes.
        seed: seeds the PSO (pyswarms uses NumPy's global generator; its state is restored).
        tol: acceptance bar on the scaled loss (1e-9 as in App. B.1).
        bound: largest |λ| searched (70 as in the authors' code; App. B.2). Since
            |p_r − y_r| ≤ 1, every true λ has |λ| ≥ 1.
        prediction: the model's output (logits or probabilities, ``(C,)``) for the sample; only
            used when the gradient is exactly zero: the model then predicts the one-hot label
            perfectly and the label is the one-hot of its argmax (App. B.3).

    Returns:
        :class:`SoftLabelResult` (``label`` ``(C,)``, ``feature`` ``(d,)``, ``lam``, ``loss``,
        ``method`` in {"lbfgs", "pso", "zero-gradient"}, ``accepted``, ``row``).

    Raises:
        TypeError: if the inputs are not tensors (or an ``nn.Linear``).
        ValueError: for a last layer with bias, a gradient of the wrong shape, too few classes,
            non-finite values, ``bound`` ≤ 1, or a zero gradient without ``prediction``.
    """
    weight = _as_weight(fc_weight)
    if isinstance(fc_weight_grad, torch.Tensor) and fc_weight_grad.shape == weight.shape \
            and not torch.any(fc_weight_grad):
        return _zero_gradient_result(weight, prediction)
    problem = lambda_problem(weight, fc_weight_grad, exclude_top=exclude_top)
    if not bound > PSO_START:
        raise ValueError(f"bound must exceed {PSO_START} (every true λ has |λ| ≥ 1), got {bound!r}")
    with _single_thread():
        lam, loss, method = _search(problem, seed, tol, bound)
    return _result(problem, lam, loss, method, tol)


def _search(problem: LambdaProblem, seed: int, tol: float, bound: float) -> tuple[float, float, str]:
    """L-BFGS from ±1, then PSO windows; the first accepted (λ, loss, method), else the best one."""
    candidates = []
    for start in LBFGS_STARTS:
        lam, loss = _lbfgs(problem, start, tol, bound)
        if loss < tol:
            return lam, loss, "lbfgs"
        candidates.append((loss, lam, "lbfgs"))
    with _numpy_global_seed(seed):
        for low, high in _pso_windows(bound):
            lam, loss = _pso(problem, low, high, tol, bound)
            if loss < tol:
                return lam, loss, "pso"
            candidates.append((loss, lam, "pso"))
    loss, lam, method = min(candidates)
    return lam, loss, method


def _zero_gradient_result(weight: torch.Tensor, prediction: torch.Tensor | None) -> SoftLabelResult:
    num_classes, dim = weight.shape
    if prediction is None:
        raise ValueError("the weight gradient is exactly zero, so it carries no label information: the model "
                         "already predicts a one-hot label perfectly (App. B.3); pass prediction= (the "
                         "model's output for the sample) to return that label")
    if prediction.shape != (num_classes,):
        raise ValueError(f"prediction must have shape ({num_classes},), got {tuple(prediction.shape)}")
    label = torch.zeros(num_classes, dtype=torch.float64)
    label[int(prediction.argmax())] = 1.0
    return SoftLabelResult(label=label, feature=torch.full((dim,), float("nan"), dtype=torch.float64),
                           lam=float("inf"), loss=0.0, method="zero-gradient", accepted=True, row=-1)
