r"""The factorization norm γ(F) of a workload, computed exactly through the L2 program (Program 5.2).

Notation: see README and ``docs/factorization.md``. The workload F = W is m×n (m queries, n cells). A
*factorization* F = R·M splits it into a measurement M (the strategy A, p×n) and a reconstruction R (m×p);
the factorization mechanism releases R(M h + z) with z Gaussian at M's L2 sensitivity ‖M‖_{1→2} (the
largest column L2 norm), and its expected squared error per query is c·‖R‖_F²·‖M‖_{1→2}²/m. The
*factorization norm* (Edmonds, Nikolov & Ullman,
STOC 2020, call it γ_F) is

.. math:: \gamma(F) = \min_{F = RM} \|R\|_F \, \|M\|_{1\to 2} / \sqrt{m},

normalised by √m, so one 0/1 query repeated k times has γ = 1 whatever k (measure it once, copy it) while
the Gaussian mechanism on F directly (M = F, R = I) has the factor ‖I‖_F‖F‖_{1→2}/√k = √k.

**Identity.** γ(F)² = OPT/m with OPT = min tr(G X⁺) s.t. X ⪰ 0, diag X ≤ 1, range(G) ⊆ range(X),
G = FᵀF: Program 5.2 of Li et al. (PODS 2010), solved with a certificate by :mod:`mmopt.search.l2_fast`.

*Proof.* (≥) Take any F = RM. Both norms are homogeneous and R·M = (cR)(M/c), so scale to
‖M‖_{1→2} = 1; then X = MᵀM has X_jj = ‖M e_j‖² ≤ 1, and rows(F) ⊆ rows(M) gives range(G) ⊆ range(X).
Among all R with RM = F the least ‖R‖_F is attained by R₀ = F M⁺: F M⁺ M = F because M⁺M projects onto
rows(M) ⊇ rows(F), and any other solution is R₀ + Z with ZM = 0, i.e. rows(Z) ⊥ range(M) ⊇ rows(R₀)
(rows(R₀) ⊆ range(M⁺ᵀ) = range(M)), so ‖R₀ + Z‖_F² = ‖R₀‖_F² + ‖Z‖_F². Finally
‖F M⁺‖_F² = tr(M⁺ᵀ FᵀF M⁺) = tr(G M⁺M⁺ᵀ) = tr(G (MᵀM)⁺) = tr(G X⁺) ≥ OPT. (≤) Every feasible X has a
factor M = X^{1/2} with ‖M‖_{1→2}² = max X_jj ≤ 1, and R = F M⁺ satisfies RM = F because
rows(F) = range(G) ⊆ range(X) = rows(M), with ‖R‖_F² = tr(G X⁺). Dividing by m gives the identity. ∎

So γ(F)² is exactly mmopt's unit-privacy per-query error Δ₂(A)²·tr(G (AᵀA)⁺)/m (``evaluate(W, A,
norm="l2").mean_squared_error``) minimised over strategies, and the returned ``strategy`` is an optimal M.
Since OPT is linear in G, γ² = OPT(G/m) is computed from ``mean_gram`` (finite even for m = 2ⁿ − 1).

**Products.** For W = w·(W₁ ⊗ … ⊗ W_d), OPT(G) = w²∏ᵢ OPT(Gᵢ), hence γ(W) = w·∏ᵢ γ(Wᵢ) (m = ∏ mᵢ).
(≤) X = ⊗ Xᵢ of feasible Xᵢ is feasible (diag(⊗Xᵢ) = ⊗ diag Xᵢ ≤ 1, ranges multiply) and
tr(G X⁺) = w²∏ tr(Gᵢ Xᵢ⁺). (≥) :func:`mmopt.multidim.kron.product_lower_bound`'s proof: for any dual
λᵢ ≥ 0, w²∏ᵢ gᵢ(λᵢ) ≤ OPT(G); each factor's program has a Slater point (X = I/2), so sup gᵢ = OPT(Gᵢ).
Therefore the product of certified per-factor brackets is a certified bracket for the product.

References: C. Li, M. Hay, V. Rastogi, G. Miklau, A. McGregor, PODS 2010, §5.2 (Program 5.2);
A. Edmonds, A. Nikolov, J. Ullman, "The power of factorization mechanisms in local and central
differential privacy", STOC 2020 (γ_F); T. Lee, A. Shraibman, R. Špalek, CCC 2008 (γ₂ is multiplicative
under tensor products).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mmopt._base.validation import check_int, check_matrix, check_real
from mmopt.dense._strategy_core import Strategy
from mmopt.optimize import optimize
from mmopt.structured import _checks as ck
from mmopt.structured.analysis import evaluate as structured_evaluate
from mmopt.structured.strategies import kron_strategy
from mmopt.structured.workloads import ImplicitWorkload
from mmopt.workload import Workload

__all__ = ["FactorizationNorm", "factorization_norm"]

_CALLER = "factorization_norm"
_STATUS_RANK = ("optimal", "optimal_inaccurate", "user_limit")


@dataclass(frozen=True, eq=False)
class FactorizationNorm:
    """γ(F) with a certified bracket ``lower`` ≤ γ(F) ≤ ``upper`` (see :func:`factorization_norm`).

    Attributes
    ----------
    value : float
        ‖R‖_F‖M‖_{1→2}/√m of the returned factorization (M = ``strategy``, R = W M⁺), re-evaluated
        exactly with :func:`mmopt.evaluate`; equal to ``upper``.
    lower, upper : float
        A certified lower bound (the L2 dual bound, or the SVD bound if higher) and the attained value.
    gap : float
        (upper − lower)/upper; at most the L2 program's relative duality gap.
    n_queries : int
        m, exact.
    strategy : Strategy or mmopt.structured.ImplicitStrategy
        The measurement M = A (column norms ≤ 1); a product of per-factor optima for a product workload.
    solver : str
        The L2 engine used ("mmopt-l2-newton").
    seconds : float
    status : str
        "optimal" when every L2 solve certified its gap ≤ ``tol``; else the worst solve's status.
    method : {"dense", "product"}
    factors : tuple of float
        Per-factor γ(Wᵢ) for a product workload (value = weight · ∏ factors); () for a dense one.
    """

    value: float
    lower: float
    upper: float
    gap: float
    n_queries: int
    strategy: Any = field(repr=False)
    solver: str
    seconds: float
    status: str = "optimal"
    method: str = "dense"
    factors: tuple[float, ...] = ()

    @property
    def squared(self) -> float:
        """γ(F)² = OPT/m: the optimal per-query error Δ₂²·tr(G X⁺)/m at unit privacy."""
        return self.value**2


def _dense(W: Workload, tol: float, max_iterations: int | None):
    """(γ, lower γ, strategy, status, solver) from one certified L2 solve on W's Gram."""
    res = optimize(W, method="l2_approx", tol=tol, max_iterations=max_iterations, options={"engine": "fast"})
    # objective_per_query is Δ₂(A)²·tr(G X⁺)/m of A re-evaluated by mmopt.evaluate: γ² of the factorization.
    return (math.sqrt(res.objective_per_query), math.sqrt(res.lower_bound_per_query), res.strategy,
            res.status, res.solver)


