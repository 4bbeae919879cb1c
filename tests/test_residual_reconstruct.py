"""Residual measurements from marginal counts, and least-squares marginals, against dense least squares and
by Monte Carlo at d = 20 binary attributes (Gaussian and Laplace noise).

Tolerance against the dense x̂ = A⁺y: lstsq's relative error is about κ(A)·eps·‖y‖/‖x̂‖ with κ(A)² the spread of
the strategy's subspace eigenvalues, asserted < 1e5 (so κ < 320); 1e-10 relative to the largest entry leaves a
margin of ~10³ over round-off.
"""

import math

import numpy as np
import pytest

import mmopt
from mmopt.structured import residual as rp

REL = 1e-10


def _pairs(d):
    return [(i, j) for i in range(d) for j in range(i + 1, d)]


def _stacked(meas):
    """y in the row order of strategy.to_implicit().dense(): terms in subset order, each C-ordered."""
    return np.concatenate([meas.values[S].ravel() for S in meas.strategy.subsets])


@pytest.mark.parametrize("shape,marginals", [
    ((3, 4, 2), {(0, 1): 1.0, (1, 2): 2.0, (0,): 0.5, (): 1.5}),
    ((2, 3, 2, 5), {A: 1.0 for A in _pairs(4)} | {(0, 1, 3): 2.0}),
    ((4, 1, 3), {(0, 1, 2): 1.0, (1,): 1.0}),
])
@pytest.mark.parametrize("privacy", [mmopt.Privacy(1.0), mmopt.Privacy(1.0, 1e-6)])
def test_reconstruction_is_dense_least_squares(shape, marginals, privacy, rng):
    W = rp.marginal_workload(shape, marginals)
    A = rp.plan(W, norm=privacy.sensitivity_norm).strategy
    C = W.closure
    ell = A.weights**2 / C.cells
    assert ell.max() / ell.min() < 1e5
    x = rng.integers(0, 50, math.prod(shape)).astype(float)
    meas = rp.measure(A, x, privacy, rng=1)
    M = A.to_implicit().dense()
    xhat = np.linalg.lstsq(M, _stacked(meas), rcond=None)[0]       # min-norm least squares: x̂ = A⁺y
    X = xhat.reshape(shape)
    for S in W.sets:
        ref = X.sum(axis=tuple(i for i in range(len(shape)) if i not in S))
        got = rp.reconstruct(meas, S)
        assert got.shape == tuple(shape[i] for i in S)
        assert np.allclose(got, ref, rtol=0, atol=REL * max(1.0, np.abs(ref).max()))
    # without noise the reconstruction is exact, from a data vector or from per-marginal counts alike
    counts = rp.marginal_counts(x, shape, W.sets)
    exact = rp.reconstruct_all(rp.measure(A, counts), W.sets)
    for S in W.sets:
        assert np.allclose(exact[S], counts[S], rtol=1e-12, atol=1e-9)


def test_measurements_come_from_the_smallest_containing_marginal():
    shape = (3, 4, 5)
    x = np.arange(60.0)
    A = rp.plan(rp.marginal_workload(shape, [(0, 1), (1, 2)])).strategy
    counts = rp.marginal_counts(x, shape, [(0, 1), (1, 2)])
    a, b = rp.measure(A, counts), rp.measure(A, x)
    for S in A.subsets:
        assert np.allclose(a.values[S], b.values[S], rtol=1e-13, atol=1e-12)


def _records_counts(d, n_records, rng):
    R = rng.integers(0, 2, (n_records, d))
    R[:, 1] = R[:, 0] ^ (rng.random(n_records) < 0.1)               # some dependence
    counts = {}
    for i, j in _pairs(d):
        counts[(i, j)] = np.bincount(2 * R[:, i] + R[:, j], minlength=4).reshape(2, 2).astype(float)
    return counts


@pytest.mark.parametrize("privacy", [mmopt.Privacy(1.0, 1e-6), mmopt.Privacy(1.0)], ids=["gaussian", "laplace"])
def test_monte_carlo_per_marginal_error_at_d_20(privacy, rng):
    """Mean squared error of every reconstructed 2-way marginal on 20 binary attributes against the exact
    prediction. With R runs, each marginal's mean of e² over runs and its 4 cells has standard deviation at
    most √(2 + κ)·var/√R: Var(e²) = (2 + κ)var² for excess kurtosis κ, 0 for Gaussian and ≤ 3 for a linear
    combination of independent Laplace variables, and averaging correlated cells does not increase it. We
    allow 5 of those (190 marginals: a false alarm has probability < 1e-4) and check the mean error is 0."""
    d, R = 20, 4000
    counts = _records_counts(d, 500, rng)
    W = rp.marginal_workload((2,) * d, list(counts))
    A = rp.plan(W, norm=privacy.sensitivity_norm).strategy
    predicted = rp.evaluate(W, A, privacy).per_marginal_variance     # weights 1: per-cell variances
    meas = rp.measure(A, counts, privacy, rng=7, size=R)
    kurt = 0.0 if privacy.noise == "gaussian" else 3.0
    est = rp.reconstruct_all(meas, W.sets)
    total = 0.0
    for S, var in zip(W.sets, predicted, strict=True):
        e = est[S] - counts[S]
        mse = float(np.mean(e**2))
        assert abs(mse - var) <= 5 * math.sqrt(2 + kurt) * var / math.sqrt(R), (S, mse, var)
        assert abs(float(np.mean(e))) <= 5 * math.sqrt(var / R)
        total += 4 * mse
    expected = rp.evaluate(W, A, privacy).total_squared_error
    assert abs(total - expected) <= 5 * math.sqrt(2 + kurt) * expected / math.sqrt(R)


