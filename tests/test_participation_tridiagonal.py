"""The fast certified optimum under fixed epochs (block-tridiagonal dual) against the dense dual it replaces,
the dense SDP (cvxpy, Clarabel), brute-force sensitivity, and its rational nodes against eigendecompositions."""

import cvxpy as cp
import numpy as np
import pytest
from _participation_sdp import sdp_optimum

import mmopt
from mmopt import toeplitz
from mmopt.participation import fixed_epochs, sensitivity_squared
from mmopt.participation.banded_inverse import of_kind, of_toeplitz
from mmopt.participation.bound import diagonal_bound
from mmopt.participation.optimum import _Dual, solve_fixed_epochs
from mmopt.participation.quadrature import inverse_sqrt_blocks, rational_nodes
from mmopt.participation.tridiagonal import _TridiagonalDual, solve_tridiagonal


def _gram(kind, n):
    return (mmopt.workload.prefix(n) if kind == "prefix" else mmopt.workload.all_range(n)).gram * 1.0


def _momentum_gram(n, beta=0.9):
    W = mmopt.participation.momentum(n, beta).matrix
    return W.T @ W


def _random_point(b, k, seed):
    rng = np.random.default_rng(seed)
    L = np.tile(np.eye(k), (b, 1, 1)) + 0.3 * rng.standard_normal((b, k, k))
    return np.concatenate([0.5 * rng.standard_normal(b), L.ravel()])


@pytest.mark.parametrize("kind,n,k", [("prefix", 24, 3), ("prefix", 30, 1), ("prefix", 16, 16), ("prefix", 35, 5),
                                      ("prefix", 40, 2), ("all_range", 24, 4), ("prefix", 96, 4),
                                      ("momentum", 24, 3), ("momentum", 32, 4), ("momentum", 16, 8),
                                      ("momentum", 30, 15), ("momentum", 96, 4)])
def test_value_and_gradient_match_the_dense_dual(kind, n, k):
    # b odd (35/5 = 7), b = 1 (16/16), b = n (k = 1), and blocks of several patterns: every placement of K's blocks;
    # momentum (W⁻¹ = T(1, −1.9, 0.9): G⁻¹ pentadiagonal) couples offsets 1 and 2, wrapping into the next epoch
    # (b = 2 = w at 16/8 and 30/15) and across the fold
    b = n // k
    if kind == "momentum":
        G, spec = _momentum_gram(n), of_toeplitz(mmopt.participation.momentum(n, 0.9).matrix[:, 0])
        assert spec.width == 2
    else:
        G, spec = _gram(kind, n), of_kind(kind)
    perm = np.arange(n).reshape(k, b).T.ravel()
    dense, fast = _Dual(G[np.ix_(perm, perm)], b, k), _TridiagonalDual(spec, b, k)
    for seed in range(2):
        x = _random_point(b, k, seed)
        v0, g0 = dense.objective(x)
        v1, g1 = fast.objective(x)
        # 48 rational nodes: relative error ≤ 1e-11 on a spectrum spread below 10¹² (these K's: below 10⁸); momentum's
        # G is far worse conditioned, so its K's spectrum is wider and the nodes less accurate (measured: 2e-10)
        rel, atol = (1e-9, 1e-7) if kind == "momentum" else (1e-10, 1e-8)
        assert v1 == pytest.approx(v0, rel=rel)
        np.testing.assert_allclose(g1, g0, rtol=0, atol=atol * np.abs(g0).max())


@pytest.mark.parametrize("kind,n", [("prefix", 7), ("all_range", 6)])
def test_inverse_gram_is_tridiagonal(kind, n):
    a, e = of_kind(kind).bands(n)
    np.testing.assert_allclose(np.linalg.inv(_gram(kind, n)), np.diag(a) + np.diag(e, 1) + np.diag(e, -1),
                               atol=1e-12 * n)


def test_rational_nodes_against_the_square_root():
    for spread in (1e3, 1e8, 1e12):
        s, c = rational_nodes(2.0, 2.0 * spread, 48)
        w = 2.0 * np.logspace(0, np.log10(spread), 2001)
        np.testing.assert_allclose((c / (w[:, None] + s)).sum(axis=1), 1 / np.sqrt(w), rtol=1e-10)


