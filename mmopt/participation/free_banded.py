"""Banded strategies with free entries under minimum separation: any causal C with at most b bands, prefix sums.

Notation: see README and :mod:`mmopt.participation.sensitivity`. With C lower-triangular and C_ts = 0 for
t − s ≥ b (at most b bands), the columns of steps b or more apart have disjoint supports, so X = CᵀC has
X_st = 0 for |s − t| ≥ b and under ``min_separation(b, k)`` (and fixed epochs, whose patterns are among those)

    Δ² = max_π Σ_{t∈π} κ_t,        κ_t = ‖C e_t‖²  (exact, any sign: the dynamic programme of
                                                    :func:`mmopt.participation.sensitivity.best_pattern_sum`).

The Toeplitz families (:mod:`mmopt.toeplitz` banded, equal columns; :mod:`mmopt.participation.weighted`, row
weights) fix C up to O(b + n) numbers; here every entry of the band is free (jax_privacy's BandMF is this family with
κ equal), and so is κ. Written C = C̃·Diag(√κ_t / ‖C̃ e_t‖), the objective Δ²·‖W C⁻¹‖²_F is minimised by L-BFGS over
(C̃, log κ) with the maximum over patterns replaced by its log-sum-exp at temperature τ (every pattern, by the same
dynamic programme in the log semiring, with its adjoint for the gradient; scaled so that it is homogeneous in κ):

    Δ²_τ(κ) = (m/τ)·log Σ_π exp(τ Σ_{t∈π} κ_t / m),   m = k·mean κ,    Δ² ≤ Δ²_τ ≤ Δ² + m·log|Π|/τ,

at τ = 10³ then 10⁴ (:data:`TEMPERATURES`). Why every entry free: at n = 256, k = 4, b = 64 the row-weighted
strategy's error is 7,627 and ``free_banded(256, 4)``'s 7,274 (4.6 % lower; in a development run, not kept, the
free band at the row-weighted κ alone reached 7,364); at n = 1,024 the gains are measured in
docs/tutorials/training.md. The start is the row-weighted strategy, and the end is kept only if its exact
Δ²·error is lower, so the result is never worse than it. Its exact error is recomputed from C (triangular inverse,
no surrogate) and its Δ² by the dynamic programme. A local optimum of a non-convex parametrisation: status
"local_optimum", or "user_limit" when L-BFGS ran out of iterations or seconds in the last stage.

Cost per step: the triangular inverse B = W C⁻¹ = (C W⁻¹)⁻¹ (n³/6 multiply-adds), M = BᵀB (B is triangular: LAPACK's
lauum, n³/6) and the banded gradient −2 (M C⁻ᵀ)_band (b·n²/2); O(n²) memory (n ≤ :data:`MAX_N`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from scipy import optimize as sopt

from mmopt._base import validation as v
from mmopt.participation.sensitivity import Sensitivity, best_pattern_sum

__all__ = ["MAX_N", "TEMPERATURES", "FreeBanded", "free_banded", "soft_pattern_max"]

MAX_N = 4096
TEMPERATURES = (1e3, 1e4)
SINGLE_FROM = 1024  # from this many steps the search's products are in float32 (:func:`_error`'s ``single``; here
# and in chain_banded); every error reported is recomputed in float64


@dataclass(frozen=True)
class FreeBanded:
    """A free banded strategy for prefix sums under ``min_separation(b, k)`` (module docstring).

    Attributes
    ----------
    matrix : ndarray (n, n)
        C, lower-triangular with at most b bands, scaled to Δ = 1 under the schema.
    error : float
        Its exact total squared error at unit σ, ‖W C⁻¹‖²_F (Δ = 1).
    sensitivity : Sensitivity
        Δ² = 1 by the dynamic programme (exact).
    status : {"local_optimum", "user_limit"}
    iterations : int
    seconds : float
        CPU seconds.
    """

    matrix: np.ndarray
    error: float
    sensitivity: Sensitivity
    status: str
    iterations: int
    seconds: float


def soft_pattern_max(values, separation: int, participations: int, temperature: float):
    """(log Σ_π exp(τ Σ_{t∈π} values_t) / τ, its gradient): every pattern of ≤ k steps b apart (the empty one
    too), by the dynamic programme of :func:`best_pattern_sum` in the log semiring, and its adjoint. O(n·k).

    >>> vals = np.array([3.0, 1.0, 1.0, 3.0])
    >>> s, g = soft_pattern_max(vals, 2, 2, 50.0)
    >>> bool(6.0 <= s <= 6.0 + np.log(10) / 50), g.round(3).tolist()       # max 6 at (0, 3)
    (True, [1.0, 0.0, 0.0, 1.0])
    """
    x = np.asarray(values, dtype=float) * temperature
    n, b, k = len(x), separation, participations
    F = np.zeros((k + 1, n + 1))  # F[m, t]: log Σ over patterns of ≤ m steps in [0, t)
    for t in range(1, n + 1):
        F[1:, t] = np.logaddexp(F[1:, t - 1], F[:-1, max(t - b, 0)] + x[t - 1])
    adjoint = np.zeros((k + 1, n + 1))
    adjoint[k, n] = 1.0
    grad = np.zeros(n)
    for t in range(n, 0, -1):
        p, A = max(t - b, 0), adjoint[1:, t]
        skip = np.exp(F[1:, t - 1] - F[1:, t])
        take = np.exp(F[:-1, p] + x[t - 1] - F[1:, t])
        adjoint[1:, t - 1] += A * skip
        adjoint[:-1, p] += A * take
        grad[t - 1] = float(np.dot(A, take))
    return float(F[k, n]) / temperature, grad


def free_banded(n: int, participations: int, *, max_iterations: int = 250, seconds: float | None = None,
                temperatures=TEMPERATURES, start=None) -> FreeBanded:
    """The free banded strategy for prefix sums of n steps under ``min_separation(n/k, k)`` (module docstring).

    Parameters
    ----------
    n : int
        Steps, a multiple of k, at most :data:`MAX_N`.
    participations : int
        k; the separation is b = n/k and the strategy has b bands.
    max_iterations : int
        L-BFGS iterations per temperature.
    seconds : float, optional
        A CPU budget: L-BFGS stops once it is spent (status "user_limit").
    temperatures : tuple of float
        τ of the successive stages.
    start : array_like (n, n), optional
        The start instead of the row-weighted strategy: lower-triangular with at most b bands and a positive
        diagonal (any scale); the result is never worse than it (:func:`mmopt.participation.chain_levels.free_levels`
        passes the coarser level's strategy, carried to n).

    Examples
    --------
    >>> from mmopt.participation import min_separation, sensitivity_squared
    >>> r = free_banded(64, 4, max_iterations=60)
    >>> S = sensitivity_squared(r.matrix, min_separation(16, 4))       # another code path: pattern search
    >>> bool(np.isclose(S.squared, 1.0)), S.exact, r.sensitivity.exact
    (True, True, True)
    """
    caller = "free_banded"
    n, k, max_iterations, seconds = _check_arguments(n, participations, max_iterations, seconds, caller)
    from mmopt.participation.weighted import weighted_banded
    t0 = time.process_time()
    b = n // k
    if start is None:
        C0 = np.asarray(weighted_banded(n, k).to_dense(), dtype=float)
    else:
        C0 = v.check_matrix(start, name="start", caller=caller, square=True)
        if C0.shape[0] != n:
            raise ValueError(f"The 'start' parameter of {caller} must be {n}×{n} (n steps). Got shape {C0.shape} "
                             "instead.")
    rows, cols = np.nonzero(check_band(C0, b, caller, what="b"))
    N = rows.size
    kappa0 = (C0 * C0).sum(axis=0)
    x = np.concatenate([(C0 / np.sqrt(kappa0))[rows, cols], np.log(kappa0)])
    deadline = None if seconds is None else t0 + seconds

    def strategy(x):
        Ct = np.zeros((n, n))
        Ct[rows, cols] = x[:N]
        norms = np.sqrt((Ct * Ct).sum(axis=0))
        kappa = np.exp(x[N:])
        return Ct, norms, kappa, Ct * (np.sqrt(kappa) / norms)

    def exact(x):
        return band_error(strategy(x)[3], b, k)

    def objective(x, tau):
        Ct, norms, kappa, C = strategy(x)
        E, gC = _error(C, b, gradient=True, single=n >= SINGLE_FROM)
        if gC is None:  # C singular (a zero on its diagonal): no finite error, so the line search steps back
            return math.inf, np.zeros_like(x)
        gC = gC.astype(float)
        chat = Ct / norms
        along = (chat * gC).sum(axis=0)  # ∂E/∂(column norm) per column
        gCt = (np.sqrt(kappa) / norms) * (gC - chat * along)
        m = k * kappa.mean()
        S, gS = soft_pattern_max(kappa / m, b, k, tau)
        gk = S * (k / n) + gS - float(gS @ kappa) / m * (k / n)  # of m·S(κ/m)
        value = math.log(E) + math.log(m * S)
        gu = (along / (2 * np.sqrt(kappa)) / E + gk / (m * S)) * kappa
        return value, np.concatenate([gCt[rows, cols] / E, gu])

    best, status, iterations = _stages(objective, exact, x, exact(x), temperatures, max_iterations, deadline)
    error, C = best
    sens = Sensitivity(1.0, 1.0, True, "min separation, at most b bands: dynamic programme over Σ κ_t (exact)")
    return FreeBanded(C, float(error), sens, status, iterations, time.process_time() - t0)


def _stages(objective, exact, x, best, temperatures, max_iterations: int, deadline):
    """(best, status, iterations) of L-BFGS (:func:`_lbfgs`) at each temperature τ in turn from x, all under one
    deadline: a stage runs until L-BFGS stops or the budget is spent, and the next, sharper one takes what is left
    (free_banded's and chain_banded's stages). ``objective(x, τ)`` is (value, gradient); ``exact(x)`` a tuple whose
    first entry is the exact error, the lowest kept from ``best`` (the start's) on. Status "user_limit" when the
    iterations or the budget ran out, a stage left unrun included (its exact scoring can cross the deadline after
    L-BFGS stopped on its own: a review); else "local_optimum"."""
    status, iterations = "local_optimum", 0
    for stage, tau in enumerate(temperatures):
        x, nit, status, _ = _lbfgs(lambda y, tau=tau: objective(y, tau), x, max_iterations, deadline)
        iterations += nit
        candidate = exact(x)
        if candidate[0] < best[0]:
            best = candidate
        if deadline is not None and time.process_time() > deadline:
            if stage < len(temperatures) - 1:
                status = "user_limit"
            break
    return best, status, iterations


def _lbfgs(fun, x, max_iterations: int, deadline, *, ftol: float = 1e-15, gtol: float = 0.0):
    """(x, iterations, status, converged) of one L-BFGS stage on ``fun`` (value, gradient) from x: x the lowest
    point evaluated; status "user_limit" when the iterations or the CPU deadline (``time.process_time``) ran out,
    else "local_optimum"; converged when scipy's L-BFGS-B met its tolerances. Past the deadline the next
    evaluation stops the stage, inside a line search too: at n = 2,048 an evaluation takes 0.6–0.75 CPU s in
    the 2b-band strategy (~2.7 s in the chain dual, which shares this) and a line search several."""
    best = [math.inf, x]
    iterations = [0]

    def out_of_time():
        return deadline is not None and time.process_time() > deadline

    def tracked(y):
        if math.isfinite(best[0]) and out_of_time():
            raise StopIteration
        value, gradient = fun(y)
        if value < best[0]:
            best[:] = [value, y.copy()]
        return value, gradient

    def stop(_):
        iterations[0] += 1
        if out_of_time():
            raise StopIteration

    converged = False
    try:  # scipy ≥ 1.11 ends minimize when the callback raises StopIteration and returns the point reached
        res = sopt.minimize(tracked, x, jac=True, method="L-BFGS-B", callback=stop,
                            options={"maxiter": max_iterations, "maxcor": 20, "ftol": ftol, "gtol": gtol})
        x, iterations[0], converged = (res.x if res.fun <= best[0] else best[1]), int(res.nit), bool(res.success)
    except StopIteration:  # raised inside a line search: the lowest point evaluated
        x = best[1]
    status = "user_limit" if iterations[0] >= max_iterations or out_of_time() else "local_optimum"
    return x, iterations[0], status, converged


def band_error(C: np.ndarray, separation: int, participations: int):
    """(Δ²·‖W C⁻¹‖²_F, C/Δ): the exact error of a C with at most b bands scaled to Δ = 1 under
    ``min_separation(b, k)`` (Δ² by the dynamic programme over column norms, exact; no surrogate)."""
    s2 = best_pattern_sum((C * C).sum(axis=0), separation, participations)[0]
    return _error(C)[0] * s2, C / math.sqrt(s2)


def check_band(C: np.ndarray, bands: int, caller: str, *, what: str) -> np.ndarray:
    """The mask of ``bands`` bands (lower-triangular, s − t < bands) of C's shape, after checking that a ``start``
    C lies on them with a positive diagonal (a ValueError naming ``caller`` and the count, ``what`` = ``bands``)."""
    n = C.shape[0]
    band = np.tril(np.ones((n, n), dtype=bool)) & ~np.tril(np.ones((n, n), dtype=bool), -bands)
    if np.any(C[~band] != 0) or np.any(np.diag(C) <= 0):
        raise ValueError(f"The 'start' parameter of {caller} must be lower-triangular with at most {what} = {bands} "
                         "bands and a positive diagonal. Got another matrix instead.")
    return band


def _check_arguments(n, participations, max_iterations, seconds, caller: str):
    """(n, k, max_iterations, seconds) checked for a banded family of n ≤ :data:`MAX_N` steps with b = n/k."""
    n = v.check_int(n, name="n", caller=caller, low=2, high=MAX_N)
    k = v.check_int(participations, name="participations", caller=caller, low=1)
    if n % k:
        raise ValueError(f"The 'participations' parameter of {caller} must divide n = {n} (b = n/k). "
                         f"Got {k} instead.")
    max_iterations = v.check_int(max_iterations, name="max_iterations", caller=caller, low=0)
    if seconds is not None:
        seconds = v.check_real(seconds, name="seconds", caller=caller, low=0.0, low_open=True)
    v.check_allocation(8 * n * n, what=f"eight {n:,}×{n:,} arrays", caller=caller)
    return n, k, max_iterations, seconds


def _error(C: np.ndarray, bands: int | None = None, *, gradient: bool = False, single: bool = False):
    """(‖W C⁻¹‖²_F, its gradient on C's ``bands`` bands if asked, other entries unspecified): W the prefix-sum
    matrix (cumulative sums), C lower-triangular (its strict upper triangle zero: LAPACK reads one triangle).

    B = W C⁻¹ = (C D)⁻¹ with D = W⁻¹ the difference matrix (C D: C's column j minus its column j + 1), one
    triangular inverse; C⁻¹ = D B (B's row differences) and BᵀB by LAPACK's lauum (B is lower-triangular: n³/6
    multiply-adds against syrk's n³/2 on a full B; 0.12 against 0.37 CPU s at n = 2,048 on one core). LAPACK gets
    the transposes (C D)ᵀ and Bᵀ, upper-triangular, which are C-ordered arrays' own memory: the Fortran-ordered
    copies of C and B it took before, and the tril after trtri, cost 0.35 of a step's 0.86 CPU s at n = 2,048.

    ``single``: in float32 (the search's steps only, never a reported error: 0.14 against 0.51 CPU s at n = 2,048;
    on the Lagrangian start there, k = 4, the error's relative difference was 8e-10 and the gradient's 1e-5), the
    error summed in float64."""
    dtype = np.float32 if single else np.float64
    CD = np.array(C, dtype=dtype, order="C")  # C-ordered: its transpose is Fortran-ordered (C D)ᵀ, upper-triangular
    CD[:, :-1] -= CD[:, 1:]
    trtri, lauum = ((scipy.linalg.lapack.strtri, scipy.linalg.lapack.slauum) if single else
                    (scipy.linalg.lapack.dtrtri, scipy.linalg.lapack.dlauum))
    Bt, info = trtri(CD.T, lower=0, overwrite_c=1)  # Bᵀ = ((C D)ᵀ)⁻¹, in place
    if info != 0:
        return math.inf, None
    B = Bt.T  # lower-triangular: trtri leaves the other triangle as it found it, zero
    if not gradient:
        return float(np.einsum("ij,ij->", B, B, dtype=float)), None
    Ci = np.diff(B, axis=0, prepend=dtype(0.0))  # C⁻¹ = D B
    M = lauum(Bt, lower=0)[0].T  # Bᵀ·B = U Uᵀ for U = Bᵀ: its lower triangle, all read below
    n = C.shape[0]
    g = np.zeros((n, n), dtype=dtype)
    width = max(1, min(bands, 256))
    # ∂/∂C_ij of ‖B‖² = −2 (M C⁻ᵀ)_ij = −2 Σ_{l≤j} M_il C⁻¹_jl on the band i ∈ [j, j + bands), by blocks of columns
    # [lo, hi) (products, not one matrix-vector product per column): M's lower triangle holds l < lo ≤ i, the
    # block l ∈ [lo, hi) is made symmetric
    for lo in range(0, n, width):
        hi = min(lo + width, n)
        rows = slice(lo, min(hi + bands - 1, n))
        acc = M[rows, :lo] @ Ci[lo:hi, :lo].T
        Md = M[rows, lo:hi].copy()
        Md[:hi - lo] = np.tril(Md[:hi - lo]) + np.tril(Md[:hi - lo], -1).T
        acc += Md @ Ci[lo:hi, lo:hi].T
        g[rows, lo:hi] = -2.0 * acc
    return float(np.trace(M, dtype=float)), g
