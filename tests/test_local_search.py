"""Tests for mmopt.search.local_search.minimize_l1: baselines beaten, bounds respected, gradients, contract.

Notation: see README. Errors are unit-privacy Δ² tr(G X⁻¹).
"""

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st

import mmopt
from mmopt import strategy as mst
from mmopt import workload as wl
from mmopt._base.solution import STATUSES, RawSolution
from mmopt.search._local_objectives import general_objective, pidentity_objective
from mmopt.search.local_search import minimize_l1


def all_range_gram(n):
    return wl.all_range(n).gram


def prefix_gram(n):
    return wl.prefix(n).gram


def hierarchical(n):
    return mst.hierarchical(n).matrix


def wavelet(n):
    return mst.wavelet(n).matrix


def error(G, A):
    """Δ₁²·tr(G(AᵀA)⁻¹), via mmopt.evaluate."""
    return mmopt.evaluate(wl.Workload.from_gram(G, n_queries=len(G)), A).total_squared_error


def svd_bound(G):
    return mmopt.svd_bound(wl.Workload.from_gram(G, n_queries=len(G)))


WORKLOADS = {"ranges": all_range_gram, "prefix": prefix_gram}


@pytest.mark.parametrize("n", [8, 16, 32])
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_beats_baselines_and_respects_svd_bound(n, workload):
    G = WORKLOADS[workload](n)
    sol = minimize_l1(G, restarts=4, seed=0)
    e = error(G, sol.matrix)
    assert svd_bound(G) * (1 - 1e-9) <= e < min(error(G, hierarchical(n)), error(G, wavelet(n)))
    # The identity looks optimal for all ranges at n ≤ 16 (every start we tried converges to it); at n = 8
    # prefix only p = 8 beats it. Elsewhere it is beaten clearly.
    strict = (workload, n) not in {("ranges", 8), ("ranges", 16), ("prefix", 8)}
    assert e < np.trace(G) * (1 - 1e-3) if strict else e <= np.trace(G) * (1 + 1e-9)
    if n == 32:  # HDMM's OPT_0, best of 25 restarts, measured 2.55 (ranges) and 2.93 (prefix) × SVD bound
        assert e / svd_bound(G) <= {"ranges": 2.55, "prefix": 2.93}[workload] + 5e-3


def _finite_difference(objective, z, h=1e-6):
    return np.array([(objective(z + h * e)[0] - objective(z - h * e)[0]) / (2 * h) for e in np.eye(z.size)])


def test_pidentity_gradient_matches_finite_differences():
    n, p = 6, 3
    G, z = prefix_gram(n), np.random.default_rng(1).random(2 * p * n)
    f, g = pidentity_objective(z, G, p, n)
    T = z[: p * n].reshape(p, n) - z[p * n :].reshape(p, n)
    A = np.vstack([np.eye(n), T]) / (1 + z.reshape(2 * p, n).sum(axis=0))
    assert np.isclose(f, np.trace(np.linalg.solve(A.T @ A, G)), rtol=1e-12)
    fd = _finite_difference(lambda x: pidentity_objective(x, G, p, n), z)
    assert np.allclose(g, fd, rtol=1e-6, atol=1e-6 * np.abs(g).max())


def test_general_gradient_matches_finite_differences():
    m, n = 7, 5
    G = all_range_gram(n)
    lam, Q = np.linalg.eigh(G)
    F, z = Q * np.sqrt(lam), np.random.default_rng(2).random(2 * m * n)
    f, g = general_objective(z, F, m, n)
    A = (z[: m * n] - z[m * n :]).reshape(m, n) / z.reshape(2 * m, n).sum(axis=0)
    assert np.isclose(f, np.trace(np.linalg.solve(A.T @ A, G)), rtol=1e-10)
    fd = _finite_difference(lambda x: general_objective(x, F, m, n), z)
    assert np.allclose(g, fd, rtol=1e-6, atol=1e-6 * np.abs(g).max())


def test_singular_strategy_is_infinitely_bad_not_a_crash():
    m, n = 4, 3
    A = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])  # rank 2
    z = np.concatenate([A.ravel(), np.zeros(m * n)])
    f, g = general_objective(z, np.eye(n), m, n)
    assert f == np.inf and np.all(g == 0)


def test_same_seed_same_result():
    G = prefix_gram(12)
    a, b = (minimize_l1(G, restarts=3, seed=7) for _ in range(2))
    assert np.array_equal(a.matrix, b.matrix) and a.iterations == b.iterations
    assert [h["objective"] for h in a.history] == [h["objective"] for h in b.history]


