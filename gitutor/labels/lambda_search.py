"""The search for λ of the soft-label recovery (Wang, Liang & He, ICLR 2024, App. E, Alg. 1–2).

L-BFGS from λ = ±1 on the scaled label-variance loss of Eq. 5, then particle swarm optimisation
(pyswarms; the authors used scikit-opt) over widening windows of λ; a candidate is accepted when the
scaled loss is below 1e-9 (App. B.1). :func:`gitutor.labels.recover_soft_label` calls it.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

#: Accept a λ whose scaled loss (1000 × Eq. 5) is below this (App. B.1).
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
#: The authors' noise search (``recovering.py``, ``pso_noise``, Table 5 of §5.2): their scalar x = 4λ over
#: [0.7, 5], [−5.3, −1], [4.7, 10], [−10.3, −5], i.e. these windows of λ (x / 4), every window run, the
#: lowest-loss candidate kept, no L-BFGS; 200 particles × 30 iterations.
NOISE_WINDOWS = ((0.175, 1.25), (-1.325, -0.25), (1.175, 2.5), (-2.575, -1.25))
NOISE_PARTICLES = 200
NOISE_ITERATIONS = 30
#: ``search`` values of :func:`search_lambda`: the authors' L-BFGS-then-PSO (App. E), PSO windows only
#: (§5.2's "only the PSO algorithm"), the authors' noise search (:data:`NOISE_WINDOWS`).
SEARCHES = ("lbfgs+pso", "pso", "pso-noise")


@contextlib.contextmanager
def _logging_left_alone():
    """pyswarms' optimisers build a ``Reporter`` that calls ``logging.config.dictConfig``: it replaces the
    root logger's handlers with its own and opens ``./report.log`` in the working folder, on every
    optimiser. The search keeps the caller's logging as it was and writes no file."""
    import logging.config

    configure = logging.config.dictConfig
    logging.config.dictConfig = lambda config: None
    try:
        yield
    finally:
        logging.config.dictConfig = configure


@contextlib.contextmanager
def _numpy_global_seed(seed: int):
    """pyswarms draws from NumPy's global generator; seed it for the call and restore it after."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _lbfgs(problem, start: float, tol: float, bound: float) -> tuple[float, float]:
    """L-BFGS on λ from ``start`` (App. E, Alg. 1); stops when accepted or |λ| leaves the bound."""
    lam = torch.tensor(start, dtype=torch.float64, requires_grad=True)
    # torch's default tolerances stop at |dloss/dλ| < 1e-7, far above the 1e-9 bar's resolution
    optimizer = torch.optim.LBFGS(
        [lam], lr=LBFGS_LR, tolerance_grad=1e-15, tolerance_change=1e-15
    )

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
        if value < tol or (
            len(recent) == 3 and max(recent) - min(recent) < PLATEAU * sum(recent) / 3
        ):
            break  # accepted, or stuck on a plateau / non-zero local minimum: leave it to PSO
        optimizer.step(closure)
    return best


def _pso(
    problem,
    low: float,
    high: float,
    tol: float,
    bound: float,
    *,
    particles: int = PSO_PARTICLES,
    iterations: int = PSO_ITERATIONS,
    polish: bool = True,
) -> tuple[float, float]:
    """Global-best PSO (pyswarms) on λ ∈ [low, high] (App. E, Alg. 2), then L-BFGS polishes.

    With ``polish`` the swarm's best and the best personal best in each of ``PSO_POLISH_BINS`` equal parts
    of the window are polished (our addition): the true minimum can be a narrow basin the swarm left for
    a wider, shallower local minimum (App. B.1).
    """

    def cost(positions: np.ndarray) -> np.ndarray:
        lam = torch.from_numpy(positions[:, 0]).to(torch.float64)
        return torch.nan_to_num(problem.loss(lam), nan=np.inf).numpy()

    with _logging_left_alone():  # pyswarms' modules build Reporters when imported, too
        from pyswarms.single import GlobalBestPSO

        swarm = GlobalBestPSO(
            n_particles=particles,
            dimensions=1,
            options=PSO_OPTIONS,
            bounds=(np.array([low]), np.array([high])),
        )
    value, position = swarm.optimize(cost, iters=iterations, verbose=False)
    best = (float(position[0]), float(value))
    if not polish:
        return best
    positions, costs = swarm.swarm.pbest_pos[:, 0], swarm.swarm.pbest_cost
    bins = np.minimum(
        ((positions - low) / (high - low) * PSO_POLISH_BINS).astype(int),
        PSO_POLISH_BINS - 1,
    )
    starts = [best[0]] + [
        float(positions[bins == b][np.argmin(costs[bins == b])])
        for b in range(PSO_POLISH_BINS)
        if np.any(bins == b)
    ]
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


def search_lambda(
    problem, seed: int, tol: float, bound: float, *, search: str = "lbfgs+pso"
) -> tuple[float, float, str]:
    """λ for ``problem`` (a :class:`gitutor.labels.LambdaProblem`) by ``search`` (one of :data:`SEARCHES`);
    ``seed`` seeds the PSO.

    ``"lbfgs+pso"``: L-BFGS from ±1, then the PSO windows up to ``bound``; ``"pso"``: the windows only. Both
    return the first accepted (λ, loss, method), else the lowest-loss one. ``"pso-noise"``: the authors'
    noise search — every window of :data:`NOISE_WINDOWS`, unpolished, the lowest-loss candidate (``bound``
    unused).
    """
    candidates = []
    for start in LBFGS_STARTS if search == "lbfgs+pso" else ():
        lam, loss = _lbfgs(problem, start, tol, bound)
        if loss < tol:
            return lam, loss, "lbfgs"
        candidates.append((loss, lam, "lbfgs"))
    with _numpy_global_seed(seed):
        if search == "pso-noise":
            noise = dict(
                particles=NOISE_PARTICLES, iterations=NOISE_ITERATIONS, polish=False
            )
            for low, high in NOISE_WINDOWS:
                lam, loss = _pso(problem, low, high, tol, bound, **noise)
                candidates.append((loss, lam, "pso"))
        else:
            for low, high in _pso_windows(bound):
                lam, loss = _pso(problem, low, high, tol, bound)
                if loss < tol:
                    return lam, loss, "pso"
                candidates.append((loss, lam, "pso"))
    loss, lam, method = min(candidates)
    return lam, loss, method
