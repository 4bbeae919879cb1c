"""optimize's route into the hierarchy family: grouping sets over hierarchies under Gaussian noise.

Notation: see README and :mod:`mmopt.hierarchy`. It takes a :class:`~mmopt.hierarchy.HierarchyWorkload` for
"auto" and "hierarchy" (other methods get its union of Kronecker products), and a union of Kronecker products of
level matrices (:mod:`mmopt.hierarchy.detect`) for "hierarchy", and for "auto" under Gaussian noise when one of
its attributes has more than two levels (plain marginals stay with ResidualPlanner's route, certified optimal).
"""

from __future__ import annotations

import time

from mmopt._base.result import OptimizeResult
from mmopt.family.call import Call, seed_record

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


def run(workload, method, call: Call) -> OptimizeResult:
    from mmopt.hierarchy.workload import HierarchyWorkload
    given = isinstance(workload, HierarchyWorkload)
    if given and method not in ("auto", "hierarchy"):
        return call.optimize(workload.to_implicit(), method=method, norm=call.norm, seed=call.seed,
                             tol=call.tol, max_iterations=call.max_iterations, verbose=call.verbose)
    W = workload if given else _detected(workload)
    if W is None:
        raise ValueError(f"{CALLER}(method='hierarchy'): the workload is not a union of grouping sets (Kronecker "
                         "products whose factors are 0/1 level matrices: each column one 1, nested across terms). "
                         "Build it with mmopt.hierarchy.grouping_sets, or use method='auto'.")
    if call.norm == "l1":
        raise ValueError(f"{CALLER}(method={method!r}) on grouping sets over hierarchies runs under Gaussian noise "
                         "(L2 sensitivity) only. Use privacy=Privacy(epsilon, delta) with delta > 0, or, for ε-DP, "
                         "the union of Kronecker products (workload.to_implicit()) with method='union' or 'kron'.")
    return solve_result(W, call)


def solve_result(W, call: Call) -> OptimizeResult:
    """The family's optimum with its certificates, as an OptimizeResult."""
    from mmopt.hierarchy import bound as hb
    from mmopt.hierarchy.solve import solve
    t0 = time.perf_counter()
    kw = {} if call.tol is None else {"tol": call.tol}
    if call.max_iterations is not None:
        kw["max_iterations"] = call.max_iterations
    sol = solve(W, **kw)
    bounds = [b for b in (hb.lower_bound(W), hb.lower_bound(W, sol.type_weights)) if b is not None]
    bound, how = max(bounds, default=(0.0, "none (two irregular hierarchies)"))
    m = W.n_queries
    certified = sol.converged and sol.objective <= bound * (1 + 1e-6)
    status = "optimal" if certified else ("local_optimum" if sol.converged else "user_limit")
    message = (f"The hierarchical residual family's optimum ({sol.iterations} dual iterations, family gap "
               f"{sol.objective / sol.family_bound - 1:.2e}); {sol.objective / bound:.4f}× the lower bound ({how})."
               if bound > 0 else "The hierarchical residual family's optimum; no global bound for two irregular "
               "hierarchies.")
    extra = {"family_bound": sol.family_bound, "bound_method": how, "family_converged": sol.converged,
             "seed": seed_record(call.seed), "grouping_sets": len(W.sets)}
    return OptimizeResult(sol.strategy, "l2", sol.objective, bound, status, status in ("optimal", "local_optimum"),
                          message, "hierarchy", None, sol.iterations, time.perf_counter() - t0,
                          objective_per_query=sol.objective / m, lower_bound_per_query=bound / m, extra=extra)
