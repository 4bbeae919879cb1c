"""The best hierarchical residual strategy for a workload under Gaussian noise, with its dual certificate.

Notation: see README and :mod:`mmopt.hierarchy.strategy`. Over weights x ≥ 0 the L2 program of the family is

    min Σ_c t_c / x_c   s.t.  (B x)_r ≤ 1 for every cell type r,      B = ⊗ᵢ diagᵢ,

convex and separable. Its Lagrange dual over μ on the simplex of types is max_μ h(μ)², h(μ) = Σ_c √(t_c (Bᵀμ)_c),
attained at x_c ∝ √(t_c / (Bᵀμ)_c). Since Σ_r μ_r (B x̃)_r = h for x̃_c = √(t_c/(Bᵀμ)_c), the primal value of x̃
scaled to max B x̃ = 1 over the dual value is max_r (B x̃)_r / h ≥ 1: the family gap, which the multiplicative
update μ_r ← μ_r (B x̃)_r / h (the classical fixed point of optimal-design duals, Silvey, Titterington &
Torsney 1978) drives to 1. Every number is a Kronecker product applied axis by axis: nothing N-sized is formed.
When the hierarchies are balanced the family holds the global optimum (the tree automorphisms act transitively
on cells and their commutant is spanned by the level projectors; the argument of ResidualPlanner, Xiao et al.
2023, Thm 4); otherwise :mod:`mmopt.hierarchy.bound` certifies how far the family is from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt.hierarchy import components as hc
from mmopt.hierarchy.strategy import HierarchyStrategy
from mmopt.hierarchy.workload import HierarchyWorkload, check_workload


@dataclass(frozen=True)
class FamilySolution:
    """The solved family program.

    Attributes
    ----------
    strategy : HierarchyStrategy
        Scaled to Δ₂ = 1.
    objective : float
        Σ_c t_c / x_c at Δ₂ = 1 (unit noise).
    family_bound : float
        h(μ)²: a lower bound on every strategy *of this family*.
    type_weights : ndarray
        μ, the dual weights of the cell types (a tensor over the attributes' types), summing to 1.
    iterations : int
    converged : bool
    """

    strategy: HierarchyStrategy
    objective: float
    family_bound: float
    type_weights: np.ndarray
    iterations: int
    converged: bool


#: the exponent of the multiplicative update (1: the classical fixed point)
POWER = 1.0


def solve(workload: HierarchyWorkload, *, tol: float = 1e-9, max_iterations: int = 20_000) -> FamilySolution:
    """The optimal weights of the hierarchical residual family for ``workload`` (unit Gaussian noise).

    Examples
    --------
    >>> from mmopt.hierarchy import Hierarchy, grouping_sets
    >>> W = grouping_sets([Hierarchy.balanced((3, 4)), 2], [("level2", "a1"), ("level1",), ()])
    >>> sol = solve(W)
    >>> sol.converged, bool(sol.objective >= sol.family_bound * (1 - 1e-12))
    (True, True)
    """
    W = check_workload(workload, "hierarchy.solve")
    # the loop must run at least once: max_iterations=0 left the strategy unset (UnboundLocalError); tol is the
    # relative family gap accepted, and a NaN one would never stop the loop
    tol = v.check_real(tol, name="tol", caller="hierarchy.solve", low=0.0, high=1.0, low_open=True, high_open=True)
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller="hierarchy.solve", low=1)
    tabs = [hc.tables(h) for h in W.attributes]
    B = [T.diag for T in tabs]
    Bt = [T.diag.T.tocsr() for T in tabs]
    t = W.component_traces()
    need = t > 0
    mu = hc.outer([T.count / T.count.sum() for T in tabs])  # start: uniform over cells
    it, ratio = 0, np.inf
    for it in range(1, max_iterations + 1):  # noqa: B007 (the count is returned)
        s = hc.kron_apply(Bt, mu)
        xt = np.zeros_like(t)
        xt[need] = np.sqrt(t[need] / s[need])
        Bx = hc.kron_apply(B, xt)
        h = float(np.sum(mu * Bx))
        ratio = float(Bx.max()) / h
        if ratio <= 1 + tol:
            break
        mu = mu * (Bx / h) ** POWER
        mu /= mu.sum()
    x = xt / Bx.max()
    objective = float(np.sum(t[need] / x[need]))
    return FamilySolution(HierarchyStrategy(W.attributes, x), objective, h * h, mu, it, ratio <= 1 + tol)
