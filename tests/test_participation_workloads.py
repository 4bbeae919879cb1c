"""Training workloads beyond prefix sums (momentum, learning-rate schedules): their matrices against the SGD
recursion, the certified optimum and banded strategies on them against the dense SDP (cvxpy, Clarabel) with the
exact sensitivity constraint, and the pinching bound of a dense Gram."""

import numpy as np
import pytest
from _participation_sdp import sdp_optimum

import mmopt
from mmopt.participation import (
    cosine_decay,
    fixed_epochs,
    learning_rate_workload,
    linear_decay,
    min_separation,
    momentum,
    sensitivity_squared,
    toeplitz_workload,
)
from mmopt.participation.banded import banded_error, dense_diagonal_bound, equalized_error, optimize_banded
from mmopt.participation.bound import diagonal_bound
from mmopt.participation.workloads import toeplitz_coefficients


def test_momentum_is_the_heavy_ball_recursion():
    n, beta = 7, 0.8
    rng = np.random.default_rng(0)
    g = rng.standard_normal(n)
    v, theta, iterates = 0.0, 0.0, []
    for t in range(n):  # v_t = β v_{t−1} + g_t, θ_t = θ_{t−1} + v_t (unit step)
        v = beta * v + g[t]
        theta += v
        iterates.append(theta)
    np.testing.assert_allclose(momentum(n, beta).matrix @ g, iterates, rtol=1e-13)
    np.testing.assert_array_equal(momentum(n, 0.0).matrix, np.tril(np.ones((n, n))))


def test_learning_rate_workload_is_the_sgd_recursion_and_semiseparable():
    n, beta = 9, 0.5
    eta = cosine_decay(n, 0.1)
    rng = np.random.default_rng(1)
    g = rng.standard_normal(n)
    v, theta, iterates = 0.0, 0.0, []
    for t in range(n):
        v = beta * v + g[t]
        theta += eta[t] * v
        iterates.append(theta)
    W = learning_rate_workload(eta, beta=beta).matrix
    np.testing.assert_allclose(W @ g, iterates, rtol=1e-13)
    # lower semiseparable of rank ≤ 2: every block below the diagonal has rank ≤ 2, and W is not Toeplitz
    for s in range(1, n):
        assert np.linalg.matrix_rank(W[s:, :s], tol=1e-10) <= 2
    assert toeplitz_coefficients(learning_rate_workload(eta, beta=beta)) is None
    np.testing.assert_allclose(linear_decay(5, 0.2)[[0, -1]], [1.0, 0.2])


def test_toeplitz_coefficients_round_trip():
    a = np.array([2.0, -1.0, 0.5, 0.25])
    np.testing.assert_array_equal(toeplitz_coefficients(toeplitz_workload(a)), a)
    assert toeplitz_coefficients(mmopt.workload.all_range(4)) is None


@pytest.mark.parametrize("make,k", [(lambda: momentum(8, 0.9), 2), (lambda: momentum(12, 0.5), 3),
                                    (lambda: learning_rate_workload(cosine_decay(12, 0.05), beta=0.3), 3)])
def test_certified_optimum_matches_the_dense_sdp(make, k):
    W = make()
    res = mmopt.optimize(W, participation=fixed_epochs(k), tol=1e-7)
    sdp = sdp_optimum(W.gram, fixed_epochs(k).patterns(W.domain_size))
    # Clarabel's default accuracy is ~1e-8 relative; the certificate brackets its value up to that
    assert res.lower_bound <= sdp * (1 + 1e-6) and res.objective >= sdp * (1 - 1e-6)
    assert res.status == "optimal" and res.objective <= res.lower_bound * (1 + 1e-6)
    C = res.strategy.matrix
    np.testing.assert_array_equal(C, np.tril(C))  # causal
    assert sensitivity_squared(C, fixed_epochs(k)).squared == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("schema", [fixed_epochs(4), min_separation(3, 3)])
