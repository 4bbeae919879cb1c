"""The dense SDP reference for private training's programs (cvxpy, Clarabel), shared by the participation tests."""

import cvxpy as cp
import numpy as np


def sdp_optimum(G, patterns, objective="total", rows=None):
    """min over X of the objective s.t. max_π max_{Y ⪰ 0, diag Y ≤ 1} ⟨X_π, Y⟩ ≤ 1, the inner max by its SDP dual
    (∃ d_π, Σ d_π ≤ 1, Diag(d_π) ⪰ X_π; strong duality, Y = I/2 strictly feasible). "total": tr(G X⁻¹) by a Schur
    block; "max": max_i w_i X⁻¹ w_iᵀ over the ``rows``."""
    n = G.shape[0]
    X = cp.Variable((n, n), symmetric=True)
    cons = [X >> 0]
    for p in patterns:
        d = cp.Variable(len(p))
        cons += [cp.diag(d) - X[list(p)][:, list(p)] >> 0, cp.sum(d) <= 1]
    if objective == "total":
        w, V = np.linalg.eigh(G)
        r = (V * np.sqrt(np.maximum(w, 0))) @ V.T
        U = cp.Variable((n, n), symmetric=True)
        cons += [cp.bmat([[X, r.T], [r, U]]) >> 0]
        goal = cp.trace(U)
    else:
        t = cp.Variable()
        cons += [cp.matrix_frac(row, X) <= t for row in rows]
        goal = t
    return cp.Problem(cp.Minimize(goal), cons).solve(solver=cp.CLARABEL)
