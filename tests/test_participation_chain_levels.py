"""The 2b-band strategy coarse to fine: the prolongation against its closed form on a banded Toeplitz matrix and
its band, the result's error against dense computation and its sensitivity against branch and bound, the route's
use of it, and bad input refused."""

import math

import numpy as np
import pytest

import mmopt
from mmopt.family import training_separation
from mmopt.participation import min_separation, sensitivity_squared
from mmopt.participation.chain_levels import chain_levels, free_levels, prolong
from mmopt.participation.free_banded import band_error, free_banded
from mmopt.participation.patterns import pattern_upper_bound


def _banded_toeplitz(n, bands, c):
    return sum(np.diag(np.full(n - d, c[d]), -d) for d in range(bands))


def test_prolong_of_a_banded_toeplitz_matrix_interpolates_its_coefficients():
    h, k = 32, 4  # coarse b = 8, 16 bands; fine b = 16, 32 bands
    c = 1.0 / np.sqrt(1.0 + np.arange(16))
    F = prolong(_banded_toeplitz(h, 16, c), k, 0.75)
    assert F.shape == (64, 64) and np.all(np.triu(F, 1) == 0) and np.all(np.tril(F, -32) == 0)
    # rows from 32 on read lags that exist in every coarse row: C_n(s, s − d) = 0.75·c(d/2), c linear between lags
    fine = np.interp(np.arange(32) / 2.0, np.arange(16), c)
    for s in (32, 41, 63):
        expected = np.where(np.arange(32) > 0, 0.75 * fine, fine)
        assert np.allclose(F[s, s - np.arange(32)], expected, rtol=0, atol=1e-15)


def test_prolong_keeps_the_diagonal_positive_and_clamps_rows_to_their_block():
    h, k = 16, 2  # coarse blocks of 8 rows
    C = np.diag(np.arange(1.0, h + 1))
    C[8, 8] = -5.0  # a negative coarse diagonal entry becomes the floor, never ≤ 0
    F = prolong(C, k, 0.5)
    assert np.all(np.diag(F) > 0)
    # fine row 15 = coarse row 7.5: the last of the first block, so row 7 alone (not halfway to row 8)
    assert F[15, 15] == pytest.approx(8.0, abs=1e-15) and F[14, 14] == pytest.approx(8.0, abs=1e-15)
    assert F[13, 13] == pytest.approx(7.5, abs=1e-15)


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
    (lambda: prolong(np.eye(6), 4, 0.7), "'participations' parameter of prolong must divide"),
    (lambda: prolong(np.ones((4, 3)), 2, 0.7), "C"),
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
    start = prolong(coarse.matrix, k, 0.8)
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
