"""Tests for mmopt.mechanism: reproducibility, Monte-Carlo agreement with mmopt.evaluate, least squares,
the OpenDP release path, and input validation.

Monte-Carlo checks compare a sample mean with its exact expectation within ±5 standard errors
estimated from the same sample (a false-failure rate of ~1e-6 per comparison under normality).
"""

import sys

import numpy as np
import pytest

import mmopt
from mmopt import strategy as S
from mmopt import workload as Wk
from mmopt.mechanism import (
    LeastSquares,
    MechanismOutput,
    factorize,
    laplace_mechanism,
    matrix_mechanism,
    release,
)

N = 8
X = np.array([5.0, 0.0, 3.0, 12.0, 7.0, 1.0, 0.0, 9.0])
LAP, GAU = mmopt.Privacy(1.0), mmopt.Privacy(0.5, 1e-5)
DRAWS = 20_000
Z = 5.0  # standard errors allowed


def _within(sample: np.ndarray, expected) -> None:
    """Assert the mean of ``sample`` along axis 0 is within Z standard errors of ``expected``."""
    mean = sample.mean(axis=0)
    se = sample.std(axis=0, ddof=1) / np.sqrt(sample.shape[0])
    z = np.abs(mean - expected) / se
    assert np.all(z <= Z), f"mean {mean} vs expected {expected}: {np.max(z):.2f} standard errors off"


# -- reproducibility ---------------------------------------------------------------------------------
@pytest.mark.parametrize("privacy", [LAP, GAU])
def test_same_seed_same_output_different_seed_different(privacy):
    W, H = Wk.all_range(N), S.hierarchical(N)
    a = matrix_mechanism(W, H, X, privacy, rng=123)
    b = matrix_mechanism(W, H, X, privacy, rng=123)
    c = matrix_mechanism(W, H, X, privacy, rng=124)
    d = matrix_mechanism(W, H, X, privacy, rng=np.random.default_rng(123))
    assert np.array_equal(a.answers, b.answers) and np.array_equal(a.measurements, b.measurements)
    assert np.array_equal(a.answers, d.answers)
    assert not np.allclose(a.answers, c.answers)
    la, lb = laplace_mechanism(W, X, privacy, rng=5), laplace_mechanism(W, X, privacy, rng=5)
    assert np.array_equal(la.answers, lb.answers)
    assert not np.allclose(la.answers, laplace_mechanism(W, X, privacy, rng=6).answers)


def test_output_fields_and_shapes():
    W, H = Wk.all_range(N), S.hierarchical(N)
    one = matrix_mechanism(W, H, X, LAP, rng=0)
    many = matrix_mechanism(W, H, X, LAP, rng=0, size=3)
    assert isinstance(one, MechanismOutput)
    assert one.answers.shape == (36,) and one.estimate.shape == (N,) and one.measurements.shape == (15,)
    assert many.answers.shape == (3, 36) and many.estimate.shape == (3, N)
    assert many.measurements.shape == (3, 15)
    assert (one.noise, one.path, one.noise_scale, one.sensitivity) == ("laplace", "simulation", 4.0, 4.0)
    g = matrix_mechanism(W, H, X, GAU, rng=0)
    assert g.noise == "gaussian" and g.noise_scale == pytest.approx(GAU.noise_scale(2.0))
    gram_only = Wk.Workload.from_gram(W.gram, n_queries=W.n_queries)
    out = matrix_mechanism(gram_only, H, X, LAP, rng=0)
    assert out.answers is None and out.estimate.shape == (N,)


