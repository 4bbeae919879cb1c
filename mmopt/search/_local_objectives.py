"""The smooth objectives and the L-BFGS-B driver behind :func:`mmopt.search.local_search.minimize_l1`.

Notation: see README and :mod:`mmopt.search.local_search`. A strategy is encoded as z = (U, V) ≥ 0 with
A = B D⁻¹, B = [I; U − V] (p-Identity) or U − V (general), D the column L1 norms, so that Δ ≤ 1 holds by
construction and tr(G X⁻¹) is smooth in z. Each objective returns (f, ∂f/∂z); a numerically singular
X is +∞ with a zero gradient, never an exception.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.optimize

from mmopt.dense.profile import numerical_rank

# Below this reciprocal condition number tr(G X⁻¹) has no correct digits left worth optimising.
_RCOND_MIN = 1e-12
# f = tr C − tr(R T C Tᵀ) loses about log10(tr C / f) digits. Past 1e8 the rounding error (~1e-8 relative)
# can pass for progress: at n = 8 L-BFGS-B drove T to 1e6, moving identity rows into T for a fake 0.05% gain.
_CANCELLATION_MAX = 1e8


def pidentity_objective(z, G, p, n):
    """tr(G X⁻¹) and its gradient for A = [I; U − V] D⁻¹, D = diag(1 + 1ᵀ(U + V)), z = (U, V) ≥ 0.

    With C = DGD and R = (I_p + TTᵀ)⁻¹, Woodbury gives X⁻¹ = D (I − TᵀRT) D, so
    f = tr C − tr(R T C Tᵀ); one O(pn²) product T C is the only cost above O(np² + n²).
    """
    T = (z[: p * n] - z[p * n :]).reshape(p, n)
    d = 1.0 + z.reshape(2 * p, n).sum(axis=0)
    C = G * np.outer(d, d)
    try:
        R = scipy.linalg.cho_factor(np.eye(p) + T @ T.T, check_finite=False)
    except np.linalg.LinAlgError:
        return np.inf, np.zeros_like(z)
    RT = scipy.linalg.cho_solve(R, T, check_finite=False)
    P = T @ C
    f = np.trace(C) - np.sum(RT * P)
    E = scipy.linalg.cho_solve(R, P - (P @ T.T) @ RT, check_finite=False)  # E = T M C M, M = (I + TᵀT)⁻¹
    g_d = 2.0 * (np.diag(C) - np.sum(P * RT, axis=0)) / d  # ∂f/∂d = 2 diag(C M) / d
    if not np.isfinite(f) or np.trace(C) > _CANCELLATION_MAX * f:
        return np.inf, np.zeros_like(z)
    return f, np.concatenate([(g_d - 2.0 * E).ravel(), (g_d + 2.0 * E).ravel()])


def pidentity_matrix(z, p, n):
    return np.vstack([np.eye(n), (z[: p * n] - z[p * n :]).reshape(p, n)]) / (1 + z.reshape(2 * p, n).sum(0))


def general_matrix(z, p, n):
    return (z[: p * n] - z[p * n :]).reshape(p, n) / z.reshape(2 * p, n).sum(axis=0)


def cholesky_rcond(X):
    """Upper Cholesky factor of X and its reciprocal condition number, or (None, 0) if X is not PD."""
    try:
        L = scipy.linalg.cholesky(X, lower=False, check_finite=False)
    except np.linalg.LinAlgError:
        return None, 0.0
    rcond, info = scipy.linalg.lapack.dpocon(L, np.abs(X).sum(axis=0).max())
    return (L, rcond) if info == 0 and np.isfinite(rcond) else (None, 0.0)


def general_objective(z, F, m, n):
    """tr(G X⁻¹) and its gradient for A = (U − V) D⁻¹, D = diag(1ᵀ(U + V)), G = FFᵀ, z = (U, V) ≥ 0.

    ∂f/∂A = −2 A X⁻¹ G X⁻¹ = −2 (A Y) Yᵀ with Y = X⁻¹F; the chain rule through D adds a per-column term.
    """
    d = z.reshape(2 * m, n).sum(axis=0)
    if np.any(d <= 0.0):
        return np.inf, np.zeros_like(z)
    A = (z[: m * n] - z[m * n :]).reshape(m, n) / d
    L, rcond = cholesky_rcond(A.T @ A)
    if L is None or rcond < _RCOND_MIN:  # singular or near-singular X: infinitely bad, never a crash
        return np.inf, np.zeros_like(z)
    Y = scipy.linalg.cho_solve((L, False), F, check_finite=False)
    f = np.sum(F * Y)
    grad_A = -2.0 * (A @ Y) @ Y.T
    g_B, g_d = grad_A / d, -np.sum(grad_A * A, axis=0) / d
    return f, np.concatenate([(g_B + g_d).ravel(), (g_d - g_B).ravel()])


def full_rank(A):
    """A, or [A; α Nᵀ] with N spanning A's (near-)null space: a start the smooth polish can move from.

    When A supports G (G N = 0), (AᵀA + α² N Nᵀ)⁻¹ = (AᵀA)⁺ + N Nᵀ/α² leaves tr(G ·) unchanged, and α
    adds at most 0.1% to Δ. Directions with σ < 1e-4·σ_max count as null: X = AᵀA would otherwise be
    too ill-conditioned (rcond < 1e-8) for the polish's objective to have digits to optimise.
    """
    _, s, Vt = np.linalg.svd(A)
    r = min(numerical_rank(s, A.shape), int(np.sum(s > 1e-4 * s[0])))
    if r == A.shape[1]:
        return A
    N = Vt[r:]
    alpha = 1e-3 * np.abs(A).sum(axis=0).max() / np.abs(N).sum(axis=0).max()
    return np.vstack([A, alpha * N])


def split(A):
    """z = (U, V) ≥ 0 with (U − V) D⁻¹ = A exactly, for A with Δ ≤ 1: slack fills each column's L1 budget."""
    slack = np.zeros_like(A)
    slack[0] = (1.0 - np.abs(A).sum(axis=0)) / 2.0
    return np.concatenate([(np.maximum(A, 0.0) + slack).ravel(), (np.maximum(-A, 0.0) + slack).ravel()])


