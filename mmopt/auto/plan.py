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

The candidates on one attribute (the last two shapes) are built in :mod:`mmopt.auto.line`; :class:`Candidate` and
:class:`Context` are defined in :mod:`mmopt.auto.candidate`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from mmopt.auto import costs
from mmopt.auto.candidate import LOW_PRIOR_SHARE, Candidate, Context
from mmopt.auto.line import dense_min_error, local_search, plain, stream
from mmopt.multidim.scoring import DEFAULT_RESTARTS

__all__ = ["Candidate", "Context", "plan"]

#: Dense candidates on a product domain run only when the best structured one is more than this × the bound
#: under Gaussian noise (the structured optimum is usually certified there) …
NEAR_L2 = 1.001
#: … and, under Laplace noise, the dense p-Identity search only past FAR_RATIO × the SVD bound (measured,
#: benchmarks/bench_auto.py: 2-D ranges 32×32, kron 6.61× the bound, HDMM's best of 25 restarts 6.50×, the
#: local search 5.20× after 300 steps; the L1 optimum itself is often > 2× the Gaussian SVD bound).
FAR_RATIO = 2.0
#: OPT_M runs only when the budget left pays for this many L-BFGS-B iterations (a run takes 30–1,500).
MARGINALS_MIN_ITERATIONS = 30
#: Where the coupled split strategy ran (1- and 2-way unions of prefix, range or predicate products, Gaussian
#: noise; it attaches the certified dual bound), OPT_⊗ and OPT_+ run only past this ratio to the bound: on 1+2-way
#: prefix marginals they lost to it by 29–100 % (benchmarks/results/bench_auto.txt), and a skipped one can gain
#: at most this much.
COUPLED_NEAR = 1.05
#: The dense p-Identity search's most steps beside the product searches (:func:`mmopt.auto.line.local_search`; 2-D
#: ranges 32×32: 5.20× the bound after 300 steps, ~7 s; HDMM's best of 25 restarts 6.50×).
PRODUCT_LOCAL_STEPS = 300


def plan(ctx: Context, budget_seconds: float) -> list[Candidate]:
    """Every candidate that applies to ``ctx``, in the order they are tried (see the module docstring)."""
    if ctx.structure is not None:
        return _products(ctx, budget_seconds)
    if ctx.stream is not None and ctx.n > 1024:
        return stream(ctx, budget_seconds)
    return plain(ctx, budget_seconds)


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
        out.append(_marginals(S, restarts["marginals"], kw, norm, share=LOW_PRIOR_SHARE if norm == "l2" else 1.0))
    n = ctx.n
    if n > DENSE_LIMIT:
        return out
    if norm == "l2":
        out.append(Candidate("l2_approx", costs.l2_dense(n), lambda: ctx.optimize(ctx.dense, "l2_approx"),
                             unless=NEAR_L2))
        return out
    if n <= 256:  # the whole MinError pipeline costs seconds here (its own L2 start gives the dual bound)
        out.append(dense_min_error(ctx, budget_seconds))
        return out
    rank = sum(math.prod(_rank(f) for f in t.factors) for t in S.terms)
    # rank(W) ≤ Σ_j ∏ᵢ rank Wᵢ⁽ʲ⁾ < N: the full-rank p-Identity strategies do not fit a rank-deficient W
    # (2-way marginals on (4,)⁵: 10.80× the bound in 7 s against OPT_M's 7.46×)
    misfit = f"W has rank ≤ {rank:,} < {n:,} cells: full-rank p-Identity strategies do not fit it"
    local = local_search(ctx, PRODUCT_LOCAL_STEPS, unless=FAR_RATIO)
    out.append(local if rank >= n else dataclasses.replace(local, requires=misfit))
    return out


def _marginals(S, restarts: int, kw: dict, norm: str, share: float) -> Candidate:
    """OPT_M, fitted when it runs: its runs' L-BFGS-B iterations bounded by what the budget left pays for
    (:func:`mmopt.auto.costs.marginals_iteration`), since their number is not known before they run; charged the
    iterations it ran at that price (logged "expected" is :func:`mmopt.auto.costs.marginals` or that room, the
    smaller: charged that, a 'fast' run took 3.8 CPU s against 0.76 charged; a helper's probe). Skipped when fewer
    than MARGINALS_MIN_ITERATIONS fit."""
    from mmopt.multidim.search import SOLVERS
    estimate, once = costs.marginals(S, restarts, norm), costs.marginals_once(S, norm)

    def fitted(seconds: float) -> Candidate | None:
        # room kept for the certified dual bound after it (the last product candidate took all of the default
        # budget on 3-way marginals of (2,)¹³, and the 0.05-s certificate was skipped)
        seconds -= min(costs.dual_floor(S), 0.2 * seconds)
        iterations = int((seconds - once) / costs.marginals_iteration(S))
        if iterations < MARGINALS_MIN_ITERATIONS:
            return None
        run = lambda: SOLVERS["marginals"](S, restarts=restarts, iteration_budget=iterations, **kw)  # noqa: E731
        charge = lambda found: once + found.iterations * costs.marginals_iteration(S)  # noqa: E731
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