@pytest.mark.parametrize("start", ["identity", "H2", "wavelet", "random"])
def test_polish_never_worsens_the_start(start):
    n = 16
    G = prefix_gram(n)
    A0 = {"identity": np.eye(n), "H2": hierarchical(n), "wavelet": wavelet(n),
          "random": np.random.default_rng(3).standard_normal((n + 2, n))}[start]
    for max_iterations in (2, 200):
        sol = minimize_l1(G, initial=A0, restarts=2, max_iterations=max_iterations, seed=0)
        assert sol.matrix.shape == A0.shape
        assert error(G, sol.matrix) <= error(G, A0) * (1 + 1e-12)


@pytest.mark.parametrize("initial", [None, "H2"])
def test_contract(initial):
    n = 16
    G = all_range_gram(n)
    sol = minimize_l1(G, initial=None if initial is None else hierarchical(n), restarts=2, seed=0)
    assert isinstance(sol, RawSolution) and sol.gram is None and sol.dual_bound is None
    assert np.isclose(np.abs(sol.matrix).sum(axis=0).max(), 1.0, rtol=0, atol=1e-12)
    assert sol.status in STATUSES and sol.solver == "mmopt-lbfgs"
    assert "local optimum of a non-convex problem" in sol.message.lower()
    assert "no optimality certificate" in sol.message
    assert len(sol.history) == 2 and sol.iterations == sum(h["iterations"] for h in sol.history)
    assert {"seconds", "p", "mode"} <= set(sol.extra)
    # The best run, or the identity when every run ended worse than it (a stationary point of p-Identity).
    assert error(G, sol.matrix) <= min(h["objective"] for h in sol.history) * (1 + 1e-9)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.integers(2, 6), st.integers(0, 2**32 - 1))
def test_random_workloads_between_svd_bound_and_identity(n, seed):
    W = np.random.default_rng(seed).standard_normal((n + 1, n))
    G = W.T @ W
    e = error(G, minimize_l1(G, seed=0).matrix)
    assert svd_bound(G) * (1 - 1e-9) <= e <= np.trace(G) * (1 + 1e-9)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gram": np.ones((3, 4))}, "'gram' parameter of minimize_l1 must be a square"),
        ({"gram": np.array([[1.0, 2.0], [0.0, 1.0]])}, "must be symmetric"),
        ({"gram": np.array([[1.0, np.nan], [np.nan, 1.0]])}, "'gram' parameter .* must be finite"),
        ({"gram": np.array([[1.0, 2.0], [2.0, 1.0]])}, "must be positive semidefinite"),
        ({"p": 0}, r"'p' parameter of minimize_l1 must be a positive integer. Got 0 instead"),
        ({"p": 2.5}, "'p' parameter of minimize_l1 must be a positive integer"),
        ({"restarts": 0}, "'restarts' parameter of minimize_l1 must be a positive integer"),
        ({"max_iterations": True}, "'max_iterations' parameter of minimize_l1 must be a positive integer"),
        ({"tol": 0.0}, r"'tol' parameter of minimize_l1 must be a number in \(0, 1\)"),
        ({"initial": np.eye(3)}, "'initial' parameter .* must be a 2-D strategy with n = 4 columns"),
        ({"initial": np.ones(4)}, "'initial' parameter of minimize_l1 must be a 2-D strategy"),
        ({"initial": np.ones((5, 4))}, r"'initial' parameter of minimize_l1 must support the workload.*rank 1 of"),
        ({"initial": np.full((4, 4), np.inf)}, "'initial' parameter of minimize_l1 must be finite"),
        ({"initial": np.eye(4), "p": 3}, r"'p' parameter .* must equal the number of rows of 'initial' \(4"),
    ],
)
def test_invalid_inputs(kwargs, match):
    kwargs = {"gram": prefix_gram(4), **kwargs}
    with pytest.raises(ValueError, match=match):
        minimize_l1(kwargs.pop("gram"), **kwargs)


# --- issue 12: statuses over restarts, rank-deficient starts ------------------------------------------


