"""optimize's route for private training: ``participation=`` (a schema of :mod:`mmopt.participation`).

Notation: see :mod:`mmopt.participation`. The objective is the total error at unit σ under the schema,
Δ²·tr(G X⁻¹) with Δ the schema's sensitivity (exact, or a proven upper bound; the result's ``extra`` names the
method). Gaussian noise only (the L2 sensitivity). Methods:

* "auto" / "l2_approx" under fixed epochs on any dense workload (or a stream workload) of ≤ 4,096 steps: the
  certified optimum, lower-triangular (causal) factor: for prefix sums and all ranges
  :func:`mmopt.participation.tridiagonal.solve_tridiagonal` (O(n·k²) per step; also Toeplitz workloads whose
  inverse is banded, momentum: :mod:`mmopt.participation.banded_inverse`), for any other Gram
  :func:`mmopt.participation.optimum.solve_fixed_epochs` (O(n³) per step);
* "auto" / "l2_approx" under ``min_separation(b, k)`` with k·b < n (reshuffled epochs: b = 1) on a dense workload or
  prefix sums of ≤ 2,048 steps: the cutting planes alone from every run of k steps b apart (option ``seconds``,
  default 60), beside the b-band strategy (:func:`mmopt.family.training_separation.run_general`);
* "auto" / "l2_approx" under ``min_separation(n/k, k)`` on a dense workload of ≤ 2,048 steps or prefix sums of
  ≤ 4,096 (:mod:`mmopt.family.training_separation`): :func:`mmopt.participation.cutting.solve_min_separation`, cutting
  planes over patterns whose working-set dual is a certified lower bound for the whole schema (option
  ``seconds``: a CPU budget, default 70; on prefix sums 20 up to 512 steps and 0, not run, past them), then the
  chain dual of :mod:`mmopt.participation.chain_dual` (``chain_dual_seconds``, default 30, 15 from 2,048 steps on
  prefix sums; 0 skips it), the better
  bound kept; on prefix sums the banded Toeplitz strategy is run too, the free banded strategy of
  :mod:`mmopt.participation.free_banded` (``free_banded_seconds``, default 15 below 2,048 steps when the chain
  dual did not run, else 0; 0 skips it) and the strategy with 2b bands of :mod:`mmopt.participation.chain_banded`
  from the chain dual's Lagrangian start (:func:`mmopt.participation.chain_dual.lagrangian_start`; else from the
  free band) (``chain_banded_seconds``, default what the others left of 110 CPU s and at least 45; 0 skips it;
  from 2,048 steps coarse to fine from the dual's start at n/2, :mod:`mmopt.participation.chain_levels`), and the
  best one returned; from 2,048 steps on prefix sums the chain dual is solved to 1,024 steps and certified at n
  (its lifted bound), and past 2,048 the 2b bands' finest level is carried from n/2, not refined (a step costs too
  much there), then equalised and given one relative step (:mod:`mmopt.participation.equalise`);
* "banded": a banded Toeplitz strategy with at most b = min-separation bands (n/k for fixed epochs) on prefix
  sums at any n, optimised by :mod:`mmopt.toeplitz.solve`; with that many bands no pattern's cross terms survive,
  so its sensitivity is exact; when n = k·b, also the row-weighted one of :mod:`mmopt.participation.weighted`,
  and the better returned; "auto" beyond 4,096 steps (under minimum separation 2,048 on a dense workload).

* a lower-triangular Toeplitz workload (momentum, :mod:`mmopt.participation.workloads`): "banded" runs
  :func:`mmopt.participation.banded.optimize_banded` (≤ b bands, exact sensitivity), bounded by the pinching bound
  of the dense Gram; learning-rate schedules (semiseparable, not Toeplitz) take the certified optimum only.

Objectives (:mod:`mmopt.participation.objectives`): ``objective="max_variance"`` (fixed epochs, ≤ 4,096 steps) the
largest per-step variance, certified by the minimax dual; ``objective="last_iterate"`` the final step's error, whose
optimum is a closed form under every schema (single participation included).

Anything else is refused, naming what works. ``participation=single()`` (or None) takes the ordinary routes;
with ``single()`` a dense strategy comes back as the causal factor of its X = AᵀA (:func:`causal_single`).
"""

from __future__ import annotations

