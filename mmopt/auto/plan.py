"""The candidates of ``optimize(method="auto")``, in the order they run, each with its expected cost.

Notation: see README. :func:`plan` lists, for one workload and noise, every method that applies, cheapest and most
likely to win first: the closed forms and the structured (product, residual) searches, then the searches that cost
seconds to minutes. :mod:`mmopt.auto.run` decides from each :class:`Candidate`'s estimate (:mod:`mmopt.auto.costs`)
and from the incumbent whether it runs. Three shapes of workload:

* a product domain (``mmopt.workload.kron/stack/marginals``, census workloads): residual, coupled (Gaussian noise,
  1- and 2-way unions on d ≥ 3 attributes of one size, not marginals), kron, union, marginals;
  then, only where the products are far from the bound and the domain has at most
  :data:`mmopt.structured._checks.DENSE_LIMIT` cells, the dense l2_approx (Gaussian noise) or min_error (Laplace);
* a plain (1-D) dense workload: under Laplace noise on prefix sums and all ranges the tree of ranges H_b at its
  best branching (O(n), :mod:`mmopt.toeplitz.trees`); the dense closed forms (on prefix sums and all ranges only up
  to 1,024 cells); the weighted square root (Gaussian noise, prefix sums and all ranges); l2_approx (on prefix sums
  and all ranges from 512 cells by the tridiagonal dual,
  :func:`mmopt.toeplitz.dual.solve_dual`); min_error under Laplace noise (on prefix sums and all ranges from 512
  cells the O(n) p-Identity search, :mod:`mmopt.search.min_error_fast`; else the dense pipeline where it fits, and the
  p-Identity search alone with a step budget that fits where it does not);
* ``mmopt.toeplitz.prefix(n)`` / ``all_range(n)``: the dense plan up to 1,024 cells; beyond, the structured closed
  forms, the tridiagonal dual while n² numbers fit, and under Laplace noise the tree of ranges and the p-Identity
  search.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mmopt.auto import costs
from mmopt.multidim.scoring import DEFAULT_RESTARTS

__all__ = ["Candidate", "Context", "plan"]

#: Dense candidates on a product domain run only when the best structured one is more than this × the bound
#: under Gaussian noise (the structured optimum is usually certified there) …
NEAR_L2 = 1.001
#: … and, under Laplace noise, the dense p-Identity search only past FAR_RATIO × the SVD bound (measured,
#: benchmarks/bench_auto.py: 2-D ranges 32×32, kron 6.61× the bound, HDMM's best of 25 restarts 6.50×, the
#: local search 5.20× after 300 steps; the L1 optimum itself is often > 2× the Gaussian SVD bound).
FAR_RATIO = 2.0
#: L-BFGS-B steps of the dense p-Identity search "auto" runs in place of the full pipeline on a 1-D workload: at
#: most LOCAL_STEPS (the pipeline's own budget at this size), and not at all when the budget leaves fewer than
#: LOCAL_MIN_STEPS. On a product domain it runs beside the product searches, PRODUCT_LOCAL_STEPS at most (2-D
#: ranges 32×32: 5.20× the bound after 300 steps, ~7 s; HDMM's best of 25 restarts 6.50×).
LOCAL_STEPS, LOCAL_MIN_STEPS, PRODUCT_LOCAL_STEPS = 3000, 100, 300
#: OPT_M runs only when the budget left pays for this many L-BFGS-B iterations (a run takes 30–1,500).
MARGINALS_MIN_ITERATIONS = 30
#: The largest share of the budget a candidate that rarely wins may take: OPT_M under Gaussian noise lost to the
#: residual or product strategy on every workload of bench_auto (by 3–1,150 %); l2_approx under Laplace noise
#: is kept for its dual bound (valid for both noises), its strategy 5–45× the ε-DP candidates'.
LOW_PRIOR_SHARE = 0.05
#: Where the coupled split strategy ran (1- and 2-way unions of prefix, range or predicate products, Gaussian
#: noise; it attaches the certified dual bound), OPT_⊗ and OPT_+ run only past this ratio to the bound: on 1+2-way
#: prefix marginals they lost to it by 29–100 % (benchmarks/results/bench_auto.txt), and a skipped one can gain
#: at most this much.
COUPLED_NEAR = 1.05
#: The relative duality gap "auto" runs the tridiagonal dual to below a "thorough" budget: within 0.01 % of the
#: optimum, certified, in 4 of the 9 iterations that 10⁻⁶ takes at n = 4,096.
DUAL_GAP = 1e-4


@dataclass(frozen=True)
class Candidate:
    """One method ``auto`` may run: ``run()`` returns what the method returns (an OptimizeResult or an
    ImplicitSolution), to be scored by :func:`mmopt.multidim.scoring.score`.

    ``estimate``: expected CPU seconds; ``share``: the largest fraction of the budget it may take; ``unless``: the
    incumbent's ratio to the bound at or below which it is not worth running (None: always worth it);
    ``requires``: a reason it cannot run, decided at plan time (None if it can); ``fit``: for a search whose
    length is chosen when it runs, the candidate sized to the seconds left (None when too few are left), and then
    ``estimate`` is that of its shortest useful run; ``charge``: for a search sized by a work budget rather than
    its estimate, the cost of what it ran by the same model (the runner charges it in place of ``estimate``).
    """

    name: str
    estimate: float
    run: Callable[[], Any] = field(repr=False)
    share: float = 1.0
    unless: float | None = None
    requires: str | None = None
    fit: Callable[[float], Candidate | None] | None = field(default=None, repr=False)  # sized to the seconds left
    charge: Callable[[Any], float] | None = field(default=None, repr=False)  # the modeled cost of what it ran


@dataclass(frozen=True)
class Context:
    """What every candidate needs: the user's workload and its shapes, the noise, and the common parameters."""

    workload: Any
    structure: Any  # mmopt.structured.ImplicitWorkload, or None for a plain dense workload
    stream: Any     # mmopt.toeplitz.StreamWorkload, or None
    norm: str
    seed: Any
    tol: float | None
    max_iterations: int | None
    restarts: int | None
    n_jobs: int | None
    dense_optimize: Callable = field(repr=False)  # mmopt.optimize

    @property
    def n(self) -> int:
        return self.workload.domain_size

    @property
    def family(self) -> str | None:
        if self.stream is not None:
            return self.stream.kind
        return getattr(self.workload, "family", None) if self.structure is None else None

    @functools.cached_property
    def dense(self):
        """The workload as a dense Workload, built once on first use (n×n) and shared by every dense candidate,
        so that the caches keyed by the workload object (its Gram's eigendecomposition) serve them all."""
        from mmopt.structured.workloads import ImplicitWorkload
        if self.stream is not None:
            return self.stream.to_workload()
        return self.structure.to_workload() if isinstance(self.workload, ImplicitWorkload) else self.workload

    def optimize(self, workload, method: str, **kw):
        if method in ("l2_approx", "min_error"):  # the iterative candidates take the user's limit and tolerance
            # (auto dropped them on dense workloads: max_iterations=1 still ran 1,350 iterations)
            kw = {"max_iterations": self.max_iterations, "tol": self.tol} | kw
        kw = {"norm": self.norm, "seed": self.seed, "verbose": False, "n_jobs": self.n_jobs} | kw
        with warnings.catch_warnings():  # a candidate in the other norm is auto's own choice (it is scored in
            # the budget's norm and kept only if best there), not the user's mismatch
            warnings.filterwarnings("ignore", message=".* only scores its strategy in", category=UserWarning)
            return self.dense_optimize(workload, method=method, **kw)


