"""Differentially private data cubes (Ding, Winslett, Han, Li, SIGMOD 2011): which cuboids to measure.

Notation: see README and :mod:`mmopt.structured.residual.workload`. The workload is a weighted union of
marginals (the "cuboids" L to publish; marginal A with weight w_A has N_A = ∏_{i∈A} nᵢ cells). Ding et al.
measure a set S of cuboids of the lattice (any attribute sets, not only those in L) with Laplace noise, the
budget split as θ_C (Σθ = 1, so Δ₁ = 1: each record falls in one cell of every cuboid), and compute every
published A from one measured ancestor C ⊇ A by summing its N_C/N_A cells. At unit privacy that direct
aggregation gives each cell of A the variance w_A² (N_C/N_A)/θ_C², and

* Problem 1 (the paper's "bound max variance"): minimise max_A w_A² N_C/N_A/θ_C² — for a fixed assignment
  the budget θ_C ∝ √b_C with b_C = max_{A→C} w_A² N_C/N_A is optimal, value (Σ√b)²;
* the total variance (mmopt's objective): Σ_C a_C/θ_C², a_C = N_C Σ_{A→C} w_A², minimised by θ_C ∝ a_C^{1/3},
  value (Σ a^{1/3})³ (Lagrange). Under Gaussian noise (Δ₂ = ‖θ‖₂ = 1) the same steps give θ_C² ∝ √a_C and
  θ_C² ∝ b_C.

Choosing S is NP-hard (the paper's Theorem); its approximation is a greedy set cover for every threshold τ
of the per-cell variance at a uniform budget: a cuboid C covers the published A with C ⊇ A and
w_A² N_C/N_A ≤ τ, the greedy picks the cuboid covering the most uncovered ones (ties: the fewest cells)
until all are covered, and the best cover over τ is kept; the paper proves its selection within (ln|L| + 1)² of
the optimal max variance (that guarantee is not re-proved here, and says nothing about the total).
Here every cover S_τ (plus S = L itself and S = {the union of all sets}) is then given the optimal budget for
the chosen objective, alternating assignment (each A to the member of S that gives it the least variance)
and budget until the objective stops falling, and the best S wins. Choices made where the paper leaves room:
the objective is the total (mmopt's) by default; the thresholds are all distinct values of w_A²N_C/N_A
(at most :data:`MAX_THRESHOLDS`, log-spaced quantiles beyond); the lattice is limited to d ≤
:data:`MAX_ATTRIBUTES`. The strategy is HDMM's weighted marginals M(θ) on S, which :func:`mmopt.evaluate`
scores exactly with least-squares reconstruction — the BLUE, which is never worse than direct aggregation,
so the exact error is at most the model's (and plays the part of the paper's consistency step).
"""

from __future__ import annotations

import time

import numpy as np

from mmopt._base import validation as v
from mmopt._base.solution import ImplicitSolution
from mmopt.dense._strategy_core import NORMS
from mmopt.multidim import _common as cm
from mmopt.structured.residual.workload import as_marginal_workload
from mmopt.structured.strategies import marginals_strategy

__all__ = ["MAX_ATTRIBUTES", "MAX_THRESHOLDS", "allocate", "solve_datacube"]

_FUNC = "solve_datacube"
MAX_ATTRIBUTES = 12   # the lattice has 2^d cuboids; each threshold's cover scans (2^d × |L|)
MAX_THRESHOLDS = 256
OBJECTIVES = ("total", "max")
_MAX_ROUNDS = 100


def allocate(cost: np.ndarray, *, objective: str, l1: bool) -> tuple[np.ndarray, float]:
    """The optimal budget shares θ (Σθ = 1 for L1, Σθ² = 1 for L2) and the model's value for fixed loads.

    ``cost`` holds a_C (total) or b_C (max) per measured cuboid, all > 0 (module docstring).

    Examples
    --------
    Two cuboids with loads 1 and 8 under Laplace noise: θ ∝ (1, 2), total (1 + 2)³ = 27.

    >>> theta, value = allocate(np.array([1.0, 8.0]), objective="total", l1=True)
    >>> theta.round(6).tolist(), round(value, 9)
    ([0.333333, 0.666667], 27.0)
    """
    cost = cm.check_shares(cost, "cost", "allocate")
    if v.check_choice(objective, name="objective", caller="allocate", choices=("total", "max")) == "total":
        root = cost ** (1 / 3) if l1 else np.sqrt(cost)
        theta = root / root.sum() if l1 else np.sqrt(root / root.sum())
        value = float(root.sum()) ** (3 if l1 else 2)
    else:
        root = np.sqrt(cost) if l1 else cost
        theta = root / root.sum() if l1 else np.sqrt(root / root.sum())
        value = float(root.sum()) ** (2 if l1 else 1)
    return theta, value


