"""The residual components of a hierarchy and their two tables: diagonals (sensitivity) and query masses (error).

Notation: see README and :mod:`mmopt.hierarchy.tree`. Component 0 is the root (span 1); component c ≥ 1 is the
subspace V_g of an internal node g with K ≥ 2 children (dimension K − 1). Cells fall into *types*: the leaves of
one level-(L−1) node (siblings) have the same diagonal in every component, so the sensitivity constraint is one
row per type. For a product of hierarchies everything is a Kronecker product of these per-attribute tables.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from mmopt.hierarchy.tree import Hierarchy

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class Tables:
    """Per-attribute tables of a :class:`Hierarchy` (components c, cell types r, levels a).

    Attributes
    ----------
    level, node : ndarray
        Component c is V_g for g = ``node[c]`` at level ``level[c] − 1`` (children at ``level[c]``); the root
        component has level 0 and node 0.
    dim : ndarray
        dim V_g = K − 1 (1 for the root).
    diag : scipy.sparse.csr_matrix
        (types × components): (P_c)_jj for a leaf j of type r.
    count : ndarray
        Leaves of each type.
    masses : tuple of scipy.sparse.csr_matrix
        ``masses[a]`` (level-a groups × components): ‖P_c 1_h‖².
    tau : ndarray
        (levels × components): τ[a, c] = Σ_h ‖P_c 1_h‖² = tr(L_aᵀL_a P_c).
    """

    level: np.ndarray
    node: np.ndarray
    dim: np.ndarray
    diag: sp.csr_matrix
    count: np.ndarray
    masses: tuple
    tau: np.ndarray

    @property
    def n_components(self) -> int:
        return int(self.level.size)

    @property
    def n_types(self) -> int:
        return int(self.count.size)


def ancestor_at(h: Hierarchy, level: int, up_to: int) -> np.ndarray:
    """The level-``up_to`` ancestor of every level-``level`` group (``up_to`` ≤ ``level``)."""
    idx = np.arange(h.n_groups[level])
    for ell in range(level, up_to, -1):
        idx = h.parents[ell - 1][idx]
    return idx


def other_masses(attributes, tree: int, levels, components) -> list[np.ndarray]:
    """Per active component U of the attributes other than ``tree`` (flat indices into their component tensor),
    the mass ∏_{i≠tree} ‖P_{i,Uᵢ} 1_{hᵢ}‖² of every combination of the others' level-``levels[i]`` groups
    (flattened in C order)."""
    tabs = [tables(g) for g in attributes]
    others = [i for i in range(len(tabs)) if i != tree]
    shape = tuple(tabs[i].n_components for i in others)
    Us = [np.unravel_index(c, shape) if shape else () for c in components]
    return [outer([np.ones(1)] + [tabs[i].masses[levels[i]][:, c].toarray().ravel()
                                  for i, c in zip(others, U, strict=True)]).ravel() for U in Us]


def group_sizes(attributes, tree: int, levels) -> np.ndarray:
    """∏_{i≠tree} |hᵢ| of every combination of the others' level-``levels[i]`` groups (C order): the sum of
    :func:`other_masses` over *all* components (they resolve the identity, Σ_U ‖P_U 1_h‖² = ‖1_h‖²)."""
    tabs = [tables(g) for g in attributes]
    return outer([np.ones(1)] + [np.asarray(tabs[i].masses[levels[i]].sum(axis=1)).ravel()
                                 for i in range(len(tabs)) if i != tree]).ravel()


def ancestors(h: Hierarchy, a: int) -> list[np.ndarray]:
    """``out[b][k]``: the level-b ancestor of level-a group k, for b = 0 … a."""
    out = [np.arange(h.n_groups[a])]
    for b in range(a, 0, -1):
        out.append(h.parents[b - 1][out[-1]])
    return out[::-1]


def tables(h: Hierarchy) -> Tables:
    """The tables of ``h`` (memoised per hierarchy object)."""
    got = _CACHE.get(h)
    if got is None:
        got = _CACHE[h] = _build(h)
    return got


def _build(h: Hierarchy) -> Tables:
    L, n, sizes = h.depth, h.n, h.sizes
    # components: the root, then every node with ≥ 2 children, level by level
    level, node, dim, comp_of = [0], [0], [1], []
    for ell in range(1, L + 1):
        kids = np.bincount(h.parents[ell - 1], minlength=h.n_groups[ell - 1])
        idx = np.full(kids.size, -1, dtype=np.int64)
        inner = np.flatnonzero(kids >= 2)
        idx[inner] = np.arange(len(level), len(level) + inner.size)
        level += [ell] * inner.size
        node += inner.tolist()
        dim += (kids[inner] - 1).tolist()
        comp_of.append(idx)  # comp_of[ell-1][g]: the component of node g (level ell−1), or −1
    C = len(level)
    masses = []
    for a in range(L + 1):
        anc = ancestors(h, a)
        nh = sizes[a]
        rows, cols, vals = [np.arange(nh.size)], [np.zeros(nh.size, dtype=np.int64)], [nh * nh / n]
        for ell in range(1, a + 1):
            g, k = anc[ell - 1], anc[ell]
            c = comp_of[ell - 1][g]
            keep = c >= 0
            rows.append(np.flatnonzero(keep))
            cols.append(c[keep])
            vals.append((nh * nh * (1.0 / sizes[ell][k] - 1.0 / sizes[ell - 1][g]))[keep])
        masses.append(sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                    shape=(nh.size, C)))
    tau = np.vstack([np.asarray(M.sum(axis=0)).ravel() for M in masses])
    # a leaf's diagonal is its own (a 1-leaf group's) mass: the leaf level's masses row, one per type
    types = h.parents[-1]  # the leaf's parent at level L−1 is its type
    first = np.unique(types, return_index=True)[1]
    diag = masses[L][first].tocsr()
    return Tables(np.asarray(level), np.asarray(node), np.asarray(dim, dtype=float), diag,
                  sizes[L - 1].copy(), tuple(masses), tau)


def kron_apply(mats, T: np.ndarray) -> np.ndarray:
    """(⊗ᵢ Mᵢ) applied to the tensor T (one axis per attribute), axis by axis: never the Kronecker product."""
    for i, M in enumerate(mats):
        X = np.moveaxis(T, i, 0)
        shape = X.shape
        Y = M @ X.reshape(shape[0], -1)
        T = np.moveaxis(np.asarray(Y).reshape((M.shape[0], *shape[1:])), 0, i)
    return T


def outer(vectors) -> np.ndarray:
    """⊗ᵢ vᵢ as a d-axis tensor."""
    out = np.asarray(vectors[0], dtype=float)
    for vec in vectors[1:]:
        out = np.multiply.outer(out, np.asarray(vec, dtype=float))
    return out
