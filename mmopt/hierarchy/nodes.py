"""The weighted node strategy: every node's total measured with its own weight, per component of the other attributes.

Notation: see README and :mod:`mmopt.hierarchy.components`. One attribute k (the *tree*: geography) is measured
node by node; the others by their residual components U = (Uᵢ)_{i≠k}:

    X = Σ_U X_U ⊗ P_U,      X_U = Σ_{h: level(h) ≤ T_U} z_{U,h} 1_h 1_hᵀ,

with T_U the deepest level of the tree that the workload asks in component U. As the P_U are orthogonal,
X⁺ = Σ_U X_U⁺ ⊗ P_U and, with β_{a,U} = Σ_s w_s² [a_{s,k} = a] ∏_{i≠k} τᵢ[a_{s,i}, Uᵢ] (:mod:`.components`),

    tr(G X⁺) = Σ_U Σ_a β_{a,U} Σ_{h at level a} V_{U,h},      V_{U,h} = 1_hᵀ X_U⁺ 1_h,
    diag(X)(cell) = Σ_U (Σ_{h ∋ cell} z_{U,h}) ∏_{i≠k} diagᵢ[typeᵢ, Uᵢ].

V_{U,h} is the variance of the least-squares estimate of node h's total from measurements of every node's total
with variances 1/z_{U,h}: a Gaussian tree model, solved exactly by one upward and one downward pass (Kalman
smoothing on a tree: Chou, Willsky & Benveniste 1994; Hay et al. 2010 for uniform weights). Both passes and their
reverse-mode derivatives (for the search in :mod:`.node_solve`) cost O(nodes). The family contains per-node noise
allocation, which the skewed trees of real geographies need (a large state's total deserves more weight).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from mmopt._base.readonly import read_only
from mmopt._base.validation import check_int
from mmopt.hierarchy import components as hc
from mmopt.hierarchy.strategy import _check_pair
from mmopt.hierarchy.tree import Hierarchy
from mmopt.hierarchy.workload import HierarchyWorkload


@dataclass(frozen=True, eq=False)
class Layout:
    """What the node family needs of a workload: the tree, the active components and their coefficients.

    Attributes
    ----------
    tree : int
        The attribute measured node by node.
    beta : ndarray
        (levels × active components) β_{a,U}.
    depth : ndarray
        T_U per active component.
    coef : ndarray
        (active components × other types) ∏ᵢ diagᵢ[rᵢ, Uᵢ].
    components : ndarray
        The flat index (over the other attributes' component tensor) of each active U.
    """

    tree: int
    beta: np.ndarray
    depth: np.ndarray
    coef: np.ndarray
    components: np.ndarray


def check_tree(W: HierarchyWorkload, tree, caller: str) -> int:
    """``tree`` as the index of one of ``W``'s attributes (any of them: a flat one is a tree of depth 1).

    Negative indices are refused, not counted from the end: the strategy records the index as given, and tree=-1
    scored the tree's levels against the wrong attribute's grouping sets (twice the true error), then failed later.
    """
    n = len(W.attributes)
    if isinstance(tree, numbers.Integral) and not isinstance(tree, bool | np.bool_) and not 0 <= tree < n:
        raise ValueError(f"The 'tree' parameter of {caller} must be the index of one of the workload's {n} "
                         f"attributes, an integer in [0, {n - 1}]. Got {tree} instead.")
    return check_int(tree, name="tree", caller=caller, low=0, high=n - 1)


def layout(W: HierarchyWorkload, tree: int) -> Layout:
    tree = check_tree(W, tree, "hierarchy.nodes.layout")
    tabs = [hc.tables(h) for h in W.attributes]
    others = [i for i in range(len(tabs)) if i != tree]
    L = W.attributes[tree].depth
    size = int(np.prod([tabs[i].n_components for i in others]))
    beta = np.zeros((L + 1, size))
    for s, w in zip(W.sets, W.weights, strict=True):
        beta[s[tree]] += w * w * hc.outer([np.ones(1)] + [tabs[i].tau[s[i]] for i in others]).ravel()
    active = np.flatnonzero(beta.max(axis=0) > 0)
    beta = beta[:, active]
    depth = np.array([np.flatnonzero(beta[:, u] > 0).max() for u in range(active.size)])
    return Layout(tree, beta, depth, component_coefficients(W.attributes, tree)[active], active)


def component_coefficients(attributes, tree: int) -> np.ndarray:
    """∏ᵢ diagᵢ[rᵢ, Uᵢ] over the attributes other than ``tree``: (components × types), C order as the tensors. A
    function of the trees alone, so a saved layout's is recomputed, never read (Δ₂ is charged from it)."""
    coef = np.ones((1, 1))
    for i, h in enumerate(attributes):
        if i != tree:
            coef = np.kron(coef, hc.tables(h).diag.T.toarray())
    return coef


def passes(h: Hierarchy, z: list[np.ndarray], beta: np.ndarray, want_grad: bool = True):
    """(f, ∂f/∂z per level, V per level) for f = Σ_a Σ_{h at a} β_{a,h} V_h on the tree cut at level T = len(z) − 1.

    ``z[ℓ]`` (> 0) are the weights of the level-ℓ nodes; the level-T nodes are the leaves of the cut tree. ``beta[ℓ]``
    is one number for the level or one per level-ℓ node.
    """
    T = len(z) - 1
    par = [None] + [h.parents[ell - 1] for ell in range(1, T + 1)]
    u, S = [None] * (T + 1), [None] * (T + 1)
    u[T] = 1.0 / z[T]
    for ell in range(T - 1, -1, -1):
        S[ell] = np.bincount(par[ell + 1], u[ell + 1], minlength=z[ell].size)
        u[ell] = 1.0 / (z[ell] + 1.0 / S[ell])
    d, Wd = [None] * (T + 1), [None] * (T + 1)
    d[0] = np.full(1, np.inf)
    Wd[0] = 1.0 / z[0]
    for ell in range(1, T + 1):
        p = par[ell]
        d[ell] = Wd[ell - 1][p] + S[ell - 1][p] - u[ell]  # outside the subtree: the parent minus the siblings
        if ell < T:
            Wd[ell] = 1.0 / (1.0 / d[ell] + z[ell])
    V = [1.0 / (1.0 / u[ell] + 1.0 / d[ell]) for ell in range(T + 1)]
    f = float(sum(np.sum(beta[ell] * V[ell]) for ell in range(T + 1)))  # β per level, or per node
    if not want_grad:
        return f, None, V
    ub = [beta[ell] * V[ell] ** 2 / u[ell] ** 2 for ell in range(T + 1)]
    db = [beta[ell] * V[ell] ** 2 / d[ell] ** 2 for ell in range(T + 1)]
    Wb = [np.zeros_like(z[ell]) for ell in range(T + 1)]
    Sb = [np.zeros_like(z[ell]) for ell in range(T + 1)]
    zb = [np.zeros_like(z[ell]) for ell in range(T + 1)]
    for ell in range(T, 0, -1):
        if ell < T:  # Wd[ℓ] = 1/(1/d + z): its adjoint is complete once every child has been processed
            db[ell] += Wb[ell] * Wd[ell] ** 2 / d[ell] ** 2
            zb[ell] -= Wb[ell] * Wd[ell] ** 2
        back = np.bincount(par[ell], db[ell], minlength=z[ell - 1].size)
        Wb[ell - 1] += back
        Sb[ell - 1] += back
        ub[ell] -= db[ell]
    zb[0] -= Wb[0] * Wd[0] ** 2
    for ell in range(T + 1):
        if ell > 0:
            ub[ell] += Sb[ell - 1][par[ell]]
        if ell < T:
            zb[ell] -= ub[ell] * u[ell] ** 2
            Sb[ell] += ub[ell] * u[ell] ** 2 / S[ell] ** 2
        else:
            zb[ell] -= ub[ell] / z[ell] ** 2
    return f, zb, V


def path_sums(h: Hierarchy, z: list[np.ndarray]) -> np.ndarray:
    """Σ_{ancestors-or-self} z at the cut's leaves (level len(z) − 1)."""
    P = z[0]
    for ell in range(1, len(z)):
        P = P[h.parents[ell - 1]] + z[ell]
    return P


class LogWeights:
    """θ = log z flattened over (active component, level, node), and the sensitivity part of a search's objective."""

    def __init__(self, h: Hierarchy, lay: Layout):
        self.h, self.lay = h, lay
        self.top = int(lay.depth.max())
        self.sizes = [[h.n_groups[ell] for ell in range(int(T) + 1)] for T in lay.depth]
        self.cuts = np.cumsum([0] + [n for sh in self.sizes for n in sh])
        self.anc = [hc.ancestor_at(h, self.top, int(T)) for T in lay.depth]

    @property
    def size(self) -> int:
        return int(self.cuts[-1])

    def split(self, theta: np.ndarray) -> list[list[np.ndarray]]:
        out, j = [], 0
        for sh in self.sizes:
            out.append([np.exp(theta[self.cuts[j + i]:self.cuts[j + i + 1]]) for i in range(len(sh))])
            j += len(sh)
        return out

    def diagonal(self, zs) -> np.ndarray:
        """diag(X) over (level-top groups × other types)."""
        D = np.zeros((self.h.n_groups[self.top], self.lay.coef.shape[1]))
        for u, z in enumerate(zs):
            D += np.outer(path_sums(self.h, z)[self.anc[u]], self.lay.coef[u])
        return D

    def gradient(self, zs, grads, f: float, smax: float, Db: np.ndarray) -> np.ndarray:
        """d(f·smax)/dθ from ∂f/∂z (``grads``) and ∂smax/∂D (``Db``): the path sums' adjoint, every ancestor's
        weight adding to its leaves' diagonal."""
        h, out = self.h, []
        for u, z in enumerate(zs):
            T = len(z) - 1
            Pb = np.bincount(self.anc[u], Db @ self.lay.coef[u], minlength=h.n_groups[T])
            zb = [None] * (T + 1)
            for ell in range(T, -1, -1):
                zb[ell] = grads[u][ell] * smax + f * Pb
                if ell:
                    Pb = np.bincount(h.parents[ell - 1], Pb, minlength=h.n_groups[ell - 1])
            out.extend(g * zz for g, zz in zip(zb, z, strict=True))  # d/dθ = z · d/dz
        return np.concatenate(out)

    def strategy(self, attributes, theta: np.ndarray) -> NodeStrategy:
        """The node strategy of θ, scaled to Δ₂ = 1."""
        zs = self.split(theta)
        scale = self.diagonal(zs).max()
        return NodeStrategy(attributes, self.lay, tuple(tuple(zl / scale for zl in z) for z in zs))


@dataclass(frozen=True, eq=False)
class NodeStrategy:
    """Node weights z_{U,h} for a workload's layout, scaled so that Δ₂ = 1.

    Attributes
    ----------
    attributes : tuple of Hierarchy
    layout : Layout
    weights : tuple of tuple of ndarray
        ``weights[u][ℓ]``: z of the level-ℓ nodes in active component u.
    name : str
    """

    attributes: tuple
    layout: Layout
    weights: tuple
    name: str = "weighted nodes"

    def __post_init__(self):
        # z is a node's weight in X = Σ z·(its indicator): a negative or NaN z made X indefinite, and a release
        # drew the noise and returned NaN estimates with finite standard errors; so did z = 0 (its measurement
        # √z·S is divided by √z in the estimate: a helper's probe). optimize's weights are e^θ, never 0
        for u, z in enumerate(self.weights):
            for level, zl in enumerate(z):
                zl = np.asarray(zl, dtype=float)
                if not np.all(np.isfinite(zl)) or np.any(zl <= 0):
                    raise ValueError(f"The 'weights' parameter of NodeStrategy must hold finite node weights z > 0 "
                                     "(a node of weight 0 is not measured, and its estimate would divide by 0). "
                                     f"Got {zl.tolist()!r:.80} in component {u}, level {level}.")
        # read-only copies: a release's strategy is shared, and Δ is charged from z (an edit in place changed the
        # answers 10–15× at the same σ and privacy map; a helper's probe)
        object.__setattr__(self, "weights", tuple(tuple(read_only(zl) for zl in z) for z in self.weights))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(h.n for h in self.attributes)

    @property
    def domain_size(self) -> int:
        return int(np.prod(self.shape, dtype=object))

    def diagonal(self) -> np.ndarray:
        """diag(X) over (the tree's level-max(T_U) groups × the other attributes' types)."""
        lay, h = self.layout, self.attributes[self.layout.tree]
        top = int(lay.depth.max())
        D = np.zeros((h.n_groups[top], lay.coef.shape[1]))
        for u, z in enumerate(self.weights):
            P = path_sums(h, list(z))
            anc = hc.ancestor_at(h, top, int(lay.depth[u]))
            D += np.outer(P[anc], lay.coef[u])
        return D

    def sensitivity(self, norm: str = "l2") -> float:
        if norm != "l2":
            raise ValueError(f"The 'norm' parameter of NodeStrategy.sensitivity must be 'l2' (a Gaussian-noise "
                             f"strategy). Got {norm!r} instead.")
        return float(np.sqrt(self.diagonal().max()))


def node_total(A: NodeStrategy, W: HierarchyWorkload, variances: list[np.ndarray] | None = None) -> float:
    """Δ₂² · tr(G X⁺) at unit noise, exact (inf when W asks a group the strategy does not measure); ``variances``:
    :func:`node_variances` of the pair when the caller has them (read only when W asks below the measured levels)."""
    h = A.attributes[A.layout.tree]
    lay = layout(W, A.layout.tree)  # W's own β; the strategy's components must be W's (checked by the caller)
    if np.any(lay.depth > A.layout.depth):
        # a level below the measured ones is still estimable where its groups are their measured ancestors (chains
        # of single children: the same leaves) — the per-query variances know which; this returned inf for them
        return float(sum(v.sum() for v in (node_variances(A, W) if variances is None else variances)))
    f = sum(passes(h, list(z), lay.beta[:, u], want_grad=False)[0] for u, z in enumerate(A.weights))
    return float(A.diagonal().max() * f)


def node_variances(A: NodeStrategy, W: HierarchyWorkload) -> list[np.ndarray]:
    """Per grouping set, its queries' variances at unit noise (as :func:`.strategy.unit_variances`): inf for a query
    the strategy does not measure. The strategy must be built on the workload's hierarchies."""
    _check_pair(A, W, NodeStrategy)
    lay, h = A.layout, A.attributes[A.layout.tree]
    k = lay.tree
    others = [i for i in range(len(A.attributes)) if i != k]
    Vs = [passes(h, list(z), np.ones(len(z)), want_grad=False)[2] for z in A.weights]
    scale = A.diagonal().max()
    out = []
    for s, w in zip(W.sets, W.weights, strict=True):
        a = s[k]
        groups = [W.attributes[i].n_groups[s[i]] for i in others]
        var = np.zeros((h.n_groups[a], int(np.prod(groups))))
        masses = hc.other_masses(A.attributes, k, s, lay.components)
        for u, mass in enumerate(masses):
            if not mass.any():
                continue
            T = int(lay.depth[u])
            if a <= T:
                var += np.outer(Vs[u][a], mass)
                continue
            # below the deepest level this component measures, a group is estimable only when it is its level-T
            # ancestor (a chain of single children: the same leaves); any other is not
            anc = hc.ancestor_at(h, a, T)
            v = np.where(h.sizes[a] == h.sizes[T][anc], Vs[u][T][anc], np.inf)
            on = mass > 0
            var[:, on] += np.outer(v, mass[on])
        # a component the strategy does not measure at all: not estimable either (the masses of all components
        # add up to the group sizes; round-off in them is ~1e-16 relative)
        covered = np.sum(masses, axis=0) if masses else np.zeros(var.shape[1])
        var[:, covered < hc.group_sizes(A.attributes, k, s) * (1 - 1e-9)] = np.inf
        full = var.reshape((h.n_groups[a], *groups))
        out.append(scale * w * w * np.moveaxis(full, 0, k))
    return out
