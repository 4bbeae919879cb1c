"""Monte-Carlo regression: `evaluate` against simulation of the mechanism itself, on rank-deficient cases.

The formula c·Δ²·tr(G (AᵀA)⁺) is the expectation of ‖W x̂ − W x‖² over the noise; here it is checked
against the average of that quantity over thousands of seeded runs of `matrix_mechanism`, within five
standard errors, for workloads whose Gram is singular (marginals, a few random ranges), for strategies
with exact and round-off null directions, and for both noise types. These are the cases where `evaluate`
once reported errors below the proven lower bound (RMSE 2.80 against a bound of 8.33).
"""

import math

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import mmopt
from mmopt import Privacy
from mmopt import strategy as st
from mmopt import workload as wl

LAPLACE, GAUSS = Privacy(1.0), Privacy(1.0, 1e-6)


def _simulated_total(W, A, x, privacy, draws, seed=0):
    """Mean and standard error of ‖W x̂ − W x‖² over ``draws`` runs of the mechanism."""
    out = mmopt.matrix_mechanism(W, A, x, privacy, rng=seed, size=draws)
    sq = np.sum((out.answers - W.explicit_matrix() @ x) ** 2, axis=1)
    return float(np.mean(sq)), float(np.std(sq) / np.sqrt(draws))


def _roundoff_sqrt(W):
    """√X of the (ε,δ)-optimal Gram with round-off eigenvalues kept: ~170 fake directions of size 1e-8."""
    from mmopt.search.l2_fast import solve_l2

    G = W.mean_gram / (np.trace(W.mean_gram) / W.domain_size)
    lam, V = np.linalg.eigh(solve_l2(G, tol=1e-8).gram)
    return st.Strategy((V * np.sqrt(np.clip(lam, 0, None))) @ V.T, "sqrt(X_l2) with round-off")


def _near_null(n, k):
    """Identity on the first k cells plus two directions 1e-9 and 1e-13 the workload never uses."""
    A = np.zeros((k + 2, n))
    A[:k, :k] = np.eye(k)
    A[k, k:] = 1e-9
    A[k + 1, -1] = 1e-13
    return st.Strategy(A, "near-null")


MARGINALS = wl.marginals((4, 4, 4, 4), 2)
CASES = {
    "marginals/identity": (MARGINALS, lambda W: st.identity(256)),
    "marginals/workload": (MARGINALS, st.from_workload),
    "marginals/roundoff-sqrt": (MARGINALS, _roundoff_sqrt),
    "random_range/workload": (wl.random_range(64, 20, seed=1), st.from_workload),
    "random_range/H2": (wl.random_range(64, 20, seed=1), lambda W: st.hierarchical(64)),
    "first-cells/near-null": (wl.kron(wl.Workload.from_matrix([[1.0, 0.0]]), wl.identity(8)),
                              lambda W: _near_null(16, 8)),
}


@pytest.mark.parametrize("privacy", [LAPLACE, GAUSS], ids=["laplace", "gaussian"])
@pytest.mark.parametrize("case", list(CASES))
def test_evaluate_matches_simulation(case, privacy):
    W, make = CASES[case]
    A = make(W)
    x = np.random.default_rng(3).integers(0, 50, W.domain_size).astype(float)
    report = mmopt.evaluate(W, A, privacy)
    mean, se = _simulated_total(W, A, x, privacy, draws=20_000)
    assert abs(mean - report.total_squared_error) <= 5 * se, (mean, se, report.total_squared_error)
    assert report.total_squared_error >= mmopt.svd_bound(W, privacy) * (1 - 1e-9)


def test_roundoff_strategy_is_worse_than_identity_and_above_the_bound():
    """The case of the bug report: 2-way marginals over 4⁴, the round-off √X_L2 strategy."""
    A = _roundoff_sqrt(MARGINALS)
    r1, r2 = mmopt.evaluate(MARGINALS, A, LAPLACE), mmopt.evaluate(MARGINALS, A, GAUSS)
    assert r1.rmse > mmopt.evaluate(MARGINALS, st.identity(256), LAPLACE).rmse
    assert r2.total_squared_error >= mmopt.svd_bound(MARGINALS, GAUSS) * (1 - 1e-9)
    assert np.all(r1.per_query_variance >= 0) and r1.max_variance <= r1.max_variance_upper


@pytest.mark.parametrize("case", ["marginals/roundoff-sqrt", "random_range/workload", "first-cells/near-null"])
def test_same_number_at_one_and_two_blas_threads(case):
    W, make = CASES[case]
    A = make(W)
    values = []
    for threads in (1, 2):
        with threadpool_limits(threads, user_api="blas"):
            values.append([mmopt.evaluate(W, A, p).total_squared_error for p in (LAPLACE, GAUSS)])
    np.testing.assert_allclose(values[0], values[1], rtol=1e-9)


# Laplace's run is slow-marked (9 s; CI time): the other Monte-Carlo tests here cover Laplace noise
@pytest.mark.parametrize("privacy", [pytest.param(LAPLACE, marks=pytest.mark.slow), GAUSS], ids=["laplace", "gaussian"])
def test_five_attribute_marginals_match_simulation(privacy):
    """The bug report's second case (n = 1024; ~7 s each)."""
    W = wl.marginals((4, 4, 4, 4, 4), 2)
    for A in (st.identity(1024), _roundoff_sqrt(W)):
        x = np.random.default_rng(4).integers(0, 50, 1024).astype(float)
        mean, se = _simulated_total(W, A, x, privacy, draws=20_000)
        assert abs(mean - mmopt.evaluate(W, A, privacy).total_squared_error) <= 5 * se


