"""optimize's route for private training: ``participation=`` (a schema of :mod:`mmopt.participation`).

Notation: see :mod:`mmopt.participation`. The objective is the total error at unit σ under the schema,
Δ²·tr(G X⁻¹) with Δ the schema's sensitivity (exact, or a proven upper bound; the result's ``extra`` names the
method). Gaussian noise only (the L2 sensitivity). Methods:

* "auto" / "l2_approx" under fixed epochs on any dense workload (or a stream workload) of ≤ 4,096 steps: the
  certified optimum, lower-triangular (causal) factor: for prefix sums and all ranges
  :func:`mmopt.participation.tridiagonal.solve_tridiagonal` (O(n·k²) per step; also Toeplitz workloads whose
  inverse is banded, momentum: :mod:`mmopt.participation.banded_inverse`), for any other Gram
  :func:`mmopt.participation.optimum.solve_fixed_epochs` (O(n³) per step);
* "auto" / "l2_approx" under ``min_separation(n/k, k)`` on a dense workload (or prefix sums) of ≤ 2,048 steps:
  :func:`mmopt.participation.cutting.solve_min_separation`, cutting planes over patterns whose working-set dual
  is a certified lower bound for the whole schema (option ``seconds``: a CPU budget, default 100, 50 on prefix
  sums); on prefix sums the banded Toeplitz strategy is run too, the free banded strategy of
  :mod:`mmopt.participation.free_banded` (option ``free_banded_seconds``, default 15; 0 skips it) and from it the
  strategy with 2b bands of :mod:`mmopt.participation.chain_banded` (``chain_banded_seconds``, default 45; 0
  skips it), and the best one returned, with the better bound;
* "banded": a banded Toeplitz strategy with at most b = min-separation bands (n/k for fixed epochs) on prefix
  sums at any n, optimised by :mod:`mmopt.toeplitz.solve`; with that many bands no pattern's cross terms survive,
  so its sensitivity is exact; when n = k·b, also the row-weighted one of :mod:`mmopt.participation.weighted`,
  and the better returned; "auto" beyond 4,096 steps (2,048 under minimum separation).

* a lower-triangular Toeplitz workload (momentum, :mod:`mmopt.participation.workloads`): "banded" runs
  :func:`mmopt.participation.banded.optimize_banded` (≤ b bands, exact sensitivity), bounded by the pinching bound
  of the dense Gram; learning-rate schedules (semiseparable, not Toeplitz) take the certified optimum only.

Objectives (:mod:`mmopt.participation.objectives`): ``objective="max_variance"`` (fixed epochs, ≤ 4,096 steps) the
largest per-step variance, certified by the minimax dual; ``objective="last_iterate"`` the final step's error, whose
optimum is a closed form under every schema (single participation included).

Anything else is refused, naming what works. ``participation=single()`` (or None) takes the ordinary routes.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from mmopt._base import validation as v
from mmopt._base.result import SUCCESS, OptimizeResult, reconcile
from mmopt.family.call import Call, check_common

CALLER = "optimize"
#: Toeplitz workloads with a banded inverse take the O(n·k²) solver from this n; below it the dense one is fast and
#: closes the gap further (momentum β = 0.9, n = 256, k = 4 / 8: 1.00001 / 1.00002 dense, 1.00005 / 1.00029 banded)
BANDED_INVERSE_FROM = 1024
METHODS = ("auto", "l2_approx", "banded")
OBJECTIVES = ("total", "max_variance", "last_iterate")
SECONDS = 100.0  # the cutting planes' default CPU budget under minimum separation
SECONDS_PREFIX = 50.0  # on prefix sums, where the free and 2b-band strategies follow: 50 + 15 + 45 CPU s in all
FREE_BANDED_SECONDS = 15.0  # the free banded strategy's CPU budget there (option free_banded_seconds; 0: not run)
CHAIN_BANDED_SECONDS = 45.0  # then the 2b-band strategy's from it (option chain_banded_seconds; 0: not run)


def takes(workload, method, call: Call) -> bool:
    """Every call with a schema other than single participation."""
    from mmopt.participation.schemas import Single, as_schema
    if call.objective == "last_iterate":
        return True
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
    objective_methods = ("max_variance", "last_iterate") if call.objective != "total" else ()
    if not isinstance(method, str) or method not in METHODS + objective_methods:
        raise ValueError(f"The 'method' parameter of {CALLER} with participation={schema!r} must be one of "
                         f"{list(METHODS + objective_methods)}. Got {method!r} instead.")
    check_common(call, CALLER)
    unread = [k for k, val in {"solver": call.solver, "initial": call.initial, "budget": call.budget,
                               "targets": call.targets}.items() if val is not None]
    if unread:
        raise ValueError(f"The {unread} parameter(s) of {CALLER} do not apply with participation=...; it reads "
                         "objective, tol, max_iterations and options 'bands' (method='banded').")
    if call.objective not in OBJECTIVES:
        raise ValueError(f"The 'objective' parameter of {CALLER} with participation={schema!r} must be one of "
                         f"{list(OBJECTIVES)}. Got {call.objective!r} instead.")
    G, n, stream = _gram(workload)
    schema.check_n(n, CALLER)
    if call.objective != "total":
        from mmopt.family.training_objectives import run_objective
        return run_objective(workload, stream, schema, method, call, t0)
    dense_ok = (isinstance(schema, FixedEpochs) and n <= 4096) or _cutting_ok(schema, n, stream, G)
    if method == "auto":
        method = "l2_approx" if dense_ok else "banded"
    options = dict(call.options or {})
    allowed = {"bands"} if method == "banded" else ({"seconds", "free_banded_seconds", "chain_banded_seconds"}
                                                     if not isinstance(schema, FixedEpochs) else set())
    if set(options) - allowed:
        raise ValueError(f"Unknown options {sorted(options)} for {CALLER}(method={method!r}, participation=...): "
                         + (f"it accepts only {sorted(allowed)}." if allowed else "it accepts none."))
    if method == "l2_approx":
        if not dense_ok:
            raise ValueError(f"{CALLER}(method='l2_approx', participation={schema!r}) runs under fixed epochs up to "
                             f"4,096 steps, and under min_separation(n/k, k) up to 2,048 steps. Got n={n:,}; use "
                             "method='banded' (any n, exact sensitivity).")
        if not isinstance(schema, FixedEpochs):
            return _cutting(workload, G, stream, schema, call, t0)
        return _dense(G, stream, schema, call, t0, workload.n_queries, workload)
    if stream is None or stream.kind != "prefix":
        from mmopt.participation.workloads import toeplitz_coefficients
        if (a := toeplitz_coefficients(workload)) is not None:
            return _banded_toeplitz(workload, a, schema, call, options.get("bands"), t0)
        raise ValueError(f"{CALLER}(method='banded', participation=...) runs on prefix sums "
                         "(mmopt.workload.prefix(n) or mmopt.toeplitz.prefix(n)) and lower-triangular Toeplitz "
                         "workloads (mmopt.participation.momentum). Got a workload of another structure: use "
                         "fixed_epochs(k) with method='l2_approx' (≤ 4,096 steps).")
    return _banded(stream, schema, call, options.get("bands"), t0)


def _dense(G, stream, schema, call: Call, t0: float, m: int, workload=None) -> OptimizeResult:
    from mmopt.dense._strategy_core import Strategy
    from mmopt.participation.banded_inverse import of_toeplitz, toeplitz_gram
    from mmopt.participation.optimum import solve_fixed_epochs
    from mmopt.participation.tridiagonal import solve_tridiagonal
    from mmopt.participation.workloads import toeplitz_coefficients
    tol = call.tol if call.tol is not None else 1e-4
    a = None if stream is not None else toeplitz_coefficients(workload)
    spec = None if a is None else of_toeplitz(a)
    n, k = G.shape[0] if stream is None else stream.n, schema.epochs
    if stream is not None or (spec is not None and n // k >= spec.width and n >= BANDED_INVERSE_FROM):
        # prefix sums / all ranges (G⁻¹ tridiagonal) or a Toeplitz workload with a banded inverse (momentum:
        # pentadiagonal): O(n·k²·w) per step
        sol = solve_tridiagonal(stream.kind if stream is not None else spec, n, k, tol=tol,
                                max_iterations=call.max_iterations or 300)
        solver = "mmopt-participation-tridiagonal"
    else:
        sol = solve_fixed_epochs(G, k, tol=tol, max_iterations=call.max_iterations or 200,
                                 # m → T(a[:m])'s Gram (momentum(m, β) for momentum(n, β)): a warm start from n/2
                                 coarse=None if a is None else functools.partial(toeplitz_gram, a))
        solver = "mmopt-participation-dual"
    status, message, lower = reconcile(sol.primal, sol.dual, sol.status, f"certified optimum under {schema!r}: "
                                       f"{sol.primal / sol.dual:.6f}× the dual bound.", tol=tol)
    extra = {"participation": repr(schema), "sensitivity_squared": sol.sensitivity.squared,
             "sensitivity_exact": sol.sensitivity.exact, "sensitivity_method": sol.sensitivity.method}
    return OptimizeResult(Strategy(sol.matrix, "participation-optimum"), "l2", sol.primal, lower, status,
                          status in SUCCESS, message, "l2_approx", solver, sol.iterations,
                          time.perf_counter() - t0, sol.primal / m, lower / m, history=sol.history, extra=extra)


def _cutting_ok(schema, n: int, stream, G) -> bool:
    """min_separation(n/k, k) on ≤ 2,048 steps, a dense Gram or prefix sums: the cutting planes."""
    from mmopt.participation.cutting import MAX_N
    from mmopt.participation.schemas import MinSeparation
    if not isinstance(schema, MinSeparation) or n > MAX_N or n % schema.separation_steps:
        return False
    return n // schema.separation_steps == schema.max_participations and (G is not None or stream.kind == "prefix")


def _cutting(workload, G, stream, schema, call: Call, t0: float) -> OptimizeResult:
    """min_separation(n/k, k): the cutting planes' certified optimum, and the banded Toeplitz strategy (exact
    sensitivity) for prefix sums and Toeplitz workloads; the better strategy, the better of the two bounds."""
    from mmopt.dense._strategy_core import Strategy
    from mmopt.participation.cutting import solve_min_separation
    from mmopt.participation.workloads import toeplitz_coefficients
    tol = call.tol if call.tol is not None else 1e-2
    prefix = stream is not None and stream.kind == "prefix"
    n = stream.n if prefix else G.shape[0]
    sol = solve_min_separation(n if prefix else G, schema.separation_steps, schema.max_participations, tol=tol,
                               max_rounds=call.max_iterations or 40,
                               seconds=(call.options or {}).get("seconds", SECONDS_PREFIX if prefix else SECONDS))
    sens = sol.sensitivity
    primal, lower, strategy = sol.primal, sol.dual, Strategy(sol.matrix, "participation-optimum")
    solver, bound_method = "mmopt-participation-cutting-planes", ("dual of the working set's program "
                                                                   "(mmopt.participation.cutting)")
    extra = {"participation": repr(schema), "sensitivity_squared": sens.squared, "sensitivity_exact": sens.exact,
             "sensitivity_method": sens.method, "cutting_planes_primal": sol.primal, "cutting_planes_dual": sol.dual,
             "cutting_planes_status": sol.status}
    a = None if prefix else toeplitz_coefficients(workload)
    if prefix or a is not None:
        band = (_banded(stream, schema, call, None, t0) if prefix else
                _banded_toeplitz(workload, a, schema, call, None, t0))
        if band.lower_bound > lower:
            lower, bound_method = band.lower_bound, band.extra["lower_bound_method"]
        if band.objective < primal:
            primal, strategy, solver = band.objective, band.strategy, f"{band.solver} (banded; beat the cutting planes)"
            extra |= {key: band.extra[key] for key in ("sensitivity_squared", "sensitivity_exact",
                                                       "sensitivity_method", "bands")}
    if prefix:
        # the primal side of the certificate: the free banded strategy (every entry of the b bands and the column
        # norms free, exact sensitivity), then 2b bands from it (n = 1,024, k = 4, in 115 CPU s all told: 39,603
        # and 39,206 against the cutting planes' 40,976 and their certified bound 38,911)
        from mmopt.participation.chain_banded import chain_banded
        from mmopt.participation.free_banded import free_banded
        budget = {key: v.check_real((call.options or {}).get(key, default), name=f"options['{key}']", caller=CALLER,
                                    low=0.0)
                  for key, default in (("free_banded_seconds", FREE_BANDED_SECONDS),
                                       ("chain_banded_seconds", CHAIN_BANDED_SECONDS))}
        k = schema.max_participations
        free = free_banded(n, k, seconds=budget["free_banded_seconds"]) if budget["free_banded_seconds"] else None
        if free is not None:
            extra["free_banded_error"] = free.error
            if free.error < primal:
                primal, strategy = free.error, Strategy(free.matrix, "free-banded")
                solver = "L-BFGS-B (mmopt.participation.free_banded; beat the cutting planes)"
                extra |= {"sensitivity_squared": 1.0, "sensitivity_exact": True,
                          "sensitivity_method": free.sensitivity.method, "bands": n // k}
        if budget["chain_banded_seconds"]:
            # 2b bands, from the free band: the optimum under the whole schema is not banded (chain_banded's
            # docstring); its Δ² is the chain's, exact when X ≥ 0 on the worst pattern, else an upper bound
            chain = chain_banded(n, k, start=None if free is None else free.matrix,
                                 seconds=budget["chain_banded_seconds"])
            extra["chain_banded_error"] = chain.error
            if chain.error < primal:
                primal, strategy = chain.error, Strategy(chain.matrix, "chain-banded")
                solver = "L-BFGS-B (mmopt.participation.chain_banded; beat the cutting planes)"
                extra |= {"sensitivity_squared": chain.sensitivity.squared,
                          "sensitivity_exact": chain.sensitivity.exact,
                          "sensitivity_method": chain.sensitivity.method, "bands": 2 * n // k}
    extra["lower_bound_method"] = bound_method
    status = "optimal" if primal <= (1 + tol) * lower else "user_limit"
    status, message, lower = reconcile(primal, lower, status, f"cutting planes over patterns under {schema!r}: "
                                       f"{primal / lower:.6f}× the certified lower bound after "
                                       f"{len(sol.history) - 1} rounds.", tol=tol)
    m = workload.n_queries
    return OptimizeResult(strategy, "l2", primal, lower, status, status in SUCCESS, message, "l2_approx", solver,
                          sol.iterations, time.perf_counter() - t0, primal / m, lower / m, history=sol.history,
                          extra=extra)


def _banded(W, schema, call: Call, bands, t0: float) -> OptimizeResult:
    from mmopt.participation.bound import diagonal_bound
    from mmopt.participation.schemas import FixedEpochs
    from mmopt.participation.toeplitz import schema_error
    from mmopt.participation.weighted import weighted_banded
    from mmopt.toeplitz.solve import optimize as toeplitz_optimize
    n = W.n
    b = schema.separation(n)
    bands = b if bands is None else v.check_int(bands, name="bands", caller=CALLER, high=b)
    res = toeplitz_optimize(W, "banded", bands=min(bands, n), max_iterations=call.max_iterations, tol=call.tol)
    error, sens = schema_error(W, res.strategy, schema)
    strategy, raw, solver, history, kind = res.strategy, res.status, res.solver, res.history, "banded Toeplitz"
    k = schema.epochs if isinstance(schema, FixedEpochs) else getattr(schema, "max_participations", None)
    if k is not None and n == k * b and bands < n:
        # the k epochs' row weights (mmopt.participation.weighted): still ≤ b bands, so the sensitivity stays exact
        # under either schema; kept only when its exact error is lower (n = 2¹⁶, k = 16: 3.1 % under fixed epochs,
        # 1.5 % under minimum separation)
        C = weighted_banded(n, k, bands=bands)
        weighted_error, weighted_sens = schema_error(W, C, schema)
        if weighted_error < error:
            strategy, error, sens, history = C, weighted_error, weighted_sens, None
            raw, solver = "local_optimum", "L-BFGS-B (mmopt.participation.weighted)"
            kind = "row-weighted banded Toeplitz"
    lower = diagonal_bound(W, schema)  # proven, O(n log n): mmopt.participation.bound
    status, message, lower = reconcile(error, lower, raw, f"{kind}, {bands} bands ≤ b = {b}: "
                                       f"sensitivity exact ({sens.method}).")
    extra = {"participation": repr(schema), "sensitivity_squared": sens.squared, "sensitivity_exact": sens.exact,
             "sensitivity_method": sens.method, "bands": bands,
             "lower_bound_method": "diagonal bound under the schema (mmopt.participation.bound)"}
    return OptimizeResult(strategy, "l2", error, lower, status, status in SUCCESS, message, "banded",
                          solver, res.iterations, time.perf_counter() - t0, error / W.n_queries,
                          lower / W.n_queries, history=history, extra=extra)


def _banded_toeplitz(workload, a, schema, call: Call, bands, t0: float) -> OptimizeResult:
    """A Toeplitz workload T(a) (momentum): :func:`mmopt.participation.banded.optimize_banded`."""
    from mmopt.participation.banded import dense_diagonal_bound, optimize_banded
    from mmopt.participation.toeplitz import toeplitz_sensitivity_squared
    from mmopt.toeplitz import _series
    n = len(a)
    C, raw, iterations = optimize_banded(a, schema, bands=bands, max_iterations=call.max_iterations or 1000,
                                         tol=call.tol or 1e-12)
    sens = toeplitz_sensitivity_squared(C, schema)
    # W C⁻¹ = T(h)·D⁻¹ (h = a·(1/c)): column j holds h_0 … h_{n−1−j} over d_j, so the error is exact,
    # Σ_j E_{n−1−j}/y_j with E = cumsum(h²) (y = 1 unscaled)
    h = _series.convolve(a, C.inverse_column(), n)
    y = np.ones(n) if C.row_scale is None else C.row_scale
    error = float(np.cumsum(h * h)[::-1] @ (1.0 / y)) * sens.squared
    lower = dense_diagonal_bound(workload.mean_gram * workload.n_queries, schema)
    B = len(C.coefficients)
    status, message, lower = reconcile(error, lower, raw, f"banded Toeplitz, {B} bands ≤ b = {schema.separation(n)} "
                                       f"on the Toeplitz workload: sensitivity exact ({sens.method}).")
    extra = {"participation": repr(schema), "sensitivity_squared": sens.squared, "sensitivity_exact": sens.exact,
             "sensitivity_method": sens.method, "bands": B,
             "lower_bound_method": "pinching bound of the dense Gram (mmopt.participation.banded)"}
    return OptimizeResult(C, "l2", error, lower, status, status in SUCCESS, message, "banded", "L-BFGS-B",
                          iterations, time.perf_counter() - t0, error / workload.n_queries,
                          lower / workload.n_queries, extra=extra)

