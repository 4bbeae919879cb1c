"""optimize(mmopt.toeplitz.prefix(n) or all_range(n), method="auto"): the dense search where it is fast, the
structured closed forms beyond, never an n×n matrix at large n.

Notation: see README and :mod:`mmopt.toeplitz.weighted`. Where the dense search takes seconds (n up to
:data:`mmopt.multidim.search.DENSE_AUTO_LIMIT` for the norm) the workload is handed to it as the dense
``mmopt.workload.prefix(n)`` / ``all_range(n)``, whose candidates include the weighted square root under
Gaussian noise. Beyond, under Gaussian noise (L2), the candidates are the weighted square root (exact error in
O(n log² n), within 0.35 % of the certified bound for prefix and 0.01 % for all ranges at n = 2¹⁶) and the
row-equalised square-root factorisation (causal, for streaming); the lower bound is the certified diagonal
bound of :mod:`mmopt.toeplitz.bound`. Under Laplace noise (ε-DP) the Toeplitz layer has no method (its error
formulas and strategies are for Δ₂), so past the dense limits the request is refused with what to do instead.
"""

from __future__ import annotations

import time

from mmopt._result import SUCCESS, OptimizeResult, reconcile
from mmopt.toeplitz.error import StreamWorkload
from mmopt.toeplitz.solve import optimize as toeplitz_optimize

__all__ = ["CANDIDATES", "search_stream"]

#: The structured candidates "auto" runs past the dense limit (Gaussian noise): closed forms, milliseconds to
#: seconds at n = 2²⁰, so every one is run and the lowest exact error kept.
CANDIDATES = ("weighted_sqrt", "sqrt")


def search_stream(workload: StreamWorkload, *, norm: str, dense_auto, tol: float | None = None) -> OptimizeResult:
    """"auto" on a :class:`~mmopt.toeplitz.StreamWorkload` (see the module docstring).

    ``dense_auto(W)`` runs mmopt's dense "auto" on a dense workload (:func:`mmopt.multidim.search.search`).

    Examples
    --------
    >>> import mmopt
    >>> from mmopt import toeplitz
    >>> res = mmopt.optimize(toeplitz.prefix(2**14), method="auto", norm="l2")
    >>> res.method, res.status, bool(res.ratio < 1.005)
    ('auto:weighted_sqrt', 'closed_form', True)
    """
    from mmopt.multidim.search import DENSE_AUTO_LIMIT
    from mmopt.structured._checks import DENSE_LIMIT
    from mmopt.workload import all_range, prefix

    t0 = time.perf_counter()
    n = workload.n
    if n <= DENSE_AUTO_LIMIT[norm] or (norm == "l1" and n <= DENSE_LIMIT):
        return dense_auto((prefix if workload.kind == "prefix" else all_range)(n))
    if norm == "l1":
        raise ValueError(f"optimize(method='auto'): under Laplace noise (ε-DP) no method covers "
                         f"{workload.kind}({n:,}) past {DENSE_LIMIT:,} cells: the structured (Toeplitz) strategies "
                         "are optimised for Gaussian noise. Use Privacy(epsilon, delta > 0) (or norm='l2'), or the "
                         "dense mmopt.workload.prefix / all_range on at most "
                         f"{DENSE_LIMIT:,} cells.")
    runs = {}
    for name in CANDIDATES:
        t1 = time.perf_counter()
        runs[name] = (toeplitz_optimize(workload, name), time.perf_counter() - t1)
    best_name = min(runs, key=lambda k: runs[k][0].objective)
    best = runs[best_name][0]
    lower = max(r.lower_bound for r, _ in runs.values())
    message = f"Best of {len(runs)} structured candidates is '{best_name}'. {best.message}"
    status, message, lower = reconcile(best.objective, lower, best.status, message,
                                       closed=best.status == "closed_form", tol=tol)
    m = workload.n_queries
    candidates = {k: {"objective": r.objective, "lower": r.objective, "status": r.status, "seconds": s,
                      "exact": True} for k, (r, s) in runs.items()}
    extra = dict(best.extra) | {"total_exact": True, "bound_exact": True, "candidates": candidates,
                                "failed": {}, "skipped": ["dense candidates"],
                                "bound_kind": "diagonal"}
    return OptimizeResult(best.strategy, "l2", best.objective, lower, status, status in SUCCESS, message,
                          f"auto:{best_name}", best.solver, best.iterations, time.perf_counter() - t0,
                          best.objective / m, lower / m, (), extra)
