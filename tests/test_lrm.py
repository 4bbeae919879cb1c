"""optimize(method="lrm"): the Low-Rank Mechanism's decomposition W = BL, its L1 constraint, the bounds,
the exact re-evaluation, Monte Carlo, honest statuses and refusals."""

import numpy as np
import pytest

import mmopt
from mmopt import workload as wl
from mmopt.search.lrm import project_l1_columns, solve_lrm

EPS1 = mmopt.Privacy(1.0)


def _normalised(W):
    return W.mean_gram / (np.trace(W.mean_gram) / W.domain_size)


def _unit(W):
    return W.n_queries * np.trace(W.mean_gram) / W.domain_size


@pytest.mark.parametrize("W", [wl.prefix(8), wl.all_range(8)], ids=["prefix", "all_range"])
def test_bl_reproduces_w_in_the_unit_l1_ball_and_error_is_bounded(W):
    G = _normalised(W)
    sol = solve_lrm(G)
    B, L = sol.extra["B"], sol.matrix
    assert sol.status == "local_optimum" and sol.extra["residual"] <= 1e-9
    # B L is a factor of G (basis-free check of W' = BL, whatever square root of G the solver used)
    BL = B @ L
    np.testing.assert_allclose(BL.T @ BL, G, rtol=0, atol=1e-8 * np.abs(G).max())
    assert np.abs(L).sum(axis=0).max() <= 1 + 1e-12
    res = mmopt.optimize(W, method="lrm")
    assert res.norm == "l1" and res.status in ("local_optimum", "optimal")
    assert res.objective >= mmopt.svd_bound(W) * (1 - 1e-9)
    # least squares uses the best B for this L: never worse than LRM's own ‖B‖² with Δ ≤ 1
    assert res.objective <= sol.extra["lrm_objective"] * _unit(W) * (1 + 1e-6)
    # and it improves on its start, H₂ (the search moved)
    assert res.objective < mmopt.optimize(W, method="hierarchical").objective


def test_low_rank_workload_rank_and_support():
    rng = np.random.default_rng(4)
    W = wl.Workload.from_matrix(rng.integers(0, 2, (3, 12)).astype(float), name="low rank")
    res = mmopt.optimize(W, method="lrm")
    assert res.extra["init"] == "svd" and res.strategy.matrix.shape == (4, 12)   # r = ⌈1.2·3⌉
    assert np.isfinite(res.objective) and res.objective >= mmopt.svd_bound(W) * (1 - 1e-9)
    forced = mmopt.optimize(W, method="lrm", options={"rank": 3})
    assert forced.strategy.matrix.shape == (3, 12) and np.isfinite(forced.objective)


def test_monte_carlo_matches_the_evaluated_error():
    W = wl.prefix(8)
    A = mmopt.optimize(W, method="lrm").strategy
    x = np.array([3.0, 0.0, 2.0, 5.0, 1.0, 0.0, 4.0, 7.0])
    r = mmopt.monte_carlo(W, A, x, EPS1, runs=2000, seed=2)
    assert r.expected == pytest.approx(mmopt.evaluate(W, A, EPS1).total_squared_error, rel=1e-12)
    assert abs(r.z_score) <= 4.0


def test_l1_column_projection_is_the_euclidean_projection(rng):
    V = rng.standard_normal((6, 40)) * 2
    P = project_l1_columns(V)
    norms = np.abs(V).sum(axis=0)
    np.testing.assert_allclose(np.abs(P).sum(axis=0)[norms > 1], 1.0, rtol=1e-12)
    np.testing.assert_array_equal(P[:, norms <= 1], V[:, norms <= 1])
    for j in np.flatnonzero(norms > 1):   # soft thresholding by one τ: |v| − |p| equal where p ≠ 0
        on = P[:, j] != 0
        shift = np.abs(V[on, j]) - np.abs(P[on, j])
        np.testing.assert_allclose(shift, shift[0], rtol=1e-10)
        assert np.all(np.abs(V[~on, j]) <= shift[0] + 1e-12)
        assert np.all(np.sign(P[on, j]) == np.sign(V[on, j]))


def test_statuses_and_refusals():
    sol = solve_lrm(_normalised(wl.prefix(16)), max_iterations=3)
    assert sol.status == "user_limit" and "max_iterations=3" in sol.message
    res = mmopt.optimize(wl.prefix(16), method="lrm", max_iterations=3)
    assert res.status == "user_limit" and not res.success
    with pytest.raises(ValueError, match="'rank' option of optimize\\(method='lrm'\\) must be at least"):
        mmopt.optimize(wl.prefix(8), method="lrm", options={"rank": 5})
    with pytest.raises(ValueError, match="'hierarchical' start has 15 rows"):
        mmopt.optimize(wl.prefix(8), method="lrm", options={"rank": 9, "init": "hierarchical"})
    with pytest.raises(ValueError, match="'init' option of optimize\\(method='lrm'\\) must be one of"):
        mmopt.optimize(wl.prefix(8), method="lrm", options={"init": "random"})
    with pytest.raises(ValueError, match=r"\['solver'\] parameter\(s\) of optimize do not apply"):
        mmopt.optimize(wl.prefix(8), method="lrm", solver="SCS")


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_lrm_refuses_a_gram_past_the_magnitudes_it_can_square(scale):
    """LAPACK's 'SVD did not converge' before; the strategy does not depend on G's scale, the message says so."""
    with pytest.raises(ValueError, match="does not depend on the Gram's scale"):
        solve_lrm(wl.prefix(6).mean_gram * 6 * scale)


def test_a_full_rank_workload_the_alternation_does_not_span_is_refused_in_lrms_words():
    """identity(4) at 0.01 beside the total (full rank): the run ended at user_limit with L of rank 1, and evaluate
    then refused "strategy 'lrm'" telling the user to add rows to A; the span check ran only for k < n."""
    W = wl.stack([wl.identity(4), wl.total(4)], weights=[0.01, 1.0])
    with pytest.raises(ValueError, match=r"before L spanned the workload's row space \(rank 4\).*'l2_approx'"):
        mmopt.optimize(W, method="lrm", seed=0)
