"""A dense strategy's side of a grouping-set release: what ``optimize(W)`` returns on small irregular grouping sets.

On two irregular trees × a flat attribute (264 cells) the hierarchy families reach 1.606× the optimum l2_approx
certifies on the dense twin in 0.1 s (a helper's oracle audit); ``optimize``'s "auto" now returns that dense
strategy up to :data:`mmopt.family.hierarchy.DENSE_CELLS` cells, so the records and SQL releases (which measure
through :class:`mmopt.hierarchy.release.Measurements`) take it too.

Notation: N = ∏ nᵢ cells (C order, as ``W.shape``), A (m×N), F = A⁺ (N×m). Least squares x̂ = F y; a grouping
set's group totals are Q x̂ = (Q F) y for its group indicators Q (the unweighted totals, as every hierarchy
release answers), so at unit noise per Δ₂ = 1 their variances are Δ₂²·‖(Q F)_g‖² (Li et al., PODS 2010, Prop.
4.4, per query). A group total outside A's row space (Q (I − F A) ≠ 0) gets variance inf, which
:func:`mmopt.hierarchy.release.refuse_unmeasured` refuses before any data is read. Both products are formed by
:func:`mmopt.hierarchy.release.set_sums` on F (and on I − F A) with the extra axis trailing: O(N·(m + N)) memory,
checked before it is allocated.

The answers A x are computed as the dense release computes them (:mod:`mmopt.dense.exact_answers`: every entry
correctly rounded, exact for an integer strategy) and d_in charges that rounding (Δ₂·(1 + u·(2N + 1)), about
9.5·10⁻⁷ of Δ₂): a BLAS product moved neighbours past Δ₂ rounded upwards, by 3.3·10⁻⁷ of it at 2³² records (a
helper's probe). So ``x`` must hold whole counts of at most MAX_RECORDS records (the release checks it).
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import validation as v
from mmopt.dense.exact_answers import charged_sensitivity, check_strategy, exact_answers, integer_exact
from mmopt.hierarchy.workload import HierarchyWorkload
from mmopt.structured.release import upper_sensitivity

__all__ = ["dense_measurements"]

#: a group total whose part outside A's row space is above this fraction of its norm is unmeasured
SUPPORT_TOL = 1e-9


def dense_measurements(W: HierarchyWorkload, A, set_sums, *, caller: str):
    """(answer, finish, unit variances per set, exact Δ₂, d_in charged, size) of the dense :class:`~mmopt.Strategy`
    ``A``; ``set_sums`` is :func:`mmopt.hierarchy.release.set_sums` (passed in: that module imports this one)."""
    N = math.prod(W.shape)
    M = A.matrix
    if M.shape[1] != N:
        raise ValueError(f"The 'strategy' parameter of {caller} is a dense strategy over {M.shape[1]:,} cells, but the "
                         f"grouping sets' domain {tuple(W.shape)} has {N:,}. Optimise a strategy for this workload "
                         "(omit 'strategy').")
    v.check_allocation(4 * N * (M.shape[0] + N), what=f"the least-squares operator of a dense strategy on {N:,} cells",
                       caller=caller, remedy=" Use the hierarchy families' strategy (omit 'strategy').")
    check_strategy(M, caller)  # from A alone, before any data is read
    exact = integer_exact(M)
    F = np.linalg.pinv(M)  # N×m; an SVD: κ(A)·eps, where (AᵀA)⁺ would square it
    outside = np.eye(N) - F @ M  # projector onto the complement of A's row space
    Delta = float(A.sensitivity("l2"))
    unit = []
    for QF, QR, ones in zip(set_sums(W, F.reshape(*W.shape, -1)), set_sums(W, outside.reshape(*W.shape, N)),
                            set_sums(W, np.ones(W.shape)), strict=True):
        u = Delta * Delta * np.einsum("...j,...j->...", QF, QF)
        leak = np.sqrt(np.einsum("...j,...j->...", QR, QR))
        u[leak > SUPPORT_TOL * np.sqrt(ones)] = np.inf  # ‖q‖ = √(cells in the group)
        unit.append(u)

    def answer(x: np.ndarray) -> np.ndarray:
        return exact_answers(M, np.asarray(x, dtype=float).reshape(N), caller=caller, integer=exact)

    def finish(y: np.ndarray) -> list:
        return set_sums(W, (F @ y).reshape(W.shape))

    d_in = charged_sensitivity(upper_sensitivity(Delta, caller=caller), "l2", *M.shape, exact=exact)
    return answer, finish, unit, Delta, d_in, M.shape[0]
