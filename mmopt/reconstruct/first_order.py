"""Accelerated projected gradient (FISTA) for min ½ hᵀQh − cᵀh over C, Q ⪰ 0 given as an operator.

Notation: see README. Beck & Teboulle (SIAM J. Imaging Sci. 2009) with the gradient restart of
O'Donoghue & Candès (Found. Comput. Math. 2015): step 1/L with L ≥ λ_max(Q) (a proven upper bound from the
factors, so every step is a descent step), and the momentum is reset whenever it points uphill. The
projection onto C is exact (:func:`~mmopt.reconstruct._common.project_feasible`), so every iterate meets
h ≥ 0, the zeros and the total; optimality is the relative KKT residual of
:func:`~mmopt.reconstruct._common.kkt_residual` (relative to the correction ‖x̂ − P_C(x̂)‖ the constraints
force on the unconstrained minimiser x̂), recomputed at the returned point. A solve that does not
reach ``tol`` within ``max_iterations`` raises :class:`mmopt.solvers.SolverError` rather than returning
an unconverged h as if it were the projection.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mmopt._base.runtime import Heartbeat
from mmopt.reconstruct._common import kkt_residual, kkt_scale, project_feasible, safe_norm
from mmopt.solvers import SolverError

# The iterative solvers' default: the KKT residual weighs an error along an eigenvector of Q by λ/λ_max, so on
# ill-conditioned Q it is blind to the directions a prefix-like workload amplifies. NNLS after H₂ ⊗ H₂ on 10⁶
# cells stopped at 10⁻⁶ with 1.38× the workload error of the converged answer, at 10⁻⁸ within 0.1% (21 s;
# benchmarks/results/bench_reconstruct.txt).
ITERATIVE_TOL = 1e-8
DEFAULT_MAX_ITERATIONS = 100_000  # FISTA steps are cheap; on R ⊗ R at 64×64, 10⁷ counts, tol 1e-8 took 23,000


def fista(Q: Callable[[np.ndarray], np.ndarray], c: np.ndarray, lipschitz: float, start: np.ndarray, *,
          total: float | None, zeros: np.ndarray | None, tol: float = ITERATIVE_TOL,
          max_iterations: int = DEFAULT_MAX_ITERATIONS, what: str = "reconstruction", scale: float | None = None,
          strict: bool = True) -> tuple[np.ndarray, int, float]:
    """(h, iterations, relative KKT residual) for min ½hᵀQh − cᵀh over C, started at P_C(start) (flat vectors).

    ``scale`` divides the KKT residual (default :func:`~mmopt.reconstruct._common.kkt_scale` of ``start``,
    which should be the unconstrained minimiser). Raises SolverError when the residual is still above ``tol`` after
    ``max_iterations``, unless ``strict=False`` (then the last iterate is returned with its residual).
    """
    L = float(lipschitz)
    scale = kkt_scale(start, c, L, total, zeros, tol) if scale is None else float(scale)
    h = project_feasible(start, total, zeros)
    z, t = h.copy(), 1.0
    beat = Heartbeat()
    for it in range(1, max_iterations + 1):
        g = Q(z) - c
        h_new = project_feasible(z - g / L, total, zeros)
        step = h_new - z
        size = safe_norm(step)  # once per step, for the progress line and the test
        beat("%s: FISTA step %d of at most %d, KKT residual ≈ %.3g (tol %g)", what, it, max_iterations,
             size / scale, tol)
        # ‖z − P_C(z − ∇f(z)/L)‖ is the KKT residual at z, free here; confirm at h_new before stopping
        if size <= tol * scale:
            res = kkt_residual(h_new, Q(h_new) - c, L, scale, total, zeros)
            if res <= tol:
                return h_new, it, res
        if float(np.vdot(g, h_new - h)) > 0.0:  # momentum uphill: restart (O'Donoghue & Candès)
            t = 1.0
            z = h_new
        else:
            t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            z = h_new + ((t - 1.0) / t_new) * (h_new - h)
            t = t_new
        h = h_new
    res = kkt_residual(h, Q(h) - c, L, scale, total, zeros)
    if not res <= tol and strict:  # NaN-safe: an overflowed residual is no certificate
        raise not_converged(what, "projected gradient (FISTA)", max_iterations, res, tol)
    return h, max_iterations, res


def not_converged(what: str, solver: str, iterations: int, res: float, tol: float) -> SolverError:
    return SolverError(f"{what}: {solver} did not converge in {iterations:,} iterations (relative KKT residual "
                       f"{res:.3g} > tol {tol:g}). Raise max_iterations or tol, or use "
                       "reconstruct='least_squares'.")
