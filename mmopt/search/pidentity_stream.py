"""A p-Identity strategy A = [I; Θ]D⁻¹ on a stream workload past the dense size: measure, estimate and report in
O(p²n + p³), nothing n×n.

Notation: see README and :mod:`mmopt.search.pidentity`. With d = 1 + 1ᵀ|Θ| (so Δ₁ = 1) and K = I_p + ΘΘᵀ = LLᵀ,

    X = AᵀA = D⁻¹(I + ΘᵀΘ)D⁻¹,    (I + ΘᵀΘ)⁻¹ = I − ΘᵀK⁻¹Θ   (Woodbury),

so the least-squares estimate of y = (y₁, y₂) is x̂ = X⁻¹Aᵀy = D(u − ΘᵀK⁻¹Θu), u = y₁ + Θᵀy₂, and a query q has

    q X⁻¹ qᵀ = ‖Dq‖² − ‖L⁻¹ΘDq‖²,

which for the prefix 1_[0, t] is a cumulative sum of d² less the squared norm of L⁻¹ times the cumulative sum of
ΘD's columns up to t. Why: ``optimize(mmopt.toeplitz.prefix(n), method="min_error")`` returns such a strategy, and
past 4,096 cells release, evaluate and the answers tables refused it (the dense twin is n×n), so ``auto`` returned
the weighted tree at 9.44× the bound on prefix(5,000) where the search reaches 6.7× (:mod:`mmopt.auto.line`).
The subtraction loses digits when Θ's rows dominate: a variance that keeps fewer than 8 of them raises
:class:`mmopt.error.NumericalError`, as :func:`mmopt.search.pidentity.true_error` does for the total.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from mmopt._base import validation as v
from mmopt.error import NumericalError
from mmopt.search._local_objectives import _CANCELLATION_MAX

__all__ = ["apply", "column_scale", "estimate", "exact_apply", "factor",
           "prefix_variances", "query_variances", "sensitivity"]

#: Columns of ΘD summed at a time for the prefix variances (p × CHUNK floats in memory, not p × n).
CHUNK = 4096


def column_scale(theta: np.ndarray) -> np.ndarray:
    """d = 1 + 1ᵀ|Θ|, the column L1 norms of [I; Θ]."""
    return 1.0 + np.abs(theta).sum(axis=0)


def factor(theta: np.ndarray, *, check_finite: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(d, L): the column scale d and the Cholesky factor of K = I + ΘΘᵀ (lower). The search's objective passes
    ``check_finite=False`` (it catches the LinAlgError of an overflowed K and steps back)."""
    K = theta @ theta.T
    K[np.diag_indices_from(K)] += 1.0
    return column_scale(theta), scipy.linalg.cholesky(K, lower=True, check_finite=check_finite)


def sensitivity(theta: np.ndarray, norm: str) -> float:
    """Δ₁ = 1 (each column of [I; Θ] divided by its own L1 norm); Δ₂ = max_j ‖(e_j; Θe_j)‖₂ / d_j."""
    if norm == "l1":
        return 1.0
    return float(np.max(np.sqrt(1.0 + np.einsum("ij,ij->j", theta, theta)) / column_scale(theta)))


def apply(theta: np.ndarray, x) -> np.ndarray:
    """A x = (x/d, Θ(x/d)): the n + p answers the release measures."""
    scaled = np.asarray(x, dtype=float) / column_scale(theta)
    return np.concatenate([scaled, theta @ scaled])


def exact_apply(theta: np.ndarray, x, *, caller: str) -> np.ndarray:
    """:func:`apply` for a release, its rounding bounded for the privacy proof: each x_j/d_j is one correctly rounded
    division, and Θ times those is correctly rounded (:func:`mmopt.dense.exact_answers.exact_answers`). So
    |ŷ − A x| ≤ u·|A x| + u·|A| x + η entrywise, and applying the dense charge twice
    (:func:`mmopt.dense.exact_answers.charged_sensitivity`, Δ(1 + c)² ≥ Δ(1 + 2c)) covers neighbours of a histogram of
    at most MAX_RECORDS records. ``theta`` must have passed :func:`mmopt.dense.exact_answers.check_strategy` (so no
    refusal depends on the counts)."""
    from mmopt.dense.exact_answers import exact_answers
    scaled = np.asarray(x, dtype=float) / column_scale(theta)
    return np.concatenate([scaled, exact_answers(theta, scaled, caller=caller, integer=False)])


def estimate(theta: np.ndarray, y) -> np.ndarray:
    """x̂ = (AᵀA)⁻¹Aᵀy = D(u − ΘᵀK⁻¹Θu), u = y₁ + Θᵀy₂ (module docstring)."""
    n = theta.shape[1]
    y = np.asarray(y, dtype=float)
    d, L = factor(theta)
    u = y[:n] + theta.T @ y[n:]
    return d * (u - theta.T @ scipy.linalg.cho_solve((L, True), theta @ u))


def query_variances(theta: np.ndarray, Q: np.ndarray, caller: str) -> np.ndarray:
    """q X⁻¹ qᵀ for every row q of ``Q`` (queries × n), O(p·n·queries + p²·queries)."""
    d, L = factor(theta)
    DQ = np.asarray(Q, dtype=float) * d
    R = scipy.linalg.solve_triangular(L, theta @ DQ.T, lower=True)
    return _difference(np.einsum("ij,ij->i", DQ, DQ), np.einsum("ij,ij->j", R, R), caller)


def prefix_variances(theta: np.ndarray, caller: str) -> np.ndarray:
    """q X⁻¹ qᵀ for every prefix q = 1_[0, t], t = 0..n−1, by running sums of ΘD's columns, :data:`CHUNK` at a
    time (module docstring)."""
    p, n = theta.shape
    d, L = factor(theta)
    v.check_allocation(p * min(n, CHUNK) * 2, what=f"{p:,} × {min(n, CHUNK):,} running sums", caller=caller)
    outer = np.cumsum(d * d)
    inner = np.empty(n)
    running = np.zeros(p)
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        S = np.cumsum(theta[:, lo:hi] * d[lo:hi], axis=1) + running[:, None]
        running = S[:, -1].copy()
        R = scipy.linalg.solve_triangular(L, S, lower=True)
        inner[lo:hi] = np.einsum("ij,ij->j", R, R)
    return _difference(outer, inner, caller)


def _difference(outer: np.ndarray, inner: np.ndarray, caller: str) -> np.ndarray:
    """outer − inner, each entry > 0 with at least 8 digits kept, else NumericalError naming ``caller``."""
    out = outer - inner
    bad = ~(np.isfinite(out) & (out > 0.0) & (outer <= _CANCELLATION_MAX * out))
    if np.any(bad):
        i = int(np.argmax(bad))
        raise NumericalError(f"{caller}: a query's variance under the p-Identity strategy, {outer[i]:.6g} − "
                             f"{inner[i]:.6g}, keeps fewer than 8 digits in float64 ({int(bad.sum()):,} queries).")
    return out
