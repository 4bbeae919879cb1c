"""optimize's route for objectives other than the total: ``objective="max_variance"``, with per-query ``targets``.

The largest variance (over its target) of any query is minimised by :mod:`mmopt.search.max_variance` on the
dense workload (implicit and stream workloads of ≤ 4,096 cells as their dense twin) with a certified lower bound
from the minimax dual; on one Kronecker product factor by factor, at any size; on larger unions of Kronecker
products in the commutant of their cell symmetries (:mod:`mmopt.structured.orbit_maxvar`); on prefix sums and
all ranges of ≤ 4,096 cells, with any targets, in prefix coordinates without the rows (:mod:`mmopt.toeplitz.maxvar`);
on unions of marginals by the residual planner with its closed-form bound (:mod:`mmopt.structured.residual.maxvar`);
those structured routes are :mod:`mmopt.family.maxvar_routes`, tried first.
The result's ``objective`` is that largest ratio at unit privacy, re-evaluated exactly from the returned strategy
(times ``privacy.variance_factor`` for the variance under a budget).
"""

from __future__ import annotations

import time

import numpy as np

from mmopt._base import validation as v
from mmopt._base.result import SUCCESS, OptimizeResult, reconcile
from mmopt._base.rounding import down, up
from mmopt.dense._workload_type import Workload
from mmopt.family.call import Call, check_common
from mmopt.family.maxvar_routes import marginals_of, max_ratio, structured
from mmopt.family.targets import check_dense_size, check_targets, dense_rows

CALLER = "optimize"
OBJECTIVES = ("total", "max_variance")
# where a structured route ends short of optimal, the dense minimax runs too up to these sizes (stack([R8⊗I8,
# 3·I8⊗R8]): 64 cells, 576 queries, certified in 4.5 s)
SMALL_CELLS, SMALL_QUERIES = 512, 10_000


def takes(workload, method, call: Call) -> bool:
    return call.objective != "total" or call.targets is not None


#: The branchings of the hierarchical strategies the Laplace max-variance search also scores (the paper's §6
#: family): H₂ alone left prefix(64) at the identity's 64 (unit max variance) where H₈ reaches 34.3, all ranges of
#: 64 at 64 against H₁₆'s 45.4; each costs one variance evaluation (0.02 s at n = 256).
BRANCHINGS = (2, 3, 4, 8, 16)


def _workload_rows(W: np.ndarray) -> list:
    """The workload's own distinct rows as a Laplace candidate (up to 4n of them): measuring the queries directly
    is what a single query, or copies of one, needs — the Gaussian minimax strategy's rows scored in L1 cost
    up to √k times that ε on a k-cell total (plan gave 2√2 where √2 meets the target)."""
    from mmopt.dense._strategy_core import Strategy
    rows = np.unique(W[np.any(W != 0, axis=1)], axis=0)
    return [Strategy(rows, name="workload")] if 0 < rows.shape[0] <= 4 * W.shape[1] else []


#: The exponents p of the target-weighted rows W·diag(τ)^−p scored as Laplace candidates (per-query targets only).
TARGET_POWERS = (0.25, 0.5, 0.75)


def _weighted_rows(W: np.ndarray, tau: np.ndarray) -> list:
    """The workload's nonzero rows each weighted by τᵢ^−p (p in :data:`TARGET_POWERS`), when the targets differ and
    there are at most 4n rows: the budget moves to the tighter targets. Marginals of (2, 3, 2) with targets 1 … 5
    planned ε 3.464 (the identity) where rows / √target meet every target at 2.803 (a helper's probe)."""
    from mmopt.dense._strategy_core import Strategy
    keep = np.any(W != 0, axis=1)
    if np.ptp(tau) == 0 or not 0 < int(keep.sum()) <= 4 * W.shape[1]:
        return []
    return [Strategy(W[keep] * (tau[keep] / tau.min())[:, None] ** -p, name=f"rows / target^{p:g}")
            for p in TARGET_POWERS]


#: Per-marginal weights are searched for workloads of at most this many marginals (and MIN_ERROR_LIMIT cells), with
#: at most MARGINAL_WEIGHT_EVALUATIONS per marginal and MARGINAL_WEIGHT_WORK / N³ in all: each is one dense
#: evaluation, ~0.2 CPU s at 512 cells, where 12 marginals' 360 evaluations took 45–75 s (a helper's audit); the
#: work cap keeps the search near 10 s there (59 evaluations: largest variance / target 27.60 against the full
#: search's 26.18, so ε 2.7 % higher) and leaves it whole up to ~256 cells.
MARGINAL_WEIGHTS_LIMIT = 12
MARGINAL_WEIGHT_EVALUATIONS = 30
MARGINAL_WEIGHT_WORK = 8e9


