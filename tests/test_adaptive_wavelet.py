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
