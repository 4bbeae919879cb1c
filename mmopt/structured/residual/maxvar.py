"""A certified lower bound on the largest cell variance of a union of marginals, and the certified optimum.

Notation: see README; marginals A with weights w_A, N_A cells, targets τ_A; the objective is max over cells of
variance/τ_A at unit privacy (Δ₂ = 1). As for any workload (:mod:`mmopt.search.max_variance`) it equals
max_{p ∈ Δ} min_X Σ p_q v_q(X); the workload and the constraint set are invariant under permuting each attribute's
values, and the inner minimum is concave in p, so averaging p over that group keeps it: the maximum is attained
with one weight per marginal, p = P_A/N_A on each of its cells. Then the inner problem is the Gaussian total-error
optimum of the marginal workload with weights w_A·√(P_A/(N_A τ_A)), whose closed form is the residual planner's
(the SVD bound, met by the residual strategy):

    f(P) = (Σ_T r_T √ν_T(P))²,    ν_T(P) = Σ_{A ⊇ T} w_A² P_A / (N_A² τ_A),                            (1)

r_T the closure member's multiplicity. Every P in the simplex gives f(P) ≤ the optimum, exactly. f is concave and
smooth where every P_A > 0, with ∂f/∂P = √f · Kᵀ(r/√ν); L-BFGS-B maximises f(P) − (ΣP)²/2 on P ≥ 0 (1-homogeneous
f: the maximiser is f(q*)·q*). The primal is :func:`mmopt.structured.residual.plan`'s max-variance residual
strategy (ResidualPlanner+'s ResPlanMax); where the two meet, it is optimal among all strategies.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, sparse

__all__ = ["dual_bound"]


def dual_bound(W, tau: np.ndarray, *, max_iterations: int = 1000) -> tuple[float, np.ndarray]:
    """(a certified lower bound (1) on max_cells variance/τ_A at unit privacy, the marginal weights P found).

    ``W`` a literal :class:`~mmopt.structured.residual.MarginalWorkload`, ``tau`` one target per marginal.

    Examples
    --------
    >>> from mmopt.structured.residual import marginal_workload, plan
    >>> W = marginal_workload((4,) * 5, [(i, j) for i in range(5) for j in range(i + 1, 5)])   # all 2-way
    >>> value, P = dual_bound(W, np.ones(10))
    >>> best = plan(W, objective="max_variance").objective      # the max-variance residual strategy
    >>> round(value, 6), bool(abs(best / value - 1) < 1e-8)        # it meets the bound: optimal among all
    (5.92537, True)
    """
    C = W.closure
    r = np.asarray(C.multiplicity, dtype=float)
    scale = W.weights**2 / (W.set_cells**2 * np.asarray(tau, dtype=float))
    K = sparse.csr_matrix(sparse.csr_matrix(W.incidence).T.multiply(scale[None, :]))  # closure × sets

    def value(P):
        return float(r @ np.sqrt(K @ P)) ** 2

    def negative_F(P):
        nu = K @ P
        root = float(r @ np.sqrt(nu))
        grad = root * (K.T @ (r / np.sqrt(nu)))
        total = float(P.sum())
        return -(root * root - total * total / 2), -(grad - total)

    m = len(W.sets)
    res = optimize.minimize(negative_F, np.ones(m), jac=True, method="L-BFGS-B", bounds=[(1e-12, None)] * m,
                            options={"maxiter": max_iterations, "gtol": 1e-14, "ftol": 1e-15})
    P = np.asarray(res.x, dtype=float)
    q = P / P.sum()
    # (1) at q exactly, less a round-off margin for the sum of m square roots
    return float(value(q) * (1 - 64 * np.finfo(float).eps * (len(r) + 1))), q
