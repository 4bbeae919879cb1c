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

With a weight per level (each row of the level scaled by it, :func:`coefficients`), the same passes hold with
c = w²/(1 + w²σ) in K's rank-one terms and ρ = 1/(1 + w²σ) in aᵥ = ρa′ (c = ρ = γ for unit weights).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmopt._base.readonly import read_only

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


def coefficients(T: Levels, w: np.ndarray | None) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """(c, ρ) of each level's internal nodes, from σ bottom-up, with level weights ``w`` (None: all 1). A node of
    weight w adds w²1ᵥ1ᵥᵀ, so Sherman–Morrison gives c = w²/(1 + w²σ) and aᵥ = ρ a′ with ρ = 1 − cσ = 1/(1 + w²σ),
    σ = Σ_c σ_c and σ_leaf = 1/w²; with unit weights c = ρ = γ."""
    out: list = [(np.empty(0), np.empty(0))] * len(T.levels)
    sigma_below = None
    for k in range(len(T.levels) - 1, -1, -1):
        L = T.levels[k]
        w2 = 1.0 if w is None else float(w[k]) ** 2
        sigma = np.full(L.lo.size, 1.0 / w2)
        if L.inner.size:
            s = _group_sum(L, sigma_below)
            rho = 1.0 / (1.0 + w2 * s)
            out[k] = (w2 * rho, rho)
            sigma[L.inner] = rho * s
        sigma_below = sigma
    return tuple(out)


def leaf_weights(T: Levels, w: np.ndarray | None) -> np.ndarray:
    """Each cell's own row weight: its level's (leaves sit at two depths where n is not a power of b)."""
    return np.ones(T.n) if w is None else np.asarray(w, dtype=float)[T.depth - 1]


def row_weights(T: Levels, w: np.ndarray | None) -> np.ndarray:
    """The weight of every row in :func:`node_sums` order: the cells, then the internal nodes level by level."""
    if w is None:
        return np.ones(T.n + sum(L.inner.size for L in T.levels))
    return np.concatenate([leaf_weights(T, w)] + [np.full(L.inner.size, float(w[k])) for k, L in enumerate(T.levels)])


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
        # read-only: a strategy caches its tree, and an edit in place changed its evaluation (a helper's probe)
        out.append(Level(*(read_only(a, None) for a in (lo, size, inner, kids, parent, slot))))
        lo, size, k = child_lo, child_size, k + 1
    return Levels(n, b, tuple(out), read_only(depth, None))


def _padded(L: Level, values: np.ndarray, b: int) -> np.ndarray:
    """The next level's ``values`` as an (internal × b) array, each row a node's children (zeros past them)."""
    out = np.zeros((L.inner.size, b) + values.shape[1:])
    out[L.parent, L.slot] = values
    return out


def _group_sum(L: Level, values: np.ndarray) -> np.ndarray:
    """Each internal node's sum of its children's ``values`` (rows of the next level). A node's children are
    consecutive rows (``parent`` is np.repeat over ``kids`` ≥ 1), so one segment sum each: a scatter into the padded
    (internal × b) array cost 40 % of a pass on 100,000 cells."""
    return np.add.reduceat(values, np.cumsum(L.kids) - L.kids, axis=0)


