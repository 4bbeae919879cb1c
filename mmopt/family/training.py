"""optimize's route for private training: ``participation=`` (a schema of :mod:`mmopt.participation`).

Notation: see :mod:`mmopt.participation`. The objective is the total error at unit σ under the schema,
Δ²·tr(G X⁻¹) with Δ the schema's sensitivity (exact, or a proven upper bound; the result's ``extra`` names the
method). Gaussian noise only (the L2 sensitivity). Methods:

* "auto" / "l2_approx" under fixed epochs on any dense workload (or a stream workload) of ≤ 4,096 steps: the
  certified optimum, lower-triangular (causal) factor: for prefix sums and all ranges
  :func:`mmopt.participation.tridiagonal.solve_tridiagonal` (O(n·k²) per step), for any other Gram
  :func:`mmopt.participation.optimum.solve_fixed_epochs` (O(n³) per step);
* "banded": a banded Toeplitz strategy with at most b = min-separation bands (n/k for fixed epochs) on prefix
  sums at any n, optimised by :mod:`mmopt.toeplitz.solve`; with that many bands no pattern's cross terms survive,
  so its sensitivity is exact; "auto" beyond 4,096 steps and under minimum separation.

Anything else is refused, naming what works. ``participation=single()`` (or None) takes the ordinary routes.
"""

from __future__ import annotations

import time

from mmopt._base import validation as v
from mmopt._base.result import SUCCESS, OptimizeResult, reconcile
from mmopt.family.call import Call, check_common

CALLER = "optimize"
METHODS = ("auto", "l2_approx", "banded")


def takes(workload, method, call: Call) -> bool:
    """Every call with a schema other than single participation."""
    from mmopt.participation.schemas import Single, as_schema
    return call.participation is not None and not isinstance(as_schema(call.participation, CALLER), Single)


def _gram(workload):
    """(G, n, stream workload or None) of a dense or stream workload; others refused."""
    from mmopt.dense._workload_type import Workload
    from mmopt.toeplitz.error import StreamWorkload, as_stream_workload
    if isinstance(workload, StreamWorkload):
        return None, workload.n, workload
    if isinstance(workload, Workload):
        try:
            stream = as_stream_workload(workload, CALLER)
        except TypeError:
            stream = None
        return workload.mean_gram * workload.n_queries, workload.domain_size, stream
    raise TypeError(f"{CALLER}(participation=...) takes a dense workload or mmopt.toeplitz.prefix(n) / "
                    f"all_range(n). Got {type(workload).__name__} instead.")


def run(workload, method, call: Call) -> OptimizeResult:
    from mmopt.participation.schemas import FixedEpochs, as_schema
    t0 = time.perf_counter()
    schema = as_schema(call.participation, CALLER)
    if call.norm == "l1":
        raise ValueError(f"{CALLER}(participation={schema!r}) optimises the error under Gaussian noise (L2 "
                         "sensitivity): use Privacy(epsilon, delta > 0) or privacy=None.")
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"The 'method' parameter of {CALLER} with participation={schema!r} must be one of "
                         f"{list(METHODS)}. Got {method!r} instead.")
    check_common(call, CALLER)
    unread = [k for k, val in {"solver": call.solver, "initial": call.initial, "budget": call.budget,
                               "targets": call.targets}.items() if val is not None]
    if unread or call.objective != "total":
        raise ValueError(f"The {unread or ['objective']} parameter(s) of {CALLER} do not apply with "
                         "participation=...; it minimises the total error and reads tol, max_iterations and "
                         "options 'bands' (method='banded').")
    G, n, stream = _gram(workload)
    schema.check_n(n, CALLER)
    dense_ok = isinstance(schema, FixedEpochs) and n <= 4096
    if method == "auto":
        method = "l2_approx" if dense_ok else "banded"
    options = dict(call.options or {})
    if set(options) - ({"bands"} if method == "banded" else set()):
        raise ValueError(f"Unknown options {sorted(options)} for {CALLER}(method={method!r}, participation=...): "
                         + ("it accepts only ['bands']." if method == "banded" else "it accepts none."))
    if method == "l2_approx":
        if not dense_ok:
            raise ValueError(f"{CALLER}(method='l2_approx', participation={schema!r}) runs under fixed epochs up to "
                             f"4,096 steps. Got n={n:,}; use method='banded' (any n, exact sensitivity).")
        return _dense(G, stream, schema, call, t0, workload.n_queries)
    if stream is None or stream.kind != "prefix":
        raise ValueError(f"{CALLER}(method='banded', participation=...) runs on prefix sums "
                         "(mmopt.workload.prefix(n) or mmopt.toeplitz.prefix(n)).")
    return _banded(stream, schema, call, options.get("bands"), t0)


def _dense(G, stream, schema, call: Call, t0: float, m: int) -> OptimizeResult:
    from mmopt.dense._strategy_core import Strategy
    from mmopt.participation.optimum import solve_fixed_epochs
    from mmopt.participation.tridiagonal import solve_tridiagonal
    tol = call.tol if call.tol is not None else 1e-4
    if stream is not None:  # prefix sums / all ranges: G⁻¹ tridiagonal, O(n·k²) per step
        sol = solve_tridiagonal(stream.kind, stream.n, schema.epochs, tol=tol,
                                max_iterations=call.max_iterations or 300)
        solver = "mmopt-participation-tridiagonal"
    else:
        sol = solve_fixed_epochs(G, schema.epochs, tol=tol, max_iterations=call.max_iterations or 200)
        solver = "mmopt-participation-dual"
    status, message, lower = reconcile(sol.primal, sol.dual, sol.status, f"certified optimum under {schema!r}: "
                                       f"{sol.primal / sol.dual:.6f}× the dual bound.", tol=tol)
    extra = {"participation": repr(schema), "sensitivity_squared": sol.sensitivity.squared,
             "sensitivity_exact": sol.sensitivity.exact, "sensitivity_method": sol.sensitivity.method}
    return OptimizeResult(Strategy(sol.matrix, "participation-optimum"), "l2", sol.primal, lower, status,
                          status in SUCCESS, message, "l2_approx", solver, sol.iterations,
                          time.perf_counter() - t0, sol.primal / m, lower / m, history=sol.history, extra=extra)


def _banded(W, schema, call: Call, bands, t0: float) -> OptimizeResult:
    from mmopt.participation.bound import diagonal_bound
    from mmopt.participation.toeplitz import schema_error
    from mmopt.toeplitz.solve import optimize as toeplitz_optimize
    n = W.n
    b = schema.separation(n)
    bands = b if bands is None else v.check_int(bands, name="bands", caller=CALLER, high=b)
    res = toeplitz_optimize(W, "banded", bands=min(bands, n), max_iterations=call.max_iterations, tol=call.tol)
    error, sens = schema_error(W, res.strategy, schema)
    lower = diagonal_bound(W, schema)  # proven, O(n log n): mmopt.participation.bound
    status, message, lower = reconcile(error, lower, res.status, f"banded Toeplitz, {bands} bands ≤ b = {b}: "
                                       f"sensitivity exact ({sens.method}).")
    extra = {"participation": repr(schema), "sensitivity_squared": sens.squared, "sensitivity_exact": sens.exact,
             "sensitivity_method": sens.method, "bands": bands,
             "lower_bound_method": "diagonal bound under the schema (mmopt.participation.bound)"}
    return OptimizeResult(res.strategy, "l2", error, lower, status, status in SUCCESS, message, "banded",
                          res.solver, res.iterations, time.perf_counter() - t0, error / W.n_queries,
                          lower / W.n_queries, history=res.history, extra=extra)