def _model(members, assign, w2, N, NA, objective, l1):
    """(θ over members, value) of the direct-aggregation model for an assignment (index into members)."""
    if objective == "total":
        cost = np.bincount(assign, weights=w2 * N[members][assign], minlength=members.size)
    else:
        per = w2 * N[members][assign] / NA
        cost = np.zeros(members.size)
        np.maximum.at(cost, assign, per)
    used = cost > 0
    theta = np.zeros(members.size)
    theta[used], value = allocate(cost[used], objective=objective, l1=l1)
    return theta, value


def _polish(members, covers, w2, N, NA, objective, l1):
    """Alternate budget (closed form) and assignment (least variance for each A) until the value stops falling."""
    ok = covers[members]                       # (|S|, |L|): member covers set
    sizes = np.where(ok, N[members][:, None], np.inf)
    assign = np.argmin(sizes, axis=0)          # uniform budget: the ancestor with the fewest cells
    theta, value = _model(members, assign, w2, N, NA, objective, l1)
    for _ in range(_MAX_ROUNDS):
        with np.errstate(divide="ignore"):
            var = np.where(ok & (theta[:, None] > 0), N[members][:, None] / theta[:, None] ** 2, np.inf)
        new = np.argmin(var, axis=0)
        t2, v2 = _model(members, new, w2, N, NA, objective, l1)
        if not v2 < value * (1 - 1e-12):
            break
        assign, theta, value = new, t2, v2
    return theta, value, assign


def _greedy_cover(covers_tau, N):
    """The greedy set cover (most newly covered, ties to fewest cells) of all published sets; None if none."""
    uncovered = np.ones(covers_tau.shape[1], dtype=bool)
    chosen = []
    while uncovered.any():
        gain = covers_tau[:, uncovered].sum(axis=1)
        best = int(np.max(gain))
        if best == 0:
            return None
        pick = int(np.flatnonzero(gain == best)[np.argmin(N[gain == best])])
        chosen.append(pick)
        uncovered &= ~covers_tau[pick]
    return np.array(sorted(chosen))


def _thresholds(ratio):
    vals = np.unique(ratio[np.isfinite(ratio)])
    if vals.size > MAX_THRESHOLDS:
        vals = np.unique(np.quantile(vals, np.linspace(0.0, 1.0, MAX_THRESHOLDS), method="nearest"))
    return vals


