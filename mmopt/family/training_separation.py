"""optimize's route for private training under ``min_separation(n/k, k)`` on a dense workload of ≤ 2,048 steps or
prefix sums of ≤ 4,096, for :mod:`mmopt.family.training` (the budgets and what each part measured: its docstring)."""

from __future__ import annotations

import time

from mmopt._base import validation as v
from mmopt._base.result import SUCCESS, OptimizeResult, reconcile
from mmopt.family.call import Call
from mmopt.family.training_banded import run_banded, run_banded_toeplitz

CALLER = "optimize"
SECONDS = 70.0  # the cutting planes' default CPU budget (then the chain dual's 30)
SECONDS_PREFIX = 20.0  # on prefix sums of ≤ CUTTING_PREFIX_MAX_N steps, where the others follow: 20 + 30 + 15 + 45
CUTTING_PREFIX_MAX_N = 512  # past it, on prefix sums, the chain dual bounds better and the 2b bands win: no cutting
CHAIN_DUAL_SECONDS = 30.0  # the chain dual's (mmopt.participation.chain_dual; option chain_dual_seconds; 0: not run)
FREE_BANDED_SECONDS = 15.0  # the free banded strategy's (option free_banded_seconds; 0: not run) below LEVELS_MIN_N
# when the chain dual did not run (when it did, its Lagrangian start replaces the free band's unless asked for)
CHAIN_BANDED_SECONDS = 45.0  # then the 2b-band strategy's, at least (option chain_banded_seconds; 0: not run)
LEVELS_MIN_N = 2048  # from it the 2b-band strategy runs coarse to fine (mmopt.participation.chain_levels), from the
# dual's start at n/2 (else from the free band at n/8, whose 15 s at n are then not spent unless asked for). From
# the free band, in the route at 2,048 steps: k = 8 211,478 against 216,498 from the free band at n; k = 4 90,962
# against 92,403; at 1,024, k = 4 it was worse (39,397 against 39,110) and at k = 8 no better (92,016 against 92,066)
GENERAL_SECONDS = 60.0  # the cutting planes' budget when k·b < n (run_general), and at most this many rounds:
GENERAL_ROUNDS = 2000  # the budget decides (30 rounds of 60 L-BFGS steps were 4–6 s at n = 128)
ROUTE_SECONDS = 110.0  # by default the 2b-band strategy also takes what the others left of this much CPU
LIFTED_FROM = 2049  # on prefix sums from here (to free_banded.MAX_N) the 2b-band strategy's finest level is
# carried, not refined (chain_levels(refine_finest=False); the chain dual is lifted from DUAL_LIFTED_FROM): an
# evaluation at 4,096 steps costs 1.6–3 CPU s in float32 (5 s with its gradient at k = 4), and the steps there made
# little progress. In 85 s chain_levels from the dual's start at 1,024 steps, refining at 4,096, reached 212,468 at
# k = 4
# (the free band, which then took the budget: 207,663); refined to 2,048 steps, carried and equalised: ~205,500 (a
# helper's exploration). At k = 8 / 16, in development runs beside other work: 473,053 / 1,200,242 carried against
# 475,060 / 1,212,543 refined at 4,096, in 104 / 100 CPU s against 118 / 117. With the lifted dual's carried chain
# (chain_lift.prolong), equalise.relative_step and chain_banded's stages on one budget (its docstring;
# benchmarks/results/bench_participation_minsep_4096.txt): gaps 1.0057 / 1.0095 / 1.0207 in 102 / 94 / 91 CPU s
# (1.0065 / 1.0109 / 1.0224 with the budget split in halves between the stages; 1.0077 / 1.0125 / 1.0259 with the
# previous lift, which kept the atom whole; 1.0105 / 1.0169 / 1.0326 with a diagonal logit shift in the lift; before the
# step and the shift 1.019 / 1.032 / 1.051; the earlier route's 1.029 / 1.024 / 1.048). At k = 8 a carried level
# equalised and stepped before its L-BFGS at τ = 3·10⁴ alone reached 470,783 against 470,937 from the same 1,024 level:
# not kept (0.03 %, and untried at 2,048 steps, whose level it would change too). Keeping less for the carry at k =
# 8 / 16 (21 / 16.5 s, the levels taking the rest) gained 0.03 % / 0.02 % for 11 / 14 CPU s more: not kept
CARRY_SECONDS = 30.0  # kept for the carry (three exact evaluations at 4,096 steps), equalise (two more) and
# equalise.relative_step (a float32 gradient, two screens and an exact evaluation: 7–10 s); with 20 s and no step
# the route took 111.5 CPU s at k = 4 (with 12 s: 120.9)
DUAL_LIFTED_FROM = 2048  # on prefix sums from here the chain dual is solved to LIFTED_SOLVE_STEPS and certified at
# n (the 2b bands' finest level is still refined below LIFTED_FROM): at 2,048 steps, k = 4 / 8, 89,219 / 206,925 in
# 16 CPU s (89,254 / 207,061 with the chain carried by chain_lift.prolong) against 89,175 / 206,378 solved to 2,048
# in 31–32 s, the 15 s left to the 2b bands (at 1,024 steps,
# k = 8, lifted from 512: 91,363 in 15 s against 91,415 in 30 s, and the start there needs the dual solved at n).
# An options['chain_dual_seconds'] given there budgets the lifted solve: the dual solved to n is not offered
LIFTED_SECONDS = 15.0  # there the chain dual is solved to LIFTED_SOLVE_STEPS and certified at n (its lifted bound,
LIFTED_SOLVE_STEPS = 1024  # ~15 s more): 4,096 steps, k = 4 / 8 / 16: 202,793 / 465,761 / 1,171,765 against the
# diagonal bound's 193,912 / 430,004 / 1,058,804 (with chain_lift.prolong; 202,650 / 465,189 / 1,168,348 with the
# atom kept whole, 202,158 / 463,388 / 1,160,536 with a diagonal logit shift of 0.5, 201,814 / 461,466 / 1,142,057
# with the offsets repeated; solved to 2,048 steps in 25–30 s, 463,425–465,774 at k = 8: no better)


