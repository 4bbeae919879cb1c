"""mmopt.toeplitz.weighted: the weighted square root's O(n log² n) error against dense matrices and the optimum."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz as T
from mmopt.toeplitz import _triangular, weighted


@pytest.mark.parametrize("n", [1, 2, 3, 31, 64, 100])
def test_triangular_products_match_dense(n, rng):
    c, q = rng.standard_normal(2 * n), rng.standard_normal(n)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    upper = j > i
    hankel = np.where(upper, c[np.minimum(i + j, 2 * n - 1)], 0.0)
    toeplitz = np.where(upper, c[np.abs(j - i)], 0.0)
    np.testing.assert_allclose(_triangular.upper_hankel(c, q), hankel @ q, rtol=0, atol=1e-12 * n)
    np.testing.assert_allclose(_triangular.upper_toeplitz(c, q), toeplitz @ q, rtol=0, atol=1e-12 * n)


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
@pytest.mark.parametrize("power", [0.5, -0.5, 1.0])
def test_spectral_sequence_is_toeplitz_minus_hankel(kind, power):
    n = 12
    a = weighted.spectral_sequence(kind, n, power)
    i = np.arange(1, n + 1)
    lo, hi = np.minimum.outer(i, i), np.maximum.outer(i, i)
    G = lo.astype(float) if kind == "prefix" else lo * (n - hi + 1.0)  # prefix: the reversed frame min(i, j)
    lam, V = np.linalg.eigh(G)
    reference = (V * lam ** power) @ V.T
    np.testing.assert_allclose(a[np.abs(i[:, None] - i[None, :])] - a[i[:, None] + i[None, :]], reference,
                               rtol=0, atol=1e-10 * np.abs(reference).max())


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
@pytest.mark.parametrize("n", [1, 2, 17, 130])
def test_error_matches_dense_mmopt(kind, n):
    Wd = mmopt.workload.prefix(n) if kind == "prefix" else mmopt.workload.all_range(n)
    A = T.weighted_sqrt(Wd).to_dense()
    np.testing.assert_allclose(np.linalg.norm(A, axis=0), 1.0, rtol=1e-10)  # Δ₂ = 1
    d = mmopt.evaluate(Wd, mmopt.Strategy(A), norm="l2")
    r = T.evaluate(Wd, T.weighted_sqrt(Wd))
    assert r.total_squared_error == pytest.approx(d.total_squared_error, rel=1e-10)
    # exact on both (all ranges: NaN before, now from the dense M up to 1,024 cells, mmopt.toeplitz.range_variance)
    assert r.max_variance_exact and r.max_variance == pytest.approx(d.max_variance, rel=1e-9)
    if r.workload.startswith("prefix("):  # all_range(1) is prefix(1): the same single query
        t = r.max_variance_query[1]
        assert d.per_query_variance[t] == pytest.approx(d.max_variance, rel=1e-10)


@pytest.mark.parametrize("kind, n, limit", [("prefix", 256, 1.0035), ("all_range", 128, 1.0002)])
def test_close_to_the_certified_dense_optimum(kind, n, limit):
    """Measured: 1.0031× the optimum on prefix(256), 1.00003× on all_range(128)."""
    Wd = mmopt.workload.prefix(n) if kind == "prefix" else mmopt.workload.all_range(n)
    opt = mmopt.optimize(Wd, method="l2_approx")
    r = T.evaluate(Wd, T.weighted_sqrt(Wd))
    assert opt.status == "optimal"
    assert opt.objective <= r.total_squared_error < limit * opt.objective


def test_large_n_is_certified_within_half_a_percent():
    n = 2**16
    for W, limit in ((T.prefix(n), 1.004), (T.all_range(n), 1.0001)):
        res = T.optimize(W, "weighted_sqrt")
        assert res.status == "closed_form" and 1.0 < res.ratio < limit
        assert res.lower_bound == pytest.approx(T.lower_bound(W).value)


def test_budget_scaling_and_refusals():
    W = T.prefix(20)
    unit = T.evaluate(W, T.weighted_sqrt(W)).total_squared_error
    p = mmopt.Privacy(1.0, delta=1e-6)
    assert T.evaluate(W, T.weighted_sqrt(W), p).total_squared_error == pytest.approx(p.variance_factor * unit)
    with pytest.raises(ValueError, match="Gaussian noise"):
        T.evaluate(W, T.weighted_sqrt(W), mmopt.Privacy(1.0))
    with pytest.raises(ValueError, match="built for prefix"):
        T.evaluate(T.all_range(20), T.weighted_sqrt(W))
    with pytest.raises(ValueError, match="GB"):
        T.weighted_sqrt(T.prefix(2**20)).to_dense()


def test_all_ranges_largest_variance_is_exact_past_the_dense_limit():
    """Past 1,024 cells (range_variance.EXACT_MAX_N) the report gave the proven bound 4·max prefix variance, four
    times the truth; now range_maximum's O(n²) pass is exact to RANGE_EXACT_MAX_N cells (dense oracle at 1,100)."""
    from mmopt.toeplitz.range_variance import EXACT_MAX_N, unit_range_variances
    from mmopt.toeplitz.weighted import RANGE_EXACT_MAX_N
    n = 1100
    assert n > EXACT_MAX_N
    r = T.evaluate(T.all_range(n), T.weighted_sqrt(T.all_range(n)))
    V = unit_range_variances(T.weighted_sqrt(T.all_range(n)).to_dense())
    assert r.max_variance_exact
    assert r.max_variance == pytest.approx(V.max(), rel=1e-10)  # κ(AᵀA) ~ 10³: round-off of the dense inverse
    assert V[r.max_variance_query] == pytest.approx(V.max(), rel=1e-10)
    eps = mmopt.Privacy(0.5, 1e-6)
    scaled = T.evaluate(T.all_range(n), T.weighted_sqrt(T.all_range(n)), eps)
    assert scaled.max_variance == pytest.approx(V.max() * scaled.variance_factor, rel=1e-10)
    past = T.evaluate(T.all_range(RANGE_EXACT_MAX_N + 1), T.weighted_sqrt(T.all_range(RANGE_EXACT_MAX_N + 1)))
    assert not past.max_variance_exact and past.max_variance > 0