# -- Monte Carlo against the exact error analysis --------------------------------------------------------
@pytest.mark.parametrize("privacy", [LAP, GAU], ids=["laplace", "gaussian"])
@pytest.mark.parametrize("make", [S.identity, S.hierarchical, S.wavelet], ids=["I", "H", "Y"])
def test_monte_carlo_matches_evaluate(make, privacy):
    W, A = Wk.all_range(N), make(N)
    report = mmopt.evaluate(W, A, privacy)
    out = matrix_mechanism(W, A, X, privacy, rng=2024, size=DRAWS)
    err = out.answers - W.explicit_matrix() @ X
    _within(np.sum(err**2, axis=1), report.total_squared_error)          # total squared error
    _within(err**2, report.per_query_variance)                            # each query's variance
    _within(err, np.zeros(W.n_queries))                                   # unbiased: E[W x̂] = W x


@pytest.mark.parametrize("privacy", [LAP, GAU], ids=["laplace", "gaussian"])
def test_laplace_mechanism_error(privacy):
    W = Wk.all_range(N)
    Wm = W.explicit_matrix()
    out = laplace_mechanism(W, X, privacy, rng=11, size=DRAWS)
    delta = S.Strategy(Wm).sensitivity(privacy.sensitivity_norm)  # cell j is in j(n−j+1) ranges:
    # Δ₁ = 20, Δ₂ = √20
    expected = privacy.variance_factor * delta**2 * W.n_queries          # (2/ε²)Δ_W²m for Laplace
    if privacy.delta == 0:
        assert delta == 20 and expected == 2 * 20**2 * 36
    err = out.answers - Wm @ X
    _within(np.sum(err**2, axis=1), expected)
    _within(err, np.zeros(W.n_queries))


# -- least squares -------------------------------------------------------------------------------------
@pytest.mark.parametrize("A", [S.hierarchical(N).matrix, S.wavelet(N).matrix,
                               np.random.default_rng(1).normal(size=(12, N))], ids=["H", "Y", "random"])