def test_status_counts_restarts_that_hit_the_budget():
    G = prefix_gram(16)
    spent = minimize_l1(G, restarts=3, max_iterations=2, seed=0)
    assert spent.status == "user_limit"
    assert "3 of 3 restarts hit max_iterations=2" in spent.message and "local optimum" in spent.message
    assert spent.extra["run_summary"].startswith("3 of 3 restarts hit")
    done = minimize_l1(G, restarts=2, seed=0)
    assert done.status == "optimal" and all(h["status"] == "optimal" for h in done.history)
    assert "All 2 restarts converged" in done.message and "projected gradient or relative decrease" in done.message


def test_one_spent_restart_is_enough_for_user_limit(monkeypatch):
    import mmopt.search.local_search as ls

    real = ls.lbfgs
    calls = []

    def second_run_spent(*args):
        z, f, nit, status = real(*args)
        calls.append(status)
        return z, f, nit, "user_limit" if len(calls) == 2 else status

    monkeypatch.setattr(ls, "lbfgs", second_run_spent)
    sol = ls.minimize_l1(prefix_gram(8), restarts=3, seed=0)
    assert sol.status == "user_limit" and "1 of 3 restarts hit max_iterations=1000" in sol.message


@pytest.mark.parametrize("rows", ["workload", "svd"])
def test_polish_accepts_a_rank_deficient_start_that_supports_the_workload(rows):
    W = wl.random_range(16, 5, seed=3)
    G = W.gram
    A0 = W.explicit_matrix() if rows == "workload" else mst.svd_strategy(W).matrix
    assert np.linalg.matrix_rank(A0) == np.linalg.matrix_rank(G) < 16
    sol = minimize_l1(G, initial=A0, restarts=2, seed=0)
    e0 = mmopt.error.unit_objective(A0, G)
    assert error(G, sol.matrix) <= e0 * (1 + 1e-12)
    assert sol.extra["mode"] == "polish"


def test_rank_deficient_start_is_augmented_without_changing_its_error():
    from mmopt.search._local_objectives import full_rank

    W = wl.total(6)
    A0 = np.ones((1, 6))
    A1 = full_rank(A0)
    assert A1.shape == (6, 6) and np.linalg.matrix_rank(A1) == 6
    assert np.abs(A1).sum(axis=0).max() <= 1.001 * np.abs(A0).sum(axis=0).max()
    G = W.gram
    assert np.array_equal(G, np.ones((6, 6)))  # W = 1ᵀ
    eps = np.finfo(float).eps
    # G N = 0, so the added rows leave tr(G X⁻¹) at A0's tr(G (A0ᵀA0)⁺) = (1ᵀ1)²/‖1‖⁴ = 1. tr(G X⁻¹) =
    # ‖R⁻ᵀ1‖² with A1 = QR: Householder QR and the triangular solve are backward stable (Higham, Accuracy
    # and Stability, Thms 19.4, 8.5), so ‖R⁻ᵀ1‖ has relative error ≲ n·κ(A1)·eps and its square twice that.
    # κ(A1) ≈ 5e3: rtol = 2n·κ(A1)·eps ≈ 1.3e-11; measured ≤ 3e-4·κ(A1)·eps on OpenBLAS's SkylakeX, Haswell,
    # SandyBridge, Nehalem and Prescott kernels. (inv(A1ᵀA1) instead would square κ to 2.5e7 and lose up to
    # 0.21·κ(X)·eps = 1.2e-9 on Haswell, beyond the rel=1e-9 this test once used.)
    kappa = np.linalg.cond(A1)
    R = np.linalg.qr(A1, mode="r")
    y = scipy.linalg.solve_triangular(R, np.ones(6), trans="T")
    assert y @ y == pytest.approx(1.0, rel=2 * 6 * kappa * eps, abs=0)
    sol = minimize_l1(G, initial=A0, seed=0)
    # (Σσ)²/n = 6/6: cannot be beaten. tr(G X⁺) from a p×6 strategy is accurate to ~n·κ(X)·eps with
    # κ(X) = κ(A)² on its row space (1 here: the polish keeps the single total row); 100× that as margin.
    s = np.linalg.svd(sol.matrix, compute_uv=False)
    kappa_sol = s[0] / s[s > 1e-9 * s[0]][-1]
    assert error(G, sol.matrix) == pytest.approx(1.0, rel=100 * 6 * kappa_sol**2 * eps, abs=0)


def test_minimize_l1_refuses_a_gram_past_the_magnitudes_it_can_square():
    with pytest.raises(ValueError, match=r"'gram' parameter of minimize_l1 must have its largest entry"):
        minimize_l1(np.eye(3) * 1e-200)
