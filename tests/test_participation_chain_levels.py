"""The 2b-band strategy coarse to fine: the carried start against closed forms (bilinear, the decay, lag b, the
blocks), the result's error against dense computation and its sensitivity against branch and bound, the route's
use of it, and bad input refused."""

import math

import numpy as np
import pytest

import mmopt
from mmopt.family import training_separation
from mmopt.participation import min_separation, sensitivity_squared
from mmopt.participation.chain_levels import _decay, carry, chain_levels, free_levels
from mmopt.participation.free_banded import band_error, free_banded
from mmopt.participation.patterns import pattern_upper_bound


def _banded_toeplitz(n, bands, c):
    return sum(np.diag(np.full(n - d, c[d]), -d) for d in range(bands))


def test_carry_with_no_decay_is_bilinear_where_every_corner_counts():
    # coefficients linear in the lag (α = 0): bilinear interpolation in (row, column) reproduces them at (s/2, t/2)
    # wherever no corner is dropped (diagonal, lag b, band) or clamped to its block
    h, k = 32, 4
    hb = h // k  # coarse b = 8, 16 bands; fine b = 16
    c = 1.0 - np.arange(2 * hb) / 64.0
    F = carry(_banded_toeplitz(h, 2 * hb, c), k, 0.0)
    S, T = np.tril_indices(2 * h)
    D = S - T
    inner = ((S % 2 == 0) | (S // 2 % hb != hb - 1)) & ((T % 2 == 0) | (T // 2 % hb != hb - 1))
    checked = inner & (D >= 3) & (D <= 2 * hb - 3)  # near lags only, no corner at lag 0 or hb
    assert checked.sum() > 200
    assert np.allclose(F[S[checked], T[checked]], 1.0 - (D[checked] / 2.0) / 64.0, rtol=0, atol=1e-14)


def test_carry_keeps_a_decay_it_normalises_by_exactly():
    # entries r_d^{2α} at every lag < b (coarse): each fine lag D < b gets scale·r_D^{2α}, whatever the corners
    h, k, alpha = 32, 4, 0.42  # coarse b = 8, 16 bands; fine b = 16, 32 bands
    d = np.arange(8)
    C = _banded_toeplitz(h, 8, _decay(d, alpha))
    F = carry(C, k, alpha, 0.9)
    S, T = np.tril_indices(2 * h)
    near = (S - T > 0) & (S - T < 16)
    assert np.allclose(F[S[near], T[near]], 0.9 * _decay(S[near] - T[near], alpha), rtol=1e-12, atol=0)
    assert np.allclose(np.diag(F), 1.0, rtol=0, atol=1e-15)
    assert np.all(np.tril(F, -16) == 0)  # the coarse lags ≥ hb are 0: so are the fine lags ≥ b


def test_carry_does_not_interpolate_across_lag_b():
    # 0.5 at the coarse lags 1 … hb − 1, −1 at hb … 2hb − 1 (α = 0: plain values); every fine lag below b is 0.5
    # and every one from b on is −1 (a bilinear interpolation in the lag would give −0.25 at lag b − 1)
    h, k = 32, 4
    hb = h // k
    c = np.r_[1.0, np.full(hb - 1, 0.5), np.full(hb, -1.0)]
    C = _banded_toeplitz(h, 2 * hb, c)
    F = carry(C, k, 0.0)
    S, T = np.tril_indices(2 * h)
    D = S - T
    assert np.all(F[S[(D > 0) & (D < 2 * hb)], T[(D > 0) & (D < 2 * hb)]] == 0.5)
    far = (D >= 2 * hb) & (D < 4 * hb)
    assert np.all(F[S[far], T[far]] == -1.0)


def test_carry_clamps_rows_and_columns_to_their_block_and_keeps_the_diagonal_positive():
    h, k = 16, 2  # coarse blocks of 8
    C = np.diag(np.arange(1.0, h + 1))
    C[8, 8] = -5.0
    F = carry(C, k, 0.3)
    assert np.all(np.diag(F) > 0)
    assert F[15, 15] == pytest.approx(8.0, abs=1e-15) and F[13, 13] == pytest.approx(7.5, abs=1e-15)


def test_chain_levels_error_and_sensitivity_are_exact():
    n, k = 128, 4
    r = chain_levels(n, k, seconds=4.0, levels=2)
    C = r.matrix
    b = n // k
    assert np.all(np.tril(C, -2 * b) == 0) and np.all(np.triu(C, 1) == 0)
    # Δ² by another code path (branch and bound over every pattern on |X|: an upper bound on any Gram)
    upper = pattern_upper_bound(np.abs(C.T @ C), b, k)[0]
    assert upper == pytest.approx(1.0, rel=1e-9)
    schema = min_separation(b, k)
    W = np.tril(np.ones((n, n)))
    dense = sensitivity_squared(C, schema).squared * np.linalg.norm(W @ np.linalg.inv(C)) ** 2
    assert dense == pytest.approx(r.error, rel=1e-9)  # cond(C) ≈ 10²: round-off far below
    assert r.sensitivity.squared == 1.0 and r.iterations > 0 and r.status in {"local_optimum", "user_limit"}


def test_optimize_runs_it_from_levels_min_n(monkeypatch):
    n, k = 128, 4
    monkeypatch.setattr(training_separation, "LEVELS_MIN_N", n)
    res = mmopt.optimize(mmopt.workload.prefix(n), participation=min_separation(n // k, k),
                         options={"seconds": 0, "chain_dual_seconds": 2, "chain_banded_seconds": 4})
    assert "free_banded_error" not in res.extra  # its 15 s go to the levels unless asked for
    assert res.extra["chain_banded_error"] == pytest.approx(res.objective, rel=1e-12)
    assert "chain_levels" in res.solver and res.lower_bound <= res.objective
    C = np.asarray(res.strategy.matrix, dtype=float)
    W = np.tril(np.ones((n, n)))
    exact = sensitivity_squared(C, min_separation(n // k, k)).squared * np.linalg.norm(W @ np.linalg.inv(C)) ** 2
    assert exact == pytest.approx(res.objective, rel=1e-8)


def test_optimize_starts_the_2b_bands_from_the_chain_duals_lagrangian_start(monkeypatch):
    from mmopt.participation import chain_banded as chain_module
    from mmopt.participation import chain_levels as levels_module
    from mmopt.participation.chain_banded import scaled_error
    n, k = 128, 4
    starts = []
    original = chain_module.chain_banded

    def spy(m, kk, *, start=None, **kwargs):
        starts.append(start)
        return original(m, kk, start=start, **kwargs)

    monkeypatch.setattr(chain_module, "chain_banded", spy)
    monkeypatch.setattr(levels_module, "chain_banded", spy)  # chain_levels' own reference
    res = mmopt.optimize(mmopt.workload.prefix(n), participation=min_separation(n // k, k),
                         options={"seconds": 0, "chain_dual_seconds": 3, "chain_banded_seconds": 2})
    assert "free_banded_error" not in res.extra  # the dual's start replaces the free band's unless asked for
    (start,) = starts
    assert start is not None and np.any(np.tril(start, -(n // k)) != 0)  # 2b bands used, not a b-band start
    assert res.objective <= scaled_error(start, n // k, k)[0] * (1 + 1e-12)  # never worse than its start
    assert res.lower_bound <= res.objective
    # from LEVELS_MIN_N steps: the levels from the dual's start at n/2
    monkeypatch.setattr(training_separation, "LEVELS_MIN_N", n)
    starts.clear()
    res = mmopt.optimize(mmopt.workload.prefix(n), participation=min_separation(n // k, k),
                         options={"seconds": 0, "chain_dual_seconds": 3, "chain_banded_seconds": 2})
    assert [None if s is None else s.shape for s in starts][0] == (n // 2, n // 2) and len(starts) == 2
    assert "chain_levels" in res.solver


def test_chain_levels_from_a_start_runs_its_levels():
    n, k = 128, 4
    start = chain_levels(64, k, seconds=1.0).matrix
    r = chain_levels(n, k, seconds=2.0, start=start)
    assert r.matrix.shape == (n, n) and np.all(np.tril(r.matrix, -2 * (n // k)) == 0)
    with pytest.raises(ValueError, match="'start' parameter of chain_levels must be m×m with m = n/2ʲ"):
        chain_levels(n, k, seconds=1.0, start=np.eye(96))
    with pytest.raises(TypeError, match="'levels' or 'start'"):
        chain_levels(n, k, seconds=1.0, start=start, levels=2)
    for bad in (np.tril(np.ones((64, 64))), start.T, start - np.diag(np.diag(start))):  # past 2b bands, upper, 0 diag
        with pytest.raises(ValueError, match="'start' parameter of chain_levels must be lower-triangular"):
            chain_levels(n, k, seconds=1.0, start=bad)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: carry(np.ones((4, 3)), 2, 0.4), "C"),
    (lambda: carry(np.eye(6), 4, 0.4), "'participations' parameter of carry must divide"),
    (lambda: carry(np.eye(8), 4, -0.1), "'decay' parameter of carry"),
    (lambda: carry(np.eye(8), 4, 0.4, 0.0), "'scale' parameter of carry"),
    (lambda: chain_levels(128, 4, seconds=-1.0), "seconds"),
    (lambda: chain_levels(128, 4, seconds=1.0, levels=0), "levels"),
    (lambda: chain_levels(96, 4, seconds=1.0, levels=5), "'levels' parameter of chain_levels must leave b"),
    (lambda: chain_levels(100, 3, seconds=1.0), "participations"),
    (lambda: free_levels(128, 4, seconds=1.0, levels=0), "levels"),
    (lambda: free_levels(96, 4, seconds=1.0, levels=5), "'levels' parameter of free_levels must leave b"),
    (lambda: free_levels(128, 4, seconds=0.0), "seconds"),
])
def test_bad_input_is_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_free_levels_error_and_sensitivity_are_exact_and_it_keeps_b_bands():
    n, k = 128, 4
    b = n // k
    r = free_levels(n, k, seconds=3.0, levels=2)
    C = r.matrix
    assert np.all(np.tril(C, -b) == 0) and np.all(np.triu(C, 1) == 0) and np.all(np.diag(C) > 0)
    schema = min_separation(b, k)
    s2 = sensitivity_squared(C, schema)  # pattern search, another code path than the dynamic programme
    assert s2.exact and s2.squared == pytest.approx(1.0, rel=1e-9)
    W = np.tril(np.ones((n, n)))
    assert np.linalg.norm(W @ np.linalg.inv(C)) ** 2 == pytest.approx(r.error, rel=1e-9)  # cond(C) ≈ 10²
    assert r.iterations > 0 and r.status in {"local_optimum", "user_limit"}


def test_free_banded_from_a_start_is_never_worse_than_it_and_refuses_a_start_off_its_band():
    n, k = 64, 4
    b = n // k
    coarse = free_banded(n // 2, k, max_iterations=30)
    start = carry(coarse.matrix, k, 0.4, 0.985)
    start = np.tril(start) - np.tril(start, -b)
    before = band_error(start, b, k)[0]
    r = free_banded(n, k, max_iterations=5, start=2.0 * start)  # any scale
    assert r.error <= before
    wide = start + np.diag(np.ones(n - b), -b)  # one band too many
    with pytest.raises(ValueError, match="'start' parameter of free_banded must be lower-triangular with at most b"):
        free_banded(n, k, max_iterations=1, start=wide)
    with pytest.raises(ValueError, match="'start' parameter of free_banded must be 64×64"):
        free_banded(n, k, max_iterations=1, start=np.eye(32))


def test_seconds_none_is_a_type_error():
    with pytest.raises(TypeError, match="'seconds' parameter of chain_levels"):
        chain_levels(128, 4, seconds=None)
    assert math.isfinite(chain_levels(64, 4, seconds=0.5).error)
