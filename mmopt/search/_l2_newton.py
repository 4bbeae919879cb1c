"""The Newton machinery of :mod:`mmopt.search.l2_fast`: X(λ)'s eigendecomposition, the dual's Jacobian products
(Daleckii–Krein), the preconditioned Newton step in log λ, and the feasible rescaling of X(λ).

Notation: see :mod:`mmopt.search.l2_fast` (G = WᵀW, Λ = diag(λ), M = Λ^{1/2} G Λ^{1/2} = Q Ω Qᵀ, N = Λ^{-1/2} Q,
X(λ) = N Ω^{1/2} Nᵀ, d = diag X(λ)).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

__all__ = ["eig_full", "feasible_gram", "newton_step", "phi"]


def eig_full(G, lam):
    """M = Λ^{1/2} G Λ^{1/2} = Q Ω Qᵀ. Returns ω (ascending) and N = Λ^{-1/2} Q: X(λ) = N Ω^{1/2} Nᵀ."""
    root = np.sqrt(lam)
    M = G * root[:, None]
    M *= root
    # M.T is a Fortran-ordered view of the symmetric M, so LAPACK overwrites it without a copy.
    omega, Q = scipy.linalg.eigh(M.T, overwrite_a=True, check_finite=False, driver="evd")
    Q /= root[:, None]
    return omega, Q


def phi(sigma):
    return np.outer(sigma, sigma) / np.add.outer(sigma, sigma)


def _jacobian_product(N, Phi, v):
    """J v for J = −∂²g/∂λ² = −∂d/∂λ: (J v)_i = [N ((Nᵀ diag(v) N) ∘ Φ) Nᵀ]_ii, Φ_kl = σ_k σ_l/(σ_k + σ_l).

    This is the Daleckii–Krein formula for the derivative of K^{-1/2}. J is PSD, so CG applies. One
    product costs two n×n×r matrix products.
    """
    H = N.T @ (v[:, None] * N)
    H *= Phi
    return np.einsum("ik,ik->i", N @ H, N)


def newton_step(N, Phi, lam, d, free, rho, eta, max_cg=50):
    """Newton step δμ in μ = log λ for log d(μ) = 0 on the free coordinates, by preconditioned CG.

    The system is (Λ J Λ + ρP) δμ = λ d log d. P = ½ diag(λ d) is the Jacobian that the fixed-point step
    assumes, so it is the preconditioner, and P⁻¹(λ d log d) = 2 log d is that step. Solving for log d
    rather than d − 1 keeps the step exact for diagonal G far from the optimum. ρP is a Levenberg–
    Marquardt term for singular G, whose J has rank ≤ r(r+1)/2 and whose dual optimum need not be unique
    (Yamashita & Fukushima, 2001).
    """
    # the system lives on the free coordinates (d ≥ ½ there); elsewhere d may underflow to 0 (a cell whose G_ii is
    # 1e-24 of the largest: max variance's query weights), and 0/0 there made the whole step NaN and eigh fail
    P = np.where(free, 0.5 * lam * d, 1.0)
    rhs = np.where(free, lam * d * np.log(np.where(free, d, 1.0)), 0.0)
    x, res = np.zeros_like(rhs), rhs.copy()
    if not np.any(rhs):
        return x, 0
    z = res / ((1.0 + rho) * P)
    # The residual is measured in log-d units (divided by P ∝ λ d), not in λ-weighted units: a tiny λ_i
    # barely moves g, but its d_i still bounds the primal through max d.
    p, rz, bnorm, k = z.copy(), res @ z, np.linalg.norm(rhs / P), 0
    for k in range(1, max_cg + 1):  # noqa: B007 (k is returned: the CG iteration count)
        Ap = np.where(free, lam * _jacobian_product(N, Phi, lam * p) + rho * P * p, 0.0)
        alpha = rz / (p @ Ap)
        x += alpha * p
        res -= alpha * Ap
        if np.linalg.norm(res / P) <= eta * bnorm:
            break
        z = res / ((1.0 + rho) * P)
        rz, rz_old = res @ z, rz
        p = z + (rz / rz_old) * p
    return x, k


def feasible_gram(d, sigma, N, diagonal: bool) -> tuple[np.ndarray, float]:
    """X̃ = D^{-1/2} X(λ) D^{-1/2} if ``diagonal``, else X(λ)/max d; and the factor m making diag X̃ ≤ 1."""
    Y = N * np.sqrt(sigma)
    X = Y @ Y.T  # NumPy uses syrk for Y @ Y.T and mirrors it, so X is exactly symmetric
    del Y
    t = 1.0 / np.sqrt(d) if diagonal else np.full(d.size, 1.0 / np.sqrt(d.max()))
    X *= np.outer(t, t)  # t_i t_j = t_j t_i in floating point: X stays exactly symmetric
    # IEEE division is monotone, so dividing by the largest computed diagonal entry makes every one
    # ≤ 1 exactly; m is 1 up to round-off and the caller scales the bound by it.
    m = float(np.max(np.diagonal(X)))
    X /= m
    return X, m
