"""optimize's route into the hierarchy family: grouping sets over hierarchies under Gaussian noise.

Notation: see README and :mod:`mmopt.hierarchy`. It takes a :class:`~mmopt.hierarchy.HierarchyWorkload` for
"auto" and "hierarchy" (other methods get its union of Kronecker products), and a union of Kronecker products of
level matrices (:mod:`mmopt.hierarchy.detect`) for "hierarchy", and for "auto" under Gaussian noise when one of
its attributes has more than two levels (plain marginals stay with ResidualPlanner's route, certified optimal).
Where "auto"'s result is not certified and the cells are few (:data:`DENSE_CELLS`), l2_approx on the dense twin
supplies the certified bound, and the message says when its dense optimum is better.
"""

from __future__ import annotations

import math
import time

from mmopt._base.result import SUCCESS, OptimizeResult, reconcile
from mmopt._base.rounding import up
from mmopt.family.call import Call, check_common, seed_record

CALLER = "optimize"
METHODS = ("hierarchy",)


def _detected(workload):
    from mmopt.hierarchy.detect import from_implicit
    return from_implicit(workload)


def takes(workload, method, call: Call) -> bool:
    from mmopt.hierarchy.workload import HierarchyWorkload
    if isinstance(workload, HierarchyWorkload):
        return True
    if method == "hierarchy":
        return True
    if method != "auto" or call.norm != "l2" or call.objective != "total":
        return False
    W = _detected(workload)
    return W is not None and any(h.depth > 1 for h in W.attributes)


def _refuse_dense(workload, method, call: Call) -> None:
    """A dense method on grouping sets past the dense limit, refused with their own family first: the product
    family's refusal listed 'datacube' and 'coupled', which refuse them, and 'kron', which took 49 s to reach 1.65×
    what 'hierarchy' certified in 0.0 s (a helper's audit)."""
    from mmopt.family.routes import PRODUCT_METHODS
    from mmopt.structured._checks import DENSE_LIMIT
    N = math.prod(workload.shape)
    if isinstance(method, str) and method not in PRODUCT_METHODS and N > DENSE_LIMIT:
        use = ("method='union' or 'kron' (ε-DP: the union of Kronecker products the sets stand for)"
               if call.norm == "l1" else "method='hierarchy' (their own family, certified) or 'auto'")
        raise ValueError(f"{CALLER}: method={method!r} needs a dense workload, but these grouping sets are over "
                         f"{N:,} cells (more than {DENSE_LIMIT:,}). Use {use}.")


def run(workload, method, call: Call) -> OptimizeResult:
    from mmopt.hierarchy.workload import HierarchyWorkload
    # checked here, in optimize's words: max_iterations=0 reached hierarchy.solve, which never iterated
    check_common(call, CALLER)
    given = isinstance(workload, HierarchyWorkload)
    if given and (method not in ("auto", "hierarchy") or (method == "auto" and call.norm == "l1")):
        # other methods, and ε-DP (whose L1 sensitivity the families here do not have in closed form): the union of
        # Kronecker products of level matrices the workload stands for, through the product family's searches
        _refuse_dense(workload, method, call)
        return call.optimize(workload.to_implicit(), method=method,
                             norm=call.norm, seed=call.seed, tol=call.tol, max_iterations=call.max_iterations,
                             verbose=call.verbose, budget=call.budget)
    W = workload if given else _detected(workload)
    if W is None:
        raise ValueError(f"{CALLER}(method='hierarchy'): the workload is not a union of grouping sets (Kronecker "
                         "products whose factors are 0/1 level matrices: each column one 1, nested across terms). "
                         "Build it with mmopt.hierarchy.grouping_sets, or use method='auto'.")
    if call.norm == "l1":
        raise ValueError(f"{CALLER}(method={method!r}) on grouping sets over hierarchies runs under Gaussian noise "
                         "(L2 sensitivity) only. Use privacy=Privacy(epsilon, delta) with delta > 0, or, for ε-DP, "
                         "the union of Kronecker products (workload.to_implicit()) with method='union' or 'kron'.")
    res = solve_result(W, call)
    if method == "auto" and res.status != "optimal" and W.level_entries() <= LEVEL_ENTRIES \
            and math.prod(W.shape) <= DENSE_CELLS:
        res = _with_dense_optimum(W, res, call)
    return res


