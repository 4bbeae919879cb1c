"""optimize(method="eigen_design"): Li & Miklau's eigen-query scaling against its convex program, the bounds,
the known optima, Monte Carlo, and honest statuses."""

import math

import cvxpy as cp
import numpy as np
import pytest

import mmopt
from mmopt import workload as wl
from mmopt.search.eigen_design import eigen_weights, solve_eigen_design

GAUSS = mmopt.Privacy(1.0, 1e-6)


def _program_value(G):
    """min Σ σᵢ/λᵢ s.t. Σᵢ λᵢ Qᵢⱼ² ≤ 1 by CLARABEL: the program's value, independent of mmopt's dual solver."""
    s, Q = eigen_weights(G)
    lam = cp.Variable(s.size, nonneg=True)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(s, cp.inv_pos(lam)))), [(Q * Q).T @ lam <= 1])
    prob.solve(solver="CLARABEL")
    assert prob.status == "optimal"
    return prob.value


def _unit(W):
    """The factor from optimize's normalised G back to the workload's total: m·tr(mean Gram)/n."""
    return W.n_queries * np.trace(W.mean_gram) / W.domain_size


@pytest.mark.parametrize("W", [wl.prefix(8), wl.all_range(8), wl.random_range(10, 7, seed=3)],
                         ids=["prefix", "all_range", "random_range"])
def test_objective_equals_the_convex_program_and_lies_between_the_bounds(W):
    res = mmopt.optimize(W, method="eigen_design")
    G = W.mean_gram / (np.trace(W.mean_gram) / W.domain_size)
    assert res.norm == "l2" and res.method == "eigen_design"
    # exact evaluate of the strategy = the program's optimal value (CLARABEL, 1e-6 relative)
    assert res.objective == pytest.approx(_program_value(G) * _unit(W), rel=1e-6)
    assert res.objective >= mmopt.svd_bound(W) * (1 - 1e-9)
    l2 = mmopt.optimize(W, method="l2_approx")  # Program 5.2 optimises over a superset of eigen-designs
    assert res.objective >= l2.objective * (1 - 1e-6)
    assert res.extra["family_dual_bound"] <= res.extra["family_objective"] * (1 + 1e-12)
    assert res.extra["family_gap"] <= 1e-7


def test_not_certified_globally_when_above_the_bound():
    res = mmopt.optimize(wl.prefix(16), method="eigen_design")
    assert res.ratio > 1.01                      # prefix: eigen-design is 1.47× the SVD bound, not optimal
    assert res.status == "local_optimum" and res.success
    assert "within the eigen-design family only" in res.message


@pytest.mark.parametrize("W", [wl.identity(6),
                               wl.Workload.from_matrix(np.array([np.roll([1.0, 1.0, 1.0, 0, 0, 0, 0, 0, 0, 0], k)
                                                                 for k in range(10)]), name="cyclic windows")],
                         ids=["identity", "circulant"])
def test_attains_the_svd_bound_where_the_optimum_is_known(W):
    """G with a constant-diagonal square root (identity; any circulant G): λ ∝ √σ is feasible with every
    constraint active, so the SVD bound is met and the status is certified."""
    res = mmopt.optimize(W, method="eigen_design")
    assert res.objective == pytest.approx(mmopt.svd_bound(W), rel=1e-7)
    assert res.status == "optimal"


def test_monte_carlo_matches_the_evaluated_error():
    W = wl.all_range(8)
    A = mmopt.optimize(W, method="eigen_design").strategy
    x = np.array([3.0, 0.0, 2.0, 5.0, 1.0, 0.0, 4.0, 7.0])
    r = mmopt.monte_carlo(W, A, x, GAUSS, runs=2000, seed=1)
    assert r.expected == pytest.approx(mmopt.evaluate(W, A, GAUSS).total_squared_error, rel=1e-12)
    assert abs(r.z_score) <= 4.0   # 4 standard errors of the 2,000-run mean


def test_zero_eigenvalues_are_not_measured():
    W = wl.Workload.from_matrix(np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]))
    res = mmopt.optimize(W, method="eigen_design")
    assert res.strategy.matrix.shape == (2, 4)   # two eigen-queries; the null space is never measured
    assert res.objective == pytest.approx(mmopt.svd_bound(W), rel=1e-7) and res.status == "optimal"


def test_budget_statuses_and_refusals():
    sol = solve_eigen_design(wl.all_range(16).mean_gram, max_iterations=1)
    assert sol.status == "user_limit" and "max_iterations=1" in sol.message
    with pytest.warns(UserWarning, match="optimises the l2 objective"):
        res = mmopt.optimize(wl.prefix(8), method="eigen_design", privacy=mmopt.Privacy(1.0))
    assert res.norm == "l1"
    with pytest.raises(ValueError, match="eigen_design.*takes no options"):
        mmopt.optimize(wl.prefix(8), method="eigen_design", options={"rank": 3})
    with pytest.raises(ValueError, match=r"\['solver'\] parameter\(s\) of optimize do not apply"):
        mmopt.optimize(wl.prefix(8), method="eigen_design", solver="SCS")
    assert math.isfinite(res.objective)
    # direct calls: tol ≤ 0 / NaN and max_iterations 0 / 2.5 ran and reported a status; a non-symmetric G was
    # solved from one triangle and called "optimal"
    G = wl.prefix(4).mean_gram
    for kw, error in (({"tol": 0.0}, ValueError), ({"tol": float("nan")}, ValueError),
                      ({"max_iterations": 0}, ValueError), ({"max_iterations": 2.5}, TypeError)):
        with pytest.raises(error, match=f"'{next(iter(kw))}' parameter of optimize.method='eigen_design'."):
            solve_eigen_design(G, **kw)
    with pytest.raises(ValueError, match="must be symmetric"):
        solve_eigen_design(G + np.triu(np.ones((4, 4)), 1))


@pytest.mark.parametrize("scale", [1e-100, 1e-20, 1e60])
def test_eigen_design_is_scale_free(scale):
    """The dual's gtol is absolute: G·1e-20 stopped 'optimal_inaccurate' at 15.66 where the family optimum is
    15.03 (16.02 from 1e-30 on). The eigenvalues are scaled into [0.5, 1) by a power of two inside."""
    G = np.tril(np.ones((6, 6))).T @ np.tril(np.ones((6, 6)))
    unit, scaled = solve_eigen_design(G), solve_eigen_design(G * scale)
    assert scaled.status == "optimal"
    assert np.allclose(scaled.matrix.T @ scaled.matrix, unit.matrix.T @ unit.matrix, atol=1e-9)
    assert scaled.extra["family_objective"] == pytest.approx(unit.extra["family_objective"] * scale, rel=1e-9)
    assert scaled.extra["family_dual_bound"] <= scaled.extra["family_objective"] * (1 + 1e-12)  # equal at round-off


def test_eigen_design_refuses_a_gram_past_the_magnitudes_it_can_square():
    with pytest.raises(ValueError, match="must have its largest entry between 1e-100 and 1e"):
        solve_eigen_design(np.eye(4) * 1e200)
