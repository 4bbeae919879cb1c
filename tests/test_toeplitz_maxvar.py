"""mmopt.toeplitz.maxvar: the max-variance minimax on prefix sums and all ranges in prefix coordinates, against the
dense rows (Gram, variances, row order), the dense certified search, feasible strategies, and through optimize/plan."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz
from mmopt import workload as wl
from mmopt.family.maxvar_routes import range_kind
from mmopt.search.max_variance import solve_max_variance
from mmopt.toeplitz import maxvar as rm

KINDS = ("prefix", "all_range")


@pytest.mark.parametrize("kind", KINDS)
def test_edges_are_the_workload_rows(kind):
    n = 9
    a, b = rm.edges(kind, n)
    rows = np.array([[float(lo <= s < hi) for s in range(n)] for lo, hi in zip(a, b, strict=True)])
    np.testing.assert_array_equal(rows, getattr(wl, kind)(n).explicit_matrix())


@pytest.mark.parametrize("kind", KINDS)
def test_gram_equals_the_weighted_dense_gram(kind):
    n = 11
    W = getattr(wl, kind)(n).explicit_matrix()
    c = np.random.default_rng(0).uniform(0.1, 5.0, W.shape[0])
    a, b = rm.edges(kind, n)
    # sums of ≤ m positive terms each way: agreement to a few hundred eps relative
    np.testing.assert_allclose(rm.gram(a, b, c, n), W.T @ (c[:, None] * W), rtol=1e-13)


@pytest.mark.parametrize("kind", KINDS)
def test_variances_equal_the_dense_quadratic_forms(kind):
    n = 16
    W = getattr(wl, kind)(n).explicit_matrix()
    R = np.random.default_rng(1).standard_normal((n, n))
    X = R @ R.T / n + np.eye(n)  # condition number ~10: the cancellation in Y_aa + Y_bb − 2Y_ab costs ≤ 10³ eps
    expected = np.einsum("ij,ij->i", W @ np.linalg.inv(X), W)
    np.testing.assert_allclose(rm.variances(X, *rm.edges(kind, n)), expected, rtol=1e-11)


@pytest.mark.parametrize(("kind", "n"), [("prefix", 16), ("all_range", 12)])
def test_solve_agrees_with_the_dense_certified_search(kind, n):
    W = getattr(wl, kind)(n).explicit_matrix()
    tau = np.random.default_rng(2).uniform(1.0, 10.0, W.shape[0])
    tol = 1e-5
    s = rm.solve(kind, n, tau, tol=tol)
    d = solve_max_variance(W, tau, tol=tol)
    assert s.status == "optimal"  # the dense search may end "optimal_inaccurate": its bracket is still certified
    assert s.lower_bound <= s.objective <= s.lower_bound * (1 + tol)
    # two certified brackets of the same minimax value must overlap (round-off: 1e-9 relative)
    assert s.lower_bound <= d.objective * (1 + 1e-9) and d.lower_bound <= s.objective * (1 + 1e-9)
    # the returned X: feasible, and its variances are the dense ones
    assert np.max(np.diag(s.gram)) <= 1 + 1e-12
    np.testing.assert_allclose(s.variances, np.einsum("ij,ij->i", W @ np.linalg.inv(s.gram), W), rtol=1e-9)


def test_lower_bound_is_below_feasible_strategies():
    n = 32
    kind = "all_range"
    a, b = rm.edges(kind, n)
    tau = np.random.default_rng(3).uniform(1.0, 4.0, len(a))
    s = rm.solve(kind, n, tau, tol=1e-3, max_iterations=40)
    H = mmopt.strategy.hierarchical(n).matrix
    for X in (np.eye(n), H.T @ H):
        value = float(np.max(rm.variances(X, a, b) / tau)) * float(np.max(np.diag(X)))
        assert s.lower_bound <= value
    assert s.lower_bound <= s.objective


def test_spent_budget_is_user_limit():
    tau = np.random.default_rng(4).uniform(1.0, 9.0, 64 * 65 // 2)
    s = rm.solve("all_range", 64, tau, tol=1e-8, max_iterations=3)
    assert s.status == "user_limit" and s.iterations == 3
    assert s.lower_bound < s.objective


@pytest.mark.parametrize("workload", [wl.all_range(20), toeplitz.all_range(20), wl.prefix(20), toeplitz.prefix(20)])
def test_optimize_routes_ranges_and_scores_the_strategy_exactly(workload):
    m = workload.n_queries
    tau = np.random.default_rng(5).uniform(1.0, 6.0, m)
    res = mmopt.optimize(workload, objective="max_variance", targets=tau)
    assert res.solver == "mmopt-range-minimax" and res.status == "optimal"
    dense = getattr(wl, "prefix" if m == 20 else "all_range")(20)
    report = mmopt.evaluate(dense, res.strategy, mmopt.Privacy(1.0, 1e-6), per_query=True)
    unit = np.asarray(report.per_query_variance) / mmopt.Privacy(1.0, 1e-6).variance_factor
    np.testing.assert_allclose(res.extra["per_query_variance"], unit, rtol=1e-9)
    assert res.lower_bound <= res.objective <= res.lower_bound * (1 + 1e-4)
    assert res.objective == pytest.approx(float(np.max(unit / tau)), rel=1e-9)


def test_a_permuted_twin_is_not_taken_for_its_rows():
    rows = wl.all_range(6).explicit_matrix()[::-1]  # same Gram, other row order: targets would land on other rows
    twin = wl.Workload.from_matrix(rows)
    assert range_kind(twin) is None and range_kind(wl.all_range(6)) == ("all_range", 6)
    tau = np.arange(1.0, len(rows) + 1)
    res = mmopt.optimize(twin, objective="max_variance", targets=tau)
    assert res.solver != "mmopt-range-minimax"
    v = np.einsum("ij,ij->i", rows @ np.linalg.pinv(res.strategy.matrix.T @ res.strategy.matrix), rows)
    v *= res.strategy.sensitivity("l2") ** 2
    assert res.objective == pytest.approx(float(np.max(v / tau)), rel=1e-8)


def test_plan_with_heterogeneous_targets_meets_every_one():
    n = 48
    tau = np.random.default_rng(6).uniform(2.0, 20.0, n * (n + 1) // 2)
    p = mmopt.plan(wl.all_range(n), targets=tau, kind="se", delta=1e-9)
    assert p.status == "optimal" and 1.0 <= p.ratio <= 1.001
    report = mmopt.evaluate(wl.all_range(n), p.strategy, p.privacy, per_query=True)
    # evaluate's analytic Gaussian factor, rescaled to the release calibration the plan holds for
    from mmopt.planning.calibration import variance_factor
    achieved = np.asarray(report.per_query_variance) * variance_factor(p.epsilon, 1e-9) / p.privacy.variance_factor
    np.testing.assert_allclose(achieved, p.per_query_variance, rtol=1e-9)
    assert np.all(achieved <= tau ** 2)
    # and for the noise mmopt.release draws at the budget found (OpenDP's σ), as the plan promises
    out = mmopt.release(wl.all_range(n), p.strategy, np.zeros(n), p.privacy)
    unit = mmopt.evaluate(wl.all_range(n), p.strategy, None, norm="l2", per_query=True).per_query_variance
    assert np.all(out.noise_scale ** 2 * np.asarray(unit) / out.sensitivity ** 2 <= tau ** 2)


def test_an_unknown_kind_or_bad_targets_are_refused():
    """An unknown kind was solved as all ranges; targets <= 0 ended in LAPACK's LinAlgError, the wrong length in
    a broadcasting error."""
    with pytest.raises(ValueError, match="'kind' parameter of mmopt.toeplitz.maxvar must be 'prefix' or"):
        rm.solve("bogus", 4, np.ones(10))
    with pytest.raises(ValueError, match="'kind' parameter of toeplitz.svd_bound"):
        toeplitz.svd_bound(5, "bogus")
    with pytest.raises(ValueError, match="must be > 0 .* Got 1 entries <= 0"):
        rm.solve("prefix", 4, np.array([1.0, 0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match=r"must have length 4 \(one per query of prefix\(4\)\)"):
        rm.solve("prefix", 4, np.ones(3))
    with pytest.raises(TypeError, match="'targets' parameter of .* not booleans"):  # read as 1, 1 before
        rm.solve("prefix", 2, np.array([True, True]))
    # before allocating: n = 4,097 (past MAX_N) built its (n+1)² arrays, n = 0 divided by zero, max_iterations=0
    # failed unpacking None, tol <= 0 spent every iteration
    for kw, name in (({"n": rm.MAX_N + 1}, "n"), ({"n": 0}, "n"), ({"max_iterations": 0}, "max_iterations"),
                     ({"tol": 0.0}, "tol")):
        args = {"n": 3, **kw}
        with pytest.raises(ValueError, match=f"'{name}' parameter of mmopt.toeplitz.maxvar.solve"):
            rm.solve("prefix", args.pop("n"), np.ones(3), **args)
