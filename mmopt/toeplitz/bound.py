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

h_i = (2/(2n+1))·Σ_k σ_k (1 − cos(2θ_k i)) is one FFT of length 2n+1.

All ranges: G_R(i, j) = min(i, j)(n + 1 − max(i, j)) (1-indexed) is (n+1)·L⁻¹ with L = tridiag(−1, 2, −1), the
Dirichlet Laplacian, whose eigenvectors are the DST-I sines sin(πik/(n+1)) with eigenvalues 4 sin²(πk/(2(n+1))).
So σ_k(W_R) = √(n+1)/(2 sin(πk/(2(n+1)))) and h_i = (Σ_k σ_k − Σ_k σ_k cos(2πik/(n+1)))/(n+1): the same two
bounds, in closed form, for all n(n+1)/2 ranges.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft

from mmopt._base import validation as v
from mmopt.toeplitz.strategies import check_n

__all__ = ["PrefixBound", "all_range_bound", "diagonal_bound", "gram_sqrt_diagonal", "lower_bound", "prefix_bound",
           "prefix_singular_values", "range_singular_values", "svd_bound"]

# Round-off allowance (relative) taken off the computed bound so that it stays a bound: 64·n·u, u = 2⁻⁵³, is
# far above the FFT's O(u·log n) relative error on the sums it is built from.
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


def svd_bound(n: int, kind: str = "prefix") -> float:
    """(Σ_k σ_k)²/n: the SVD bound (Thm 5.26) for the prefix (or all-range) workload at unit privacy (total)."""
    kind = v.check_choice(kind, name="kind", caller="svd_bound", choices=("prefix", "all_range"))
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
    if kind == "all_range":
        s = range_singular_values(n)
        f = np.concatenate([[0.0], s])  # f_k = σ_k, k = 1..n, on a DFT of length n+1
        return (s.sum() - sfft.fft(f).real[1:n + 1]) / (n + 1.0)
    s = prefix_singular_values(n)
    N = 2 * n + 1
    f = np.zeros(N)
    f[1:2 * n:2] = s  # f_{2k−1} = σ_k, so Σ_j f_j cos(2π j i/N) = Σ_k σ_k cos((2k−1)·2πi/N) = Σ_k σ_k cos(2θ_k i)
    cos_sums = sfft.rfft(f)[1:n + 1].real  # frequencies i = 1..n; rfft's sign convention leaves the real part
    h_rows = (2.0 / N) * (s.sum() - cos_sums)  # diag of (W Wᵀ)^{1/2}, rows 1..n
    return h_rows[::-1].copy()  # WᵀW = J (W Wᵀ) J


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
    """The bounds of a checked n, once per (n, kind): auto and each candidate it scores ask for them, and the DFT of
    length 2n + 1 behind the diagonal bound takes 10 s at n = 10⁷ (2n + 1 = 3·7·952,381: pocketfft's Bluestein),
    three times in one optimize call there. PrefixBound is frozen, so sharing it is safe."""
    diagonal, svd = diagonal_bound(n, kind), svd_bound(n, kind)
    return PrefixBound(diagonal * (1 - _ROUNDING * n), diagonal, svd, n, kind)


def lower_bound(workload) -> PrefixBound:
    """The bounds for a :class:`~mmopt.toeplitz.StreamWorkload` (prefix or all ranges), or mmopt's dense
    ``workload.prefix(n)`` / ``all_range(n)`` (an AttributeError before)."""
    from mmopt.toeplitz.error import as_stream_workload  # lazy: error builds on this module's bounds
    workload = as_stream_workload(workload, "mmopt.toeplitz.lower_bound")
    return prefix_bound(workload.n) if workload.kind == "prefix" else all_range_bound(workload.n)
