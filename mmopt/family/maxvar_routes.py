"""The max-variance routes of structured workloads, which :mod:`mmopt.family.objectives` tries before its dense
minimax: unions of marginals (ResidualPlanner+'s closed-form bound), one Kronecker product factor by factor,
unions of Kronecker products in the commutant of their cell symmetries (and dense workloads that remember such a
product), grouping sets, prefix sums and all ranges in prefix coordinates (:mod:`mmopt.family.maxvar_ranges`). Each is
certified by its own dual.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from mmopt._base.result import SUCCESS, OptimizeResult, reconcile
from mmopt._base.rounding import down, up
from mmopt._base.solution import worst_status
from mmopt.family.call import Call, seed_record
from mmopt.family.maxvar_ranges import CALLER, gamma2_result, range_kind, range_minimax, run_ranges
from mmopt.family.targets import check_targets, dense_rows, marginal_targets

PER_QUERY_LIMIT = 10**7  # the product route lists each query's variance (plan's check) up to this many queries


def structured(workload, call: Call, norm: str, t0: float) -> OptimizeResult | None:
    """The first structured route that takes ``workload`` under ``call``, run; None when none does (then the dense
    minimax runs). Every route here is Gaussian (L2) except the tree families' search of grouping sets."""
    from mmopt.hierarchy.workload import HierarchyWorkload
    if isinstance(workload, HierarchyWorkload):
        from mmopt.family.hierarchy import exchangeable, max_variance_result
        from mmopt.hierarchy.release import _unweighted
        # the targets are on what a release gives, each group's total, unweighted (a set's weight scales its rows
        # in the total objective only): on the weighted rows a set of weight ½ was released at 4× its target, and a
        # set of weight 4 planned at 3.3× the ε it needed (a helper's audit)
        workload = _unweighted(workload)
        if norm == "l2" and exchangeable(workload):
            return _run_grouping_orbits(workload, call, t0)
        return max_variance_result(workload, call, norm, t0)
    if norm != "l2":
        return None
    if (marginals := marginals_of(workload)) is not None:
        return _run_marginals(marginals, call, t0)
    route = product_route(workload, call.targets)
    if route is None:
        return None
    kind, args = route
    if kind == "twin":
        return _run_twin(*args, call, t0)
    if kind == "orbits":
        return _run_orbits(workload, call, t0, *args)
    if kind == "product":
        return _run_product(workload, call, t0)
    return run_ranges(*args, workload.n_queries, call, t0)


def product_route(workload, targets, caller: str = CALLER) -> tuple[str, tuple] | None:
    """The Gaussian route past the marginals one that takes ``workload`` with ``targets``, as (kind, arguments):
    "twin" (a dense workload built from a product), "orbits" (a union of products past the dense limit),
    "product" (one Kronecker product), "ranges" (prefix sums, all ranges); None: the dense minimax. One decision
    for :func:`structured` and :func:`mmopt.planning.budget.plan`, which must take the same routes; a union the
    symmetry route cannot take (too large a block, targets unequal within a class) is refused naming ``caller``."""
    if (twin := _product_twin(workload, targets)) is not None:
        return "twin", twin
    if orbit_union(workload, targets):
        from mmopt.structured import orbit_maxvar as om
        red = om.reduce(workload, caller)  # (milliseconds: 5,120 cells, 65 classes in 0.01 CPU s)
        _equal_on_classes(red, workload, targets, caller)
        return "orbits", (red,)
    if _single_product(workload) and _one_target(targets) and _factors_fit(workload):  # (per-query targets: the
        return "product", ()  # dense minimax ≤ 4,096 cells, past it orbit_union's one target per class of queries)
    if (ranges := range_kind(workload)) is not None:
        return "ranges", ranges
    return None


def max_ratio(W, A, tau, norm: str) -> tuple[float, np.ndarray]:
    """(max_i vᵢ/τᵢ, v) of strategy A at unit privacy: vᵢ = Δ² wᵢ (AᵀA)⁺ wᵢᵀ, exactly from A (evaluate's
    per-query variances); a strategy that does not support every query scores inf. ``W``: the rows, as an array
    or as the dense Workload of them (built once by a caller that scores several strategies: from_matrix copies).

    From A, not AᵀA: the Gram's Cholesky carried κ(A)²·eps, so on rows scaled over 10^±3 the objective came out
    6.6·10⁻⁴ above evaluate's (and with targets below it, so plan found its own check inconsistent), and its
    eigendecomposition scored an invertible strategy inf (a helper's probe)."""
    from mmopt._base.guards import NumericalError, Unsupported
    from mmopt.dense._workload_type import Workload
    from mmopt.error import evaluate
    rows = W if isinstance(W, Workload) else Workload.from_matrix(W)
    try:
        variance = evaluate(rows, A, None, norm=norm, per_query=True).per_query_variance
    except (Unsupported, NumericalError):  # a query outside A's row space, or an error float64 cannot hold
        variance = np.full(rows.n_queries, np.inf)
    return float(np.max(variance / tau)), variance


