"""optimize(workload, method=...): one entry point for choosing a strategy, one result type.

Notation: see README. Each method lives in its own module and hands back a ``RawSolution``; this module
re-evaluates the returned strategy exactly (``objective`` is never a solver's number), attaches the
best lower bound known (the SVD bound, raised to the L2 dual bound when one was computed: since
‖A‖₁ ≥ ‖A‖₂, the L2 optimum bounds the L1 problem too), and reports status, solver and timing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mmopt import _validation as v
from mmopt import strategy as st
from mmopt._solution import RawSolution
from mmopt.error import evaluate, svd_bound
from mmopt.strategy import Strategy
from mmopt.workload import Workload


@dataclass(frozen=True, eq=False)
class OptimizeResult:
    """What :func:`optimize` returns, always, whatever happened (scipy's OptimizeResult in spirit).

    Attributes
    ----------
    strategy : Strategy
    norm : {"l1", "l2"}
        The sensitivity norm the objective uses.
    objective : float
        Δ_norm² · tr(G (AᵀA)⁺) of the returned strategy at unit privacy (total over all m queries),
        recomputed with :func:`mmopt.evaluate`. Multiply by ``Privacy.variance_factor`` for the error.
    lower_bound : float
        A proven lower bound on every strategy's objective in this norm, in the same units.
    status : str
        cvxpy vocabulary: "optimal", "optimal_inaccurate", "user_limit", "solver_error", ...
        For heuristics "optimal" means the heuristic converged, not that A is globally optimal.
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

    strategy: Strategy
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

    def __str__(self) -> str:
        lines = [("status", self.status), ("method", self.method), ("solver", self.solver), ("norm", self.norm),
                 ("objective", f"{self.objective:.6g}"), ("lower_bound", f"{self.lower_bound:.6g}"),
                 ("gap", f"{100 * self.gap:.3g}%"), ("iterations", self.iterations),
                 ("seconds", f"{self.seconds:.3g}"), ("message", self.message)]
        return "\n".join(f"{k:>11}: {val}" for k, val in lines)


MethodFn = Callable[[Workload, np.ndarray, dict], RawSolution]


def _closed(matrix_fn) -> MethodFn:
    def method(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
        return RawSolution(matrix_fn(W), None, "optimal", "Closed-form strategy; no solver involved.", None, None)
    return method


def _l2_approx(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
    engine = opts.get("engine", "auto")
    if engine == "auto":  # the paper's SDP where it is cheap, the certified fast solver beyond (same problem)
        engine = "sdp" if (W.domain_size <= 32 or opts.get("solver")) else "fast"
    if engine == "sdp":
        from mmopt.sdp_l2 import solve_l2_sdp
        return solve_l2_sdp(G, solver=opts.get("solver"), tol=opts.get("tol") or 1e-8, verbose=opts["verbose"])
    from mmopt.l2_fast import solve_l2
    return solve_l2(G, tol=opts.get("tol") or 1e-8, max_iterations=opts.get("max_iterations") or 500,
                    verbose=opts["verbose"])


def _min_error(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
    from mmopt import min_error
    return min_error.solve(W, G, opts)


def _min_sensitivity(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
    A0 = opts.get("initial")
    if A0 is None:
        raise ValueError("optimize(method='min_sensitivity') needs initial=<Strategy or matrix>: the strategy "
                         "whose error profile is kept while its sensitivity is minimised.")
    A0 = _initial_matrix(A0, W)
    from mmopt.min_sensitivity import solve_min_sensitivity
    return solve_min_sensitivity(A0.T @ A0, initial=A0, solver=opts.get("solver"), tol=opts.get("tol") or 1e-6,
                                 max_iterations=opts.get("max_iterations") or 50, seed=opts.get("seed"),
                                 verbose=opts["verbose"])


METHODS: dict[str, MethodFn] = {
    "identity": _closed(lambda W: st.identity(W.domain_size).matrix),
    "hierarchical": _closed(lambda W: st.hierarchical(W.domain_size).matrix),
    "wavelet": _closed(lambda W: st.wavelet(W.domain_size).matrix),
    "svd_bound": _closed(lambda W: st.singular_value_bound(W).matrix),
    "l2_approx": _l2_approx,
    "min_error": _min_error,
    "min_sensitivity": _min_sensitivity,
}
DEFAULT_NORM = {"l2_approx": "l2"}
OPTIONS = {"engine", "restarts", "p", "weight", "polish", "extra_rows"}


def optimize(workload: Workload, *, method: str | Callable = "l2_approx", solver: str | None = None,
             norm: str | None = None, initial=None, tol: float | None = None, max_iterations: int | None = None,
             seed=None, verbose: bool = False, options: Mapping[str, Any] | None = None) -> OptimizeResult:
    """Find a strategy for ``workload`` with one of the paper's methods.

    Parameters
    ----------
    workload : Workload
    method : str or callable, default="l2_approx"
        "l2_approx" (Program 5.2, (ε,δ)-optimal, convex), "min_error" (Program 5.1, ε-DP, heuristic),
        "min_sensitivity" (Program 5.3, needs ``initial``), "svd_bound" (Theorem 5.25's closed form),
        "identity", "hierarchical", "wavelet" (baselines), or a callable ``f(workload, G, opts) ->
        RawSolution``.
    solver : str or None, default=None
        SDP solver ("CLARABEL", "SCS", "MOSEK"); None picks one (see :mod:`mmopt.solvers`).
    norm : {"l1", "l2"} or None
        Sensitivity norm of the reported objective; default "l2" for l2_approx, else "l1".
    initial : Strategy, array_like, or str, optional
        Warm start (min_error: a Strategy, a matrix, or "identity", "hierarchical", "wavelet",
        "l2_approx"); the strategy to re-profile for min_sensitivity.
    tol, max_iterations, seed, verbose
        Passed to the method.
    options : dict, optional
        Method-specific: ``engine`` ("auto", "sdp", "fast" for l2_approx; "auto", "sdp", "local" for
        min_error), ``restarts``, ``p`` (extra rows of the local search), ``weight``, ``polish``.

    Returns
    -------
    OptimizeResult

    Examples
    --------
    >>> import mmopt
    >>> res = optimize(mmopt.workload.prefix(2), method="l2_approx")
    >>> round(res.objective, 6), res.success   # (3 + √5)/2
    (2.618034, True)
    >>> res.lower_bound >= round(mmopt.svd_bound(mmopt.workload.prefix(2)), 12) == 2.5   # dual bound ≥ SVD bound
    True
    """
    t0 = time.perf_counter()
    caller = "optimize"
    if not isinstance(workload, Workload):
        raise TypeError(f"The 'workload' parameter of {caller} must be a Workload. Got {type(workload).__name__}.")
    if callable(method):
        fn, name = method, getattr(method, "__name__", "custom")
    else:
        name = v.check_choice(method, name="method", caller=caller, choices=METHODS)
        fn = METHODS[name]
    norm = v.check_choice(norm or DEFAULT_NORM.get(name, "l1"), name="norm", caller=caller, choices=("l1", "l2"))
    opts = dict(options or {})
    unknown = set(opts) - OPTIONS
    if unknown:
        raise ValueError(f"Unknown options {sorted(unknown)} for {caller}. Accepted: {sorted(OPTIONS)}.")
    if tol is not None:
        v.check_real(tol, name="tol", caller=caller, low=0.0, low_open=True)
    if max_iterations is not None:
        v.check_int(max_iterations, name="max_iterations", caller=caller)
    if solver is not None:
        from mmopt.solvers import choose
        solver = choose(solver)
    opts.update(solver=solver, tol=tol, max_iterations=max_iterations, seed=seed, verbose=verbose, initial=initial,
                norm=norm)

    # Methods see G scaled to mean diagonal 1: argmins are scale-free and solvers like unit-sized data.
    G = workload.mean_gram / (np.trace(workload.mean_gram) / workload.domain_size)
    raw = fn(workload, G, opts)
    A = Strategy(raw.matrix, name) if raw.matrix is not None else Strategy.from_gram(raw.gram, name=name)
    report = evaluate(workload, A, norm=norm, per_query=False)
    objective = report.mean_squared_error  # per query: finite for every m; totals are derived at the end
    bound = svd_bound(workload, per_query=True)
    if raw.dual_bound is not None and raw.extra.get("dual_bound_norm", "l2") in ("l2", norm):
        # an L2 dual bound holds for L1 too (‖A‖₁ ≥ ‖A‖₂); scale it back from the normalised G
        unscale = np.trace(workload.mean_gram) / workload.domain_size
        bound = max(bound, float(raw.dual_bound) * unscale)
    status = raw.status
    message = raw.message
    if objective < bound * (1 - 1e-6):
        status, message = "solver_error", (f"Internal inconsistency: objective {objective:.6g} is below the lower "
                                           f"bound {bound:.6g}. Please report this workload.")
    bound = min(bound, objective)
    m = workload.n_queries
    return OptimizeResult(A, norm, report.total_squared_error, _times(bound, m), status, status == "optimal",
                          message, name, raw.solver, raw.iterations, time.perf_counter() - t0,
                          float(objective), float(bound), tuple(raw.history),
                          dict(raw.extra) | ({"dual_bound": raw.dual_bound} if raw.dual_bound is not None else {}))


def _times(x: float, m: int) -> float:
    try:
        return float(x * m)
    except OverflowError:
        return float("inf")


def _initial_matrix(initial, W: Workload) -> np.ndarray:
    """A warm start as a matrix: a Strategy, an array, or the name of a baseline."""
    n = W.domain_size
    if isinstance(initial, str):
        named = {"identity": lambda: st.identity(n), "hierarchical": lambda: st.hierarchical(n),
                 "wavelet": lambda: st.wavelet(n), "svd_bound": lambda: st.singular_value_bound(W)}
        if initial == "l2_approx":
            return optimize(W, method="l2_approx").strategy.matrix
        v.check_choice(initial, name="initial", caller="optimize", choices=list(named) + ["l2_approx"])
        return named[initial]().matrix
    A = initial.matrix if isinstance(initial, Strategy) else v.check_matrix(initial, name="initial", caller="optimize")
    v.check_same_domain(n, A.shape[1], caller="optimize")
    return np.asarray(A, dtype=float)