def factorization_norm(workload, *, tol: float = 1e-8, max_iterations: int | None = None) -> FactorizationNorm:
    r"""γ(F) = min_{F=RM} ‖R‖_F‖M‖_{1→2}/√m, exactly, as √(OPT/m) of the L2 program (module docstring).

    Parameters
    ----------
    workload : Workload, mmopt.structured.ImplicitWorkload or array_like of shape (m, n)
        F. An implicit workload must be a single product w·(W₁ ⊗ … ⊗ W_d) (solved factor by factor), or a
        union over at most 4,096 cells (solved densely).
    tol : float in (0, 1), default 1e-8
        Target relative duality gap of each L2 solve; γ's bracket is then relatively ≤ tol/2 wide per solve.
    max_iterations : int or None
        Newton-step budget per solve (default 500); a spent budget gives ``status="user_limit"``.

    Returns
    -------
    FactorizationNorm
        ``value`` (= ``upper``, attained by ``strategy``), the certified ``lower``, ``gap`` and ``status``.

    Raises
    ------
    TypeError
        If ``workload`` is a Strategy or not a matrix.
    ValueError
        If ``workload`` is all zeros, an implicit union over more than 4,096 cells, or a parameter is out
        of range.

    Notes
    -----
    .. math:: \gamma(F)^2 = \frac{1}{m}\min\{\operatorname{tr}(G X^+) : X \succeq 0,\ \operatorname{diag} X
              \le 1\},\quad G = F^\top F

    with M = X^{1/2} (= ``strategy``) and R = F M⁺; proof in the module docstring. For a product,
    γ(w⊗ᵢWᵢ) = w∏ᵢγ(Wᵢ).

    Examples
    --------
    >>> import numpy as np, mmopt
    >>> F = np.tile([1.0, 1.0, 0.0, 1.0], (5, 1))          # one 0/1 query repeated k = 5 times
    >>> round(factorization_norm(F).value, 9)             # measure once, copy: γ = 1
    1.0
    >>> round(factorization_norm(mmopt.workload.prefix(2)).value ** 2 * 2, 6)   # OPT = (3 + √5)/2
    2.618034
    """
    t0 = time.perf_counter()
    tol = check_real(tol, name="tol", caller=_CALLER, low=0.0, high=1.0, low_open=True, high_open=True)
    if max_iterations is not None:
        max_iterations = check_int(max_iterations, name="max_iterations", caller=_CALLER)
    if isinstance(workload, Strategy):
        raise TypeError(f"The 'workload' parameter of {_CALLER} must be a Workload, an implicit workload or a "
                        "query matrix F. Got a Strategy; pass its matrix (strategy.matrix) to factorize it.")
    from mmopt.hierarchy.workload import HierarchyWorkload  # lazy: the hierarchy layer imports the search layer
    if isinstance(workload, HierarchyWorkload):  # grouping sets as the union of products they are (a helper's audit:
        workload = workload.to_implicit()       # "must be a 2-D array … Got an entry HierarchyWorkload")
    workload = _as_listed(workload)
    if isinstance(workload, ImplicitWorkload):
        if workload.is_product:
            return _product(workload, tol, max_iterations, t0)
        if workload.domain_size > ck.DENSE_LIMIT:
            raise ValueError(
                f"The 'workload' parameter of {_CALLER} must be a single product or a union over at most "
                f"{ck.DENSE_LIMIT:,} cells. Got '{workload.name}', a union of {len(workload.terms)} products over "
                f"{workload.domain_size:,} cells, whose L2 program is N×N. For an upper bound on γ² use "
                "mmopt.optimize(W, method='union', norm='l2').objective_per_query.")
        workload = workload.to_workload()
    elif not isinstance(workload, Workload):
        workload = Workload.from_matrix(check_matrix(workload, name="workload", caller=_CALLER), name="F")
    value, lower, A, status, solver = _dense(workload, tol, max_iterations)
    return FactorizationNorm(value, min(lower, value), value, (value - min(lower, value)) / value,
                             workload.n_queries, A, solver, time.perf_counter() - t0, status, "dense")


