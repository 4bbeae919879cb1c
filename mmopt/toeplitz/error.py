"""Exact error of a Toeplitz strategy for the prefix workload and for all ranges, in O(n log n), never n×n.

Notation: see README and :mod:`mmopt.toeplitz.strategies`. For W = T(𝟙) (prefix sums) and C = T(c) invertible,
least squares gives W x̂ − W x = W C⁻¹ z = B z with B = T(b), b = cumsum(1/c) (B = T(b)·D⁻¹ for a
row-scaled C = D·T(c), which changes only the weights below; see :func:`decoder_total`); the matrix mechanism's error
Δ(C)²·tr(WᵀW (CᵀC)⁻¹) (Prop. 4.4) equals the factorisation's Δ(C)²·‖B‖_F². Row t of B is (b_t, …, b_0, 0, …).

* prefix, total: Δ²·Σ_k (n − k) b_k²; per query t: Δ²·Σ_{k ≤ t} b_k², largest at t = n − 1.
* all ranges [i, j] (0 ≤ i ≤ j < n, n(n+1)/2 of them): the error of [i, j] is ‖B_j − B_{i−1}‖² (B_{−1} = 0).
  Total: the n+1 points B_{−1}, …, B_{n−1} give Σ_{p<q} ‖B_q − B_p‖² = (n+1)·Σ_q ‖B_q‖² − ‖Σ_q B_q‖², and
  Σ_q B_q has entries β_u = Σ_{k ≤ u} b_k (in reverse order). Max: with L = j − i + 1 the error is
  V_j(L) = Σ_{u ≤ j} (b_u − b_{u−L})², non-decreasing in j, so the largest range of each length ends at n − 1
  and the max is max_L [‖b‖² + Σ_{u < n−L} b_u² − 2 a_L], a_L = Σ_u b_{u+L} b_u (one FFT autocorrelation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt._base.report_row import error_row
from mmopt.privacy import Privacy
from mmopt.toeplitz import _series
from mmopt.toeplitz.strategies import ToeplitzStrategy
from mmopt.toeplitz.workloads import StreamWorkload, all_range, as_stream_workload, prefix, stream_twin

__all__ = ["StreamWorkload", "ToeplitzErrorReport", "all_range", "as_stream_workload", "decoder_rows", "evaluate",
           "prefix", "stream_twin"]

@dataclass(frozen=True)
class ToeplitzErrorReport:
    """The exact error of a Toeplitz strategy on a stream workload.

    Attributes
    ----------
    workload, strategy : str
        Their names; the workload's as the dense reports give it, e.g. "prefix(16)".
    n : int
    n_queries : int
    norm : {"l1", "l2"}
    sensitivity : float
        Δ = the largest of C's column norms (the first column's when C has no row scales).
    variance_factor : float
        c of the budget (1 at unit privacy).
    total_squared_error : float
        c·Δ²·‖W C⁻¹‖_F², the expected ‖W x̂ − W x‖².
    max_variance : float
        The largest single-query error; when ``max_variance_exact`` is False an attained one (the largest prefix's,
        a prefix being a range), as the dense reports give it, with ``max_variance_upper`` a proven upper bound.
    max_variance_query : tuple of int
        (first, last) cell of a query attaining ``max_variance`` (0-indexed, inclusive).
    max_variance_exact : bool
        False only on all ranges past the exact passes (:mod:`mmopt.toeplitz.range_variance`: every strategy to
        1,024 cells, a tree to 2,048, the weighted square root to 4,096) for a row-scaled Toeplitz strategy, a tree
        or the weighted square root, whose largest range variance needs the covariance of two prefix sums. Where a
        report holds NaN (not computed; ``max_variance_query`` (−1, −1)) ``max_variance_upper`` is the total. A NaN
        compares False both ways: test ``max_variance_exact`` first.
    privacy : Privacy or None
        The budget (None: unit privacy).
    max_variance_bound : float or None
        The proven upper bound ``max_variance_upper`` reads when ``max_variance_exact`` is False (None where exact).
        Before, such a report held the bound in ``max_variance`` itself, 2.3–4× the largest variance, unlike the
        dense reports (a helper's read of the evaluate tutorial).

    The dense and implicit reports' other fields are here too (``privacy``, ``log10_total``,
    ``max_variance_upper``, ``per_query_variance`` — None: n queries are not listed — and :meth:`to_row`), so
    that code reading a report works on either side of ``prefix(n)``'s switch to a stream workload at 10,001 cells.
    """

    workload: str
    strategy: str
    n: int
    n_queries: int
    norm: str
    sensitivity: float
    variance_factor: float
    total_squared_error: float
    max_variance: float
    max_variance_query: tuple[int, int]
    max_variance_exact: bool = True
    privacy: Privacy | None = None
    max_variance_bound: float | None = None

    @property
    def log10_total(self) -> float:
        return math.log10(self.total_squared_error) if self.total_squared_error > 0 else -math.inf

    @property
    def max_variance_upper(self) -> float:
        """A proven upper bound on the largest variance: ``max_variance`` itself where exact, ``max_variance_bound``
        where not, and where it was not computed (NaN: an upper bound that compared False both ways) the total,
        which no query's variance exceeds (they are ≥ 0 and sum to it; inf said nothing, as the dense path's None
        did)."""
        if self.max_variance_bound is not None:
            return self.max_variance_bound
        return self.total_squared_error if math.isnan(self.max_variance) else self.max_variance

    @property
    def per_query_variance(self) -> None:
        return None

    def to_row(self) -> dict:
        """A flat dict for one CSV row, with the dense report's keys."""
        return error_row(self)

    @property
    def domain_size(self) -> int:
        """n, as the dense and implicit reports name it."""
        return self.n

    @property
    def sensitivity_norm(self) -> str:
        """``norm``, as the dense and implicit reports name it."""
        return self.norm

    @property
    def mean_squared_error(self) -> float:
        return self.total_squared_error / self.n_queries

    @property
    def rmse(self) -> float:
        return math.sqrt(self.mean_squared_error)


