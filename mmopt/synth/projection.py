"""Euclidean projections that turn least-squares marginals into non-negative, consistent count tables.

Notation: see README and :mod:`mmopt.synth.residuals`. Two convex sets, both onto which projection is unique:

* the scaled simplex {p ≥ 0, Σp = t}: :func:`simplex`, exact in O(n log n) (Held, Wolfe & Crowder 1974; Duchi,
  Shalev-Shwartz, Singer & Chandra, ICML 2008): p = max(v − τ, 0) with τ the unique threshold giving Σp = t;
* the transportation polytope {T ≥ 0, T1 = r, Tᵀ1 = c} (Σr = Σc, non-empty since r cᵀ/t lies in it):
  :func:`transport`. By Lagrange duality the projection of M is T = max(0, M + u1ᵀ + 1vᵀ) for the maximiser
  (u, v) of the concave, piecewise-quadratic dual g(u, v) = min_{T≥0} ½‖T − M‖² − uᵀ(T1 − r) − vᵀ(Tᵀ1 − c),
  whose gradient is (r − T1, c − Tᵀ1); solved by L-BFGS to a relative margin residual of 10⁻¹⁰, then polished by
  iterative proportional fitting on T's support (which keeps T ≥ 0 and drives the margins to the targets; it
  moves T by at most the residual left, so T is the projection up to that residual). When M is already in the
  polytope the dual optimum is (0, 0) and M itself is returned.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

__all__ = ["simplex", "transport"]


def simplex(v, total: float) -> np.ndarray:
    """The Euclidean projection of ``v`` onto {p ≥ 0, Σp = total} (total ≥ 0).

    Examples
    --------
    >>> simplex([3.0, -1.0, 1.0], 4.0).tolist()
    [3.0, 0.0, 1.0]
    >>> simplex([1.0, 1.0], 4.0).tolist()
    [2.0, 2.0]
    """
    x = np.asarray(v, dtype=np.float64)
    flat = x.ravel()
    if total <= 0:
        return np.zeros_like(x)
    u = np.sort(flat)[::-1]
    css = np.cumsum(u) - total
    k = np.arange(1, u.size + 1)
    rho = int(np.nonzero(u - css / k > 0)[0][-1])
    tau = css[rho] / (rho + 1.0)
    return np.maximum(flat - tau, 0.0).reshape(x.shape)


def _ipf(T: np.ndarray, r: np.ndarray, c: np.ndarray, tol: float, iters: int = 500) -> np.ndarray:
    for _ in range(iters):
        rows = T.sum(axis=1)
        T = T * np.divide(r, rows, out=np.zeros_like(r), where=rows > 0)[:, None]
        cols = T.sum(axis=0)
        T = T * np.divide(c, cols, out=np.zeros_like(c), where=cols > 0)[None, :]
        if np.abs(T.sum(axis=1) - r).max() <= tol:
            break
    return T


def transport(M, r, c) -> np.ndarray:
    """The Euclidean projection of the table ``M`` onto {T ≥ 0, T1 = r, Tᵀ1 = c} (module docstring).

    Examples
    --------
    >>> M = np.array([[3.0, -1.0], [1.0, 2.0]])
    >>> T = transport(M, np.array([2.0, 3.0]), np.array([3.0, 2.0]))
    >>> bool(np.all(T >= 0)), T.sum(axis=1).round(9).tolist(), T.sum(axis=0).round(9).tolist()
    (True, [2.0, 3.0], [3.0, 2.0])
    """
    M = np.asarray(M, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    t = max(float(r.sum()), 1e-300)
    Ms, rs_, cs = M / t, r / t, c / t  # scale to a unit total: the tolerances below are relative
    n, m = M.shape

    def f(z):
        u, w = z[:n], z[n:]
        Z = Ms + u[:, None] + w[None, :]
        T = np.maximum(Z, 0.0)
        # −g(u, v) = ½‖T‖² − uᵀr − vᵀc − ½‖M‖² at T = Z₊ (⟨Z, T⟩ = ‖T‖²); the constant is dropped
        value = 0.5 * float((T * T).sum()) - float(u @ rs_) - float(w @ cs)
        grad = np.concatenate([T.sum(axis=1) - rs_, T.sum(axis=0) - cs])
        return value, grad

    z0 = np.zeros(n + m)
    if np.all(Ms >= 0) and np.abs(Ms.sum(axis=1) - rs_).max() <= 1e-13 and np.abs(Ms.sum(axis=0) - cs).max() <= 1e-13:
        return M.copy()
    res = optimize.minimize(f, z0, jac=True, method="L-BFGS-B",
                            options={"maxiter": 5000, "gtol": 1e-13, "ftol": 1e-16, "maxcor": 30})
    u, w = res.x[:n], res.x[n:]
    T = np.maximum(Ms + u[:, None] + w[None, :], 0.0)
    if not np.any(T > 0):  # degenerate dual point: the independent table is always feasible
        T = np.outer(rs_, cs)
    T = _ipf(T, rs_, cs, tol=1e-13)
    return T * t
