"""The saved-strategy format for grouping-set strategies over hierarchies (:mod:`mmopt.hierarchy`).

Notation: see README and :mod:`mmopt.hierarchy.strategy`. Two kinds beside those of :mod:`mmopt.persist._format`,
each stored as its hierarchies and weights, never the N×N Gram (``Strategy.from_gram(A.dense_gram())`` was the
remedy, up to 4,096 cells; the census-like ROLLUP × CUBE of the tutorial has 62,860):

- ``hierarchy_residual``: a :class:`~mmopt.hierarchy.strategy.HierarchyStrategy`; the array ``weights`` (the
  tensor x over the attributes' residual components).
- ``hierarchy_nodes``: a :class:`~mmopt.hierarchy.nodes.NodeStrategy`; its layout (the arrays ``beta``, ``depth``,
  ``coef``, ``components`` and the description's ``tree``) and the arrays ``z_{u}_{ℓ}`` (the node weights of
  active component u at level ℓ).

Both list every attribute's tree: the description's ``hierarchies`` (name, level names, levels) and the arrays
``parents_{i}_{ℓ}``. Each is rebuilt through its constructor, whose checks run (a tree whose parent codes skip a
group, a negative or NaN weight), and Δ₂ is recomputed from the weights when the strategy is used, so an edited
file cannot make a release charge less than its noise needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

KINDS = ("hierarchy_residual", "hierarchy_nodes")
F8, I8 = np.dtype("<f8"), np.dtype("<i8")
_LAYOUT = ("beta", "depth", "coef", "components")


def kind_of(strategy) -> str | None:
    """"hierarchy_residual" or "hierarchy_nodes" for the hierarchy family's strategies, else None."""
    from mmopt.hierarchy.nodes import NodeStrategy
    from mmopt.hierarchy.strategy import HierarchyStrategy
    if isinstance(strategy, HierarchyStrategy):
        return "hierarchy_residual"
    return "hierarchy_nodes" if isinstance(strategy, NodeStrategy) else None


def summary(strategy) -> dict:
    """The strategy summary (:func:`mmopt.persist._format.strategy_summary`): A stands for X^{1/2}, N×N."""
    shape = [int(h.n) for h in strategy.attributes]
    N = int(np.prod(shape, dtype=object))
    return {"kind": kind_of(strategy), "name": strategy.name, "shape": [N, N], "domain_shape": shape,
            "domain_size": N, "n_rows": N}


def encode(strategy, desc: dict) -> tuple[dict, dict[str, np.ndarray]]:
    """(description, arrays): ``desc`` completed with the trees (and, for nodes, the layout)."""
    arrays: dict[str, np.ndarray] = {}
    trees = []
    for i, h in enumerate(strategy.attributes):
        trees.append({"name": h.name, "level_names": list(h.level_names), "levels": len(h.parents)})
        for k, p in enumerate(h.parents):
            arrays[f"parents_{i}_{k}"] = np.asarray(p, dtype=I8)
    desc = desc | {"hierarchies": trees}
    if desc["kind"] == "hierarchy_residual":
        return desc, arrays | {"weights": np.asarray(strategy.weights, dtype=F8)}
    lay = strategy.layout
    arrays |= {"beta": np.asarray(lay.beta, dtype=F8), "depth": np.asarray(lay.depth, dtype=I8),
               "coef": np.asarray(lay.coef, dtype=F8), "components": np.asarray(lay.components, dtype=I8)}
    for u, z in enumerate(strategy.weights):
        for k, zk in enumerate(z):
            arrays[f"z_{u}_{k}"] = np.asarray(zk, dtype=F8)
    return desc | {"tree": int(lay.tree), "node_levels": [len(z) for z in strategy.weights]}, arrays


