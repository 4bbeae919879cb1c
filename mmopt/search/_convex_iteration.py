"""Dattorro's convex iteration around a prebuilt P1 (split from :mod:`mmopt.search.sdp_min_error`; shared with
:mod:`mmopt.search.min_sensitivity`): P1 a convex SDP steered by a direction matrix Z, P2 Z from the eigenvectors of
the n smallest eigenvalues of G_big, a bisection over the target t."""

from __future__ import annotations

import logging
import time

import numpy as np

from mmopt import solvers

__all__ = ["ConvexIteration", "null_projector"]

logger = logging.getLogger("mmopt")

# A target t is abandoned after _MAX_INNER steps, or once the rank gap has fallen by less than 20% and the
# true error by less than 1e-5 (relative) over two steps. Within an unreachable target the gap plateaus in
# ~4 steps but the iterates keep improving for many more; cutting them short (1e-4) ended W = [10·1ᵀ; I₄]
# in the 224.5 local optimum instead of 222.66.
_MAX_INNER, _STALL, _ERR_STALL = 30, 0.8, 1e-5


def null_projector(a: np.ndarray) -> np.ndarray:
    """Z = N (NᵀN)⁻¹ Nᵀ with N = [−A; I]: ⟨Z, G_big⟩ = 0 at the rank-n point X = AᵀA."""
    n = a.shape[1]
    nmat = np.vstack([-a, np.eye(n)])
    z = nmat @ np.linalg.solve(nmat.T @ nmat, nmat.T)
    return (z + z.T) / 2


class ConvexIteration:
    """Dattorro's convex iteration around a prebuilt P1 whose Z and t are cvxpy Parameters.

    ``big(A_k)`` gives the numeric G_big of an iterate; ``exact(A_k)`` maps it to a valid strategy and its
    true objective (the SDP's A_k only satisfies the relaxation). Shared with :mod:`mmopt.search.min_sensitivity`.
    """

    def __init__(self, prob, a_var, z_par, t_par, *, big, exact, t_scale, solver, weight, tol, verbose, what):
        self.prob, self.a, self.z, self.t, self.big, self.exact = prob, a_var, z_par, t_par, big, exact
        self.t_scale = t_scale  # the P1 constraint reads t/t_scale: P1 may see a rescaled problem
        self.name, self.weight, self.tol, self.verbose, self.what = solver, weight, tol, verbose, what
        # SCS stops at ~1e-6 accuracy, so its rank gap cannot reach an interior-point tolerance.
        self.gap_tol = tol if solver in ("CLARABEL", "MOSEK", "CVXOPT") else max(tol, 1e-4)
        self.history: list[dict] = []
        self.inaccurate, self.failure = False, ""

    def step(self, z, target, clock):
        """One P1 solve + P2 -> (raw A_k, valid A, objective, rank gap, next Z), or None on failure."""
        it = len(self.history) + 1
        self.z.value = z if self.weight is None else self.weight * z
        self.t.value = 0.0 if target is None else target / self.t_scale
        out = solvers.solve(self.prob, self.name, tol=min(self.tol, 1e-8), what=f"{self.what} step P1 ({it})")
        if not out.has_solution or self.a.value is None:
            self.failure = out.message
            return None
        self.inaccurate |= out.status == "optimal_inaccurate"
        a_k = self.a.value
        big = self.big(a_k)
        n = a_k.shape[1]
        lam, vec = np.linalg.eigh((big + big.T) / 2)
        gap = float(lam[:n].sum() / np.trace(big))
        z_next = vec[:, :n] @ vec[:, :n].T  # P2 in closed form (Ky Fan)
        a_valid, e_k = self.exact(a_k)
        rec = {"iteration": it, "objective": e_k, "rank_gap": gap, "weight": self.weight, "target": target}
        self.history.append({**rec, "seconds": time.perf_counter() - clock})
        if self.verbose:
            logger.info("%s P1 solve %d: objective %.8g, rank gap %.2e, target %s (%.1f s)", self.what, it, e_k,
                        gap, target, time.perf_counter() - clock)
        return a_k, a_valid, e_k, gap, (z_next + z_next.T) / 2

    def run(self, a0, e0, lower, budget, clock):
        """Return (best objective, best valid A, status) after at most ``budget`` P1 solves from A0."""
        best_e, best_a = e0, a0
        z, a_prev, lo, hi, e_pass, target = null_projector(a0), a0, lower, e0, e0, None
        gaps: list[float] = []
        errs: list[float] = []
        for _ in range(budget):
            if self.weight is None and not gaps:  # a new bisection target, restarted from the best A
                if hi - lo <= 1e-3 * hi:
                    # Failed targets only stalled, they were not proven out of reach, and the new best A
                    # may open another basin: start a new pass unless this one gained < 0.1%.
                    if best_e >= (1 - 1e-3) * e_pass:
                        return best_e, best_a, "optimal"
                    lo, hi, e_pass = lower, best_e, best_e
                target = (lo + hi) / 2
                z = null_projector(best_a)
            res = self.step(z, target, clock)
            if res is None:
                if not self.history:
                    raise solvers.SolverError(self.failure)
                return best_e, best_a, "solver_error"
            a_k, a_valid, e_k, gap, z = res
            if e_k < best_e:
                best_e, best_a = e_k, a_valid
            moved = np.linalg.norm(a_k - a_prev) / max(np.linalg.norm(a_k), 1e-300)
            a_prev = a_k
            if self.weight is not None:
                if gap <= self.gap_tol and moved <= np.sqrt(self.tol):  # large w: the gap is ~0 every step
                    return best_e, best_a, "optimal"
                continue
            gaps.append(gap)
            errs.append(e_k)
            stalled = (
                len(gaps) >= 3 and gaps[-1] > _STALL * gaps[-3] and errs[-1] > (1 - _ERR_STALL) * errs[-3]
            )
            if gap <= self.gap_tol or best_e <= target:  # target reached: lower the bracket's top
                gaps, errs, hi = [], [], min(target, best_e)
            elif len(gaps) >= _MAX_INNER or stalled:
                gaps, errs, lo = [], [], target  # treat t as out of reach
        return best_e, best_a, "user_limit"
