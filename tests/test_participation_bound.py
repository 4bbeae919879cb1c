"""The diagonal bound under a schema: below the certified optimum (fixed epochs) and below every strategy's exact
error under the schema (minimum separation too), the single-participation diagonal bound at k = 1."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz
from mmopt.participation import fixed_epochs, min_separation, sensitivity_squared, single
from mmopt.participation.bound import diagonal_bound, gram_sqrt_entries
from mmopt.participation.optimum import solve_fixed_epochs


def test_single_is_the_diagonal_bound():
    for n in (7, 64, 1000):
        assert diagonal_bound(toeplitz.prefix(n), single()) == pytest.approx(toeplitz.prefix_bound(n).diagonal,
                                                                             rel=1e-10)


@pytest.mark.parametrize("n,k", [(32, 2), (64, 4), (48, 3)])
def test_below_the_certified_optimum(n, k):
    sol = solve_fixed_epochs(mmopt.workload.prefix(n).gram, k, tol=1e-6)
    assert diagonal_bound(toeplitz.prefix(n), fixed_epochs(k)) <= sol.dual


@pytest.mark.parametrize("schema", [fixed_epochs(4), min_separation(6, 3), min_separation(20, 5),
                                    min_separation(3, 2)], ids=repr)
def test_below_every_strategy(schema):
    n = 24
    W = np.tril(np.ones((n, n)))
    lower = diagonal_bound(toeplitz.prefix(n), schema)
    rng = np.random.default_rng(0)
    for C in (np.eye(n), W, toeplitz.sqrt_strategy(n).to_dense(), np.tril(rng.random((n, n))) + np.eye(n),
              toeplitz.banded([1.0, 0.4, 0.2], n).to_dense()):
        error = sensitivity_squared(C, schema).squared * np.linalg.norm(W @ np.linalg.inv(C)) ** 2
        assert error >= lower


def test_refuses_other_workloads():
    with pytest.raises(TypeError):
        diagonal_bound(mmopt.workload.identity(8), fixed_epochs(2))


def test_gram_sqrt_entries_against_the_dense_root():
    import scipy.linalg
    n = 40
    W = np.tril(np.ones((n, n)))
    i = np.arange(n)
    np.testing.assert_allclose(gram_sqrt_entries(n, i[:, None], i[None, :]), scipy.linalg.sqrtm(W.T @ W).real,
                               atol=1e-11)  # sqrtm's own accuracy on G (condition ~ n²) sets the tolerance


@pytest.mark.parametrize("k", [2, 4])
def test_correlated_bound_improves_on_the_diagonal_one(k):
    n = 64
    h = toeplitz.bound.gram_sqrt_diagonal(n)
    H = np.bincount(np.arange(n) % (n // k), weights=h)
    assert diagonal_bound(toeplitz.prefix(n), fixed_epochs(k)) > H @ H
