"""optimize(..., method="kron" | "union" | "marginals" | "residual" | "auto") on product-domain workloads.

Notation: see README. Each method returns an :class:`~mmopt._solution.ImplicitSolution`; this module
re-evaluates its strategy exactly (``objective`` is never the search's own number: it is
:func:`mmopt.evaluate` at unit privacy), attaches the best lower bound known — the SVD bound, exact for a
product or marginals workload and a proven lower bound for other unions, raised to a method's certified
bound where it has one — and reports status, seconds and every candidate. ``"auto"`` runs every method
that applies and keeps the lowest exact error: the product searches on a product domain; on a plain (1-D)
workload the closed forms identity, H₂ and the Haar wavelet; and, where they take seconds
(:data:`DENSE_AUTO_LIMIT`), the dense ``l2_approx`` and, for ε-DP, ``min_error``. A candidate that fails is
recorded in ``extra["failed"]`` and never aborts the search.
"""

from __future__ import annotations

import time

from mmopt import _runtime
from mmopt import dispatch as dp
from mmopt._result import CLOSED_FORMS, SUCCESS, OptimizeResult, reconcile
from mmopt.multidim.kron import solve_kron
from mmopt.multidim.marginals import solve_marginals
from mmopt.multidim.union import solve_union
from mmopt.solvers import SolverError
from mmopt.structured import bounds
from mmopt.structured._checks import DENSE_LIMIT
from mmopt.structured.residual.solve import applies as residual_applies
from mmopt.structured.residual.solve import solve_residual
from mmopt.structured.workloads import ImplicitWorkload

SOLVERS = {"kron": solve_kron, "union": solve_union, "marginals": solve_marginals, "residual": solve_residual}
METHODS = (*SOLVERS, "auto")
# Restarts when the user gives none. OPT_M restarts cost ~10 ms each (closed-form objective) and its ε-DP
# landscape has many local optima: on adult W2, 3 / 10 / 50 restarts give 326,416 / 317,126 / 292,405
# (HDMM's own search: 315,883); ≤3-way marginals on 10¹⁰ cells take 11 s with 50.
DEFAULT_RESTARTS = {"kron": 3, "union": 3, "marginals": 50, "residual": 1}  # residual: a closed form
# "auto" adds the dense method only up to these domain sizes, where it takes seconds (benchmarks/: min_error
# ~7 s at n = 256 but 160–290 s at 1,024; the fast L2 solver ~1 s at 1,024, 46 s at 4,096).
DENSE_AUTO_LIMIT = {"l1": 256, "l2": 1024}


