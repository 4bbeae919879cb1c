"""K^{−1/2} of a block-tridiagonal K, its diagonal blocks and trace in O(n·s²·N): rational nodes and selected
inversion, never n×n.

Notation: K is symmetric positive definite, block tridiagonal with R diagonal blocks D_r (s×s) and
super-diagonal blocks E_r (K_{r,r+1} = E_r). Two pieces:

* **Rational nodes** (Hale, Higham & Trefethen, "Computing A^α, log(A), and related matrix functions by contour
  integrals", SIAM J. Numer. Anal. 46, 2008, method 3): with ω^{−1/2} = (2/π) ∫_0^∞ dσ / (ω + σ²), the substitution
  σ = √m·sc(u | p), p = 1 − m/M, maps [0, K'(p)) onto [0, ∞) and makes the integrand smooth in u for every
  ω ∈ [m, M]; the midpoint rule with N points gives

      ω^{−1/2} ≈ Σ_q c_q / (ω + σ_q),   σ_q = m·sc²(u_q), c_q = (2K'√m / (πN))·dn(u_q)/cn²(u_q),
      u_q = (q − ½)K'/N,

  whose relative error decays like exp(−2π²N / (log(M/m) + 3)) (10⁻⁸ at M/m = 10¹², N = 32). Hence
  K^{−1/2} ≈ Σ_q c_q (K + σ_q I)⁻¹, each shift positive definite.
* **Selected inversion** (Takahashi's recurrences): with the Schur complements S_0 = D_0, S_r = D_r −
  E_{r−1}ᵀ S_{r−1}⁻¹ E_{r−1}, the diagonal blocks of K⁻¹ are Σ_{R−1} = S_{R−1}⁻¹ and
  Σ_r = S_r⁻¹ + U_r Σ_{r+1} U_rᵀ, U_r = S_r⁻¹ E_r: O(R·s³) per shift, all N shifts at once.

These are approximations that drive an optimiser; what is certified is computed elsewhere from eigenvalues.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ellipj, ellipk

__all__ = ["inverse_sqrt_blocks", "rational_nodes"]


def rational_nodes(low: float, high: float, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(σ, c): ω^{−1/2} ≈ Σ_q c_q/(ω + σ_q) on [``low``, ``high``] with ``count`` terms (module docstring).

    Examples
    --------
    >>> s, c = rational_nodes(1.0, 1e6, 20)
    >>> w = np.logspace(0, 6, 7)
    >>> bool(np.max(np.abs((c / (w[:, None] + s)).sum(1) * np.sqrt(w) - 1)) < 1e-9)
    True
    """
    p = 1.0 - low / high
    Kp = ellipk(p)
    u = (np.arange(count) + 0.5) * Kp / count
    sn, cn, dn, _ = ellipj(u, p)
    return low * (sn / cn) ** 2, 2 * Kp * np.sqrt(low) / (np.pi * count) * dn / cn ** 2


def inverse_sqrt_blocks(D: np.ndarray, E: np.ndarray, low: float, high: float, count: int = 32) -> np.ndarray:
    """The diagonal blocks of K^{−1/2} ≈ Σ_q c_q (K + σ_q)⁻¹, shape (R, s, s), for K with diagonal blocks ``D``
    (R, s, s), super-diagonal blocks ``E`` (R − 1, s, s) and spectrum inside [``low``, ``high``].

    Examples
    --------
    >>> K = 2 * np.eye(6) - np.eye(6, k=1) - np.eye(6, k=-1)     # tridiagonal: blocks of 2
    >>> D = np.stack([K[i:i + 2, i:i + 2] for i in (0, 2, 4)])
    >>> E = np.stack([K[i:i + 2, i + 2:i + 4] for i in (0, 2)])
    >>> w, V = np.linalg.eigh(K)
    >>> exact = (V / np.sqrt(w)) @ V.T
    >>> bool(np.allclose(inverse_sqrt_blocks(D, E, w[0], w[-1])[1], exact[2:4, 2:4], rtol=1e-10, atol=0))
    True
    """
    R, s, _ = D.shape
    sigma, c = rational_nodes(low, high, count)
    eye = np.eye(s)
    shift = sigma[:, None, None] * eye
    Si = np.empty((R, count, s, s))
    U = np.empty((max(R - 1, 0), count, s, s))
    S = D[0] + shift
    for r in range(R):
        Si[r] = np.linalg.inv(S)
        if r == R - 1:
            break
        U[r] = Si[r] @ E[r]
        S = D[r + 1] + shift - np.swapaxes(E[r], -1, -2) @ U[r]
        S = (S + np.swapaxes(S, -1, -2)) / 2
    out = np.empty((R, s, s))
    Sigma = Si[R - 1]
    out[R - 1] = np.einsum("q,qab->ab", c, Sigma)
    for r in range(R - 2, -1, -1):
        Sigma = Si[r] + U[r] @ Sigma @ np.swapaxes(U[r], -1, -2)
        out[r] = np.einsum("q,qab->ab", c, Sigma)
    return (out + np.swapaxes(out, -1, -2)) / 2
