"""An orthonormal basis adapted to a hierarchy's components, applied in O(n · depth) without forming it.

Notation: see README and :mod:`mmopt.hierarchy.components`. For an internal node g with children k (sizes n_k),
the vectors e_k = 1_k/√n_k span the functions constant on the children; u = (√(n_k/n_g))_k is the direction of
1_g and the Householder reflection H_g = I − 2vvᵀ/vᵀv with v = u − e_first maps u to the first axis, so the other
K − 1 columns of H_g (in the e_k basis) are an orthonormal basis of V_g. The *analysis* transform sends x to the
root coefficient 1ᵀx/√n and, for every node, (H_g w)[1:] with w_k = 1_kᵀx/√n_k; the *synthesis* transform is its
transpose (= inverse: the basis is orthonormal), rebuilt top-down from (H_g w)[0] = uᵀw = 1_gᵀx/√n_g.
Coefficients are laid out per level: the root's, then each level's non-first children in the order of
``np.argsort(parents, kind="stable")``; ``component_of`` names each coefficient's component.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from mmopt.hierarchy import components as hc
from mmopt.hierarchy.tree import Hierarchy

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class _Level:
    order: np.ndarray  # the level's groups sorted by parent (stable)
    parent: np.ndarray  # parent of each sorted group
    v: np.ndarray  # Householder vector entries, sorted order
    vtv: np.ndarray  # per parent
    keep: np.ndarray  # sorted positions that carry a coefficient (non-first children)
    sqrt_n: np.ndarray  # √n_k, sorted order


@dataclass(frozen=True, eq=False)
class Basis:
    levels: tuple
    component_of: np.ndarray  # component index of each of the n coefficients


def basis(h: Hierarchy) -> Basis:
    got = _CACHE.get(h)
    if got is None:
        got = _CACHE[h] = _build(h)
    return got


def _build(h: Hierarchy) -> Basis:
    T = hc.tables(h)
    comp_of_node = {}
    for c, (ell, g) in enumerate(zip(T.level, T.node, strict=True)):
        if ell:
            comp_of_node[(int(ell), int(g))] = c
    levels, comps = [], [np.zeros(1, dtype=np.int64)]
    for ell in range(1, h.depth + 1):
        par = h.parents[ell - 1]
        order = np.argsort(par, kind="stable")
        p = par[order]
        n_k = h.sizes[ell][order]
        u = np.sqrt(n_k / h.sizes[ell - 1][p])
        first = np.r_[True, p[1:] != p[:-1]]
        v = u - first
        vtv = np.bincount(p, v * v, minlength=h.n_groups[ell - 1])
        keep = np.flatnonzero(~first)
        levels.append(_Level(order, p, v, vtv, keep, np.sqrt(n_k)))
        lookup = np.array([comp_of_node.get((ell, int(g)), -1) for g in range(h.n_groups[ell - 1])])
        comps.append(lookup[p[keep]])
    return Basis(tuple(levels), np.concatenate(comps))


def _reflect(lv: _Level, w: np.ndarray) -> np.ndarray:
    """H_g w for every parent at once (w in sorted order, one column per trailing entry)."""
    vtw = np.zeros((lv.vtv.size, *w.shape[1:]))
    np.add.at(vtw, lv.parent, lv.v[:, None] * w)
    coef = np.divide(2.0, lv.vtv, out=np.zeros_like(lv.vtv), where=lv.vtv > 0)  # vtv = 0: u = e_first, H = I
    return w - lv.v[:, None] * (coef[:, None] * vtw)[lv.parent]


def analysis(h: Hierarchy, X: np.ndarray) -> np.ndarray:
    """The coefficients of the columns of X (n × cols) in the basis: Qᵀ X."""
    B = basis(h)
    X = np.asarray(X, dtype=float).reshape(h.n, -1)
    S = [None] * (h.depth + 1)
    S[h.depth] = X
    for ell in range(h.depth, 0, -1):
        S[ell - 1] = np.zeros((h.n_groups[ell - 1], X.shape[1]))
        np.add.at(S[ell - 1], h.parents[ell - 1], S[ell])
    out = [S[0] / np.sqrt(h.n)]
    for ell, lv in enumerate(B.levels, start=1):
        w = S[ell][lv.order] / lv.sqrt_n[:, None]
        out.append(_reflect(lv, w)[lv.keep])
    return np.concatenate(out)


def synthesis(h: Hierarchy, C: np.ndarray) -> np.ndarray:
    """Q C: the vectors (n × cols) with coefficients C (the transpose, and inverse, of :func:`analysis`)."""
    B = basis(h)
    C = np.asarray(C, dtype=float).reshape(h.n, -1)
    S = C[:1] * np.sqrt(h.n)
    at = 1
    for ell, lv in enumerate(B.levels, start=1):
        full = np.zeros((lv.order.size, C.shape[1]))
        first = np.ones(lv.order.size, dtype=bool)
        first[lv.keep] = False
        full[first] = S[lv.parent[first]] / np.sqrt(h.sizes[ell - 1][lv.parent[first]])[:, None]
        full[lv.keep] = C[at:at + lv.keep.size]
        at += lv.keep.size
        w = _reflect(lv, full)
        nxt = np.zeros((h.n_groups[ell], C.shape[1]))
        nxt[lv.order] = w * lv.sqrt_n[:, None]
        S = nxt
    return S


def along(fn, h: Hierarchy, T: np.ndarray, axis: int) -> np.ndarray:
    """``fn(h, ·)`` applied along one axis of a tensor."""
    X = np.moveaxis(T, axis, 0)
    shape = X.shape
    return np.moveaxis(fn(h, X.reshape(shape[0], -1)).reshape(shape), 0, axis)