def search(workload, method: str, *, norm: str, seed=None, restarts: int | None = None,
           max_iterations: int | None = None, tol: float | None = None, verbose: bool = False,
           dense_optimize=None, structure: ImplicitWorkload | None = None,
           n_jobs: int | None = None) -> OptimizeResult:
    """Run one multi-dimensional method (or "auto") and return the exactly re-evaluated result.

    ``workload`` is the user's (dense or implicit); ``structure`` its product structure (None for a dense
    workload without one); ``dense_optimize`` is :func:`mmopt.optimize`, used for the dense candidate.
    ``n_jobs`` (checked by optimize) runs each method's restarts in parallel; the candidates run in turn.
    """
    t0 = time.perf_counter()
    say = _runtime.LOGGER.info if verbose else _runtime.LOGGER.debug
    kw = {"norm": norm, "seed": seed, "max_iterations": max_iterations, "tol": tol, "verbose": verbose,
          "n_jobs": n_jobs}
    if method != "auto":
        if structure is None:
            raise ValueError(f"optimize(method={method!r}) needs a workload on a product domain (built with "
                             "mmopt.workload.kron, stack or marginals, or a census workload). This one has no "
                             "product structure: use method='min_error' or 'l2_approx'.")
        names = [method]
    elif structure is None:
        names = []
    else:
        # residual first: on a union of marginals under Gaussian noise it meets the SVD bound (ties go to it)
        names = (["residual"] if residual_applies(structure) else []) + ["kron"] + (
            ["union"] if len(structure.terms) > 1 else []) + (["marginals"] if len(structure.shape) <= 15 else [])
    candidates, failures = [], {}
    for name in names:
        t1 = time.perf_counter()
        say("optimize(auto): running %s on %s", name, structure.name)
        try:
            sol = SOLVERS[name](structure, restarts=restarts or DEFAULT_RESTARTS[name], **kw)
            candidates.append(_scored(workload, name, sol, norm, time.perf_counter() - t1))
        except (ValueError, ArithmeticError, SolverError) as exc:  # one candidate never aborts auto
            if method != "auto":
                raise
            failures[name] = f"{type(exc).__name__}: {exc}"
    if method == "auto" and (structure is None or workload.domain_size <= DENSE_LIMIT):
        dense = structure.to_workload() if isinstance(workload, ImplicitWorkload) else workload
        for name in _dense_candidates(dense.domain_size, norm, structure is None):
            t1 = time.perf_counter()
            say("optimize(auto): running %s on %s", name, dense.name)
            try:
                res = dense_optimize(dense, method=name, norm=norm, seed=seed, verbose=verbose, n_jobs=n_jobs)
                candidates.append(_scored(workload, res.method, res, norm, time.perf_counter() - t1))
            except (ValueError, ArithmeticError, SolverError) as exc:  # one candidate never aborts auto
                failures[name] = f"{type(exc).__name__}: {exc}"
    if not candidates:
        raise ValueError(f"optimize(method='auto'): no method applied to '{workload.name}': {failures}")
    best = min(candidates, key=lambda c: c["objective"])
    svd, bound_exact = _svd_bound(workload)
    bound = max([svd, *(c["lower_bound"] for c in candidates if c["lower_bound"] is not None)])
    m = workload.n_queries
    message = best["message"]
    if method == "auto":
        message = f"Best of {len(candidates)} candidates is '{best['method']}'. " + message
    status, message, bound = reconcile(best["objective"], bound, best["status"], message,
                                       closed=best["method"] in CLOSED_FORMS, tol=tol)
    extra = dict(best["extra"]) | {
        "total_exact": best["exact"], "bound_exact": bound_exact,
        "candidates": {c["method"]: {k: c[k] for k in ("objective", "status", "seconds", "exact")}
                       for c in candidates},
        "failed": failures}
    return OptimizeResult(best["strategy"], norm, best["objective"], bound, status, status in SUCCESS, message,
                          method if method != "auto" else f"auto:{best['method']}", best["solver"],
                          best["iterations"], time.perf_counter() - t0, best["objective"] / m, bound / m,
                          (), extra)


def _dense_candidates(n: int, norm: str, plain: bool) -> list[str]:
    """The dense methods "auto" runs on n cells: the closed forms always on a plain (1-D) workload (milliseconds,
    and under Laplace noise H₂ often beats everything else affordable), l2_approx where its certified fast solver
    takes seconds, and min_error under ε-DP where it does (:data:`DENSE_AUTO_LIMIT`)."""
    names = ["identity", "hierarchical", "wavelet"] if plain else []
    if n <= DENSE_AUTO_LIMIT["l2"]:
        names.append("l2_approx")
    if norm == "l1" and n <= DENSE_AUTO_LIMIT["l1"]:
        names.append("min_error")
    return names


def _scored(workload, name, found, norm, seconds) -> dict:
    """A candidate (an ImplicitSolution or a dense OptimizeResult) with its exact unit-privacy total."""
    r = dp.evaluate(workload, found.strategy, None, norm=norm)
    return {"method": name, "strategy": found.strategy, "objective": r.total_squared_error, "status": found.status,
            "message": found.message, "iterations": found.iterations, "solver": found.solver,
            "lower_bound": found.lower_bound, "extra": dict(found.extra), "seconds": seconds,
            "exact": bool(getattr(r, "total_exact", True))}


def _svd_bound(workload) -> tuple[float, bool]:
    """(SVD bound at unit privacy, exact?): exact for dense workloads, a flagged lower bound for some unions."""
    if isinstance(workload, ImplicitWorkload):
        b = bounds.svd_bound(workload)
        return b.value, b.exact
    return dp.svd_bound(workload), True
