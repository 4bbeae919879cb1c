"""optimize's route into the dense family: the method registry (:mod:`mmopt.search._methods`) on the n×n Gram.

The method's strategy is re-evaluated exactly here (``objective`` is never a solver's number), and the best
certified lower bound at hand is attached: the SVD bound, raised to the diagonal bound and to the method's L2
dual bound when it computed one (since ‖A‖₁ ≥ ‖A‖₂, the L2 optimum bounds the L1 problem too).
"""

from __future__ import annotations

import time

import numpy as np

from mmopt._base import runtime as _runtime
from mmopt._base import validation as v
from mmopt._base.result import CLOSED_FORMS, GAP_TOL_METHODS, SUCCESS, OptimizeResult, gap_tol, reconcile
from mmopt._base.solution import check_raw_solution
from mmopt.dense._workload_type import Workload, not_a_workload
from mmopt.error import diagonal_bound, evaluate, svd_bound
from mmopt.family.call import Call, check_common, seed_record
from mmopt.family.routes import PRODUCT_METHODS, all_methods
from mmopt.search._methods import DEFAULT_NORM, METHODS, check_options
from mmopt.strategy import Strategy
from mmopt.structured._checks import DENSE_LIMIT

CALLER = "optimize"


def _dense(workload, method):
    """The workload as a dense one: implicit and stream workloads up to DENSE_LIMIT cells as their dense twin."""
    from mmopt.search.min_error_fast import dense_twin
    from mmopt.structured.workloads import ImplicitWorkload
    from mmopt.toeplitz.error import StreamWorkload

    if isinstance(workload, StreamWorkload):
        if method == "min_error":  # its refusal names what the O(n) search needs instead
            return dense_twin(workload, CALLER)
        if workload.n > DENSE_LIMIT:
            raise ValueError(f"{CALLER}: method={method!r} needs a dense workload, but {workload.kind}"
                             f"({workload.n:,}) has more than {DENSE_LIMIT:,} cells. Use method='auto', "
                             "'min_error' (ε-DP) or one of mmopt.toeplitz's: weighted_sqrt, toeplitz, blt, banded.")
        return workload.to_workload()
    if isinstance(workload, ImplicitWorkload):
        if workload.domain_size > DENSE_LIMIT:
            raise ValueError(f"{CALLER}: method={method!r} needs a dense workload, but '{workload.name}' is implicit "
                             f"over {workload.domain_size:,} cells. Use one of {list(PRODUCT_METHODS)}.")
        return workload.to_workload()
    if not isinstance(workload, Workload):
        raise not_a_workload(workload, name="workload", caller=CALLER)
    return workload