def solve_datacube(workload, *, norm: str = "l1", objective: str = "total", restarts=None, seed=None,
                   max_iterations=None, tol=None, verbose: bool = False, n_jobs=None,
                   max_attributes: int = MAX_ATTRIBUTES) -> ImplicitSolution:
    """Ding et al.'s choice of cuboids and budget for a union of marginals (module docstring).

    Parameters
    ----------
    workload : ImplicitWorkload, Workload with product structure, or MarginalWorkload
        A weighted union of marginals (``mmopt.workload.marginals``, ``lower_marginals``, ``stack`` of them).
    norm : {"l1", "l2"}, default="l1"
        Laplace (the paper's ε-DP, Σθ = 1) or Gaussian (‖θ‖₂ = 1) budget split.
    objective : {"total", "max"}, default="total"
        The model objective the cuboids and budget are chosen for: total variance (mmopt's objective) or the
        paper's Problem 1, the largest per-cell variance.
    restarts, seed, max_iterations, tol, n_jobs
        Accepted (the multi-dimensional search passes them to every method) and unused: the greedy is
        deterministic and ends by itself.
    verbose : bool
        Unused; the search takes well under a second on d ≤ 8 attributes.

    max_attributes : int, default=MAX_ATTRIBUTES
        The largest d searched (the lattice has 2^d cuboids, each scanned against every marginal); OPT_M's warm
        start (:func:`mmopt.multidim.marginals._datacube_start`) raises it to 14.

    Returns
    -------
    ImplicitSolution
        ``strategy`` = M(θ) on the chosen cuboids, Δ = 1; ``status`` "local_optimum" (a greedy heuristic with
        no certificate); ``extra``: ``cuboids`` (attribute tuples), ``theta`` (their budget shares),
        ``model_objective`` (the direct-aggregation value at unit privacy, an upper bound on the exact
        total for objective="total"), ``covers_tried``.

    Examples
    --------
    One 2-way marginal: measuring it alone is optimal (9 cells, variance 1 each).

    >>> from mmopt.structured import marginals
    >>> sol = solve_datacube(marginals((3, 3, 3), attributes=[(0, 2)]))
    >>> sol.extra["cuboids"], round(sol.extra["model_objective"], 9)
    ([(0, 2)], 9.0)
    """
    t0 = time.perf_counter()
    norm = v.check_choice(norm, name="norm", caller=_FUNC, choices=NORMS)
    objective = v.check_choice(objective, name="objective", caller=_FUNC, choices=OBJECTIVES)
    M = as_marginal_workload(workload, caller=_FUNC)
    if M is None:
        raise ValueError(f"{_FUNC} needs a weighted union of marginals (mmopt.workload.marginals, lower_marginals, "
                         f"or a stack of them). '{getattr(workload, 'name', workload)}' is not one.")
    shape, d = M.shape, len(M.shape)
    if d > max_attributes:
        raise ValueError(f"{_FUNC} searches the lattice of all 2^d cuboids; it supports at most d = "
                         f"{max_attributes} attributes. Got d = {d}. Use method='marginals' or 'residual'.")
    masks = np.array([sum(1 << i for i in A) for A in M.sets], dtype=np.int64)
    w2 = np.asarray(M.weights, dtype=float) ** 2
    lattice = np.arange(2 ** d, dtype=np.int64)
    logn = np.log(np.asarray(shape, dtype=float))
    N = np.exp(((lattice[:, None] >> np.arange(d)) & 1) @ logn)      # cells of every cuboid
    N = np.round(N) if float(N.max()) < 2.0**52 else N
    NA = N[masks]
    covers = (lattice[:, None] & masks[None, :]) == masks[None, :]  # (2^d, |L|): cuboid C ⊇ A
    ratio = np.where(covers, w2[None, :] * N[:, None] / NA[None, :], np.inf)
    l1 = norm == "l1"

    tried = [np.unique(masks), np.array([int(np.bitwise_or.reduce(masks))])]
    for tau in _thresholds(ratio):
        S = _greedy_cover(ratio <= tau * (1 + 1e-12), N)
        if S is not None:
            tried.append(S)
    best = (np.inf, None, None)
    seen = set()
    for S in tried:
        key = tuple(S.tolist())
        if key in seen:
            continue
        seen.add(key)
        theta, value, _ = _polish(S, covers, w2, N, NA, objective, l1)
        if value < best[0]:
            best = (value, S, theta)
    value, S, theta = best
    keep = theta > 0
    cuboids = [tuple(i for i in range(d) if int(c) >> i & 1) for c in S[keep]]
    shares = theta[keep]
    strategy = marginals_strategy(shape, {C: float(t) for C, t in zip(cuboids, shares, strict=True)},
                                  name="datacube")
    message = (f"Data cubes (Ding et al. 2011): {len(cuboids)} cuboid(s) measured for {len(M.sets)} published, "
               f"chosen by greedy set cover over {len(seen)} threshold covers and budgeted optimally for the "
               f"{objective} variance of direct aggregation (model value {value:.6g} at unit privacy); a "
               "heuristic with no certificate. Scored exactly with least-squares reconstruction, which is never "
               "worse than the model.")
    return ImplicitSolution(strategy=strategy, status="local_optimum", message=message, iterations=len(seen),
                            solver="mmopt-datacube-greedy", lower_bound=None,
                            extra={"cuboids": cuboids, "theta": shares, "model_objective": value,
                                   "objective_kind": objective, "covers_tried": len(seen),
                                   "seconds": time.perf_counter() - t0})
