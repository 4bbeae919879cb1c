"""The residual family's measurements √x_c Q_cᵀ x with their float64 rounding bounded and charged in d_in.

Notation: see :mod:`mmopt.hierarchy.basis` and :mod:`mmopt.structured.charged_answers`, whose argument this follows.
The basis's coefficient of a non-first child k of node g (the Householder form of
:func:`~mmopt.hierarchy.basis.analysis`) is, in closed form (uᵀw = S_g/√n_g for u = (√(n_k/n_g))_k, w_k = S_k/√n_k),

    q_k = S_k/√n_k − s·(S_g/√n_g − S_f/√n_f),     s = √(n_k/n_g)/(1 − √(n_f/n_g)),  f the first child of g,

S a node's sum of x over its leaves; the root's is S_root/√n. Written over three *disjoint* leaf sets — child k,
child f and the rest of g, R_k = S_g − S_k − S_f —

    q_k = (1/√n_k − s/√n_g)·S_k + (s/√n_f − s/√n_g)·S_f − (s/√n_g)·R_k,

each leaf meets one constant per row, so |Q|'s columns have Q's norms and the charge is the dense release's,
Δ·(1 + c·(2N + 1)) (the three-sum form, S_g in place of R_k, had |C||G| columns 12× Q's in a test). The node
sums and the rests of whole counts are exact (integers of at most N), every attribute's first; then the constants
along each attribute by compensated products (:func:`~mmopt.structured.charged_answers.compensated_gather`,
three terms a row), and √x_c per coefficient rounded once: within c·√x ⊙ (⊗ᵢ|Qᵢ|) x + η of the exact answers of
these constants, c ≈ u. The constants are Q's to a few ulps of their terms (1 − √(n_f/n_g) taken as
(n_g − n_f)/(n_g + √(n_f·n_g)), which does not cancel when f holds nearly every leaf); Δ is Q's closed form, rounded
up by 10⁻⁷ (:func:`mmopt.structured.release.upper_sensitivity`), as for every release.

The node family (:class:`~mmopt.hierarchy.nodes.NodeStrategy`, attribute k the tree) measures, per active component
U of the other attributes, level ℓ and level-ℓ node h, √z_{U,h}·(1_h ⊗ ⊗_{i≠k} qᵢ)ᵀ x for the coefficient rows
(qᵢ)ᵢ of U. Sums over a node's leaves along k commute with the other axes' maps, so :func:`measure_nodes` takes
every node's sum along k first (integers of at most N: exact), then the other attributes' node sums and rests,
constants and √z as above: within c·√z ⊙ (1_h ⊗ ⊗_{i≠k}|Mᵢ|) x + η, (c, η) = :func:`charge` of the other
attributes with the largest √z. The dense charge applies because that matrix is |A|, A's entrywise absolute value,
and |A| has A's column norms (≤ Δ₂), so ‖|A| x‖₂ ≤ ‖x‖₁·Δ₂: 1_h is 0/1, and in each other attribute a leaf meets one
constant per row (three disjoint sets), so no sum in the computation mixes signs that A's own entries cancel. With
no other attribute the answers are integer node sums times √z rounded once: ``charge([], w)`` is c = u (times
1 + 10⁻⁶ for the bound's own roundings) and η = 4·2⁻¹⁰⁷⁴ (a product that underflows), which covers that one rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmopt.hierarchy import basis as hb
from mmopt.hierarchy.tree import Hierarchy
from mmopt.structured import charged_answers as ca

__all__ = ["Coefficients", "charge", "coefficient_pair", "coefficients", "dense", "measure", "measure_nodes",
           "node_sums"]


@dataclass(frozen=True, eq=False)
class Coefficients:
    """Q ᵀ for one hierarchy as three terms a row over an extended axis: every node's sum (nodes numbered level by
    level, root first; ``node_of[ℓ]`` each leaf's level-ℓ node), then each row's rest R_k = S_g − S_k − S_f
    (``rest`` (rows × 3): g, k, f; the root's row has none). ``index``/``values`` (rows × 3), rows in the basis's
    coefficient order."""

    index: np.ndarray
    values: np.ndarray
    rest: np.ndarray
    node_of: tuple
    n_nodes: int


def coefficients(h: Hierarchy) -> Coefficients:
    """The closed form of the module docstring, from the hierarchy alone."""
    B = hb.basis(h)
    offsets = np.concatenate([[0], np.cumsum(h.n_groups)])  # level ℓ's groups from offsets[ℓ]
    n_rows = 1 + sum(lv.keep.size for lv in B.levels)
    index, values, rest = np.zeros((n_rows, 3), np.int64), np.zeros((n_rows, 3)), np.zeros((n_rows, 3), np.int64)
    values[0, 0] = 1.0 / math.sqrt(h.n)
    row = 1
    for ell, lv in enumerate(B.levels, start=1):
        sizes, parent_sizes = h.sizes[ell], h.sizes[ell - 1]
        starts = np.r_[True, lv.parent[1:] != lv.parent[:-1]]  # order is sorted by parent: its first child first
        first = dict(zip(lv.parent[starts].tolist(), lv.order[starts].tolist(), strict=True))
        for pos in lv.keep:
            k, g = int(lv.order[pos]), int(lv.parent[pos])
            f = first[g]
            nk, ng, nf = float(sizes[k]), float(parent_sizes[g]), float(sizes[f])
            # 1 − √(n_f/n_g) = (n_g − n_f)/(n_g + √(n_f·n_g)), n_g − n_f an exact integer: no cancellation when the
            # first child holds nearly all the leaves (a review measured 1.3e-10 relative at n_f = 10⁶ the other way)
            gap, root_f, root_g = float(parent_sizes[g] - sizes[f]), math.sqrt(nf), math.sqrt(ng)
            s = math.sqrt(nk / ng) * (ng + root_f * root_g) / gap
            index[row] = [offsets[ell] + k, offsets[ell] + f, offsets[-1] + row]
            values[row] = [1.0 / math.sqrt(nk) - s / root_g, s * gap / (root_f * root_g * (root_f + root_g)),
                           -s / root_g]
            rest[row] = [offsets[ell - 1] + g, offsets[ell] + k, offsets[ell] + f]
            row += 1
    node_of = tuple(offsets[ell] + h.groups[ell] for ell in range(h.depth + 1))
    return Coefficients(index, values, rest, node_of, int(offsets[-1]))


def _extended(c: Coefficients, T: np.ndarray, axis: int) -> np.ndarray:
    """T along ``axis`` replaced by every node's sum, then every row's rest: exact for whole counts (integers of
    at most N throughout)."""
    X = np.moveaxis(T, axis, 0)
    out = np.zeros((c.n_nodes + c.rest.shape[0], *X.shape[1:]))
    for nodes in c.node_of:
        np.add.at(out, nodes, X)
    g, k, f = c.rest[1:].T
    out[c.n_nodes + 1:] = out[g] - out[k] - out[f]
    return np.moveaxis(out, 0, axis)


def coefficient_pair(coefs, T: np.ndarray, axes) -> tuple[np.ndarray, np.ndarray | None]:
    """(⊗ᵢ Qᵢᵀ) T along ``axes`` (one per hierarchy of ``coefs``) as an unevaluated pair hi + lo: every attribute's
    node sums and rests first (exact for a tensor of integers of at most N: whole counts, or their node sums along
    another axis), then the constants by compensated gathers (module docstring); (T, None) when there are none."""
    T = np.asarray(T, dtype=float)
    for c, axis in zip(coefs, axes, strict=True):
        T = _extended(c, T, axis)
    hi, lo = T, None
    for c, axis in zip(coefs, axes, strict=True):
        hi, lo = ca.compensated_gather(c.index, c.values, hi, lo, axis)
    return hi, lo


def measure(coefs, root: np.ndarray, on: np.ndarray, x: np.ndarray) -> np.ndarray:
    """root ⊙ (⊗ᵢ Qᵢᵀ x)[on] (module docstring) for whole counts x of at most MAX_RECORDS records."""
    hi, lo = coefficient_pair(coefs, x, range(len(coefs)))
    return ca.weighted_entries(root, hi[on], lo[on])


def measure_nodes(h: Hierarchy, tree: int, coefs, roots, cols, x: np.ndarray) -> np.ndarray:
    """The node family's measurements (module docstring): per active component u and level ℓ,
    √z_{u,ℓ}[node] ⊙ (1_node ⊗ ⊗_{i≠k} Qᵢ)ᵀ x over the level-ℓ nodes × the coefficients ``cols[u]`` of u (C order
    over the other attributes' coefficients), flat in that order, for whole counts x of at most MAX_RECORDS
    records. ``h`` is attribute ``tree``'s hierarchy, ``coefs`` the other attributes' :class:`Coefficients` in
    order, ``roots[u][ℓ]`` = √z_{u,ℓ}."""
    top = max(len(r) for r in roots) - 1
    N, starts = node_sums(h, np.moveaxis(np.asarray(x, dtype=float), tree, 0), top)  # integers, exact
    hi, lo = coefficient_pair(coefs, N, range(1, N.ndim))
    hi = hi.reshape(N.shape[0], -1)
    lo = None if lo is None else lo.reshape(hi.shape)
    parts = []
    for r, c in zip(roots, cols, strict=True):
        for ell, w in enumerate(r):
            rows = slice(starts[ell], starts[ell + 1])
            part = ca.weighted_entries(w[:, None], hi[rows][:, c], None if lo is None else lo[rows][:, c])
            parts.append(part.ravel())
    return np.concatenate(parts)


def node_sums(h: Hierarchy, X: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """(every node's sum of X's rows (its first axis: ``h``'s leaves) at levels 0 … ``top``, stacked root first;
    where each level starts): group sums of whole counts, exact (integers of at most N), from the finest level up."""
    starts = np.concatenate([[0], np.cumsum([h.n_groups[ell] for ell in range(top + 1)])])
    out = np.zeros((int(starts[-1]), *X.shape[1:]))
    np.add.at(out, starts[top] + h.groups[top], X)
    for ell in range(top, 0, -1):
        np.add.at(out, starts[ell - 1] + h.parents[ell - 1], out[starts[ell]:starts[ell + 1]])
    return out, starts


def charge(coefs, top_weight: float) -> tuple[float, float]:
    """(c, η) of :func:`measure`, from the hierarchies and the largest weight √x_c alone
    (:func:`mmopt.structured.charged_answers.mode_charge` per attribute, then the weights' rounding); refused
    before any data is read where a product could overflow."""
    ca.check_magnitudes([c.values for c in coefs], range(len(coefs)), top_weight)
    rho = eta = 0.0
    for c in coefs:
        rho, eta = ca.mode_charge(c.values, rho, eta)
    return ca.final_charge(rho, top_weight * eta)


def dense(c: Coefficients, h: Hierarchy) -> np.ndarray:
    """The rows × leaves matrix these constants define (small hierarchies, tests): Q ᵀ to rounding."""
    M = np.zeros((c.index.shape[0], h.n))
    leaves = np.arange(h.n)
    member = np.zeros((c.n_nodes, h.n), dtype=bool)
    for nodes in c.node_of:
        member[nodes, leaves] = True
    M[0] = c.values[0, 0]
    for r in range(1, M.shape[0]):
        g, k, f = c.rest[r]
        for node, v in ((k, c.values[r, 0]), (f, c.values[r, 1])):
            M[r, member[node]] = v
        M[r, member[g] & ~member[k] & ~member[f]] = c.values[r, 2]
    return M
