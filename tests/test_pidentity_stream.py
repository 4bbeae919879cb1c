"""mmopt.search.pidentity_stream: the p-Identity strategy's Woodbury algebra against its dense matrix, and the
strategy taken as itself by evaluate, release and the answers tables past the dense size."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz
from mmopt.dense.exact_answers import RELATIVE_CHARGE
from mmopt.dispatch import stream_native
from mmopt.error import NumericalError
from mmopt.search import pidentity_stream as ps
from mmopt.search.min_error_fast import hierarchy_theta
from mmopt.search.pidentity import PIdentityStrategy

LAPLACE = mmopt.Privacy(1.0)


@pytest.fixture
def small():
    rng = np.random.default_rng(3)
    n, p = 40, 5
    theta = rng.random((p, n)) * (rng.random((p, n)) < 0.4)
    return PIdentityStrategy(theta), rng


@pytest.mark.parametrize("chunk", [7, 4096])
def test_every_product_matches_the_dense_matrix(small, chunk, monkeypatch):
    monkeypatch.setattr(ps, "CHUNK", chunk)  # the running sums carried across chunks
    S, rng = small
    n = S.n
    A = S.to_dense()
    Xi = np.linalg.inv(A.T @ A)  # X = AᵀA is well conditioned here: X ⪰ D⁻² with d ≤ 3
    P = np.tril(np.ones((n, n)))
    x, y, Q = rng.random(n), rng.normal(size=n + S.p), rng.random((6, n))
    assert S.n_rows == A.shape[0] and np.allclose(S.apply(x), A @ x, rtol=1e-13, atol=0)
    assert np.allclose(S.estimate(y), np.linalg.lstsq(A, y, rcond=None)[0], rtol=1e-11, atol=1e-12)
    assert np.allclose(S.prefix_variances(), np.einsum("ij,jk,ik->i", P, Xi, P), rtol=1e-11, atol=0)
    assert np.allclose(S.query_norms(Q) ** 2, np.einsum("ij,jk,ik->i", Q, Xi, Q), rtol=1e-11, atol=0)
    assert S.sensitivity("l1") == 1.0 == pytest.approx(np.abs(A).sum(axis=0).max(), rel=1e-14)
    assert S.sensitivity("l2") == pytest.approx(np.sqrt((A * A).sum(axis=0)).max(), rel=1e-14)
    cells = np.arange(n)
    R = np.array([(cells >= i) & (cells <= j) for i in range(n) for j in range(i, n)], dtype=float)  # all ranges
    assert S.unit_total("prefix") == pytest.approx(np.trace(P @ Xi @ P.T), rel=1e-11)
    assert S.unit_total("all_range") == pytest.approx(np.trace(R @ Xi @ R.T), rel=1e-11)


def test_a_variance_float64_cannot_resolve_is_refused():
    theta = np.full((2, 6), 1e6)  # q X⁻¹ qᵀ = ‖Dq‖² − ‖L⁻¹ΘDq‖²: both ~10¹³, their difference ~1
    with pytest.raises(NumericalError, match=r"PIdentityStrategy\.prefix_variances: .* fewer than 8 digits"):
        PIdentityStrategy(theta).prefix_variances()


def test_past_the_dense_size_the_stream_family_takes_it_as_itself():
    n = 5000
    S = PIdentityStrategy(hierarchy_theta(n, 16))  # H₁₆ in p-Identity form
    assert stream_native(S) and not stream_native(PIdentityStrategy(hierarchy_theta(4096, 16)))
    W = toeplitz.prefix(n)
    report = mmopt.evaluate(W, S, LAPLACE)
    prefixes = S.prefix_variances()
    assert report.total_squared_error == pytest.approx(2.0 * S.unit_total("prefix"), rel=1e-12)
    assert report.max_variance == pytest.approx(2.0 * prefixes.max(), rel=1e-12) and report.max_variance_exact
    ranges = mmopt.evaluate(toeplitz.all_range(n), S, LAPLACE)  # the largest prefix's and a proven bound, said so
    assert ranges.max_variance == pytest.approx(2.0 * prefixes.max(), rel=1e-12) and not ranges.max_variance_exact
    assert ranges.max_variance_upper == pytest.approx(8.0 * prefixes.max(), rel=1e-12)
    x = np.arange(n) % 7.0
    out = mmopt.release(W, S, x, LAPLACE)
    # Δ₁ = 1 rounded up (10⁻⁷), the division's and the product's rounding charged (RELATIVE_CHARGE each)
    assert out.reconstruction.solver == "woodbury" and 1 + 2 * RELATIVE_CHARGE <= out.sensitivity < 1 + 2.2e-6
    # least squares is unbiased: x̂ − x is S.estimate of the noise alone, linear in it
    noise = out.measurements - S.apply(x)
    assert np.allclose(out.estimate - x, S.estimate(noise), atol=1e-8 * np.abs(noise).max() * n)
    table = mmopt.answers_table(out, W, S)
    assert np.allclose(table["standard_error"], np.sqrt(2.0 * prefixes) * out.noise_scale, rtol=1e-12)
    assert np.allclose(table["answer"], np.cumsum(out.estimate), rtol=1e-12)


def test_evaluate_matches_a_monte_carlo_run_of_the_mechanism():
    """y = A x + Laplace noise, x̂ by the Woodbury estimate, W x̂ the prefix answers: the empirical total and the
    worst prefix's variance agree with evaluate within 4 standard errors of the simulation, and the total is above
    the certified lower bound."""
    n, draws = 600, 2000  # the stream report at any n (mmopt.evaluate takes it so past 4,096 cells, above)
    S = PIdentityStrategy(hierarchy_theta(n, 16))
    W = toeplitz.prefix(n)
    report = toeplitz.evaluate(W, S, LAPLACE)  # Δ₁ = 1, ε = 1: Laplace scale 1, variance 2 per measurement
    rng = np.random.default_rng(11)
    x = rng.integers(0, 50, n).astype(float)
    Ax = S.apply(x)
    t = report.max_variance_query[1]
    totals, worst = np.empty(draws), np.empty(draws)
    for i in range(draws):
        err = np.cumsum(S.estimate(Ax + rng.laplace(0.0, 1.0, Ax.size)) - x)
        totals[i], worst[i] = err @ err, err[t]
    assert abs(totals.mean() - report.total_squared_error) < 4 * totals.std(ddof=1) / np.sqrt(draws)
    sq = worst ** 2
    assert abs(sq.mean() - report.max_variance) < 4 * sq.std(ddof=1) / np.sqrt(draws)
    assert report.total_squared_error >= 2.0 * toeplitz.lower_bound(W).value


def test_the_release_answers_are_rounded_as_the_proof_charges():
    """exact_apply: x_j/d_j one correctly rounded division, Θ times those correctly rounded (a Fraction oracle),
    so |ŷ − A x| ≤ 2u·|A| x entrywise (the exact A x in Fractions), what the release charges twice."""
    from fractions import Fraction
    rng = np.random.default_rng(5)
    theta = rng.standard_normal((3, 40)) * np.exp2(rng.integers(-20, 5, (3, 40)))
    x = rng.integers(0, 2**32 // 40, 40).astype(float)
    y = ps.exact_apply(theta, x, caller="test")
    d = ps.column_scale(theta)
    t = x / d
    assert np.array_equal(y[:40], t)
    for i in range(3):
        kept = sum(Fraction(theta[i, j]) * Fraction(t[j]) for j in range(40))
        assert y[40 + i] == float(kept)
        exact = sum(Fraction(theta[i, j]) * Fraction(int(x[j])) / Fraction(d[j]) for j in range(40))
        magnitude = sum(abs(Fraction(theta[i, j])) * Fraction(int(x[j])) / Fraction(d[j]) for j in range(40))
        assert abs(Fraction(y[40 + i]) - exact) <= Fraction(2.0**-52) * magnitude * (1 + Fraction(2.0**-50))
