"""The candidates of ``optimize(method="auto")`` on one attribute: a plain (1-D) dense workload and
``mmopt.toeplitz.prefix(n)`` / ``all_range(n)`` (see :mod:`mmopt.auto.plan`, which lists them with the product
domain's, and :mod:`mmopt.auto.costs`, which prices them).
"""

from __future__ import annotations

from collections.abc import Callable

from mmopt.auto import costs
from mmopt.auto.candidate import LOW_PRIOR_SHARE, Candidate, Context

__all__ = ["FAST_STEPS", "LOCAL_MIN_STEPS", "LOCAL_STEPS", "TREE_MIN_EVALUATIONS", "dense_min_error", "local_search",
           "plain", "stream"]

#: L-BFGS-B steps of the dense p-Identity search "auto" runs in place of the full pipeline on a 1-D workload: at
#: most LOCAL_STEPS (the pipeline's own budget at this size), and not at all when the budget leaves fewer than
#: LOCAL_MIN_STEPS; on a product domain it runs beside the product searches
#: (:data:`mmopt.auto.plan.PRODUCT_LOCAL_STEPS` at most).
LOCAL_STEPS, LOCAL_MIN_STEPS = 3000, 100
#: The steps a size the O(n) min_error search may be cut to, most first, where its default search does not fit the
#: budget left (:func:`_fast`): at 100 a size it still reaches 6.5× the bound on prefix sums of 1,024–2,048 cells
#: and 7.1× at 4,096, below the weighted tree's 7.5× / 8.7× / 9.2×.
FAST_STEPS = (2000, 1500, 1000, 700, 500, 300, 200, 100)
#: The fewest evaluations the tree's level-weight search is run with (a few L-BFGS-B steps; :func:`_weighted_tree`):
#: 8 on 10⁶ cells reached 0.958× the unit-weight error on prefix sums, 0.918× on all ranges.
TREE_MIN_EVALUATIONS = 8
#: The relative duality gap "auto" runs the tridiagonal dual to below a "thorough" budget: within 0.01 % of the
#: optimum, certified, in 4 of the 9 iterations that 10⁻⁶ takes at n = 4,096.
DUAL_GAP = 1e-4


