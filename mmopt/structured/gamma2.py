"""The multiplicative-weights ascent of the γ₂ dual of the max-variance minimax, shared by
:mod:`mmopt.structured.orbit_maxvar` (weights constant on exchangeable queries and cells) and
:mod:`mmopt.toeplitz.maxvar` (every range its own weight, in prefix coordinates).

Notation: see README. min_X max_q v_q/τ_q s.t. diag X ≤ 1 is γ₂(diag(τ)^{-1/2}W)², whose dual is the maximum over
query weights λ ∈ Δ and cell weights μ ∈ Δ of T(λ, μ)² (Lee, Shraibman & Špalek, CCC 2008). T is ½-homogeneous in
each, with gradients v/(2τ) and diag X/2 at X(λ, μ), so at the saddle point v_q/τ_q = T on λ's support and
X_tt = T on μ's. The weights move as λ ← λ (v/(τT))^η, μ ← μ (X_tt/T)^η, renormalised; a step that does not
raise T halves η and restarts from the best weights. Every step's T² is a lower bound and max v/τ · max X_tt
(X scaled to diag ≤ 1) an upper bound, so the certificate holds whatever the iteration does.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FLOOR", "RIDGE", "ascend"]

#: the smallest weight (relative to uniform) and the identity the callers mix into the returned X
FLOOR, RIDGE = 1e-6, 1e-9


def ascend(evaluate, lam: np.ndarray, mu: np.ndarray, *, eta: float, tol: float, max_iterations: int,
           stall: float = 0.0):
    """Multiplicative weights from (λ, μ) (module docstring).

    Parameters
    ----------
    evaluate : callable
        (λ, μ) ↦ (bound, T, v/τ, diag X, payload): ``bound`` a certified lower bound at these weights (T², less any
        round-off allowance), ``payload`` whatever the caller needs to rebuild X (kept with the best upper bound).
    lam, mu : ndarray
        Starting weights, each summing to 1.
    eta : float
        The first step's exponent.
    tol : float
        Stop as "optimal" when the best upper bound is within 0.9·tol of the best lower bound (10 % of ``tol``
        spare for the caller's exact re-evaluation); "user_limit" after ``max_iterations`` evaluations.
    stall : float, default 0
        A step whose relative gain in T is at most ``stall`` × the open relative gap counts as failed (η halves),
        besides one that leaves T where it was. The orbit route takes 10⁻³ (its floored non-binding weights crept
        past the plain test); on ranges, whose steps at η = 3 gain little while the upper bound closes, it slowed
        the ascent past its budget.

    Returns
    -------
    (status, iterations, lower bound, the weights of the lower bound, (upper bound, payload, max diag X), history)
    """
    lower, best, best_weights, last_T = 0.0, None, (lam, mu), 0.0
    history: list[dict] = []
    status, k = "user_limit", 0
    while k < max_iterations:
        k += 1
        bound, T, v, diag, payload = evaluate(lam, mu)
        if bound > lower:
            lower, best_weights = bound, (lam, mu)
        top = float(np.max(diag))
        upper = float(np.max(v)) * top  # scale-free: X / max X_tt is feasible
        if best is None or upper < best[0]:
            best = (upper, payload, top)
        history.append({"iteration": k, "objective": best[0], "lower_bound": lower})
        if best[0] <= lower * (1 + 0.9 * tol):
            status = "optimal"
            break
        # overshoot, or no progress: a smaller step from the best weights. A step that leaves T where it was is a
        # cycle, not a plateau (the gap is still open): with T = Σᵢ√(λᵢμᵢ) (disjoint queries on cells of unequal
        # counts) η = 2 swaps λ and μ exactly, log λ − log μ ↦ (1 − η)(log λ − log μ), and T never moved:
        # grouping sets over groups of 1 and 4 cells stopped at twice the optimum (a helper's probe); η = 1 ends it
        # a step whose gain is tiny beside the open gap (``stall``) is the same cycle: a floored weight of a query
        # that does not bind (a national total beside tight state targets) adds ~1e-8 a step, past the 1e-12, and
        # the orbit route crawled at 1.72× the optimum through 20,000 steps (a helper's audit)
        stalled = T - last_T <= last_T * max(1e-12, stall * (best[0] / lower - 1.0 if lower > 0 else 1.0))
        if stalled and eta > 0.25:
            eta, (lam, mu), last_T = eta / 2, best_weights, 0.0  # the best weights' own T is no failed step
            continue
        last_T = T
        lam = lam * np.power(v / T, eta)
        mu = mu * np.power(diag / T, eta)
        # floors keep every query in the weighted Gram's range and D invertible (a weight that is not binding
        # decays geometrically and would underflow); any weights give a valid bound, so the floors cost only 10⁻¹⁰
        lam = np.maximum(lam / lam.sum(), FLOOR / lam.size)
        mu = np.maximum(mu / mu.sum(), FLOOR / mu.size)
        lam, mu = lam / lam.sum(), mu / mu.sum()
    return status, k, lower, best_weights, best, tuple(history)
