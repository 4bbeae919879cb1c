"""A lower bound on every strategy's Gaussian error for grouping sets over hierarchies, without the N-cell Gram.

Notation: see README and :mod:`mmopt.hierarchy.workload`. For cell weights μ ≥ 0 with Σμ = 1 (D = diag μ),
Lagrange duality of the L2 program min tr(G X⁻¹) s.t. diag(X) ≤ 1 gives

    OPT ≥ (tr (D^{1/2} G D^{1/2})^{1/2})²,

(minimise tr(GX⁻¹) + λ(tr(DX) − 1) over X ≻ 0, then over λ; Σ_j μ_j X_jj ≤ max_j X_jj); μ uniform is the SVD
bound (Li et al., Thm 5.26). We take μ constant over the leaves of each level-(L−1) node of one attribute (the
*irregular* one) and uniform over every other attribute, which must be balanced (its level Grams commute: on its
level-ℓ component L_aᵀL_a is n_(a)·I for ℓ ≤ a and 0 otherwise). The bound then splits over the other
attributes' components into tree matrices M = Σ_a β_a D^{1/2} L_aᵀL_a D^{1/2} of the irregular attribute alone.

tr M^{1/2} comes from a recursion up the tree, never an n×n matrix: the matrix of a node g is the direct sum of
its children's plus β_{level(g)} z_g z_gᵀ (z_g = D^{1/2} 1_g), a rank-one update. Knowing each child's active
eigenvalues λ_i and the squared weights p_i = (z·q_i)² of z on their eigenvectors, the node's eigenvalues are the
roots of β Σ_i p_i/(x − λ_i) = 1, one in each gap (λ_i, λ_{i+1}) and one in (λ_K, λ_K + βΣp) (Golub 1973;
Bunch, Nielsen & Sorensen 1978), and the new weights are p'_j = β⁻² / Σ_i p_i/(x_j − λ_i)²; eigenvectors
orthogonal to z (equal poles merged, zero weights) keep their eigenvalue for good and leave the recursion.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt.hierarchy import components as hc
from mmopt.hierarchy.tree import Hierarchy
from mmopt.hierarchy.workload import HierarchyWorkload

_MERGE = 1e-13  # relative distance under which two poles are one (their eigenvectors are rotated together)
_BISECTIONS = 64


def tree_trace_sqrt(h: Hierarchy, type_weights: np.ndarray, beta) -> float:
    """tr (Σ_a β_a D^{1/2}L_aᵀL_a D^{1/2})^{1/2} with D = diag(μ), μ_j = ``type_weights[type of j]`` per leaf."""
    beta = np.asarray(beta, dtype=float)
    L = h.depth
    mu = np.asarray(type_weights, dtype=float)  # per leaf-parent node (level L−1)
    k = np.bincount(h.parents[-1], minlength=h.n_groups[L - 1]).astype(float)
    done = float(np.sum((k - 1) * np.sqrt(beta[L] * mu)))  # leaf residuals inside a leaf-parent: eigenvalue β_L μ
    lam, p = beta[L] * mu, k * mu  # each leaf-parent's merged leaf pole
    if beta[L - 1] > 0:  # the leaf-parent's own rank-one update of a single pole: x = λ + βp, weight unchanged
        lam = lam + beta[L - 1] * p
    nodes = [(lam[g:g + 1], p[g:g + 1]) for g in range(lam.size)]
    for ell in range(L - 2, -1, -1):
        par = h.parents[ell]
        order = np.argsort(par, kind="stable")
        bounds = np.searchsorted(par[order], np.arange(h.n_groups[ell] + 1))
        merged = []
        for g in range(h.n_groups[ell]):
            kids = order[bounds[g]:bounds[g + 1]]
            lam_g = np.concatenate([nodes[c][0] for c in kids])
            p_g = np.concatenate([nodes[c][1] for c in kids])
            lam_g, p_g, gone = _deflate(lam_g, p_g)
            done += gone
            if beta[ell] > 0:
                lam_g, p_g = _rank_one(lam_g, p_g, beta[ell])
            merged.append((lam_g, p_g))
        nodes = merged
    return done + float(sum(np.sum(np.sqrt(np.maximum(lam_g, 0.0))) for lam_g, _ in nodes))


def _deflate(lam, p):
    """Sort poles, merge equal ones (one keeps the summed weight, the rest leave with √λ), drop zero weights."""
    order = np.argsort(lam, kind="stable")
    lam, p = lam[order], p[order]
    gone = 0.0
    if lam.size > 1:
        new = np.concatenate([[True], np.diff(lam) > _MERGE * np.maximum(np.abs(lam[1:]), 1e-300)])
        start = np.flatnonzero(new)
        counts = np.diff(np.append(start, lam.size))
        gone += float(np.sum((counts - 1) * np.sqrt(np.maximum(lam[start], 0.0))))
        lam, p = lam[start], np.add.reduceat(p, start)
    tiny = p <= 1e-300
    gone += float(np.sum(np.sqrt(np.maximum(lam[tiny], 0.0))))
    return lam[~tiny], p[~tiny], gone


def _rank_one(lam, p, beta: float):
    """Eigenvalues and new weights of diag(λ) + β p̃p̃ᵀ (p = p̃², λ sorted ascending, distinct, p > 0)."""
    K = lam.size
    if not beta * p.sum() > np.finfo(float).tiny:  # an update below float64's range moves nothing it can hold
        return lam, p
    lo = lam.copy()
    # each root moves by at most βΣp from its pole (interlacing, and Σ(x_j − λ_j) = βΣp): bracketing δ by that, not
    # by the gap, resolves it at any β — a set weight of 1e-10 (β ~ 1e-20 of a unit gap) left 64 bisections at the
    # gap's round-off, and the bound came out 66.8 where a feasible strategy has error 58.2 (1e20 at 1e-15)
    width = np.minimum(np.append(np.diff(lam), np.inf), beta * p.sum())
    a, b = np.zeros(K), width.copy()  # the root is lo + δ with δ ∈ (a, b)
    offs = lam[:, None] - lam[None, :]  # offs[j, i] = λ_j − λ_i, so x_j − λ_i = offs[j, i] + δ_j (exact shift)
    for _ in range(_BISECTIONS):
        d = 0.5 * (a + b)
        f = beta * np.sum(p[None, :] / (offs + d[:, None]), axis=1) - 1.0
        up = f > 0  # f decreases on each gap: f > 0 means the root lies to the right
        a = np.where(up, d, a)
        b = np.where(up, b, d)
    x = lo + 0.5 * (a + b)
    diff = offs + (0.5 * (a + b))[:, None]
    # p'_j = β⁻² / Σ_i p_i/(x_j − λ_i)², scaled by s_j = min_i |x_j − λ_i| (~βp_j) so that neither β⁻² nor the
    # nearest pole's term overflows at tiny β
    near = np.min(np.abs(diff), axis=1)
    weights = (near / beta) ** 2 / np.sum(p[None, :] * (near[:, None] / diff) ** 2, axis=1)
    return x, weights


def lower_bound(workload: HierarchyWorkload, type_weights=None) -> tuple[float, str] | None:
    """(bound, how) for every strategy's unit Gaussian total; None when two attributes are irregular.

    ``type_weights``: a tensor over the attributes' cell types (e.g. the family dual of
    :func:`mmopt.hierarchy.solve`); only its marginal on the irregular attribute is used. None: uniform (SVD).
    """
    attrs = workload.attributes
    irregular = [i for i, h in enumerate(attrs) if not h.regular]
    if len(irregular) > 1:
        return None
    tabs = [hc.tables(h) for h in attrs]
    k = irregular[0] if irregular else int(np.argmax([T.n_types for T in tabs]))
    if type_weights is None:
        mu_k = tabs[k].count / tabs[k].count.sum()
        how = "SVD bound (uniform cell weights)"
    else:
        axes = tuple(i for i in range(len(attrs)) if i != k)
        mu_k = np.asarray(type_weights, dtype=float).sum(axis=axes)
        mu_k = mu_k / mu_k.sum()
        how = "Lagrange dual at the family's cell-type weights"
    mu_leaf = mu_k / tabs[k].count  # per leaf of each type: Σ over leaves = 1
    others = [i for i in range(len(attrs)) if i != k]
    total, cache = 0.0, {}
    for levels in np.ndindex(*[attrs[i].depth + 1 for i in others]):
        beta = np.zeros(attrs[k].depth + 1)
        mult = 1.0
        for i, ell in zip(others, levels, strict=True):
            g = attrs[i].n_groups
            mult *= g[ell] - (g[ell - 1] if ell else 0)
        for s, w in zip(workload.sets, workload.weights, strict=True):
            f = w * w
            for i, ell in zip(others, levels, strict=True):
                a, h = s[i], attrs[i]
                f *= (h.n / h.n_groups[a]) / h.n if ell <= a else 0.0  # eigenvalue n_(a) of L_aᵀL_a, over nᵢ
            beta[s[k]] += f
        top = beta.max()
        if top <= 0 or mult == 0:
            continue
        key = tuple(np.round(beta / top, 15))
        if key not in cache:
            cache[key] = tree_trace_sqrt(attrs[k], mu_leaf, beta / top)
        total += mult * math.sqrt(top) * cache[key]
    return total * total, how
