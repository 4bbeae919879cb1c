"""OptimizeResult: what :func:`mmopt.optimize` returns, always, for dense and implicit workloads alike.

Notation: see README. Kept apart from :mod:`mmopt.optimize` so that the multi-dimensional searches
(:mod:`mmopt.multidim`) build the same result type without importing the dispatcher.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, eq=False)
class OptimizeResult:
    """What :func:`optimize` returns, always, whatever happened (scipy's OptimizeResult in spirit).

    Attributes
    ----------
    strategy : Strategy or mmopt.structured.ImplicitStrategy
    norm : {"l1", "l2"}
        The sensitivity norm the objective uses.
    objective : float
        Δ_norm² · tr(G (AᵀA)⁺) of the returned strategy at unit privacy (total over all m queries),
        recomputed with :func:`mmopt.evaluate`. Multiply by ``Privacy.variance_factor`` for the error.
    lower_bound : float
        A proven lower bound on every strategy's objective in this norm, in the same units.
    status : str
        cvxpy vocabulary: "optimal", "optimal_inaccurate", "user_limit", "solver_error", ...
        "optimal" only when the method's own convergence test passed: for l2_approx a certified
        duality gap; for the heuristics (min_error, min_sensitivity) a *local* optimum, not a global
        one; for closed forms it only says the construction is exact. "user_limit": an iteration
        budget ended the run.
    success : bool
        ``status == "optimal"``.
    message : str
    method, solver : str, str or None
        The method, and the solver actually used (None for closed forms).
    iterations : int or None
    seconds : float
        Wall-clock time including problem construction and re-evaluation.
    objective_per_query, lower_bound_per_query : float
        The same divided by m: finite even when m = 2ⁿ − 1 overflows the totals (all predicates).
    history : tuple of dict
        Outer iterations (rank gap of convex iteration, restarts of a local search, ...).
    extra : dict
        Method-specific details (dual bound, per-candidate objectives, ...).
    """

    strategy: Any  # Strategy, or mmopt.structured.ImplicitStrategy on a product domain
    norm: str
    objective: float
    lower_bound: float
    status: str
    success: bool
    message: str
    method: str
    solver: str | None
    iterations: int | None
    seconds: float
    objective_per_query: float = field(default=float("nan"), repr=False)
    lower_bound_per_query: float = field(default=float("nan"), repr=False)
    history: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def gap(self) -> float:
        """(objective − lower_bound) / objective: how far, at most, from optimal."""
        return (self.objective_per_query - self.lower_bound_per_query) / self.objective_per_query

    @property
    def ratio(self) -> float:
        """objective / lower_bound (≥ 1)."""
        return self.objective_per_query / self.lower_bound_per_query

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary: every field above, ``gap``, ``ratio`` and ``seed`` (as given to
        :func:`mmopt.optimize`, recorded in ``extra["seed"]``), with the strategy summarised (kind, name, shape,
        domain) rather than stored.

        Only dict, list, str, int, float, bool and None: numpy scalars become Python numbers, arrays in
        ``history``/``extra`` lists (summarised past 4,096 entries), other objects their repr, and non-finite
        floats the strings "inf", "-inf", "nan" (so it is strict JSON and round-trips exactly).
        :func:`mmopt.save` stores it with the strategy itself.

        Examples
        --------
        >>> import json, mmopt
        >>> d = mmopt.optimize(mmopt.workload.prefix(4), method="identity").to_dict()
        >>> json.loads(json.dumps(d, allow_nan=False)) == d, d["strategy"]["kind"], d["strategy"]["shape"]
        (True, 'dense', [4, 4])
        """
        from mmopt._persist_json import result_dict  # lazy: it imports the strategy classes

        return result_dict(self)

    def __str__(self) -> str:
        lines = [("status", self.status), ("method", self.method), ("solver", self.solver), ("norm", self.norm),
                 ("objective", f"{self.objective:.6g}"), ("lower_bound", f"{self.lower_bound:.6g}"),
                 ("gap", f"{100 * self.gap:.3g}%"), ("iterations", self.iterations),
                 ("seconds", f"{self.seconds:.3g}"), ("message", self.message)]
        return "\n".join(f"{k:>11}: {val}" for k, val in lines)


def reconcile(objective: float, bound: float, status: str, message: str) -> tuple[str, str, float]:
    """(status, message, bound) once the exact objective meets the best proven lower bound.

    An objective below the bound is an internal error, never a result ("solver_error"); one that meets the
    bound is certified optimal whatever stopped the search (e.g. total(n), where a spent budget still found
    the optimum); the bound reported never exceeds the objective. Shared by every optimize path.
    """
    if objective < bound * (1 - 1e-6):
        return "solver_error", (f"Internal inconsistency: objective {objective:.6g} is below the lower bound "
                                f"{bound:.6g}. Please report this workload."), min(bound, objective)
    if status != "optimal" and objective <= bound * (1 + 1e-9):
        gap = (objective - bound) / objective
        message = (f"Certified optimal: the objective equals the lower bound (gap {gap:.1e}). "
                   f"The search itself said: {message}")
        status = "optimal"
    return status, message, min(bound, objective)