def run(workload, method, call: Call) -> OptimizeResult:
    """A dense method (a name of :data:`~mmopt.search._methods.METHODS`, or a callable) on the dense Gram."""
    t0 = time.perf_counter()
    workload = _dense(workload, method)
    if callable(method):
        fn, name, spec = method, getattr(method, "__name__", "custom"), None
    else:
        if method not in METHODS:  # name every method optimize takes, "auto" first, not only the dense registry's
            v.check_choice(method, name="method", caller=CALLER, choices=all_methods())
        name = v.check_choice(method, name="method", caller=CALLER, choices=METHODS)
        spec = METHODS[name]
        fn = spec.fn
    norm = v.check_choice(call.norm or DEFAULT_NORM.get(name, "l1"), name="norm", caller=CALLER,
                          choices=("l1", "l2"))
    opts = check_options(call.options, spec, name)
    given = {"solver": call.solver, "tol": call.tol, "max_iterations": call.max_iterations, "initial": call.initial}
    if spec is not None and (unread := [k for k, val in given.items() if val is not None and k not in spec.reads]):
        reads = sorted(spec.reads | {"seed"})
        raise ValueError(f"The {unread} parameter(s) of {CALLER} do not apply to method={name!r}, which reads only "
                         f"{reads}. Drop them, or choose a method that uses them.")
    n_jobs = check_common(call, CALLER)
    threads = _runtime.check_blas_threads(call.blas_threads, caller=CALLER,
                                          auto=spec.blas_threads if spec else None)
    solver = call.solver
    if solver is not None:
        from mmopt.solvers import choose
        solver = choose(solver)
    opts.update(solver=solver, tol=call.tol, max_iterations=call.max_iterations, seed=call.seed,
                verbose=call.verbose is not False, initial=call.initial, norm=norm, n_jobs=n_jobs)

    # Methods see G scaled to mean diagonal 1: argmins are scale-free and solvers like unit-sized data.
    G = workload.mean_gram / (np.trace(workload.mean_gram) / workload.domain_size)
    say = _runtime.LOGGER.info if call.verbose is not False else _runtime.LOGGER.debug
    with _runtime.progress(call.verbose), _runtime.blas_threads(threads):
        say("optimize: method %r on %s (n = %d)", name, workload.name, workload.domain_size)
        raw = check_raw_solution(fn(workload, G, opts), name, CALLER)
        A = Strategy(raw.matrix, name) if raw.matrix is not None else Strategy.from_gram(raw.gram, name=name)
        report = evaluate(workload, A, norm=norm, per_query=False)
        objective = report.mean_squared_error  # per query: finite for every m; totals are derived at the end
        # the strongest certified bound at hand: the diagonal bound Σ ((WᵀW)^{1/2})ᵢᵢ² is never below the SVD bound
        # (Cauchy–Schwarz) and costs nothing more (same cached eigendecomposition; mmopt.error.diagonal_bound)
        bound = max(svd_bound(workload, per_query=True), diagonal_bound(workload, per_query=True))
        unscale = np.trace(workload.mean_gram) / workload.domain_size  # the normalised G's scale back to W's
        if raw.dual_bound is not None and raw.extra.get("dual_bound_norm", "l2") in ("l2", norm):
            # an L2 dual bound holds for L1 too (‖A‖₁ ≥ ‖A‖₂)
            bound = max(bound, float(raw.dual_bound) * unscale)
        status, message, bound = reconcile(objective, bound, raw.status, raw.message, closed=name in CLOSED_FORMS,
                                           tol=gap_tol(name, norm, call.tol))
        if status == "local_optimum" and raw.status == "optimal" and name in GAP_TOL_METHODS and norm == "l2":
            # a convex program whose solver said optimal but whose certificate misses tol is an inaccurate solve,
            # not a local optimum (there are none): SCS at tol = 10⁻³ stopped 3 % above the optimum, reported a
            # success (a helper's audit; SCS reads tol as its residual tolerance, not as the gap)
            status = "optimal_inaccurate"
            message = (f"{message} The solver stopped short of the requested gap: pass a smaller tol (or another "
                       "solver) for a certified optimum.")
        # the status reported, not the search's own: "optimal" only beside its certificate (reconcile)
        say("optimize: %s, objective %.6g, %.1f s", status, report.total_squared_error, time.perf_counter() - t0)
    m = workload.n_queries
    return OptimizeResult(A, norm, report.total_squared_error, _times(bound, m), status, status in SUCCESS,
                          message, name, raw.solver, raw.iterations, time.perf_counter() - t0,
                          float(objective), float(bound), tuple(raw.history),
                          _extra(raw, _times(unscale, m)) | {"seed": seed_record(call.seed)})


def _extra(raw, scale: float) -> dict:
    """The method's extra with its objective and dual bound on the workload's scale (totals, as ``objective`` and
    ``lower_bound``): they were the normalised G's, 8.5× below lower_bound on prefix(16) (a newcomer's audit)."""
    out = dict(raw.extra)
    if raw.dual_bound is not None:
        out["dual_bound"] = float(raw.dual_bound) * scale
    if isinstance(out.get("objective"), float | int) and not isinstance(out["objective"], bool):
        out["objective"] = float(out["objective"]) * scale
    return out


def _times(x: float, m: int) -> float:
    """x·m as a float, inf past float64 (m = 2¹⁰²⁴ − 1 all-predicate queries at n = 1,024 raised OverflowError)."""
    try:
        return float(x * m)
    except OverflowError:
        return float("inf")
