"""Accelerated projected gradient (FISTA) for min ½ hᵀQh − cᵀh over C, Q ⪰ 0 given as an operator.

Notation: see README. Beck & Teboulle (SIAM J. Imaging Sci. 2009) with the gradient restart of
O'Donoghue & Candès (Found. Comput. Math. 2015): step 1/L with L ≥ λ_max(Q) (a proven upper bound from the
factors, so every step is a descent step), and the momentum is reset whenever it points uphill. The
projection onto C is exact (:func:`~mmopt.reconstruct._common.project_feasible`), so every iterate meets
h ≥ 0, the zeros and the total; optimality is the relative KKT residual of
:func:`~mmopt.reconstruct._common.kkt_residual`, recomputed at the returned point. A solve that does not
reach ``tol`` within ``max_iterations`` raises :class:`mmopt.solvers.SolverError` rather than returning
an unconverged h as if it were the projection.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mmopt.reconstruct._common import kkt_residual, project_feasible
from mmopt.solvers import SolverError

DEFAULT_TOL = 1e-6
DEFAULT_MAX_ITERATIONS = 20_000


def fista(Q: Callable[[np.ndarray], np.ndarray], c: np.ndarray, lipschitz: float, start: np.ndarray, *,
          total: float | None, zeros: np.ndarray | None, tol: float = DEFAULT_TOL,
          max_iterations: int = DEFAULT_MAX_ITERATIONS, what: str = "reconstruction") -> tuple[np.ndarray, int, float]:
    """(h, iterations, relative KKT residual) for min ½hᵀQh − cᵀh over C, started at P_C(start) (flat vectors).

    Raises SolverError when the residual is still above ``tol`` after ``max_iterations``.
    """
    L = float(lipschitz)
    c_norm = float(np.linalg.norm(c))
    h = project_feasible(start, total, zeros)
    z, t = h.copy(), 1.0
    for it in range(1, max_iterations + 1):
        g = Q(z) - c
        h_new = project_feasible(z - g / L, total, zeros)
        step = h_new - z
        scale = max(float(np.linalg.norm(h_new)), c_norm / L, 1e-300)
        # ‖z − P_C(z − ∇f(z)/L)‖ is the KKT residual at z, free here; confirm at h_new before stopping
        if float(np.linalg.norm(step)) <= tol * scale:
            res = kkt_residual(h_new, Q(h_new) - c, L, c_norm, total, zeros)
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
    res = kkt_residual(h, Q(h) - c, L, c_norm, total, zeros)
    if res <= tol:
        return h, max_iterations, res
    raise SolverError(f"{what}: projected gradient (FISTA) did not converge in {max_iterations:,} iterations "
                      f"(relative KKT residual {res:.3g} > tol {tol:g}). Raise max_iterations or tol, or use "
                      "reconstruct='least_squares'.")

