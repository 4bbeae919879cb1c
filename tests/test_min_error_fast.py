"""optimize(method="min_error") on prefix sums and all ranges from 512 cells: the O(n) Gram path
(mmopt.search.min_error_fast).

Notation: see README. The reported objective is recomputed densely by mmopt.evaluate (an O(n³) solve) where that
is cheap: both are exact up to round-off of order u·cond(X) ≪ 1e-9 for these strategies (Δ₁ = 1, d ≤ p + 1).
"""

import tracemalloc

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz
from mmopt import workload as wl
from mmopt.search import min_error_fast as fast
from mmopt.search.min_error_fast import FAST_MIN_N, takes
from mmopt.search.pidentity import PIdentityStrategy


def test_dense_prefix_takes_the_fast_path_and_reports_the_exact_error():
    W = wl.prefix(FAST_MIN_N)
    p = {"p": FAST_MIN_N // 16}  # given p: the search alone, no H_b beside it
    res = mmopt.optimize(W, method="min_error", seed=0, max_iterations=20, options=p)
    assert res.extra["gram_operator"].startswith("prefix") and res.extra["p"] == FAST_MIN_N // 16
    assert res.status == "user_limit" and not res.success  # 20 iterations: the budget ended it, and it says so
    assert mmopt.evaluate(W, res.strategy).total_squared_error == pytest.approx(res.objective, rel=1e-9)
    assert res.lower_bound == pytest.approx(toeplitz.prefix_bound(FAST_MIN_N).value, rel=1e-12)
    assert res.lower_bound < res.objective < mmopt.evaluate(W, mmopt.strategy.identity(FAST_MIN_N)).total_squared_error
    again = mmopt.optimize(toeplitz.prefix(FAST_MIN_N), method="min_error", seed=0, max_iterations=20, options=p)
    assert isinstance(again.strategy, PIdentityStrategy) and again.objective == pytest.approx(res.objective, rel=1e-12)


def test_stream_workload_at_large_n_forms_nothing_n_by_n():
    n = 20_000  # a dense n×n float64 would be 3.2 GB; p = 4 keeps the search itself small
    tracemalloc.start()
    res = mmopt.optimize(toeplitz.all_range(n), method="min_error", seed=0, max_iterations=3, options={"p": 4})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1000 * n * 8  # L-BFGS-B's memory and a few hundred length-n vectors, never n² entries (n/20 here)
    assert isinstance(res.strategy, PIdentityStrategy) and res.strategy.theta.shape == (4, n)
    assert res.lower_bound == pytest.approx(toeplitz.all_range_bound(n).value, rel=1e-12)
    assert res.lower_bound < res.objective
    assert res.objective_per_query == pytest.approx(res.objective / (n * (n + 1) // 2), rel=1e-12)


def test_small_n_and_dense_requests_keep_the_dense_pipeline():
    assert not takes(wl.prefix(FAST_MIN_N - 1), {}, None)
    assert not takes(wl.marginals((32, 32), 1), {}, None)  # not prefix / all ranges
    assert not takes(wl.prefix(FAST_MIN_N), {}, initial="identity")
    assert not takes(wl.prefix(FAST_MIN_N), {"polish": True}, None)
    assert takes(toeplitz.all_range(FAST_MIN_N), {"engine": "local"}, None)
    res = mmopt.optimize(wl.prefix(100), method="min_error", seed=0, options={"restarts": 1, "polish": False},
                         max_iterations=30)
    assert "gram_operator" not in res.extra  # n < 512: the dense pipeline, as before


def test_refusals():
    with pytest.raises(ValueError, match="stops at 4,096 cells"):
        mmopt.optimize(toeplitz.prefix(5000), method="min_error", initial="identity")
    with pytest.raises(ValueError, match="nothing reads 'solver' or 'weight'"):
        mmopt.optimize(toeplitz.prefix(600), method="min_error", solver="SCS")
    with pytest.raises(ValueError, match="'restarts' option"):
        mmopt.optimize(toeplitz.prefix(600), method="min_error", options={"restarts": 0})


def test_hierarchy_theta_is_h_b_scored_exactly():
    from mmopt.dense.gram_operator import prefix_gram
    from mmopt.search.min_error_fast import hierarchy_theta
    from mmopt.search.pidentity import true_error

    # n = b³: the near-equal splits of mmopt.strategy.hierarchical are these fixed-size blocks
    dense = mmopt.evaluate(wl.prefix(64), mmopt.strategy.hierarchical(64, 4), norm="l1").total_squared_error
    assert true_error(hierarchy_theta(64, 4), prefix_gram(64)) == pytest.approx(dense, rel=1e-10)


def test_hierarchies_replace_a_search_whose_budget_ran_out():
    res = mmopt.optimize(toeplitz.prefix(FAST_MIN_N), method="min_error", max_iterations=1, seed=0)
    best = min(res.extra["hierarchies"].values())
    # one L-BFGS-B step from HDMM's random start is far worse than H_b, which is returned; the spent budget is the
    # status ("closed_form" with success True hid it, where the dense pipeline says "user_limit": a helper's probe)
    assert res.objective == pytest.approx(best, rel=1e-12)
    assert res.status == "user_limit" and not res.success and "beat the p-Identity search" in res.message
    assert res.objective >= res.lower_bound


def test_monte_carlo_matches_the_reported_error():
    W = wl.prefix(FAST_MIN_N)
    res = mmopt.optimize(W, method="min_error", seed=0, max_iterations=50, options={"p": 8})
    x = np.arange(FAST_MIN_N, dtype=float) % 5
    r = mmopt.monte_carlo(W, res.strategy, x, mmopt.Privacy(1.0), runs=1000, seed=4)
    assert r.expected == pytest.approx(res.objective * mmopt.Privacy(1.0).variance_factor, rel=1e-9)
    assert abs(r.z_score) <= 4.0   # 4 standard errors of the 1,000-run mean


def test_start_option_chooses_the_ladder_or_hdmms_random_start():
    n = 1100  # past the ladder's base (1,024): sizes 550 → 1,100
    W = toeplitz.prefix(n)
    ladder = mmopt.optimize(W, method="min_error", seed=0, max_iterations=15, options={"p": 8})
    assert ladder.extra["start"] == "ladder" and "550 → 1,100" in ladder.message
    assert [level["n"] for level in ladder.history[0]["levels"]] == [550, 1100]
    assert all(level["iterations"] <= 15 for level in ladder.history[0]["levels"])  # max_iterations caps each size
    random = mmopt.optimize(W, method="min_error", seed=0, max_iterations=15, options={"p": 8, "start": "random"})
    assert random.extra["start"] == "random" and "levels" not in random.history[0]
    for res in (ladder, random):
        assert res.lower_bound < res.objective
        assert res.objective == pytest.approx(
            mmopt.search.pidentity.true_error(res.strategy.theta, mmopt.dense.gram_operator.prefix_gram(n)), rel=1e-12)
    with pytest.raises(ValueError, match="Drop 'start'"):
        mmopt.optimize(wl.prefix(64), method="min_error", options={"start": "ladder"})


def test_an_explicit_search_far_past_its_measured_sizes_warns_before_it_starts(monkeypatch):
    """prefix(10⁶) with method="min_error" ran for days without a word: the default search now warns first, with its
    estimate (the measured 520 CPU s at 8,192 cells grown as n²) and the remedy, pointing at the caller's line; at
    8,192 cells, inside the measured range and under WARN_SECONDS, it does not."""
    import warnings

    def stop(*args, **kwargs):
        raise RuntimeError("stopped before the search")
    monkeypatch.setattr(fast, "solve", stop)
    with pytest.warns(UserWarning, match=r"expected to take ~[\d,]+ days of CPU.*method='auto'") as record, \
            pytest.raises(RuntimeError, match="stopped before"):
        mmopt.optimize(toeplitz.prefix(10**6), privacy=mmopt.Privacy(1.0), method="min_error")
    assert record[0].filename == __file__
    assert fast.expected_seconds(10**6) == pytest.approx(520.0 * (10**6 / 8192) ** 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="stopped before"):
            mmopt.optimize(toeplitz.prefix(8192), privacy=mmopt.Privacy(1.0), method="min_error")
        with pytest.raises(RuntimeError, match="stopped before"):  # a search the caller sized: not the estimate's
            mmopt.optimize(toeplitz.prefix(10**6), privacy=mmopt.Privacy(1.0), method="min_error", max_iterations=3)