def takes_separation(schema, n: int, stream, G) -> bool:
    """min_separation(n/k, k) on a dense Gram of ≤ 2,048 steps (the cutting planes) or prefix sums of ≤ 4,096 (the
    banded strategies); min_separation(b, k) with k·b < n (reshuffled epochs: b = 1) on either up to 2,048 steps
    (the cutting planes alone, :func:`run_general`)."""
    from mmopt.participation import cutting, free_banded
    from mmopt.participation.schemas import MinSeparation
    prefix = stream is not None and stream.kind == "prefix"
    if not isinstance(schema, MinSeparation) or not (G is not None or prefix):
        return False
    if not epochs(schema, n):
        return n <= cutting.MAX_N and (schema.max_participations - 1) * schema.separation_steps < n
    return n <= (free_banded.MAX_N if prefix else cutting.MAX_N)


def epochs(schema, n: int) -> bool:
    """b = n/k: the schema whose patterns the fixed epochs start (and the chain dual and 2b bands assume)."""
    return n % schema.separation_steps == 0 and n // schema.separation_steps == schema.max_participations


def run_separation(workload, G, stream, schema, call: Call, t0: float) -> OptimizeResult:
    """min_separation(n/k, k): the cutting planes' certified optimum (on prefix sums up to
    ``CUTTING_PREFIX_MAX_N`` steps), the chain dual's bound, the banded Toeplitz strategy (exact sensitivity) for
    prefix sums, all ranges and Toeplitz workloads, and on prefix sums the free banded and 2b-band strategies; the best
    strategy and the best bound."""
    from mmopt.dense._strategy_core import Strategy
    from mmopt.participation.workloads import toeplitz_coefficients
    tol = call.tol if call.tol is not None else 1e-2
    prefix = stream is not None and stream.kind == "prefix"
    n = stream.n if prefix else G.shape[0]
    k = schema.max_participations
    if not epochs(schema, n):
        return run_general(workload, G, stream, schema, call, t0, tol)
    if not prefix and (unused := sorted({"free_banded_seconds", "chain_banded_seconds"} & set(call.options or {}))):
        # those strategies are built for prefix sums only: the options were taken and nothing ran (a helper's audit)
        raise ValueError(f"{CALLER}: options {unused} budget the free banded and 2b-band strategies, which run on "
                         "prefix sums only; this workload is not prefix sums. Drop them (options['seconds'] and "
                         "options['chain_dual_seconds'] budget the cutting planes and the chain dual here).")
    cpu0 = time.process_time()
    cutting_default = (SECONDS_PREFIX if n <= CUTTING_PREFIX_MAX_N else 0.0) if prefix else SECONDS
    # the chain dual solved at LIFTED_SOLVE_STEPS and certified at n (dual_lifted); the 2b bands' finest level
    # carried, not refined (lifted)
    lifted, dual_lifted = prefix and n >= LIFTED_FROM, prefix and n >= DUAL_LIFTED_FROM
    budget = {key: v.check_real((call.options or {}).get(key, default), name=f"options['{key}']", caller=CALLER,
                                low=0.0)
              for key, default in (("seconds", cutting_default),
                                   ("chain_dual_seconds", LIFTED_SECONDS if dual_lifted else CHAIN_DUAL_SECONDS),
                                   ("free_banded_seconds", FREE_BANDED_SECONDS if n < LEVELS_MIN_N else 0.0),
                                   ("chain_banded_seconds", CHAIN_BANDED_SECONDS))}
    if not budget["seconds"] and stream is None and toeplitz_coefficients(workload) is None:
        raise ValueError(f"{CALLER}: options['seconds'] = 0 skips the cutting planes, which give the only strategy "
                         "for this workload under minimum separation. Pass a positive budget (default "
                         f"{SECONDS:g}).")
    primal, lower, strategy, solver, bound_method = float("inf"), 0.0, None, None, None
    extra, iterations, history, certified, chained = {"participation": repr(schema)}, 0, (), False, None
    if budget["seconds"]:
        from mmopt.participation.cutting import solve_min_separation
        sol = solve_min_separation(n if prefix else G, schema.separation_steps, k, tol=tol,
                                   max_rounds=call.max_iterations or 40, seconds=budget["seconds"])
        primal, lower, strategy = sol.primal, sol.dual, Strategy(sol.matrix, "participation-optimum")
        solver, bound_method = "mmopt-participation-cutting-planes", ("dual of the working set's program "
                                                                       "(mmopt.participation.cutting)")
        extra |= {"sensitivity_squared": sol.sensitivity.squared, "sensitivity_exact": sol.sensitivity.exact,
                  "sensitivity_method": sol.sensitivity.method, "cutting_planes_primal": sol.primal,
                  "cutting_planes_dual": sol.dual, "cutting_planes_status": sol.status}
        iterations, history, certified = sol.iterations, sol.history, sol.status == "optimal"
    if budget["chain_dual_seconds"] and not certified and k > 1:  # (else the cutting planes' gap is within tol)
        # every pattern at once, weighted by a Markov chain: n = 1,024, k = 8, prefix sums: 91,406 in 33 CPU s
        # against the cutting planes' 90,311 in 50 s (mmopt.participation.chain_dual)
        from mmopt.participation.chain_dual import chain_dual
        chained = chain_dual(n if prefix else G, k, seconds=budget["chain_dual_seconds"],
                             solve_steps=LIFTED_SOLVE_STEPS if dual_lifted else None)
        extra["chain_dual"] = chained.bound
        iterations += chained.iterations
        if chained.bound > lower:
            lower, bound_method = chained.bound, "chain dual (mmopt.participation.chain_dual)"
        if prefix and "free_banded_seconds" not in (call.options or {}):
            budget["free_banded_seconds"] = 0.0  # the dual's Lagrangian start replaces the free band's (below)
    candidates = []
    if (band := _banded(workload, stream, schema, call, t0)) is not None:
        if band.lower_bound > lower:
            lower, bound_method = band.lower_bound, band.extra["lower_bound_method"]
        candidates.append((band.objective, band.strategy, f"{band.solver} (banded)",
                           {key: band.extra[key] for key in ("sensitivity_squared", "sensitivity_exact",
                                                             "sensitivity_method", "bands")}))
    if prefix:
        if "chain_banded_seconds" not in (call.options or {}):  # the rest of the route's CPU budget, if more
            spent = time.process_time() - cpu0 + budget["free_banded_seconds"] + (CARRY_SECONDS if lifted else 0.0)
            budget["chain_banded_seconds"] = max(CHAIN_BANDED_SECONDS, ROUTE_SECONDS - spent)
        candidates += _banded_strategies(n, k, budget, extra, chained if prefix else None, carried=lifted)
    for error, candidate, name, facts in candidates:
        if error < primal:
            primal, strategy, solver = error, candidate, name
            extra |= facts
    return _result(workload, schema, strategy, primal, lower, bound_method, solver, iterations, history, extra,
                   tol, t0)


