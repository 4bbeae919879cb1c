"""Privelet on several attributes and the Fourier basis: structure, exact error against dense, Monte Carlo, release."""

import math

import numpy as np
import pytest

import mmopt
from mmopt import Privacy
from mmopt import strategy as st
from mmopt.baselines import hierarchies as hi
from mmopt.baselines import transforms as tr
from mmopt.structured import census
from mmopt.structured import workloads as sw

EPS1, GAUSS = Privacy(1.0), Privacy(1.0, 1e-6)


def test_privelet_is_the_product_of_haar_matrices():
    A = st.privelet((4, 8))
    assert A.sensitivity("l1") == 3.0 * 4.0  # ∏(1 + log₂nᵢ): Privelet's generalised sensitivity
    assert np.array_equal(A.to_strategy().matrix, np.kron(st.wavelet(4).matrix, st.wavelet(8).matrix))
    assert np.array_equal(st.privelet((8,)).to_strategy().matrix, st.wavelet(8).matrix)


def test_privelet_pads_sizes_that_are_not_powers_of_two():
    A = st.privelet((5, 3))
    assert A.sensitivity("l1") == 4.0 * 3.0  # Y₈ and Y₄ restricted: every column still has 1 + log₂n′
    W = sw.kron(sw.all_range(5), sw.all_range(3))
    r = mmopt.evaluate(W, A, EPS1)
    ref = mmopt.evaluate(W.to_workload(), A.to_strategy(), EPS1)
    assert r.total_squared_error == pytest.approx(ref.total_squared_error, rel=1e-10)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7])
def test_fourier_factor_gram_is_n_i_minus_j(n):
    B = tr.fourier_factor(n).matrix
    assert B.shape == (n - 1, n)
    assert np.allclose(B.T @ B, n * np.eye(n) - np.ones((n, n)), atol=1e-12)
    if n == 2:
        assert np.array_equal(B, [[1.0, -1.0]])


def test_fourier_on_binary_domains_is_barak_et_al():
    A = st.fourier((2,) * 4, 2)
    closure = tr.downward_closure([(i, j) for i in range(4) for j in range(i + 1, 4)])
    assert len(closure) == 1 + 4 + 6 and A.n_rows == 11
    assert A.sensitivity("l1") == 11.0  # every entry ±1
    assert set(np.unique(A.to_strategy().matrix)) == {-1.0, 1.0}


@pytest.mark.parametrize(("shape", "k", "attrs"), [((2, 2, 2, 2), 2, None), ((3, 4, 2), 1, None),
                                                   ((5, 4, 3), None, [(0, 2), (1,)])])
def test_fourier_exact_error_matches_dense(shape, k, attrs):
    W = sw.marginals(shape, k, attributes=attrs)
    A = st.fourier(shape, k, attributes=attrs)
    for privacy in (EPS1, GAUSS):
        r = mmopt.evaluate(W, A, privacy)
        assert r.method == "algebra" and r.sensitivity_exact
        ref = mmopt.evaluate(W.to_workload(), A.to_strategy(), privacy)
        assert r.total_squared_error == pytest.approx(ref.total_squared_error, rel=1e-9)


def test_fourier_at_scale_is_exact_and_supports_only_its_closure():
    r = mmopt.evaluate(sw.marginals((2,) * 30, 2), st.fourier((2,) * 30, 2), EPS1)
    assert r.total_exact and r.sensitivity == 1 + 30 + 435
    with pytest.raises(ValueError, match="support"):
        mmopt.evaluate(sw.marginals((2, 2, 2), 2), st.fourier((2, 2, 2), 1))


def test_haar_quadratics_and_haar_evaluate():
    op = hi.prefix_gram(16)
    g, s = tr.haar_quadratics(op)
    Q, size = tr.haar_basis(16)
    G = np.tril(np.ones((16, 16))).T @ np.tril(np.ones((16, 16)))
    assert np.allclose(g, np.einsum("ij,jk,ik->i", Q, G, Q)) and np.array_equal(s, size)
    W = census.ranges_2d(8)
    for A in (st.privelet((8, 8)), st.kron(st.hierarchical(8), st.hierarchical(8)), st.quadtree(8)):
        assert tr.haar_evaluate(W, A, EPS1) == pytest.approx(mmopt.evaluate(W, A, EPS1).total_squared_error,
                                                             rel=1e-9)
    with pytest.raises(ValueError, match="not diagonal in the Haar basis"):
        tr.haar_evaluate(W, st.kron(st.hierarchical(8, 3), st.identity(8)))


@pytest.mark.parametrize("which", ["privelet", "fourier"])
def test_monte_carlo_and_release(which):
    if which == "privelet":
        W, A, x = census.ranges_2d(4), st.privelet((4, 4)), np.arange(16.0).reshape(4, 4)
    else:
        W, A, x = sw.marginals((2, 3), 1), st.fourier((2, 3), 1), np.arange(6.0).reshape(2, 3)
    r = mmopt.monte_carlo(W, A, x, EPS1, runs=1000, seed=7)
    assert abs(r.total_squared_error - r.expected) <= 5 * r.total_std / math.sqrt(r.runs)
    out = mmopt.release(W, A, x, EPS1)
    assert out.path == "release" and out.estimate.shape == x.shape


def test_bad_input():
    with pytest.raises(ValueError, match="exactly one of"):
        st.fourier((2, 2))
    with pytest.raises(ValueError, match="size >= 2"):
        st.fourier((2, 1), 1)
    with pytest.raises(ValueError, match="at least one"):
        st.fourier((2, 2), attributes=[])
    with pytest.raises(ValueError, match="power of two"):
        tr.haar_quadratics(hi.prefix_gram(6))
    with pytest.raises(TypeError, match="ImplicitWorkload"):
        tr.haar_evaluate(mmopt.workload.prefix(4), st.privelet((4,)))
    with pytest.raises(ValueError, match=r"haar_evaluate: the Haar basis needs .* powers of two. Got the domain "
                                         r"\(3, 4\)"):  # it named wavelet(n=3) and suggested hierarchical(n)
        tr.haar_evaluate(mmopt.structured.kron(mmopt.workload.prefix(3), mmopt.workload.prefix(4)),
                         st.privelet((3, 4)))
    with pytest.raises(TypeError, match="'op' parameter of haar_quadratics must be a GramOperator"):
        tr.haar_quadratics(np.eye(4))  # an AttributeError before
