"""Strategies with 2b bands under minimum separation: the chain's soft and exact maxima against brute force over
every pattern, its marginals and the objective's gradient against finite differences, the sensitivity of a
bandwidth-2b Gram against enumeration and branch and bound, the result's error against dense computation and the
certified bound, and never worse than its start."""

import math
from itertools import pairwise

import numpy as np
import pytest
from _participation_brute import all_patterns
from _participation_monte_carlo import assert_error_matches_the_mechanism

from mmopt.participation.chain_banded import (
    _gram_band,
    _objective,
    _times_gram_gradient,
    chain_banded,
    chain_sensitivity,
    chain_soft_max,
)
from mmopt.participation.cutting import solve_min_separation
from mmopt.participation.free_banded import free_banded
from mmopt.participation.patterns import pattern_upper_bound
from mmopt.participation.schemas import MinSeparation
from mmopt.participation.sensitivity import block_bounds, chain_pattern_max, gram_sensitivity_squared, pair_band


def _chain_value(p, dg, P, b):
    return dg[list(p)].sum() + 2 * sum(P[s, t - s - b] for s, t in pairwise(p) if t - s < 2 * b)


def _band_gram(n, b, seed, signed=False):
    """X = CᵀC for a random lower-triangular C with 2b bands (entries ≥ 0 unless signed)."""
    rng = np.random.default_rng(seed)
    C = np.tril(rng.random((n, n)) if not signed else rng.standard_normal((n, n)))
    C -= np.tril(C, -2 * b)
    C[np.diag_indices(n)] = np.abs(C[np.diag_indices(n)]) + 1.0
    return C, C.T @ C


