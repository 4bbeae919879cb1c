"""optimize(..., method="kron" | "union" | "marginals" | "residual" | "auto") on product-domain workloads.

Notation: see README. Each method returns an :class:`~mmopt._solution.ImplicitSolution`; this module
re-evaluates its strategy exactly (``objective`` is never the search's own number: it is
:func:`mmopt.evaluate` at unit privacy), attaches the best lower bound known — the SVD bound, exact for a
product or marginals workload and a proven lower bound for other unions, raised to a method's certified
bound where it has one — and reports status, seconds and every candidate. ``"auto"`` runs every method
that applies and keeps the lowest error (exact, or a certified upper value): the product searches on a
product domain; on a plain (1-D) workload the closed forms identity, H₂ and the Haar wavelet; and, where
they take seconds (:data:`DENSE_AUTO_LIMIT`), the dense ``l2_approx`` and, for ε-DP, ``min_error``; under ε-DP,
on up to DENSE_LIMIT cells, also a short dense local search when the products are far from the bound
(:data:`FAR_RATIO`).
A candidate whose error has no exact path is scored by the upper end of its certified bracket
(:func:`mmopt.structured.evaluate`; ``extra["candidates"][name]["lower"]`` is the lower end). A candidate that
fails is recorded in ``extra["failed"]`` and never aborts the search.
"""

from __future__ import annotations

import math
import time

import numpy as np

from mmopt import _runtime
from mmopt import dispatch as dp
from mmopt._result import CLOSED_FORMS, SUCCESS, OptimizeResult, reconcile
from mmopt.multidim.datacube import solve_datacube
from mmopt.multidim.kron import solve_kron
from mmopt.multidim.marginals import solve_marginals
from mmopt.multidim.union import solve_union
from mmopt.solvers import SolverError
from mmopt.structured import bounds
from mmopt.structured._checks import DENSE_LIMIT
from mmopt.structured.factors import singular_values
from mmopt.structured.residual.solve import applies as residual_applies
from mmopt.structured.residual.solve import solve_residual
from mmopt.structured.workloads import ImplicitWorkload

# datacube (Ding et al. 2011) runs only when asked for: it is never one of "auto"'s candidates
SOLVERS = {"kron": solve_kron, "union": solve_union, "marginals": solve_marginals, "residual": solve_residual,
           "datacube": solve_datacube}
METHODS = (*SOLVERS, "auto")
# Restarts when the user gives none. OPT_M restarts cost ~10 ms each (closed-form objective) and its ε-DP
# landscape has many local optima: on adult W2, 3 / 10 / 50 restarts give 326,416 / 317,126 / 292,405
# (HDMM's own search: 315,883); ≤3-way marginals on 10¹⁰ cells take 11 s with 50.
DEFAULT_RESTARTS = {"kron": 3, "union": 3, "marginals": 50, "residual": 1,
                    "datacube": 1}  # residual, datacube: no restarts