def _banded(workload, stream, schema, call: Call, t0: float):
    """The banded Toeplitz strategy's OptimizeResult (exact sensitivity) on prefix sums or all ranges (a stream
    workload, or a dense one it equals) or a Toeplitz workload; None for other workloads. All ranges took the
    cutting planes alone (their banded route was refused)."""
    from mmopt.participation.workloads import toeplitz_coefficients
    a = None if stream is not None else toeplitz_coefficients(workload)
    if stream is None and a is None:
        return None
    return (run_banded(stream, schema, call, None, t0) if stream is not None else
            run_banded_toeplitz(workload, a, schema, call, None, t0))


def _result(workload, schema, strategy, primal, lower, bound_method, solver, iterations, history, extra, tol,
            t0) -> OptimizeResult:
    """The route's OptimizeResult: "optimal" when primal ≤ (1 + tol)·lower (reconciled), the unit-σ totals."""
    extra["lower_bound_method"] = bound_method
    status = "optimal" if primal <= (1 + tol) * lower else "user_limit"
    status, message, lower = reconcile(primal, lower, status, f"minimum separation {schema!r}: {solver}, "
                                       f"{primal / lower:.6f}× the certified lower bound ({bound_method}).", tol=tol)
    m = workload.n_queries
    return OptimizeResult(strategy, "l2", primal, lower, status, status in SUCCESS, message, "l2_approx", solver,
                          iterations, time.perf_counter() - t0, primal / m, lower / m, history=history,
                          extra=extra)