@pytest.mark.parametrize("call,error,match", [
    (lambda A: rp.measure(A, {(0,): np.ones(2)}), ValueError, "no marginal containing"),
    (lambda A: rp.measure(A, {(0, 1): np.ones(3)}), ValueError, "must hold, for \\(0, 1\\), a finite array"),
    (lambda A: rp.measure(A, np.ones(5)), ValueError, "'x' parameter of marginal_counts"),
    (lambda A: rp.measure(A, np.ones(6), size=3), ValueError, "'size' parameter of measure"),
    (lambda A: rp.measure(A.to_implicit(), np.ones(6)), TypeError, "'strategy' parameter of measure"),
    (lambda A: rp.measure(A, np.ones(6), privacy=1.0), TypeError, "'privacy' parameter of measure"),
    (lambda A: rp.reconstruct(rp.measure(A, np.ones(6)), (0, 1)), ValueError, "did not measure the residual"),
    (lambda A: rp.reconstruct(rp.measure(A, np.ones(6)), (0, 3)), ValueError, "'attributes' parameter of reconstruct"),
    (lambda A: rp.reconstruct({}, (0,)), TypeError, "'measurements' parameter of reconstruct"),
])
def test_bad_input(call, error, match):
    A = rp.residual_strategy((2, 3), {(): 1.0, (0,): 1.0, (1,): 1.0})
    with pytest.raises(error, match=match):
        call(A)


def test_counts_keyed_in_another_attribute_order_are_read_in_that_order():
    """{(1, 0): X.T} (indexed [a₁, a₀]) had its key sorted and its array not: on equal sizes the marginal came back
    transposed, silently (unequal sizes were refused). The axes follow the key now."""
    from mmopt.structured import residual as rp
    for shape in ((3, 3), (2, 3)):
        X = (np.arange(np.prod(shape), dtype=float) ** 2).reshape(shape)
        A = rp.residual_strategy(shape, {(): 1, (0,): 1, (1,): 1, (0, 1): 1})
        np.testing.assert_allclose(rp.reconstruct(rp.measure(A, {(1, 0): X.T}), (0, 1)), X, atol=1e-9)


def test_counts_naming_one_marginal_under_two_keys_are_refused():
    """{(0, 1): X, (1, 0): Y.T}: both keys sort to (0, 1) and the later silently replaced the earlier (the twin of
    plan's targets and residual_strategy's weights, which refused it; one check in closure.check_sets now)."""
    X = np.arange(6.0).reshape(2, 3)
    A = rp.residual_strategy((2, 3), {(): 1, (0,): 1, (1,): 1, (0, 1): 1})
    with pytest.raises(ValueError, match=r"'counts' parameter of measure names one attribute set twice"):
        rp.measure(A, {(0, 1): X, (1, 0): 2 * X.T})


def test_measure_refuses_marginals_of_two_tables():
    # each subset is summed from one given marginal, so these were measured side by side without a word
    import importlib
    rr = importlib.import_module("mmopt.structured.residual.reconstruct")
    A = rr.rs.residual_strategy((2, 3), {(): 1.0, (0,): 1.0, (1,): 1.0})
    with pytest.raises(ValueError, match=r"'counts' parameter of measure holds marginals that disagree"):
        rr.measure(A, {(0,): [1, 2], (1,): [100, 200, 300]}, None)
    with pytest.raises(ValueError, match="disagree"):  # at any scale: an absolute floor of 1 let 1e-20 pass
        rr.measure(A, {(0,): 1e-20 * np.array([1.0, 2]), (1,): 1e-20 * np.array([100.0, 200, 300])}, None)
    x = np.arange(6.0).reshape(2, 3)
    rr.measure(A, {(0, 1): 1e-20 * x, (1,): 1e-20 * x.sum(axis=0)}, None)  # one table's, tiny: still accepted
    m = rr.measure(A, {(0, 1): x, (1,): x.sum(axis=0)}, None)  # one table's marginals: measured as before
    assert np.allclose(rr.reconstruct(m, (1,)), x.sum(axis=0))
