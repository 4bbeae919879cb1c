"""Local search for ε-DP MinError: p-Identity L-BFGS-B with restarts, and a signed polish of any strategy.

Notation: see README. In function bodies G = WᵀW (n×n) is the workload Gram, A (p×n) the strategy,
X = AᵀA, Δ = ‖A‖₁ the maximum column L1 norm, and T (p×n) the extra rows of a p-Identity strategy.
Both searches keep Δ ≤ 1 by construction, so they minimise the unit-privacy MinError objective
Δ² tr(G X⁻¹) (Problem 5.15) as the smooth function tr(G X⁻¹).
"""

from __future__ import annotations

import functools
import logging
import numbers
import time

import numpy as np
import scipy.linalg
import scipy.optimize

from mmopt._solution import RawSolution

_LOG = logging.getLogger("mmopt")
_FUNC = "minimize_l1"
# Below this reciprocal condition number tr(G X⁻¹) has no correct digits left worth optimising.
_RCOND_MIN = 1e-12
# f = tr C − tr(R T C Tᵀ) loses about log10(tr C / f) digits. Past 1e8 the rounding error (~1e-8 relative)
# can pass for progress: at n = 8 L-BFGS-B drove T to 1e6, moving identity rows into T for a fake 0.05% gain.
_CANCELLATION_MAX = 1e8


def _pidentity_objective(z, G, p, n):
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


def _pidentity_matrix(z, p, n):
    return np.vstack([np.eye(n), (z[: p * n] - z[p * n :]).reshape(p, n)]) / (1 + z.reshape(2 * p, n).sum(0))


def _general_matrix(z, p, n):
    return (z[: p * n] - z[p * n :]).reshape(p, n) / z.reshape(2 * p, n).sum(axis=0)


def _cholesky_rcond(X):
    """Upper Cholesky factor of X and its reciprocal condition number, or (None, 0) if X is not PD."""
    try:
        L = scipy.linalg.cholesky(X, lower=False, check_finite=False)
    except np.linalg.LinAlgError:
        return None, 0.0
    rcond, info = scipy.linalg.lapack.dpocon(L, np.abs(X).sum(axis=0).max())
    return (L, rcond) if info == 0 and np.isfinite(rcond) else (None, 0.0)


def _general_objective(z, F, m, n):
    """tr(G X⁻¹) and its gradient for A = (U − V) D⁻¹, D = diag(1ᵀ(U + V)), G = FFᵀ, z = (U, V) ≥ 0.

    ∂f/∂A = −2 A X⁻¹ G X⁻¹ = −2 (A Y) Yᵀ with Y = X⁻¹F; the chain rule through D adds a per-column term.
    """
    d = z.reshape(2 * m, n).sum(axis=0)
    if np.any(d <= 0.0):
        return np.inf, np.zeros_like(z)
    A = (z[: m * n] - z[m * n :]).reshape(m, n) / d
    L, rcond = _cholesky_rcond(A.T @ A)
    if L is None or rcond < _RCOND_MIN:  # singular or near-singular X: infinitely bad, never a crash
        return np.inf, np.zeros_like(z)
    Y = scipy.linalg.cho_solve((L, False), F, check_finite=False)
    f = np.sum(F * Y)
    grad_A = -2.0 * (A @ Y) @ Y.T
    g_B, g_d = grad_A / d, -np.sum(grad_A * A, axis=0) / d
    return f, np.concatenate([(g_B + g_d).ravel(), (g_d - g_B).ravel()])


def _exact_objective(G, A):
    """Δ² tr(G X⁻¹) by a Cholesky factorisation of X = AᵀA; +∞ when X is numerically singular."""
    L, rcond = _cholesky_rcond(A.T @ A)
    if L is None or rcond < _RCOND_MIN:
        return np.inf
    return np.abs(A).sum(axis=0).max() ** 2 * np.sum(G * scipy.linalg.cho_solve((L, False), np.eye(len(G))))


def _split(A):
    """z = (U, V) ≥ 0 with (U − V) D⁻¹ = A exactly, for A with Δ ≤ 1: slack fills each column's L1 budget."""
    slack = np.zeros_like(A)
    slack[0] = (1.0 - np.abs(A).sum(axis=0)) / 2.0
    return np.concatenate([(np.maximum(A, 0.0) + slack).ravel(), (np.maximum(-A, 0.0) + slack).ravel()])