import dataclasses
import functools
import time

from mmopt._base.result import SUCCESS, OptimizeResult, reconcile
from mmopt.family.call import Call, check_common
from mmopt.family.training_banded import run_banded, run_banded_toeplitz
from mmopt.family.training_separation import run_separation, takes_separation

CALLER = "optimize"
#: Toeplitz workloads with a banded inverse take the O(n·k²) solver from this n; below it the dense one is fast and
#: closes the gap further (momentum β = 0.9, n = 256, k = 4 / 8: 1.00001 / 1.00002 dense, 1.00005 / 1.00029 banded)
BANDED_INVERSE_FROM = 1024
METHODS = ("auto", "l2_approx", "banded")
#: options of the minimum-separation route (:mod:`mmopt.family.training_separation`): CPU seconds of its searches
SEPARATION_BUDGETS = frozenset({"seconds", "chain_dual_seconds", "free_banded_seconds", "chain_banded_seconds"})
OBJECTIVES = ("total", "max_variance", "last_iterate")


def takes(workload, method, call: Call) -> bool:
    """Every call with a schema other than single participation, and single participation's method="banded" on
    a lower-triangular Toeplitz workload (momentum), which the ordinary banded route (prefix sums and all ranges
    only) refused: it is fixed_epochs(1)'s banded strategy."""
    from mmopt.participation.schemas import Single, as_schema
    if call.objective == "last_iterate":
        return True
    if call.participation is None:
        return False
    if not isinstance(as_schema(call.participation, CALLER), Single):
        return True
    return method == "banded" and _toeplitz_not_stream(workload)


def _toeplitz_not_stream(workload) -> bool:
    from mmopt.dense._workload_type import Workload
    from mmopt.participation.workloads import toeplitz_coefficients
    from mmopt.toeplitz.error import as_stream_workload
    if not isinstance(workload, Workload) or toeplitz_coefficients(workload) is None:
        return False
    try:
        as_stream_workload(workload, CALLER)
    except TypeError:
        return True
    return False


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


def _stream_gram(G, stream, schema):
    """G, or all ranges' dense Gram (O(n²) memory) when the minimum-separation route's cutting planes need one:
    mmopt.toeplitz.all_range(64) under min_separation(16, 4) took the banded strategy alone (1.086× the bound),
    where the dense all_range(64) reached 1.010×. Prefix sums have routes of their own."""
    from mmopt.participation import cutting
    from mmopt.participation.schemas import MinSeparation
    if G is None and stream.kind == "all_range" and isinstance(schema, MinSeparation) and stream.n <= cutting.MAX_N:
        from mmopt.dense import gram_operator
        return gram_operator.all_range_gram(stream.n).dense()
    return G


def causal_single(res: OptimizeResult, participation) -> OptimizeResult:
    """``participation=single()`` takes the ordinary routes, whose dense strategies need not be causal (the L2
    optimum's square root is symmetric: run_privacy refused it, and fixed_epochs(1), the same schema, returned a
    causal factor). Training releases C⁻¹z step by step, so return the causal factor of the same X = AᵀA: the same
    error and the same Δ² (max diag X). Kept as is when X is singular (no invertible factor) or not dense."""
    import numpy as np

    from mmopt.dense._strategy_core import Strategy
    from mmopt.participation.optimum import MAX_N, causal_factor
    from mmopt.participation.schemas import Single, as_schema
    if not isinstance(as_schema(participation, CALLER), Single):
        return res
    from mmopt.toeplitz.strategies import ToeplitzStrategy
    if isinstance(res.strategy, ToeplitzStrategy):  # C = D·T(c), c₀ ≠ 0: lower-triangular and invertible as built
        return dataclasses.replace(res, extra=dict(res.extra) | {"causal_factor": True})
    A = getattr(res.strategy, "matrix", None)
    if type(res.strategy) is not Strategy or not isinstance(A, np.ndarray) or A.ndim != 2 or A.shape[1] > MAX_N:
        return _not_causal(res, f"a {type(res.strategy).__name__}, not a dense matrix of at most {MAX_N:,} columns")
    if A.shape[0] == A.shape[1] and not np.any(np.triu(A, 1)):
        return dataclasses.replace(res, extra=dict(res.extra) | {"causal_factor": True})
    try:
        C = causal_factor(A.T @ A)
    except np.linalg.LinAlgError:
        return _not_causal(res, "X = AᵀA is singular (W lacks full column rank), so no invertible factor exists")
    return dataclasses.replace(res, strategy=Strategy(C, res.strategy.name),
                               extra=dict(res.extra) | {"causal_factor": True})


