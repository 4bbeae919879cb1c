"""evaluate / svd_bound for the hierarchy family: exact reports without the N-cell Gram.

Notation: see README and :mod:`mmopt.hierarchy.strategy`.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import guards
from mmopt.hierarchy import bound as hb
from mmopt.hierarchy import nodes as hn
from mmopt.hierarchy.strategy import HierarchyStrategy, _same, unit_total, unit_variances
from mmopt.hierarchy.workload import HierarchyWorkload
from mmopt.structured._report import ImplicitErrorReport


def evaluate(W: HierarchyWorkload, A: HierarchyStrategy, privacy, norm, per_query) -> ImplicitErrorReport:
    """Exact total, sensitivity and largest variance of a hierarchical residual strategy (Gaussian noise)."""
    want = norm or (privacy.sensitivity_norm if privacy is not None else "l2")
    if want != "l2":
        raise ValueError(f"evaluate: a {type(A).__name__} is a Gaussian-noise strategy whose L1 sensitivity has no "
                         "closed form here. Use privacy=Privacy(epsilon, delta) with delta > 0, or norm='l2'.")
    if isinstance(A, hn.NodeStrategy):
        _check_node_pair(A, W)
        variances = hn.node_variances(A, W)
        unit = hn.node_total(A, W, variances)
    else:
        unit, variances = unit_total(A, W), unit_variances(A, W)
    unmeasured = sum(int(np.sum(~np.isfinite(v))) for v in variances)
    if unmeasured:  # as the dense path refuses an unsupported pair (inf here was reported as a float64 overflow)
        raise ValueError(f"evaluate: {unmeasured:,} queries of '{W.name}' are not estimable from the strategy "
                         f"'{A.name}' (groups below the levels it measures). Optimise a strategy for this workload.")
    top = max(float(v.max()) for v in variances)
    total = guards.scaled(unit, privacy, W.name)
    m = W.n_queries
    pq = None
    if per_query:
        pq = np.concatenate([guards.scaled(1.0, privacy, W.name) * v.ravel() for v in variances])
    mx = guards.scaled(top, privacy, W.name)
    return ImplicitErrorReport(W.name, A.name, privacy, W.shape, W.domain_size, m, A.sensitivity("l2"), True,
                               total, True, total / m, math.sqrt(total / m), mx, mx, True, "hierarchy (exact)",
                               per_query_variance=pq, sensitivity_norm="l2")


def _check_node_pair(A: hn.NodeStrategy, W: HierarchyWorkload) -> None:
    """A node strategy holds the layout of the workload it was optimised for: the same trees and grouping sets."""
    same = len(A.attributes) == len(W.attributes) and all(
        a is b or _same(a, b) for a, b in zip(A.attributes, W.attributes, strict=True))
    if not same or not np.array_equal(hn.layout(W, A.layout.tree).components, A.layout.components):
        raise ValueError(f"evaluate: the weighted node strategy '{A.name}' was optimised for other grouping sets than "
                         f"'{W.name}' (its measured components differ). Optimise it for this workload.")


def svd_bound(W: HierarchyWorkload, privacy, per_query: bool) -> float:
    """c·(Σσᵢ(W))²/N, from the tree recursion of :mod:`mmopt.hierarchy.bound` (one irregular hierarchy at most)."""
    got = hb.lower_bound(W)
    if got is None:
        raise ValueError(f"svd_bound: workload '{W.name}' has two hierarchies of uneven shape; its singular values "
                         "have no tree recursion here. Build a small version and use W.to_implicit().")
    value = guards.scaled(got[0], privacy, W.name)
    return value / W.n_queries if per_query else value
