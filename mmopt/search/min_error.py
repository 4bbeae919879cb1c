"""MinError for ε-DP (Problem 5.15): the SDP heuristic where it runs, local search where it scales.

Notation: see README. The rank-constrained SDP of Program 5.1 with convex iteration
(:mod:`mmopt.search.sdp_min_error`) is run for small n; from n ≈ 32 on it is too slow, and the direct local
search of :mod:`mmopt.search.local_search` carries the method; from 512 cells on, prefix sums and all ranges skip this
pipeline for the p-Identity search alone on their O(n) Gram operator (:mod:`mmopt.search.min_error_fast`, dispatched by
:func:`mmopt.optimize`). Every candidate — warm starts, the SDP
heuristic's answer, local-search restarts, and the polish of each — is scored by its *true* error
Δ₁²·tr(G(AᵀA)⁺) (:func:`mmopt.error.unit_objective`, which also accepts rank-deficient strategies that
support W), and the best is kept. None of this is a global optimum (the problem is not convex); the L2
optimum's dual bound (Program 5.2, solved to a certified gap) is a valid lower bound, because
‖A‖₁ ≥ ‖A‖₂ column by column.

Status of the pipeline: the least converged of its stages (the SDP's convex iteration, the p-Identity local
search, the polishes), so "optimal" means every stage's own convergence test passed, and "user_limit" that some
stage's budget ran out — a stage cut short might have found a lower point, even when the winner came from one that
converged. A *losing* stage that stalled in a line search ("optimal_inaccurate": stationary to rounding) was not cut
short and does not lower the status. The message names the stage that produced the winner; a warm start that no
stage improved on is charged to the stage that last tried to: its polish if it was polished (ties go to the later
candidate), else the p-Identity local search, whose restarts it beat.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from mmopt import strategy as st
from mmopt._base import validation as v
from mmopt._base.solution import RawSolution, worst_status
from mmopt.error import NumericalError, unit_objective
from mmopt.strategy import Strategy
from mmopt.workload import Workload

log = logging.getLogger("mmopt")
#: the convex iteration's P1 solves when max_iterations is not given: cheap (it rarely wins past the local search),
#: and often short of convergence at n ≤ 16 (all_range(8), prefix(16): then status user_limit, and the message says
#: how to raise it)
SDP_SOLVES = 50
SDP_MAX_N = 16  # the convex-iteration SDP reached the optimum at n ≤ 16 and stalled above identity at n = 32
# The workload's own rows are a start when W is known and has at most this many rows per cell: for a
# rank-deficient W they (or the SVD-bound strategy) may be optimal, e.g. W = 1ᵀ.
_WORKLOAD_START_ROWS = 2


def _normalised(A: np.ndarray) -> np.ndarray:
    return A / np.max(np.sum(np.abs(A), axis=0))


def _initial_matrix(initial, W: Workload, caller: str = "optimize") -> np.ndarray:
    """A warm start as a matrix: a Strategy, an array, or the name of a baseline or of "l2_approx"."""
    n = W.domain_size
    if isinstance(initial, str):
        named = {"identity": lambda: st.identity(n), "hierarchical": lambda: st.hierarchical(n),
                 "wavelet": lambda: st.wavelet(n), "svd_strategy": lambda: st.svd_strategy(W),
                 "l2_approx": lambda: _l2_strategy(W.mean_gram / np.trace(W.mean_gram) * n)}
        initial = "svd_strategy" if initial == "svd_bound" else initial  # its old name
        v.check_choice(initial, name="initial", caller=caller, choices=named)
        return named[initial]().matrix
    if not isinstance(initial, Strategy | np.ndarray | list | tuple):
        raise TypeError(f"The 'initial' parameter of {caller} must be a Strategy, a matrix or one of 'identity', "
                        f"'hierarchical', 'wavelet', 'svd_strategy', 'l2_approx'. Got {type(initial).__name__}.")
    A = initial.matrix if isinstance(initial, Strategy) else v.check_matrix(initial, name="initial", caller=caller)
    v.check_same_domain(n, A.shape[1], caller=caller)
    A = np.asarray(A, dtype=float)
    if not np.any(A):  # scaled to unit sensitivity below: 0/0 named 'unit_objective's strategy' before
        raise ValueError(f"The 'initial' parameter of {caller} must have a nonzero entry (a strategy that "
                         "measures something). Got an all-zero matrix. Pass a baseline's name, e.g. "
                         "initial='hierarchical', or leave it out.")
    return A


def _l2_strategy(G: np.ndarray, l2=None) -> Strategy:
    """The square root of the L2 optimum's Gram, with round-off eigenvalues cut (Strategy.from_gram).

    A plain X^{1/2} turns eigenvalues ~1e-15 into singular values ~3e-8: fake measurement directions
    that made this start look 8% better than the identity on 2-way marginals over (4, 4, 4, 4), while its
    true error is 22× the identity's (4.8× in RMSE).
    """
    if l2 is None:
        from mmopt.search.l2_fast import solve_l2

        l2 = solve_l2(G, tol=1e-8)
    return Strategy.from_gram(l2.gram, name="l2_approx")


def _starts(W: Workload, l2_start: Strategy, initial) -> list[tuple[str, np.ndarray]]:
    n = W.domain_size
    out = [("identity", np.eye(n)), ("H2", st.hierarchical(n).matrix)]
    if n & (n - 1) == 0:
        out.append(("wavelet", st.wavelet(n).matrix))
    out += [("l2_approx", l2_start.matrix), ("svd_strategy", st.svd_strategy(W).matrix)]
    if W.n_queries <= _WORKLOAD_START_ROWS * n and W.knows_rows:
        out.append(("workload", W.explicit_matrix()))
    elif not W.knows_rows:
        # no rows to start from: the Gram's eigen-root (rows √λᵢ vᵢᵀ over its range), W's rows up to a rotation.
        # total(8) given as its Gram ended at 1.73 against the 1.0 its row reaches (an auditor's probe)
        lam, V = np.linalg.eigh(W.mean_gram)
        keep = lam > W.domain_size * np.finfo(float).eps * max(float(lam[-1]), 0.0)
        if keep.any():
            out.append(("gram_root", np.sqrt(lam[keep])[:, None] * V[:, keep].T))
    if initial is not None:
        out.append(("initial", _initial_matrix(initial, W)))
    return [(name, _normalised(A)) for name, A in out]


def solve(W: Workload, G: np.ndarray, opts: dict) -> RawSolution:
    """Run the MinError pipeline on the normalised Gram ``G`` and return the best strategy found.

    ``opts`` has been validated by :func:`mmopt.optimize`: engine, restarts, p, weight, polish, solver,
    tol, max_iterations (P1 solves of the SDP; L-BFGS-B iterations per restart of the local search and
    per polish), seed, verbose, initial, n_jobs (the local search's restarts run in parallel; the result
    does not depend on it).
    """
    from mmopt.search.l2_fast import solve_l2
    from mmopt.search.local_search import minimize_l1

    t0 = time.perf_counter()
    n = W.domain_size
    say = log.info if opts["verbose"] else log.debug
    engine = opts.get("engine", "auto")
    use_sdp = engine == "sdp" or (engine == "auto" and n <= SDP_MAX_N)
    say("min_error: L2 optimum (dual bound and a warm start), n = %d", n)
    l2 = solve_l2(G, tol=1e-8)
    history: list[dict] = []
    candidates: list[tuple[float, str, np.ndarray, str | None]] = []  # (error, label, A, producing stage)
    stages: dict[str, RawSolution] = {}

    def consider(label: str, A: np.ndarray, stage: str | None) -> None:
        try:
            err = unit_objective(A, G)
        except NumericalError as exc:  # float64 cannot resolve this candidate: it is not eligible
            err = np.inf
            say("min_error candidate %s dropped: %s", label, exc)
        candidates.append((err, label, A, stage))
        history.append({"step": label, "objective": err, "seconds": time.perf_counter() - t0})
        say("min_error candidate %s: objective %.6g (%.1f s)", label, err, time.perf_counter() - t0)

    for label, A in _starts(W, _l2_strategy(G, l2), opts.get("initial")):
        consider(label, A, None)
    solver, iterations = None, 0
    if use_sdp:
        from mmopt.search.sdp_min_error import solve_min_error_sdp

        # Convex iteration runs its own multi-start (G^{1/4}, √X_L2): the right start is workload-dependent. Not
        # from I: it stays at the identity strategy (sdp_min_error.STARTS), a candidate here already.
        user = next((A for _, label, A, _ in candidates if label == "initial" and _full_column_rank(A)), None)
        say("min_error stage sdp: convex iteration (%s)", "2 starts" if user is None else "from initial")
        sdp = solve_min_error_sdp(G, initial=user, starts=("svd", "l2"),
                                  solver=opts.get("solver"), weight=opts.get("weight"), tol=opts.get("tol") or 1e-6,
                                  max_iterations=opts.get("max_iterations") or SDP_SOLVES, verbose=opts["verbose"])
        solver, iterations, stages["sdp"] = sdp.solver, sdp.iterations or 0, sdp
        history.extend(dict(h, step="sdp") for h in sdp.history)
        consider("sdp", sdp.matrix, "sdp")
    # Measured (benchmarks/bench_local_search.py): 8 restarts reach HDMM's OPT_0 ratios up to n = 256 in
    # ~25 s; at n = 1024 longer runs help more than more restarts.
    restarts = opts.get("restarts") or (8 if n <= 256 else 3)
    budget = opts.get("max_iterations") or (1000 if n <= 256 else 3000)
    say("min_error stage local_search: p-Identity, %d restarts of at most %d L-BFGS-B iterations",
        restarts, budget)
    local = minimize_l1(G, p=opts.get("p"), restarts=restarts, seed=opts.get("seed"), max_iterations=budget,
                        verbose=opts["verbose"], n_jobs=opts.get("n_jobs"))
    iterations += local.iterations or 0
    stages["local_search"] = local
    consider("local_search", local.matrix, "local_search")
    # Polishing a general signed A costs O(n³) per step: worth it at small n, ~100 s at n = 256 for no gain.
    polish = opts.get("polish")
    if n <= 64 if polish is None else polish:
        # polish the best two distinct finite candidates: cheap, and it never makes a candidate worse
        finite = sorted((c for c in candidates if np.isfinite(c[0])), key=lambda c: c[0])[:2]
        for k, (_, label, A, _) in enumerate(finite):
            say("min_error stage polish %d of %d: from '%s'", k + 1, len(finite), label)
            pol = minimize_l1(G, initial=A, max_iterations=budget, seed=opts.get("seed"), verbose=opts["verbose"])
            iterations += pol.iterations or 0
            stages[f"polish({label})"] = pol
            consider(f"polish({label})", pol.matrix, f"polish({label})")
    best = min(c[0] for c in candidates)
    # Ties (a polish that kept its start) go to the later candidate: the stage that last tried.
    err, label, A, stage = [c for c in candidates if c[0] <= best * (1 + 1e-12)][-1]
    stage = stage or "local_search"
    # The search is only as converged as its least converged stage: a local search cut short by its budget
    # might have found a lower point, even if the winner came from a stage that converged (e.g. the polish
    # of a stationary start such as the identity).
    # A losing stage that stalled in a line search ("optimal_inaccurate": stationary to rounding) was not cut short
    # and could not have gone lower, so it does not lower the result's status: one such restart of 8 on all_range(20)
    # made the whole search 'optimal_inaccurate', success False, although the winning polish converged (a helper's
    # audit). A stage stopped by its budget ("user_limit") still does.
    status = worst_status("optimal" if name != stage and s.status == "optimal_inaccurate" else s.status
                          for name, s in stages.items())
    solver = f"{solver}+mmopt-lbfgs" if solver else (local.solver or "mmopt-lbfgs")
    say("min_error: best of %d candidates is '%s' (objective %.6g, %s), %.1f s", len(candidates), label, err,
        status, time.perf_counter() - t0)
    # the SDP stage's default 50 P1 solves (cheap: it rarely wins) stopped it on every n ≤ 16 workload a newcomer's
    # audit tried, so the default call said user_limit with no word of which budget or how to raise it
    default_sdp = "sdp" in stages and stages["sdp"].status == "user_limit" and not opts.get("max_iterations")
    hint = (f" The SDP stage stopped at its default of {SDP_SOLVES} P1 solves; max_iterations=1000 sets every stage's "
            "budget (about twice the time at n = 16)." if default_sdp else "")
    message = (f"Best of {len(candidates)} candidates is '{label}', from stage {stage}; the stages' own tests, the "
               "least converged (a losing stage stationary to rounding counts as converged): "
               f"{status}. {_stage_summary(stages)}{hint} MinError is not convex: this is a heuristic "
               "local optimum with no optimality certificate; lower_bound is the L2 optimum's dual bound.")
    extra = {"best_candidate": label, "winning_stage": stage, "seconds": time.perf_counter() - t0,
             "stage_status": {k: s.status for k, s in stages.items()}, "l2_status": l2.status,
             "dual_bound_norm": "l2", "n_jobs": local.extra["n_jobs"], "backend": local.extra["backend"]}
    return RawSolution(_normalised(A), None, status, message, iterations, solver, dual_bound=l2.dual_bound,
                       history=tuple(history), extra=extra)


def _full_column_rank(A: np.ndarray) -> bool:
    s = np.linalg.svd(A, compute_uv=False)
    return A.shape[0] >= A.shape[1] and s[-1] > 1e-9 * s[0]


def _stage_summary(stages: dict[str, RawSolution]) -> str:
    """One clause per stage: its status, and for a local search which restarts hit their budget."""
    parts = []
    for name, sol in stages.items():
        if "run_summary" in sol.extra:  # the local search: how its restarts ended
            detail = f" ({sol.extra['run_summary'].rstrip('.')})"
        else:
            detail = "" if sol.status == "optimal" else f" ({sol.message.split('. ')[0].rstrip('.')})"
        parts.append(f"{name}: {sol.status}{detail}")
    return "Stages: " + "; ".join(parts) + "."
