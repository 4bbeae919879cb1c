"""EFPA's Δ₁ table and C₂ (mmopt.adaptive.fourier_bounds) against exact sums over the dense basis."""

from fractions import Fraction

import numpy as np
import pytest

from mmopt.adaptive.efpa import _tables, fourier_matrix
from mmopt.adaptive.fourier_bounds import _folded, column_bounds

U = 2.0**-53


def dense(r0, cos, sin):
    """The basis the tables define (efpa's row order): r0, cos[f·i mod n], sin[f·i mod n], …, ±r0 (n even)."""
    n = cos.size
    i, rows = np.arange(n), [np.full(n, r0)]
    for f in range(1, (n - 1) // 2 + 1):
        rows += [cos[f * i % n], sin[f * i % n]]
    if n % 2 == 0 and n > 1:
        rows.append(np.where(i % 2 == 0, r0, -r0))
    return np.array(rows)


def exact_bounds(B):
    """max_i Σ_{j<k} |B_ji| for every k and max_i ‖B e_i‖₂², exactly (Fractions of the floats)."""
    F = np.vectorize(Fraction, otypes=[object])(np.abs(B))
    return [max(c) for c in np.cumsum(F, axis=0)], max((F * F).sum(axis=0))


@pytest.mark.parametrize("n", [*range(1, 17), 30, 64, 97, 128])
def test_bounds_hold_for_every_k_and_are_tight(n):
    d, c2 = column_bounds(*_tables(n))
    l1, sq = exact_bounds(fourier_matrix(n))
    for k in range(n):
        assert l1[k] <= Fraction(float(d[k])) <= l1[k] * (1 + Fraction(4 * (n + 4)) * Fraction(U)), (n, k)
    assert sq <= Fraction(c2) ** 2 <= sq * (1 + Fraction(16) * Fraction(U))
    assert not d.flags.writeable


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 9, 10, 12, 17])
def test_asymmetric_tables_are_folded_not_assumed_symmetric(n):
    # tables far from even or π-symmetric: summing a quarter of the columns of |table| would undercount
    rng = np.random.default_rng(n)
    r0, cos, sin = 0.3, rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    d, c2 = column_bounds(r0, cos, sin)
    l1, sq = exact_bounds(dense(r0, cos, sin))
    assert all(l1[k] <= Fraction(float(d[k])) for k in range(n)) and sq <= Fraction(c2) ** 2
    m = np.arange(n)
    for t, table in zip(_folded(cos, sin), (cos, sin), strict=True):  # ≥ the table, equal along every orbit
        assert np.all(t >= np.abs(table)) and np.array_equal(t, t[-m % n])
        if n % 2 == 0:
            assert np.array_equal(t, t[(n // 2 - m) % n]) and np.array_equal(t, t[(n // 2 + m) % n])


@pytest.mark.parametrize("n", [5, 64, 1000, 1002])
def test_never_below_the_unfolded_column_sums(n):
    # the table of old: float cumulative sums of |Φ̂| over every column, widened alike
    old = np.nextafter(np.cumsum(np.abs(fourier_matrix(n)), axis=0).max(axis=1) * (1 + 2 * (n + 2) * U), np.inf)
    d, _ = column_bounds(*_tables(n))
    assert np.all(d >= old) and np.all(d <= old * (1 + 1e-14))


def test_column_bounds_refuses_bad_tables():
    with pytest.raises(ValueError, match="'cos' and 'sin' parameters of column_bounds"):
        column_bounds(0.5, np.ones(4), np.ones(3))
    with pytest.raises(ValueError, match="'cos' and 'sin' parameters of column_bounds"):
        column_bounds(0.5, np.array([1.0, np.nan]), np.ones(2))
    for r0 in (0.0, 1.5, 1e200, np.nan):  # (1e200's C₂ overflowed in sqrt_up; Φ̂ has 0 < r0 ≤ 1)
        with pytest.raises(ValueError, match=r"'r0' parameter of column_bounds must be in \(0, 1\]"):
            column_bounds(r0, np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match=r"entries in \[-1, 1\] \(Φ̂'s\)\. Got a largest \|entry\| of 2\.0"):
        column_bounds(0.5, np.array([0.5, 2.0]), np.ones(2))


def test_c2_covers_the_rounding_of_the_squares():
    # constant tables: every column's norm² is r0² + half·c² exactly. fl(c²) < c² here, so C₂ from fl(c²) alone (no
    # (1 − u)⁻² margin) can round to a float below the exact norm (the real tables hide it: at n = 8 the
    # unmargined sum is 0.26 u under, the root's rounding up covers it); squares that underflow to 0 (2⁻¹⁰⁷⁶ here,
    # 2⁻³⁵ of r0²) need the 2⁻¹⁰⁷⁴
    c, tiny = 1.0 - 2.0**-53, 2.0**-538  # (entries ≤ 1, as Φ̂'s)
    assert Fraction(c * c) < Fraction(c) ** 2 and tiny * tiny == 0.0
    for r0, cos, sin in ((2.0**-600, np.full(9, c), np.zeros(9)), (2.0**-520, np.full(3, tiny), np.full(3, tiny))):
        _, c2 = column_bounds(r0, cos, sin)
        _, sq = exact_bounds(dense(r0, cos, sin))
        assert sq <= Fraction(c2) ** 2, (r0, c2)


def limb_sums(Q):
    """max_i Σ_{j<k} |Q_ji| for every k and max_i Σ_j Q_ji², exactly, for int64 |Q| ≤ 2⁶² (31- and 21-bit limbs)."""
    A = np.abs(Q)
    hi, lo = np.cumsum(A >> 31, axis=0), np.cumsum(A & (2**31 - 1), axis=0)  # each below 2³¹·n: no overflow
    hi += lo >> 31  # carried: the sums compare as the pairs (hi, lo)
    lo &= 2**31 - 1
    top = hi.max(axis=1)
    low = np.where(hi == top[:, None], lo, -1).max(axis=1)
    a, b, c = A >> 42, (A >> 21) & (2**21 - 1), A & (2**21 - 1)
    t = [(a * a).sum(0), (2 * a * b).sum(0), (2 * a * c + b * b).sum(0), (2 * b * c).sum(0), (c * c).sum(0)]
    sq = max(sum(int(s[i]) << 21 * (4 - p) for p, s in enumerate(t)) for i in range(Q.shape[1]))
    return [(int(h) << 31) + int(w) for h, w in zip(top, low, strict=True)], sq


@pytest.mark.parametrize("n", [254, 255, 1023, 2046])
def test_bounds_hold_exactly_at_n_2_mod_4_and_odd_n(n):
    # n ≡ 2 (mod 4) and odd n, whose orbits the quarter (half) of the columns must cover, one block of rows and
    # several (1023: four, 2046: eight), against integer sums of Q = 2⁶²·Φ̂
    d, c2 = column_bounds(*_tables(n))
    Q = fourier_matrix(n) * 2.0**62
    assert np.all(Q == np.round(Q))
    l1, sq = limb_sums(Q.astype(np.int64))
    assert all(Fraction(l1[k], 2**62) <= Fraction(float(d[k])) for k in range(n))
    assert Fraction(sq, 2**124) <= Fraction(c2) ** 2


def test_limb_sums_agree_with_fractions():
    rng = np.random.default_rng(3)
    Q = rng.integers(-2**62, 2**62, (40, 7), endpoint=True)
    l1, sq = exact_bounds(Q.astype(object))
    assert limb_sums(Q) == ([int(a) for a in l1], sq)