def marginals_of(workload):
    """The literal marginal workload a product workload stands for, else None (then the dense search runs)."""
    from mmopt.dense._workload_type import Workload
    from mmopt.structured.residual.workload import as_marginal_workload
    from mmopt.structured.workloads import ImplicitWorkload
    if not isinstance(workload, ImplicitWorkload | Workload):
        return None
    M = as_marginal_workload(workload, caller=CALLER)  # a dense workload too, when it remembers its marginals
    return M if M is not None and M.literal else None


def _run_marginals(W, call: Call, t0: float) -> OptimizeResult:
    """Unions of marginals at any d: ResidualPlanner+'s max-variance residual strategy (the convex allocation of
    :func:`mmopt.structured.residual.plan`), certified by the closed-form minimax bound over marginal weights
    (:func:`mmopt.structured.residual.maxvar.dual_bound`)."""
    from mmopt.structured.residual import error as er
    from mmopt.structured.residual.maxvar import dual_bound
    from mmopt.structured.residual.planner import per_marginal_targets, plan
    from mmopt.structured.residual.strategy import sensitivity

    targets = marginal_targets(W, call.targets, CALLER)
    p = plan(W, objective="max_variance", norm="l2", targets=targets)
    tau = per_marginal_targets(W, targets, CALLER)
    bound, weights = dual_bound(W, tau)
    A = p.strategy
    _, per = er.unit_errors(W, A.weights**2 / W.closure.cells, caller=CALLER)
    per = per * sensitivity(A, "l2").value ** 2  # each marginal's cell variance at unit privacy
    ratio = float(np.max(per / tau))
    message = (f"Max-variance residual strategy (ResidualPlanner+'s ResPlanMax; {p.message}) against the closed-form "
               f"minimax bound over marginal weights: {up(ratio)} vs {down(bound)}.")
    status, message, bound = reconcile(ratio, bound, "optimal" if p.status == "optimal" else p.status, message,
                                       tol=call.tol or 1e-6)
    extra = {"objective": "max_variance", "targets": None if targets is None else dict(targets),
             "marginal_weights": weights, "per_marginal_variance": tuple(per.tolist()),  # W's order, copies too
             "marginal_variance": _largest_per_set(W.sets, per),
             "seed": seed_record(call.seed)}
    return OptimizeResult(A, "l2", ratio, bound, status, status in SUCCESS, message, "max_variance", p.solver, None,
                          time.perf_counter() - t0, ratio, bound, (), extra)


def _largest_per_set(sets, per) -> dict:
    """{set: its cell variance}; a set asked twice (stack(3*marginals, marginals)) keeps its largest: a dict of the
    pairs kept the last copy's, so the weighted copy's 9× larger variance went unreported."""
    out: dict = {}
    for S, value in zip(sets, per.tolist(), strict=True):
        out[S] = max(value, out.get(S, value))
    return out


def _single_product(workload) -> bool:
    from mmopt.structured.workloads import ImplicitWorkload
    return isinstance(workload, ImplicitWorkload) and len(workload.terms) == 1


def _one_target(targets) -> bool:
    """One number for every query: a scalar, or an array whose entries are all equal (as plan's τ of one target)."""
    if np.ndim(targets) == 0:
        return True
    t = np.asarray(targets)
    return t.dtype.kind in "fiu" and t.size > 0 and bool(np.all(t == t.flat[0]))


def _factors_fit(workload) -> bool:
    """Every factor within the dense limit: the product route runs the dense minimax on each (a factor of 4,100
    cells ran for minutes, where the whole workload is refused at once; a helper's probe)."""
    from mmopt.structured._checks import DENSE_LIMIT
    return all(n <= DENSE_LIMIT for n in workload.shape)


