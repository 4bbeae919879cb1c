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
    with pytest.raises(ValueError, match="'r0' parameter of column_bounds must be finite and > 0"):
        column_bounds(0.0, np.ones(2), np.ones(2))
