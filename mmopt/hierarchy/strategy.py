"""The hierarchical residual strategy: one weight per residual component, its exact sensitivity and error.

Notation: see README and :mod:`mmopt.hierarchy.components`. The strategy measures every product component
P_c = ⊗ᵢ P_{i,cᵢ} with weight x_c ≥ 0: X = AᵀA = Σ_c x_c P_c (A stacks √x_c Q_cᵀ for orthonormal bases Q_c).
The P_c are orthogonal projectors, so X⁺ = Σ_{x_c>0} P_c/x_c and, for a workload with t_c = tr(G P_c),

    Δ₂² = max_j diag(X)_j = max_r Σ_c x_c ∏ᵢ diagᵢ[rᵢ, cᵢ],       total = Δ₂² · Σ_c t_c/x_c,
    var(query ⊗ᵢ 1_{hᵢ} of grouping set s) = Δ₂² · w_s² Σ_c ∏ᵢ ‖P_{i,cᵢ} 1_{hᵢ}‖² / x_c

exactly (proof: the projectors are orthogonal and idempotent; the diagonal is constant over a type's leaves).
With every attribute flat this is ResidualPlanner's strategy (Xiao et al., 2023).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mmopt._base.readonly import read_only
from mmopt.hierarchy import components as hc
from mmopt.hierarchy.tree import Hierarchy
from mmopt.hierarchy.workload import HierarchyWorkload


@dataclass(frozen=True, eq=False)
class HierarchyStrategy:
    """Weights x_c ≥ 0 on the residual components of a product of hierarchies, scaled to Δ₂ = 1.

    Attributes
    ----------
    attributes : tuple of Hierarchy
    weights : ndarray
        The tensor x (one axis per attribute, components along each).
    name : str
    """

    attributes: tuple
    weights: np.ndarray = field(repr=False)
    name: str = "hierarchical residual"

    def __post_init__(self) -> None:
        if not self.attributes or not all(isinstance(h, Hierarchy) for h in self.attributes):
            raise TypeError("The 'attributes' parameter of HierarchyStrategy must be a non-empty tuple of Hierarchy. "
                            f"Got {self.attributes!r:.80} instead.")
        x = np.asarray(self.weights, dtype=float)
        want = tuple(hc.tables(h).n_components for h in self.attributes)
        if x.shape != want or not np.all(np.isfinite(x)) or np.any(x < 0) or not np.any(x > 0):
            raise ValueError(f"The 'weights' parameter of HierarchyStrategy must be a tensor of shape {want} of "
                             f"finite values ≥ 0, not all 0. Got shape {x.shape}.")
        object.__setattr__(self, "attributes", tuple(self.attributes))
        object.__setattr__(self, "weights", read_only(x))  # its Δ is charged from them: no edit in place

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(h.n for h in self.attributes)

    @property
    def domain_size(self) -> int:
        return int(np.prod(self.shape, dtype=object))

    def diagonal(self) -> np.ndarray:
        """diag(X) per cell type (a tensor over the attributes' types)."""
        return hc.kron_apply([hc.tables(h).diag for h in self.attributes], self.weights)

    def sensitivity(self, norm: str = "l2") -> float:
        """Δ₂ = √(max diag X), exact. Only the L2 norm has this closed form here."""
        if norm != "l2":
            raise ValueError(f"The 'norm' parameter of HierarchyStrategy.sensitivity must be 'l2' (the hierarchical "
                             f"residual strategy is a Gaussian-noise strategy). Got {norm!r} instead.")
        return float(np.sqrt(self.diagonal().max()))

    def dense_gram(self) -> np.ndarray:
        """X = Σ_c x_c P_c (N × N): for small domains and tests only."""
        P = [_projectors(h) for h in self.attributes]
        X = 0.0
        for idx in zip(*np.nonzero(self.weights), strict=True):
            term = np.ones((1, 1))
            for Pi, c in zip(P, idx, strict=True):
                term = np.kron(term, Pi[c])
            X = X + self.weights[idx] * term
        return X


def _projectors(h: Hierarchy) -> list[np.ndarray]:
    T = hc.tables(h)
    out = []
    for ell, g in zip(T.level, T.node, strict=True):
        if ell == 0:
            out.append(np.full((h.n, h.n), 1.0 / h.n))
            continue
        M = h.level_matrix(ell)[h.parents[ell - 1] == g]  # the children of g
        top = (h.groups[ell - 1] == g).astype(float)
        out.append(M.T @ (M / M.sum(axis=1, keepdims=True)) - np.outer(top, top) / top.sum())
    return out


def unit_total(strategy: HierarchyStrategy, workload: HierarchyWorkload) -> float:
    """Δ₂² · Σ_c t_c/x_c: the total squared error at unit noise (inf when a queried component is unmeasured)."""
    _check_pair(strategy, workload)
    t = workload.component_traces()
    x = strategy.weights
    need = t > 0
    if np.any(need & (x <= 0)):
        return float("inf")
    return float(strategy.diagonal().max() * np.sum(t[need] / x[need]))


def unit_variances(strategy: HierarchyStrategy, workload: HierarchyWorkload) -> list[np.ndarray]:
    """Per grouping set, the tensor of its queries' variances at unit noise (groups along each attribute)."""
    _check_pair(strategy, workload)
    x = strategy.weights
    inv = np.divide(1.0, x, out=np.zeros_like(x), where=x > 0)
    tabs = [hc.tables(h) for h in strategy.attributes]
    scale = strategy.diagonal().max()
    out = []
    for s, w in zip(workload.sets, workload.weights, strict=True):
        masses = [T.masses[a] for T, a in zip(tabs, s, strict=True)]
        var = scale * w * w * hc.kron_apply(masses, inv)
        touched = hc.kron_apply([(M > 0).astype(float) for M in masses], (x <= 0).astype(float))
        var[touched > 0] = np.inf  # a query with mass on an unmeasured component cannot be answered
        out.append(var)
    return out


def _check_pair(strategy, workload, kind=None) -> None:
    """The strategy (a ``kind``, default HierarchyStrategy) was built on the workload's very hierarchies."""
    kind = HierarchyStrategy if kind is None else kind
    if not isinstance(strategy, kind) or not isinstance(workload, HierarchyWorkload):
        raise TypeError(f"The hierarchy family pairs a {kind.__name__} with a HierarchyWorkload. Got "
                        f"{type(strategy).__name__} and {type(workload).__name__}.")
    if tuple(h.n for h in strategy.attributes) != workload.shape or any(
            a is not b and not _same(a, b) for a, b in zip(strategy.attributes, workload.attributes, strict=True)):
        how = "the same shape, other trees" if strategy.shape == workload.shape else "other shapes"
        raise ValueError(f"The strategy's hierarchies (shape {strategy.shape}) are not the workload's (shape "
                         f"{workload.shape}: {how}); optimise the strategy for this workload's attributes.")


def _same(a: Hierarchy, b: Hierarchy) -> bool:
    return a.depth == b.depth and all(np.array_equal(p, q) for p, q in zip(a.parents, b.parents, strict=True))