def _banded_strategies(n: int, k: int, budget: dict, extra: dict, dual=None, carried: bool = False) -> list:
    """The primal side on prefix sums: 2b bands (chain_banded's docstring: the optimum under the whole schema is not
    banded; its Δ² is the chain's, exact when X ≥ 0 on the worst pattern, else an upper bound) from the chain
    dual's Lagrangian start when the dual ran (:func:`mmopt.participation.chain_dual.lagrangian_start`; from
    ``LEVELS_MIN_N`` steps its start at its finest solved level below n — n/2, or 1,024 steps when it was lifted —,
    then coarse to fine), else from the free banded strategy (every entry
    of the b bands and the column norms free, exact sensitivity; from ``LEVELS_MIN_N`` steps coarse to fine).

    Measured in the route (prefix sums, one core, default budgets; benchmarks/results/bench_participation_minsep.txt):
    n = 1,024, k = 8: 91,846 (gap 1.0046) from the dual's start against 91,975 (1.0063) from the free band;
    n = 2,048, k = 4: 90,649 (1.016) against 90,962 (1.021); since the levels carry their strategy with
    :func:`mmopt.participation.chain_levels.carry`, 89,618 (1.0046) at k = 4 and 208,575 (1.0093, before 210,624:
    1.020) at k = 8 in 110 CPU s (a run beside the test suite, which does less per CPU second: 1.0121); with
    chain_banded's stages on one budget, 89,565 (1.0035) and 208,629 (1.0075) in 111 CPU s
    (benchmarks/results/bench_participation_minsep.txt; its run before, stages on halves: 1.0051 / 1.0086)."""
    from mmopt.dense._strategy_core import Strategy
    from mmopt.participation.chain_banded import chain_banded
    from mmopt.participation.chain_levels import chain_levels, free_levels
    from mmopt.participation.equalise import equalise, relative_step
    from mmopt.participation.free_banded import free_banded
    out = []
    free, name = None, "L-BFGS-B (mmopt.participation.free_banded)"
    if budget["free_banded_seconds"] and n >= LIFTED_FROM:  # coarse to fine, from n/16 at 4,096 steps
        free = free_levels(n, k, seconds=budget["free_banded_seconds"])
        name = "L-BFGS-B coarse to fine (mmopt.participation.chain_levels.free_levels)"
    elif budget["free_banded_seconds"]:
        free = free_banded(n, k, seconds=budget["free_banded_seconds"])
    if free is not None:
        extra["free_banded_error"] = free.error
        out.append((free.error, Strategy(free.matrix, "free-banded"), name,
                    {"sensitivity_squared": 1.0, "sensitivity_exact": True,
                     "sensitivity_method": free.sensitivity.method, "bands": n // k}))
    if budget["chain_banded_seconds"]:
        if n >= LEVELS_MIN_N:
            # from the dual's finest solved level below n (n/2: 1,024 steps at 2,048, where it was lifted from
            # there; n/4 at 4,096)
            levels = [m for m in (dual.start_steps if dual is not None else ()) if m <= n // 2]
            chain = chain_levels(n, k, seconds=budget["chain_banded_seconds"],
                                 start=_dual_start(dual, max(levels), k) if levels else None,
                                 refine_finest=not carried)
            name = ("L-BFGS-B coarse to fine (mmopt.participation.chain_levels" +
                    (", the finest level carried)" if carried else ")"))
        else:
            # the dual's start even where the free band's own error is lower (n = 64 … 256: 2.2–4.3 % above the
            # bound against 0.7–2.1 %): it has the 2b bands' shape, and from it the 2b-band strategy went further
            # (n = 1,024, k = 4: 39,039 in 60 s against 39,110 from the free band in 80 s)
            start = _dual_start(dual, n, k)
            start = free.matrix if start is None and free is not None else start
            chain = chain_banded(n, k, start=start, seconds=budget["chain_banded_seconds"])
            name = "L-BFGS-B (mmopt.participation.chain_banded)"
        error, C, sens = equalise(chain.matrix, n // k, k)  # every step's best pattern brought near Δ², if it pays
        if error < chain.error:
            extra["equalised_from"] = chain.error
            name += ", equalised (mmopt.participation.equalise)"
        if carried and (stepped := relative_step(C, n // k, k, error)) is not None:  # the carry's defect, in part
            extra["stepped_from"] = error
            error, C, sens = stepped
            name += ", one relative step (mmopt.participation.equalise.relative_step)"
        extra["chain_banded_error"] = error
        out.append((error, Strategy(C, "chain-banded"), name,
                    {"sensitivity_squared": sens.squared, "sensitivity_exact": sens.exact,
                     "sensitivity_method": sens.method, "bands": 2 * n // k}))
    return out


def _dual_start(dual, m: int, k: int):
    """The chain dual's Lagrangian start on m steps, or None: no dual, no level of m steps, or X(M) not numerically
    definite (then the free band's start is used)."""
    import numpy as np

    from mmopt.participation.chain_dual import lagrangian_start
    if dual is None or m not in dual.start_steps:
        return None
    try:
        return lagrangian_start(dual, m)
    except np.linalg.LinAlgError:  # X(M) at a near-singular K: no Cholesky factor
        return None


def run_general(workload, G, stream, schema, call: Call, t0: float, tol: float) -> OptimizeResult:
    """min_separation(b, k) with k·b < n (reshuffled epochs are min_separation(1, k)): the cutting planes from every
    run of k steps b apart (:func:`mmopt.participation.cutting.solve_min_separation`; option ``seconds``, default
    ``GENERAL_SECONDS``), beside the banded Toeplitz strategy with b bands on prefix sums, all ranges and Toeplitz
    workloads; the better strategy and the better bound. The chain dual and the 2b-band strategies assume b = n/k.

    Before, these schemas took the b-band strategy alone: on prefix(32) under min_separation(1, 2) the identity,
    1,056 against the certified optimum 362.6 (2.9×)."""
    from mmopt.dense._strategy_core import Strategy
    from mmopt.participation.cutting import solve_min_separation
    prefix = stream is not None and stream.kind == "prefix"
    n, b, k = (stream.n if prefix else G.shape[0]), schema.separation_steps, schema.max_participations
    options = dict(call.options or {})
    if unused := sorted(set(options) - {"seconds"}):
        raise ValueError(f"{CALLER}(participation={schema!r}) with k·b < n runs the cutting planes alone, whose "
                         f"budget is options['seconds']; {unused} apply when b = n/k. Drop them.")
    seconds = v.check_real(options.get("seconds", GENERAL_SECONDS), name="options['seconds']", caller=CALLER,
                           low=0.0, low_open=True)
    # every pair of steps is a pattern at b = 1: more cuts a round than the b-proportional default (n = 128,
    # min_separation(1, 2): gap 1.039 with n/2 cuts against 1.059 with 8 in the same time)
    sol = solve_min_separation(n if prefix else G, b, k, tol=tol, max_rounds=call.max_iterations or GENERAL_ROUNDS,
                               seconds=seconds, cuts=max(8 * b, n // 2))
    primal, lower, strategy = sol.primal, sol.dual, Strategy(sol.matrix, "participation-optimum")
    solver, bound_method = "mmopt-participation-cutting-planes", "dual of the working set's program " \
                                                                 "(mmopt.participation.cutting)"
    extra = {"participation": repr(schema), "sensitivity_squared": sol.sensitivity.squared,
             "sensitivity_exact": sol.sensitivity.exact, "sensitivity_method": sol.sensitivity.method,
             "cutting_planes_primal": sol.primal, "cutting_planes_dual": sol.dual,
             "cutting_planes_status": sol.status}
    if (band := _banded(workload, stream, schema, call, t0)) is not None:
        if band.lower_bound > lower:
            lower, bound_method = band.lower_bound, band.extra["lower_bound_method"]
        if band.objective < primal:
            primal, strategy, solver = band.objective, band.strategy, f"{band.solver} (banded)"
            extra |= {key: band.extra[key] for key in ("sensitivity_squared", "sensitivity_exact",
                                                       "sensitivity_method", "bands")}
    return _result(workload, schema, strategy, primal, lower, bound_method, solver, sol.iterations, sol.history,
                   extra, tol, t0)