#: cells up to which "auto" also runs the dense (ε,δ)-optimum when the families here are not certified, for its
#: bound and its objective: on two irregular trees × a flat attribute (264 cells) the node family gave 1.606× the
#: optimum l2_approx certifies in 0.1 s, with no bound at all and nothing said (a helper's oracle audit)
DENSE_CELLS = 1024


def _with_dense_optimum(W, res: OptimizeResult, call: Call) -> OptimizeResult:
    """The family's result with l2_approx's certified bound from the dense twin, and its objective said."""
    import dataclasses
    dense = call.optimize(W.to_implicit(), method="l2_approx", norm="l2", seed=call.seed, tol=call.tol,
                          max_iterations=call.max_iterations, verbose=call.verbose)
    bound = max(res.lower_bound, dense.lower_bound)
    if dense.success and dense.objective < res.objective * (1 - 1e-6):
        # the dense optimum is returned: the records and SQL releases measure a dense strategy too
        # (mmopt.hierarchy.dense_release); the family's figures stay in extra
        families = dict(res.extra.get("families", {})) | {"hierarchy": {"objective": res.objective,
                                                                        "lower_bound": res.lower_bound,
                                                                        "status": res.status, "method": res.method}}
        note = (f" On these {math.prod(W.shape):,} cells the hierarchy families reach {res.objective:.6g} "
                f"({res.objective / dense.objective:.6g}× it): auto returns l2_approx's dense strategy.")
        return dataclasses.replace(dense, lower_bound=bound, message=dense.message + note,
                                   lower_bound_per_query=bound / W.n_queries, seconds=res.seconds + dense.seconds,
                                   extra=dict(dense.extra) | {"families": families})
    tol = call.tol if call.tol is not None else 1e-6
    certified = res.status in SUCCESS and bound > 0 and res.objective <= bound * (1 + max(tol, 1e-6))
    status = "optimal" if certified else res.status
    families = dict(res.extra.get("families", {})) | {"l2_approx": {"objective": dense.objective,
                                                                    "lower_bound": dense.lower_bound,
                                                                    "status": dense.status}}
    note = (f" l2_approx on the dense twin ({math.prod(W.shape):,} cells) reaches {dense.objective:.6g} "
            f"({dense.status}), no better; the bound is the best certified one.")
    m = W.n_queries
    return dataclasses.replace(res, lower_bound=bound, status=status, success=status in SUCCESS,
                               message=res.message + note, lower_bound_per_query=bound / m,
                               seconds=res.seconds + dense.seconds, extra=dict(res.extra) | {"families": families})


def solve_result(W, call: Call) -> OptimizeResult:
    """The family's optimum with its certificates, as an OptimizeResult."""
    from mmopt.hierarchy import bound as hb
    from mmopt.hierarchy.node_solve import solve_nodes
    from mmopt.hierarchy.solve import solve
    t0 = time.perf_counter()
    kw = {} if call.tol is None else {"tol": call.tol}
    if call.max_iterations is not None:
        kw["max_iterations"] = call.max_iterations
    sol = solve(W, **kw)
    bounds = [b for b in (hb.lower_bound(W), hb.lower_bound(W, sol.type_weights)) if b is not None]
    bound, how = max(bounds, default=(0.0, "none (two irregular hierarchies)"))
    families = {"residual": {"objective": sol.objective, "family_bound": sol.family_bound,
                             "converged": sol.converged, "iterations": sol.iterations}}
    best, strategy, iterations, converged = "residual", sol.strategy, sol.iterations, sol.converged
    objective = sol.objective
    # the residual family holds the optimum of balanced trees (proof in mmopt.hierarchy.solve); on skewed ones
    # the node family's per-node weights close most of the gap, so it runs whenever the residual is not certified
    if not (bound > 0 and sol.objective <= bound * (1 + 1e-6)) and any(not h.regular for h in W.attributes):
        nodes = solve_nodes(W, **({"max_iterations": call.max_iterations} if call.max_iterations else {}))
        families["nodes"] = {"objective": nodes.objective, "converged": nodes.converged,
                             "evaluations": nodes.evaluations}
        if nodes.objective < objective:
            best, strategy, iterations, converged = "nodes", nodes.strategy, nodes.evaluations, nodes.converged
            objective = nodes.objective
    m = W.n_queries
    certified = converged and bound > 0 and objective <= bound * (1 + 1e-6)
    status = "optimal" if certified else ("local_optimum" if converged else "user_limit")
    what = {"residual": "the hierarchical residual family's optimum",
            "nodes": "the weighted node family's best (a heuristic search)"}[best]
    message = (f"{what[0].upper() + what[1:]}; {objective / bound:.4f}× the lower bound ({how})." if bound > 0
               else f"{what[0].upper() + what[1:]}; no global bound for two irregular hierarchies.")
    if bound > 0:  # the bound reported never exceeds the objective (it did by 1e-15 relative), and an objective
        # below it by more than round-off is an internal error, as on every other path
        status, message, bound = reconcile(objective, bound, status, message)
    extra = {"family": best, "families": families, "bound_method": how, "seed": seed_record(call.seed),
             "grouping_sets": len(W.sets)}
    return OptimizeResult(strategy, "l2", objective, bound, status, status in ("optimal", "local_optimum"),
                          message, "hierarchy", None, iterations, time.perf_counter() - t0,
                          objective_per_query=objective / m, lower_bound_per_query=bound / m, extra=extra)