def local_search(ctx: Context, most: int, unless: float | None = None, name: str = "min_error(local)") -> Candidate:
    """The dense p-Identity search alone (one restart), fitted when it runs: as many L-BFGS-B steps as the budget
    left allows, ``most`` at most (or the user's ``max_iterations``); skipped when fewer than LOCAL_MIN_STEPS fit."""
    n = ctx.n
    step, setup = costs.pidentity_step(n, max(4, n // 16)), costs.local_setup(n)

    def fitted(seconds: float) -> Candidate | None:
        steps = ctx.max_iterations or min(most, int((seconds - setup) / step))
        if steps < LOCAL_MIN_STEPS and ctx.max_iterations is None:
            return None
        run = lambda: ctx.optimize(ctx.dense, "min_error", max_iterations=steps,  # noqa: E731
                                   options={"engine": "local", "restarts": 1})
        return Candidate(name, setup + steps * step, run, unless=unless)
    return Candidate(name, setup + LOCAL_MIN_STEPS * step, lambda: None, unless=unless, fit=fitted)


def plain(ctx: Context, budget_seconds: float) -> list[Candidate]:
    """A plain (1-D) dense workload, or a stream one of at most 1,024 cells (:mod:`mmopt.auto.plan`'s docstring)."""
    n, norm, family = ctx.n, ctx.norm, ctx.family
    fast_family = family in ("prefix", "all_range") and n >= 512
    out = []
    if family in ("prefix", "all_range") and norm == "l1":
        # H_b in O(n), first: on workload.prefix(6,000) under ε-DP the dense closed forms (32 s each) left room for
        # the identity alone, and auto returned it at 244× the bound where the tree is 10.6× in milliseconds
        from mmopt.toeplitz.error import as_stream_workload
        out += _trees(n, lambda: as_stream_workload(ctx.workload, "optimize"))
    if not (fast_family and n > 1024):
        # past 1,024 cells the dense closed forms cost O(n³) for errors far above the weighted square root's
        # (prefix(4,096): 1.57× the bound against 1.005×) under Gaussian noise, and the tree's under Laplace noise
        # svd_strategy (G^{1/4}) beat every other closed form on low-rank predicate workloads (6.8 against auto's
        # 11.7 under a one-iteration budget; optimize's docstring listed it for auto); it takes W's own SVD
        # the wavelet needs n = 2^k: elsewhere it was tried, reported "Failed: wavelet" in every message, and its
        # estimate charged to the budget (a helper's audit)
        for name in ("identity", "hierarchical", *(("wavelet",) if n & (n - 1) == 0 else ()), "svd_strategy"):
            estimate = costs.svd_strategy(ctx.dense) if name == "svd_strategy" else costs.closed_dense(n)
            out.append(Candidate(name, estimate, lambda name=name: ctx.optimize(ctx.dense, name)))
    if family in ("prefix", "all_range") and norm == "l2":
        out.append(Candidate("weighted_sqrt", 0.05, lambda: ctx.optimize(ctx.workload, "weighted_sqrt")))
    if fast_family and norm == "l2":
        out.append(_dual(ctx, budget_seconds))
    else:
        out.append(Candidate("l2_approx", costs.l2_dense(n, family), lambda: ctx.optimize(ctx.dense, "l2_approx"),
                             share=1.0 if norm == "l2" else LOW_PRIOR_SHARE))
    if norm == "l1":
        out += _min_error(ctx, budget_seconds, sum(c.estimate for c in out))
    return out


def _min_error(ctx: Context, budget_seconds: float, before: float = 0.0) -> list[Candidate]:
    """min_error under Laplace noise: the O(n) search on prefix sums and all ranges from 512 cells, else the dense
    pipeline where it fits the budget, else the p-Identity search alone with the steps that fit. ``before``: the
    estimates of the candidates planned ahead of it, which the runner charges first (:mod:`mmopt.auto.run`)."""
    from mmopt.search.min_error_fast import FAST_MIN_N
    from mmopt.structured._checks import DENSE_LIMIT

    n = ctx.n
    if ctx.family in ("prefix", "all_range") and n >= FAST_MIN_N:
        return [_fast(ctx, ctx.workload)]
    out = [dense_min_error(ctx, budget_seconds)]
    full = out[0].estimate
    # the pipeline may not fit what the candidates before it leave (the runner's test): its p-Identity stage alone.
    # Tested against the whole budget, prefix(257) under 'fast' fell between the two (4.73 s of 5 fit alone, not
    # after the closed forms' 0.28) and returned H₂ at 4× the error of prefix(256) and prefix(263)
    if full > budget_seconds - before and n <= DENSE_LIMIT:
        out.append(local_search(ctx, LOCAL_STEPS))
    return out


def dense_min_error(ctx: Context, budget_seconds: float) -> Candidate:
    """The dense MinError pipeline, with its convex-iteration SDP stage (n ≤ 16) only from a "thorough" budget.

    Why: at n ≤ 16 the stage costs 3–15 CPU s where the rest of the pipeline takes 0.1–1.5 s, and in 15 workloads
    (prefix sums and all ranges at 4–16 cells, random 0/1 and Gaussian queries, [10·1ᵀ; I₄], [1ᵀ; I₈], a 4×3
    product, 2-way marginals of 2×2×3; a development run, one core) it lowered the error once, prefix(8) by 0.65 %
    (35.18 against 35.41): under the default budget a 12-cell workload spent 15 of its 17 CPU s there for nothing.
    """
    from mmopt.auto.budget import LEVELS
    sdp = budget_seconds >= LEVELS["thorough"]
    kw = {} if sdp else {"options": {"engine": "local"}}
    return Candidate("min_error", costs.min_error_dense(ctx.n, sdp=sdp),
                     lambda: ctx.optimize(ctx.dense, "min_error", **kw))


def _dual(ctx: Context, budget_seconds: float) -> Candidate:
    """The L2 optimum of prefix sums / all ranges by the tridiagonal dual, fitted when it runs: as many iterations
    as the budget left allows (200 at most, or the user's ``max_iterations``; at least 1), to the relative gap
    :data:`DUAL_GAP` (a certified 0.01 %: prefix(4,096) in 4 iterations, 6 s) or, from a "thorough" budget on,
    to :data:`mmopt._base.result.CERTIFIED_GAP` (9 iterations, 12 s); the user's ``tol`` wins."""
    from mmopt._base.result import CERTIFIED_GAP
    from mmopt.auto.budget import LEVELS
    from mmopt.toeplitz.dual import MAX_N

    n = ctx.n
    step = costs.l2_tridiagonal_step(n)
    too_big = f"n = {n:,} is past the tridiagonal dual's {MAX_N:,} cells" if n > MAX_N else None

    def fitted(seconds: float) -> Candidate | None:
        iterations = ctx.max_iterations or min(200, int(seconds / step) - 1)
        if iterations < 1:
            return None
        gap = ctx.tol or (CERTIFIED_GAP if budget_seconds >= LEVELS["thorough"] else DUAL_GAP)
        return Candidate("l2_approx", (iterations + 1) * step, lambda: _run_dual(ctx, iterations, gap))
    return Candidate("l2_approx", 2 * step, lambda: None, requires=too_big, fit=fitted)


def _run_dual(ctx: Context, iterations: int, gap: float):
    """solve_dual as an optimize-like result, scored by its own exact primal (no O(n³) re-evaluation)."""
    from mmopt._base.result import SUCCESS, OptimizeResult, reconcile
    from mmopt.strategy import Strategy
    from mmopt.toeplitz.dual import SOLVER_NAME, solve_dual

    workload = ctx.stream if ctx.stream is not None else ctx.workload
    sol = solve_dual(workload, tol=gap, max_iterations=iterations)
    message = (f"Certified within its tolerance {gap:g}: relative duality gap {sol.gap:.1e}."
               if sol.status == "optimal" else
               f"auto's budget allowed {iterations} iteration(s), ending with relative duality gap {sol.gap:.1e}; "
               "budget='thorough' (or more seconds) runs it to the certificate.")
    status, message, bound = reconcile(sol.primal, sol.dual, sol.status, message, tol=gap)
    m = workload.n_queries
    return OptimizeResult(Strategy(sol.matrix, "l2_approx"), "l2", sol.primal, bound, status, status in SUCCESS,
                          message, "l2_approx", SOLVER_NAME, sol.iterations, sol.seconds, sol.primal / m, bound / m,
                          sol.history, {"dual_bound": sol.dual, "gap": sol.gap, "tol": gap, "scored_by": "primal"})


def stream(ctx: Context, budget_seconds: float) -> list[Candidate]:
    """mmopt.toeplitz.prefix(n) / all_range(n) past 1,024 cells: structured candidates, nothing n×n but the
    tridiagonal dual's eigenvectors (and only while they fit)."""
    from mmopt.toeplitz.solve import optimize as toeplitz_optimize

    W, n = ctx.stream, ctx.n
    out = []
    if ctx.norm == "l2":
        for name in ("weighted_sqrt", "sqrt"):
            out.append(Candidate(name, costs.stream_closed(n, name), lambda name=name: toeplitz_optimize(W, name)))
        out.append(_dual(ctx, budget_seconds))
        return out
    out += _trees(n, lambda: W)
    out.append(_fast(ctx, W))
    return out


def _fast(ctx: Context, workload) -> Candidate:
    """min_error's O(n) p-Identity search on prefix sums / all ranges, fitted when it runs: its default search where
    the budget left pays for it, else as many steps a size of the ladder as it pays for (:data:`FAST_STEPS`; the
    user's ``max_iterations`` wins); skipped when not even the fewest fit. Priced whole, it was skipped past ~2,200
    cells under the default budget (past 512 under 'fast'), and auto returned the weighted tree: prefix(4,096) 9.19×
    the bound where 1,000 steps a size reach 6.40× in 41 CPU s, prefix(3,000) 9.06× (6.01×), all ranges of 3,000
    cells 7.90× (5.65×); under 'fast' prefix(1,024) 7.50× (5.31×, 300 steps) and prefix(2,048) 8.72× (6.46×, 100
    steps); :data:`mmopt.search.min_error_fast.CAPPED_SECONDS`. On ``mmopt.toeplitz.prefix(n)`` / ``all_range(n)``
    past 4,096 cells too, where release takes its p-Identity strategy as itself
    (:mod:`mmopt.search.pidentity_stream`): prefix(5,000) 9.44× → 6.70× (300 steps, 22 s). On the dense
    ``mmopt.workload.prefix(n)`` / ``all_range(n)`` past 4,096 cells it searches the stream twin, whose p-Identity
    strategy release, evaluate and answers_table take as itself with the dense workload (released in 0.5 s at 5,000
    cells, where the dense search's n×n strategy took 24 s to release and 24 s to evaluate): auto returned the
    weighted tree there at 9.44× the bound (past 4,096 cells only the closed-form dense families have a family)."""
    from mmopt.structured._checks import DENSE_LIMIT
    from mmopt.toeplitz.error import stream_twin
    n = ctx.n
    if n > DENSE_LIMIT and ctx.stream is None:
        workload = stream_twin(workload) or workload

    def sized(steps: int | None) -> Candidate:
        return Candidate("min_error", costs.min_error_fast(n, steps),
                         lambda: ctx.optimize(workload, "min_error", max_iterations=steps))

    def fitted(seconds: float) -> Candidate | None:
        if ctx.max_iterations is not None:
            return sized(ctx.max_iterations)
        return next((sized(steps) for steps in (None, *FAST_STEPS) if costs.min_error_fast(n, steps) <= seconds),
                    None)
    return Candidate("min_error", costs.min_error_fast(n, ctx.max_iterations or FAST_STEPS[-1]), lambda: None,
                     fit=fitted)


def _trees(n: int, stream_workload: Callable) -> list[Candidate]:
    """The tree of ranges at its best branching (:func:`mmopt.auto.trees.tree`), then with level weights searched on
    that branching (:func:`mmopt.auto.trees.weighted_tree`); ``stream_workload()`` gives the stream workload."""
    from mmopt.auto import trees
    from mmopt.toeplitz.trees import branchings
    chosen: dict = {}  # the branching the first picked and the bound it computed, for the second
    return [Candidate("tree", costs.tree_stream(n) * len(branchings(n)),
                      lambda: trees.tree(stream_workload(), chosen)),
            _weighted_tree(n, stream_workload, chosen)]


def _weighted_tree(n: int, stream_workload: Callable, chosen: dict) -> Candidate:
    """The level-weight search, fitted when it runs: its default search where the budget left pays for it, else the
    evaluations it pays for, skipped below :data:`TREE_MIN_EVALUATIONS`. Priced whole it was skipped at 10⁷ cells
    (~176 CPU s), and auto returned the unit-weight tree; on 10⁶ cells 25 evaluations reach 0.921× the unit-weight
    error on prefix sums (0.919× converged, 77) and 0.828× on all ranges (0.797×, 126)."""
    from mmopt.auto import trees

    def sized(evaluations: int | None) -> Candidate:
        return Candidate("tree_weighted", costs.tree_weights(n, evaluations),
                         lambda: trees.weighted_tree(stream_workload(), chosen, evaluations))

    def fitted(seconds: float) -> Candidate | None:
        if costs.tree_weights(n) <= seconds:
            return sized(None)
        evaluations = int(seconds / costs.tree_evaluation(n)) - costs.tree_levels(n)
        return sized(evaluations) if evaluations >= TREE_MIN_EVALUATIONS else None
    return Candidate("tree_weighted", costs.tree_weights(n, TREE_MIN_EVALUATIONS), lambda: None, fit=fitted)