# "auto" adds the dense method only up to these domain sizes, where it takes seconds (benchmarks/: min_error
# ~7 s at n = 256 but 160–290 s at 1,024; the fast L2 solver ~1 s at 1,024, 46 s at 4,096).
DENSE_AUTO_LIMIT = {"l1": 256, "l2": 1024}
# Under ε-DP, on a product domain of at most DENSE_LIMIT cells, "auto" also runs the dense p-Identity local
# search (min_error, engine "local", one restart) when its best candidate is more than FAR_RATIO × the SVD
# bound. Measured (benchmarks/bench_auto.py): 2-D all ranges 32×32, kron 6.61× the bound (HDMM's best of 25
# restarts: 6.50×), the local search 5.20× after 300 L-BFGS-B steps (~7 s CPU). Under Laplace noise the
# L1 optimum itself is often > 2× the (Gaussian) SVD bound; but the search's p-Identity strategies have full
# rank, which a rank-deficient workload does not need (2-way marginals on (4,)⁵, rank ≤ 160 of 1,024: it found
# 10.80× in 7 s against OPT_M's 7.46×), so it is skipped when Σ_j ∏ᵢ rank Wᵢ⁽ʲ⁾ < N. The census workloads
# (≥ 29,440 cells) never run it. One step ~n²·p
# (p = n/16 extra rows), so the step budget is LOCAL_WORK / (n²p), at most LOCAL_STEPS, and the search is
# skipped when that leaves fewer than LOCAL_MIN_STEPS (n ≳ 1,450 cells).
FAR_RATIO = 2.0
LOCAL_STEPS, LOCAL_MIN_STEPS = 300, 100
LOCAL_WORK = LOCAL_STEPS * 1024**2 * 64


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
    candidates, failures, skipped = [], {}, []
    svd, bound_exact = _svd_bound(workload)
    for k, name in enumerate(names):
        t1 = time.perf_counter()
        say("optimize(auto): running %s on %s", name, structure.name)
        try:
            sol = SOLVERS[name](structure, restarts=restarts or DEFAULT_RESTARTS[name], **kw)
            candidates.append(_scored(workload, name, sol, norm, time.perf_counter() - t1))
        except (ValueError, ArithmeticError, SolverError) as exc:  # one candidate never aborts auto
            if method != "auto":
                raise
            failures[name] = f"{type(exc).__name__}: {exc}"
            continue
        if method == "auto" and bound_exact and candidates[-1]["exact"] and \
                candidates[-1]["objective"] <= svd * (1 + 1e-9):
            # an exactly scored candidate at the exact SVD bound is optimal: no other strategy can do better
            skipped = names[k + 1:] + ["dense candidates"]
            say("optimize(auto): %s meets the exact SVD bound; skipping %s", name, skipped)
            break
    if method == "auto" and not skipped and (structure is None or workload.domain_size <= DENSE_LIMIT):
        dense = structure.to_workload() if isinstance(workload, ImplicitWorkload) else workload
        for name in _dense_candidates(dense.domain_size, norm, structure is None, getattr(dense, "family", None)):
            t1 = time.perf_counter()
            say("optimize(auto): running %s on %s", name, dense.name)
            try:
                res = dense_optimize(dense, method=name, norm=norm, seed=seed, verbose=verbose, n_jobs=n_jobs)
                candidates.append(_scored(workload, res.method, res, norm, time.perf_counter() - t1))
            except (ValueError, ArithmeticError, SolverError) as exc:  # one candidate never aborts auto
                failures[name] = f"{type(exc).__name__}: {exc}"
    steps = _local_steps(workload, structure, norm, candidates, svd) if method == "auto" and not skipped else None
    if steps is not None:  # the products are far from the bound: the dense search (module constants)
        t1 = time.perf_counter()
        say("optimize(auto): running the dense local search (%d steps) on %s", steps, workload.name)
        try:
            res = dense_optimize(structure.to_workload(), method="min_error", norm=norm, seed=seed,
                                 verbose=verbose, max_iterations=steps, options={"engine": "local", "restarts": 1})
            candidates.append(_scored(workload, "min_error(local)", res, norm, time.perf_counter() - t1))
        except (ValueError, ArithmeticError, SolverError) as exc:  # one candidate never aborts auto
            failures["min_error(local)"] = f"{type(exc).__name__}: {exc}"
    if not candidates:
        raise ValueError(f"optimize(method='auto'): no method applied to '{workload.name}': {failures}")
    best = min(candidates, key=lambda c: c["objective"])
    bound = max([svd, *(c["lower_bound"] for c in candidates if c["lower_bound"] is not None)])
    m = workload.n_queries
    message = best["message"]
    if method == "auto":
        message = f"Best of {len(candidates)} candidates is '{best['method']}'. " + message
    status, message, bound = reconcile(best["objective"], bound, best["status"], message,
                                       closed=best["method"] in CLOSED_FORMS or best["status"] == "closed_form",
                                       tol=tol)
    extra = dict(best["extra"]) | {
        "total_exact": best["exact"], "bound_exact": bound_exact,
        "candidates": {c["method"]: {k: c[k] for k in ("objective", "lower", "status", "seconds", "exact")}
                       for c in candidates},
        "failed": failures, "skipped": skipped}
    return OptimizeResult(best["strategy"], norm, best["objective"], bound, status, status in SUCCESS, message,
                          method if method != "auto" else f"auto:{best['method']}", best["solver"],
                          best["iterations"], time.perf_counter() - t0, best["objective"] / m, bound / m,
                          (), extra)


