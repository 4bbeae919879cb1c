"""EFPA's data-independent sensitivities of the float basis Φ̂, proven upper bounds, in O(n) memory.

Φ̂ (:mod:`mmopt.adaptive.efpa`) has rows r0 (constant), cos_f, sin_f for f = 1 … ⌊(n − 1)/2⌋ (interleaved) and,
for even n, the Nyquist row ±r0; row cos_f of column i is the table entry cos[f·i mod n] (so is sin_f). Wanted:
Δ₁(k) ≥ max_i Σ_{j<k} |Φ̂_ji| for every k, and C₂ ≥ max_i ‖Φ̂e_i‖₂.

* Fold. |cos| and |sin| are even and π-symmetric (|cos(π ± θ)| = |cos θ|), but the rounded tables are not
  exactly (fourier_exact's docstring). So each of |cos|, |sin| is raised to its largest value over the residue's
  orbit {±m, n/2 ± m} ({±m} for odd n): ≥ the table, and constant on orbits by construction. Column n − i reads
  the folded tables at −f·i, column n/2 ± i at f·n/2 ± f·i ≡ ±f·i or n/2 ± f·i: the same values as column i, so
  the same float sums, exactly. Every column is i, n − i or n/2 ± i for some i ≤ n/4 (n/2 for odd n): those are
  summed, a quarter of the columns (a half).
* Sums. Each column is summed down the rows in row order, in float64, as the column sums of |Φ̂| it replaced
  were (np.cumsum over every column of Φ̂): rounded addition is monotone, so each sum is ≥ that sum, and the
  table ≥ that table (measured: equal, or 1 – 12 ulps above at n ≤ 65,536). A float sum of m ≥ 0 nonnegative
  terms is within γ_m = m·u/(1 − m·u) of its exact value, so the max over columns is widened by 2(n + 2)·u and
  rounded up: ≥ the exact Δ₁(k) of Φ̂.
* C₂. Every column holds r0, the Nyquist entry ±r0 (even n) and ⌊(n − 1)/2⌋ pairs (cos_m, sin_m), so
  C₂² ≤ r0²·(1 + [n even]) + ⌊(n − 1)/2⌋·max_m (cos_m² + sin_m²), the max bounded from its float value
  (w = fl(fl(c²) + fl(s²)) ≥ (c² + s² − 2⁻¹⁰⁷⁴)(1 − u)², underflow included), the root taken upwards. O(n), and
  tighter than the column sums it replaced (1 + 2⁻⁵¹ against 1 + 1.8·10⁻¹² at n = 16,384).

Cost: the rows go in blocks of :data:`ROWS` entries (1 MB, a core's L2 cache), each row added to the one before
(np.cumsum along axis 0 of a C-ordered block was 12 times slower); the gathers f·i mod n dominate. CPU s (one
thread, benchmarks/bench_efpa_tables.py on a shared 2-core machine, load 2.1; 0.02 / 0.15 / 2.4 s in a quieter
run) against the column blocks of Φ̂ it replaced: n = 4,096: 0.04 (0.31); 16,384: 0.26 (4.0); 65,536: 3.1 (53).
Peak memory 3 – 7 MB (48 MB). Tables of |entry| ≤ 1 and 0 < r0 ≤ 1 only (Φ̂'s): the root's bound is taken
from floats that neither underflow nor overflow there.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from mmopt.dense import exact_answers as ea

__all__ = ["ROWS", "column_bounds"]

ROWS = 1 << 17  # entries of the Δ₁ sums formed at a time (1 MB)


def _folded(cos: np.ndarray, sin: np.ndarray) -> list[np.ndarray]:
    """|cos|, |sin| raised to their max over each residue's orbit {±m, n/2 ± m} ({±m} for odd n)."""
    n = cos.size
    m = np.arange(n)
    orbit = [m, -m % n] + ([(n // 2 - m) % n, (n // 2 + m) % n] if n % 2 == 0 else [])
    return [np.max([np.abs(t)[o] for o in orbit], axis=0) for t in (cos, sin)]


def column_bounds(r0: float, cos: np.ndarray, sin: np.ndarray) -> tuple[np.ndarray, float]:
    """(Δ₁(k) for k = 1..n, C₂) for the basis of rows r0, cos[f·i mod n], sin[f·i mod n], ±r0 (module docstring).

    Parameters
    ----------
    r0 : float
        The constant row's entry (and the Nyquist row's magnitude), > 0.
    cos, sin : float64 arrays (n,)
        The tables, read at f·i mod n.

    Returns
    -------
    (ndarray (n,), float)
        Δ₁(k) at index k − 1 (read-only), and C₂.

    >>> r = 0.5**0.5  # n = 4: rows 1/2, cos_1, sin_1, ±1/2
    >>> d, c2 = column_bounds(0.5, np.array([r, 0.0, -r, 0.0]), np.array([0.0, r, 0.0, -r]))
    >>> [round(float(a), 12) for a in d], round(c2, 12)
    ([0.5, 1.207106781187, 1.207106781187, 1.707106781187], 1.0)
    """
    caller = "column_bounds"
    cos, sin = np.asarray(cos, dtype=float), np.asarray(sin, dtype=float)
    n = cos.size
    if cos.ndim != 1 or sin.shape != cos.shape or n == 0 or not np.all(np.isfinite(cos) & np.isfinite(sin)):
        raise ValueError(f"The 'cos' and 'sin' parameters of {caller} must be finite vectors of one length n ≥ 1. "
                         f"Got shapes {cos.shape} and {sin.shape} instead.")
    if not (np.isfinite(r0) and 0 < r0 <= 1):
        raise ValueError(f"The 'r0' parameter of {caller} must be in (0, 1]. Got {r0!r} instead.")
    if np.abs(cos).max() > 1 or np.abs(sin).max() > 1:  # Φ̂'s entries: sqrt_up of a far larger sum overflowed
        raise ValueError(f"The 'cos' and 'sin' parameters of {caller} must hold entries in [-1, 1] (Φ̂'s). Got a "
                         f"largest |entry| of {float(max(np.abs(cos).max(), np.abs(sin).max()))!r} instead.")
    r0 = float(r0)
    half = (n - 1) // 2  # cos/sin pairs
    folded = _folded(cos, sin)
    cols = np.arange(n // 4 + 1 if n % 2 == 0 else half + 1, dtype=np.int64)
    l1, s, step = np.full(n, r0), np.full(cols.size, r0), max(1, ROWS // (2 * cols.size))
    for f0 in range(1, half + 1, step):
        idx = np.multiply.outer(np.arange(f0, min(f0 + step, half + 1), dtype=np.int64), cols)
        idx = idx % n if n & (n - 1) else idx & (n - 1)  # a power of two: the mask, a fifth of the division's cost
        block = np.empty((2 * idx.shape[0], cols.size))
        for row, t in enumerate(folded):  # rows cos_f, sin_f interleaved, as in Φ̂
            np.take(t, idx, out=block[row::2], mode="clip")
        block[0] += s
        for j in range(1, block.shape[0]):  # the running sums, in row order
            np.add(block[j - 1], block[j], out=block[j])
        l1[2 * f0 - 1:2 * f0 - 1 + block.shape[0]], s = block.max(axis=1), block[-1]
    if n % 2 == 0 and n > 1:  # the Nyquist row, |±r0|
        l1[n - 1] = float((s + r0).max())
    widen = 1.0 + 2.0 * (n + 2) * ea.UNIT_ROUNDOFF
    delta1 = np.nextafter(l1 * widen, np.inf)
    delta1.setflags(write=False)
    u = Fraction(ea.UNIT_ROUNDOFF)
    w = Fraction(float((cos * cos + sin * sin).max())) + Fraction(1, 1 << 1074)  # the squares' underflow
    pairs = w / (1 - u) ** 2 if half else Fraction(0)
    sq = Fraction(r0) ** 2 * (1 + (n % 2 == 0 and n > 1)) + half * pairs
    return delta1, ea.sqrt_up(sq)
