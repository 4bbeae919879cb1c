"""Certified lower bounds on the (ε,δ) error of every strategy for the prefix workload, at any n, in O(n log n).

Notation: see README. W is the n×n prefix matrix (lower-triangular ones), G = WᵀW. Its SVD is known in closed
form: W Wᵀ = [min(i, j)]_{i,j=1..n} has eigenvectors u_k(i) = 2/√(2n+1)·sin(θ_k i), θ_k = (2k−1)π/(2n+1),
and singular values σ_k = 1/(2 sin(θ_k/2)), k = 1..n; WᵀW is the same matrix with the index order reversed.

Two bounds on OPT = min over strategies of Δ₂(A)²·tr(G (AᵀA)⁺) (Program 5.2 of the paper, unit privacy):

* the SVD bound (Σ σ_k)²/n (Thm 5.26; :func:`mmopt.svd_bound` computes it densely);
* the *diagonal* bound Σ_i h_i², h = diag(G^{1/2}). The L2 program's dual is OPT = max over weights u ≥ 0,
  Σu = 1, of ‖W D_u^{1/2}‖_*² (Lagrangian of min tr(G X⁻¹) s.t. diag X ≤ 1); and ‖M‖_* ≥ tr(Qᵀ M) for every
  Q with ‖Q‖₂ ≤ 1. With Q = U Vᵀ (W = UΣVᵀ) this gives Σ_i h_i √u_i, maximised at u_i ∝ h_i²: OPT ≥ Σ h_i².
  By Cauchy–Schwarz it is never below the SVD bound (u uniform). Both hold for Laplace noise too (Δ₁ ≥ Δ₂).

h_i = (2/(2n+1))·Σ_k σ_k (1 − cos(2θ_k i)) needs no FFT: cos(2(m+1)φ) − cos(2mφ) = −2 sin((2m+1)φ) sin φ and
σ_k = 1/(2 sin φ_k), φ_k = θ_k/2, so h_i = (2/(2n+1))·T_{2i} with T_m = Σ_{j<m} S(2j+1), S(j) = Σ_k sin(jφ_k) in
closed form (:func:`sine_sums`, :func:`half_sums`): a running sum of positive terms, O(n) and accurate to the last
digits. The FFT of length 2n+1 it replaces (a large prime factor away from a fast length, a Bluestein transform)
took 10 s at n = 10⁷ and lost h_1 to cancellation against Σσ.

All ranges: G_R(i, j) = min(i, j)(n + 1 − max(i, j)) (1-indexed) is (n+1)·L⁻¹ with L = tridiag(−1, 2, −1), the
Dirichlet Laplacian, whose eigenvectors are the DST-I sines sin(πik/(n+1)) with eigenvalues 4 sin²(πk/(2(n+1))).
So σ_k(W_R) = √(n+1)/(2 sin(πk/(2(n+1)))) and h_i = (Σ_k σ_k − Σ_k σ_k cos(2πik/(n+1)))/(n+1): the same two
bounds, in closed form, for all n(n+1)/2 ranges, and the same running sum (of terms of both signs here).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt.toeplitz.strategies import check_n

__all__ = ["PrefixBound", "all_range_bound", "diagonal_bound", "gram_sqrt_diagonal", "lower_bound", "prefix_bound",
           "prefix_singular_values", "range_singular_values", "svd_bound"]

# Round-off allowance (relative) taken off the computed bound so that it stays a bound: 64·n·u, u = 2⁻⁵³, is
# above the error of the running sums it is built from (2n terms, positive for prefix sums; measured against
# 40-digit sums below 10⁻² of n·u for both workloads, tests/test_toeplitz_bound.py).
_ROUNDING = 64 * np.finfo(float).eps


def prefix_singular_values(n: int) -> np.ndarray:
    """σ_k(W) = 1/(2 sin((2k−1)π/(2(2n+1)))), k = 1..n, in decreasing order.

    Examples
    --------
    >>> np.round(prefix_singular_values(2), 6).tolist()     # the golden ratio and its inverse
    [1.618034, 0.618034]
    """
    n = check_n(n, "prefix_singular_values")
    k = np.arange(1, n + 1, dtype=float)
    return 0.5 / np.sin((2 * k - 1) * np.pi / (2 * (2 * n + 1)))


def range_singular_values(n: int) -> np.ndarray:
    """σ_k(W_R) = √(n+1)/(2 sin(πk/(2(n+1)))), k = 1..n: the all-range workload's singular values, decreasing.

    Examples
    --------
    >>> np.round(range_singular_values(2) ** 2, 6).tolist()     # eigenvalues of [[2, 1], [1, 2]]
    [3.0, 1.0]
    """
    n = check_n(n, "range_singular_values")
    k = np.arange(1, n + 1, dtype=float)
    return np.sqrt(n + 1.0) * 0.5 / np.sin(k * np.pi / (2 * (n + 1)))


def sin_pi(r: np.ndarray, D: int) -> np.ndarray:
    """sin(πr/D) for integers r (int64), to full relative precision: the argument is reduced in integers to
    [0, π/2] first (a float argument near π or past it would keep only its absolute error of u·π)."""
    r = np.mod(r, 2 * D)
    sign = np.where(r > D, -1.0, 1.0)
    r = np.where(r > D, r - D, r)  # sin(π + x) = −sin x
    return sign * np.sin(np.pi * np.minimum(r, D - r) / D)  # sin(π − x) = sin x


def sine_sums(kind: str, n: int, j: np.ndarray) -> np.ndarray:
    """S(j) = Σ_{k=1..n} sin(j φ_k) for odd integers j, in closed form (sums of sines along an arithmetic
    progression), where σ_k = c/(2 sin φ_k) are the workload's singular values:

    * prefix: φ_k = (2k−1)π/D, D = 2(2n+1), c = 1: S(j) = sin²(njπ/D)/sin(jπ/D);
    * all ranges: φ_k = kπ/D, D = 2(n+1), c = √(n+1): S(j) = sin(njπ/(2D))·sin((n+1)jπ/(2D))/sin(jπ/(2D)).

    No denominator vanishes for odd j.

    >>> n, j = 5, np.array([1, 3, -7, 25])
    >>> k = np.arange(1, n + 1)
    >>> direct = np.sin(np.outer(j, 2 * k - 1) * np.pi / (2 * (2 * n + 1))).sum(axis=1)
    >>> bool(np.allclose(sine_sums("prefix", n, j), direct))
    True
    >>> bool(np.allclose(sine_sums("all_range", n, j), np.sin(np.outer(j, k) * np.pi / (2 * (n + 1))).sum(axis=1)))
    True
    """
    j = np.asarray(j, dtype=np.int64)
    if kind == "prefix":
        D = 2 * (2 * n + 1)
        return sin_pi(n * j, D) ** 2 / sin_pi(j, D)
    D = 4 * (n + 1)
    return sin_pi(n * j, D) * sin_pi((n + 1) * j, D) / sin_pi(j, D)


def half_sums(kind: str, n: int, m: int) -> np.ndarray:
    """T_i = Σ_{j<i} S(2j+1), i = 0..m (T_0 = 0; S of :func:`sine_sums`), so that Σ_k σ_k cos(2iφ_k) =
    Σ_k σ_k − c·T_i: cos(2(i+1)φ) − cos(2iφ) = −2 sin((2i+1)φ) sin φ telescopes against σ_k = c/(2 sin φ_k).

    >>> n, i = 4, np.arange(6)
    >>> phi = (2 * np.arange(1, n + 1) - 1) * np.pi / (2 * (2 * n + 1))
    >>> direct = (np.cos(2 * np.outer(i, phi)) / (2 * np.sin(phi))).sum(axis=1)
    >>> bool(np.allclose(prefix_singular_values(n).sum() - half_sums("prefix", n, 5), direct))
    True
    """
    return np.concatenate([[0.0], np.cumsum(sine_sums(kind, n, 2 * np.arange(m, dtype=np.int64) + 1))])


def svd_bound(n: int, kind: str = "prefix") -> float:
    """(Σ_k σ_k)²/n: the SVD bound (Thm 5.26) for the prefix (or all-range) workload at unit privacy (total)."""
    caller = "toeplitz.svd_bound"
    if hasattr(n, "kind") and hasattr(n, "domain_size"):  # a StreamWorkload: mmopt.svd_bound takes those
        raise TypeError(f"The 'n' parameter of {caller} must be an integer, the number of cells (with 'kind'). Got "
                        f"a {type(n).__name__}: pass svd_bound({n.domain_size}, {n.kind!r}), or "
                        "mmopt.svd_bound(workload) for the workload itself.")
    n = check_n(n, caller)  # here, not in the singular values' helpers, which named themselves
    kind = v.check_choice(kind, name="kind", caller=caller, choices=("prefix", "all_range"))
    s = prefix_singular_values(n) if kind == "prefix" else range_singular_values(n)
    return float(s.sum() ** 2 / n)


def gram_sqrt_diagonal(n: int, kind: str = "prefix") -> np.ndarray:
    """h = diag((WᵀW)^{1/2}) for the n×n prefix matrix W (or the all-range workload), by one FFT (O(n log n)).

    Examples
    --------
    >>> import scipy.linalg
    >>> W = np.tril(np.ones((5, 5)))
    >>> bool(np.allclose(gram_sqrt_diagonal(5), np.diag(scipy.linalg.sqrtm(W.T @ W).real)))
    True
    """
    n = check_n(n, "gram_sqrt_diagonal")
    kind = v.check_choice(kind, name="kind", caller="gram_sqrt_diagonal", choices=("prefix", "all_range"))
    T = half_sums(kind, n, 2 * n)[2::2]  # the cosines at 2θ_k i = 2·(2i)·φ_k (module docstring), i = 1..n
    if kind == "all_range":
        return T * (np.sqrt(n + 1.0) / (n + 1.0))
    return ((2.0 / (2 * n + 1)) * T)[::-1].copy()  # rows 1..n of (W Wᵀ)^{1/2}; WᵀW = J (W Wᵀ) J


@dataclass(frozen=True)
class PrefixBound:
    """Lower bounds on every strategy's total error for the prefix (or all-range) workload (unit privacy).

    Attributes
    ----------
    value : float
        The best certified bound: the diagonal bound less a round-off allowance of 64·n·u (relative).
    diagonal : float
        Σ h_i², as computed.
    svd : float
        The SVD bound (Σσ)²/n, as computed.
    n : int
    workload : {"prefix", "all_range"}
    """

    value: float
    diagonal: float
    svd: float
    n: int
    workload: str = "prefix"


def diagonal_bound(n: int, kind: str = "prefix") -> float:
    """Σ_i h_i², h = diag((WᵀW)^{1/2}): a lower bound on OPT at least as large as the SVD bound."""
    h = gram_sqrt_diagonal(n, kind)
    return float(h @ h)


def prefix_bound(n: int) -> PrefixBound:
    """Both bounds for the n×n prefix workload and the certified value (see the module docstring).

    Examples
    --------
    >>> b = prefix_bound(1024)
    >>> bool(b.svd < b.value < b.diagonal), float(round(b.diagonal / b.svd, 4))
    (True, 1.0291)
    """
    return _bound(check_n(n, "prefix_bound"), "prefix")


def all_range_bound(n: int) -> PrefixBound:
    """Both bounds for all n(n+1)/2 ranges over n cells, and the certified value.

    Examples
    --------
    >>> b = all_range_bound(256)
    >>> bool(b.svd < b.value < b.diagonal), b.workload
    (True, 'all_range')
    """
    return _bound(check_n(n, "all_range_bound"), "all_range")


@functools.lru_cache(maxsize=16)
def _bound(n: int, kind: str) -> PrefixBound:
    """The bounds of a checked n, once per (n, kind): auto and each candidate it scores ask for them, three times in
    one optimize call, and they take 3 CPU s at n = 10⁷ (10 s when the diagonal bound was a DFT of length 2n + 1,
    pocketfft's Bluestein there). PrefixBound is frozen, so sharing it is safe."""
    diagonal, svd = diagonal_bound(n, kind), svd_bound(n, kind)
    return PrefixBound(diagonal * (1 - _ROUNDING * n), diagonal, svd, n, kind)


def lower_bound(workload) -> PrefixBound:
    """The bounds for a :class:`~mmopt.toeplitz.StreamWorkload` (prefix or all ranges), or mmopt's dense
    ``workload.prefix(n)`` / ``all_range(n)`` (an AttributeError before)."""
    from mmopt.toeplitz.error import as_stream_workload  # lazy: error builds on this module's bounds
    workload = as_stream_workload(workload, "mmopt.toeplitz.lower_bound")
    return prefix_bound(workload.n) if workload.kind == "prefix" else all_range_bound(workload.n)