def _not_causal(res: OptimizeResult, why: str) -> OptimizeResult:
    """Kept as is, and said so: run_privacy refused it later with "the strategies of optimize(..., participation=...)
    are lower-triangular", which this result contradicted without a word (an auditor's probe)."""
    note = (f" Not a causal factor for training ({why}): run_privacy and the streamed noise need a square "
            "lower-triangular C; use it to answer the workload, or stack a small identity onto W for a factor.")
    return dataclasses.replace(res, message=res.message + note, extra=dict(res.extra) | {"causal_factor": False})


def _check_full_rank(G, schema) -> None:
    """The dense routes factor X = CᵀC, C causal and invertible, which exists only when G = WᵀW is positive
    definite: refuse a W without full column rank (a LinAlgError deep in the solver before), naming the remedy."""
    import numpy as np
    n = G.shape[0]
    margin = n * np.finfo(float).eps * float(np.trace(G))  # ≥ Cholesky's backward error on G
    try:
        np.linalg.cholesky(G - margin * np.eye(n))
    except np.linalg.LinAlgError:
        rank = int(np.sum(np.linalg.eigvalsh(G) > margin))
        raise ValueError(f"{CALLER}(participation={schema!r}) needs a workload of full column rank (WᵀW positive "
                         f"definite, so that the strategy is causal and invertible). Got numerical rank {rank} of "
                         f"n = {n}. Stack a small identity onto it: mmopt.workload.stack([W, "
                         f"mmopt.workload.identity({n})], weights=[1.0, 1e-3]).") from None