def _as_listed(workload):
    """A records-layer marginal workload as its implicit union, a stream workload (mmopt.toeplitz.prefix(n)) as its
    dense twin: the forms :func:`mmopt.evaluate` takes them in (they were refused as "must be a 2-D array")."""
    from mmopt.dispatch import as_implicit  # lazy: dispatch sits above the search layer
    from mmopt.toeplitz.error import StreamWorkload
    workload = as_implicit(workload)
    if isinstance(workload, StreamWorkload):
        if workload.n > ck.DENSE_LIMIT:
            raise ValueError(f"The 'workload' parameter of {_CALLER} is {workload.name}, past {ck.DENSE_LIMIT:,} "
                             "cells, whose L2 program is n×n. Its optimum is certified by mmopt.optimize(W, "
                             "privacy=mmopt.Privacy(ε, δ)) (the tridiagonal dual), γ² = objective/m at unit privacy.")
        workload = workload.to_workload()
    return workload


def _product(workload: ImplicitWorkload, tol: float, max_iterations: int | None, t0: float) -> FactorizationNorm:
    """γ(w⊗ᵢWᵢ) = w∏ᵢγ(Wᵢ): one certified L2 solve per factor, bracket = product of the brackets."""
    term = workload.terms[0]
    values, lowers, strategies, statuses, solvers = [], [], [], [], set()
    for i, Wi in enumerate(term.factors):
        value, lower, A, status, solver = _dense(Wi, tol, max_iterations)
        values.append(value)
        lowers.append(lower)
        strategies.append(Strategy(A.matrix, f"L2({Wi.name})"))
        statuses.append(status)
        solvers.add(solver)
        if not (np.isfinite(value) and value > 0):  # a factor W_i ≠ 0 always has γ > 0
            raise ArithmeticError(f"{_CALLER}: factor {i} ('{Wi.name}') gave γ = {value!r}.")
    A = kron_strategy(*strategies, name=f"L2({workload.name})")
    # Re-evaluate the product exactly (never multiply solver numbers only): Δ₂(⊗Aᵢ) = ∏Δ₂(Aᵢ), X⁺ = ⊗Xᵢ⁺.
    report = structured_evaluate(workload, A, norm="l2")
    value = math.sqrt(report.mean_squared_error)
    lower = min(term.weight * math.prod(lowers), value)
    worst = max(statuses, key=lambda s: _STATUS_RANK.index(s) if s in _STATUS_RANK else len(_STATUS_RANK))
    return FactorizationNorm(value, lower, value, (value - lower) / value, workload.n_queries, A,
                             "+".join(sorted(solvers)), time.perf_counter() - t0, worst, "product", tuple(values))
