"""OptimizeResult: what :func:`mmopt.optimize` returns, always, for dense and implicit workloads alike.

Notation: see README. Kept apart from :mod:`mmopt.optimize` so that the multi-dimensional searches
(:mod:`mmopt.multidim`) build the same result type without importing the dispatcher.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mmopt._base.rounding import down, up


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
        "optimal": certified — the objective meets a proven lower bound (within 10⁻⁶, or the method's
        ``tol`` where that is a duality gap: l2_approx's, and the max-variance objectives' and the participation
        optimum's, whose default tol is 10⁻⁴; the message then states the tol); never beside a large ``gap``.
        "local_optimum": the method converged by its own test but nothing certifies the result (min_error,
        min_sensitivity and the product searches under ε-DP; the best of a restricted family). "closed_form": a
        construction
        (identity, H₂, wavelet, svd_strategy, residual under ε-DP). Then cvxpy's failures:
        "optimal_inaccurate" (an inaccurate solve; for min_error's L-BFGS, a line search that stalled before the
        method's own test was met: never a certificate, ``success`` False), "user_limit" (an iteration budget
        ended the run), "solver_error", "infeasible", "unbounded".
    success : bool
        ``status`` is one of "optimal", "local_optimum", "closed_form" (:data:`SUCCESS`).
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
        """(objective − lower_bound) / objective, a fraction in [0, 1): how far, at most, from optimal (the
        share of the objective the optimum may still remove). ``ratio`` says the same as objective/lower_bound."""
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
        from mmopt._base.jsonable import result_dict  # lazy: it imports the strategy classes

        return result_dict(self)

    def __str__(self) -> str:
        lines = [("status", self.status), ("method", self.method), ("solver", self.solver), ("norm", self.norm),
                 ("objective", up(self.objective)), ("lower_bound", down(self.lower_bound)),  # safe sides
                 ("gap", f"{self.gap:.3g}"), ("ratio", f"{self.ratio:.6g}"), ("iterations", self.iterations),
                 ("seconds", f"{self.seconds:.3g}"), ("message", self.message)]
        return "\n".join(f"{k:>11}: {val}" for k, val in lines)


#: The statuses for which ``success`` is True: the method did what it does, to its own test.
SUCCESS = ("optimal", "local_optimum", "closed_form")
#: Methods whose strategy is a construction (no search): converged means "built", never "optimal".
CLOSED_FORMS = ("identity", "hierarchical", "wavelet", "svd_strategy", "residual")
# "optimal" needs the objective within this relative distance of the proven lower bound (or the method's tol)
CERTIFIED_GAP = 1e-6


#: Methods whose ``tol`` is a duality gap on the L2 objective: only for them (under L2) may a caller's ``tol`` widen
#: the certificate in :func:`reconcile`. Elsewhere ``tol`` is a convergence test (min_error's L-BFGS, the product
#: searches' sweeps): tol=0.9 made min_error "optimal" at gap 0.49 and OPT_M at 0.65.
GAP_TOL_METHODS = ("l2_approx",)


def gap_tol(method: str, norm: str, tol: float | None) -> float | None:
    """``tol`` when it is a certified gap for ``method`` under ``norm`` (:data:`GAP_TOL_METHODS`, L2), else None."""
    return tol if method in GAP_TOL_METHODS and norm == "l2" else None


def reconcile(objective: float, bound: float, status: str, message: str, *, closed: bool = False,
              tol: float | None = None) -> tuple[str, str, float]:
    """(status, message, bound) in the vocabulary of :class:`OptimizeResult`, from the exact objective and the
    best proven lower bound. Shared by every optimize path.

    * An objective below the bound is an internal error, never a result ("solver_error").
    * One that meets the bound is certified "optimal" whatever stopped the search (e.g. total(n), where a
      spent budget still found the optimum).
    * "optimal" is kept only when it is certified — a gap (objective − bound)/objective of at most
      max(1e-6, ``tol``), as :attr:`OptimizeResult.gap` reports it; ``tol`` only where it is the method's duality
      gap (:func:`gap_tol`) — so
      that it never stands beside a large gap. A method that converged without that certificate is a
      "local_optimum" (a heuristic's, or the best of a restricted family), a construction (``closed``) is a
      "closed_form"; the message says how far from the bound it is.
    * The bound reported never exceeds the objective.
    """
    if objective < bound * (1 - 1e-6):
        return "solver_error", (f"Internal inconsistency: objective {objective:.6g} is below the lower bound "
                                f"{bound:.6g}. Please report this workload."), min(bound, objective)
    if status != "optimal" and objective <= bound * (1 + 1e-9):  # the strategy is exact: it is the optimum
        gap = (objective - bound) / objective
        message = (f"Certified optimal: the objective equals the lower bound (gap {gap:.1e}). "
                   f"The search itself said: {message}")
        return "optimal", message, min(bound, objective)
    # the certificate is the result's own gap, (objective − bound)/objective ≤ tol: the ratio − 1 used here before
    # (0.104 at gap 0.094 ≤ tol 0.1) called a solve certified by its reported gap a local optimum
    if status in SUCCESS and objective - bound > objective * max(CERTIFIED_GAP, tol or 0.0):
        status = "closed_form" if closed else "local_optimum"
        message = (f"{message} Not certified optimal: the objective is {objective / bound:.4g}× the proven lower "
                   "bound (the optimum lies somewhere between them).")
    elif status == "optimal" and objective - bound > objective * CERTIFIED_GAP:  # certified by the method's tol
        message = (f"{message} Certified to the method's duality-gap tolerance tol = {tol:g}: gap "
                   f"{(objective - bound) / objective:.2g} (pass a smaller tol for a tighter certificate).")
    return status, message, min(bound, objective)
