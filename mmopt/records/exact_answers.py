"""The records release's strategy answers A x, computed so that their float rounding is part of the privacy proof
(as :mod:`mmopt.dense.exact_answers` for the dense release; designed and checked against a Fraction oracle by a
helper: 0 differences in 316,792 entries, no neighbour pair past d_in at ~2³² records, where the float path
passed d_in for 51 / 25 of 630 pairs, L1 / L2, and weighted marginals for 76 in L2).

ResidualStrategy. Measurement S is y_S = c_S·(⊗_{i∈S} B_i) m_S with B_i = [1, −1]/√2 (n_i = 2) or I − J/n_i.
Write B_i = D_i/n_i (D_i = n_i I − J, integer) or D_i/√2 (D_i = [1, −1]); then

    y_S = κ_S · T_S,   T_S = (⊗ D_i) m_S  (integers),   κ_S = c_S · Π_{n_i>2} 1/n_i · Π_{n_i=2} √½.

T_S is computed exactly in int64: every entry of a partial product (⊗_{applied} D_i ⊗ I) m is Σ_c a_c m_c with
|a_c| ≤ Π(n_i − 1) and m ≥ 0, Σ m = N, so |T| ≤ N·Π_{n_i>2}(n_i − 1), and the step n·z − Σz stays below
N·Π_{n_i>2} n_i ≤ MAX_RECORDS·(cells of the measurement) < 2³²·5·10⁸ < 2⁶¹ (prepare's allocation limit): int64
never overflows, checked from the strategy's shape alone.

κ̂_S = fl(fl(c_S / (P·2^⌊b/2⌋)) · fl(√½)) (b odd) or fl(c_S / (P·2^⌊b/2⌋)) (b even), P = Π_{n_i>2} n_i, b the
binary attributes: P·2^⌊b/2⌋ < 2⁵³ is exact, so at most three roundings: κ̂_S = κ_S(1 + δ_S), |δ_S| ≤ 3u + 3u² + u³
< 4u. The computed map is then the *exact* map of the strategy A' with weights c'_S = c_S(1 + δ_S), whose
sensitivity Δ'_p ≤ (1 + 4u)·Δ_p (every column norm is linear in the c_S, which are all scaled by ≤ 1 + 4u).

ŷ_S = the correctly rounded κ̂_S·T_S: one IEEE multiplication when |T| ≤ MAX_RECORDS·Π(n_i − 1) ≤ 2⁵³ (float(T)
exact), else an error-free split (module function _exact_product). Hence, as in mmopt.dense.exact_answers, for
neighbours x, x′ of ≤ N + 1 records

    ‖ŷ(x) − ŷ(x′)‖_p ≤ Δ'_p + u(‖A'x‖_p + ‖A'x′‖_p) + 2 m^{1/p} η ≤ (1 + 4u)Δ_p(1 + u(2N + 1)) + 2 m^{1/p} η,

η = 2⁻¹⁰⁷⁴ (no product is subnormal while κ̂ ≥ 2⁻⁹⁰⁰, refused otherwise from the strategy; charged anyway).

WeightedMarginals: y_S = θ_S·m_S with m_S an integer ≤ 2³² (exact in float64): one correctly rounded
multiplication, A' = A, so the same charge without the (1 + 4u).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from mmopt.dense.exact_answers import MAX_RECORDS, cover_roundings, histogram_problem, two_product, two_sum
from mmopt.dense.exact_answers import UNIT_ROUNDOFF as U
from mmopt.structured.residual import marginals as wm
from mmopt.structured.residual import strategy as rs
from mmopt.structured.residual.reconstruct import _sources

__all__ = ["charged_records_sensitivity", "check_records_total", "check_residual_strategy", "residual_answers",
           "weighted_answers"]

KAPPA_REL = 4.0 * U  # |κ̂/κ − 1| < 4u
_ETA = 2.0**-1074


# -- data-independent parts (strategy and MAX_RECORDS only) -------------------------------------------------------
def kappa(strategy: rs.ResidualStrategy) -> np.ndarray:
    """κ̂_S per subset (module docstring): at most three roundings."""
    shape = strategy.shape
    out = []
    for S, c in zip(strategy.subsets, strategy.weights.tolist(), strict=True):
        P = math.prod(shape[i] for i in S if shape[i] > 2)
        b = sum(1 for i in S if shape[i] == 2)
        denom = P << (b // 2)  # ≤ the measurement's cells (prepare's cap 5·10⁸) < 2⁵³: exact in float64
        k = c / float(denom)
        if b % 2:
            k = k * math.sqrt(0.5)
        out.append(k)
    return np.array(out)


def t_bound(shape, S, records: int = MAX_RECORDS) -> int:
    """max |T_S| over histograms of ≤ records records: records·Π_{n_i>2}(n_i − 1)."""
    return records * math.prod(shape[i] - 1 for i in S if shape[i] > 2)


def check_residual_strategy(strategy: rs.ResidualStrategy, caller: str, records: int = MAX_RECORDS) -> np.ndarray:
    """κ̂, after refusing (from the strategy alone, never the data) shapes whose int64 transform could overflow and
    weights whose products could underflow or overflow."""
    k = kappa(strategy)
    for S, kk in zip(strategy.subsets, k.tolist(), strict=True):
        if records * math.prod(strategy.shape[i] for i in S if strategy.shape[i] > 2) >= 2**62:
            raise ValueError(f"{caller}: the strategy's measurement of attributes {S} is too large for its integer "
                             f"residuals to be computed exactly at up to {records:,} records. Measure smaller "
                             "marginals.")
        if not (2.0**-900 <= kk and kk * t_bound(strategy.shape, S, records) < 2.0**990):
            raise ValueError(f"{caller}: the strategy's weight on attributes {S} ({kk:.3g} per integer residual) is "
                             "outside the range where A x is computed exactly. Rescale the strategy.")
    return k


def charged_records_sensitivity(delta_up: float, norm: str, rows: int, *, kappa_rounded: bool,
                                records: int = MAX_RECORDS) -> float:
    """d_in = Δ·(1 + 4u)[residual]·(1 + u(2N + 1)) + 2·m^{1/p}·η, rounded upwards (each float op has relative error
    ≤ u, covered by the final (1 + 8u) and nextafter)."""
    base = delta_up * (1.0 + KAPPA_REL) if kappa_rounded else delta_up
    eta = _ETA * (rows if norm == "l1" else math.sqrt(rows))
    charged = base * (1.0 + U * (2.0 * records + 1.0)) + 2.0 * eta
    return cover_roundings(charged, 8)


# -- the data-dependent computation -------------------------------------------------------------------------------
def _int_basis(z: np.ndarray, n: int, axis: int) -> np.ndarray:
    if n == 2:
        return np.take(z, [0], axis=axis) - np.take(z, [1], axis=axis)
    return n * z - z.sum(axis=axis, keepdims=True)


def integer_residual(m: np.ndarray, S: tuple, shape) -> np.ndarray:
    """T_S = (⊗ D_i) m_S exactly in int64."""
    z = np.asarray(m, dtype=np.int64)
    for ax, i in enumerate(S):
        z = _int_basis(z, shape[i], ax)
    return z


def _exact_product(k: float, T: np.ndarray) -> np.ndarray:
    """The correctly rounded k·T for int64 T of any size < 2⁶²: T = t1 + t2 (t1 = float(T), t2 = T − t1 exact,
    |t2| ≤ 2⁹), k·T = p + e + q + f exactly (two TwoProducts), ŷ = fl(p + fl(fl(e + q) + f)) with every rounding's error
    kept (TwoSum): accepted where that sum was exact but for its last rounding, or the exact remainder lies strictly
    inside ŷ's rounding interval; the other entries (exact ties after an inexact sum: rare) from Fraction."""
    shape_T = np.shape(T)
    T = np.atleast_1d(np.asarray(T, dtype=np.int64)).reshape(-1)
    t1 = T.astype(np.float64)
    t2 = (T - t1.astype(np.int64)).astype(np.float64)
    kk = np.float64(k)
    p, e = two_product(kk, t1)
    q, f = two_product(kk, t2)
    r1, g1 = two_sum(e, q)
    r, g2 = two_sum(r1, f)  # e + q + f = r + g1 + g2 exactly
    y, s = two_sum(p, r)  # k·T = y + s + g1 + g2 exactly, y = fl(p + r)
    gap = np.minimum(np.nextafter(y, np.inf) - y, y - np.nextafter(y, -np.inf))  # exact differences
    # y is the correctly rounded k·T when r is exact (g1 = g2 = 0: y is one rounding of the exact sum, ties to even
    # included) or when the exact remainder s + g1 + g2 lies strictly inside y's rounding interval (×2 exact; the
    # (1 + 4u) covers the rounding of the sum of three magnitudes)
    ok = ((g1 == 0.0) & (g2 == 0.0)) | (2.0 * ((np.abs(s) + np.abs(g1)) + np.abs(g2)) * (1.0 + 4.0 * U) < gap)
    bad = np.flatnonzero(~ok.ravel())
    if bad.size:
        fk = Fraction(k)
        for j in bad.tolist():
            y[j] = float(fk * int(T[j]))
    return y.reshape(shape_T)