def test_banded_on_momentum_is_exact_and_above_the_sdp(schema):
    n = 12
    W = momentum(n, 0.9)
    res = mmopt.optimize(W, participation=schema, method="banded")
    C = res.strategy.to_dense()
    b = schema.separation(n)
    assert np.all(np.tril(C, -b) == 0) and res.extra["sensitivity_exact"]  # ≤ b bands
    assert np.all(C.T @ C >= 0)  # so each pattern's Δ² is 1ᵀX_π1: brute force over every pattern
    brute = max((C[:, list(p)].T @ C[:, list(p)]).sum() for p in schema.patterns(n))
    assert res.extra["sensitivity_squared"] == pytest.approx(brute, rel=1e-12)
    dense_error = brute * np.linalg.norm(W.matrix @ np.linalg.inv(C)) ** 2
    assert res.objective == pytest.approx(dense_error, rel=1e-9)
    sdp = sdp_optimum(W.gram, schema.patterns(n))
    assert res.lower_bound <= sdp * (1 + 1e-6) and res.objective >= sdp * (1 - 1e-6)


@pytest.mark.parametrize("equalize", [False, True])
def test_banded_gradient_against_finite_differences(equalize):
    a = momentum(32, 0.7).matrix[:, 0]
    rng = np.random.default_rng(3)
    c = np.concatenate([[1.0], 0.3 * rng.random(7)])
    u = rng.integers(1, 4, size=32).astype(float)
    f = (lambda c: equalized_error(a, c, 3)) if equalize else (lambda c: banded_error(a, c, u))
    L, grad = f(c)
    h = 1e-6
    for i in range(8):
        e = np.zeros(8)
        e[i] = h
        fd = (f(c + e)[0] - f(c - e)[0]) / (2 * h)
        # central differences: error O(h²·L''') ≈ 1e-12·L and cancellation ≈ 1e-16·L/h = 1e-10·L
        assert grad[i] == pytest.approx(fd, rel=1e-6, abs=1e-8 * L)


@pytest.mark.parametrize("equalize", [False, True])
def test_optimize_banded_beats_the_identity_and_stays_above_the_certified_optimum(equalize):
    n, schema = 128, fixed_epochs(4)
    W = momentum(n, 0.9)
    C, status, _ = optimize_banded(W.matrix[:, 0], schema, equalize=equalize)
    assert status == "local_optimum" and (C.row_scale is not None) == equalize
    D = C.to_dense()
    error = sensitivity_squared(D, schema).squared * np.linalg.norm(W.matrix @ np.linalg.inv(D)) ** 2
    identity = 4 * np.linalg.norm(W.matrix) ** 2  # DP-SGD's independent noise: Δ² = k
    optimum = mmopt.optimize(W, participation=schema)
    assert optimum.lower_bound <= error < identity


@pytest.mark.parametrize("k", [2, 4])
def test_dense_diagonal_bound(k):
    G = mmopt.workload.prefix(64).gram
    closed = diagonal_bound(mmopt.toeplitz.prefix(64), fixed_epochs(k))
    dense = dense_diagonal_bound(G, fixed_epochs(k))
    # the dense root's round-off margin costs √(n·u)-scale relative accuracy (module docstring): ≤ 1e-4
    assert closed * (1 - 1e-4) <= dense <= closed * (1 + 1e-9)
    W = momentum(12, 0.9)
    assert dense_diagonal_bound(W.gram, fixed_epochs(k)) <= sdp_optimum(W.gram, fixed_epochs(k).patterns(12)) * (
        1 + 1e-6)


@pytest.mark.parametrize("call,error,match", [
    (lambda: momentum(8, 1.0), ValueError, "beta"),
    (lambda: momentum(8.0, 0.5), TypeError, "'n' parameter of momentum"),
    (lambda: toeplitz_workload([0.0, 1.0]), ValueError, "non-zero first entry"),
    (lambda: learning_rate_workload([1.0, -1.0]), ValueError, "positive"),
    (lambda: linear_decay(4, 0.0), ValueError, "final"),
    # min_separation(b, k) takes the cutting planes up to 2,048 steps (tests/test_participation_cutting.py); past
    # them the banded strategies, which a learning-rate schedule (not Toeplitz) has not
    (lambda: mmopt.optimize(learning_rate_workload(np.linspace(1.0, 0.1, 2050)), participation=min_separation(1, 2)),
     ValueError, "Toeplitz"),
])
def test_bad_input_is_refused(call, error, match):
    with pytest.raises(error, match=match):
        call()