def lbfgs(objective, z0, scale, max_iterations, tol, max_evaluations=None):
    """Minimise objective over z ≥ 0; return the best point *evaluated*, its value, iterations, status.

    An infinite trial value (singular X) makes L-BFGS-B stop early and call it converged, so while a run that
    met one still improved, restart from the best point with fresh curvature memory. ``max_evaluations`` caps
    the objective evaluations of all restarts together (default: 20 per iteration of the budget, plus 100).
    """
    best = {"f": np.inf, "z": z0, "hit_inf": False, "calls": 0}
    max_evaluations = max_evaluations or 20 * max_iterations + 100

    def tracked(z):
        best["calls"] += 1
        f, g = objective(z)
        best["hit_inf"] |= not np.isfinite(f)
        if f < best["f"]:
            best["f"], best["z"] = f, z.copy()
        return f / scale, g / scale

    bounds = scipy.optimize.Bounds(np.zeros(z0.size), np.full(z0.size, np.inf))
    iterations, status = 0, "user_limit"
    while iterations < max_iterations and best["calls"] < max_evaluations:
        start, best["hit_inf"] = best["f"], False
        budget = max_iterations - iterations
        calls = min(20 * budget + 100, max_evaluations - best["calls"])
        res = scipy.optimize.minimize(
            tracked, best["z"], jac=True, method="L-BFGS-B", bounds=bounds,
            options={"maxiter": budget, "maxfun": calls, "ftol": tol, "gtol": tol},
        )
        iterations += res.nit
        # L-BFGS-B status 2 is a line search that found no decrease: stationary to rounding, not to tol.
        status = {0: "optimal", 1: "user_limit"}.get(res.status, "optimal_inaccurate")
        if status == "user_limit" or not best["hit_inf"] or not best["f"] < start - tol * abs(start):
            break
    return best["z"], best["f"], iterations, status
