"""The exact largest variance over all ranges of a stream strategy, for the n where O(n³) is cheap.

Notation: see README. On all ranges the O(n log n) reports cannot give the largest variance of every strategy: a
range [i, j] is the difference of two prefix sums, whose variance needs their covariance. So a tree reported the
proven bound (2·max_t σₜ)², 2.3–2.7× the truth, a row-scaled Toeplitz strategy max_L V(L)/min y
(:func:`mmopt.toeplitz.error.decoder_max`), and the weighted square root NaN (now exact to 4,096 cells by its own
O(n²) pass, :func:`mmopt.toeplitz.weighted.inverse_gram_columns`, then that bound). A NaN compares False both ways,
so a check like ``max_variance > target`` passed without a word; the dense workload, which the report's docstring
named as the remedy, took the same stream path (an auditor's probe). Up to :data:`EXACT_MAX_N` cells the value is
now exact, from the dense M = (AᵀA)⁻¹ = R⁻¹R⁻ᵀ (A = QR): with P = L M Lᵀ the prefix sums' covariance (L the
lower-triangular ones), Var[i, j] = P[j, j] + P[i−1, i−1] − 2·P[i−1, j], scaled by c·Δ².
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg as sla

#: Up to this many cells an all-ranges report's largest variance is computed exactly (a QR, a triangular inverse
#: and a product: 0.15 s at 1,024 cells with one BLAS thread, 8n² bytes a matrix).
EXACT_MAX_N = 1024

#: The largest condition number of A (1-norm estimate) for which the dense figures count as exact: their relative
#: error is about cond(A)·eps, here ≤ ~2·10⁻⁸.
MAX_CONDITION = 1e8


def unit_range_variances(A: np.ndarray) -> np.ndarray | None:
    """V[i, j] = q M qᵀ for the range q = 1_[i, j] (i ≤ j; −inf below the diagonal), M = (AᵀA)⁻¹, or None when A
    is not of full column rank to working precision or too ill-conditioned for the figures to be exact.

    From A = QR, not the normal equations: M = R⁻¹R⁻ᵀ, so the prefix sums' covariance is T Tᵀ with T the running
    row sums of R⁻¹, accurate to ~cond(A)·eps where a Cholesky of AᵀA was off by cond(A)²·eps (2–9 % at
    cond ≈ 4·10⁷ on a row-scaled Toeplitz strategy, below a variance it attains; a helper's audit). A condition
    number past :data:`MAX_CONDITION` gives None.

    >>> V = unit_range_variances(np.eye(3))        # the identity: a range's variance is its length
    >>> V[0, 2], V[1, 1], V[2, 0]
    (np.float64(3.0), np.float64(1.0), np.float64(-inf))
    """
    n = A.shape[1]
    if A.shape[0] < n:  # fewer rows than cells: not of full column rank
        return None
    R = sla.qr(A, mode="r", check_finite=False)[0][:n]
    rcond = sla.lapack.dtrcon(R, norm="1", uplo="U")[0] if n else 1.0
    if not rcond > 1.0 / MAX_CONDITION:  # NaN too
        return None
    T = np.cumsum(sla.solve_triangular(R, np.eye(n), lower=False, check_finite=False), axis=0)
    Q = np.zeros((n + 1, n + 1))
    Q[1:, 1:] = T @ T.T  # Q[s, t]: the covariance of the prefixes of s and t cells
    d = np.diagonal(Q).copy()
    V = d[None, 1:] + d[:n, None] - 2.0 * Q[:n, 1:]
    V[np.tril_indices(n, -1)] = -np.inf
    return V


def range_maximum(columns, n: int, block: int = 512) -> tuple[float, tuple[int, int]]:
    """The largest q M qᵀ over the ranges q = 1_[l, u] and its range (l, u), 0-based and inclusive, from the
    columns of M = (AᵀA)⁻¹ (``columns(lo, hi)``: M[:, lo:hi]), in O(n²) time and O(n·block) memory, no n×n matrix:
    V(l, u) = V(l, u − 1) + 2 Σ_{l ≤ i < u} M_iu + M_uu, one suffix sum per u. For strategies whose columns cost
    O(n) each (the weighted square root's closed form, a tree's solve), where the dense path stops at
    :data:`EXACT_MAX_N` cells.

    >>> range_maximum(lambda lo, hi: np.eye(3)[:, lo:hi], 3)   # the identity: the longest range, all 3 cells
    (3.0, (0, 2))
    """
    V = np.empty(n)
    worst, query = -np.inf, (0, 0)
    for lo in range(0, n, block):
        C = columns(lo, min(n, lo + block))
        for u in range(lo, lo + C.shape[1]):
            col = C[:u + 1, u - lo]
            V[:u] += 2.0 * np.cumsum(col[-2::-1])[::-1] + col[-1]
            V[u] = col[-1]
            first = int(np.argmax(V[:u + 1]))
            if V[first] > worst:
                worst, query = float(V[first]), (first, u)
    return worst, query


def all_ranges(prefixes: np.ndarray, columns, n: int, limit: int) -> tuple[float, tuple[int, int], bool, float | None]:
    """(largest variance, its range, exact?, proven upper bound or None) over all ranges at unit scale, for a
    stream report: :func:`range_maximum` from ``columns`` up to ``limit`` cells; past it (or without ``columns``)
    the largest of the ``prefixes``' variances (a prefix is a range: attained) and the bound 4·max_t σₜ², a range
    being the difference of two prefixes ((σ_b + σ_{a−1})² ≤ 4·max σ²). The tree's and the weighted square root's.

    >>> all_ranges(np.array([1.0, 2.0, 3.0]), lambda lo, hi: np.eye(3)[:, lo:hi], 3, limit=3)
    (3.0, (0, 2), True, None)
    >>> all_ranges(np.array([1.0, 2.0, 3.0]), None, 3, limit=3)
    (3.0, (0, 2), False, 12.0)
    """
    if columns is not None and n <= limit:
        worst, query = range_maximum(columns, n)
        return worst, query, True, None
    t = int(np.argmax(prefixes))
    return float(prefixes[t]), (0, t), False, 4.0 * float(prefixes[t])


def exact_all_ranges(report, strategy, kind: str):
    """``report`` with the exact largest variance over all ranges when it held a bound or NaN and n ≤
    :data:`EXACT_MAX_N`; else ``report`` unchanged. The strategy's dense A must be that of ``report``'s Δ.

    A is scaled by a power of two first (exactly; M by its inverse square), as :func:`mmopt.toeplitz.evaluate`
    does: coefficients near 1e±154 made AᵀA or Δ² under- or overflow, and a NaN went out labelled exact (a helper's
    audit). The value replaces the report's only where it lies between the variance the report attained and its
    proven bound (up to the round-off above); else the report is kept."""
    if report.max_variance_exact or kind != "all_range" or report.n > EXACT_MAX_N:
        return report
    A = np.asarray(strategy.to_dense(), dtype=float)
    top = float(np.max(np.abs(A))) if A.size else 0.0
    if not (np.isfinite(top) and top > 0):
        return report
    e = int(np.frexp(top)[1])
    V = unit_range_variances(np.ldexp(A, -e))
    if V is None:  # not of full column rank to working precision, or too ill-conditioned: keep the bound
        return report
    i, j = np.unravel_index(int(np.argmax(V)), V.shape)
    worst = float(report.variance_factor * float(np.ldexp(report.sensitivity, -e)) ** 2 * V[i, j])
    lo, hi = report.max_variance, report.max_variance_bound
    slack = 1e-6  # ≫ cond(A)·eps ≤ 2·10⁻⁸
    if not np.isfinite(worst) or (np.isfinite(lo) and worst < lo * (1 - slack)) or (
            hi is not None and worst > hi * (1 + slack)):
        return report
    return dataclasses.replace(report, max_variance=worst, max_variance_query=(int(i), int(j)),
                               max_variance_exact=True, max_variance_bound=None)