def plan(ctx: Context, budget_seconds: float) -> list[Candidate]:
    """Every candidate that applies to ``ctx``, in the order they are tried (see the module docstring)."""
    if ctx.structure is not None:
        return _products(ctx, budget_seconds)
    if ctx.stream is not None and ctx.n > 1024:
        return _stream(ctx, budget_seconds)
    return _plain(ctx, budget_seconds)


def _products(ctx: Context, budget_seconds: float) -> list[Candidate]:
    from mmopt.multidim.search import SOLVERS
    from mmopt.structured._checks import DENSE_LIMIT
    from mmopt.structured.residual.coupled_fit import applies as coupled_applies
    from mmopt.structured.residual.solve import applies as residual_applies

    S, norm = ctx.structure, ctx.norm
    kw = {"norm": norm, "seed": ctx.seed, "max_iterations": ctx.max_iterations, "tol": ctx.tol, "verbose": False,
          "n_jobs": ctx.n_jobs}

    def structured(name):
        restarts = ctx.restarts or DEFAULT_RESTARTS[name]
        return lambda: SOLVERS[name](S, restarts=restarts, **kw)

    restarts = {k: ctx.restarts or DEFAULT_RESTARTS[k] for k in DEFAULT_RESTARTS}
    out = []
    if norm == "l1":  # first, the floor every Laplace search should clear, scored factor-wise at any size: 3-way
        # marginals on (2,)¹³ under 'fast' returned the residual strategy at 3.72× the identity's error, OPT_⊗ and
        # OPT_M skipped on their estimates; at ≤ 4,096 cells the dense identity it replaces was priced at 10 s there
        out.append(Candidate("identity", costs.identity_product(S), lambda: _identity(S)))
    if residual_applies(S):  # first: on a union of marginals under Gaussian noise it meets the bound
        out.append(Candidate("residual", costs.residual(S), structured("residual")))
    near = None
    # d ≥ 3 only (on two attributes OPT_⊗ is already certified on the benchmarks); marginals: residual meets the bound
    if len(S.shape) >= 3 and norm == "l2" and coupled_applies(S, norm) and not _marginals_only(S):
        out.append(Candidate("coupled", costs.coupled(S), structured("coupled")))
        near = COUPLED_NEAR
    out.append(Candidate("kron", costs.kron(S, norm, restarts["kron"]), structured("kron"), unless=near))
    if len(S.terms) > 1:
        out.append(Candidate("union", costs.union(S, norm, restarts["union"]), structured("union"), unless=near))
    if len(S.shape) <= 15:
        out.append(_marginals(S, restarts["marginals"], kw, share=LOW_PRIOR_SHARE if norm == "l2" else 1.0))
    n = ctx.n
    if n > DENSE_LIMIT:
        return out
    if norm == "l2":
        out.append(Candidate("l2_approx", costs.l2_dense(n), lambda: ctx.optimize(ctx.dense, "l2_approx"),
                             unless=NEAR_L2))
        return out
    if n <= 256:  # the whole MinError pipeline costs seconds here (its own L2 start gives the dual bound)
        out.append(Candidate("min_error", costs.min_error_dense(n), lambda: ctx.optimize(ctx.dense, "min_error")))
        return out
    rank = sum(math.prod(_rank(f) for f in t.factors) for t in S.terms)
    # rank(W) ≤ Σ_j ∏ᵢ rank Wᵢ⁽ʲ⁾ < N: the full-rank p-Identity strategies do not fit a rank-deficient W
    # (2-way marginals on (4,)⁵: 10.80× the bound in 7 s against OPT_M's 7.46×)
    misfit = f"W has rank ≤ {rank:,} < {n:,} cells: full-rank p-Identity strategies do not fit it"
    local = _local(ctx, PRODUCT_LOCAL_STEPS, unless=FAR_RATIO)
    out.append(local if rank >= n else dataclasses.replace(local, requires=misfit))
    return out