def test_least_squares_equals_pseudo_inverse(A):
    out = matrix_mechanism(Wk.all_range(N), A, X, LAP, rng=3, size=5)
    expected = out.measurements @ np.linalg.pinv(A).T
    np.testing.assert_allclose(out.estimate, expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(factorize(A).solve(out.measurements[0]), expected[0], rtol=1e-10, atol=1e-10)


def test_factorization_reuse_and_svd_fallback():
    H = S.hierarchical(N)
    out = matrix_mechanism(Wk.all_range(N), H, X, LAP, rng=9, size=4)
    ls = factorize(H)   # one factorisation, many measurement vectors
    np.testing.assert_allclose(ls.solve(out.measurements), out.estimate, rtol=1e-12)
    np.testing.assert_allclose(ls.solve(out.measurements[2]), out.estimate[2], rtol=1e-12)
    ill = np.diag(np.logspace(0, -10, N))   # κ = 1e10 → SVD path
    assert factorize(ill).method == "svd" and factorize(ill).rank == N


def test_rank_deficient_strategy_that_supports_the_workload():
    pairs = np.kron(np.eye(N // 2), np.ones((1, 2)))                     # queries on pairs of cells only
    W = Wk.Workload.from_matrix(Wk.all_range(N // 2).explicit_matrix() @ pairs, name="pair ranges")
    A = S.Strategy(S.hierarchical(N // 2).matrix @ pairs, name="H on pairs")  # 7×8, rank 4
    ls = factorize(A)
    assert (ls.method, ls.rank) == ("svd", 4)
    out = matrix_mechanism(W, A, X, LAP, rng=4, size=DRAWS)
    pinv = np.linalg.pinv(A.matrix)
    np.testing.assert_allclose(out.estimate[:5], out.measurements[:5] @ pinv.T, atol=1e-10)
    err = out.answers - W.matrix @ X
    _within(np.sum(err**2, axis=1), mmopt.evaluate(W, A, LAP).total_squared_error)
    _within(err, np.zeros(W.n_queries))
    with pytest.raises(ValueError, match="does not support workload"):
        matrix_mechanism(Wk.identity(N), A, X, LAP, rng=0)


# -- release path (OpenDP) ------------------------------------------------------------------------------
@pytest.mark.parametrize("privacy", [LAP, GAU], ids=["laplace", "gaussian"])
def test_release_runs_and_noise_has_the_right_scale(privacy):
    pytest.importorskip("opendp")
    W, H = Wk.all_range(N), S.hierarchical(N)
    first = release(W, H, X, privacy)
    assert first.path == "release" and first.answers.shape == (36,) and first.measurements.shape == (15,)
    sim_scale = privacy.noise_scale(H.sensitivity(privacy.sensitivity_norm))
    assert sim_scale <= first.noise_scale <= (1.0 + 1e-9 if privacy.delta == 0 else 1.15) * sim_scale
    np.testing.assert_allclose(first.answers, W.explicit_matrix() @ first.estimate)
    # ~300 releases at the calibrated scale (skipping the search): 4500 noise entries.
    z = np.concatenate([release(W, H, X, privacy, noise_scale=first.noise_scale).measurements - H.matrix @ X
                        for _ in range(300)])
    var = first.noise_scale**2 * (2.0 if privacy.delta == 0 else 1.0)
    assert abs(z.mean()) < 0.15 * np.sqrt(var)                             # se ≈ 0.015·σ
    assert 0.8 < np.var(z) / var < 1.2                                     # se ≈ 3% (Laplace), 2% (Gaussian)


def test_release_refuses_what_opendp_cannot_verify():
    pytest.importorskip("opendp")
    W, H = Wk.all_range(N), S.hierarchical(N)
    with pytest.raises(ValueError, match="does not verify"):   # Laplace scale just below Δ₁/ε
        release(W, H, X, LAP, noise_scale=0.99 * LAP.noise_scale(4.0))
    with pytest.raises(ValueError, match="does not verify"):   # analytic σ: OpenDP's zCDP bound is looser
        release(W, H, X, GAU, noise_scale=GAU.noise_scale(2.0))


def test_release_without_opendp(monkeypatch):
    monkeypatch.setitem(sys.modules, "opendp", None)
    monkeypatch.setitem(sys.modules, "opendp.prelude", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[release\]'"):
        release(Wk.all_range(N), S.hierarchical(N), X, LAP)


# -- input validation -------------------------------------------------------------------------------------
W8, H8 = Wk.all_range(N), S.hierarchical(N)
BAD = [
    (matrix_mechanism, (W8, H8, X[:7], LAP), {}, ValueError,
     r"The 'x' parameter of matrix_mechanism must have length 8 \(the domain size n\)\. Got length 7\."),
    (matrix_mechanism, (W8, H8, np.r_[X[:7], np.nan], LAP), {}, ValueError,
     "'x' parameter of matrix_mechanism must be finite"),
    (matrix_mechanism, (W8, H8, np.r_[X[:7], -1.0], LAP), {}, ValueError,
     "'x' parameter of matrix_mechanism must hold counts >= 0"),
    (matrix_mechanism, (W8, H8, "abc", LAP), {}, TypeError, "'x' parameter of matrix_mechanism"),
    (matrix_mechanism, (W8, S.hierarchical(4), X, LAP), {}, ValueError,
     "domain size n=8 but the strategy has n=4"),
    (matrix_mechanism, (W8, H8, X, 1.0), {}, TypeError,
     "'privacy' parameter of matrix_mechanism must be a Privacy"),
    (matrix_mechanism, (W8.gram, H8, X, LAP), {}, TypeError, "'workload' parameter of matrix_mechanism"),
    (matrix_mechanism, (W8, W8, X, LAP), {}, TypeError, "'strategy' parameter of matrix_mechanism"),
    (matrix_mechanism, (W8, H8, X, LAP), {"rng": "seed"}, TypeError, "'rng' parameter of matrix_mechanism"),
    (matrix_mechanism, (W8, H8, X, LAP), {"rng": -1}, ValueError, "'rng' parameter of matrix_mechanism"),
    (matrix_mechanism, (W8, H8, X, LAP), {"rng": True}, TypeError, "'rng' parameter of matrix_mechanism"),
    (matrix_mechanism, (W8, H8, X, LAP), {"size": 0}, ValueError, "'size' parameter of matrix_mechanism"),
    (matrix_mechanism, (Wk.identity(N), S.Strategy(np.ones((1, N))), X, LAP), {}, ValueError,
     "does not support"),
    (laplace_mechanism, (Wk.Workload.from_gram(np.eye(N), n_queries=N), X, LAP), {}, ValueError,
     "laplace_mechanism needs the explicit query matrix W"),
    (laplace_mechanism, (W8, X[:7], LAP), {}, ValueError,
     "'x' parameter of laplace_mechanism must have length 8"),
    (laplace_mechanism, (W8, X, LAP), {"size": 2.0}, TypeError, "'size' parameter of laplace_mechanism"),
    (laplace_mechanism, (W8, X, None), {}, TypeError, "'privacy' parameter of laplace_mechanism"),
    (laplace_mechanism, (W8, X, LAP), {"rng": 1.5}, TypeError, "'rng' parameter of laplace_mechanism"),
    (release, (W8, H8, X[:7], LAP), {}, ValueError, "'x' parameter of release must have length 8"),
    (release, (W8, H8, -X, LAP), {}, ValueError, "'x' parameter of release must hold counts >= 0"),
    (release, (W8, H8, X, LAP), {"noise_scale": 0.0}, ValueError, "'noise_scale' parameter of release"),
]


@pytest.mark.parametrize(("func", "args", "kwargs", "exc", "match"), BAD,
                         ids=[f"{b[0].__name__}-{i}" for i, b in enumerate(BAD)])
def test_invalid_inputs(func, args, kwargs, exc, match):
    if func is release:
        pytest.importorskip("opendp")
    with pytest.raises(exc, match=match):
        func(*args, **kwargs)


def test_solve_rejects_wrong_shape():
    with pytest.raises(ValueError, match=r"'y' parameter of LeastSquares.solve must have shape \(15,\)"):
        factorize(H8).solve(np.zeros(14))
    assert isinstance(factorize(H8), LeastSquares)


@pytest.mark.parametrize("k", [-1000, -500, 0, 500, 1000])
@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_upper_sensitivity_is_a_tight_upper_bound(norm, k):
    """Against exact rational arithmetic: Δ ≤ d_in ≤ Δ·(1 + 1e-12), at scales where AᵀA would over/underflow."""
    from fractions import Fraction

    from mmopt.mechanism import _upper_sensitivity

    rng = np.random.default_rng(k + 2000)
    A = np.ldexp(rng.normal(size=(50, 6)), k)
    d = _upper_sensitivity(A, norm, "test")
    if norm == "l1":
        exact = max(sum(Fraction(abs(a)) for a in col) for col in A.T)
        assert exact <= Fraction(d) <= exact * Fraction(1 + 1e-12)
    else:
        exact = max(sum(Fraction(a) ** 2 for a in col) for col in A.T)
        assert exact <= Fraction(d) ** 2 <= exact * Fraction(1 + 1e-12)


def test_an_output_points_at_the_table_for_intervals_and_standard_errors():
    # out.intervals / out.table are where a newcomer looks first; they live in mmopt.answers_table
    W, A = Wk.prefix(4), S.hierarchical(4)
    out = mmopt.release(W, A, [1, 2, 3, 4], mmopt.Privacy(1.0))
    with pytest.raises(AttributeError, match=r"'MechanismOutput' object has no attribute 'intervals'; .*"
                                             r"mmopt\.answers_table\(out, W, A, alpha=0\.05\)"):
        _ = out.intervals
    with pytest.raises(AttributeError, match=r"no attribute 'nonsense'$"):
        _ = out.nonsense
    assert not hasattr(out, "table") and hasattr(out, "answers")
    t = mmopt.answers_table(out, W, A, alpha=0.05)
    assert list(t["lower"] <= t["answer"]) == [True] * 4
