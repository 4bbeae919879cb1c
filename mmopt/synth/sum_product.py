"""Sum-product on a junction tree in linear space: the clique marginals of P ∝ exp Σ_K log φ_K.

Used by :mod:`mmopt.synth.junction`'s fit several times an iteration, so the tree's index work is done once
(:func:`plan`) and each pass is only sums and products: leaves to roots (each message scaled to maximum 1), then
roots to leaves (each clique's belief is its potential times the parent's belief on the separator over the
upward message, 0 where that message is 0: a separator value of zero mass gives zero, not 0/0). Each potential is
shifted by its maximum before exp; each tree of a forest is normalised on its own, as P is the product of the
trees' distributions.
"""

from __future__ import annotations

import numpy as np

__all__ = ["calibrate", "depths", "plan"]


def calibrate(log_pot, tree_plan, t: float) -> list:
    """The clique marginals (counts summing to t) of P ∝ exp Σ_K log_pot_K on the tree of ``tree_plan``
    (:func:`plan`): the module docstring's two passes."""
    order, edges = tree_plan
    acc = [np.exp(lp - lp.max()) for lp in log_pot]
    up = {}
    for k in order:
        if k in edges:
            p, child_axes, to_parent, _, _ = edges[k]
            m = acc[k].sum(axis=child_axes)
            up[k] = m / max(float(m.max()), 1e-300)
            acc[p] = acc[p] * up[k].reshape(to_parent)
    belief = [None] * len(log_pot)
    for k in reversed(order):  # roots first
        if k not in edges:
            belief[k] = acc[k]
            continue
        p, _, _, parent_axes, to_child = edges[k]
        total = belief[p].sum(axis=parent_axes)
        down = np.divide(total, up[k], out=np.zeros_like(total), where=up[k] > 0)
        belief[k] = acc[k] * (down / max(float(down.max()), 1e-300)).reshape(to_child)
    return [b * (t / b.sum()) for b in belief]


def plan(cliques, parent, shape) -> tuple:
    """The leaves-first order, and for each child k (p, axes of k outside the separator, the separator's shape
    on p's axes, axes of p outside the separator, its shape on k's axes): made once per fit, as the sum-product
    runs a few times an iteration and the index work would cost more than the sums on small cliques."""
    depth = depths(parent)
    edges = {}
    for k, K in enumerate(cliques):
        p = parent[k]
        if p >= 0:
            P = cliques[p]
            sep = [i for i in K if i in P]   # in K's order, which is P's order too (both sorted)
            edges[k] = (p, tuple(q for q, i in enumerate(K) if i not in sep),
                        tuple(shape[i] if i in sep else 1 for i in P),
                        tuple(q for q, i in enumerate(P) if i not in sep),
                        tuple(shape[i] if i in sep else 1 for i in K))
    return sorted(range(len(cliques)), key=lambda k: -depth[k]), edges


def depths(parent) -> list:
    """Each node's distance to its root in the forest ``parent`` (−1 at a root)."""
    depth = []
    for k in range(len(parent)):
        d, p = 0, parent[k]
        while p >= 0:
            d, p = d + 1, parent[p]
        depth.append(d)
    return depth