def _run_product(W, call: Call, t0: float) -> OptimizeResult:
    """One Kronecker product w·(W₁ ⊗ … ⊗ W_d) at any size: a query's variance under A₁ ⊗ … ⊗ A_d is w²∏ᵢ of its
    factors' (and Δ₂ multiplies), so the product of the factors' minimax strategies has largest variance
    w²∏ᵢ Vᵢ; the bound w²∏ᵢ gᵢ is certified because the L2 dual at product weights is the product of the factors'
    scale-optimised duals, each at least gᵢ (the argument of :mod:`mmopt.structured.dual_bound`). A factor of
    prefix sums or all ranges is solved in prefix coordinates (:func:`_range_minimax`, whose γ₂ dual T(λ, μ)² is
    of the same form), the others by the dense minimax over their rows."""
    from mmopt.dense._strategy_core import Strategy
    from mmopt.search.max_variance import solve_max_variance
    from mmopt.structured.strategies import kron_strategy

    tau = 1.0 if call.targets is None else float(  # one number (product_route), or every query's equal one
        check_targets(call.targets, 1 if np.ndim(call.targets) == 0 else W.n_queries, CALLER, per=None)[0])
    term, tol = W.terms[0], call.tol or 1e-4
    d = len(term.factors)
    # the factors' gaps compound (1 − gap = ∏ᵢ gᵢ/Vᵢ), so each takes what those before it left of tol, the dense
    # ones first: beside total(2), whose gap is 0, all ranges of 256 cells get all of tol (at tol/2 they stopped at
    # 1,000 steps, user_limit)
    ranges = [range_kind(F) for F in term.factors]
    order = sorted(range(d), key=lambda i: ranges[i] is not None)
    solved, kept, iterations, statuses, solvers = [None] * d, 1.0, 0, [], []
    for j, i in enumerate(order):
        F, share = term.factors[i], 1.0 - ((1.0 - tol) / kept) ** (1.0 / (d - j))
        share = share if share > 0 else tol / d  # (a factor before ran out: no certificate, the others as before)
        if ranges[i] is not None:  # in prefix coordinates (prefix(1024) ⊗ total(2): > 60 s dense)
            A, v, sol = range_minimax(*ranges[i], np.ones(F.n_queries), share, call.max_iterations)
            solver = "mmopt-range-minimax"
        else:
            _, rows = dense_rows(F, CALLER)
            sol = solve_max_variance(rows, tol=share, max_iterations=call.max_iterations or 500)
            A = Strategy.from_gram(sol.gram, name="max_variance")
            v, solver = max_ratio(rows, A, np.ones(rows.shape[0]), "l2")[1], "mmopt-l2-newton"
        solved[i], kept = (A, v, sol.lower_bound), kept * sol.lower_bound / float(np.max(v))
        iterations += sol.iterations
        statuses.append(sol.status)
        solvers += [] if solver in solvers else [solver]
    factors, variances = [s[0] for s in solved], [s[1] for s in solved]
    upper = term.weight**2 / tau * float(np.prod([np.max(v) for v in variances]))
    lower = term.weight**2 / tau * float(np.prod([s[2] for s in solved]))
    strategy = kron_strategy(*factors, name="max_variance")
    status = worst_status(statuses)  # a factor that ran out of iterations is "user_limit", not "optimal_inaccurate"
    message = (f"Product of the factors' minimax strategies: largest variance{'' if tau == 1 else ' / target'} "
               f"{up(upper)} at unit privacy, certified lower bound {down(lower)} (product of the factors' L2 duals).")
    status, message, bound = reconcile(upper, lower, status, message, tol=call.tol or 1e-4)
    extra = {"objective": "max_variance", "targets": tau, "seed": seed_record(call.seed)}
    if W.n_queries <= PER_QUERY_LIMIT:  # each query's variance, w²∏ᵢ of its factors' (Δ₂ multiplies), row order
        extra["per_query_variance"] = term.weight**2 * functools.reduce(np.multiply.outer, variances).ravel()
    return OptimizeResult(strategy, "l2", upper, bound, status, status in SUCCESS, message, "max_variance",
                          "+".join(solvers), iterations, time.perf_counter() - t0, upper, bound, (), extra)


def _product_twin(workload, targets):
    """(twin, reduction) for a workload of ≤ 4,096 cells built from products (a dense one that remembers them —
    kron/stack/marginals — or an implicit one, its own twin) when its targets let the product routes take it —
    one number on a single product (reduction None: the factor-by-factor route), else equal on the queries its
    cell symmetries exchange — or None. The dense minimax took these: at 4,032 cells user_limit after 151 s with
    its bound 2.3 against 5.25, where the symmetry route certifies 5.255 in 4.6 s (and 5.314 in 12.6 s at 4,160
    cells, implicit)."""
    from mmopt.dense._workload_type import Workload
    from mmopt.structured import orbit_maxvar as om
    from mmopt.structured._checks import DENSE_LIMIT
    from mmopt.structured.workloads import ImplicitWorkload
    from mmopt.workload import structure_of
    if type(workload) is Workload:
        twin = structure_of(workload)
    else:  # a small implicit workload is its own twin: per-query targets on prefix(16) ⊗ prefix(16) ran the dense
        # minimax to ε 9.433 (optimal_inaccurate) where its dense twin's symmetry route certified 8.747 (a probe)
        twin = workload if isinstance(workload, ImplicitWorkload) and workload.domain_size <= DENSE_LIMIT else None
    if twin is None:
        return None
    if _single_product(twin) and _one_target(targets):  # (≤ 4,096 cells: every factor fits)
        return twin, None
    try:
        red = om.reduce(twin, CALLER)
    except ValueError:  # too many classes or blocks: the dense route, as before
        return None
    return (twin, red) if _class_targets(red, twin, targets) is not None else None


