"""optimize(method="auto") on prefix sums and all ranges (mmopt.auto's structured and dense candidates),
the bounds optimize reports for them, and the certified bracket on γ_F of the counting matrix."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz
from mmopt import workload as wl
from mmopt.dense import _gram_forms
from mmopt.error import diagonal_bound

GAUSS = mmopt.Privacy(1.0, delta=1e-6)


def _refuse_dense_gram(monkeypatch):
    def refuse(family, n, caller):
        raise AssertionError(f"auto built the dense {n}×{n} Gram of {family}")
    monkeypatch.setattr(_gram_forms, "family_mean_gram", refuse)


@pytest.fixture
def no_dense_gram(monkeypatch):
    """Any attempt to build a dense prefix / all-range Gram fails the test."""
    _refuse_dense_gram(monkeypatch)


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
def test_auto_past_the_dense_limit_is_structured_and_certified(kind, no_dense_gram):
    n = 2048  # past the dense closed forms: the structured candidates and the tridiagonal dual, nothing n×n but it
    W = getattr(toeplitz, kind)(n)
    res = mmopt.optimize(W, method="auto", privacy=GAUSS)
    cands = res.extra["candidates"]
    assert set(cands) == {"weighted_sqrt", "sqrt", "l2_approx"} and res.success
    weighted = toeplitz.evaluate_weighted(W).total_squared_error
    assert cands["weighted_sqrt"]["objective"] == pytest.approx(weighted, rel=1e-12)
    assert cands["sqrt"]["objective"] > cands["weighted_sqrt"]["objective"]  # the causal one costs more
    # the dual's iterate wins, certified within auto's gap 1e-4 by its own dual bound (above the diagonal bound)
    assert res.method == "auto:l2_approx" and res.status == "optimal" and res.objective < weighted
    assert res.lower_bound >= toeplitz.lower_bound(W).value and 1.0 <= res.ratio <= 1 + 1e-4
    assert res.objective_per_query * W.n_queries == pytest.approx(res.objective, rel=1e-12)
    # the dual's own primal value is the strategy's exact error (checked densely, O(n³), at a smaller n below)
    assert res.extra["candidates"]["l2_approx"]["exact"]


def test_the_dual_candidate_is_scored_exactly():
    W = wl.prefix(600)  # the tridiagonal dual from 512 cells; its primal against the dense evaluation
    res = mmopt.optimize(W, privacy=GAUSS)
    assert res.method == "auto:l2_approx"
    assert res.objective == pytest.approx(mmopt.evaluate(W, res.strategy, norm="l2").total_squared_error,
                                          rel=1e-9)


def test_auto_below_the_dense_limit_is_the_dense_search():
    n = 64
    res = mmopt.optimize(toeplitz.prefix(n), method="auto", privacy=GAUSS)
    dense = mmopt.optimize(wl.prefix(n), method="auto", privacy=GAUSS)
    assert res.method == dense.method == "auto:l2_approx" and res.status == "optimal"
    assert res.objective == pytest.approx(dense.objective, rel=1e-9)
    cand = res.extra["candidates"]
    assert "weighted_sqrt" in cand and cand["weighted_sqrt"]["status"] == "closed_form"
    # the weighted square root is within 0.3 % of the certified optimum at n = 64 (measured 1.0025)
    assert res.objective < cand["weighted_sqrt"]["objective"] < 1.004 * res.objective


def test_auto_on_dense_prefix_past_1024_cells_runs_the_dual_not_the_dense_closed_forms():
    n = 1100
    res = mmopt.optimize(wl.prefix(n), method="auto", privacy=GAUSS)
    # the O(n³) dense closed forms are not run there (1.5× the bound); nothing failed
    assert set(res.extra["candidates"]) == {"weighted_sqrt", "l2_approx"} and res.extra["failed"] == {}
    ws = res.extra["candidates"]["weighted_sqrt"]["objective"]
    assert ws == pytest.approx(toeplitz.evaluate_weighted(toeplitz.prefix(n)).total_squared_error, rel=1e-12)
    assert res.method == "auto:l2_approx" and res.objective < ws
    assert res.lower_bound >= toeplitz.prefix_bound(n).value * (1 - 1e-9) and res.ratio <= 1 + 1e-4


@pytest.mark.parametrize("kind", ["prefix", "all_range"])
def test_auto_closed_form_svd_bound_matches_the_dense_one(kind):
    from mmopt.multidim.search import _svd_bound
    W = getattr(wl, kind)(37)
    value, exact = _svd_bound(W)
    assert exact and value == pytest.approx(mmopt.svd_bound(W), rel=1e-11)


def test_auto_under_laplace_noise_does_not_run_the_gaussian_methods():
    res = mmopt.optimize(wl.prefix(32), method="auto", privacy=mmopt.Privacy(1.0))
    assert res.norm == "l1" and "weighted_sqrt" not in res.extra["candidates"] and res.extra["failed"] == {}
    assert res.method == "auto:min_error"


def test_auto_under_laplace_noise_past_the_dense_limit_gives_h_b_within_a_fast_budget(no_dense_gram):
    """toeplitz.prefix(5,000) under ε-DP: the p-Identity search is expected to take minutes, over a "fast"
    budget, so it is skipped with the reason; H_8 / H_16 are scored exactly in one pass over the tree (it used to
    refuse)."""
    res = mmopt.optimize(toeplitz.prefix(5000), privacy=mmopt.Privacy(1.0), budget="fast")
    assert set(res.extra["candidates"]) == {"tree", "tree_weighted"} and res.method == "auto:tree_weighted"
    assert "budget 'fast'" in res.extra["skipped"]["min_error"] and res.status == "local_optimum"  # weights searched
    assert res.lower_bound == pytest.approx(toeplitz.lower_bound(toeplitz.prefix(5000)).value, rel=1e-12)
    assert 1 < res.ratio < 40  # H_8 is 31.5× the (Gaussian, diagonal) bound here; min_error reaches ~6.8×


def test_auto_under_laplace_noise_on_dense_prefix_past_the_dense_limit_searches_the_stream_twin(monkeypatch):
    """wl.prefix(4,200) under ε-DP: the O(n) search runs on toeplitz.prefix(n) (100 steps beat the weighted tree)
    and its p-Identity strategy is released and evaluated with the dense workload as itself (the dense search's n×n
    strategy took 24 s to release at 5,000 cells; priced whole, auto skipped it and returned the weighted tree)."""
    from mmopt.search.pidentity import PIdentityStrategy
    n, eps = 4200, mmopt.Privacy(1.0)
    W = wl.prefix(n)
    _refuse_dense_gram(monkeypatch)  # W holds its Gram: none built after it
    res = mmopt.optimize(W, privacy=eps, max_iterations=100)
    assert res.method == "auto:min_error" and isinstance(res.strategy, PIdentityStrategy)
    assert res.ratio < res.extra["candidates"]["tree_weighted"]["objective"] / res.lower_bound
    report = mmopt.evaluate(W, res.strategy, eps)  # 2/ε² per unit of the objective
    assert report.total_squared_error == pytest.approx(2 * res.objective, rel=1e-9)
    out = mmopt.release(W, res.strategy, np.arange(n, dtype=float), eps)
    assert out.answers.shape == (n,) and np.all(np.isfinite(out.answers))


def test_other_multidim_methods_still_refuse_stream_workloads():
    with pytest.raises(TypeError, match="StreamWorkload"):
        mmopt.optimize(toeplitz.prefix(8), method="kron")


# -- the lower bound optimize reports: the strongest certified one ----------------------------------------
@pytest.mark.parametrize("method", ["hierarchical", "wavelet", "identity"])
def test_dense_optimize_reports_the_diagonal_bound(method):
    W = wl.prefix(64)
    res = mmopt.optimize(W, method=method, norm="l2")
    assert res.lower_bound == pytest.approx(diagonal_bound(W), rel=1e-12)
    assert res.lower_bound > mmopt.svd_bound(W) * 1.04  # 5.3 % above the SVD bound at n = 64
    assert res.lower_bound == pytest.approx(toeplitz.prefix_bound(64).diagonal, rel=1e-9)  # two computations


def test_weighted_sqrt_and_l2_approx_report_consistent_bounds():
    W = wl.prefix(64)
    ws = mmopt.optimize(W, method="weighted_sqrt")
    opt = mmopt.optimize(W, method="l2_approx")
    assert ws.lower_bound == pytest.approx(toeplitz.prefix_bound(64).value, rel=1e-12)
    # l2_approx's duality bound is tighter than the diagonal bound, and both are below the optimum
    assert diagonal_bound(W) < opt.lower_bound <= opt.objective < ws.objective
    assert opt.lower_bound == pytest.approx(opt.objective, rel=1e-6)


# -- γ_F of the counting matrix: a certified bracket, checked against the dense optimum -----------------
@pytest.mark.parametrize("kind,n", [("prefix", 16), ("prefix", 96), ("all_range", 40)])
def test_structured_bracket_contains_the_dense_certified_optimum(kind, n):
    """OPT = γ_F(W)² (Δ₂² ‖W A⁺‖_F² minimised); the O(n log n) bound and the weighted square root bracket the
    dense certified optimum (l2_approx, duality gap ≤ 10⁻⁶): an independent check of both ends."""
    S = getattr(toeplitz, kind)(n)
    lower = toeplitz.lower_bound(S).value
    upper = toeplitz.evaluate_weighted(S).total_squared_error
    opt = mmopt.optimize(getattr(wl, kind)(n), method="l2_approx")
    assert opt.status == "optimal"
    assert lower <= opt.lower_bound * (1 + 1e-9) and opt.objective <= upper * (1 + 1e-9)
    assert upper / lower < 1.015  # 1.0103 at prefix(16), shrinking with n


@pytest.mark.parametrize("n", [2**10, 2**16])
def test_counting_matrix_bracket_follows_the_log_asymptotics(n):
    """Loose sanity check: γ_F(W)²/n lies between (ln n/π)² and (1 + ln n/π)² (Fichtenberger, Henzinger &
    Upadhyay 2023: both ends are (ln n/π)²(1 + o(1))); the square root's Δ₂² − ln(n)/π converges."""
    a = np.log(n) / np.pi
    lower = toeplitz.prefix_bound(n).value / n
    upper = toeplitz.evaluate_weighted(toeplitz.prefix(n)).total_squared_error / n
    assert a**2 < lower < upper < (1 + a) ** 2
    c = toeplitz.strategies.sqrt_coefficients(n)  # c_k² ≈ 1/(πk): Σ c_k² = ln(n)/π + const + O(1/n)
    assert abs((c @ c - a) - 1.066276) < 2e-3