def test_selected_inversion_against_the_dense_root():
    rng = np.random.default_rng(3)
    R, s = 5, 4
    n = R * s
    A = rng.standard_normal((n, n))
    K = A @ A.T / n + 0.1 * np.eye(n)
    band = np.abs(np.subtract.outer(np.arange(n) // s, np.arange(n) // s)) <= 1
    K = np.where(band, K, 0.0)
    K += (np.abs(K).sum(axis=1).max()) * np.eye(n) * 0.5  # keep it positive definite after the cut
    w, V = np.linalg.eigh(K)
    exact = (V / np.sqrt(w)) @ V.T
    D = np.stack([K[r * s:(r + 1) * s, r * s:(r + 1) * s] for r in range(R)])
    E = np.stack([K[r * s:(r + 1) * s, (r + 1) * s:(r + 2) * s] for r in range(R - 1)])
    P = inverse_sqrt_blocks(D, E, w[0], w[-1], 48)
    for r in range(R):
        np.testing.assert_allclose(P[r], exact[r * s:(r + 1) * s, r * s:(r + 1) * s], atol=1e-11)


def _sdp_optimum(G, k):
    """min tr(G X⁻¹) under the exact fixed-epoch sensitivity: the shared dense SDP on the b = n/k patterns."""
    b = G.shape[0] // k
    return sdp_optimum(G, [range(j, G.shape[0], b) for j in range(b)])


def _worst_pattern(X, k):
    """max_π max {⟨X_π, Y⟩ : Y ⪰ 0, diag Y ≤ 1} by one SDP per pattern: brute force, independent of mmopt's."""
    n = X.shape[0]
    b = n // k
    best = 0.0
    for j in range(b):
        idx = list(range(j, n, b))
        Y = cp.Variable((k, k), PSD=True)
        best = max(best, cp.Problem(cp.Maximize(cp.trace(X[np.ix_(idx, idx)] @ Y)), [cp.diag(Y) <= 1]).solve(
            solver=cp.CLARABEL))
    return best


@pytest.mark.parametrize("kind,n,k", [("prefix", 12, 3), ("prefix", 16, 4), ("prefix", 16, 2), ("all_range", 12, 2),
                                      ("prefix", 10, 1)])
def test_brackets_the_dense_sdp_and_is_feasible(kind, n, k):
    G = _gram(kind, n)
    sol = solve_tridiagonal(kind, n, k, tol=1e-6)
    sdp = _sdp_optimum(G, k)
    # Clarabel's default accuracy is ~1e-8 relative
    assert sol.dual <= sdp * (1 + 1e-6) and sol.primal >= sdp * (1 - 1e-6)
    assert sol.status == "optimal" and sol.primal <= sol.dual * (1 + 1e-6)
    C = sol.matrix
    np.testing.assert_array_equal(C, np.tril(C))
    X = C.T @ C
    assert _worst_pattern(X, k) <= 1 + 1e-7  # the SDP solver's accuracy
    error = np.trace(G @ np.linalg.inv(X))
    assert error == pytest.approx(sol.primal, rel=1e-8)


@pytest.mark.parametrize("k", [2, 4, 8])
def test_agrees_with_the_dense_solver(k):
    n = 128
    G = _gram("prefix", n)
    fast = solve_tridiagonal("prefix", n, k, tol=1e-5)
    dense = solve_fixed_epochs(G, k, tol=1e-5)
    assert fast.status == dense.status == "optimal"
    # each certificate brackets the other's optimum
    assert fast.dual <= dense.primal and dense.dual <= fast.primal
    assert sensitivity_squared(fast.matrix, fixed_epochs(k)).squared == pytest.approx(1.0, rel=1e-9)


def test_the_dense_polish_keeps_the_better_primal_and_stays_certified(monkeypatch):
    # tol 1e-7 is below where L-BFGS on the quadrature dual stops: the polish runs (more iterations)
    from mmopt.participation import tridiagonal
    polished = solve_tridiagonal("prefix", 128, 4, tol=1e-7)
    monkeypatch.setattr(tridiagonal, "POLISH_MAX_N", 0)
    plain = solve_tridiagonal("prefix", 128, 4, tol=1e-7)
    assert polished.iterations > plain.iterations
    assert polished.primal <= plain.primal and polished.dual >= plain.dual
    assert max(polished.dual, plain.dual) <= min(polished.primal, plain.primal)  # each bound below both strategies
    assert sensitivity_squared(polished.matrix, fixed_epochs(4)).squared == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("n,k", [(64, 4), (128, 4), (256, 8)])
def test_the_polished_result_is_its_matrix_s_and_brackets_an_independent_optimum(n, k):
    # tol 1e-9: the polish runs; its primal must be the returned C's error, its bound below the dense solver's optimum
    import scipy.linalg
    sol = solve_tridiagonal("prefix", n, k, tol=1e-9)
    G = _gram("prefix", n)
    Ci = scipy.linalg.solve_triangular(sol.matrix, np.eye(n), lower=True)
    squared = sensitivity_squared(sol.matrix, fixed_epochs(k)).squared
    assert float(np.einsum("ij,ij->", G @ Ci, Ci)) * squared == pytest.approx(sol.primal, rel=1e-10)
    oracle = solve_fixed_epochs(G, k, tol=1e-10, max_iterations=2000)
    assert sol.dual <= oracle.primal and oracle.dual <= sol.primal


@pytest.mark.parametrize("k", [4, 16])
def test_the_bound_is_below_every_strategy_and_above_the_diagonal_bound(k):
    n = 256
    sol = solve_tridiagonal("prefix", n, k, tol=1e-4)
    W = np.tril(np.ones((n, n)))
    for C in (np.eye(n), W, toeplitz.sqrt_strategy(n).to_dense(), toeplitz.banded([1.0, 0.5, 0.25], n).to_dense()):
        error = sensitivity_squared(C, fixed_epochs(k)).squared * np.linalg.norm(W @ np.linalg.inv(C)) ** 2
        assert error >= sol.dual
    assert diagonal_bound(toeplitz.prefix(n), fixed_epochs(k)) <= sol.dual <= sol.primal <= sol.dual * (1 + 1e-4)


def test_optimize_takes_the_fast_route_for_prefix_sums_only():
    res = mmopt.optimize(mmopt.workload.prefix(64), participation=fixed_epochs(4))
    assert res.solver == "mmopt-participation-tridiagonal" and res.status == "optimal"
    rng = np.random.default_rng(0)
    W = mmopt.Workload.from_matrix(rng.standard_normal((20, 16)))
    other = mmopt.optimize(W, participation=fixed_epochs(2))
    assert other.solver == "mmopt-participation-dual"


@pytest.mark.parametrize("args,error,match", [
    (("ranges", 16, 2), ValueError, "'kind' parameter of solve_tridiagonal"),
    (("prefix", 16, 3), ValueError, "divid|multiple"),
    (("prefix", 8192, 4), ValueError, "above 4,096"),
    (("prefix", 16, 2.0), TypeError, "'epochs' parameter"),
])
def test_refusals(args, error, match):
    with pytest.raises(error, match=match):
        solve_tridiagonal(*args)


@pytest.mark.slow
def test_n_4096_sixteen_epochs_is_certified_within_one_percent():
    n, k = 4096, 16
    sol = solve_tridiagonal("prefix", n, k, tol=1e-4)
    assert sol.primal <= 1.01 * sol.dual
    # the proven O(n log n) bound is below the certificate, and close to it
    assert 0.99 * sol.dual <= diagonal_bound(toeplitz.prefix(n), fixed_epochs(k)) <= sol.dual
    # the causal factor is scaled to Δ = 1 under the schema (its Gram CᵀC formed afresh)
    assert sensitivity_squared(sol.matrix, fixed_epochs(k)).squared == pytest.approx(1.0, rel=1e-9)


def test_momentum_certified_optimum_agrees_with_the_dense_solver():
    n, k = 128, 4
    spec = of_toeplitz(mmopt.participation.momentum(n, 0.9).matrix[:, 0])
    fast = solve_tridiagonal(spec, n, k, tol=1e-4)
    dense = solve_fixed_epochs(_momentum_gram(n), k, tol=1e-4)
    assert fast.status == "optimal" and fast.dual <= fast.primal <= fast.dual * (1 + 1e-4)
    assert fast.dual <= dense.primal * (1 + 1e-9) and dense.dual <= fast.primal * (1 + 1e-9)
    C = fast.matrix  # scaled to Δ = 1 under the schema; its error recomputed densely
    assert sensitivity_squared(C, fixed_epochs(k)).squared == pytest.approx(1.0, rel=1e-9)
    assert float(np.trace(_momentum_gram(n) @ np.linalg.inv(C.T @ C))) == pytest.approx(fast.primal, rel=1e-8)
    with pytest.raises(ValueError, match="epoch length"):
        solve_tridiagonal(of_toeplitz(mmopt.participation.momentum(64, 0.9).matrix[:, 0]), 64, 64)


def test_optimize_routes_long_momentum_to_the_banded_inverse():
    W = mmopt.participation.momentum(1024, 0.9)
    res = mmopt.optimize(W, participation=fixed_epochs(4), max_iterations=5)
    assert res.solver == "mmopt-participation-tridiagonal"
    assert res.lower_bound <= res.objective and res.status in ("optimal", "user_limit")
    small = mmopt.optimize(mmopt.participation.momentum(64, 0.9), participation=fixed_epochs(4), max_iterations=5)
    assert small.solver == "mmopt-participation-dual"  # below BANDED_INVERSE_FROM: the dense solver


def test_a_spectrum_too_wide_for_the_nodes_is_an_infinite_objective_not_nan(capfd):
    """A pattern weight λ_j = exp(μ_j − max μ) near 0 widens K's spectrum past what the rational nodes hold in
    float64 (their parameter 1 − m/M rounds to 1), or underflows to 0: the objective was NaN, numpy warned and
    LAPACK printed ~930 DLASCL lines on momentum(1,024, β = 0.9) under fixed_epochs(8) (a helper's probe). Such a
    point is now +inf (L-BFGS steps back, as it did from the NaN), silently; a point inside stays finite."""
    import warnings

    from mmopt.participation.tridiagonal import _TridiagonalDual
    b, k = 16, 4
    dual = _TridiagonalDual(of_kind("prefix"), b, k)
    x = np.concatenate([np.zeros(b), np.tile(np.eye(k).ravel(), b)])
    values = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a divide-by-zero or invalid-value warning fails the test
        for mu in (0.0, -20.0, -40.0, -800.0):  # λ₃ = 1, 2e-9, 4e-18 (spread ~1e17), 0
            x[3] = mu
            values[mu] = dual.objective(x)
    assert all(np.isfinite(values[mu][0]) and np.all(np.isfinite(values[mu][1])) for mu in (0.0, -20.0))
    assert all(values[mu][0] == np.inf and not np.any(values[mu][1]) for mu in (-40.0, -800.0))
    assert "DLASCL" not in "".join(capfd.readouterr())
