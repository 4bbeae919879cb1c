"""auto's tree-of-ranges candidates on prefix sums and all ranges under Laplace noise (:mod:`mmopt.toeplitz.trees`).

Notation: see README. :func:`tree` scores H_b at each branching of :func:`mmopt.toeplitz.trees.branchings` exactly,
O(n) each, and keeps the best; :func:`weighted_tree` searches that branching's level weights on the exact error.
Both return an :class:`~mmopt.OptimizeResult` at unit ε (Δ₁² tr(G X⁻¹)) with the certified bound of
:mod:`mmopt.toeplitz.bound`; :mod:`mmopt.auto.plan` prices and orders them.
"""

from __future__ import annotations

__all__ = ["tree", "weighted_tree"]


def tree(W, chosen: dict | None = None):
    """H_b as a :class:`~mmopt.toeplitz.trees.TreeStrategy` (release and evaluate take it at any n), each branching of
    :func:`~mmopt.toeplitz.trees.branchings` scored exactly in one O(n) pass over its tree, the best returned. As a
    p-Identity strategy (columns scaled to Δ₁ = 1) scored by Woodbury, H₈ and H₁₆ cost O(p·n²) (12.6 s at 8,192
    cells), release refused them past 4,096 cells, and where n is not a power of b they had up to 3.3× the error
    of the same tree with each node measured once (prefix sums of 6,000 cells, H₈)."""
    from mmopt._base.result import OptimizeResult, reconcile
    from mmopt.toeplitz.bound import lower_bound
    from mmopt.toeplitz.trees import TreeStrategy, branchings

    scores = {}
    for b in branchings(W.n):
        S = TreeStrategy(W.n, b)
        scores[b] = S.sensitivity("l1") ** 2 * S.unit_total(W.kind)
    b = min(scores, key=scores.get)
    objective, bound = scores[b], lower_bound(W).value
    if chosen is not None:  # for weighted_tree: the branching, and the bound (0.97 CPU s at 10⁶ cells, not twice)
        chosen.update(b=b, bound=bound)
    status, message, bound = reconcile(objective, bound, "optimal", f"H_{b}, each node measured once, the best "
                                       f"branching of {len(scores)} scored exactly: a closed form.", closed=True)
    m = W.n_queries
    return OptimizeResult(TreeStrategy(W.n, b), "l1", objective, bound, status, True, message, "tree", None, None,
                          0.0, objective / m, bound / m, (),
                          {"scored_by": "tree", "branchings": {f"H{k}": val for k, val in scores.items()}})


def weighted_tree(W, chosen: dict, max_evaluations: int | None = None):
    """The chosen branching's tree with level weights searched (:func:`mmopt.toeplitz.trees.weighted`, L-BFGS-B on
    the exact error, a heuristic): 0.87–0.92× the unit-weight error on prefix sums of 1,024 to 10⁶ cells, 0.68–0.80×
    on all ranges. ``max_evaluations``: its evaluation limit (None: its default). "user_limit" when the search
    stopped at its evaluation limit, "optimal_inaccurate" when it stopped short of it unconverged."""
    from mmopt._base.result import OptimizeResult, reconcile
    from mmopt.toeplitz.trees import EVALUATIONS_PER_LEVEL, weighted

    if "b" not in chosen:
        tree(W, chosen)
    b = chosen["b"]
    S, objective, converged, calls = weighted(W.n, b, W.kind, max_evaluations=max_evaluations)
    bound = chosen["bound"]
    at_limit = calls >= (max_evaluations or EVALUATIONS_PER_LEVEL * len(S.tree.levels))  # weighted()'s cap
    how = "converged" if converged else "stopped at its evaluation limit" if at_limit else "stopped, not converged"
    status, message, bound = reconcile(
        objective, bound, "optimal" if converged else "user_limit" if at_limit else "optimal_inaccurate",
        f"H_{b} with level weights searched by L-BFGS-B on the exact error ({calls} evaluations, {how}).")
    m = W.n_queries
    return OptimizeResult(S, "l1", objective, bound, status, status in ("optimal", "local_optimum"), message,
                          "tree_weighted", "L-BFGS-B", calls, 0.0, objective / m, bound / m, (),
                          {"scored_by": "tree", "level_weights": list(S.level_weights or ())})
