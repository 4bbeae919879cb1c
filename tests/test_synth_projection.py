"""mmopt.synth.projection against a convex solver, and mmopt.synth.residuals against dense generalised least
squares; mmopt.synth.tree's marginals against the dense joint."""

import itertools

import cvxpy as cp
import numpy as np
import pytest

from mmopt.structured.residual import marginal_workload, measure, plan
from mmopt.structured.residual.strategy import residual_basis
from mmopt.synth import projection as pj
from mmopt.synth.residuals import from_measurements
from mmopt.synth.tree import tree_model


@pytest.mark.parametrize("seed", range(4))
def test_transport_is_the_euclidean_projection(seed):
    g = np.random.default_rng(seed)
    n, m = g.integers(2, 9, 2)
    P = g.dirichlet(np.ones(n * m)).reshape(n, m) * 1000
    r, c = P.sum(axis=1), P.sum(axis=0)
    M = P + g.normal(0, 30, (n, m))
    T = pj.transport(M, r, c)
    X = cp.Variable((n, m))
    cp.Problem(cp.Minimize(cp.sum_squares(X - M)), [X >= 0, cp.sum(X, 1) == r, cp.sum(X, 0) == c]).solve(
        solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    # strongly convex: the projection is unique; the interior-point solve is accurate to ~1e-7 of the scale 1000
    assert np.abs(T - X.value).max() <= 1e-4
    assert T.min() >= 0 and np.abs(T.sum(axis=1) - r).max() <= 1e-8 and np.abs(T.sum(axis=0) - c).max() <= 1e-8
    np.testing.assert_array_equal(pj.transport(P, r, c), P)            # a point of the polytope is its own


def test_simplex_is_the_euclidean_projection():
    g = np.random.default_rng(0)
    v = g.normal(0, 5, 9)
    p = pj.simplex(v, 7.0)
    x = cp.Variable(9)
    cp.Problem(cp.Minimize(cp.sum_squares(x - v)), [x >= 0, cp.sum(x) == 7.0]).solve(solver="CLARABEL")
    assert np.abs(p - x.value).max() <= 1e-6 and p.min() >= 0 and abs(p.sum() - 7.0) <= 1e-12


def _dense(strategy):
    """The residual strategy's rows c_S·(⊗_{i∈S} Bᵢ ⊗_{i∉S} 1ᵀ), densely."""
    rows = []
    for S, c in zip(strategy.subsets, strategy.weights, strict=True):
        K = np.ones((1, 1))
        for i, n in enumerate(strategy.shape):
            f = residual_basis(n) if i in S else np.ones((1, n))
            K = np.kron(K, f)
        rows.append(c * K)
    return np.vstack(rows)


def test_combined_estimates_are_generalised_least_squares():
    shape = (3, 2, 4)
    g = np.random.default_rng(1)
    x = g.integers(0, 40, shape).astype(float)
    A1 = plan(marginal_workload(shape, [(0,), (1,), (2,)])).strategy
    A2 = plan(marginal_workload(shape, [(0, 1), (1, 2)])).strategy
    s1, s2 = 2.0, 0.7
    y1, y2 = measure(A1, x), measure(A2, x)
    y1 = {S: v + g.normal(0, s1, v.shape) for S, v in y1.values.items()}
    y2 = {S: v + g.normal(0, s2, v.shape) for S, v in y2.values.items()}
    est = from_measurements(A1, y1, s1).combine(from_measurements(A2, y2, s2))
    # dense GLS: x̂ = (Σ AₖᵀAₖ/σₖ²)⁺ Σ Aₖᵀyₖ/σₖ² (the marginals of the closure are estimable, the rest is not)
    D1, D2 = _dense(A1), _dense(A2)
    v1 = np.concatenate([y1[S].ravel() for S in A1.subsets])
    v2 = np.concatenate([y2[S].ravel() for S in A2.subsets])
    xhat = np.linalg.pinv(D1.T @ D1 / s1**2 + D2.T @ D2 / s2**2) @ (D1.T @ v1 / s1**2 + D2.T @ v2 / s2**2)
    xhat = xhat.reshape(shape)
    for A in [(0,), (1,), (2,), (0, 1), (1, 2)]:
        dense = xhat.sum(axis=tuple(i for i in range(3) if i not in A))
        np.testing.assert_allclose(est.marginal(A), dense, atol=1e-9 * np.abs(dense).max())
    assert not est.covers((0, 2))


def test_tree_marginals_are_the_dense_joints():
    g = np.random.default_rng(2)
    shape = (3, 2, 4, 2)
    p0 = g.dirichlet(np.ones(3))
    K1, K2, K3 = g.dirichlet(np.ones(2), 3), g.dirichlet(np.ones(4), 2), g.dirichlet(np.ones(2), 3)
    J = np.einsum("a,ab,bc,ad->abcd", p0, K1, K2, K3) * 50.0        # edges 0–1, 1–2, 0–3

    def marg(A):
        return J.sum(axis=tuple(i for i in range(4) if i not in A))

    m = tree_model(shape, 50.0, [marg((i,)) for i in range(4)], {e: marg(e) for e in [(0, 1), (1, 2), (0, 3)]})
    for k in range(1, 5):
        for A in itertools.combinations(range(4), k):
            np.testing.assert_allclose(m.marginal(A), marg(A), atol=1e-12 * 50)
    with pytest.raises(ValueError, match="cycle"):
        tree_model((2, 2, 2), 1.0, [np.ones(2)] * 3, {(0, 1): np.eye(2), (1, 2): np.eye(2), (0, 2): np.eye(2)})