#: dense level-matrix entries up to which grouping sets take the symmetry route (160 MB)
LEVEL_ENTRIES = 20_000_000


def exchangeable(W) -> bool:
    """Grouping sets whose dense level matrices fit in :data:`LEVEL_ENTRIES`, at any number of cells: their max
    variance is minimised in the commutant of their cell symmetries (siblings of a tree are exchangeable;
    :mod:`mmopt.structured.orbit_maxvar`), certified to the optimum; larger trees keep :mod:`mmopt.hierarchy.maxvar`'s
    heuristic. (It also asked for more than 4,096 cells, as if a dense search took the smaller ones; none does: at
    4,092 cells the heuristic gave 5.7888, user_limit, bound 5.1647, in 96 s, against the certified 5.6351 at 4,098
    in 8.8 s.)"""
    return W.level_entries() <= LEVEL_ENTRIES


def max_variance_result(W, call: Call, norm: str, t0: float) -> OptimizeResult:
    """objective="max_variance" (per-set ``targets``) on grouping sets under Gaussian noise, where not
    :func:`exchangeable` (:mod:`mmopt.family.maxvar_routes` takes those): the search and bound of
    :mod:`mmopt.hierarchy.maxvar`."""
    from mmopt.hierarchy import maxvar as mv
    if norm != "l2":
        raise ValueError(f"{CALLER}(objective='max_variance') on grouping sets over hierarchies runs under Gaussian "
                         "noise only. Use privacy=Privacy(epsilon, delta) with delta > 0.")
    tau = mv.set_targets(W, 1.0 if call.targets is None else call.targets, CALLER)
    # max_iterations: per L-BFGS run of the search (it was ignored: one iteration ran the whole search)
    A, ratio, family, scores, converged = mv.solve_maxvar(W, tau, call.max_iterations or 2_000)
    bound = mv.lower_bound(W, tau)
    certified = bound is not None and ratio <= bound * (1 + (call.tol or 1e-6))
    status = "optimal" if certified else ("local_optimum" if converged else "user_limit")
    what = "largest variance" if call.targets is None else "largest variance / target"
    message = (f"The {family} family's search (a heuristic): {what} {up(ratio)} at unit privacy"
               + (f", {ratio / bound:.4f}× the certified lower bound." if bound else "; no bound for two irregular "
                  "hierarchies."))
    from mmopt.hierarchy import nodes as hn
    from mmopt.hierarchy.strategy import unit_variances
    variances = hn.node_variances(A, W) if isinstance(A, hn.NodeStrategy) else unit_variances(A, W)
    extra = {"objective": "max_variance", "family": family, "families": scores, "set_targets": tau,
             "set_variance": [float(v.max()) for v in variances], "seed": seed_record(call.seed)}
    m = W.n_queries
    bound = 0.0 if bound is None else bound
    return OptimizeResult(A, "l2", ratio, bound, status, status in SUCCESS, message, "max_variance", None, None,
                          time.perf_counter() - t0, objective_per_query=ratio, lower_bound_per_query=bound,
                          extra=extra | {"queries": m})
