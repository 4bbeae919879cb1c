"""Residual-basis strategies for marginal workloads (ResidualPlanner), exact at any number of attributes.

Notation: see README. For an attribute of size n, ℝⁿ splits into span(1) and its sum-to-zero complement
(the residual space). Kronecker products of these pieces, one per attribute subset S, are mutually
orthogonal subspaces Q_S summing to ℝᴺ. Every weighted union of marginals has a Gram that is a scalar on
each Q_S (:mod:`.workload`), non-zero only on the *downward closure* of its attribute sets (:mod:`.closure`);
a residual strategy measures each of those subspaces with its own weight (:mod:`.strategy`). Error, the SVD
bound (:mod:`.error`), the optimal allocation (:mod:`.planner`) and least-squares reconstruction from
marginal counts (:mod:`.reconstruct`) are sums over the closure — 1 + d + d(d−1)/2 members for all 2-way
marginals — and never touch N = ∏ nᵢ cells. Under Gaussian noise the closed-form allocation meets the SVD
lower bound, so it is optimal among all matrix mechanisms for total squared error.

Source: Xiao, He, Zhang, Kifer, "An Optimal and Scalable Matrix Mechanism for Noisy Marginals under Convex
Loss Functions", NeurIPS 2023 (arXiv 2305.08175; code github.com/dkifer/ResidualPlanner).

Examples
--------
>>> from mmopt.structured import residual as rp
>>> W = rp.marginal_workload((8,) * 30, [(i, j) for i in range(30) for j in range(i + 1, 30)])
>>> p = rp.plan(W)                                   # Gaussian noise, total squared error
>>> len(W.closure), p.status, abs(p.objective / rp.svd_bound(W) - 1) < 1e-12
(466, 'optimal', True)
"""

from mmopt.structured.residual.closure import Closure, downward_closure
from mmopt.structured.residual.error import ResidualReport, evaluate, svd_bound
from mmopt.structured.residual.planner import Plan, plan
from mmopt.structured.residual.reconstruct import Measurements, marginal_counts, measure, reconstruct, reconstruct_all
from mmopt.structured.residual.solve import solve_residual
from mmopt.structured.residual.strategy import ResidualStrategy, residual_basis, residual_strategy, sensitivity
from mmopt.structured.residual.workload import MarginalWorkload, as_marginal_workload, marginal_workload

__all__ = [
    "Closure", "MarginalWorkload", "Measurements", "Plan", "ResidualReport", "ResidualStrategy",
    "as_marginal_workload", "downward_closure", "evaluate", "marginal_counts", "marginal_workload", "measure",
    "plan", "reconstruct", "reconstruct_all", "residual_basis", "residual_strategy", "sensitivity",
    "solve_residual", "svd_bound",
]