def _lbfgs(objective, z0, scale, max_iterations, tol):
    """Minimise objective over z ≥ 0; return the best point *evaluated*, its value, iterations, status.

    An infinite trial value (singular X) makes L-BFGS-B stop early and call it converged, so while a run that
    met one still improved, restart from the best point with fresh curvature memory.
    """
    best = {"f": np.inf, "z": z0, "hit_inf": False}

    def tracked(z):
        f, g = objective(z)
        best["hit_inf"] |= not np.isfinite(f)
        if f < best["f"]:
            best["f"], best["z"] = f, z.copy()
        return f / scale, g / scale

    bounds = scipy.optimize.Bounds(np.zeros(z0.size), np.full(z0.size, np.inf))
    iterations, status = 0, "user_limit"
    while iterations < max_iterations:
        start, best["hit_inf"] = best["f"], False
        budget = max_iterations - iterations
        res = scipy.optimize.minimize(
            tracked, best["z"], jac=True, method="L-BFGS-B", bounds=bounds,
            options={"maxiter": budget, "maxfun": 20 * budget + 100, "ftol": tol, "gtol": tol},
        )
        iterations += res.nit
        # L-BFGS-B status 2 is a line search that found no decrease: stationary to rounding, not to tol.
        status = {0: "optimal", 1: "user_limit"}.get(res.status, "optimal_inaccurate")
        if status == "user_limit" or not best["hit_inf"] or not best["f"] < start - tol * abs(start):
            break
    return best["z"], best["f"], iterations, status


def _invalid(name, expected, got):
    return ValueError(f"The '{name}' parameter of {_FUNC} must {expected}. Got {got} instead.")


def _positive_int(value, name, allow_none=False):
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise _invalid(name, "be a positive integer", repr(value))
    return int(value)


def _check_gram(gram):
    G = np.asarray(gram, dtype=float)
    if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] == 0:
        raise _invalid("gram", "be a square, non-empty 2-D array (G = WᵀW)", f"shape {G.shape}")
    if not np.all(np.isfinite(G)):
        raise _invalid("gram", "be finite", "a NaN or infinite entry")
    asym = np.abs(G - G.T).max()
    if asym > 1e-8 * max(1.0, np.abs(G).max()):
        raise _invalid("gram", "be symmetric (G = WᵀW)", f"maximum asymmetry {asym:.3g}")
    G = (G + G.T) / 2.0
    lam, Q = np.linalg.eigh(G)
    if lam[0] < -1e-10 * max(1.0, lam[-1]):
        raise _invalid("gram", "be positive semidefinite (G = WᵀW)", f"minimum eigenvalue {lam[0]:.3g}")
    return G, lam, Q


def _check_initial(initial, n, p):
    A0 = np.asarray(initial, dtype=float)
    if A0.ndim != 2 or A0.shape[1] != n:
        raise _invalid("initial", f"be a 2-D strategy with n = {n} columns, like 'gram'", f"shape {A0.shape}")
    if not np.all(np.isfinite(A0)):
        raise _invalid("initial", "be finite", "a NaN or infinite entry")
    if p is not None and p != A0.shape[0]:
        raise _invalid("p", f"equal the number of rows of 'initial' ({A0.shape[0]}) or be omitted", p)
    delta = np.abs(A0).sum(axis=0).max()
    L, rcond = _cholesky_rcond(A0.T @ A0 / delta**2) if delta > 0 else (None, 0.0)
    if L is None or rcond < _RCOND_MIN:
        raise _invalid("initial", f"have full column rank n = {n}, so that X = AᵀA is invertible (add rows, "
                       "e.g. a scaled identity)", f"a numerically singular X (rcond {rcond:.1g})")
    return A0 / delta


