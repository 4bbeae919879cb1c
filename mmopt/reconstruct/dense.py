"""Non-negative reconstruction for dense workloads and strategies (n ≤ a few thousand cells).

Notation: see README. Both choices are one problem, min ½‖F h − b‖² over C = {h ≥ 0, h_Z = 0 [, Σh = total]}:

* ``"nnls"``: F = A, b = y (the noisy measurements).
* ``"projection"``: F = G^{1/2} (from the eigendecomposition of G/m; the minimiser does not depend on the scale
  of G), b = F x̂, so ½‖F(h − x̂)‖² = ½(h − x̂)ᵀG(h − x̂)/m.

Solvers (all exact up to rounding, then checked): without a total, scipy.optimize.nnls (Lawson–Hanson active
set) on the free columns; with a total, CVXPY's Clarabel QP followed by an active-set polish (the equality-
constrained least squares on the support, kept when its KKT residual is smaller) and an exact projection onto
C. For a prefix workload without zeros, ``"projection"`` is isotonic regression of the noisy prefix answers
(O(n), :func:`isotonic_prefix`). Every answer's KKT residual is checked against ``tol``; one that fails raises
:class:`mmopt.solvers.SolverError`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg
from scipy.optimize import isotonic_regression, nnls

from mmopt.dense.least_squares import factorize
from mmopt.reconstruct._common import Reconstruction, kkt_residual, project_feasible, safe_norm, unit_size
from mmopt.solvers import SolverError

DEFAULT_TOL = 1e-7


def isotonic_prefix(xhat: np.ndarray, total: float | None) -> np.ndarray:
    """The G-metric projection for the prefix workload, by isotonic regression of ŝ = cumsum(x̂).

    With s = W h the prefix sums, (h − x̂)ᵀG(h − x̂) = ‖s − ŝ‖² and h ≥ 0 ⇔ 0 ≤ s₁ ≤ … ≤ s_n. The least-squares
    fit under a chain order and constant bounds a ≤ sᵢ ≤ b is the unbounded isotonic fit clipped to [a, b]
    (the pool-adjacent-violators blocks are unchanged by a constant clip: Barlow et al., *Statistical
    Inference under Order Restrictions*, 1972, Thm 1.6): a = 0, and with a total t, s_n = t and b = t for
    s₁..s_{n−1}. Then h = diff(s). Tested against the general QP to 1e-8.
    """
    s_hat = np.cumsum(xhat)
    n = s_hat.size
    if total is None:
        s = np.maximum(isotonic_regression(s_hat).x, 0.0)
    else:
        s = np.empty(n)
        s[-1] = total
        if n > 1:
            s[:-1] = np.clip(isotonic_regression(s_hat[:-1]).x, 0.0, total)
    return np.diff(s, prepend=0.0)


def _root(mean_gram: np.ndarray) -> np.ndarray:
    """F (r×n) with FᵀF = G/m, from the eigenvalues above mmopt's rank threshold."""
    lam, V = linalg.eigh(mean_gram, check_finite=False, driver="evd")
    keep = lam > mean_gram.shape[0] * np.finfo(float).eps * max(lam[-1], 0.0)
    return (V[:, keep] * np.sqrt(lam[keep])).T


def _clarabel(F: np.ndarray, b: np.ndarray, total: float) -> np.ndarray:
    import cvxpy as cp  # lazy: cvxpy takes a second to import

    h = cp.Variable(F.shape[1])
    # keep the objective and h O(1) for the interior-point tolerances: by ‖b‖ alone, a total 10⁶ times the data's
    # left h/scale huge and Clarabel reported the (always feasible) problem 'infeasible'
    scale = max(safe_norm(b), abs(total), 1.0)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(F @ h - b / scale)), [h >= 0, cp.sum(h) == total / scale])
    try:
        prob.solve(solver="CLARABEL")
    except cp.error.SolverError as exc:
        raise SolverError(f"reconstruction: Clarabel failed on the total-constrained QP ({exc}).") from None
    if h.value is None or prob.status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(f"reconstruction: Clarabel returned status {prob.status!r} on the total-constrained QP.")
    return np.asarray(h.value) * scale


def _polish(F: np.ndarray, b: np.ndarray, h: np.ndarray, total: float, rounds: int = 50) -> np.ndarray | None:
    """Active-set refinement of an interior-point h for min ½‖F h − b‖², h ≥ 0, Σh = total; None if it fails.

    On a guessed support S the KKT system [FₛᵀFₛ 1; 1ᵀ 0][hₛ; ν] = [Fₛᵀb; total] gives the exact minimiser;
    a negative hₛ leaves S, and the cell with the most negative multiplier gᵢ + ν (g = Fᵀ(Fh − b)) off S joins it.
    """
    S = h > 1e-6 * max(float(h.max()), total / h.size)
    # the multipliers' scale: both gradient terms (with b = 0, ‖Fᵀb‖ alone made the test −1e-312 and round-off kept
    # adding cells until the rounds ran out)
    scale = max(safe_norm(F.T @ b), safe_norm(F.T @ (F @ h)), 1e-300)
    for _ in range(rounds):
        k = int(S.sum())
        if k == 0:
            return None
        FS = F[:, S]
        K = np.zeros((k + 1, k + 1))
        K[:k, :k], K[:k, k], K[k, :k] = FS.T @ FS, 1.0, 1.0
        sol = linalg.lstsq(K, np.append(FS.T @ b, total), check_finite=False)[0]
        if sol[:k].min() < 0:
            idx = np.flatnonzero(S)
            S[idx[sol[:k] < 0]] = False
            continue
        out = np.zeros_like(h)
        out[S] = sol[:k]
        mult = F.T @ (F @ out - b) + sol[k]
        mult[S] = np.inf
        worst = int(np.argmin(mult))
        if mult[worst] >= -1e-12 * scale:
            return out
        S[worst] = True
    return None