def _marginal_weights(workload, rows, tau: np.ndarray) -> list:
    """Weighted marginals [θ_S·Q_S] with the θ minimising the largest variance / target (Nelder–Mead on log θ from
    θ_S = (τ_S/min τ)^−½), for a workload of marginals with one target per marginal (per-query targets, equal within
    each marginal): the weighted rows give each query its own weight, which costs Δ₁ where a marginal's cells share
    one. 1-way marginals of (2, 3, 2) with targets 1, 3, 5: ε 2.4866 against the weighted rows' 2.6421. A heuristic:
    the objective is not convex in θ."""
    from functools import reduce

    from scipy import optimize as so

    from mmopt.dense._strategy_core import Strategy
    M = marginals_of(workload)
    if M is None or np.ptp(tau) == 0 or not 2 <= len(M.sets) <= MARGINAL_WEIGHTS_LIMIT or \
            workload.domain_size > MIN_ERROR_LIMIT:
        return []
    blocks = [reduce(np.kron, [np.eye(n) if i in S else np.ones((1, n)) for i, n in enumerate(M.shape)],
                     np.ones((1, 1))) for S in M.sets]
    # one target per marginal (each query's cells are those of one row of one block: matched by their pattern), else
    # the weighted rows already fit (random per-query targets on (4,)⁴ 2-way marginals: 22 CPU s more, no gain)
    owner = {tuple(np.flatnonzero(q)): k for k, Q in enumerate(blocks) for q in Q}
    found: dict[int, set] = {}
    for w, t in zip(rows.matrix, tau, strict=True):
        found.setdefault(owner.get(tuple(np.flatnonzero(w)), -1), set()).add(float(t))
    if -1 in found or len(found) != len(blocks) or any(len(ts) > 1 for ts in found.values()):
        return []
    start = -0.5 * np.log(np.array([found[k].pop() for k in range(len(blocks))]) / tau.min())  # θ_S = (τ_S/min τ)^−½

    def strategy(z):
        return Strategy(np.vstack([np.exp(zi) * Q for zi, Q in zip(z, blocks, strict=True)]),
                        name="weighted marginals")
    evaluations = min(MARGINAL_WEIGHT_EVALUATIONS * len(blocks), int(MARGINAL_WEIGHT_WORK / workload.domain_size**3))
    if evaluations <= len(blocks):  # not even the first simplex: the start alone (θ_S = (τ_S/min τ)^−½)
        return [strategy(start)]
    res = so.minimize(lambda z: max_ratio(rows, strategy(z), tau, "l1")[0], start,
                      method="Nelder-Mead", options={"maxfev": evaluations, "xatol": 1e-3, "fatol": 1e-9})
    return [strategy(res.x)] if np.all(np.isfinite(res.x)) else []


#: GreedyH (DAWA's workload-weighted tree, :func:`mmopt.baselines.hierarchies.greedy_h`) is scored up to this many
#: cells: 0.01–0.17 CPU s at 64–512 cells, 7.6 s at 1,024 and 145 s at 4,096 (prefix sums). A helper's probe found
#: plan's Laplace ε 10–19 % above what it meets the targets at on prefix sums and ranges of 16–64 cells.
GREEDY_H_LIMIT = 512


def _greedy_h(dense) -> list:
    """GreedyH for the workload's Gram, a data-independent Laplace candidate (up to :data:`GREEDY_H_LIMIT` cells)."""
    from mmopt.baselines.hierarchies import greedy_h
    return [greedy_h(dense)] if 2 <= dense.domain_size <= GREEDY_H_LIMIT else []


#: the L1 total-error search (min_error, its local engine, seed 0) on the rows weighted by 1/√τ is a Laplace candidate
#: up to this many cells. Plan's ε for s.e. ≤ 4 (variance target 16) without it, then with it, and the search's CPU s:
#: prefix sums of 128 / 256 / 512 cells 2.5062 / 2.8782 / 3.2605 → 1.8726 / 2.1555 / 2.4537 (1.0 / 3.9 / 16.6 s),
#: all ranges of 128 2.8758 → 2.3705 (1.0 s), prefix sums of 16 1.2079 → 1.1173 (0.5 s); a helper's probe found
#: the 16-cell case, 8 % of the budget spent for nothing
MIN_ERROR_LIMIT = 512


