"""The exact largest variance over all ranges of a stream strategy, for the n where O(n³) is cheap.

Notation: see README. On all ranges the O(n log n) reports cannot give the largest variance of every strategy: a
range [i, j] is the difference of two prefix sums, whose variance needs their covariance. So a row-scaled Toeplitz
strategy and a tree report the proven bound (2·max_t σₜ)², 2.3–2.7× the truth on trees, and the weighted square
root reported NaN (now exact to 4,096 cells by its own O(n²) pass, :func:`mmopt.toeplitz.weighted.inverse_gram_columns`,
then that bound). A NaN compares False both ways, so a check like ``max_variance > target`` passed without a word;
the dense workload, which the report's docstring named as the remedy, took the same stream path (an auditor's
probe). Up to :data:`EXACT_MAX_N` cells the value is now exact, from the dense M = (AᵀA)⁻¹: with P = L M Lᵀ the
prefix sums' covariance (L the lower-triangular ones; two cumulative sums of M), Var[i, j] = P[j, j] + P[i−1, i−1]
− 2·P[i−1, j], scaled by c·Δ².
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg as sla

#: Up to this many cells an all-ranges report's largest variance is computed exactly (one n×n inverse and two
#: cumulative sums: ~0.1 s at 1,024 cells with one BLAS thread, 8n² bytes a matrix).
EXACT_MAX_N = 1024


def unit_range_variances(A: np.ndarray) -> np.ndarray:
    """V[i, j] = q M qᵀ for the range q = 1_[i, j] (i ≤ j; −inf below the diagonal), M = (AᵀA)⁻¹ (A of full
    column rank).

    >>> V = unit_range_variances(np.eye(3))        # the identity: a range's variance is its length
    >>> V[0, 2], V[1, 1], V[2, 0]
    (np.float64(3.0), np.float64(1.0), np.float64(-inf))
    """
    n = A.shape[1]
    M = sla.cho_solve(sla.cho_factor(A.T @ A, lower=True), np.eye(n))
    Q = np.zeros((n + 1, n + 1))
    Q[1:, 1:] = np.cumsum(np.cumsum(M, axis=0), axis=1)  # Q[s, t]: the covariance of the prefixes of s and t cells
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
    :data:`EXACT_MAX_N`; else ``report`` unchanged. The strategy's dense A must be that of ``report``'s Δ."""
    if report.max_variance_exact or kind != "all_range" or report.n > EXACT_MAX_N:
        return report
    try:
        V = unit_range_variances(np.asarray(strategy.to_dense(), dtype=float))
    except (np.linalg.LinAlgError, ValueError):  # not of full column rank to working precision: keep the bound
        return report
    i, j = np.unravel_index(int(np.argmax(V)), V.shape)
    scale = report.variance_factor * report.sensitivity ** 2
    return dataclasses.replace(report, max_variance=float(scale * V[i, j]), max_variance_query=(int(i), int(j)),
                               max_variance_exact=True, max_variance_bound=None)