def residual_answers(strategy: rs.ResidualStrategy, counts: dict, *, caller: str, records: int = MAX_RECORDS
                     ) -> dict:
    """{S: correctly rounded κ̂_S·T_S} from integer marginal counts (as read_counts returns them)."""
    k = check_residual_strategy(strategy, caller, records)
    check_records_total(counts, caller, records)
    m = _sources(strategy.subsets, counts, caller)
    out = {}
    for S, kk in zip(strategy.subsets, k.tolist(), strict=True):
        T = integer_residual(m[S], S, strategy.shape)
        if t_bound(strategy.shape, S, records) <= 2**53:  # from the shape: float(T) exact
            out[S] = kk * T.astype(np.float64)  # one IEEE product: correctly rounded
        else:
            out[S] = _exact_product(kk, T)
    return out


def weighted_answers(strategy: wm.WeightedMarginals, counts: dict, *, caller: str, records: int = MAX_RECORDS
                     ) -> dict:
    """{S: θ_S·m_S}: one correctly rounded multiplication (m_S ≤ 2³² is exact in float64)."""
    check_records_total(counts, caller, records)
    m = _sources(strategy.subsets, counts, caller)
    return {S: th * np.asarray(m[S], dtype=np.int64).astype(np.float64)
            for S, th in zip(strategy.subsets, strategy.weights.tolist(), strict=True)}


def check_records_total(counts: dict, caller: str, records: int = MAX_RECORDS) -> None:
    """Refuse, before any draw, counts that are not whole or hold more than ``records`` records (every marginal
    read counts the same records: its int64 total is N): the guarantee's domain, as the dense release's."""
    for a in counts.values():
        a = np.asarray(a)
        # the dense release's test (each count ≤ records before the int64 sum, which then cannot wrap)
        problem = histogram_problem(a, records) if a.dtype.kind in "iuf" else "fractional"
        if problem in ("negative", "fractional"):
            raise ValueError(f"{caller}: the marginal counts must be whole numbers >= 0 (one record moves one count "
                             "by 1, which is what the noise is calibrated to). Got other values.")
        if problem == "records":
            raise ValueError(f"{caller}: the records hold more than {records:,} rows in the domain (the guarantee's "
                             "domain, mmopt.dense.exact_answers.MAX_RECORDS: the float rounding of A x is charged for "
                             "that many; the total is not printed: a figure of the data). Release the data in parts.")