def _marginals(S, restarts: int, kw: dict, share: float) -> Candidate:
    """OPT_M, fitted when it runs: its runs' L-BFGS-B iterations bounded by what the budget left pays for
    (:func:`mmopt.auto.costs.marginals_iteration`), since their number is not known before they run; charged the
    iterations it ran at that price (logged "expected" is :func:`mmopt.auto.costs.marginals` or that room, the
    smaller: charged that, a 'fast' run took 3.8 CPU s against 0.76 charged; a helper's probe). Skipped when fewer
    than MARGINALS_MIN_ITERATIONS fit."""
    from mmopt.multidim.search import SOLVERS
    estimate = costs.marginals(S, restarts)

    def fitted(seconds: float) -> Candidate | None:
        # room kept for the certified dual bound after it (the last product candidate took all of the default
        # budget on 3-way marginals of (2,)¹³, and the 0.05-s certificate was skipped)
        seconds -= min(costs.dual_floor(S), 0.2 * seconds)
        iterations = int((seconds - costs.marginals_once(S)) / costs.marginals_iteration(S))
        if iterations < MARGINALS_MIN_ITERATIONS:
            return None
        run = lambda: SOLVERS["marginals"](S, restarts=restarts, iteration_budget=iterations, **kw)  # noqa: E731
        charge = lambda found: costs.marginals_once(S) + found.iterations * costs.marginals_iteration(S)  # noqa: E731
        return Candidate("marginals", min(estimate, seconds), run, share=share, charge=charge)
    return Candidate("marginals", estimate, lambda: None, share=share, fit=fitted)