def minimize_l1(gram, *, initial=None, p=None, restarts=1, max_iterations=1000, tol=1e-9, seed=None,
                verbose=False) -> RawSolution:
    r"""Search locally for a strategy with small ε-DP (Laplace) total error; a heuristic for MinError.

    Parameters
    ----------
    gram : array_like of shape (n, n)
        The workload Gram matrix G = WᵀW (symmetric positive semidefinite).
    initial : array_like of shape (p0, n) or None, default=None
        None searches p-Identity strategies from random starts. A full-column-rank strategy A0 is instead
        polished: every entry (signs allowed) moves, under column L1 norms ≤ 1.
    p : int or None, default=None
        Number of extra rows of a p-Identity strategy, which has n + p rows. None means max(4, n // 16):
        n // 16 is HDMM's choice for range workloads and was the best of n/32, n/16, n/8 on all-range and
        prefix workloads for n = 32 to 256. When polishing, leave it None (or equal to p0).
    restarts : int, default=1
        Independent L-BFGS-B runs; the best is returned. For p-Identity, U starts uniform on [0, 1] and
        V at 0 (even runs) or uniform on [0, 0.5] (odd runs). When polishing, run 0 starts at A0 and the
        others at random perturbations of it.
    max_iterations : int, default=1000
        L-BFGS-B iteration limit per run.
    tol : float, default=1e-9
        Stop when the relative decrease of the objective, or the largest projected gradient entry of the
        objective divided by tr G, falls below ``tol``.
    seed : int, numpy.random.Generator or None, default=None
        Seed of the random starts; the same seed gives the same result.
    verbose : bool, default=False
        Log each run on the ``"mmopt"`` logger at INFO (else DEBUG) level.

    Returns
    -------
    RawSolution
        ``matrix``: A with maximum column L1 norm 1. ``status``: "optimal" if the returned run met ``tol``,
        "user_limit" if it hit ``max_iterations``, "optimal_inaccurate" if its line search stalled.
        ``history``: per run, restart, objective (exact Δ² tr(G X⁻¹)), iterations, status, seconds.
        ``extra``: seconds, p (extra rows, or rows of A when polishing), mode ("p-identity" or "polish"),
        identity_fallback.

    Raises
    ------
    ValueError
        If ``gram`` is not a finite symmetric PSD matrix, ``initial`` has the wrong shape, is not finite
        or lacks full column rank, or ``p``, ``restarts``, ``max_iterations`` or ``tol`` is invalid.

    Notes
    -----
    MinError is not convex, so the result is a local optimum with no optimality certificate. The error is
    invariant under A → cA, so both modes keep Δ ≤ 1 by construction and run L-BFGS-B on a smooth function
    of z = (U, V) ≥ 0, where splitting entries into positive and negative parts makes the L1 norm smooth:

    .. math::

        \min_A \|A\|_1^2 \operatorname{tr}\bigl(G (A^T A)^{-1}\bigr) \le
        \min_{U, V \ge 0} \operatorname{tr}\bigl(G (A^T A)^{-1}\bigr), \qquad A = B D^{-1},

    with B = [I; U − V], D = diag(1 + 1ᵀ(U + V)) for p-Identity (HDMM's OPT_0, signs allowed) and
    B = U − V, D = diag(1ᵀ(U + V)) when polishing. The gradient ∂f/∂A = −2 A X⁻¹ G X⁻¹ is chained through D.
    Woodbury makes a p-Identity evaluation O(pn²); polishing costs O(n³). A numerically singular X counts
    as +∞. The identity (U = V = 0) is a stationary point of the p-Identity search; if every run ends
    worse, the identity with p zero rows is returned.

    References
    ----------
    C. Li, M. Hay, V. Rastogi, G. Miklau and A. McGregor, "Optimizing linear counting queries under
    differential privacy", PODS 2010, §5 (Problem 5.15, Program 5.1).
    R. McKenna, G. Miklau, M. Hay and A. Machanavajjhala, "Optimizing error of high-dimensional
    statistical queries under differential privacy", VLDB 2018, §4 (OPT_0, p-Identity strategies).

    Examples
    --------
    >>> import numpy as np
    >>> from mmopt.local_search import minimize_l1
    >>> G = np.eye(8)
    >>> sol = minimize_l1(G, seed=0)
    >>> A = sol.matrix
    >>> bool(np.trace(np.linalg.solve(A.T @ A, G)) <= 8 + 1e-6)
    True
    >>> round(float(np.abs(A).sum(axis=0).max()), 12)
    1.0
    """
    began = time.perf_counter()
    G, lam, Q = _check_gram(gram)
    n = G.shape[0]
    p = _positive_int(p, "p", allow_none=True)
    restarts = _positive_int(restarts, "restarts")
    max_iterations = _positive_int(max_iterations, "max_iterations")
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not 0.0 < tol < 1.0:
        raise _invalid("tol", "be a number in (0, 1)", repr(tol))
    rng = np.random.default_rng(seed)
    log = _LOG.info if verbose else _LOG.debug
    # Dividing by tr G (the identity's error) makes tol mean the same for every workload scale.
    scale = float(np.trace(G)) if np.trace(G) > 0 else 1.0

    if initial is None:
        mode, p = "p-identity", (max(4, n // 16) if p is None else p)
        objective = functools.partial(_pidentity_objective, G=G, p=p, n=n)
        to_matrix = functools.partial(_pidentity_matrix, p=p, n=n)
        # HDMM's start (U uniform on [0, 1], V = 0) on even runs; odd runs also draw V: signed starts reach
        # other local optima (the only ones beating I at n = 8, p = 8) and match V = 0 for larger n.
        starts = (np.r_[rng.random(p * n), 0.5 * (k % 2) * rng.random(p * n)] for k in range(restarts))
        how = f"over p-Identity strategies [I; T]D⁻¹ with p = {p} extra rows"
    else:
        A0 = _check_initial(initial, n, p)
        mode, p = "polish", A0.shape[0]
        keep = lam > 1e-12 * max(lam[-1], 0.0)
        objective = functools.partial(_general_objective, F=Q[:, keep] * np.sqrt(lam[keep]), m=p, n=n)
        to_matrix = functools.partial(_general_matrix, p=p, n=n)
        noisy = (A0 * (1 + 0.2 * rng.standard_normal(A0.shape)) + 0.01 * rng.standard_normal(A0.shape)
                 for _ in range(restarts - 1))
        starts = (_split(A / np.abs(A).sum(axis=0).max()) for A in (A0, *noisy))
        how, f0 = "polishing the given strategy under column L1 norms ≤ 1", _exact_objective(G, A0)

    history, iterations, best = [], 0, (np.inf, None, "solver_error")
    for k, z0 in enumerate(starts):
        t0 = time.perf_counter()
        z, f, nit, status = _lbfgs(objective, z0, scale, max_iterations, tol)
        A = to_matrix(z)
        A = A / np.abs(A).sum(axis=0).max()
        # Choose among runs by the exact error of the returned A, not the optimiser's Woodbury value.
        f = _exact_objective(G, A)
        iterations += nit
        history.append({"restart": k, "objective": float(f), "iterations": nit, "status": status,
                        "seconds": time.perf_counter() - t0})
        log("minimize_l1 %s run %d: objective %.8g after %d iterations (%s)", mode, k, f, nit, status)
        if f < best[0]:
            best = (f, A, status)

    f, A, status = best
    if mode == "polish" and not f <= f0:  # rounding aside, run 0 already starts at A0
        f, A, status = f0, A0, history[0]["status"]
    fallback = mode == "p-identity" and not f <= np.trace(G)
    if fallback:
        f, A, status = float(np.trace(G)), np.vstack([np.eye(n), np.zeros((p, n))]), "optimal"
        log("minimize_l1: every run ended worse than the identity, a stationary point; returning it")
    how += " (the identity, which beat every run)" if fallback else ""
    message = (f"Local optimum of a non-convex problem: best of {restarts} L-BFGS-B run(s) {how}; "
               "a heuristic with no optimality certificate.")
    if status == "user_limit":
        message += " The iteration limit was reached; raise max_iterations for a tighter local optimum."
    return RawSolution(matrix=A, gram=None, status=status, message=message, iterations=iterations,
                       solver="mmopt-lbfgs", dual_bound=None, history=tuple(history),
                       extra={"seconds": time.perf_counter() - began, "p": p, "mode": mode,
                              "identity_fallback": fallback})
