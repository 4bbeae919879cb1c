"""What the product-domain searches share with ``auto``: their default restarts and how a candidate is scored.

Notation: see README. Below both :mod:`mmopt.multidim.search` (one method) and :mod:`mmopt.auto` (many within a
budget), so that neither imports the other's layer back.
"""

from __future__ import annotations

from mmopt import dispatch as dp
from mmopt._base.result import OptimizeResult

__all__ = ["DEFAULT_RESTARTS", "score"]

#: Default restarts of the product searches when the user gives none. OPT_M restarts cost ~10 ms each
#: (closed-form objective) and its ε-DP landscape has many local optima: on adult W2, 3 / 10 / 50 restarts give
#: 326,416 / 317,126 / 292,405 (HDMM's own search: 315,883).
DEFAULT_RESTARTS = {"kron": 3, "union": 3, "marginals": 50, "residual": 1, "datacube": 1, "coupled": 1}


def _twin(workload, strategy):
    """The implicit twin of a dense product workload (mmopt.workload.kron/stack/marginals), for an implicit strategy:
    the same queries, evaluated factor by factor — densely at 4,096 cells each candidate took ~9 s, outside auto's
    budget (28 s against 'fast''s 5 s)."""
    from mmopt.structured.strategies import ImplicitStrategy
    from mmopt.workload import structure_of
    twin = structure_of(workload) if isinstance(strategy, ImplicitStrategy) else None
    return workload if twin is None or tuple(twin.shape) != tuple(strategy.shape) else twin


def score(workload, name: str, found, norm: str, seconds: float, cpu: float | None = None,
          estimate: float | None = None) -> dict:
    """A candidate (an ImplicitSolution or an OptimizeResult) with its unit-privacy total: exact, or the certified
    upper end of :func:`mmopt.structured.evaluate`'s bracket (``lower`` its lower end), so that a bounded
    candidate is ranked by a value it is sure to meet. An OptimizeResult is already exact: :func:`mmopt.optimize`
    re-evaluated it on the same queries, or it is structured (mmopt.toeplitz, H_b by Woodbury, the tridiagonal
    dual's primal) and carries its own exact total."""
    base = {"method": name, "strategy": found.strategy, "status": found.status, "message": found.message,
            "iterations": found.iterations, "solver": found.solver, "lower_bound": found.lower_bound,
            "extra": {k: v for k, v in found.extra.items() if k != "report"}, "seconds": seconds, "cpu": cpu,
            "estimate": estimate}
    if isinstance(found, OptimizeResult):  # optimize re-evaluated it exactly on these same queries, or it is
        # structured and carries its own exact total
        return base | {"objective": found.objective, "exact": True, "lower": found.objective}
    # a search that already evaluated its strategy on these queries (OPT_+) hands its report over: not twice
    r = found.extra.get("report") or dp.evaluate(_twin(workload, found.strategy), found.strategy, None, norm=norm)
    exact = bool(getattr(r, "total_exact", True))
    lower = r.total_squared_error if exact else getattr(r, "total_lower", None)
    return base | {"objective": r.total_squared_error, "exact": exact, "lower": lower}
