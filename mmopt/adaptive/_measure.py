"""Measure the k bucket totals z = P x with a matrix-mechanism strategy over the buckets, and estimate them.

One record changes one cell, hence exactly one bucket total by 1: the reduced data z has the same add/remove
neighbour relation, and a strategy A (p × k) measured as A z + Lap(Δ₁(A)/ε) is ε-DP (Li et al., Prop. 1).

* "identity": ẑ = z + Lap(1/ε) (DAWA's reference path without GreedyH).
* "hierarchical": H_b over the buckets, the same tree as :func:`mmopt.strategy.hierarchical` (root, then
  near-equal splits; Δ₁ = the number of tree levels a leaf lies on, computed exactly), with the least-squares
  estimate ẑ = A⁺y computed exactly in O(k) by two passes over the tree: bottom-up, each subtree's
  least-squares cost is a(s − m)² in its total s (leaf: a = 1, m = y; node: children combine to
  A = 1/Σ(1/a_c), M = Σ m_c, then a = 1 + A, m = (y + A·M)/(1 + A)); top-down, the root total is m and each
  child gets m_c + (s − M)·(1/a_c)/Σ(1/a_c). A has full column rank (it contains every leaf), so this is the
  unique minimiser of ‖A ẑ − y‖.
* a callable ``f(k)`` returning a Strategy (or p × k matrix): measured with :func:`mmopt.matrix_mechanism`
  (least squares through a QR of A: O(p·k²), fine for k up to a few hundred); with ``noise="opendp"`` through
  :func:`mmopt.release` instead (OpenDP noise at a scale OpenDP's own privacy map verifies).

Every Laplace sample is drawn by the :class:`~mmopt.adaptive._noise.Noise` given (numpy or OpenDP).
"""

from __future__ import annotations

import numpy as np

from mmopt.adaptive._common import laplace_scale
from mmopt.adaptive._noise import Noise
from mmopt.dense._classic import _split

MEASURES = ("identity", "hierarchical")


def measure(z: np.ndarray, epsilon: float, strategy, branching: int, noise, caller: str
            ) -> tuple[np.ndarray, dict]:
    """ẑ and a record {"strategy", "sensitivity", "noise_scale", "rows"}; ``noise`` a Noise (or a Generator)."""
    if isinstance(noise, np.random.Generator):
        noise = Noise("numpy", noise)
    k = z.size
    if callable(strategy):
        return _matrix_mechanism(z, epsilon, strategy, noise, caller)
    if strategy == "identity":
        b = laplace_scale(1.0, epsilon, "the bucket totals", caller)
        return noise.add_laplace(z, b), {"strategy": "identity", "sensitivity": 1.0, "noise_scale": b,
                                                 "rows": k}
    nodes, children = _tree(k, branching)
    depth = np.zeros(k)
    for lo, hi in nodes:
        depth[lo:hi] += 1.0
    sens = float(depth.max())  # Δ₁(A): the most nodes any leaf lies in (exact, small integers)
    b = laplace_scale(sens, epsilon, "the tree counts", caller)
    cz = np.concatenate([[0.0], np.cumsum(z)])
    y = noise.add_laplace(np.array([cz[hi] - cz[lo] for lo, hi in nodes]), b)
    return tree_least_squares(nodes, children, y, k), {"strategy": f"H{branching}", "sensitivity": sens,
                                                        "noise_scale": b, "rows": len(nodes)}


def _tree(k: int, branching: int) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """Nodes (lo, hi) breadth-first, root first, as in mmopt.strategy.hierarchical; children as node indices."""
    nodes, children = [(0, k)], []
    i = 0
    while i < len(nodes):
        kids = _split(*nodes[i], branching)
        children.append(list(range(len(nodes), len(nodes) + len(kids))))
        nodes.extend(kids)
        i += 1
    return nodes, children


def tree_least_squares(nodes, children, y: np.ndarray, k: int) -> np.ndarray:
    """argmin_z Σ_u (y_u − Σ_{j∈u} z_j)² over z ∈ R^k for a tree of intervals (module docstring)."""
    p = len(nodes)
    a, m, big_a, big_m = np.ones(p), y.astype(float).copy(), np.zeros(p), np.zeros(p)
    for u in range(p - 1, -1, -1):  # children come after their parent, so this is bottom-up
        if children[u]:
            inv = sum(1.0 / a[c] for c in children[u])
            big_a[u], big_m[u] = 1.0 / inv, sum(m[c] for c in children[u])
            a[u] = 1.0 + big_a[u]
            m[u] = (y[u] + big_a[u] * big_m[u]) / a[u]
    s = np.empty(p)
    s[0] = m[0]
    z = np.empty(k)
    for u in range(p):  # top-down
        if children[u]:
            inv = sum(1.0 / a[c] for c in children[u])
            for c in children[u]:
                s[c] = m[c] + (s[u] - big_m[u]) * (1.0 / a[c]) / inv
        else:
            z[nodes[u][0]] = s[u]
    return z


def _matrix_mechanism(z, epsilon, build, noise: Noise, caller) -> tuple[np.ndarray, dict]:
    from mmopt.dense._error_common import as_strategy
    from mmopt.dispatch import matrix_mechanism, release  # deferred: dispatch imports much of mmopt
    from mmopt.privacy import Privacy
    from mmopt.workload import identity

    k = z.size
    A = as_strategy(build(k), caller)
    if A.domain_size != k:
        raise ValueError(f"The 'strategy' callable of {caller} must return a strategy over the {k} buckets. "
                         f"Got one over {A.domain_size} cells.")
    if noise.vetted:
        out = release(identity(k), A, z, Privacy(noise.draw_epsilon(epsilon)))  # the margin: Noise's docstring
    else:
        out = matrix_mechanism(identity(k), A, z, Privacy(epsilon), rng=noise.rng)
    return out.estimate, {"strategy": A.name, "sensitivity": out.sensitivity, "noise_scale": out.noise_scale,
                          "rows": int(A.matrix.shape[0])}