def _scale(h: np.ndarray, c_norm: float, L: float) -> float:
    """The exact solvers' KKT scale max(‖h‖, ‖c‖/L): their answers are exact, the test only confirms it."""
    return max(safe_norm(h), c_norm / L, math.ulp(1.0))


def _solve(F: np.ndarray, b: np.ndarray, total, zeros, tol: float) -> tuple[np.ndarray, str, float]:
    """min ½‖F h − b‖² over C: (h, solver name, relative KKT residual)."""
    # h is positively homogeneous in (b, total): solved at unit size, so that the KKT check's floor (an ulp of 1)
    # means the same at every scale (at counts of 1e-30 it passed any point; the exact solvers were right anyway)
    if (size := unit_size(b, total)) is not None:
        h, solver, res = _solve(F, b / size, None if total is None else total / size, zeros, tol)
        return h * size, solver, res
    n = F.shape[1]
    free = np.ones(n, bool) if zeros is None else ~zeros
    if not free.any():
        # every cell is a structural zero: C = {0}, so h = 0 is the exact minimiser (and scipy's nnls, handed an
        # empty problem, corrupts the heap and aborts the interpreter)
        return np.zeros(n), "closed_form", 0.0
    Ff = F[:, free]
    L = max(float(np.sum(Ff * Ff)), math.ulp(1.0))  # ‖F‖_F² ≥ λ_max(FᵀF): a valid step for the residual
    c_norm = safe_norm(Ff.T @ b)
    if total == 0.0:
        hf, solver = np.zeros(Ff.shape[1]), "closed_form"
    elif total is None:
        try:
            hf, solver = nnls(Ff, b, maxiter=50 * Ff.shape[1])[0], "scipy.nnls"
        except RuntimeError:  # the active set ran out of iterations: the interior-point route instead
            hf, solver = _nn_clarabel(Ff, b), "clarabel"
    else:
        hf, solver = project_feasible(_clarabel(Ff, b, total), total, None), "clarabel"
        polished = _polish(Ff, b, hf, total)
        if polished is not None:
            polished = project_feasible(polished, total, None)
            res = [kkt_residual(x, Ff.T @ (Ff @ x - b), L, _scale(x, c_norm, L), total, None) for x in (hf, polished)]
            hf = polished if res[1] <= res[0] else hf
    h = np.zeros(n)
    h[free] = np.maximum(hf, 0.0) if total is None else hf
    res = kkt_residual(hf, Ff.T @ (Ff @ hf - b), L, _scale(hf, c_norm, L), total, None)
    if not res <= tol:  # NaN-safe: an overflowed residual is no certificate
        raise SolverError(f"reconstruction: {solver} returned a point with relative KKT residual {res:.3g} > tol "
                          f"{tol:g}. Raise tol, or use reconstruct='least_squares'.")
    return h, solver, res


def _nn_clarabel(F: np.ndarray, b: np.ndarray) -> np.ndarray:
    import cvxpy as cp

    h = cp.Variable(F.shape[1])
    cp.Problem(cp.Minimize(cp.sum_squares(F @ h - b)), [h >= 0]).solve(solver="CLARABEL")
    if h.value is None:
        raise SolverError("reconstruction: both scipy.nnls and Clarabel failed on the non-negative least squares.")
    return np.maximum(np.asarray(h.value), 0.0)


def reconstruct(method: str, mean_gram: np.ndarray, family: str, A: np.ndarray, y: np.ndarray, xhat: np.ndarray,
                *, total=None, zeros=None, tol: float = DEFAULT_TOL) -> tuple[np.ndarray, Reconstruction]:
    """h for each draw (rows of y / x̂ when 2-D) by ``method`` "nnls" or "projection"; see the module docstring."""
    ys, xs = np.atleast_2d(y), np.atleast_2d(xhat)
    nz = 0 if zeros is None else int(zeros.sum())
    if method == "projection" and family == "prefix" and zeros is None:
        H = np.stack([isotonic_prefix(x, total) for x in xs])
        return (H if xhat.ndim == 2 else H[0]), Reconstruction(method, "isotonic", 0, 0.0, tol, total, nz)
    F = A if method == "nnls" else _root(mean_gram)
    out, solvers, worst = [], set(), 0.0
    for yi, xi in zip(ys, xs, strict=True):
        h, solver, res = _solve(F, yi if method == "nnls" else F @ xi, total, zeros, tol)
        out.append(h)
        solvers.add(solver)
        worst = max(worst, res)
    H = np.stack(out)
    return (H if xhat.ndim == 2 else H[0]), Reconstruction(method, "+".join(sorted(solvers)), 0, worst, tol,
                                                           total, nz)


def estimate(workload, strategy, y: np.ndarray, method: str, *, total=None, zeros=None, tol: float = DEFAULT_TOL
             ) -> tuple[np.ndarray, Reconstruction]:
    """The mechanism's estimate from y (shape (p,) or (size, p)): x̂ = A⁺y, then ``method``'s reconstruction.

    ``"least_squares"`` returns :func:`mmopt.dense.least_squares.factorize`'s x̂ untouched (bit for bit as before).
    """
    ls = factorize(strategy)
    xhat = ls.solve(y)
    if method == "least_squares":
        return xhat, Reconstruction("least_squares", ls.method)
    return reconstruct(method, workload.mean_gram, workload.family, strategy.matrix, y, xhat, total=total,
                       zeros=zeros, tol=tol)