def run(workload, method, call: Call) -> OptimizeResult:
    from mmopt.participation.schemas import FixedEpochs, MinSeparation, as_schema
    t0 = time.perf_counter()
    schema = as_schema(call.participation, CALLER)
    objective_methods = ("max_variance", "last_iterate") if call.objective != "total" else ()
    if not isinstance(method, str) or method not in METHODS + objective_methods:
        raise ValueError(f"The 'method' parameter of {CALLER} with participation={schema!r} must be one of "
                         f"{list(METHODS + objective_methods)}. Got {method!r} instead.")
    check_common(call, CALLER)
    if call.options is not None and not isinstance(call.options, dict):  # 'x', 5 and a list of pairs failed deep
        raise TypeError(f"The 'options' parameter of {CALLER} must be a dict or None. Got "
                        f"{type(call.options).__name__} instead, e.g. options={{'seconds': 30}}.")
    unread = [k for k, val in {"solver": call.solver, "initial": call.initial, "budget": call.budget,
                               "targets": call.targets}.items() if val is not None]
    if unread:
        raise ValueError(f"The {unread} parameter(s) of {CALLER} do not apply with participation=...; it reads "
                         "objective, tol, max_iterations and options 'bands' (method='banded').")
    if call.objective not in OBJECTIVES:
        raise ValueError(f"The 'objective' parameter of {CALLER} with participation={schema!r} must be one of "
                         f"{list(OBJECTIVES)}. Got {call.objective!r} instead.")
    G, n, stream = _gram(workload)
    schema.check_n(n, CALLER, name="workload")  # optimize has no 'n': the steps are the workload's columns
    if isinstance(schema, MinSeparation) and (k := schema.participations(n)) < schema.max_participations:
        # at most ⌈n/b⌉ steps b apart fit in n: min_separation(8, 3) at 16 steps is min_separation(8, 2), but the
        # routes chose by k: the banded fallback (6 % worse, local_optimum) on prefix sums, a refusal elsewhere
        res = run(workload, method, dataclasses.replace(call, participation=MinSeparation(schema.separation_steps, k)))
        return dataclasses.replace(res, extra=dict(res.extra) | {"participation": repr(schema)})
    G = _stream_gram(G, stream, schema)
    if schema.participations(n) == 1 and not isinstance(schema, FixedEpochs):
        # k = 1, or b ≥ n: one step per record whatever the schema says, so its certified route (fixed_epochs(1));
        # min_separation(1, 1) took the banded heuristic capped at one band: 36 on prefix(8) against 17.87
        # (the minimum-separation search's time budgets are accepted unused: that search has nothing to do)
        kept = {k: val for k, val in (call.options or {}).items() if k not in SEPARATION_BUDGETS} or None
        res = run(workload, method, dataclasses.replace(call, participation=FixedEpochs(1), options=kept))
        return dataclasses.replace(res, extra=dict(res.extra) | {"participation": repr(schema)})
    if G is not None and stream is None and call.objective != "last_iterate":  # (its one-row strategy needs no
        _check_full_rank(G, schema)  # inverse; the identity stacked on, as the refusal advised, became its last row)
    if call.objective != "total":
        from mmopt.family.training_objectives import run_objective
        return run_objective(workload, stream, schema, method, call, t0)
    dense_ok = (isinstance(schema, FixedEpochs) and n <= 4096) or takes_separation(schema, n, stream, G)
    picked = method == "auto"
    if picked:
        method = "l2_approx" if dense_ok else "banded"
    options = dict(call.options or {})
    allowed = {"bands"} if method == "banded" else set() if isinstance(schema, FixedEpochs) else SEPARATION_BUDGETS
    if set(options) - allowed:
        how = f"method='auto' (which picked {method!r} at n = {n:,})" if picked else f"method={method!r}"
        raise ValueError(f"Unknown options {sorted(options)} for {CALLER}({how}, participation=...): "
                         + (f"it accepts only {sorted(allowed)}." if allowed else "it accepts none.")
                         + (" The budgets of the minimum-separation route apply up to 2,048 steps (4,096 on "
                            "prefix sums when n = k·b)."
                            if picked and method == "banded" and not isinstance(schema, FixedEpochs) else ""))
    if method == "l2_approx":
        if not dense_ok:
            raise ValueError(f"{CALLER}(method='l2_approx', participation={schema!r}) runs under fixed epochs up to "
                             f"4,096 steps, and under min_separation(b, k) up to 2,048 steps (4,096 on prefix "
                             f"sums with b = n/k). Got n={n:,}; use "
                             "method='banded' (any n, exact sensitivity).")
        if not isinstance(schema, FixedEpochs):
            return run_separation(workload, G, stream, schema, call, t0)
        return _dense(G, stream, schema, call, t0, workload.n_queries, workload)
    if stream is None:
        from mmopt.participation.workloads import toeplitz_coefficients
        if (a := toeplitz_coefficients(workload)) is not None:
            return run_banded_toeplitz(workload, a, schema, call, options.get("bands"), t0)
        why = (f"{CALLER}(participation={schema!r}) has no method for this workload: the dense optimum runs "
               f"under fixed_epochs(k) (≤ 4,096 steps) and min_separation(b, k) (≤ 2,048 steps; here "
               f"n = {n:,}), and " if picked else f"{CALLER}(method='banded', participation=...) runs ")
        raise ValueError(f"{why}the banded strategies on prefix sums and all ranges "
                         "(mmopt.workload.prefix(n) / all_range(n), or mmopt.toeplitz's) and lower-triangular Toeplitz "
                         "workloads (mmopt.participation.momentum). Got a workload of another structure: use "
                         "fixed_epochs(k), or min_separation(n/k, k).")
    return run_banded(stream, schema, call, options.get("bands"), t0)


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
    # "certified optimum" only where the method converged: a spent budget said so too (an auditor's probe)
    said = "certified optimum" if sol.status == "optimal" else f"stopped ({sol.status}) at an objective"
    status, message, lower = reconcile(sol.primal, sol.dual, sol.status, f"{said} under {schema!r}: "
                                       f"{sol.primal / sol.dual:.6f}× the dual bound.", tol=tol)
    extra = {"participation": repr(schema), "sensitivity_squared": sol.sensitivity.squared,
             "sensitivity_exact": sol.sensitivity.exact, "sensitivity_method": sol.sensitivity.method}
    return OptimizeResult(Strategy(sol.matrix, "participation-optimum"), "l2", sol.primal, lower, status,
                          status in SUCCESS, message, "l2_approx", solver, sol.iterations,
                          time.perf_counter() - t0, sol.primal / m, lower / m, history=sol.history, extra=extra)
