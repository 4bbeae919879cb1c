"""The b-ary tree strategy's algebra in O(n) per pass: its Gram's inverse applied, its exact error, its variances.

Notation: see README. B is the 0/1 matrix with one row 1ᵥᵀ per node v of the b-ary tree on n cells (near-equal
splits, larger parts first, as :func:`mmopt.dense._interval_trees.split`; leaves are single cells, so B = [I; Θ]),
M = BᵀB and K = M⁻¹. For a node v with children c, Sv = 1ᵥ1ᵥᵀ + blkdiag(S_c) (S_leaf = [1]), and Sherman–Morrison
gives, with a′ = concat(a_c), σ = Σ_c σ_c and γᵥ = 1/(1 + σ):

    Kᵥ = blkdiag(K_c) − γᵥ a′a′ᵀ,    aᵥ = Kᵥ1 = γᵥ a′,    σᵥ = 1ᵀKᵥ1 = γᵥ σ        (a_leaf = σ_leaf = 1).

So K = I − Σᵥ γᵥ a′ᵥa′ᵥᵀ (one rank-one term per internal node), and every quantity below is one pass over the
levels, vectorised across each level's nodes (a node has at most b children, held in a padded row of b):

* tr(GK) for a semiseparable Gᵢⱼ = pₘᵢₙ qₘₐₓ (:func:`unit_total`): with Eᵥ = aᵥᵀGaᵥ, Pᵥ = Σ aᵥ p, Qᵥ = Σ aᵥ q,
  tr(GᵥKᵥ) = Σ_c tr(G_cK_c) − γᵥE′ and E′ = Σ_c E_c + 2Σ_{c<c′} P_c Q_c′ — O(1) per child, where a product
  G·u per node (:func:`mmopt.dense._interval_trees.unit_error`) costs O(n);
* K r (:func:`solve`): up, αᵥ = 1ᵀKᵥrᵥ = γᵥ Σ_c α_c (α_leaf = rᵢ); down, Uᵥ = αᵥ + γᵥU_parent and
  (K r)ᵢ = rᵢ − U_parent(i);
* every prefix's variance (:func:`prefix_variances`) from the diagonal and the strictly-lower row sums of K, one
  level at a time (O(n) per level, O(n log_b n) in all).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

__all__ = ["Levels", "levels", "node_sums", "prefix_variances", "solve", "transpose_apply", "unit_total"]


@dataclass(frozen=True, eq=False)
class Level:
    """The nodes at one depth, left to right: starts ``lo``, sizes ``size``; for the internal ones (size > 1),
    their number of children ``kids``, each child's row and slot in the padded (internal × b) children array."""

    lo: np.ndarray
    size: np.ndarray
    inner: np.ndarray  # indices of the internal nodes in this level
    kids: np.ndarray
    parent: np.ndarray  # per node of the next level: its parent's row among ``inner``
    slot: np.ndarray  # per node of the next level: its position among its siblings


@dataclass(frozen=True, eq=False)
class Levels:
    n: int
    b: int
    levels: tuple[Level, ...]
    depth: np.ndarray  # dᵢ: nodes on the path from the root to cell i (B's column sums)

    @functools.cached_property
    def gammas(self) -> tuple[np.ndarray, ...]:
        """γᵥ of each level's internal nodes (module docstring), from σ bottom-up; depends on the tree alone."""
        out: list[np.ndarray] = [np.empty(0)] * len(self.levels)
        sigma_below = None
        for k in range(len(self.levels) - 1, -1, -1):
            L = self.levels[k]
            sigma = np.ones(L.lo.size)
            if L.inner.size:
                s = _group_sum(L, sigma_below, self.b)
                out[k] = 1.0 / (1.0 + s)
                sigma[L.inner] = out[k] * s
            sigma_below = sigma
        return tuple(out)