def test_counts_too_large_to_resolve_the_noise_are_refused():
    """x = 1e300: the errors drawn were the answers' round-off (6e284), the result read total inf against the
    expected 46, and the scaled figures raised OverflowError (x_l1²) after every run was drawn."""
    from mmopt.montecarlo import monte_carlo
    with pytest.raises(ValueError, match="'x' parameter of monte_carlo has counts too large to simulate"):
        monte_carlo(wl.prefix(4), st.hierarchical(4), [1e300] * 4, Privacy(1.0), runs=10, seed=0)
    big = monte_carlo(wl.prefix(4), st.hierarchical(4), [1e9] * 4, Privacy(1.0), runs=10, seed=0)
    # every run's total finite (~1e161) but their squares not: the std and intervals read inf (a helper's probe)
    tiny = monte_carlo(wl.prefix(4), st.identity(4), [1.0, 2, 3, 4], Privacy(1e-80), runs=10, seed=0)
    T = tiny.per_run_total / 1e150
    assert tiny.total_std == pytest.approx(1e150 * float(np.std(T, ddof=1)), rel=1e-12)
    assert math.isfinite(tiny.total_ci.high) and math.isfinite(tiny.rmse_ci.high)
    with pytest.raises(ValueError, match="'privacy' parameter of monte_carlo makes the expected total squared error "
                                         "exceed float64"):  # NaN summaries before
        monte_carlo(wl.prefix(4), st.identity(4), [1.0, 2, 3, 4], Privacy(1e-160), runs=10, seed=0)
    assert np.isfinite(big.total_squared_error) and big.scaled_squared_error > 0


def test_stream_and_records_marginal_workloads_are_simulated_like_their_twins():
    # evaluate took both, monte_carlo failed after it with AttributeError ('... has no attribute matrix')
    from mmopt import toeplitz
    from mmopt.structured.residual.workload import marginal_workload
    pr = Privacy(1.0)
    H = st.hierarchical(16)
    a = mmopt.monte_carlo(toeplitz.prefix(16), H, np.arange(16.0), pr, runs=20, seed=0)
    b = mmopt.monte_carlo(wl.prefix(16), H, np.arange(16.0), pr, runs=20, seed=0)
    assert a.expected == pytest.approx(b.expected, rel=1e-12)
    assert a.total_squared_error == pytest.approx(b.total_squared_error, rel=1e-9)
    W = marginal_workload((4, 3, 2), {(0, 1): 1.0, (0, 2): 1.0, (1, 2): 1.0})
    A = st.marginals((4, 3, 2), np.ones(8))
    c = mmopt.monte_carlo(W, A, np.arange(24.0), pr, runs=20, seed=0)
    d = mmopt.monte_carlo(mmopt.structured.marginals((4, 3, 2), 2), A, np.arange(24.0), pr, runs=20, seed=0)
    assert c.expected == pytest.approx(d.expected, rel=1e-12)
    assert c.total_squared_error == pytest.approx(d.total_squared_error, rel=1e-9)
    g = Privacy(1.0, 1e-6)
    T = mmopt.optimize(wl.prefix(16), method="toeplitz", privacy=g).strategy  # a stream strategy, too
    e = mmopt.monte_carlo(toeplitz.prefix(16), T, np.arange(16.0), g, runs=20, seed=0)
    assert e.expected == pytest.approx(mmopt.evaluate(wl.prefix(16), T.to_strategy(), g).total_squared_error)


def test_the_interval_is_student_t_and_covers_near_its_level_at_few_runs():
    """mean ± 1.96·s/√R at every R covered the exact expectation in 64 % of calls at R = 2 and 79 % at R = 5 (a
    helper's probe): the t quantile now. Oracles: scipy's t quantile on the per-run totals, and the exact
    expectation (mmopt.evaluate) over independent seeded calls."""
    from scipy import stats
    W, H = mmopt.workload.prefix(8), mmopt.strategy.hierarchical(8)
    r = mmopt.monte_carlo(W, H, np.zeros(8), mmopt.Privacy(1.0), runs=2, seed=3)
    half = stats.t.ppf(0.975, 1) * r.per_run_total.std(ddof=1) / np.sqrt(2)
    assert (r.total_ci.low, r.total_ci.high) == pytest.approx((r.total_squared_error - half,
                                                               r.total_squared_error + half), rel=1e-12)
    calls = [mmopt.monte_carlo(W, H, np.zeros(8), mmopt.Privacy(1.0), runs=5, seed=1000 + s) for s in range(300)]
    coverage = np.mean([c.total_ci.low <= c.expected <= c.total_ci.high for c in calls])
    assert coverage >= 0.83  # 0.87 measured (the totals' skew costs the rest); the normal quantile gave 0.79


def test_a_participation_strategy_is_warned_under_monte_carlos_name():
    """A strategy optimised under a participation schema was warned about as "evaluate: strategy …", a function the
    user did not call (monte_carlo checks the pair through evaluate; an audit): the warning names monte_carlo."""
    from mmopt.participation import fixed_epochs
    W = mmopt.workload.prefix(8)
    A = mmopt.optimize(W, participation=fixed_epochs(2)).strategy
    with pytest.warns(UserWarning, match=r"^monte_carlo: strategy 'participation-optimum' was optimised for private "
                                         r"training under FixedEpochs") as seen:
        mmopt.monte_carlo(W, A, np.ones(8), mmopt.Privacy(1.0, 1e-6), runs=20, seed=0)
    assert not any(str(w.message).startswith("evaluate:") for w in seen)
