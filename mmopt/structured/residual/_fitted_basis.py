"""One attribute's basis of a split strategy (:mod:`mmopt.structured.residual.split`, split from it): the rows B in
1^⊥ minimising tr(H (BᵀB)⁺)·max diag BᵀB, a small L2 program solved with its duality certificate."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["fitted_basis"]

# Mixing a little of the isotropic basis in keeps Xᵢ full rank on 1^⊥, so no tiny eigenvalue of an SDP
# solution inflates Xᵢ⁺ (costs ≤ 1e-7 relative error).
_MIX = 1e-7


def _psd_sqrt(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A^½, (A^½)⁺) of a symmetric PSD matrix."""
    lam, V = np.linalg.eigh((A + A.T) / 2)
    lam = np.clip(lam, 0.0, None)
    root = np.sqrt(lam)
    inv = np.divide(1.0, root, out=np.zeros_like(root), where=root > root[-1] * 1e-12)
    return (V * root) @ V.T, (V * inv) @ V.T


def fitted_basis(H: np.ndarray, *, max_iterations: int = 2000, gap: float = 1e-9):
    """(B, value, dual bound): B with rows in 1^⊥ minimising tr(H (BᵀB)⁺)·max diag BᵀB (module docstring).

    In an orthonormal basis U of 1^⊥ (X = UYUᵀ, H̃ = UᵀHU, cell j's row uⱼ of U) this is the L2 program
    min tr(H̃Y⁻¹) s.t. uⱼᵀYuⱼ ≤ 1. For weights μ ≥ 0 and M = Σⱼ μⱼuⱼuⱼᵀ its minimiser is
    Y = M^{-½}(M^½H̃M^½)^½M^{-½}, and weak duality gives every strategy at least
    (tr (M^½H̃M^½)^½)²/Σμⱼ — the certificate. μⱼ ← μⱼ·uⱼᵀYuⱼ moves the weight to the cells whose
    column norm is largest, the fixed point of the optimality conditions (as the l2_fast solver's diagonal
    scaling); it stops when value and certificate agree to ``gap``.
    """
    n = H.shape[0]
    U = np.linalg.svd(np.eye(n) - 1.0 / n)[0][:, : n - 1]
    Ht = U.T @ H @ U
    mu = np.full(n, 1.0 / n)
    best, bound, Y_best = np.inf, 0.0, None
    for _ in range(max_iterations):
        root, root_inv = _psd_sqrt((U.T * mu) @ U)
        C = _psd_sqrt(root @ Ht @ root)[0]
        bound = max(bound, float(np.trace(C)) ** 2 / float(mu.sum()))
        Y = root_inv @ C @ root_inv
        col = np.einsum("ij,jk,ik->i", U, Y, U)                      # diag(UYUᵀ): squared column norms
        value = float(np.sum(Ht * np.linalg.pinv(Y, hermitian=True))) * float(col.max())
        if value < best:
            best, Y_best = value, Y / col.max()
        if best <= bound * (1 + gap):
            break
        mu = mu * col
        mu /= mu.sum()
    Y = (1 - _MIX) * Y_best + _MIX * np.eye(n - 1)                    # full rank on 1^⊥ (see _MIX)
    lam, V = np.linalg.eigh(Y)
    B = (V * np.sqrt(np.clip(lam, 0.0, None))).T @ U.T                 # BᵀB = UYUᵀ, B1 = 0
    B /= math.sqrt(float(np.max(np.sum(B * B, axis=0))))
    return B, best, bound
