"""mmopt.laplace_mechanism for every workload family against the dense function on W's matrix (the oracle)."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz
from mmopt.dispatch import laplace
from mmopt.strategy import max_column_norm
from mmopt.structured import workloads as sw

PRIVACIES = [mmopt.Privacy(1.0), mmopt.Privacy(0.5, 1e-6)]


def _implicit_workloads():
    return [
        sw.kron(mmopt.workload.prefix(4), mmopt.workload.all_range(3)),
        sw.kron(mmopt.workload.all_predicate(3), mmopt.workload.total(2), mmopt.workload.identity(3)),
        sw.union([sw.kron(mmopt.workload.prefix(5), mmopt.workload.identity(4)),
                  sw.kron(mmopt.workload.identity(5),
                          mmopt.workload.predicates(np.array([[1.0, -2.0, 0.0, 0.5], [0.0, 1.0, 1.0, 1.0]])))],
                 weights=[2.0, 0.5]),
        sw.marginals((3, 4, 2), 2),
    ]


@pytest.mark.parametrize("privacy", PRIVACIES, ids=["laplace", "gaussian"])
@pytest.mark.parametrize("index", range(4))
def test_an_implicit_workload_draws_what_its_dense_matrix_draws(index, privacy):
    """The same seed gives the same answers as the dense function on W's matrix: the same W x (row order) and
    the same Δ_W (the factors' column norms, exact against the dense max column norm)."""
    W = _implicit_workloads()[index]
    x = np.random.default_rng(index).integers(0, 20, W.domain_size).astype(float)
    dense = W.to_workload()
    want = mmopt.laplace_mechanism(dense, x, privacy, rng=3, size=2)
    got = mmopt.laplace_mechanism(W, x.reshape(W.shape), privacy, rng=3, size=2)
    assert got.sensitivity == pytest.approx(max_column_norm(dense.explicit_matrix(), privacy.sensitivity_norm),
                                            rel=1e-12)
    assert got.noise_scale == pytest.approx(want.noise_scale, rel=1e-12)
    np.testing.assert_allclose(got.answers, want.answers, rtol=1e-10, atol=1e-9 * want.noise_scale)
    assert got.estimate is None and got.shape == tuple(W.shape) and got.answers.shape == (2, W.n_queries)


@pytest.mark.parametrize("privacy", PRIVACIES, ids=["laplace", "gaussian"])
@pytest.mark.parametrize("kind", ["prefix", "all_range"])
@pytest.mark.parametrize("n", [7, 8])
def test_a_stream_workload_draws_what_its_dense_twin_draws(kind, n, privacy):
    x = np.arange(n, dtype=float) ** 2
    want = mmopt.laplace_mechanism(getattr(mmopt.workload, kind)(n), x, privacy, rng=5)
    got = mmopt.laplace_mechanism(getattr(toeplitz, kind)(n), x, privacy, rng=5)
    assert got.sensitivity == pytest.approx(want.sensitivity, rel=1e-12)
    np.testing.assert_allclose(got.answers, want.answers, rtol=1e-12, atol=1e-9)


def test_the_empirical_error_is_the_laplace_mechanisms_formula():
    """(2/ε²)·Δ_W²·m for Laplace noise, over 4,000 draws of a 10,000-cell product (the dense path cannot hold it)."""
    W = mmopt.workload.kron(mmopt.workload.prefix(100), mmopt.workload.prefix(100))
    x = np.ones(10_000)
    out = mmopt.laplace_mechanism(W, x, mmopt.Privacy(2.0), rng=0, size=40)
    clean = mmopt.structured.mechanism.answer(W, x)
    total = np.mean(np.sum((out.answers - clean) ** 2, axis=1))
    expected = 2 / 4.0 * 10_000.0 ** 2 * W.n_queries
    # 40 draws of 10⁴ i.i.d. terms of relative variance 5 (Laplace: E z⁴ = 6 (E z²)²): 6σ ≈ 0.6 %
    assert total == pytest.approx(expected, rel=6 * np.sqrt(5 / (40 * W.n_queries)))


def test_refusals_name_the_function():
    with pytest.raises(ValueError, match="'x' parameter of laplace_mechanism must hold one count per cell"):
        mmopt.laplace_mechanism(toeplitz.prefix(20_000), np.ones(19_999), mmopt.Privacy(1.0))
    with pytest.raises(ValueError, match="laplace_mechanism"):
        mmopt.laplace_mechanism(toeplitz.all_range(40_000), np.ones(40_000), mmopt.Privacy(1.0))  # 8·10⁸ answers
    with pytest.raises(TypeError, match="unexpected keyword.*pass rng=seed"):
        mmopt.laplace_mechanism(mmopt.workload.prefix(4), np.ones(4), mmopt.Privacy(1.0), seed=0)
    with pytest.raises(ValueError, match="laplace_mechanism"):
        mmopt.laplace_mechanism(sw.kron(mmopt.workload.prefix(4), mmopt.workload.prefix(4)), np.ones(15),
                                mmopt.Privacy(1.0))


def test_column_norms_of_every_closed_form_family_are_the_matrix_ones():
    for family in ("identity", "total", "prefix", "all_range", "all_predicate"):
        W = getattr(mmopt.workload, family)(5)
        M = W.explicit_matrix()
        np.testing.assert_allclose(laplace.column_norms(W, "l1"), np.abs(M).sum(axis=0), rtol=1e-15)
        np.testing.assert_allclose(laplace.column_norms(W, "l2"), np.linalg.norm(M, axis=0), rtol=1e-15)
