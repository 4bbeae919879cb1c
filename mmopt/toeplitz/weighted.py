"""The weighted square root A = G^{1/4} E⁻¹, E = diag(h)^{1/2}, h = diag(G^{1/2}): the strategy paired with the
certificate of :mod:`mmopt.toeplitz.bound`, with its exact error at any n in O(n log² n).

Notation: see README and :mod:`mmopt.toeplitz.bound`. The bound's dual weights are u ∝ h²; the L2 program's
optimum for weights u is X = D^{−1/2}(D^{1/2} G D^{1/2})^{1/2} D^{−1/2} (D = diag u). Replacing the middle factor
by D^{1/4} G^{1/2} D^{1/4} gives X = AᵀA = E⁻¹ G^{1/2} E⁻¹, whose diagonal is h_i/h_i = 1: every column of A has
unit norm (Δ₂ = 1) and the error is tr(G X⁻¹) = Σ_{ij} G_ij (G^{−1/2})_ij e_i e_j, e = √h. Measured against the
dense certified optimum (mmopt's l2_approx): 1.003× on prefix(1024), 1.0001× on all_range(256).

Both Grams are diagonalised by sine transforms, so f(G) = T(a) − H(a) (Toeplitz minus Hankel, 1-indexed
f(G)_ij = a(i − j) − a(i + j)) with a one FFT away:

* prefix, in the reversed frame M = J G J = [min(i, j)]: a(m) = (2/(2n+1)) Σ_k f(σ_k²) cos((2k−1)mπ/(2n+1));
* all ranges, G_R = (n+1)·L⁻¹ (L the Dirichlet Laplacian): a(m) = (1/(n+1)) Σ_k f(σ_k²) cos(πkm/(n+1)).

The weights G_ij are α_i β_j for i ≤ j (min(i, j); min(i, j)(n+1−max(i, j))), so the error needs only
Σ_{j>i} K_ij q_j for K = G^{−1/2}: a triangular Toeplitz product (FFT) and a triangular Hankel product
(divide and conquer, :mod:`mmopt.toeplitz._triangular`). The prefix queries' variances are tail sums of the
same terms. The strategy is not causal (not lower triangular): it is for offline release, not streaming.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft
from scipy.signal import fftconvolve as sfft_convolve

from mmopt._base import validation as v
from mmopt.toeplitz import _triangular, bound
from mmopt.toeplitz.error import StreamWorkload, ToeplitzErrorReport, as_stream_workload
from mmopt.toeplitz.range_variance import all_ranges
from mmopt.toeplitz.strategies import check_n

__all__ = ["RANGE_EXACT_MAX_N", "WeightedSqrtStrategy", "evaluate_weighted", "inverse_gram_columns",
           "prefix_variances", "weighted_sqrt"]

#: Up to this many cells the all-ranges report's largest variance is exact (:func:`inverse_gram_columns`: 0.10 CPU s at
#: 4,096 cells on one free core, 0.35 s on a busy one; O(n²), so 16,384 took 1.1–6.6 s, paid by every evaluation,
#: auto's candidates too, which price the strategy at O(n): the review of that change)
RANGE_EXACT_MAX_N = 4_096


@dataclass(frozen=True)
class WeightedSqrtStrategy:
    """A = G^{1/4}·diag(h)^{−1/2} for the workload ``workload`` (prefix or all ranges); stored as (kind, n)."""

    workload: StreamWorkload

    @property
    def n(self) -> int:
        return self.workload.n

    @property
    def domain_size(self) -> int:
        return self.workload.n

    @property
    def name(self) -> str:
        return "weighted_sqrt"

    def json_summary(self) -> dict:
        """The JSON summary :meth:`mmopt.OptimizeResult.to_dict` records (the strategy itself is not stored)."""
        return {"kind": "weighted_sqrt", "name": self.name, "shape": [self.n, self.n], "domain_shape": [self.n],
                "domain_size": self.n, "n_rows": self.n}

    def stream_report(self, W: StreamWorkload, privacy, norm, caller: str) -> ToeplitzErrorReport:
        """Its report for :func:`mmopt.toeplitz.evaluate`, at the budget's scale (Gaussian noise only: its Δ₁ is
        not computed)."""
        from mmopt.privacy import Privacy
        if self.workload != W:
            raise ValueError(f"{caller}: the weighted square root was built for {self.workload.kind}"
                             f"({self.n}); evaluate it on that workload, not {W.kind}({W.n}).")
        if privacy is not None and not isinstance(privacy, Privacy):
            raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy or None. "
                            f"Got {type(privacy).__name__} instead.")
        wanted = norm if norm is not None else (privacy.sensitivity_norm if privacy is not None else "l2")
        if wanted != "l2":
            raise ValueError(f"{caller}: the weighted square root is evaluated under Gaussian noise (L2 sensitivity) "
                             f"only. Got norm {wanted!r}; pass Privacy(epsilon, delta > 0).")
        r = evaluate_weighted(W)
        factor = 1.0 if privacy is None else privacy.variance_factor
        bound = None if r.max_variance_bound is None else factor * r.max_variance_bound
        return dataclasses.replace(r, variance_factor=factor, total_squared_error=factor * r.total_squared_error,
                                   max_variance=factor * r.max_variance, max_variance_bound=bound, privacy=privacy)

    def sensitivity(self, norm: str = "l2") -> float:
        """Δ₂ = 1: diag(AᵀA) = h/h (Δ₁ would need the dense A; it is not offered)."""
        v.check_choice(norm, name="norm", caller="WeightedSqrtStrategy.sensitivity", choices=("l2",))
        return 1.0

    def to_strategy(self):
        """A as a dense :class:`~mmopt.Strategy` (small n only, as :meth:`to_dense`)."""
        from mmopt.dense._strategy_core import Strategy
        return Strategy(self.to_dense(), self.name)

    def to_dense(self) -> np.ndarray:
        """A as an n×n array (small n only; refused past mmopt's allocation limit before allocating)."""
        n = self.n
        v.check_allocation(4 * n * n, what=f"the dense {n:,}×{n:,} weighted square root",
                           caller="WeightedSqrtStrategy.to_dense")
        i = np.arange(1, n + 1)
        lo, hi = np.minimum.outer(i, i), np.maximum.outer(i, i)
        G = (n - hi + 1.0) if self.workload.kind == "prefix" else lo * (n - hi + 1.0)
        lam, V = np.linalg.eigh(G)
        lam = np.maximum(lam, 0.0)
        h = np.diag((V * np.sqrt(lam)) @ V.T)
        return ((V * lam ** 0.25) @ V.T) / np.sqrt(h)[None, :]


def weighted_sqrt(workload) -> WeightedSqrtStrategy:
    """The weighted square root for ``workload`` (mmopt.toeplitz.prefix(n) / all_range(n), or the dense ones)."""
    return WeightedSqrtStrategy(as_stream_workload(workload, "weighted_sqrt"))


def spectral_sequence(kind: str, n: int, power: float) -> np.ndarray:
    """a(m), m = 0..2n+1, with G^power = T(a) − H(a) in the frame of the module docstring (one FFT; at
    power −1/2, a closed form in O(n)). G^{1/2}'s diagonal alone is :func:`mmopt.toeplitz.bound.gram_sqrt_diagonal`.

    >>> all(np.allclose(spectral_sequence(kind, 6, -0.5), _fft_sequence(kind, 6, -0.5))
    ...     for kind in ("prefix", "all_range"))
    True
    """
    if power == -0.5:
        # 1/σ_k = (2/c) sin φ_k (σ_k = c/(2 sin φ_k)), and 2 sin φ cos(2mφ) = sin((2m+1)φ) − sin((2m−1)φ): the sine
        # sums S of mmopt.toeplitz.bound (its module docstring). The DFT of length 2(2n+1) or 2(n+1) this replaces
        # is a Bluestein transform when that length has a large prime factor (6 s at n = 2·10⁶).
        c, scale = (1.0, 2.0 / (2 * n + 1)) if kind == "prefix" else (np.sqrt(n + 1.0), 1.0 / (n + 1))
        S = bound.sine_sums(kind, n, 2 * np.arange(-1, 2 * n + 2, dtype=np.int64) + 1)  # S(2m+1), m = −1..2n+1
        return (scale / c) * (S[1:] - S[:-1])
    return _fft_sequence(kind, n, power)


def _fft_sequence(kind: str, n: int, power: float) -> np.ndarray:
    """:func:`spectral_sequence` by its defining DFT, any power."""
    if kind == "prefix":
        lam = bound.prefix_singular_values(n) ** 2
        F = np.zeros(2 * (2 * n + 1))
        F[1:2 * n:2] = lam ** power
        return 2.0 / (2 * n + 1) * sfft.rfft(F).real[:2 * n + 2]
    mu = bound.range_singular_values(n) ** 2
    F = np.zeros(2 * (n + 1))  # cos(πkm/(n+1)) has period 2(n+1) in m: the full DFT gives m = 0..2n+1
    F[1:n + 1] = mu ** power
    return 1.0 / (n + 1) * sfft.fft(F).real


def _frame_diagonal(a: np.ndarray, n: int) -> np.ndarray:
    """diag(T(a) − H(a)) = a(0) − a(2i), i = 1..n, in the frame of the module docstring."""
    return a[0] - a[2 * np.arange(1, n + 1)]


def column_scale(kind: str, n: int) -> np.ndarray:
    """e = √diag(G^{1/2}) in cell order (E = diag(e): A = G^{1/4}E⁻¹ has unit columns)."""
    return np.sqrt(bound.gram_sqrt_diagonal(n, kind))


def apply_power(kind: str, n: int, power: float, x: np.ndarray) -> np.ndarray:
    """G^power x in O(n log n): (T(a) − H(a)) x in the frame, f_ij = a(|i−j|) − a(i+j) (1-indexed), reversed for
    prefix sums (M = J G J)."""
    a = spectral_sequence(kind, n, power)
    z = x[::-1] if kind == "prefix" else x
    sym = np.concatenate([a[n - 1:0:-1], a[:n]])  # a(|d|), d = −(n−1)…n−1
    toeplitz_part = sfft_convolve(z, sym)[n - 1:2 * n - 1]
    hankel_part = sfft_convolve(z[::-1], a[2:2 * n + 1])[n - 1:2 * n - 1]  # Σ_j a(i + j) z_j, i + j = 2…2n
    out = toeplitz_part - hankel_part
    return out[::-1] if kind == "prefix" else out


def _terms(kind: str, n: int) -> tuple[np.ndarray, ...]:
    """(e, K_ii, r, α, β, a) with r_i = Σ_{j>i} K_ij β_j e_j, 0-based arrays for 1-indexed i = 1..n, and a the
    spectral sequence of G^{-1/2} (K's entries in the frame)."""
    i = np.arange(1, n + 1, dtype=float)
    a_inv = spectral_sequence(kind, n, -0.5)
    e = column_scale(kind, n)
    e = e[::-1] if kind == "prefix" else e  # the frame's order (prefix reversed)
    K_diag = _frame_diagonal(a_inv, n)
    alpha, beta = (i, np.ones(n)) if kind == "prefix" else (i, n + 1.0 - i)
    q = beta * e
    return e, K_diag, _row_sums(a_inv, q), alpha, beta, a_inv


def _row_sums(a_inv: np.ndarray, q: np.ndarray) -> np.ndarray:
    """r_i = Σ_{j>i} K_ij q_j, K_{t+1, j+1} = a(j − t) − a(t + j + 2) for 0-based t < j."""
    return _triangular.upper_toeplitz(a_inv, q) - _triangular.upper_hankel(a_inv[2:], q)


def evaluate_weighted(workload) -> ToeplitzErrorReport:
    """Exact total error of the weighted square root on its workload (unit privacy, Δ₂ = 1), and for the
    prefix workload the largest query variance; O(n log² n) time and O(n) memory.

    For all ranges ``max_variance`` is exact up to :data:`RANGE_EXACT_MAX_N` cells (:func:`inverse_gram_columns`,
    O(n²) time), past them the largest prefix's variance (attained: a prefix is a range; ``max_variance_exact`` False)
    and ``max_variance_upper`` a proven upper bound, four times it, as the tree strategy's.

    Examples
    --------
    >>> from mmopt import toeplitz
    >>> r = evaluate_weighted(toeplitz.prefix(1024))
    >>> float(round(r.total_squared_error / toeplitz.prefix_bound(1024).value, 4))   # certified within 0.6 %
    1.0059
    """
    W = as_stream_workload(workload, "evaluate_weighted")
    n = W.n
    terms = _terms(W.kind, n)
    e, K_diag, r, alpha, beta, a_inv = terms
    diag_terms = alpha * beta * K_diag * e * e
    total = float(diag_terms.sum() + 2.0 * (alpha * e) @ r)
    if W.kind == "prefix":  # the prefixes themselves: exact
        V = _prefix_variances(terms)
        t = int(np.argmax(V))
        return ToeplitzErrorReport(W.name, "weighted_sqrt", n, W.n_queries, "l2", 1.0, 1.0, total, float(V[t]), (0, t))
    # All ranges are symmetric under reversing the cells (G and so e commute with it), so the prefix of t + 1 cells
    # has the variance of the frame's tail of t + 1: the prefix sums' tail sums with β = 1 (NaN before: not computed)
    worst, query, exact, bound = all_ranges(_prefix_variances((e, K_diag, _row_sums(a_inv, e))),
                                            functools.partial(inverse_gram_columns, a_inv, e), n, RANGE_EXACT_MAX_N)
    return ToeplitzErrorReport(W.name, "weighted_sqrt", n, W.n_queries, "l2", 1.0, 1.0, total, worst, query, exact,
                               max_variance_bound=bound)


def inverse_gram_columns(a_inv: np.ndarray, e: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """(AᵀA)⁻¹[:, lo:hi] of the weighted square root of all_range(n) (Δ₂ = 1), in closed form: (AᵀA)⁻¹ = E G^{−1/2} E,
    1-indexed entries e_i e_j (a(|i − j|) − a(i + j)) (module docstring; the frame is the cells' order), for the
    exact largest range variance (:func:`mmopt.toeplitz.range_variance.range_maximum`). Past 1,024 cells the report
    gave the proven bound 4·max_t V(0, t), four times the truth on every n measured (1,024 … 16,384; the largest
    range was all the cells), so an ε chosen to meet a variance target by that bound was twice the ε needed.
    Measured (one free core): the pass 0.10 s at 4,096 cells, 1.1 s at 16,384.

    >>> from mmopt.toeplitz import all_range
    >>> n = 40
    >>> A = weighted_sqrt(all_range(n)).to_dense()
    >>> M = inverse_gram_columns(spectral_sequence("all_range", n, -0.5), column_scale("all_range", n), 0, n)
    >>> bool(np.allclose(M, np.linalg.inv(A.T @ A), rtol=0, atol=1e-12))
    True
    """
    i = np.arange(1, e.size + 1)
    u = i[lo:hi]
    return e[:, None] * e[None, lo:hi] * (a_inv[np.abs(i[:, None] - u[None, :])] - a_inv[i[:, None] + u[None, :]])


def prefix_variances(n: int) -> np.ndarray:
    """q (AᵀA)⁻¹ qᵀ for every prefix q = 1_[0, t], t = 0..n−1, of the weighted square root of prefix(n) (Δ₂ = 1),
    O(n log² n): the tail sums of :func:`evaluate_weighted`'s terms (module docstring).

    >>> from mmopt.toeplitz import prefix
    >>> A = weighted_sqrt(prefix(5)).to_dense()
    >>> W = np.tril(np.ones((5, 5)))
    >>> bool(np.allclose(prefix_variances(5), np.diag(W @ np.linalg.inv(A.T @ A) @ W.T)))
    True
    """
    return _prefix_variances(_terms("prefix", check_n(n, "prefix_variances")))


def _prefix_variances(terms) -> np.ndarray:
    # query t (cells 0..t) is the tail {n−t, …, n} of the reversed frame: Q_s = Σ_{i,j ≥ s} e_i e_j K_ij
    e, K_diag, r = terms[:3]
    return np.cumsum((K_diag * e * e + 2.0 * e * r)[::-1])