def _generators(kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) of G = WᵀW = pₘᵢₙqₘₐₓ (0-indexed): p = 1 for prefix sums and i + 1 for all ranges, q = n − j
    (:mod:`mmopt.dense.gram_operator`)."""
    i = np.arange(n, dtype=float)
    return (np.ones(n) if kind == "prefix" else i + 1.0), n - i


def unit_total(T: Levels, kind: str, w: np.ndarray | None = None) -> float:
    """tr(G K): the tree strategy's total squared error at Δ = 1 on prefix sums or all ranges (module docstring),
    with level weights ``w`` (a leaf: K = 1/w², a = 1/w²; a node: tr = Σ tr_c − cE′, E = ρ²E′, P = ρΣP, Q = ρΣQ)."""
    p, q = _generators(kind, T.n)
    coef = coefficients(T, w)
    below = None  # per node of the level below: columns (T, E, P, Q)
    for k in range(len(T.levels) - 1, -1, -1):
        L, (c, rho) = T.levels[k], coef[k]
        inv = 1.0 if w is None else 1.0 / float(w[k]) ** 2
        cells = L.lo
        stats = np.empty((L.lo.size, 4))
        pq = p[cells] * q[cells] * inv  # leaves (and harmless placeholders for the internal rows, overwritten)
        stats[:, 0], stats[:, 1], stats[:, 2], stats[:, 3] = pq, pq * inv, p[cells] * inv, q[cells] * inv
        if L.inner.size:
            kidsT = _padded(L, below, T.b)
            P_before = np.cumsum(kidsT[:, :, 2], axis=1) - kidsT[:, :, 2]
            E = kidsT[:, :, 1].sum(axis=1) + 2.0 * np.sum(P_before * kidsT[:, :, 3], axis=1)
            stats[L.inner, 0] = kidsT[:, :, 0].sum(axis=1) - c * E
            stats[L.inner, 1] = rho * rho * E
            stats[L.inner, 2] = rho * kidsT[:, :, 2].sum(axis=1)
            stats[L.inner, 3] = rho * kidsT[:, :, 3].sum(axis=1)
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


def _upward(T: Levels, z: np.ndarray, damping: tuple[np.ndarray, ...] | None) -> list[np.ndarray]:
    """Per level, every node's value: a leaf's cell of ``z``, an internal node's the sum of its children's (times its
    ρ from ``damping`` when given). Each sum is over a node's own children, never a difference of running sums: no
    cancellation."""
    out: list[np.ndarray] = [np.empty(0)] * len(T.levels)
    below = None
    for k in range(len(T.levels) - 1, -1, -1):
        L = T.levels[k]
        s = z[L.lo].astype(float)
        if L.inner.size:
            s[L.inner] = _group_sum(L, below) * (1.0 if damping is None else damping[k])
        out[k] = below = s
    return out


def node_sums(T: Levels, z: np.ndarray) -> np.ndarray:
    """B z: the n cells, then every internal node's sum level by level (root first)."""
    sums = _upward(T, z, None)
    return np.concatenate([z] + [s[L.inner] for s, L in zip(sums, T.levels, strict=True)])


def solve(T: Levels, r: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """K r = (BᵀΩ²B)⁻¹r in O(n), Ω the level weights ``w`` (module docstring): up, αᵥ = 1ᵀKᵥrᵥ = ρᵥ Σ_c α_c
    (α_leaf = rᵢ/wᵢ²); down, Uᵥ = wᵥ²αᵥ + ρᵥU_parent (c·S = w²α) and (K r)ᵢ = (rᵢ − U_parent(i))/wᵢ²."""
    coef = coefficients(T, w)
    leaf2 = leaf_weights(T, w) ** 2
    alphas = _upward(T, r / leaf2, tuple(rho for _, rho in coef))
    z = r.astype(float)
    up = np.zeros(1)  # per internal node of the current level, its parent's U; the root's parent contributes nothing
    for k, L in enumerate(T.levels):
        if not L.inner.size:
            break
        w2 = 1.0 if w is None else float(w[k]) ** 2
        U = w2 * alphas[k][L.inner] + coef[k][1] * up
        nxt = T.levels[k + 1]
        up_child = U[L.parent]
        leaf = nxt.size == 1
        z[nxt.lo[leaf]] -= up_child[leaf]
        up = up_child[nxt.inner]  # the next level's internal nodes take their parent's U
    return z / leaf2


def prefix_variances(T: Levels, w: np.ndarray | None = None) -> np.ndarray:
    """vₜ = wₜᵀKwₜ for every prefix wₜ = 1_[0, t] (unit Δ): vₜ = vₜ₋₁ + 2(Kwₜ₋₁)ₜ + Kₜₜ with K = Ω_leaf⁻² −
    Σᵥ cᵥ gᵥgᵥᵀ, gᵥ(i) = πᵥ(i)/wᵢ² and πᵥ(i) the product of ρ over the internal nodes strictly between v and cell i.
    Each level's nodes are padded rows, so the within-node prefix sums of gᵥ start from zero at each node."""
    coef = coefficients(T, w)
    inv2 = 1.0 / leaf_weights(T, w) ** 2
    diag, lower = inv2.copy(), np.zeros(T.n)
    pi = inv2.copy()
    for k in range(len(T.levels) - 1, -1, -1):
        L, (c, rho) = T.levels[k], coef[k]
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
        diag[cells] -= (c[:, None] * gv * gv)[inside]
        lower[cells] -= (c[:, None] * gv * before)[inside]
        pi[cells] *= np.repeat(rho, size)
    return np.cumsum(2.0 * lower + diag)