def levels(n: int, b: int) -> Levels:
    """The tree on n cells, one :class:`Level` per depth (root first), O(n) memory. A branching past n gives the
    tree of branching n (the root's children are the cells), and is held as that: a node's children are padded to b."""
    b = max(2, min(b, n))
    lo, size = np.zeros(1, dtype=np.int64), np.array([n], dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    out, k = [], 0
    while lo.size:
        leaves = size == 1
        depth[lo[leaves]] = k + 1
        inner = np.flatnonzero(~leaves)
        s, start = size[inner], lo[inner]
        kids = np.minimum(s, b)
        parent = np.repeat(np.arange(inner.size), kids)
        slot = np.arange(parent.size) - np.repeat(np.cumsum(kids) - kids, kids)
        m, r = np.divmod(s, b)
        small = (s <= b)[parent]  # a node of at most b cells splits into single cells
        child_size = np.where(small, 1, m[parent] + (slot < r[parent]))
        # each child starts where its earlier siblings end (within-group exclusive sums of sizes: at most b terms)
        before = np.cumsum(child_size) - child_size
        child_lo = start[parent] + before - np.repeat(before[np.cumsum(kids) - kids], kids)
        out.append(Level(lo, size, inner, kids, parent, slot))
        lo, size, k = child_lo, child_size, k + 1
    return Levels(n, b, tuple(out), depth)


def _padded(L: Level, values: np.ndarray, b: int) -> np.ndarray:
    """The next level's ``values`` as an (internal × b) array, each row a node's children (zeros past them)."""
    out = np.zeros((L.inner.size, b) + values.shape[1:])
    out[L.parent, L.slot] = values
    return out


def _group_sum(L: Level, values: np.ndarray, b: int) -> np.ndarray:
    return _padded(L, values, b).sum(axis=1)


def _generators(kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) of G = WᵀW = pₘᵢₙqₘₐₓ (0-indexed): p = 1 for prefix sums and i + 1 for all ranges, q = n − j
    (:mod:`mmopt.dense.gram_operator`)."""
    i = np.arange(n, dtype=float)
    return (np.ones(n) if kind == "prefix" else i + 1.0), n - i


def unit_total(T: Levels, kind: str) -> float:
    """tr(G K): the tree strategy's total squared error at Δ = 1 on prefix sums or all ranges (module docstring)."""
    p, q = _generators(kind, T.n)
    below = None  # per node of the level below: columns (T, E, P, Q)
    for k in range(len(T.levels) - 1, -1, -1):
        L, g = T.levels[k], T.gammas[k]
        cells = L.lo
        stats = np.empty((L.lo.size, 4))
        pq = p[cells] * q[cells]  # leaves (and harmless placeholders for the internal rows, overwritten)
        stats[:, 0], stats[:, 1], stats[:, 2], stats[:, 3] = pq, pq, p[cells], q[cells]
        if L.inner.size:
            kidsT = _padded(L, below, T.b)
            P_before = np.cumsum(kidsT[:, :, 2], axis=1) - kidsT[:, :, 2]
            E = kidsT[:, :, 1].sum(axis=1) + 2.0 * np.sum(P_before * kidsT[:, :, 3], axis=1)
            stats[L.inner, 0] = kidsT[:, :, 0].sum(axis=1) - g * E
            stats[L.inner, 1] = g * g * E
            stats[L.inner, 2] = g * kidsT[:, :, 2].sum(axis=1)
            stats[L.inner, 3] = g * kidsT[:, :, 3].sum(axis=1)
        below = stats
    return float(below[0, 0])


def transpose_apply(T: Levels, y: np.ndarray) -> np.ndarray:
    """Bᵀy for y = (the n leaf rows, then the internal nodes level by level, as :func:`node_sums` lists them)."""
    n = T.n
    r = y[:n].copy()
    offset, acc = n, np.zeros(1)  # acc: per node of the current level, the sum of y over its internal ancestors
    for k, L in enumerate(T.levels[:-1]):
        count = L.inner.size
        acc = (acc[L.inner] + y[offset:offset + count])[L.parent]
        offset += count
        below = T.levels[k + 1]
        leaf = below.size == 1
        r[below.lo[leaf]] += acc[leaf]
    return r


def _upward(T: Levels, z: np.ndarray, damped: bool) -> list[np.ndarray]:
    """Per level, every node's value: a leaf's cell of ``z``, an internal node's the sum of its children's (times its
    γ when ``damped``). Each sum is over a node's own children, never a difference of running sums: no cancellation."""
    out: list[np.ndarray] = [np.empty(0)] * len(T.levels)
    below = None
    for k in range(len(T.levels) - 1, -1, -1):
        L = T.levels[k]
        s = z[L.lo].astype(float)
        if L.inner.size:
            s[L.inner] = _group_sum(L, below, T.b) * (T.gammas[k] if damped else 1.0)
        out[k] = below = s
    return out


def node_sums(T: Levels, z: np.ndarray) -> np.ndarray:
    """B z: the n cells, then every internal node's sum level by level (root first)."""
    sums = _upward(T, z, damped=False)
    return np.concatenate([z] + [s[L.inner] for s, L in zip(sums, T.levels, strict=True)])


def solve(T: Levels, r: np.ndarray) -> np.ndarray:
    """K r = M⁻¹r in O(n) (module docstring)."""
    alphas = _upward(T, r, damped=True)
    z = r.astype(float)
    U = np.zeros(1)  # per internal node of the current level, Uᵥ; the root's parent contributes nothing
    up = np.zeros(1)
    for k, L in enumerate(T.levels):
        if not L.inner.size:
            break
        U = alphas[k][L.inner] + T.gammas[k] * up
        nxt = T.levels[k + 1]
        up_child = U[L.parent]
        leaf = nxt.size == 1
        z[nxt.lo[leaf]] -= up_child[leaf]
        # the next level's internal nodes take their parent's U
        up = up_child[nxt.inner]
    return z


def prefix_variances(T: Levels) -> np.ndarray:
    """vₜ = wₜᵀKwₜ for every prefix wₜ = 1_[0, t] (unit Δ): vₜ = vₜ₋₁ + 2(Kwₜ₋₁)ₜ + Kₜₜ with K = I − Σᵥ γᵥ gᵥgᵥᵀ,
    gᵥ(i) = πᵥ(i) the product of γ over the internal nodes strictly between v and cell i. Each level's nodes are
    padded rows, so the within-node prefix sums of gᵥ start from zero at each node."""
    n = T.n
    diag, lower = np.ones(n), np.zeros(n)
    pi = np.ones(n)
    for k in range(len(T.levels) - 1, -1, -1):
        L, g = T.levels[k], T.gammas[k]
        if not L.inner.size:
            continue
        lo, size = L.lo[L.inner], L.size[L.inner]
        width = int(size.max())
        cols = np.arange(width)
        inside = cols[None, :] < size[:, None]
        cells = (lo[:, None] + cols[None, :])[inside]
        gv = np.zeros((lo.size, width))
        gv[inside] = pi[cells]
        before = np.cumsum(gv, axis=1) - gv
        diag[cells] -= (g[:, None] * gv * gv)[inside]
        lower[cells] -= (g[:, None] * gv * before)[inside]
        pi[cells] *= np.repeat(g, size)
    return np.cumsum(2.0 * lower + diag)