def decode(desc: Mapping, arrays: Mapping[str, np.ndarray], shape: list[int], name: str, *, field: Callable,
           array: Callable, same_names: Callable, build: Callable, fail: Callable):
    """The strategy ``desc`` describes over attribute sizes ``shape``, after its checks.

    ``field``, ``array``, ``same_names``, ``build``: :mod:`mmopt.persist._format`'s checked readers; ``fail(what)``
    raises.
    """
    from mmopt.hierarchy.nodes import Layout, NodeStrategy, component_coefficients
    from mmopt.hierarchy.strategy import HierarchyStrategy
    from mmopt.hierarchy.tree import Hierarchy

    trees = field(desc, "hierarchies", list, "strategy", fail)
    if len(trees) != len(shape) or not all(isinstance(t, dict) for t in trees):
        fail(f"lists {len(trees)} hierarchies for {len(shape)} attributes")
    expected = set()
    for i, t in enumerate(trees):
        levels = t.get("levels")
        if not isinstance(levels, int) or isinstance(levels, bool) or not 1 <= levels <= 64:
            fail(f"gives hierarchy {i} {levels!r} levels (expected an integer in [1, 64])")
        expected |= {f"parents_{i}_{k}" for k in range(levels)}
    kind = desc["kind"]
    if kind == "hierarchy_residual":
        expected.add("weights")
    else:
        tree = field(desc, "tree", int, "strategy", fail)
        counts = field(desc, "node_levels", list, "strategy", fail)
        if not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 64 for c in counts):
            fail(f"lists node levels {counts!r:.60} (expected integers in [0, 64])")
        expected |= set(_LAYOUT) | {f"z_{u}_{k}" for u, c in enumerate(counts) for k in range(c)}
    same_names(arrays, expected, fail)

    def tree_of(i: int, t: dict) -> Hierarchy:
        parents = tuple(array(arrays, f"parents_{i}_{k}", I8, 1, fail) for k in range(t["levels"]))
        return Hierarchy(parents, tuple(t.get("level_names") or ()), str(t.get("name", "hierarchy")))

    hierarchies = tuple(build(lambda i=i, t=t: tree_of(i, t), fail) for i, t in enumerate(trees))
    if [h.n for h in hierarchies] != list(shape):
        fail(f"has trees over {[h.n for h in hierarchies]} cells, but its attribute sizes are {list(shape)}")
    if kind == "hierarchy_residual":
        w = array(arrays, "weights", F8, len(shape), fail)
        return build(lambda: HierarchyStrategy(hierarchies, w, name), fail)
    beta, coef = array(arrays, "beta", F8, 2, fail), array(arrays, "coef", F8, 2, fail)
    depth, comps = array(arrays, "depth", I8, 1, fail), array(arrays, "components", I8, 1, fail)
    if not 0 <= tree < len(shape) or not (beta.shape[1] == depth.size == coef.shape[0] == comps.size == len(counts)):
        fail(f"has a node layout that does not fit together (tree {tree} of {len(shape)} attributes; beta "
             f"{beta.shape}, depth {depth.shape}, coef {coef.shape}, components {comps.shape}, {len(counts)} "
             "weighted components)")
    # Δ₂ = √max diag X is charged from the layout: its coefficients must be the trees' own, and each component's
    # weights reach exactly its depth, over every group of each level (an edit could lower Δ, not the noise needed)
    full = component_coefficients(hierarchies, tree)
    h = hierarchies[tree]
    if (np.any(np.diff(comps) <= 0) or (comps.size and not 0 <= comps[0] <= comps[-1] < full.shape[0])
            or beta.shape[0] != h.depth + 1 or np.any(beta < 0)):
        fail("has a node layout whose components or level coefficients are not those of its trees")
    if coef.shape != (comps.size, full.shape[1]) or not np.array_equal(coef, full[comps]):
        fail("has node coefficients that are not those of its trees (they set Δ₂)")
    if any(c != int(d) + 1 or c > h.depth + 1 for c, d in zip(counts, depth, strict=True)):
        fail(f"has node weights over {counts} levels for components of depths {depth.tolist()}")
    z = tuple(tuple(array(arrays, f"z_{u}_{k}", F8, 1, fail) for k in range(c)) for u, c in enumerate(counts))
    if any(zk.size != h.n_groups[k] for zu in z for k, zk in enumerate(zu)):
        fail(f"has node weights whose sizes are not the groups of the tree's levels {list(h.n_groups)}")
    return build(lambda: NodeStrategy(hierarchies, Layout(tree, beta, depth, full[comps], comps), z, name), fail)
