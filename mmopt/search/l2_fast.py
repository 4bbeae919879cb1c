"""Fast certified solver for the L2 approximation (Program 5.2): Newton's method on its dual, no SDP.

Notation: see README. The problem: minimise tr(G X⁺) over X ⪰ 0 with range(G) ⊆ range(X) and diag X ≤ 1,
where G = WᵀW; the optimum is the Gram X = AᵀA of the (ε,δ)-optimal strategy. With G = BᵀB and
Λ = diag(λ), λ ≥ 0, the Lagrangian is minimised by X(λ) = Bᵀ K^{-1/2} B, K = B Λ Bᵀ, and the dual
g(λ) = 2 tr K^{1/2} − Σλ is concave with gradient diag X(λ) − 1. For λ > 0, X(λ) = Λ^{-1/2} M^{1/2} Λ^{-1/2}
with M = Λ^{1/2} G Λ^{1/2}. Each iterate costs one symmetric eigendecomposition and yields a certified
lower bound g(λ) and a feasible rescaling of X(λ), so the relative duality gap certifies optimality.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import scipy.linalg

from mmopt._base.solution import RawSolution
from mmopt._base.validation import _param, check_int, check_matrix, check_real, check_vector
from mmopt.dense.profile import numerical_rank, power_of_two_scale
from mmopt.search._l2_newton import eig_full, feasible_gram, newton_step, phi

_LOG = logging.getLogger("mmopt")
_CALLER = "solve_l2"
SOLVER_NAME = "mmopt-l2-newton"

# Eigenvalues of Λ^{1/2} G Λ^{1/2} at most n·eps times the largest (at the first iterate; mmopt's one rank rule,
# mmopt.dense.profile.numerical_rank) are taken as round-off zeros; the certificate is then for G without those
# eigen-directions. A fixed 1e-13 dropped real ones: prefix(64) beside one total weighted 2·10⁵ (G's smallest
# eigenvalues 1e-13 of its largest, resolved to 0.2 %) lost 6, and the strategy did not support the workload.
_PSD_RTOL = 1e-9  # as mmopt._base.validation.check_gram: WᵀW in floating point can have eigenvalues < 0
# The fixed-point step λ ← λ·d² is exact for diagonal G. It is kept while it shrinks the KKT residual
# by this factor per iteration; after that a Newton step costs fewer eigendecompositions per digit.
_FAST_CONTRACTION = 0.1
# Singular G: κ_i = λ_i J_ii / (½ d_i) is ~1 where d_i responds to λ_i as for diagonal G and falls like
# λ_i where it no longer does. A λ_i with κ_i < _INACTIVE (see below) is an inactive constraint: it
# leaves the Newton system and shrinks by e^_MAX_LOG_STEP per step, down to _LAMBDA_FLOOR·Σλ, which
# lowers g by at most that much per coordinate. _MAX_LOG_STEP also bounds Newton steps in log λ.
_INACTIVE = 1e-2
_MAX_LOG_STEP = 5.0
_LAMBDA_FLOOR = 1e-13


def _not_psd_message(G: np.ndarray) -> str | None:
    """Return the error text if G has an eigenvalue below the round-off tolerance, else None."""
    eig = np.linalg.eigvalsh(G)
    if eig[0] >= -_PSD_RTOL * G.shape[0] * max(eig[-1], 0.0):
        return None
    return (f"{_param('gram', _CALLER)} must be positive semidefinite; its smallest eigenvalue is "
            f"{eig[0]:.3g} ({100 * eig[0] / max(abs(eig[-1]), 1e-300):.3g} % of the largest). Pass WᵀW for a "
            "workload W.")


def _validated_gram(gram) -> np.ndarray:
    G = check_matrix(gram, name="gram", caller=_CALLER, square=True)
    scale = float(np.max(np.abs(G)))
    if scale == 0.0:
        raise ValueError(f"{_param('gram', _CALLER)} must not be all zeros: every strategy has error 0 on "
                         "an empty workload, so there is nothing to optimise.")
    asym = float(np.max(np.abs(G - G.T)))
    if asym > 1e-8 * scale:
        raise ValueError(f"{_param('gram', _CALLER)} must be a square symmetric matrix; max |G - G.T| is "
                         f"{asym:.3g} ({asym / scale:.2g} of max |G|). Pass (G + G.T) / 2 if that is "
                         "round-off.")
    diag = np.diagonal(G)
    # A negative diagonal entry, or a zero one with a nonzero row, rules out PSD (a 2×2 minor < 0).
    if np.any(diag < 0) or (not np.all(diag > 0) and np.any(G[diag <= 0])):
        message = _not_psd_message(G)
        if message is not None:
            raise ValueError(message)
    return (G + G.T) / 2 if asym > 0 else G


def verdict(gap: float, tol: float, it: int, max_iterations: int) -> tuple[str, str]:
    """(status, message) of a solve that ended at relative gap ``gap`` after ``it`` iterations.

    "optimal" is a certificate here (the problem is convex); the loop also stops when the gap stalls, which is not
    a spent budget: that is "optimal_inaccurate". A gap below −tol means the bounds cross by more than tol:
    round-off, not a certificate at this tol.

    >>> verdict(-1.1e-9, 1e-10, 11, 500)[0], verdict(5e-9, 1e-8, 3, 500)[0], verdict(1e-3, 1e-8, 500, 500)[0]
    ('optimal_inaccurate', 'optimal', 'user_limit')
    """
    status = ("optimal" if -tol <= gap <= tol else "user_limit" if gap > tol and it == max_iterations
              else "optimal_inaccurate")
    message = {
        "optimal": f"Converged: certified relative duality gap {gap:.2e} <= tol {tol:g} after {it} iterations, "
                   "so X is globally optimal to within tol (Program 5.2 is convex).",
        "user_limit": f"Stopped at max_iterations={max_iterations} with relative duality gap {gap:.2e} > tol "
                      f"{tol:g}. Raise max_iterations or pass extra['dual_variable'] as initial_dual to continue.",
        "optimal_inaccurate": f"The relative duality gap {'stalled at' if gap > 0 else 'crossed zero to'} "
                              f"{gap:.2e} (tol {tol:g}) after {it} iterations: tol is below the round-off floor "
                              "of this G, loosen it. X is feasible and dual_bound valid.",
    }[status]
    return status, message


def solve_l2(gram, *, tol=1e-8, max_iterations=500, initial_dual=None, verbose=False) -> RawSolution:
    """Solve Program 5.2, min tr(G X⁺) s.t. diag X ≤ 1, to a certified relative duality gap, without an SDP.

    Parameters
    ----------
    gram : array_like of shape (n, n)
        G = WᵀW, symmetric positive semidefinite; it may be singular.
    tol : float, default 1e-8
        Target relative duality gap (f(X) − g(λ)) / f(X).
    max_iterations : int, default 500
        Maximum outer iterations; each costs one symmetric eigendecomposition (n×n, or r×r for rank-r G).
    initial_dual : array_like of shape (n,), optional
        Warm start λ ≥ 0, e.g. ``extra["dual_variable"]`` of an earlier solve on a nearby G. The default
        λ = 1 gives X(λ) ∝ G^{1/2}, the SVD-bound strategy (max over c of g(c·1) is the SVD bound).
    verbose : bool, default False
        Log one line per iteration at INFO level on the ``"mmopt"`` logger.

    Returns
    -------
    RawSolution
        ``gram`` is the feasible X (symmetric, diag X ≤ 1 exactly); ``dual_bound`` = g(λ) ≤ the optimum;
        ``status`` is "optimal" if the gap is ≤ ``tol``, "user_limit" if ``max_iterations`` ran out first,
        "optimal_inaccurate" if the gap stalled above ``tol`` or the bounds crossed by more than ``tol``
        (round-off). ``history`` holds iteration,
        primal, dual, gap (between the best bounds so far), step and cg; ``extra`` holds dual_variable
        (the λ of ``dual_bound``), primal_bound (≥ tr(G X⁺) of ``gram``), seconds, rank, cg_iterations.

    Raises
    ------
    ValueError
        If ``gram`` is not square, finite, symmetric or PSD, or is all zeros; if ``tol`` ≤ 0 or
        ``max_iterations`` < 1; if ``initial_dual`` has the wrong length, a negative entry or no positive one.

    Notes
    -----
    With K = B Λ Bᵀ = Q Ω Qᵀ and σ = ω^{1/2}: X(λ) = Bᵀ K^{-1/2} B, g(λ) = 2 Σσ − Σλ, ∂g/∂λ = d − 1 with
    d = diag X(λ). While it contracts fast the step is the fixed point λ ← λ d², exact for diagonal G;
    then Newton's step on log d = 0 in log λ, with the Daleckii–Krein Hessian, solved by CG. A step that
    lowers g (beyond round-off) without halving the KKT residual is halved. Full-rank G: the n×n matrix
    Λ^{1/2} G Λ^{1/2} is decomposed, and the upper bound is tr(G X̃⁻¹) for X̃ = D^{-1/2} X(λ) D^{-1/2},
    D = diag X(λ), which is second order in d − 1. Singular G (rank r): B is the r×n factor of its
    nonzero eigenvalues, K is r×r, and X̃ = X(λ)/max d keeps range(X̃) = range(G). Coordinates with
    G_ii = 0 get X̃_ii = 1, zero off-diagonal entries and λ_i = 0. Limits: eigh resolves Λ^{1/2} G Λ^{1/2}
    only to ~1e-16 of its norm, so for G both nearly singular and badly scaled (diag spread ≳ 1e6) the
    gap may stall above 1e-8; the solver then stops with "optimal_inaccurate" and says so.

    References
    ----------
    C. Li, M. Hay, V. Rastogi, G. Miklau, A. McGregor, "Optimizing Linear Counting Queries Under
    Differential Privacy", PODS 2010 (arXiv:0912.4742), §5.2.1, Program 5.2.

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [1.0, 1.0]])  # prefix sums, n = 2; the optimum is (3 + √5)/2
    >>> sol = solve_l2(W.T @ W)
    >>> sol.status, round(float(np.trace(W.T @ W @ np.linalg.inv(sol.gram))), 6), round(sol.dual_bound, 6)
    ('optimal', 2.618034, 2.618034)
    """
    start = time.perf_counter()
    G_full = _validated_gram(gram)
    tol = check_real(tol, name="tol", caller=_CALLER, low=0.0, low_open=True)
    max_iterations = check_int(max_iterations, name="max_iterations", caller=_CALLER, low=1)
    n_full = G_full.shape[0]
    used = np.diagonal(G_full) > 0  # PSD: G_ii = 0 forces row i to 0, so coordinate i is unused
    G = G_full if used.all() else G_full[np.ix_(used, used)]
    n = G.shape[0]
    # Solved on G·2⁻ᵉ with max |G| in [0.5, 1): exact, and the bounds, λ and the history scale back by 2ᵉ. The
    # products below square G's scale (LAPACK stopped with 'did not converge' at 1e±200), and a start at λ = 1
    # whatever the scale stopped 33 % off the optimum past 1e60.
    e = power_of_two_scale(G)
    G = np.ldexp(G, -e)
    lam = np.ones(n)
    if initial_dual is not None:
        lam0 = check_vector(initial_dual, name="initial_dual", caller=_CALLER, length=n_full)[used]
        if np.any(lam0 < 0) or not np.any(lam0 > 0):
            raise ValueError(f"{_param('initial_dual', _CALLER)} must be nonnegative with a positive entry "
                             f"where diag(G) > 0. Got entries in [{lam0.min():.3g}, {lam0.max():.3g}].")
        lam = np.ldexp(np.maximum(lam0, 1e-12 * lam0.max()), -e)  # the first iterate goes through Λ^{-1/2}
    log = _LOG.info if verbose else _LOG.debug
    B, rank, history, cg_total, n_cg, step, newton, last_eps = None, n, [], 0, 0, "start", False, None
    best_f, best_g, best_primal, best_lam, prev = np.inf, -np.inf, None, lam, None
    for it in range(1, max_iterations + 1):
        full = B is None  # this iterate is from the n×n path (so is the first one of a singular G)
        if full:
            omega, N = eig_full(G, lam)
            if it == 1:  # check PSD on the spectrum already computed (signs survive the congruence)
                if omega[0] < -_PSD_RTOL * n * max(omega[-1], 0.0) and (message := _not_psd_message(np.ldexp(G, e))):
                    raise ValueError(message)
                rank = max(1, numerical_rank(np.maximum(omega[::-1], 0.0), (n, n)))
                if rank < n:  # G = BᵀB with B = Ω_r^{1/2} Q_rᵀ Λ^{-1/2} = Ω_r^{1/2} N_rᵀ
                    B = np.sqrt(omega[n - rank:])[:, None] * N[:, n - rank:].T
            omega, N = omega[n - rank:], N[:, n - rank:]
        else:
            omega, Q = scipy.linalg.eigh((B * lam) @ B.T, overwrite_a=True, check_finite=False, driver="evd")
        # g uses the spectrum as computed (negative round-off → 0), so it stays a valid lower bound, and
        # dropping M's round-off eigenvalues only lowers it. X uses σ clamped away from 0, so it is PSD
        # with range(G), and Σσ·max d (or f2 below) bounds its objective from above.
        sigma_dual = np.sqrt(np.maximum(omega, 0.0))
        sigma = np.maximum(sigma_dual, 1e-15 * sigma_dual[-1])  # only keeps 1/σ finite
        if not full:
            N = B.T @ (Q / sigma)  # N = Bᵀ Q Ω^{-1/2}; allows λ_i → 0 (inactive constraints)
            del Q
        d = np.einsum("ik,ik,k->i", N, N, sigma)  # diag X(λ)
        g = 2.0 * sigma_dual.sum() - lam.sum()
        Phi = phi(sigma) if newton or not full else None
        # Coordinates far from d = 1 take the fixed-point step and stay out of the Newton system. For
        # singular G some constraints are inactive (λ_i* = 0, d_i* < 1). Setting λ_i = 0 raises g by
        # λ_i(1 − d_i) and lowers it by ½ J_ii λ_i² = ¼ κ_i d_i λ_i, so λ_i is dropped (shrunk fast)
        # when κ_i < (1 − d_i)/d_i, i.e. when that pays even at second order.
        far, weak = d < 0.5, np.zeros(n, dtype=bool)
        if not full:
            N2 = N * N
            d_safe = np.maximum(d, 1e-300)  # d_i = 0 only where far, which is excluded anyway
            kappa = lam * np.einsum("ik,ik->i", N2 @ Phi, N2) / (0.5 * d_safe)
            weak = ~far & (d < 1.0) & (kappa < np.minimum(_INACTIVE, (1.0 - d) / d_safe))
            del N2
        free = ~(far | weak)
        eps = float(np.max(np.abs(d - 1.0)[free], initial=0.0))  # KKT residual of the Newton system
        f, diagonal = float(sigma.sum() * d.max()), False
        if B is None and not far.any() and eps * eps <= 1e4 * tol:  # f2 may certify: worth a syrk
            Y = N / np.sqrt(sigma)
            X_inv = Y @ Y.T  # X̃⁻¹ = T Λ N Ω^{-1/2} Nᵀ Λ T with T = D^{1/2}
            del Y
            t = lam * np.sqrt(d)
            X_inv *= np.outer(t, t)
            f2 = float(np.vdot(X_inv, G))
            del X_inv
            if f2 < f:
                f, diagonal = f2, True
        if f < best_f or best_primal is None:
            best_f, best_primal = f, (d, sigma, N, diagonal)
        if g > best_g:
            best_g, best_lam = g, lam
        gap = (best_f - best_g) / best_f
        # Round-off of g: eigh moves each ω_k by ~ε·ω_max, hence σ_k by ~ε·ω_max/(2σ_k).
        noise = 1e-15 * (omega[-1] * np.sum(1.0 / sigma) + abs(g) + lam.sum())
        # Halve a step that lowered g beyond round-off without halving the KKT residual. Near the optimum
        # g is flat to round-off while the residual, and with it the primal bound, still falls.
        rejected = prev is not None and g < prev[1] - noise - prev[3] and eps >= 0.5 * prev[4]
        history.append({"iteration": it, "primal": f, "dual": g, "gap": gap,
                        "step": step + (" (rejected)" if rejected else ""), "cg": n_cg})
        log("solve_l2 it %d: primal %.12g dual %.12g gap %.2e kkt %.2e step %s (%d CG)%s %.1fs", it, f, g,
            gap, eps, step, n_cg, ", rejected" if rejected else "", time.perf_counter() - start)
        if gap <= tol or it == max_iterations:
            break
        if len(history) >= 6 and history[-6]["gap"] <= 1.01 * gap:
            break  # no progress in 5 iterations: the round-off floor of this G
        if rejected:  # every step is an ascent direction for g, so halving eventually succeeds
            newton, step, n_cg = True, "halved", 0
            prev = (prev[0], prev[1], 0.5 * prev[2], prev[3], prev[4])
            lam = np.maximum(prev[0] * np.exp(prev[2]), 1e-30 * prev[0].max())
            continue
        # The fixed-point step is clipped only against overflow: the first one from λ = 1 can be large.
        fixed_point = np.clip(2.0 * np.log(np.maximum(d, 1e-300)), -30.0, 30.0)
        if not newton and last_eps is not None and eps > _FAST_CONTRACTION * last_eps:
            newton, Phi = True, phi(sigma) if Phi is None else Phi
        last_eps = eps
        if newton:
            rho = min(1.0, eps) if B is not None else 0.0  # full-rank G: J is nonsingular
            delta, n_cg = newton_step(N, Phi, lam, d, free, rho=rho, eta=min(0.1, eps))
            cg_total += n_cg
            delta *= min(1.0, _MAX_LOG_STEP / max(np.max(np.abs(delta)), 1e-300))  # keeps the direction
            delta[far] = fixed_point[far]
            shrunk = np.maximum(lam * np.exp(-_MAX_LOG_STEP), _LAMBDA_FLOOR * lam.sum())
            delta[weak] = np.log(np.minimum(lam, shrunk) / lam)[weak]
            if np.dot(lam * (d - 1.0), delta) <= 0.0:  # not an ascent direction (μ-gradient λ(d − 1))
                delta = fixed_point
            step = "newton"
        else:
            delta, n_cg, step = fixed_point, 0, "fixed-point"
        del N, Phi
        prev = (lam, g, delta, noise, eps)
        lam = np.maximum(lam * np.exp(delta), 1e-30 * lam.max())  # the floor only guards against underflow
    X_used, m = feasible_gram(*best_primal)
    best_f *= m
    best_f, best_g, best_lam = np.ldexp(best_f, e), np.ldexp(best_g, e), np.ldexp(best_lam, e)
    history = [h | {"primal": float(np.ldexp(h["primal"], e)), "dual": float(np.ldexp(h["dual"], e))} for h in history]
    gap = (best_f - best_g) / best_f
    X, lam_out = X_used, best_lam
    if not used.all():
        X, lam_out = np.eye(n_full), np.zeros(n_full)
        X[np.ix_(used, used)], lam_out[used] = X_used, best_lam
    status, message = verdict(gap, tol, it, max_iterations)
    return RawSolution(
        matrix=None, gram=X, status=status, message=message, iterations=it,
        solver=SOLVER_NAME, dual_bound=float(best_g), history=tuple(history),
        extra={"dual_variable": lam_out, "primal_bound": float(best_f), "rank": int(rank),
               "cg_iterations": cg_total, "seconds": time.perf_counter() - start},
    )