def _run_twin(twin, red, call: Call, t0: float) -> OptimizeResult:
    """The product routes on a dense workload's twin (:func:`_product_twin`), the strategy returned dense so that it
    goes wherever the dense workload goes (the orbit strategy's rows, ≤ 4,096 cells: at 4,032 cells 448 rows and
    3.6 CPU s for the whole route, where X^{1/2} had taken 21.9 s); objective, bound and status are the route's."""
    import dataclasses

    from mmopt.dense._strategy_core import Strategy
    if red is None:
        return _run_product(twin, call, t0)  # an implicit kron strategy: evaluate densifies it with a dense W
    res = _run_orbits(twin, call, t0, red)
    return dataclasses.replace(res, strategy=Strategy(res.strategy.matrix, name="max_variance"),
                               extra={**res.extra, "product_twin": twin.name})


def _equal_on_classes(red, W, targets, caller: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_class_targets`, or the refusal naming ``caller`` when the targets differ within a class."""
    if (both := _class_targets(red, W, targets)) is None:
        raise ValueError(f"The 'targets' parameter of {caller} must give equal targets to queries that '{W.name}''s "
                         "cell symmetries exchange (e.g. one target per term or per table); these differ within "
                         "a class of exchangeable queries.")
    return both


def _class_targets(red, W, targets) -> tuple[np.ndarray, np.ndarray] | None:
    """(per-query targets, per-class targets) when ``targets`` (None: all 1) are equal on every class of queries the
    reduction's cell symmetries exchange, else None."""
    tau = np.ones(W.n_queries) if targets is None else check_targets(targets, W.n_queries, CALLER)
    per_class = np.zeros(red.n_classes)
    per_class[red.query_class] = tau
    return (tau, per_class) if np.array_equal(per_class[red.query_class], tau) else None


def orbit_union(workload, targets) -> bool:
    """A union of Kronecker products too large for the dense search (a single product with one target has its
    factor-by-factor route)."""
    from mmopt.structured._checks import DENSE_LIMIT
    from mmopt.structured.workloads import ImplicitWorkload
    return isinstance(workload, ImplicitWorkload) and workload.domain_size > DENSE_LIMIT and \
        not (_single_product(workload) and _one_target(targets))


def _run_orbits(W, call: Call, t0: float, red=None) -> OptimizeResult:
    """A union of Kronecker products at any size whose cell symmetries leave small blocks (sf1: 29,440 cells, 312
    blocks of ≤ 400): the minimax in the commutant, certified by the γ₂ dual at symmetric weights
    (:mod:`mmopt.structured.orbit_maxvar`). Targets must be equal on queries the symmetries exchange. ``red``: W's
    reduction, when the caller has it."""
    from mmopt.structured import orbit_maxvar as om
    from mmopt.structured.orbit_strategy import OrbitStrategy

    red = red if red is not None else om.reduce(W, CALLER)
    tau, per_class = _equal_on_classes(red, W, call.targets, CALLER)
    sol = om.solve(red, per_class, tol=call.tol or 1e-4, max_iterations=call.max_iterations or 1_000)
    A = OrbitStrategy(red.orbits, red.combinations, sol.blocks)
    variance = sol.class_variance[red.query_class] * A.sensitivity_squared()  # exact, from the blocks
    how = (f"Minimax in the commutant of the workload's cell symmetries ({red.n_classes:,} query classes, "
           f"{len(red.combinations):,} blocks)", "(γ₂ dual at symmetric weights) ")
    return gamma2_result(A, variance, tau, sol, how, "mmopt-orbit-minimax", call, t0)


def _run_grouping_orbits(W, call: Call, t0: float) -> OptimizeResult:
    """Grouping sets whose level matrices fit: :func:`_run_orbits` on the union of Kronecker products they are
    (one target per set, repeated over its groups), with each set's largest variance (a releasable OrbitStrategy,
    certified; the tree families' search of :mod:`mmopt.hierarchy.maxvar` was 1.06× on the 3,143 counties)."""
    import dataclasses

    from mmopt.hierarchy import maxvar as mv
    tau = mv.set_targets(W, 1.0 if call.targets is None else call.targets, CALLER)
    res = _run_orbits(W.to_implicit(), dataclasses.replace(call, targets=np.repeat(tau, W.set_sizes)), t0)
    ends, v = np.cumsum(W.set_sizes), res.extra["per_query_variance"]
    res.extra.update(family="orbits", set_targets=tau,
                     set_variance=[float(np.max(v[e - k:e])) for e, k in zip(ends, W.set_sizes, strict=True)])
    return res