def _min_error(W: np.ndarray, tau: np.ndarray) -> list:
    """The min_error strategy of the target-weighted rows W/√τ (total Σ vᵢ/τᵢ, a proxy for the largest vᵢ/τᵢ),
    a Laplace candidate up to :data:`MIN_ERROR_LIMIT` cells; none when the search fails to give one. Seeded with 0,
    so that a plan is the same on every run (the call's own seed is fresh entropy unless the user gave one)."""
    from mmopt.optimize import optimize
    if not 2 <= W.shape[1] <= MIN_ERROR_LIMIT:
        return []
    # scaled so the largest weight is 1: plan rescales the targets between its calls, and the search's stopping
    # rules are not scale-free (its ε moved in the 5th digit between two plans of one workload)
    weighted = Workload.from_matrix(W * np.sqrt(tau.min() / tau)[:, None], name="rows / √target")
    res = optimize(weighted, method="min_error", seed=0, options={"engine": "local"}, verbose=False)
    return [res.strategy] if res.strategy is not None else []


def _closed_forms(n: int):
    """identity, H_b with and without its root (b in :data:`BRANCHINGS`), the wavelet when n is a power of 2. Without
    the root a tree's L1 sensitivity drops by one level, which pays for longer ranges' variance under Laplace
    noise: HB (Qardaji, Yang & Li 2013) leaves it out, and all ranges of 256 met s.e. ≤ 10 at ε = 1.316 by HB(b=16)
    where H₈ needed 1.419."""
    from mmopt.dense._classic import hierarchical, identity, wavelet
    from mmopt.dense._strategy_core import Strategy
    trees = [hierarchical(n, b) for b in BRANCHINGS if b < n]
    out = [identity(n), *trees, *(Strategy(H.matrix[1:], name=f"{H.name} without its root") for H in trees)]
    if n & (n - 1) == 0:
        out.append(wavelet(n))
    return out


def run(workload, method, call: Call) -> OptimizeResult:
    """The largest query variance over its target, minimised and certified (module docstring)."""
    from mmopt._base import runtime as _runtime
    # its searches take minutes on large dense workloads: the "still running" line after 10 s and the per-step lines
    # of verbose=True, as the total's routes give them (a 1,500-cell search printed nothing in 25 s)
    with _runtime.progress(_runtime.check_verbose(call.verbose, CALLER)):
        return _run(workload, method, call)


def _run(workload, method, call: Call) -> OptimizeResult:
    t0 = time.perf_counter()
    v.check_choice(call.objective, name="objective", caller=CALLER, choices=OBJECTIVES)  # targets imply max_variance
    if method not in (None, "auto", "max_variance"):
        raise ValueError(f"{CALLER}: objective='max_variance' is minimised by its own certified search; "
                         f"method={method!r} minimises the total. Drop 'method' (or pass method='auto').")
    unused = [k for k, val in {"solver": call.solver, "initial": call.initial, "budget": call.budget,
                               "options": call.options}.items() if val]
    if unused:
        raise ValueError(f"The {unused} parameter(s) of {CALLER} do not apply to objective='max_variance', which "
                         "reads ['max_iterations', 'norm', 'targets', 'tol', 'verbose']. Drop them.")
    check_common(call, CALLER)
    norm = call.norm or "l2"
    if (res := structured(workload, call, norm, t0)) is not None:
        if res.status in SUCCESS or norm != "l2" or not _small(workload, call):
            return res
        # the symmetry route's ascent stalls when the optimal weights lie on a face of the simplex: on small weighted
        # unions it ended user_limit 5–11 % above the optimum the dense minimax certifies in seconds (a helper's
        # audit: stack([R8⊗I8, 3·I8⊗R8]) 26.17 after 40.8 s against 24.097 in 4.5 s); keep the better of the two
        alt = _dense(workload, call, norm, t0)
        return alt if alt.objective < res.objective else res
    return _dense(workload, call, norm, t0)


def _small(workload, call: Call) -> bool:
    """Whether the dense minimax is cheap enough to run after a structured route that did not converge."""
    from mmopt.structured.workloads import ImplicitWorkload
    plain = type(workload) is Workload or isinstance(workload, ImplicitWorkload)
    return (plain and not isinstance(call.targets, dict) and workload.domain_size <= SMALL_CELLS
            and workload.n_queries <= SMALL_QUERIES)


