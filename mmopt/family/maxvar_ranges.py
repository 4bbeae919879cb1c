"""The max-variance route of prefix sums and all ranges (the γ₂ minimax in prefix coordinates), and the result of
any γ₂-dual minimax, for :mod:`mmopt.family.maxvar_routes` (split from it)."""

from __future__ import annotations

import time

import numpy as np

from mmopt._base.result import SUCCESS, OptimizeResult, reconcile
from mmopt._base.rounding import down, up
from mmopt.family.call import Call, seed_record
from mmopt.family.targets import check_targets

CALLER = "optimize"

__all__ = ["gamma2_result", "range_kind", "range_minimax", "run_ranges"]


def gamma2_result(A, variance, tau, sol, how: tuple[str, str], solver: str, call: Call, t0: float) -> OptimizeResult:
    """The OptimizeResult of a γ₂-dual minimax (orbits, ranges): ``variance`` the returned strategy's exact
    per-query variances at unit privacy, ``how`` (what ran, what certifies) for the message."""
    ratio = float(np.max(variance / tau))
    what = "largest variance" if call.targets is None else "largest variance / target"
    message = (f"{how[0]}: {what} {up(ratio)} at unit privacy, certified lower bound {down(sol.lower_bound)} "
               f"{how[1]}after {sol.iterations} steps.")
    status, message, bound = reconcile(ratio, sol.lower_bound, sol.status, message, tol=call.tol or 1e-4)
    extra = {"objective": "max_variance", "targets": "per-query" if np.ptp(tau) > 0 else float(tau[0]),
             "query_weights": sol.query_weights, "cell_weights": sol.cell_weights, "per_query_variance": variance,
             "total_squared_error": float(np.sum(variance)), "seed": seed_record(call.seed)}
    return OptimizeResult(A, "l2", ratio, bound, status, status in SUCCESS, message, "max_variance", solver,
                          sol.iterations, time.perf_counter() - t0, ratio, bound, sol.history, extra)


def range_kind(workload) -> tuple[str, int] | None:
    """("prefix" | "all_range", n) for mmopt's prefix sums and all ranges (dense families, whose row order is
    their definition, or stream workloads) of n ≤ :data:`mmopt.toeplitz.maxvar.MAX_N`; else None. A workload merely
    sharing their Gram is not taken: per-query targets follow the row order."""
    from mmopt.dense._workload_type import Workload
    from mmopt.toeplitz.maxvar import MAX_N
    from mmopt.toeplitz.workloads import KINDS, StreamWorkload
    if isinstance(workload, StreamWorkload):
        kind, n = workload.kind, workload.n
    elif isinstance(workload, Workload) and workload.family in KINDS:
        kind, n = workload.family, workload.domain_size
    else:
        return None
    return (kind, n) if n <= MAX_N else None


def run_ranges(kind: str, n: int, m: int, call: Call, t0: float) -> OptimizeResult:
    """Prefix sums and all ranges of ≤ 4,096 cells under any per-query targets: the γ₂ minimax over edge weights
    in prefix coordinates, O(n²) per step without the query rows (:mod:`mmopt.toeplitz.maxvar`), certified."""
    tau = np.ones(m) if call.targets is None else check_targets(call.targets, m, CALLER)
    A, variance, sol = range_minimax(kind, n, tau, call.tol or 1e-4, call.max_iterations)
    how = (f"Minimax over query and cell weights ({kind} of {n:,} cells in prefix coordinates)", "(γ₂ dual) ")
    return gamma2_result(A, variance, tau, sol, how, "mmopt-range-minimax", call, t0)


def range_minimax(kind: str, n: int, tau: np.ndarray, tol: float, max_iterations: int | None):
    """(A, its per-query variances at unit privacy in row order, the RangeSolution) of the γ₂ minimax in prefix
    coordinates (:mod:`mmopt.toeplitz.maxvar`); the variances are the returned strategy's own, not the search's."""
    from mmopt.dense._strategy_core import Strategy
    from mmopt.toeplitz import maxvar as rm

    sol = rm.solve(kind, n, tau, tol=tol, max_iterations=max_iterations or 1_000)
    A = Strategy.from_gram(sol.gram, name="max_variance")
    a, b = rm.edges(kind, n)
    X = A.matrix.T @ A.matrix
    return A, rm.variances(X, a, b) * float(np.max(np.diag(X))), sol  # Δ₂² = the largest column norm²