def _dense_candidates(n: int, norm: str, plain: bool, family: str | None = None) -> list[str]:
    """The dense methods "auto" runs on n cells: the closed forms always on a plain (1-D) workload (milliseconds,
    and under Laplace noise H₂ often beats everything else affordable), l2_approx where its certified fast solver
    takes seconds, and min_error under ε-DP where it does (:data:`DENSE_AUTO_LIMIT`). On the prefix and all-range
    families under Gaussian noise, also the weighted square root (:mod:`mmopt.toeplitz.weighted`: exact error in
    O(n log² n), within 0.5 % of the certified bound at every n measured); under Laplace noise it does not apply
    (its sensitivity and error are Δ₂'s) and is not run."""
    names = ["identity", "hierarchical", "wavelet"] if plain else []
    if plain and norm == "l2" and family in ("prefix", "all_range"):
        # past the dense solver's limit the dense closed forms cost O(n³) for errors far above the weighted square
        # root's (prefix(4,096): 38 of auto's 41 s and 2.7 GB, for 1.57× (H₂) and 1.57× (wavelet) the bound
        # against its 1.005×): only it is run there
        names = ["weighted_sqrt"] if n > DENSE_AUTO_LIMIT["l2"] else [*names, "weighted_sqrt"]
    if n <= DENSE_AUTO_LIMIT["l2"]:
        names.append("l2_approx")
    if norm == "l1" and n <= DENSE_AUTO_LIMIT["l1"]:
        names.append("min_error")
    return names


def _local_steps(workload, structure, norm: str, candidates: list, svd: float) -> int | None:
    """L-BFGS-B steps of "auto"'s dense local search, or None where it does not run (see FAR_RATIO)."""
    n = workload.domain_size
    if norm != "l1" or structure is None or not DENSE_AUTO_LIMIT["l1"] < n <= DENSE_LIMIT or not candidates:
        return None  # (up to DENSE_AUTO_LIMIT["l1"] cells the full min_error already runs)
    if min(c["objective"] for c in candidates) <= FAR_RATIO * svd:
        return None
    if sum(math.prod(int(np.count_nonzero(singular_values(f))) for f in t.factors) for t in structure.terms) < n:
        return None  # rank(W) ≤ Σ_j ∏ᵢ rank Wᵢ⁽ʲ⁾ < N: full-rank p-Identity strategies do not fit it
    steps = min(LOCAL_STEPS, LOCAL_WORK // (n * n * max(4, n // 16)))
    return steps if steps >= LOCAL_MIN_STEPS else None


def _scored(workload, name, found, norm, seconds) -> dict:
    """A candidate (an ImplicitSolution or a dense OptimizeResult) with its unit-privacy total: exact, or the
    certified upper end of :func:`mmopt.structured.evaluate`'s bracket (``lower`` its lower end), so that a
    bounded candidate is ranked by a value it is sure to meet."""
    if type(found.strategy).__module__.startswith("mmopt.toeplitz."):  # structured: its own exact O(n log n) total
        return {"method": name, "strategy": found.strategy, "objective": found.objective, "status": found.status,
                "message": found.message, "iterations": found.iterations, "solver": found.solver,
                "lower_bound": found.lower_bound, "extra": dict(found.extra), "seconds": seconds,
                "exact": True, "lower": found.objective}
    r = dp.evaluate(workload, found.strategy, None, norm=norm)
    exact = bool(getattr(r, "total_exact", True))
    lower = r.total_squared_error if exact else getattr(r, "total_lower", None)
    return {"method": name, "strategy": found.strategy, "objective": r.total_squared_error, "status": found.status,
            "message": found.message, "iterations": found.iterations, "solver": found.solver,
            "lower_bound": found.lower_bound, "extra": dict(found.extra), "seconds": seconds,
            "exact": exact, "lower": lower}


def _svd_bound(workload) -> tuple[float, bool]:
    """(SVD bound at unit privacy, exact?): exact for dense workloads, a flagged lower bound for some unions."""
    if isinstance(workload, ImplicitWorkload):
        b = bounds.svd_bound(workload)
        return b.value, b.exact
    if getattr(workload, "family", None) in ("prefix", "all_range"):  # closed-form singular values: no O(n³) eigh
        from mmopt.toeplitz.bound import svd_bound as closed_svd_bound
        return closed_svd_bound(workload.domain_size, workload.family), True
    return dp.svd_bound(workload), True
