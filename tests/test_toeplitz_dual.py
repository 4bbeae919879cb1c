"""mmopt.toeplitz.dual: the L2 optimum of prefix / all ranges from the tridiagonal G⁻¹, against dense oracles."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz
from mmopt.search.l2_fast import solve_l2
from mmopt.toeplitz import dual


def dense_gram(kind, n):
    W = getattr(mmopt.workload, kind)(n)
    return W.mean_gram * W.n_queries


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
def test_inverse_gram_is_the_inverse(kind):
    a, b = dual.inverse_gram(kind, 9)
    T = np.diag(a) + np.diag(b, 1) + np.diag(b, -1)
    # G has integer entries ≤ n(n+1)/4 and T entries ≤ 2: the product is exact up to a few ulps of 50
    assert np.abs(dense_gram(kind, 9) @ T - np.eye(9)).max() < 1e-12


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
def test_quadratic_forms_match_the_dense_gram(kind):
    rng = np.random.default_rng(3)
    V = rng.standard_normal((40, 7))
    G = dense_gram(kind, 40)
    expected = np.einsum("ik,ij,jk->k", V, G, V)
    np.testing.assert_allclose(dual.quadratic_forms(kind, V.copy()), expected, rtol=1e-11)


@pytest.mark.parametrize("kind,n", [("prefix", 64), ("prefix", 200), ("all_range", 150)])
def test_certified_optimum_matches_the_dense_solver(kind, n):
    sol = dual.solve_dual(getattr(toeplitz, kind)(n), tol=1e-9)
    assert sol.status == "optimal" and 0 <= sol.gap <= 1e-9
    G = dense_gram(kind, n)
    A = sol.matrix
    # the reported primal is the exact error of the returned strategy (Cholesky solve on a well-scaled X)
    X = A.T @ A
    assert np.max(np.sqrt(np.einsum("ij,ij->j", A, A))) <= 1.0 + 1e-12  # unit columns, up to the scaling's round-off
    np.testing.assert_allclose(np.trace(np.linalg.solve(X, G)), sol.primal, rtol=1e-9)
    ref = solve_l2(G, tol=1e-10)
    # weak duality both ways: each solver's lower bound is below the other's feasible value
    assert sol.dual <= ref.extra["primal_bound"] * (1 + 1e-12)
    assert ref.dual_bound <= sol.primal * (1 + 1e-12)
    np.testing.assert_allclose(sol.primal, ref.extra["primal_bound"], rtol=2e-9)


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
def test_never_below_the_diagonal_bound_and_budget_is_user_limit(kind):
    W = getattr(toeplitz, kind)(300)
    sol = dual.solve_dual(W, max_iterations=1)
    assert sol.status == "user_limit" and sol.iterations == 1
    # the first iterate's dual is the diagonal bound's weights: never below that certified bound
    assert sol.dual >= toeplitz.lower_bound(W).value * (1 - 1e-12)
    assert sol.primal >= sol.dual


def test_refusals():
    with pytest.raises(ValueError, match=r"solve_dual: n = 16,385 is above 16,384"):
        dual.solve_dual(toeplitz.prefix(16_385))
    with pytest.raises(ValueError, match="'tol' parameter of solve_dual"):
        dual.solve_dual(toeplitz.prefix(8), tol=0.0)
    with pytest.raises(TypeError, match="'workload' parameter of solve_dual"):
        dual.solve_dual(mmopt.workload.identity(8))


def test_optimize_routes_prefix_and_all_ranges_to_it():
    W = mmopt.workload.prefix(600)
    r = mmopt.optimize(W, method="l2_approx")
    assert r.solver == dual.SOLVER_NAME and r.status == "optimal"
    fast = mmopt.optimize(W, method="l2_approx", options={"engine": "fast"})
    np.testing.assert_allclose(r.objective, fast.objective, rtol=1e-7)
    assert r.lower_bound <= fast.objective and fast.lower_bound <= r.objective
    with pytest.raises(ValueError, match="engine': 'tridiagonal'} needs the prefix or all-range workload"):
        mmopt.optimize(mmopt.workload.identity(40), method="l2_approx", options={"engine": "tridiagonal"})


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
def test_monte_carlo_matches_the_reported_error(kind):
    # both workloads are full rank (G⁻¹ exists): solve_dual serves no rank-deficient workload
    W = getattr(mmopt.workload, kind)(48)
    sol = dual.solve_dual(W)
    gauss = mmopt.Privacy(1.0, delta=1e-6)
    x = np.arange(48.0) % 7
    r = mmopt.monte_carlo(W, mmopt.Strategy(sol.matrix), x, gauss, runs=2000, seed=2)
    assert r.expected == pytest.approx(sol.primal * gauss.variance_factor, rel=1e-9)
    assert abs(r.z_score) <= 4.0   # 4 standard errors of the 2,000-run mean
