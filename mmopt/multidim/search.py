"""optimize(method="kron" | "union" | "marginals" | "residual" | "datacube" | "coupled") on product-domain workloads.

Notation: see README. Each method returns an :class:`~mmopt._base.solution.ImplicitSolution`; this module
re-evaluates its strategy exactly (``objective`` is never the search's own number: it is
:func:`mmopt.evaluate` at unit privacy, or the upper end of a certified bracket where a union has no exact path,
:func:`mmopt.structured.evaluate`), attaches the best lower bound known — the SVD bound, exact for a product or
marginals workload and a proven lower bound for other unions, raised to a method's certified bound where it has
one — and reports status and seconds. ``"auto"``, which runs these and the dense methods within a budget, is
:mod:`mmopt.auto`.
"""

from __future__ import annotations

import time

from mmopt import dispatch as dp
from mmopt._base import runtime as _runtime
from mmopt._base.result import CERTIFIED_GAP, CLOSED_FORMS, SUCCESS, OptimizeResult, reconcile
from mmopt.multidim.datacube import solve_datacube
from mmopt.multidim.kron import solve_kron
from mmopt.multidim.marginals import solve_marginals
from mmopt.multidim.scoring import DEFAULT_RESTARTS, score
from mmopt.multidim.union import solve_union
from mmopt.structured import bounds
from mmopt.structured.residual.coupled_fit import solve_coupled
from mmopt.structured.residual.solve import solve_residual
from mmopt.structured.workloads import ImplicitWorkload

SOLVERS = {"kron": solve_kron, "union": solve_union, "marginals": solve_marginals, "residual": solve_residual,
           "datacube": solve_datacube, "coupled": solve_coupled}
METHODS = (*SOLVERS, "auto")


def search(workload, method: str, *, norm: str, seed=None, restarts: int | None = None,
           max_iterations: int | None = None, tol: float | None = None, verbose: bool = False,
           structure: ImplicitWorkload | None = None, n_jobs: int | None = None) -> OptimizeResult:
    """Run one multi-dimensional method and return the exactly re-evaluated result.

    ``workload`` is the user's (dense or implicit); ``structure`` its product structure (None for a dense
    workload without one). ``n_jobs`` (checked by optimize) runs the method's restarts in parallel.
    """
    t0 = time.perf_counter()
    say = _runtime.LOGGER.info if verbose else _runtime.LOGGER.debug
    if structure is None:
        raise ValueError(f"optimize(method={method!r}) needs a workload on a product domain (built with "
                         "mmopt.workload.kron, stack or marginals, or a census workload). This one has no "
                         "product structure: use method='min_error' or 'l2_approx'.")
    from mmopt.structured.dual_bound import optimum_floor
    svd, bound_exact = _svd_bound(workload)
    say("optimize: running %s on %s", method, structure.name)
    sol = SOLVERS[method](structure, restarts=restarts or DEFAULT_RESTARTS[method], norm=norm, seed=seed,
                          max_iterations=max_iterations, tol=tol, verbose=verbose, n_jobs=n_jobs)
    best = score(workload, method, sol, norm, time.perf_counter() - t0)
    bound_method = "svd"  # raised to the L2 dual bound (valid for L1 too) only where the SVD bound does not certify
    known = max(svd, best["lower_bound"]) if best["lower_bound"] is not None else svd
    if best["objective"] > known * (1 + CERTIFIED_GAP) and (dual := optimum_floor(structure)) > svd:
        svd, bound_method = dual, "dual_product"
    if best["lower_bound"] is not None and best["lower_bound"] > svd:  # the method's own bound is the stronger: named
        svd, bound_method = best["lower_bound"], best["extra"].get("lower_bound_method") or f"{method}'s own"
    bound = svd
    status, message, bound = reconcile(best["objective"], bound, best["status"], best["message"],  # tol: a sweep test
                                       closed=method in CLOSED_FORMS or best["status"] == "closed_form")
    extra = dict(best["extra"]) | {
        "total_exact": best["exact"], "bound_exact": bound_exact, "bound_method": bound_method,
        "candidates": {method: {k: best[k] for k in ("objective", "lower", "seconds", "exact")} | {"status": status}},
        "failed": {}, "skipped": {}}
    m = workload.n_queries
    return OptimizeResult(best["strategy"], norm, best["objective"], bound, status, status in SUCCESS, message,
                          method, best["solver"], best["iterations"], time.perf_counter() - t0,
                          best["objective"] / m, bound / m, (), extra)


def _svd_bound(workload) -> tuple[float, bool]:
    """(SVD bound at unit privacy, exact?): exact for dense workloads, a flagged lower bound for some unions."""
    from mmopt.workload import structure_of
    twin = structure_of(workload)  # itself if implicit; a dense product workload's twin: factor by factor, not
    if twin is not None:           # one n×n eigh (the dense one below only when the twin's bound is not exact)
        b = bounds.svd_bound(twin)
        if b.exact or twin is workload:
            return b.value, b.exact
    if getattr(workload, "family", None) in ("prefix", "all_range"):  # closed-form singular values: no O(n³) eigh
        from mmopt.toeplitz.bound import svd_bound as closed_svd_bound
        return closed_svd_bound(workload.domain_size, workload.family), True
    return dp.svd_bound(workload), True