@pytest.mark.parametrize("tau", [0.7, 5.0])
def test_chain_soft_max_is_the_log_sum_exp_over_every_pattern_and_its_gradient_the_marginals(tau):
    rng = np.random.default_rng(2)
    n, b, k = 14, 3, 3
    dg, P = rng.random(n), rng.random((n, b))
    pats = all_patterns(n, b, k)
    vals = np.array([_chain_value(p, dg, P, b) if p else 0.0 for p in pats])
    top = vals.max()
    want = (np.log(np.exp(tau * (vals - top)).sum()) + tau * top) / tau
    got, g_dg, g_P = chain_soft_max(dg, P, b, k, tau)
    assert got == pytest.approx(want, rel=1e-12)
    assert top <= got <= top + math.log(len(pats)) / tau + 1e-12
    assert chain_pattern_max(dg, P, b, k) == pytest.approx(top, rel=1e-13)
    h = 1e-6
    for i in (0, 5, n - 1):
        e = np.zeros(n)
        e[i] = h
        fd = (chain_soft_max(dg + e, P, b, k, tau)[0] - chain_soft_max(dg - e, P, b, k, tau)[0]) / (2 * h)
        assert g_dg[i] == pytest.approx(fd, rel=1e-6, abs=1e-9)
    for s, d in ((0, 0), (4, 2), (7, 1)):
        E = np.zeros((n, b))
        E[s, d] = h
        fd = (chain_soft_max(dg, P + E, b, k, tau)[0] - chain_soft_max(dg, P - E, b, k, tau)[0]) / (2 * h)
        assert g_P[s, d] == pytest.approx(fd, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sensitivity_of_a_bandwidth_2b_gram_matches_every_pattern(seed):
    n, b, k = 15, 3, 4
    _, X = _band_gram(n, b, seed)
    assert not np.any(np.abs(np.subtract.outer(np.arange(n), np.arange(n)))[X != 0] >= 2 * b)
    S = gram_sensitivity_squared(X, MinSeparation(b, k))
    brute = max(X[np.ix_(p, p)].sum() for p in all_patterns(n, b, k) if p)
    assert S.exact and "chain" in S.method
    assert S.squared == pytest.approx(brute, rel=1e-13)


@pytest.mark.parametrize("seed", [3, 4])
def test_sensitivity_with_negative_entries_brackets_every_patterns_exact_value(seed):
    n, b, k = 12, 3, 3  # few patterns: each one's block bracketed, inside the chain's bracket
    _, X = _band_gram(n, b, seed, signed=True)
    S = gram_sensitivity_squared(X, MinSeparation(b, k))
    blocks = [X[np.ix_(p, p)] for p in all_patterns(n, b, k) if p]
    lower = max(float(block_bounds(B[None])[0][0]) for B in blocks)  # each pattern's sign-vector lower bound
    assert S.lower == pytest.approx(lower, rel=1e-12) and lower <= S.squared * (1 + 1e-12)
    dg, P = np.diag(X), pair_band(X, b)
    assert S.squared <= chain_pattern_max(dg, np.abs(P), b, k) * (1 + 1e-12)
    assert S.lower >= chain_pattern_max(dg, P, b, k) * (1 - 1e-12)


def test_sensitivity_with_negative_entries_and_many_patterns_is_the_chain_on_abs_x():
    n, b, k = 60, 3, 6  # ~10⁷ patterns: the chain; its upper bound is max_π Σ|X_π| (branch and bound on |X|)
    _, X = _band_gram(n, b, 7, signed=True)
    S = gram_sensitivity_squared(X, MinSeparation(b, k))
    assert "chain" in S.method and S.lower <= S.squared
    upper = pattern_upper_bound(np.abs(X), b, k, rtol=1e-12)[0]
    assert S.squared == pytest.approx(upper, rel=1e-9)


@pytest.mark.parametrize("n,k", [(12, 2), (18, 3), (24, 4), (40, 8)])
def test_gram_band_and_its_adjoint_against_dense_products_on_every_band_entry(n, k):
    # both read C's column blocks only on the rows they share: a dense CᵀC and C·Γ check every entry they return
    b = n // k
    C, X = _band_gram(n, b, 11, signed=True)
    dg, P = _gram_band(C, b, k)
    np.testing.assert_allclose(dg, np.diag(X), rtol=1e-13)
    s, d = np.nonzero(np.ones((n, b)))
    inside = s + b + d < n
    np.testing.assert_allclose(P[s[inside], d[inside]], X[s[inside], s[inside] + b + d[inside]], rtol=1e-12,
                               atol=1e-12 * np.abs(X).max())
    rng = np.random.default_rng(12)
    diagonal, half = rng.standard_normal(n), rng.standard_normal((n, b))
    Gamma = np.diag(diagonal)
    Gamma[s[inside], s[inside] + b + d[inside]] = half[s[inside], d[inside]]
    Gamma[s[inside] + b + d[inside], s[inside]] = half[s[inside], d[inside]]
    band = np.tril(np.ones((n, n), dtype=bool)) & ~np.tril(np.ones((n, n), dtype=bool), -2 * b)
    expected = (C @ Gamma)[band]
    np.testing.assert_allclose(_times_gram_gradient(C, diagonal, half, b, k)[band], expected, rtol=1e-12,
                               atol=1e-12 * np.abs(expected).max())


def test_objective_gradient_matches_finite_differences():
    n, k = 24, 4
    b = n // k
    C, _ = _band_gram(n, b, 5)
    value, g = _objective(C, b, k, 30.0)
    rng = np.random.default_rng(6)
    rows, cols = np.nonzero(np.tril(np.ones((n, n))) - np.tril(np.ones((n, n)), -2 * b))
    h = 1e-6
    for i in rng.choice(rows.size, 12, replace=False):
        E = np.zeros((n, n))
        E[rows[i], cols[i]] = h
        fd = (_objective(C + E, b, k, 30.0)[0] - _objective(C - E, b, k, 30.0)[0]) / (2 * h)
        assert g[rows[i], cols[i]] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    assert _objective(C - np.diag(np.diag(C)), b, k, 30.0) == (math.inf, None)


def test_the_single_precision_search_objective_is_the_double_one_to_float32_round_off():
    # the search's steps from SINGLE_FROM steps (every reported error is recomputed in float64): float32's unit
    # round-off is 6e-8, the sums of n ≤ 96 products and one triangular inverse of a C with condition ~10 stay
    # within ~n·u of the value; the log's difference is the relative one
    n, k = 96, 4
    b = n // k
    C, _ = _band_gram(n, b, 7)
    value, g = _objective(C, b, k, 300.0)
    value32, g32 = _objective(C, b, k, 300.0, single=True)
    mask = (np.tril(np.ones((n, n))) - np.tril(np.ones((n, n)), -2 * b)) > 0
    assert abs(value32 - value) <= 1e-5 and g32.dtype == np.float64
    assert np.linalg.norm(g32[mask] - g[mask]) <= 1e-4 * np.linalg.norm(g[mask])


@pytest.mark.slow  # the default run's ~10 minutes (README): run with `pytest -m slow`
def test_chain_banded_beats_its_start_and_stays_above_the_certified_bound():
    n, k = 64, 8
    b = n // k
    band = free_banded(n, k, max_iterations=200)
    r = chain_banded(n, k, start=band.matrix, max_iterations=200)
    C = r.matrix
    assert np.allclose(C, np.tril(C)) and not np.any(np.tril(C, -2 * b))
    # the error at Δ = 1: dense, from C, and Δ² = 1 by branch and bound on |X| (another code path)
    Ci = np.linalg.inv(C)
    W = np.tril(np.ones((n, n)))
    assert r.error == pytest.approx(float(np.sum((W @ Ci) ** 2)), rel=1e-9)
    upper = pattern_upper_bound(np.abs(C.T @ C), b, k, rtol=1e-9)[0]
    assert upper == pytest.approx(1.0, rel=1e-8)
    # exact when X ≥ 0 on the worst pattern; a round-off-sized negative entry may leave a bracket of that size
    assert r.sensitivity.squared == pytest.approx(1.0, rel=1e-12) and r.sensitivity.lower > 1 - 1e-6
    # measured 3,256 against the free band's 3,297 (the SDP optimum over every pattern is 3,252.4, docstring)
    assert r.error <= 0.995 * band.error
    dual = solve_min_separation(n, b, k, tol=1e-3, seconds=10).dual
    assert r.error >= dual


def test_error_against_a_monte_carlo_run_of_the_mechanism():
    # C is triangular with a positive diagonal, so there is no rank-deficient case in this family
    r = chain_banded(32, 4, max_iterations=60)
    assert np.any(np.tril(r.matrix, -(32 // 4)))  # entries past b bands: the family's own strategy
    assert_error_matches_the_mechanism(r.matrix, r.error)


def test_chain_banded_never_returns_worse_than_its_start():
    band = free_banded(32, 4, max_iterations=50)
    r = chain_banded(32, 4, start=band.matrix, max_iterations=0)
    assert r.error == pytest.approx(band.error, rel=1e-9)
    assert r.status == "user_limit"


@pytest.mark.parametrize("kwargs, match", [
    (dict(n=30, participations=4), "must divide"),
    (dict(n=32, participations=4, start=np.ones((32, 32))), "2b = 16 bands"),
    (dict(n=32, participations=4, start=np.eye(16)), "must be 32×32"),
    (dict(n=32, participations=4, seconds=-1.0), "seconds"),
])
def test_chain_banded_refuses_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        chain_banded(**kwargs)



@pytest.mark.slow  # the default run's ~10 minutes (README): run with `pytest -m slow`
def test_optimize_takes_the_2b_band_strategy_when_it_is_better():
    import mmopt
    from mmopt.participation import min_separation, sensitivity_squared
    n, k = 64, 8
    schema = min_separation(n // k, k)
    # the free band asked for (by default the chain dual's start replaces it when the dual runs)
    res = mmopt.optimize(mmopt.workload.prefix(n), participation=schema,
                         options={"seconds": 3, "free_banded_seconds": 15})
    chain, free = res.extra["chain_banded_error"], res.extra["free_banded_error"]
    assert chain < free and res.objective <= chain * (1 + 1e-12)
    assert "chain_banded" in res.solver and "chain" in res.extra["sensitivity_method"]
    assert res.lower_bound <= res.objective
    C = np.asarray(res.strategy.matrix, dtype=float)
    W = np.tril(np.ones((n, n)))
    exact = sensitivity_squared(C, schema).squared * np.linalg.norm(W @ np.linalg.inv(C)) ** 2
    assert exact == pytest.approx(res.objective, rel=1e-8)
    without = mmopt.optimize(mmopt.workload.prefix(n), participation=schema,
                             options={"seconds": 3, "chain_banded_seconds": 0})
    assert "chain_banded_error" not in without.extra and res.objective < without.objective
    with pytest.raises(ValueError, match="chain_banded_seconds"):
        mmopt.optimize(mmopt.workload.prefix(n), participation=schema, options={"chain_banded_seconds": -1})


@pytest.mark.parametrize("seed, signed", [(0, False), (1, True), (2, True)])
def test_chain_sensitivity_from_the_band_is_the_dense_path_s(seed, signed):
    # the fast path (X's diagonal and lags b … 2b − 1 from _gram_band, 20× faster at 4,096 steps) against
    # gram_sensitivity_squared on CᵀC; n = 256, k = 4 has more patterns than are enumerated (signed: the chain on
    # |X|), and n = 24 fewer (the dense path then brackets each signed pattern, and chain_sensitivity takes it)
    for n, k in ((256, 4), (24, 4)):
        b = n // k
        rng = np.random.default_rng(seed)
        R = rng.random((n, n)) - (0.5 if signed else 0.0)
        C = np.tril(R) - np.tril(R, -2 * b) + np.diag(np.full(n, 2.0))  # 2b bands
        fast = chain_sensitivity(C, b, k)
        dense = gram_sensitivity_squared(C.T @ C, MinSeparation(b, k))
        assert fast.squared == pytest.approx(dense.squared, rel=1e-12) and fast.exact == dense.exact
        assert fast.lower == pytest.approx(dense.lower, rel=1e-12) and fast.method == dense.method