def _dense(workload, call: Call, norm: str, t0: float) -> OptimizeResult:
    """The dense minimax (and under Laplace noise the closed-form candidates), at most 4,096 cells."""
    from mmopt.dense._strategy_core import Strategy
    from mmopt.search.max_variance import solve_max_variance
    if isinstance(call.targets, dict) and norm == "l1" and marginals_of(workload) is not None:
        # (else check_targets below said "needs a workload of marginals" of one built by mmopt.workload.marginals)
        raise ValueError(f"The 'targets' parameter of {CALLER} is a dict (one target per marginal), which is "
                         "optimised under Gaussian noise (the residual planner's route): pass a privacy with "
                         "delta > 0, or one target per query (a list) for Laplace noise.")
    check_dense_size(workload, CALLER)
    dense, W = dense_rows(workload, CALLER)
    tau = np.ones(W.shape[0]) if call.targets is None else check_targets(call.targets, W.shape[0], CALLER)
    # under Laplace noise the Gaussian search gives the bound and one candidate of a heuristic whose gap is 1.3–5×:
    # 10⁻² there (all_range(256), the search alone at load 2: the bound 0.009 % lower, 9.7 CPU s against 50 at 10⁻⁴);
    # a tol given is kept
    default_tol = 1e-4 if norm == "l2" else 1e-2
    sol = solve_max_variance(W, tau, tol=call.tol or default_tol, max_iterations=call.max_iterations or 500)
    A = Strategy.from_gram(sol.gram, name="max_variance")
    rows = Workload.from_matrix(W)  # once for every candidate (a copy of W: 537 MB on all ranges of 512 cells)
    candidates = [A] if norm == "l2" else [A, *_closed_forms(dense.domain_size), *_greedy_h(dense), *_workload_rows(W),
                                           *_weighted_rows(W, tau), *_marginal_weights(workload, rows, tau),
                                           *_min_error(W, tau)]
    (ratio, variance), A = min(((max_ratio(rows, B, tau, norm), B) for B in candidates), key=lambda t: t[0][0])
    bound = sol.lower_bound  # the L2 minimax value bounds the L1 objective too (‖a‖₁ ≥ ‖a‖₂ per column)
    what = "largest variance" if call.targets is None else "largest variance / target"
    message = (f"Minimax over query weights (L2 dual): {what} {up(ratio)} at unit privacy, certified lower bound "
               f"{down(bound)} after {sol.iterations} L2 solves.")
    if norm == "l1":
        message += (f" Under Laplace noise a heuristic: the best in L1 of the Gaussian minimax strategy, the "
                    f"closed forms (identity, H_b for b in {BRANCHINGS} with and without the root, wavelet), GreedyH "
                    f"(up to {GREEDY_H_LIMIT} cells), the workload's own rows (also weighted by target^−p, p in "
                    f"{TARGET_POWERS}, for per-query targets; for marginals, per-marginal weights searched) "
                    f"and min_error on the rows weighted by "
                    f"1/√target (up to {MIN_ERROR_LIMIT} cells) is "
                    f"'{A.name}'.")
    raw_status = sol.status
    if norm == "l1" and np.isfinite(ratio):
        # a heuristic whatever the Gaussian search's own status: that search gives one candidate and the bound, and
        # its accuracy does not decide the L1 winner (its "optimal_inaccurate" had been passed on, with plan's advice
        # to raise max_iterations, for a 5× heuristic gap no iteration closes; a helper's audit)
        raw_status = "local_optimum"
        if sol.status != "optimal":
            message += f" (The Gaussian minimax search behind the bound ended '{sol.status}'.)"
    searched = A.name in ("max_variance", "min_error")  # else a construction: "closed_form"
    status, message, bound = reconcile(ratio, bound, raw_status, message, closed=not searched, tol=call.tol or 1e-4)
    extra = {"objective": "max_variance", "targets": "per-query" if call.targets is not None and np.ptp(tau) > 0
             else float(tau[0]), "query_weights": sol.weights, "per_query_variance": variance,
             "total_squared_error": float(np.sum(variance)),
             # the seed used: the Laplace min_error candidate's fixed 0 (a plan is the same on every run); the
             # Gaussian search draws nothing. The caller's seed was recorded though never read (a helper's probe)
             "seed": 0 if norm == "l1" else None}
    return OptimizeResult(A, norm, ratio, bound, status, status in SUCCESS, message, "max_variance",
                          sol.solver, sol.iterations, time.perf_counter() - t0, ratio, bound, sol.history, extra)
