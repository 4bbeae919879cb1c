"""``optimize(W, method="residual")``, and the exact closure paths behind mmopt.evaluate / mmopt.svd_bound.

Notation: see README and :mod:`mmopt.structured.residual`. :func:`solve_residual` hands the multi-dimensional
search (:mod:`mmopt.multidim.search`) the closed-form residual strategy of :mod:`.planner`; the search then
re-evaluates it with :func:`mmopt.evaluate` and reconciles it with the SVD bound. :func:`closure_report` and
:func:`closure_bound` are what :func:`mmopt.structured.evaluate` and :func:`mmopt.structured.svd_bound` call
past the 2ᵈ-subset algebra's reach (d > 16): exact, in time polynomial in the downward closure.
"""

from __future__ import annotations

import math

from mmopt._base.solution import ImplicitSolution
from mmopt.structured._report import ImplicitErrorReport
from mmopt.structured.residual import closure as cl
from mmopt.structured.residual import error as er
from mmopt.structured.residual import spectrum as sp
from mmopt.structured.residual import split as spl
from mmopt.structured.residual.planner import plan
from mmopt.structured.residual.workload import as_marginal_workload


def _convert(workload, caller: str):
    try:
        return as_marginal_workload(workload, caller=caller)
    except ValueError:  # a closure past the size limit: not for this path
        return None


def marginal_form(workload) -> bool:
    """True for a (Gram-)union of marginals whose closure is within the size limit: the closed-form plan, no fit."""
    return _convert(workload, "marginal_form") is not None


def applies(workload) -> bool:
    """True for a (Gram-)union of marginals whose closure is within the size limit, and for any union of
    products whose residual subspaces (:mod:`.split`) are: the split strategy covers it."""
    return marginal_form(workload) or spl.required_subsets(workload) is not None


def solve_residual(workload, *, norm: str = "l2", restarts=None, seed=None, max_iterations=None, tol=None,
                   verbose: bool = False, n_jobs=None) -> ImplicitSolution:
    """The closed-form residual strategy for total squared error (:func:`.planner.plan`).

    A closed form: ``restarts``, ``seed``, ``max_iterations``, ``tol`` and ``n_jobs`` are accepted (the
    search passes them to every method) and unused. Status "optimal" only for Gaussian noise (L2), where the
    objective equals the SVD bound; under L1 the strategy is a heuristic candidate (reported as "closed_form",
    with a message saying so) unless it too meets the bound.
    """
    caller = "optimize(method='residual')"
    W = _convert(workload, caller)
    if W is None:
        return _solve_split(workload, norm, caller)
    p = plan(W, norm=norm)
    extra = {"residual_strategy": p.strategy, "closure_size": len(W.closure), "planned_objective": p.objective}
    return ImplicitSolution(p.strategy.to_implicit(), p.status, p.message, 0, None, lower_bound=p.lower_bound,
                            extra=extra)


def _solve_split(workload, norm: str, caller: str) -> ImplicitSolution:
    """The split strategy (:mod:`.split`) for a union of products that is not a union of marginals."""
    p = spl.split_plan(workload, norm)
    if p is None:
        raise ValueError(f"{caller} needs a union of products whose residual subspaces number at most "
                         f"{cl.MAX_INCIDENCES:,} (marginals, or products of prefix, range, predicate and total "
                         f"factors). '{workload.name}' has more.")
    family = ("optimal among split strategies (one basis of 1^⊥ per attribute, one weight per residual subspace), "
              "since every term has the same residual Gram on each attribute" if p.family_optimal else
              "a heuristic: the attributes' residual Grams differ between terms (or the noise is Laplace), so the "
              "per-attribute bases are fitted to their sum")
    message = (f"Split residual strategy: per-attribute fitted bases and a closed-form allocation over "
               f"{len(p.strategy.terms):,} residual subspaces; {family}.")
    extra = {"split_bases": p.bases, "closure_size": len(p.strategy.terms), "planned_objective": p.objective,
             "family_optimal": p.family_optimal}
    return ImplicitSolution(p.strategy, "closed_form", message, 0, None, extra=extra)