def decoder_total(kind: str, b: np.ndarray, r: np.ndarray | None = None) -> float:
    """Σ over the workload's queries of ‖row of B‖², unit sensitivity (see the module docstring).

    ``r``: None for B = T(b); for B = T(b)·D⁻¹ the reversed column weights r_m = 1/y_{n−1−m}. With
    E_m = Σ_{k ≤ m} b_k² and β_m = Σ_{k ≤ m} b_k, the prefix total is Σ_m r_m E_m and the all-range total
    (n+1)·Σ_m r_m E_m − Σ_m r_m β_m² (column n−1−m of B holds b_0..b_m and Σ_q B_q has β_m/d there).
    """
    n = len(b)
    r = np.ones(n) if r is None else r
    E = np.cumsum(b * b)
    prefix_total = float(r @ E)
    if kind == "prefix":
        return prefix_total
    beta = np.cumsum(b)
    return (n + 1) * prefix_total - float(r @ (beta * beta))


def decoder_total_gradient(kind: str, b: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
    """∂ decoder_total / ∂b."""
    n = len(b)
    r = np.ones(n) if r is None else r
    tail = np.cumsum(r[::-1])[::-1]  # Σ_{m ≥ k} r_m
    grad = 2.0 * b * tail
    if kind == "prefix":
        return grad
    beta = np.cumsum(b)
    return (n + 1) * grad - 2.0 * np.cumsum((r * beta)[::-1])[::-1]


def decoder_rows(b: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
    """‖row t of W C⁻¹‖² for every prefix t (unit sensitivity): Σ_{j ≤ t} b_{t−j}²/y_j, or Σ_{k ≤ t} b_k² when
    y is None (B = T(b)·D⁻¹, D² = diag(y)).

    The row-scaled rows are one FFT convolution, whose round-off on every entry is of order u·log₂(2n)·‖b∘b‖₂‖1/y‖₂
    (Higham, *Accuracy and Stability*, §24.1; taken here with the constant 32); a row that this does not put within
    10⁻⁶ of its value (a strategy whose rows span many orders of magnitude) is summed directly, O(t), so every row
    is within about 10⁻⁶ of its value, relative.

    >>> decoder_rows(np.array([1.0, 2.0]), np.array([1.0, 4.0])).tolist()  # [1/1, 4/1 + 1/4]
    [1.0, 4.25]
    """
    sq = b * b
    if y is None:
        return np.cumsum(sq)
    n, inv = len(b), 1.0 / y
    rows = _series.convolve(sq, inv, n)
    bound = _series.convolution_round_off(sq, inv)
    low = np.flatnonzero(rows < 1e6 * bound)  # few or none: each summed directly
    if low.size and float(low.sum()) > 1e9:
        raise ValueError(f"decoder_rows: {low.size:,} of the {n:,} prefix variances of this row-scaled strategy lie "
                         "below the FFT's round-off and would cost more than 10⁹ operations to sum directly; its "
                         "row scales span too many orders of magnitude. Use the strategy without row scales.")
    for t in low:
        rows[t] = float(sq[t::-1] @ inv[:t + 1])
    return rows


def decoder_max(kind: str, b: np.ndarray, y: np.ndarray | None = None) -> tuple[float, tuple[int, int], bool]:
    """(largest per-query ‖row of W C⁻¹‖², a query attaining it, exact?, a proven upper bound or None), unit
    sensitivity.

    For a row-scaled strategy on all ranges the value is the largest prefix's (attained: a prefix is a range), the
    bound max_j(1/y_j)·max_L V(L), and exact is False.
    """
    n = len(b)
    sq = b * b
    if kind == "prefix":
        if y is None:
            return float(sq.sum()), (0, n - 1), True, None
        rows = decoder_rows(b, y)
        t = int(np.argmax(rows))
        return float(rows[t]), (0, t), True, None
    total = float(sq.sum())
    head = np.concatenate([[0.0], np.cumsum(sq)])  # head[m] = Σ_{u < m} b_u²
    L = np.arange(1, n + 1)
    auto = _series.convolve(b, b[::-1], n)[::-1]  # auto[L] = Σ_u b_{u+L} b_u (index n−1−L of the convolution)
    lagged = np.concatenate([auto[1:], [0.0]])  # a_L for L = 1..n (a_n = 0)
    V = total + head[n - L] - 2.0 * lagged
    best = int(np.argmax(V))
    query = (n - int(L[best]), n - 1)
    if y is None:
        return float(V[best]), query, True, None
    rows = decoder_rows(b, y)
    t = int(np.argmax(rows))
    return float(rows[t]), (0, t), False, float(V[best] / y.min())


def resolve_privacy(privacy, norm: str | None, caller: str) -> tuple[str, float]:
    """(norm, c) of a report: the budget's (δ = 0: Laplace and Δ₁; δ > 0: Gaussian and Δ₂), ``norm`` overriding
    it; None is unit privacy (c = 1) with Δ₂, mmopt's objective units."""
    if privacy is not None and not isinstance(privacy, Privacy):
        raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy or None. "
                        f"Got {type(privacy).__name__} instead.")
    norm = norm if norm is not None else (privacy.sensitivity_norm if privacy is not None else "l2")
    norm = v.check_choice(norm, name="norm", caller=caller, choices=("l1", "l2"))
    return norm, 1.0 if privacy is None else privacy.variance_factor


def check_decodable(strategy: ToeplitzStrategy, caller: str) -> np.ndarray:
    """The decoder column b = cumsum(1/c) of ``strategy``, refused when it overflows: C is then numerically
    singular, its error infinite and C⁻¹y (a release's estimate, a stream's noise) NaN or infinite."""
    with np.errstate(over="ignore", invalid="ignore"):  # the overflow is what is tested, and refused, here
        b = strategy.decoder_column()
    if not np.all(np.isfinite(b)):
        raise ValueError(f"{caller}: the strategy '{strategy.name}' has a decoder W C⁻¹ whose entries overflow "
                         f"(C is numerically singular); choose coefficients whose series 1/c decays.")
    return b


def evaluate(workload, strategy: ToeplitzStrategy, privacy: Privacy | None = None, *,
             norm: str | None = None) -> ToeplitzErrorReport:
    """Exact total and maximum error of the Toeplitz strategy ``strategy`` on ``workload``, O(n log n).

    Parameters
    ----------
    workload : StreamWorkload, or mmopt's dense prefix / all_range workload
    strategy : ToeplitzStrategy
    privacy : Privacy or None
        None: unit privacy (c = 1) with the L2 sensitivity, mmopt's objective units. Otherwise c and the
        norm (δ = 0: Laplace and Δ₁; δ > 0: Gaussian and Δ₂) come from the budget.
    norm : {"l1", "l2"} or None
        Overrides the norm.

    Examples
    --------
    >>> from mmopt.toeplitz import sqrt_strategy
    >>> r = evaluate(prefix(4), sqrt_strategy(4))
    >>> round(r.total_squared_error, 6), round(r.max_variance, 6), r.max_variance_query
    (7.633255, 2.214981, (0, 3))
    """
    caller = "mmopt.toeplitz.evaluate"
    W = as_stream_workload(workload, caller)
    from mmopt.toeplitz.range_variance import exact_all_ranges
    if callable(getattr(strategy, "stream_report", None)):  # the weighted square root and the tree strategy report
        return exact_all_ranges(strategy.stream_report(W, privacy, norm, caller), strategy, W.kind)  # themselves
    if not isinstance(strategy, ToeplitzStrategy):
        raise TypeError(f"The 'strategy' parameter of {caller} must be a ToeplitzStrategy (sqrt_strategy, banded, "
                        f"blt), a WeightedSqrtStrategy or a TreeStrategy. Got {type(strategy).__name__} instead.")
    v.check_same_domain(W.n, strategy.n, caller=caller)
    norm, factor = resolve_privacy(privacy, norm, caller)
    unit, e = strategy.normalised()  # C = 2ᵉ·C′: the error is C′'s (Δ² and ‖W C⁻¹‖² scale by 4ᵉ and 4⁻ᵉ), where
    # C's own Δ² or b∘b overflowed to inf (or 0·inf = NaN) at |c| past 1e154 or below 1e-154
    b = check_decodable(unit, caller)
    delta_unit = unit.sensitivity(norm)
    delta = float(np.ldexp(delta_unit, e))
    scale = factor * delta_unit * delta_unit
    y = unit.row_scale
    worst, query, exact, bound = decoder_max(W.kind, b, y)
    total = decoder_total(W.kind, b, None if y is None else 1.0 / y[::-1])
    return exact_all_ranges(ToeplitzErrorReport(W.name, strategy.name, W.n, W.n_queries, norm, delta, factor,
                                                scale * total, scale * worst, query, exact, privacy,
                                                None if bound is None else scale * bound), strategy, W.kind)
