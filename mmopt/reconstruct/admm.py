"""ADMM for min ½ hᵀQh − cᵀh over C when Q = ⊗ᵢ Qᵢ is one Kronecker product: exact (Q + ρI)⁻¹ for every ρ.

Notation: see README. The projected gradient of :mod:`~mmopt.reconstruct.first_order` needs O(√κ) steps, and
κ(Q) = ∏ κ(Qᵢ) is large on product domains: NNLS after H₂ ⊗ H₂ on 10⁶ cells took ~2,000 steps for a relative
KKT residual of 10⁻⁵ and about 5 minutes for 10⁻⁶ (benchmarks/bench_reconstruct.py). When Q is a single Kronecker
product its eigendecomposition is the Kronecker product of the factors' (Qᵢ = Uᵢ Λᵢ Uᵢᵀ), so the ADMM step

    h ← (Q + ρI)⁻¹ (c + ρ(z − u)),   ĥ ← αh + (1 − α)z,   z ← P_C(ĥ + u),   u ← u + ĥ − z

(Boyd, Parikh, Chu, Peleato & Eckstein, Found. Trends Mach. Learn. 2011, §4.2 and §5.2; over-relaxation α,
§3.4.3) costs two factor-wise
changes of basis and a division by λ ⊗ … ⊗ λ + ρ, for any ρ. So ρ can follow the residual balancing of §3.4.1
at no cost (no refactorisation), and all the curvature of Q is handled exactly: the same solve takes a few
hundred steps. Each iterate z is in C (h ≥ 0, the zeros, the total), and the stopping test is the very
relative KKT residual that FISTA certifies (:func:`~mmopt.reconstruct._common.kkt_residual`, computed from the
caller's operator for Q), so the answer's optimality means the same whichever solver produced it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import linalg

from mmopt._base.runtime import Heartbeat
from mmopt.reconstruct._common import kkt_residual, kkt_scale, project_feasible, safe_norm
from mmopt.reconstruct.first_order import not_converged

MAX_FACTOR = 4096  # a dense n_i × n_i eigenbasis per factor: 128 MiB at this size
CHECK_EVERY = 5  # iterations between KKT checks (a check costs one application of Q, less than an ADMM step)
ALPHA = 1.6  # over-relaxation (Boyd §3.4.3): 1.5–1.8 took 1.5–2× fewer steps than 1 on H₂ ⊗ H₂ NNLS
# Residual balancing (Boyd §3.4.1): ρ doubles or halves when one residual exceeds the other this many times.
# 100, not Boyd's 10: H₂ ⊗ H₂ NNLS at 10⁶ cells took 60–125 steps, against 125–330 (10) and 130–315 (never).
_BALANCE = 100.0


def usable(factor_sizes) -> bool:
    """Whether every factor is small enough for a dense eigenbasis."""
    return all(int(k) <= MAX_FACTOR for k in factor_sizes)


def _basis(U: list[np.ndarray], x: np.ndarray, transpose: bool) -> np.ndarray:
    """(⊗ Uᵢ)ᵀ x or (⊗ Uᵢ) x for x shaped like the domain, one axis at a time (never forming ⊗ Uᵢ)."""
    for i, Ui in enumerate(U):
        x = np.moveaxis(np.tensordot(Ui.T if transpose else Ui, x, axes=(1, i)), 0, i)
    return x


def solve(factors: list[np.ndarray], Q: Callable[[np.ndarray], np.ndarray], c: np.ndarray, start: np.ndarray, *,
          total: float | None, zeros: np.ndarray | None, tol: float, max_iterations: int,
          what: str = "reconstruction", scale: float | None = None, strict: bool = True
          ) -> tuple[np.ndarray, int, float]:
    """(h, iterations, relative KKT residual) for min ½hᵀ(⊗ Qᵢ)h − cᵀh over C, started at P_C(start).

    ``factors`` are the symmetric PSD Qᵢ (their product's shape is the domain's), ``Q`` applies ⊗ Qᵢ to a flat
    vector (used for the KKT test, so the certificate does not depend on the eigendecomposition), ``c``,
    ``start`` and ``zeros`` are flat; ``scale`` as in :func:`mmopt.reconstruct.first_order.fista`. Raises
    SolverError when the residual is above ``tol`` after ``max_iterations``, unless ``strict=False``.
    """
    z = project_feasible(np.asarray(start, float).ravel(), total, zeros)
    shape = tuple(F.shape[0] for F in factors)
    eig = [linalg.eigh(F, check_finite=False, driver="evd") for F in factors]
    lams = [np.clip(lam, 0.0, None) for lam, _ in eig]
    U = [Ui for _, Ui in eig]
    spectrum = lams[0]
    for lam in lams[1:]:
        spectrum = np.multiply.outer(spectrum, lam)
    L = math.prod(float(lam[-1]) for lam in lams)  # λ_max(⊗ Qᵢ), the step of the KKT test as in FISTA
    if not L > 0.0:
        raise ValueError(f"{what}: the quadratic form is zero, so every feasible point is optimal.")
    scale = kkt_scale(start, c, L, total, zeros, tol) if scale is None else float(scale)
    positive = spectrum[spectrum > 1e-12 * L]
    rho = math.sqrt(float(positive.min()) * L)  # the geometric mean of the spectrum's ends
    c_hat = _basis(U, c.reshape(shape), transpose=True)
    u = np.zeros_like(z)
    res, beat = math.inf, Heartbeat()
    for it in range(1, max_iterations + 1):
        rhs = c_hat + rho * _basis(U, (z - u).reshape(shape), transpose=True)
        h = _basis(U, rhs / (spectrum + rho), transpose=False).ravel()
        z_old = z
        relaxed = ALPHA * h + (1.0 - ALPHA) * z_old
        z = project_feasible(relaxed + u, total, zeros)
        u += relaxed - z
        if it % CHECK_EVERY and it != max_iterations:
            continue
        res = kkt_residual(z, Q(z) - c, L, scale, total, zeros)
        if res <= tol:
            return z, it, res
        beat("%s: ADMM step %d of at most %d, KKT residual %.3g (tol %g)", what, it, max_iterations, res, tol)
        primal = safe_norm(h - z)
        dual = rho * safe_norm(z - z_old)
        if primal > _BALANCE * dual:
            rho, u = 2.0 * rho, u / 2.0  # u is the scaled dual y/ρ: keep y fixed
        elif dual > _BALANCE * primal:
            rho, u = rho / 2.0, 2.0 * u
    if strict:
        raise not_converged(what, "ADMM", max_iterations, res, tol)
    return z, max_iterations, res
