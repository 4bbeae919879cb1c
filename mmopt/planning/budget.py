"""The smallest budget that meets per-query accuracy targets (see :mod:`mmopt.planning`)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt._base.readonly import read_only
from mmopt._base.result import SUCCESS
from mmopt._base.rounding import down, up
from mmopt.planning.calibration import CALIBRATIONS, smallest_epsilon, variance_factor
from mmopt.privacy import Privacy

__all__ = ["Plan", "plan"]

KINDS = ("variance", "se", "halfwidth")


@dataclass(frozen=True)
class Plan:
    """The budget found, the strategy that meets every target with it, and the certified minimum budget.

    ``epsilon`` / ``lower_bound``: the ε found and the smallest ε any strategy could meet the targets with (at the
    same δ; 0, with a warning, where the route certifies no bound); ``ratio`` = epsilon / lower_bound ≥ 1 (inf
    then). ``rho`` (Gaussian noise only): the zCDP ρ the planned noise spends, as an upper bound — under
    ``calibration="release"`` the largest ρ OpenDP's calibration at ``privacy`` may charge
    (:func:`mmopt.accounting.max_rho`, to within the ulps by which OpenDP's map and mmopt's differ), under
    "analytic" Δ²/(2σ²) of the analytic mechanism; V/2 was reported, 1.4·10⁻⁶ below what the release charged (a
    helper's probe). ``rho_lower_bound``: V₋/2, below the ρ of any Gaussian noise that meets the targets.
    ``per_query_variance``: each query's variance at ``privacy``, re-evaluated exactly; every one is at most its
    entry of ``targets`` (variances). For a union of marginals under Gaussian noise both hold one entry
    per marginal (every cell of a marginal has the same variance), in the workload's order of marginals, targets
    given per query too; for
    grouping sets (:mod:`mmopt.hierarchy`) one entry per set, its largest group variance, in the sets' order.
    """

    privacy: Privacy
    strategy: object
    epsilon: float
    lower_bound: float
    rho: float | None
    rho_lower_bound: float | None
    targets: np.ndarray = field(repr=False)
    per_query_variance: np.ndarray = field(repr=False)
    status: str
    result: object = field(repr=False)

    @property
    def ratio(self) -> float:
        return self.epsilon / self.lower_bound if self.lower_bound > 0 else math.inf


def _to_variance(tau: np.ndarray, kind: str, alpha: float, delta: float, caller: str) -> np.ndarray:
    """Targets in ``kind``'s unit as variances, within :data:`mmopt.family.targets.TARGET_RANGE`."""
    from mmopt.family.targets import TARGET_RANGE  # lazy, as plan's other imports of the family layer
    var = _variances_of(tau, kind, alpha, delta, caller)
    low, high = TARGET_RANGE
    if np.any(var < low) or np.any(var > high):  # refused here in the caller's units, not by optimize's check
        raise ValueError(f"The 'targets' parameter of {caller} (kind={kind!r}) gives variances from {np.min(var):.3g} "
                         f"to {np.max(var):.3g}, outside [{low:g}, {high:g}]. Rescale the counts.")
    return var


def _variances_of(tau: np.ndarray, kind: str, alpha: float, delta: float, caller: str) -> np.ndarray:
    if kind == "se":
        return tau**2
    if kind == "halfwidth":
        if delta == 0:
            raise ValueError(f"The 'kind' parameter of {caller} is 'halfwidth', whose width is z·σ under Gaussian "
                             "noise; under Laplace noise (delta=0) plan by kind='se' or 'variance' (the exact Laplace "
                             "intervals are mmopt.answers'; their width is not a multiple of σ).")
        from mmopt.answers.intervals import half_width  # here: mmopt.answers's package import is not small
        z = half_width("gaussian", alpha, sd=1.0)   # z_{1−α/2}
        return (tau / z) ** 2
    return tau


def _gaussian_route(workload, targets, caller: str) -> bool:
    """Whether optimize's Gaussian product routes take ``workload`` with ``targets`` (for a Laplace refusal's
    remedy; a union the symmetry route refuses, or bad targets, say no)."""
    from mmopt.family.maxvar_routes import PER_QUERY_LIMIT, product_route
    from mmopt.family.targets import check_targets
    if workload.n_queries > PER_QUERY_LIMIT:  # plan refuses it under Gaussian noise too, whatever the targets
        return False
    try:
        per = targets if np.ndim(targets) == 0 else check_targets(targets, workload.n_queries, caller)
        return product_route(workload, per, caller) is not None
    except ValueError:
        return False


#: the max-variance searches' relative gap when ``tol`` is not given: ε grows at most linearly in the variance it
#: must reach (d log ε / d log V between 0.5 and 0.97 for δ ∈ [1e-9, 1e-3], V ∈ [1e-4, 1e4]; 0.5 under Laplace
#: noise), so a gap of 5·10⁻⁴ in V keeps the budget within 1.0005× of the certified minimum
PLAN_TOL = 5e-4

def plan(workload, targets, *, delta: float = 0.0, kind: str = "variance", alpha: float | None = None,
         tol: float | None = None, max_iterations: int | None = None, calibration: str = "release") -> Plan:
    """The smallest ε (at ``delta``) at which every query's variance meets its target, with the strategy.

    Under Gaussian noise (``delta`` > 0) the strategy is the certified minimax one, so ε is within ``tol`` of the
    smallest any strategy allows (``lower_bound``) — when its search succeeds; otherwise (``status`` not optimal,
    local_optimum or closed_form) ε still meets every target and a RuntimeWarning says it may be above the
    smallest. Under Laplace noise it is the smallest ε for the best of a heuristic's candidates (module
    docstring); ``lower_bound`` is then an L2 bound, loose in L1.

    Parameters
    ----------
    workload : Workload (dense, or a family of ≤ 4,096 cells); under Gaussian noise also, at any size, a union of
        marginals, a Kronecker product (≤ 10⁷ queries: each query's variance is checked) or a union of products
        past 4,096 cells — the routes :func:`mmopt.optimize` takes for ``objective="max_variance"``
    targets : float, array_like of shape (m,), or dict
        One target for every query, or one per query (row order of the workload), as ``kind`` says; for a union
        of marginals under Gaussian noise one number, a dict {attribute tuple: target} (one per marginal), or one
        per query equal within each marginal (its residual strategy gives a marginal's cells one variance, so
        targets that vary within a marginal are refused, naming it: pass each marginal's smallest; an array of
        one per marginal is refused too, pointing to the dict); one number for a Kronecker product; for a union
        past 4,096 cells one per query, equal on the queries its cell symmetries exchange (e.g. one number per
        term).
    delta : float, default 0
        0: Laplace noise (ε-DP); > 0: the analytic Gaussian mechanism at this δ.
    kind : {"variance", "se", "halfwidth"}
        What ``targets`` are: variances, standard errors, or half-widths of (1 − ``alpha``) intervals
        (Gaussian noise: half-width = z₁₋α/₂·σ).
    alpha : float in (0, 1), default None (0.05)
        The intervals' level, for ``kind="halfwidth"`` only (given with another kind it is refused, as the
        command line refuses --alpha: it was read by nothing).
    tol, max_iterations : as :func:`mmopt.optimize` (the max-variance search's gap and L2 solves); ``tol``
        defaults to :data:`PLAN_TOL`, which keeps ε within 1.0005× of the certified minimum (where ε is flat in
        the variance — δ ≥ 0.01 and loose targets — the search runs once more with the gap that slope asks for)
    calibration : {"release", "analytic"}, default "release"
        The noise the targets must hold for. "release": what :func:`mmopt.release` (and the records releases)
        draw at the budget found — OpenDP's calibration, whose Gaussian σ goes through zCDP and is 4–9 % above
        the analytic one (needs OpenDP); "analytic": the exact analytic Gaussian mechanism (and b = Δ/ε), for
        noise drawn elsewhere. ``lower_bound`` is the certified minimum under the same calibration.

    Returns
    -------
    Plan

    Examples
    --------
    >>> import mmopt
    >>> p = mmopt.plan(mmopt.workload.prefix(16), targets=4.0, kind="se", delta=1e-6)  # every prefix sum ±4 s.e.
    >>> bool((p.per_query_variance <= 16.0).all()), p.status, round(p.ratio, 3)
    (True, 'optimal', 1.0)
    """
    from mmopt.dense._workload_type import Workload, not_a_workload
    from mmopt.dispatch import as_implicit
    from mmopt.error import evaluate
    from mmopt.family.dense import _dense
    from mmopt.family.maxvar_routes import PER_QUERY_LIMIT, marginals_of, product_route
    from mmopt.family.targets import check_dense_size, check_targets, marginal_targets
    from mmopt.hierarchy.workload import HierarchyWorkload
    from mmopt.optimize import optimize
    from mmopt.structured.residual.planner import per_marginal_targets
    from mmopt.structured.workloads import ImplicitWorkload
    from mmopt.toeplitz.error import StreamWorkload
    from mmopt.workload import _remember, structure_of

    caller = "plan"
    default_tol = tol is None
    workload = as_implicit(workload)  # RecordsRelease.workload and the residual layer's marginals, as optimize
    if not isinstance(workload, Workload | ImplicitWorkload | HierarchyWorkload | StreamWorkload):
        raise not_a_workload(workload, name="workload", caller=caller)  # named here, not as optimize's
    tol = PLAN_TOL if tol is None else v.check_real(tol, name="tol", caller=caller, low=0.0, high=1.0,
                                                    low_open=True, high_open=True)
    if max_iterations is not None:  # named here: optimize's own check named optimize
        max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller, low=1)
    delta = v.check_real(delta, name="delta", caller=caller, low=0.0, high=1.0, high_open=True)
    from mmopt.privacy import LARGE_DELTA
    if delta >= LARGE_DELTA:  # plan builds its Privacy itself, so Privacy's own warning stayed silent (a helper's
        # audit: delta=0.5 planned ε 2.83 without a word, where evaluate --delta 0.5 warned)
        warnings.warn(f"{caller}: delta={delta:g} lets the guarantee fail outright with probability up to {delta:g} "
                      "(a mechanism that publishes one record in full meets (0, 1/n)-DP); delta is usually far below "
                      "1/n for n records, e.g. 1e-6. Omit delta for pure ε-DP (Laplace).", UserWarning, stacklevel=2)
    kind = v.check_choice(kind, name="kind", caller=caller, choices=KINDS)
    if alpha is not None and kind != "halfwidth":
        raise ValueError(f"The 'alpha' parameter of {caller} is the level of kind='halfwidth' intervals; "
                         f"kind={kind!r} reads none. Got alpha={alpha!r}: drop it, or pass kind='halfwidth'.")
    if alpha is not None:  # at most ½, named plan's (0.9 was refused as half_width's); lazy as _variances_of's
        from mmopt.answers.intervals import check_alpha
        alpha = check_alpha(alpha, caller)
    alpha = 0.05 if alpha is None else alpha
    calibration = v.check_choice(calibration, name="calibration", caller=caller, choices=CALIBRATIONS)
    unit = Privacy(1.0, delta) if delta > 0 else Privacy(1.0)
    from mmopt.hierarchy.workload import HierarchyWorkload
    grouped = isinstance(workload, HierarchyWorkload)
    if grouped and delta == 0:
        raise ValueError(f"{caller}: grouping sets over hierarchies are planned under Gaussian noise; give delta > 0 "
                         "(or plan their queries as a union of products, W.to_implicit(), under Laplace noise: a "
                         "heuristic there).")
    # the per-marginal route is the residual (Gaussian) optimum; on a workload of other queries the dict's own
    # refusal (check_targets: it needs marginals) is the one to give, not 'give delta > 0', which led to it
    if isinstance(targets, dict) and delta == 0 and not grouped and marginals_of(workload) is not None:
        raise ValueError(f"The 'targets' parameter of {caller} is a dict (one target per marginal), which is planned "
                         "under Gaussian noise: give delta > 0, or one target per query (a list) for Laplace noise.")
    marginals = marginals_of(workload) if delta > 0 and not grouped else None
    routed = False  # optimize's product routes (mmopt.family.maxvar_routes.product_route), which plan must take too:
    # it had re-derived them without one Kronecker product, so prefix(16) ⊗ prefix(16) ran the dense minimax (101 s)
    # where optimize certifies in milliseconds, and a product past the dense limit was refused
    if delta > 0 and not grouped and marginals is None and not isinstance(targets, dict):
        m = workload.n_queries
        if m > PER_QUERY_LIMIT:  # before τ is allocated: plan checks every query's variance
            # optimize's max-variance routes take it only as a product (a 1-D workload past 10⁷ queries has more
            # than 4,096 cells, which optimize refuses too: that remedy failed; a helper's audit)
            also = (" or use mmopt.optimize(..., objective='max_variance') for the largest variance alone"
                    if product_route(workload, targets if np.ndim(targets) == 0 else 1.0, caller) is not None else "")
            raise ValueError(f"{caller}: '{workload.name}' has {m:,} queries; plan checks each one's variance against "
                             f"its target, up to {PER_QUERY_LIMIT:,} queries. Plan a coarser workload{also}.")
        per_query = check_targets(targets, m, caller)  # once: the routed branch's τ too
        routed = product_route(workload, targets if np.ndim(targets) == 0 else per_query, caller) is not None
    if grouped:  # one target per grouping set (every group of a set has the same target)
        from mmopt.hierarchy.maxvar import set_targets
        tau = _to_variance(set_targets(workload, targets, caller), kind, alpha, delta, caller)
        # in the commutant of their symmetries when exchangeable (certified), else the tree families' search
        res = optimize(workload, privacy=unit, targets=tau, tol=tol, max_iterations=max_iterations, verbose=False)
    elif marginals is not None:  # unions of marginals at any d: one target and one variance per marginal
        given = per_marginal_targets(marginals, marginal_targets(marginals, targets, caller), caller)
        tau = _to_variance(given, kind, alpha, delta, caller)
        res = optimize(workload, privacy=unit, targets=dict(zip(marginals.sets, tau.tolist(), strict=True)),
                       tol=tol, max_iterations=max_iterations, verbose=False)
    elif routed:  # one Kronecker product, a dense workload built from one, a union of them past the dense limit
        # (one target per exchangeable query class), prefix sums / all ranges of ≤ 4,096 cells
        tau = _to_variance(per_query, kind, alpha, delta, caller)
        one = np.ndim(targets) == 0  # a product's route takes one number; τ is every query's
        res = optimize(workload, privacy=unit, targets=float(tau[0]) if one else tau, tol=tol,
                       max_iterations=max_iterations, verbose=False)
    else:
        if isinstance(targets, dict):  # not marginals (those took their branch): the dict's own message
            check_targets(targets, workload.n_queries, caller)
        check_dense_size(workload, caller, gaussian=delta > 0)
        dense = _dense(workload, "max_variance")  # its rows are built once, by the search
        if dense is not workload and structure_of(workload) is workload:
            # the twin keeps the product structure it came from, as mmopt.workload's dense products do: without it
            # an implicit union of marginals lost the Laplace per-marginal weights (ε 2.6421 where its dense build
            # got 2.4866; a helper's audit)
            dense = _remember(dense, workload)
        if not dense.knows_rows:  # was refused as optimize's objective='max_variance'
            remedy = "Build it with mmopt.Workload.from_matrix(W)."
            if delta == 0 and _gaussian_route(workload, targets, caller):  # (the rows were the wrong remedy)
                remedy = ("Plan it under Gaussian noise (delta > 0), whose route takes this workload without its "
                          "rows, or build it with mmopt.Workload.from_matrix(W).")
            raise ValueError(f"The 'workload' parameter of {caller} must list its queries: '{dense.name}' holds only "
                             f"its Gram, and each query's variance needs its row. {remedy}")
        tau = _to_variance(check_targets(targets, dense.n_queries, caller), kind, alpha, delta, caller)
        # under Laplace noise the search is a heuristic over an L2 bound: optimize's own looser gap unless asked
        # (PLAN_TOL there: all ranges of 256 cells 16.4 CPU s against 10.2, the same ε, the bound 0.004 % higher)
        laplace_tol = None if delta == 0 and default_tol else tol
        res = optimize(dense, privacy=unit, targets=tau, tol=laplace_tol, max_iterations=max_iterations,
                       verbose=False)
    V, V_low = res.objective, res.lower_bound  # max vᵢ/τᵢ at unit variance factor (c = 1)
    eps = smallest_epsilon((1 - 1e-9) / V, delta, upper=True,  # a hair inside, so re-evaluation stays within
                            calibration=calibration)
    if V_low > 0:
        eps_low = smallest_epsilon(1.0 / V_low, delta, upper=False, calibration=calibration)
    else:  # no bound from this route (two irregular hierarchies): 0, the trivial one (was a ZeroDivisionError
        # after the whole search; a helper's audit)
        eps_low, V_low = 0.0, 0.0
        warnings.warn(f"{caller}: no lower bound on the budget for this workload (its route certifies none), so "
                      "lower_bound is 0 and ratio infinite: ε meets every target, how far it is from the smallest "
                      "budget is unknown.", RuntimeWarning, stacklevel=2)
    privacy = Privacy(eps, delta) if delta > 0 else Privacy(eps)
    c = variance_factor(eps, delta, calibration)  # the noise variance per unit Δ² the targets are checked at
    A = res.strategy
    # re-evaluated exactly at the budget found: each query's variance c·Δ²·wᵢ (AᵀA)⁺ wᵢᵀ (mmopt.error.evaluate),
    # or each marginal's cell variance in the residual algebra
    if grouped:  # each set's largest variance at the budget found, exact
        achieved = c * np.asarray(res.extra["set_variance"])
    elif marginals is not None:
        achieved = c * np.asarray(res.extra["per_marginal_variance"])  # one per marginal of W, copies too
    elif routed:  # each query's variance from the factors' (a product), the strategy's blocks
        # (orbit_maxvar.variances) or its Gram in prefix coordinates (mmopt.toeplitz.maxvar.variances), exact
        achieved = c * np.asarray(res.extra["per_query_variance"])
    else:
        # at the analytic factor, rescaled to the calibration's (the variance is linear in it)
        achieved = np.asarray(evaluate(dense, A, privacy, per_query=True).per_query_variance) * (
            c / privacy.variance_factor)
    if np.any(achieved > tau):
        raise ArithmeticError(f"{caller}: internal inconsistency — the planned strategy misses a target by "
                              f"{float(np.max(achieved / tau)) - 1:.2e} (relative). Please report this workload.")
    if default_tol and delta > 0 and res.status == "optimal" and 0 < eps_low < eps / (1 + PLAN_TOL):  # (under
        # Laplace noise the bound is an L2 one, loose in L1: no tolerance closes that gap; nor does tol close a
        # heuristic's, "local_optimum": the large-tree route ran its search and bound twice for the same figures)
        # ε flat in the variance (δ ≥ 0.01, loose targets): V's gap of 5·10⁻⁴ gave ε 1.0735× its bound (an auditor's
        # probe, prefix(16), target 425, δ = 0.05); once more with the gap that ε's own slope asks for
        tighter = max(1e-9, tol * PLAN_TOL / (8 * (eps / eps_low - 1)))  # (1/2, 1/4: 1.0006, 1.00046)
        return plan(workload, targets, delta=delta, kind=kind, alpha=None if kind != "halfwidth" else alpha,
                    tol=tighter, max_iterations=max_iterations, calibration=calibration)
    if res.status not in SUCCESS and eps_low > 0:  # feasible (checked above), but the search did not finish
        warnings.warn(f"{caller}: the strategy search ended '{res.status}', so ε = {up(eps)} meets every target but "
                      f"may be above the smallest budget (certified lower bound {down(eps_low)}, ratio "
                      f"{eps / eps_low:.4g}). Raise max_iterations, or loosen tol, and plan again"
                      + (" (should the symmetry route stall short of the optimum whatever the iterations, planning "
                         "the sets' queries unweighted, dataclasses.replace(W, weights=np.ones(len(W.sets)))"
                         ".to_implicit(), with each set's target repeated over its groups, runs the dense minimax "
                         "up to 4,096 cells; the weighted rows are not what a release of the sets gives)" if grouped
                         else "") + ".", RuntimeWarning, stacklevel=2)
    from mmopt._base.opendp import LARGE_EPSILON  # release warns at the same ε; plan returned 3.5e15 without a word
    if eps > LARGE_EPSILON:
        warnings.warn(f"{caller}: these targets need ε = {up(eps, 4)}, above {LARGE_EPSILON:g}: e^ε bounds how much "
                      "one record may change the output's probabilities, so at this budget the release protects no one "
                      "in practice. Loosen the targets (larger standard errors), or coarsen the workload.",
                      UserWarning, stacklevel=2)
    gaussian = delta > 0
    rho = None
    if gaussian:
        from mmopt.accounting._zcdp import max_rho
        rho = max_rho(eps, delta) if calibration == "release" else 1.0 / (2.0 * c)
    # tau read-only and the plan's own (kind='variance' kept the caller's array: editing it changed the plan)
    # the calibration the targets were met for travels with the result (and so with a saved plan): a plan made
    # 'analytic' and released through OpenDP missed its targets (variance 5.66 for 5) without a word (a probe)
    res = dataclasses.replace(res, extra=dict(res.extra) | {"plan_calibration": calibration})
    return Plan(privacy, A, eps, eps_low, rho, V_low / 2 if gaussian else None, read_only(tau), achieved, res.status,
                res)