def _identity(S):
    """The identity on every attribute, I₁ ⊗ … ⊗ I_d, as a closed-form candidate, its report handed over: Δ = 1 in
    both norms and X = I, so its error is tr(G) = Σⱼ wⱼ² ∏ᵢ ‖Wᵢ⁽ʲ⁾‖²_F, O(terms·d) (evaluate's general path took
    13.6 CPU s on the 4,950 terms of 2-way marginals of (8,)¹⁰⁰, where auto's whole run had taken 1.0 s)."""
    from types import SimpleNamespace

    from mmopt._base.solution import ImplicitSolution
    from mmopt.structured.bounds import gram_trace
    from mmopt.structured.strategies import kron_strategy
    total = gram_trace(S)
    A = kron_strategy(*[np.eye(n) for n in S.shape], name="identity")
    return ImplicitSolution(A, "closed_form", "Closed-form strategy: the identity on every attribute (built, not "
                            "searched).", 0, None,
                            extra={"report": SimpleNamespace(total_squared_error=total, total_exact=True)})


def _marginals_only(S) -> bool:
    """True when S is a union of marginals (the residual planner's form), by its own converter."""
    from mmopt.structured.residual.workload import as_marginal_workload
    try:
        return as_marginal_workload(S, caller="auto") is not None
    except ValueError:  # a union of marginals whose closure is past the planner's size limit
        return True


def _rank(factor) -> int:
    from mmopt.structured.factors import singular_values
    return int(np.count_nonzero(singular_values(factor)))


def _local(ctx: Context, most: int, unless: float | None = None, name: str = "min_error(local)") -> Candidate:
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


def _plain(ctx: Context, budget_seconds: float) -> list[Candidate]:
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
        for name in ("identity", "hierarchical", "wavelet", "svd_strategy"):
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
        return [Candidate("min_error", costs.min_error_fast(n),
                          lambda: ctx.optimize(ctx.workload, "min_error", max_iterations=ctx.max_iterations))]
    full = costs.min_error_dense(n)
    out = [Candidate("min_error", full, lambda: ctx.optimize(ctx.dense, "min_error"))]
    # the pipeline may not fit what the candidates before it leave (the runner's test): its p-Identity stage alone.
    # Tested against the whole budget, prefix(257) under 'fast' fell between the two (4.73 s of 5 fit alone, not
    # after the closed forms' 0.28) and returned H₂ at 4× the error of prefix(256) and prefix(263)
    if full > budget_seconds - before and n <= DENSE_LIMIT:
        out.append(_local(ctx, LOCAL_STEPS))
    return out


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


def _stream(ctx: Context, budget_seconds: float) -> list[Candidate]:
    """mmopt.toeplitz.prefix(n) / all_range(n) past 1,024 cells: structured candidates, nothing n×n but the
    tridiagonal dual's eigenvectors (and only while they fit)."""
    from mmopt.toeplitz.solve import optimize as toeplitz_optimize

    W, n = ctx.stream, ctx.n
    out = []
    if ctx.norm == "l2":
        for name in ("weighted_sqrt", "sqrt"):
            out.append(Candidate(name, 0.05 + 1e-6 * n, lambda name=name: toeplitz_optimize(W, name)))
        out.append(_dual(ctx, budget_seconds))
        return out
    out += _trees(n, lambda: W)
    out.append(Candidate("min_error", costs.min_error_fast(n),
                         lambda: ctx.optimize(W, "min_error", max_iterations=ctx.max_iterations)))
    return out


def _trees(n: int, stream: Callable) -> list[Candidate]:
    """The tree of ranges at its best branching (:func:`mmopt.auto.trees.tree`), then with level weights searched on
    that branching (:func:`mmopt.auto.trees.weighted_tree`); ``stream()`` gives the stream workload."""
    from mmopt.auto import trees
    from mmopt.toeplitz.trees import branchings
    chosen: dict = {}  # the branching the first picked and the bound it computed, for the second
    return [Candidate("tree", costs.tree_stream(n) * len(branchings(n)), lambda: trees.tree(stream(), chosen)),
            Candidate("tree_weighted", costs.tree_weights(n), lambda: trees.weighted_tree(stream(), chosen))]
