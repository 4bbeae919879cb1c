"""Eigen-design (Li & Miklau, PVLDB 2012): the best scaling of the workload's eigen-queries, a convex program.

Notation: see README. Write G = WᵀW = Qᵀ diag(σ) Q with orthonormal rows qᵢ of Q (the eigen-queries) and
keep the k eigenvalues σᵢ > 0. The eigen-design strategy is A(λ) = diag(√λ) Q, λ ≥ 0, whose Gram
Qᵀ diag(λ) Q shares G's eigenvectors, so its profile term is tr(G (AᵀA)⁺) = Σᵢ σᵢ/λᵢ and its squared L2
sensitivity is maxⱼ Σᵢ λᵢ Qᵢⱼ². Li & Miklau's program ("An adaptive mechanism for accurate query answering
under differential privacy", PVLDB 5(6), 2012, its eigen-design step; the seed's "choose optimal scaling of
eigenvectors of W", the (ε,δ) row beside Program 5.2) is

    minimise Σᵢ σᵢ/λᵢ   subject to   P λ ≤ 1,   λ ≥ 0,        P = (Q∘Q)ᵀ (n × k, rows summing to ≤ 1),

Program 5.2 restricted to Grams that commute with G. Its Lagrange dual, from minimising
σᵢ/λᵢ + λᵢ cᵢ at λᵢ = √(σᵢ/cᵢ) with c = Pᵀμ, is the concave

    g(μ) = 2 Σᵢ √(σᵢ cᵢ) − Σⱼ μⱼ,   μ ≥ 0,   ∇g = P λ(μ) − 1,

maximised here by L-BFGS-B. Every μ gives a lower bound g(μ) on the program and a feasible λ(μ)/maxⱼ(Pλ(μ))ⱼ,
so the relative duality gap certifies the solution *within the eigen-design family*. The uniform μ gives
g = (Σᵢ√σᵢ)²/n, the SVD bound, so the program's value always lies between that bound and Program 5.2's.
Not implemented: the paper's eigen-query separation and principal-vector speed-ups (the full program takes
about a second at n = 1,024, ``benchmarks/results/bench_landscape_optimisers.txt``).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.optimize

from mmopt._base import guards as g
from mmopt._base.solution import RawSolution
from mmopt._base.validation import check_gram_magnitude, check_int, check_matrix, check_real

__all__ = ["SOLVER_NAME", "eigen_weights", "solve_eigen_design"]

SOLVER_NAME = "mmopt-eigen-dual-lbfgs"
_CALLER = "optimize(method='eigen_design')"
# Eigenvalues of G below this share of the largest are round-off: their eigen-queries are not measured
# (the workload has no weight on them).
_RANK_RTOL = 1e-12
DEFAULT_TOL = 1e-7
DEFAULT_MAX_ITERATIONS = 5000


def eigen_weights(G: np.ndarray, rows=None) -> tuple[np.ndarray, np.ndarray]:
    """(σ, Q): the positive eigenvalues of G and their orthonormal eigenvectors as the rows of Q (k × n).

    Eigenvalues below 10⁻¹² of the largest are dropped. With the workload's ``rows`` (W, G = c·WᵀW for a c > 0)
    they come from W's singular values instead, accurate to eps relative to each one (eigh's are to eps of the
    largest): a query weighted 10⁻³ beside one weighted 10⁴ has eigenvalue 10⁻¹⁴ of the largest, was dropped as
    round-off, and the strategy did not support the workload. Then the cut is n·eps of the largest singular
    value. Within a repeated eigenvalue the basis is numpy's (``eigh``/``svd``): the paper leaves that choice open
    and the program's value can depend on it.

    Examples
    --------
    >>> s, Q = eigen_weights(np.array([[2.0, 1.0], [1.0, 2.0]]))
    >>> s.round(12).tolist(), abs(Q).round(6).tolist()
    ([1.0, 3.0], [[0.707107, 0.707107], [0.707107, 0.707107]])
    """
    if rows is not None:
        W = rows.toarray() if hasattr(rows, "toarray") else np.asarray(rows, dtype=float)
        _, sv, Vt = np.linalg.svd(W, full_matrices=False)
        keep = sv > W.shape[1] * np.finfo(float).eps * max(float(sv[0]), 0.0) if sv.size else sv > 0
        sv, Vt = sv[keep][::-1], Vt[keep][::-1]  # ascending, as eigh's
        c = float(np.trace(G)) / float(np.sum(sv * sv))  # G's own scale (optimize passes it normalised)
        return c * sv * sv, Vt
    s, V = np.linalg.eigh(G)
    keep = s > _RANK_RTOL * max(float(s[-1]), 0.0)
    return s[keep], V[:, keep].T


def _dual(mu, rs, P):
    """−g(μ) and its gradient 1 − Pλ(μ) (module docstring); c is floored so that λ stays finite."""
    c = np.maximum(P.T @ mu, 1e-300)
    root = np.sqrt(c)
    lam = rs / root
    return -(2.0 * float(rs @ root) - float(np.sum(mu))), 1.0 - P @ lam


def _log_dual(t, rs, P):
    """−g(e^t) and its gradient in t: the dual without its bound μ ≥ 0 (see solve_eigen_design)."""
    mu = np.exp(t)
    value, gradient = _dual(mu, rs, P)
    return value, gradient * mu


def _primal(mu, s, rs, P) -> tuple[np.ndarray, float]:
    """The feasible λ(μ)/maxⱼ(Pλ)ⱼ and its objective Σ σᵢ/λᵢ."""
    lam = rs / np.sqrt(np.maximum(P.T @ mu, 1e-300))
    lam = lam / float(np.max(P @ lam))
    return lam, float(np.sum(s / lam))


def solve_eigen_design(G: np.ndarray, *, tol: float | None = None, max_iterations: int | None = None,
                       verbose: bool = False, rows=None) -> RawSolution:
    """Eigen-design's strategy diag(√λ) Q for the Gram ``G`` (module docstring), certified within its family.

    Parameters
    ----------
    G : ndarray of shape (n, n)
        WᵀW, symmetric positive semidefinite, not zero (:func:`mmopt.optimize` passes it normalised).
    tol : float or None
        Target relative duality gap (primal − dual)/primal of the eigen-design program (default 10⁻⁷).
    max_iterations : int or None
        L-BFGS-B iterations on the dual (default 5,000).
    verbose : bool
        Unused (the solve takes about a second at n = 1,024); accepted for the registry's interface.
    rows : array_like (m, n), optional
        W itself, when stored: the eigen-queries from its SVD (:func:`eigen_weights`).

    Returns
    -------
    RawSolution
        ``matrix`` = diag(√λ) Q with ‖A‖₂ = 1. ``status`` "optimal" when the gap reached ``tol`` — optimal
        *among eigen-designs*, which :func:`mmopt.optimize` reports as "local_optimum" (the best of a
        restricted family) unless the objective also meets the global lower bound; "user_limit" when
        ``max_iterations`` ended the solve first, "optimal_inaccurate" when L-BFGS-B stopped short of ``tol``.
        ``extra`` holds λ, σ, the family's dual bound and gap. The family's dual bound is *not* passed as
        ``dual_bound``: it bounds eigen-designs only, not every strategy.

    Examples
    --------
    The identity workload: every eigenvalue is 1, λ = 1, and the strategy is the identity (the optimum).

    >>> sol = solve_eigen_design(np.eye(3))
    >>> sol.status, np.round(sol.matrix @ sol.matrix.T, 9).tolist() == np.eye(3).tolist()
    ('optimal', True)
    """
    t0 = time.perf_counter()
    # checked, not converted: tol ≤ 0 or NaN and max_iterations 0 or 2.5 ran and reported a status, and eigh
    # read one triangle of a non-symmetric G (a different problem, called "optimal")
    tol = DEFAULT_TOL if tol is None else check_real(tol, name="tol", caller=_CALLER, low=0.0, low_open=True)
    max_iterations = DEFAULT_MAX_ITERATIONS if max_iterations is None else check_int(
        max_iterations, name="max_iterations", caller=_CALLER)
    G = check_matrix(G, name="G", caller=_CALLER, square=True)
    asym = float(np.max(np.abs(G - G.T))) if G.size else 0.0  # (PSD is eigen_weights' own test, on its one eigh)
    if asym > 1e-8 * float(np.max(np.abs(G))):
        raise ValueError(f"The 'G' parameter of {_CALLER} must be symmetric (a Gram WᵀW); max |G − Gᵀ| is "
                         f"{asym:.3g}. Pass W.T @ W.")
    check_gram_magnitude(G, name="G", caller=_CALLER)
    n = G.shape[0]
    g.check_working_set({"eigenvectors": n * n, "their squares P": n * n, "eigh's workspace": 2 * n * n},
                        what="the eigen-design program", caller=_CALLER,
                        remedy=" Use method='l2_approx' on a structured workload, or a smaller domain.")
    s, Q = eigen_weights(G, rows)
    if s.size == 0:
        raise ValueError(f"{_CALLER}: the workload's Gram is zero (no positive eigenvalue); there is nothing to "
                         "measure.")
    # The dual's tolerances (gtol) are absolute: a G of 1e-20 stopped 4 % off the optimum. Solve for the
    # eigenvalues scaled by an exact power of two into [0.5, 1) and scale the objectives back.
    e = int(np.frexp(float(s.max()))[1])
    s_given, s = s, np.ldexp(s, -e)
    P = (Q * Q).T
    rs = np.sqrt(s)
    mu0 = np.full(n, (float(np.sum(rs)) / n) ** 2)  # the uniform dual optimum: g(μ₀) is the SVD bound
    res = scipy.optimize.minimize(_dual, mu0, args=(rs, P), jac=True, method="L-BFGS-B",
                                  bounds=[(0.0, None)] * n,
                                  options={"maxiter": max_iterations, "ftol": 1e-16, "gtol": 1e-13, "maxcor": 30})
    candidates = [mu0, res.x]
    dual = max(-_dual(mu, rs, P)[0] for mu in candidates)
    lam, primal = min((_primal(mu, s, rs, P) for mu in candidates), key=lambda t: t[1])
    iterations = int(res.nit)
    if max(primal - dual, 0.0) / primal > tol and iterations < max_iterations:
        # L-BFGS-B on μ ≥ 0 can step onto μⱼ = 0, where λ = √σ/√(Pᵀμ) blows up, and stop "ABNORMAL" with the
        # primal at 10¹⁵⁰ (diag(1, 4, 9, 0.01): a gap of 1 where the identity is the optimum 14.01). In
        # μ = exp(t) the dual is smooth and unconstrained: resume there from the best point so far.
        best = max(candidates, key=lambda mu: -_dual(mu, rs, P)[0])
        t0 = np.log(np.maximum(best, 1e-12 * float(np.max(best))))
        logged = scipy.optimize.minimize(_log_dual, t0, args=(rs, P), jac=True, method="L-BFGS-B",
                                         bounds=[(-700.0, 700.0)] * n,
                                         options={"maxiter": max_iterations - iterations, "ftol": 1e-16,
                                                  "gtol": 1e-13, "maxcor": 30})
        iterations += int(logged.nit)
        res = logged
        mu = np.exp(logged.x)
        dual = max(dual, -_dual(mu, rs, P)[0])
        lam, primal = min([(lam, primal), _primal(mu, s, rs, P)], key=lambda t: t[1])
    gap = max(primal - dual, 0.0) / primal
    primal, dual = float(np.ldexp(primal, e)), float(np.ldexp(dual, e))
    if gap <= tol:
        status, why = "optimal", f"relative duality gap {gap:.1e} ≤ tol {tol:g}"
    elif iterations >= max_iterations:
        status, why = "user_limit", f"max_iterations={max_iterations} reached at relative gap {gap:.1e}; raise it"
    else:
        status, why = "optimal_inaccurate", (f"L-BFGS-B stopped ({res.message}) at relative gap {gap:.1e} > tol "
                                             f"{tol:g}")
    message = (f"Eigen-design (Li & Miklau 2012): the best scaling of the workload's {s.size} eigen-queries, "
               f"{why}. Optimal within the eigen-design family only, not among all strategies; under Laplace "
               "noise it is scored in L1 but optimised in L2.")
    A = np.sqrt(lam)[:, None] * Q
    return RawSolution(A, None, status, message, iterations, SOLVER_NAME, None, (),
                       {"eigenvalues": s_given, "weights": lam, "family_objective": primal, "family_dual_bound": dual,
                        "family_gap": gap, "seconds_solve": time.perf_counter() - t0})