def split_report(workload, strategy, privacy, norm: str, *, floor, caller: str = "evaluate"):
    """An exact :class:`~mmopt.structured.analysis.ImplicitErrorReport` (method "split") for a split strategy
    (:mod:`.split`) on any union of products, or None when the strategy is not of that form.

    The total is exact; the largest query variance is a proven upper bound (Σ over subspaces of the per-factor
    maxima). Raises ValueError when the strategy does not support the workload or the error falls below the
    SVD bound (a numerical failure, never a result). ``floor()`` gives the workload's unit SVD bound (the caller's
    :mod:`mmopt.structured.bounds`, which itself builds on this module).
    """
    from mmopt.structured.strategies import sensitivity
    found = spl.unit_error(workload, strategy, caller=caller)
    if found is None:
        return None
    unit, worst = found
    s2, sens = sensitivity(strategy, "l2"), sensitivity(strategy, norm)
    floor = floor()
    if not math.isfinite(unit) or (s2.exact and s2.value**2 * unit < floor * (1 - 1e-9)):
        raise ValueError(f"{caller}: the computed error {unit!r} of '{strategy.name}' is below the SVD lower bound "
                         f"{floor / s2.value**2:.6g} or not finite: numerical failure. Check the strategy's "
                         "conditioning.")
    c = 1.0 if privacy is None else privacy.variance_factor
    scale = c * sens.value**2
    total, up, m = scale * unit, scale * max(worst), workload.n_queries
    return ImplicitErrorReport(
        workload=workload.name, strategy=strategy.name, privacy=privacy, shape=workload.shape,
        domain_size=workload.domain_size, n_queries=m, sensitivity=sens.value, sensitivity_exact=sens.exact,
        total_squared_error=total, total_exact=sens.exact, mean_squared_error=total / m, rmse=math.sqrt(total / m),
        max_variance=None, max_variance_upper=up, max_variance_exact=False, method="split", sensitivity_norm=norm)


def closure_bound(workload) -> float | None:
    """The exact unit SVD bound (Σ r_S √ν_S)² of an implicit marginal workload, or None outside the algebra."""
    W = _convert(workload, "svd_bound")
    return None if W is None else er.unit_bound(W)


def closure_report(workload, strategy, privacy, norm: str, *, caller: str = "evaluate"):
    """An exact :class:`~mmopt.structured.analysis.ImplicitErrorReport` (method "closure"), or None.

    Applies to a literal marginal workload and a strategy whose factor Grams are αI + βJ with equal column
    norms (residual strategies, M(θ), identity): totals, per-marginal maxima and Δ are then all exact. Raises
    ValueError when the strategy does not support the workload, or when Δ₂²·tr(G X⁺) falls below the SVD
    bound (a numerical failure, never a result).
    """
    W = _convert(workload, caller)
    if W is None or not W.literal:
        return None
    memo = sp._Memo()
    ell = sp.algebra_spectrum(strategy, W.closure, memo=memo)
    delta = None if ell is None else sp.algebra_sensitivity(strategy, norm, memo=memo)
    if delta is None:
        return None
    unit, per = er.unit_errors(W, ell, caller=caller)
    bound, d2 = er.unit_bound(W), sp.algebra_sensitivity(strategy, "l2", memo=memo)
    if not math.isfinite(unit) or d2**2 * unit < bound * (1 - 1e-9):
        raise ValueError(f"{caller}: the computed error {unit!r} of '{strategy.name}' is below the SVD lower bound "
                         f"{bound / d2**2:.6g} or not finite: numerical failure. Check the strategy's conditioning.")
    c = 1.0 if privacy is None else privacy.variance_factor
    scale = c * delta**2
    total, mx, m = scale * unit, scale * float(per.max()), W.n_queries
    return ImplicitErrorReport(
        workload=workload.name, strategy=strategy.name, privacy=privacy, shape=W.shape, domain_size=W.domain_size,
        n_queries=m, sensitivity=delta, sensitivity_exact=True, total_squared_error=total, total_exact=True,
        mean_squared_error=total / m, rmse=math.sqrt(total / m), max_variance=mx, max_variance_upper=mx,
        max_variance_exact=True, method="closure", sensitivity_norm=norm)
