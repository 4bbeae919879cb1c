"""The wavelet matrix's window queries against brute force, and DAWA's deviations through it against the cell-by-cell
sums (the same floats) and exact Fractions."""

from fractions import Fraction

import numpy as np
import pytest

import mmopt.adaptive.partition as part
from mmopt.adaptive.partition import candidate_lengths, deviations
from mmopt.adaptive.wavelet import at_least, wavelet_matrix


@pytest.mark.parametrize("top", [0, 1, 2, 7, 100, 2**31])
def test_at_least_counts_and_sums_every_window_as_brute_force(top):
    g = np.random.default_rng(top)
    for _ in range(40):
        n = int(g.integers(1, 50))
        x = g.integers(0, top + 1, n)
        wm = wavelet_matrix(x)
        a, b = g.integers(0, n + 1, (2, 60))
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        t = g.integers(0, top + 2, 60)
        count, total = at_least(wm, lo, hi, t)
        for i in range(60):
            w = x[lo[i]:hi[i]]
            assert count[i] == np.sum(w >= t[i]) and total[i] == np.sum(w[w >= t[i]])


def test_wavelet_matrix_refuses_what_would_exhaust_memory(monkeypatch):
    from mmopt._base import validation
    monkeypatch.setattr(validation, "MAX_ALLOCATION_ENTRIES", 100)
    with pytest.raises(ValueError, match="wavelet_matrix: the wavelet matrix"):
        wavelet_matrix(np.arange(1000))


@pytest.mark.parametrize("n, kind, cap", [(300, "dyadic", 300), (257, "all", 140), (4096, "dyadic", 4096)])
def test_long_window_deviations_are_the_cell_by_cell_floats(monkeypatch, n, kind, cap):
    g = np.random.default_rng(n)
    lengths = candidate_lengths(n, kind, cap)
    for x in (g.integers(0, 3, n), g.integers(0, 10**6, n), np.zeros(n, dtype=np.int64),
              np.where(np.arange(n) == 5, 2**32 - 1, 0)):  # a whole release domain in one cell
        fast = deviations(x.astype(float), lengths)
        monkeypatch.setattr(part, "_LONG", 10**9)
        slow = deviations(x.astype(float), lengths)
        monkeypatch.undo()
        assert np.array_equal(fast, slow, equal_nan=True)
        assert np.isnan(fast).sum() == sum(L - 1 for L in lengths.tolist())


def test_long_window_deviations_are_correctly_rounded():
    g = np.random.default_rng(9)
    x = g.integers(0, 2**20, 200)
    dev = deviations(x.astype(float), np.array([64, 100, 200]))
    for k, L in enumerate((64, 100, 200)):
        for a in range(0, 200 - L + 1, 7):
            w = [Fraction(int(t)) for t in x[a:a + L]]
            mean = sum(w) / L
            assert dev[a, k] == float(sum(abs(t - mean) for t in w))  # Fraction → float rounds correctly


def test_fractional_counts_take_the_cell_by_cell_path():
    x = np.full(100, 0.5)
    x[3] = 7.25
    dev = deviations(x, np.array([64]))
    assert dev[0, 0] == pytest.approx(2 * 6.75 * 63 / 64)


def _cell_by_cell(monkeypatch, x, lengths):
    monkeypatch.setattr(part, "_LONG", 10**9)
    slow = deviations(x, lengths)
    monkeypatch.undo()
    return slow


@pytest.mark.parametrize("low", [-5.0, -2.0**58, -1e30])
def test_negative_counts_take_the_cell_by_cell_path(monkeypatch, low):
    x = np.zeros(100)
    x[0], x[1] = low, 5.0  # whole and at most 2**32 in all: a huge one wrapped around in int64 (dev < 0)
    fast = deviations(x, np.array([1, 64, 100]))
    assert np.array_equal(fast, _cell_by_cell(monkeypatch, x, np.array([1, 64, 100])), equal_nan=True)
    assert np.nanmin(fast) >= 0


def test_the_wavelet_matrix_counts_its_two_tables(monkeypatch):
    from mmopt._base import validation
    x = np.arange(1000)  # 1,000 ranks: 10 levels
    monkeypatch.setattr(validation, "MAX_ALLOCATION_ENTRIES", 2 * 10 * 1001)
    assert wavelet_matrix(x).ones.shape == (10, 1001)
    monkeypatch.setattr(validation, "MAX_ALLOCATION_ENTRIES", 2 * 10 * 1001 - 1)
    with pytest.raises(ValueError, match="wavelet_matrix: the wavelet matrix"):
        wavelet_matrix(x)


def test_a_wavelet_matrix_that_does_not_fit_beside_the_table_leaves_the_cell_by_cell_pass(monkeypatch):
    from mmopt._base import validation
    n = 1000
    x = np.random.default_rng(3).permutation(n).astype(float)  # σ = n: 10 levels
    lengths = candidate_lengths(n, "dyadic", n)
    slow = _cell_by_cell(monkeypatch, x, lengths)
    built = []
    monkeypatch.setattr(part, "wavelet_matrix", lambda c: built.append(1) or wavelet_matrix(c))
    for spare, used in ((0, True), (-1, False)):  # the table, the matrix and its build's temporaries: (2·10 + 8)(n+1)
        monkeypatch.setattr(validation, "MAX_ALLOCATION_ENTRIES", n * lengths.size + (2 * 10 + 8) * (n + 1) + spare)
        built.clear()
        assert np.array_equal(deviations(x, lengths), slow, equal_nan=True) and bool(built) == used


def test_query_blocks_cover_every_window(monkeypatch):
    x = np.random.default_rng(4).integers(0, 50, 300).astype(float)
    lengths = candidate_lengths(300, "all", 140)
    slow = _cell_by_cell(monkeypatch, x, lengths)
    monkeypatch.setattr(part, "_QUERY", 7)
    assert np.array_equal(deviations(x, lengths), slow, equal_nan=True)


def test_an_empty_wavelet_matrix_has_nothing_at_least_anything():
    count, total = at_least(wavelet_matrix([]), [0], [0], [1])
    assert count.tolist() == [0] and total.tolist() == [0]
    assert deviations(np.zeros(0), np.array([64])).shape == (0, 1)
