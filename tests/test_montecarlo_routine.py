"""mmopt.monte_carlo: agreement with evaluate inside its CI, reproducibility, batching, validation, 1/√runs."""

import math

import numpy as np
import pytest
from scipy import stats

import mmopt
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.structured import strategies as ss
from mmopt.structured import workloads as sw

EPS1 = mmopt.Privacy(1.0)
GAUSS = mmopt.Privacy(1.0, 1e-6)
X8 = np.array([3.0, 0.0, 2.0, 5.0, 1.0, 0.0, 4.0, 7.0])


@pytest.mark.parametrize("W, A, privacy, seed", [
    (wl.prefix(8), st.hierarchical(8), EPS1, 1),
    (wl.all_range(8), st.wavelet(8), GAUSS, 2),
    (wl.Workload.from_matrix(np.tile([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0], (5, 1))), st.identity(8), EPS1, 3),
])
def test_least_squares_mean_agrees_with_evaluate_within_ci(W, A, privacy, seed):
    r = mmopt.monte_carlo(W, A, X8, privacy, runs=3000, seed=seed)
    expected = mmopt.evaluate(W, A, privacy).total_squared_error
    assert r.expected == expected and r.expected_exact
    assert r.total_ci.low <= expected <= r.total_ci.high, (r.total_ci, expected)
    assert abs(r.z_score) <= 1.96
    assert r.rmse_ci.low <= math.sqrt(expected / W.n_queries) <= r.rmse_ci.high
    assert r.n_queries == W.n_queries and r.per_run_total.shape == (3000,)
    assert r.rmse == pytest.approx(math.sqrt(r.total_squared_error / W.n_queries), rel=1e-12)
    assert r.scaled_squared_error == pytest.approx(r.total_squared_error / W.n_queries / X8.sum() ** 2, rel=1e-12)
    assert r.max_abs_error_ci.low < r.max_abs_error < r.max_abs_error_ci.high
    assert r.max_abs_error >= r.scaled_error * X8.sum()  # max |e| ≥ mean |e|


def test_each_run_is_the_mechanism_with_its_own_spawned_seed():
    W, A = wl.prefix(8), st.hierarchical(8)
    r = mmopt.monte_carlo(W, A, X8, EPS1, runs=6, seed=11, batch=4)
    truth = W.explicit_matrix() @ X8
    for i, child in enumerate(np.random.SeedSequence(11).spawn(6)):
        out = mmopt.matrix_mechanism(W, A, X8, EPS1, rng=np.random.default_rng(child))
        assert r.per_run_total[i] == pytest.approx(np.sum((out.answers - truth) ** 2), rel=1e-12)


def test_same_seed_same_result_and_batching_does_not_change_it():
    W, A = wl.all_range(8), st.hierarchical(8)
    base = mmopt.monte_carlo(W, A, X8, GAUSS, runs=101, seed=5)
    again = mmopt.monte_carlo(W, A, X8, GAUSS, runs=101, seed=5)
    assert np.array_equal(base.per_run_total, again.per_run_total)
    for batch in (1, 7, 100, 500):
        # the same noise per run; a batched least-squares solve (BLAS gemm, not gemv) may round differently
        other = mmopt.monte_carlo(W, A, X8, GAUSS, runs=101, seed=5, batch=batch)
        np.testing.assert_allclose(other.per_run_total, base.per_run_total, rtol=1e-12)
        assert other.max_abs_error == pytest.approx(base.max_abs_error, rel=1e-12)
        assert other.scaled_error == pytest.approx(base.scaled_error, rel=1e-12)
    assert not np.array_equal(base.per_run_total, mmopt.monte_carlo(W, A, X8, GAUSS, runs=101, seed=6).per_run_total)
    ss_seed = np.random.SeedSequence(5)
    assert np.array_equal(base.per_run_total, mmopt.monte_carlo(W, A, X8, GAUSS, runs=101, seed=ss_seed).per_run_total)
    fresh = mmopt.monte_carlo(W, A, X8, GAUSS, runs=10)  # seed=None: reproducible from the reported entropy
    assert np.array_equal(fresh.per_run_total,
                          mmopt.monte_carlo(W, A, X8, GAUSS, runs=10, seed=fresh.seed_entropy).per_run_total)


def test_ci_shrinks_like_one_over_root_runs():
    W, A = wl.prefix(16), st.hierarchical(16)
    x = np.arange(16.0)
    widths = {}
    for runs in (400, 1600, 6400):
        r = mmopt.monte_carlo(W, A, x, EPS1, runs=runs, seed=9)
        widths[runs] = r.total_ci.high - r.total_ci.low
        t = stats.t.ppf(0.975, runs - 1)  # Student's t (→ 1.96)
        assert widths[runs] == pytest.approx(2 * t * r.total_std / math.sqrt(runs), rel=1e-12)
    # quadrupling the runs halves the width, up to the sampling error of s
    assert widths[400] / widths[1600] == pytest.approx(2.0, rel=0.15)
    assert widths[1600] / widths[6400] == pytest.approx(2.0, rel=0.1)


def test_implicit_workload_agrees_with_evaluate():
    W = sw.kron(sw.prefix(80), sw.all_range(60))  # 4,800 cells > the dense limit: implicit path
    A = ss.kron_strategy(st.hierarchical(80), np.eye(60))
    x = np.random.default_rng(0).integers(0, 20, (80, 60)).astype(float)
    r = mmopt.monte_carlo(W, A, x, GAUSS, runs=60, seed=4, batch=25)
    expected = mmopt.evaluate(W, A, GAUSS).total_squared_error
    assert r.expected == expected and r.n_queries == W.n_queries
    assert r.total_ci.low <= expected <= r.total_ci.high
    flat = mmopt.monte_carlo(W, A, x.ravel(), GAUSS, runs=60, seed=4, batch=60)
    assert np.array_equal(flat.per_run_total, r.per_run_total)


def test_scaled_errors_follow_dpbench_definitions():
    W, A = wl.prefix(8), st.identity(8)
    r = mmopt.monte_carlo(W, A, X8, EPS1, runs=5, seed=0)
    truth = W.explicit_matrix() @ X8
    l1, l2 = [], []
    for child in np.random.SeedSequence(0).spawn(5):
        e = mmopt.matrix_mechanism(W, A, X8, EPS1, rng=np.random.default_rng(child)).answers - truth
        l1.append(np.mean(np.abs(e)) / X8.sum())
        l2.append(np.linalg.norm(e) / e.size / X8.sum())  # dpcomp_core.metric.calculate_error 'L2'
    assert r.scaled_error == pytest.approx(np.mean(l1), rel=1e-12)
    assert r.scaled_l2_error == pytest.approx(np.mean(l2), rel=1e-12)
    assert mmopt.monte_carlo(W, A, np.zeros(8), EPS1, runs=3, seed=0).scaled_error is None


@pytest.mark.parametrize("reconstruct", ["nnls", "projection"])
def test_other_reconstructions_pass_through_and_have_no_exact_expectation(reconstruct):
    W, A = wl.prefix(8), st.hierarchical(8)
    r = mmopt.monte_carlo(W, A, X8, EPS1, runs=40, seed=1, reconstruct=reconstruct, total=float(X8.sum()))
    assert r.expected is None and r.z_score is None and r.reconstruct == reconstruct
    out = mmopt.matrix_mechanism(W, A, X8, EPS1, rng=np.random.default_rng(np.random.SeedSequence(1).spawn(40)[0]),
                                 reconstruct=reconstruct, total=float(X8.sum()))
    truth = W.explicit_matrix() @ X8
    assert r.per_run_total[0] == pytest.approx(np.sum((out.answers - truth) ** 2), rel=1e-9)


def test_validation():
    W, A = wl.prefix(8), st.hierarchical(8)
    with pytest.raises(ValueError, match="'runs' parameter of monte_carlo"):
        mmopt.monte_carlo(W, A, X8, EPS1, runs=1)
    with pytest.raises(TypeError, match="'runs' parameter of monte_carlo"):
        mmopt.monte_carlo(W, A, X8, EPS1, runs=10.0)
    with pytest.raises(ValueError, match="'batch' parameter of monte_carlo"):
        mmopt.monte_carlo(W, A, X8, EPS1, batch=0)
    with pytest.raises(ValueError, match="'reconstruct' parameter of monte_carlo"):
        mmopt.monte_carlo(W, A, X8, EPS1, reconstruct="magic")
    with pytest.raises(TypeError, match="'seed' parameter of monte_carlo"):
        mmopt.monte_carlo(W, A, X8, EPS1, seed="one")
    with pytest.raises(ValueError, match="'seed' parameter of monte_carlo"):
        mmopt.monte_carlo(W, A, X8, EPS1, seed=-1)
    with pytest.raises(TypeError, match="'privacy' parameter of monte_carlo"):
        mmopt.monte_carlo(W, A, X8, None)
    with pytest.raises(TypeError, match="'progress' parameter of monte_carlo"):
        mmopt.monte_carlo(W, A, X8, EPS1, progress="yes")
    with pytest.raises(ValueError, match="length 8"):
        mmopt.monte_carlo(W, A, X8[:5], EPS1, runs=3)
    with pytest.raises(ValueError, match="'x' parameter of monte_carlo must hold counts >= 0"):  # (matrix_mechanism's)
        mmopt.monte_carlo(W, A, -X8, EPS1, runs=3)
    with pytest.raises(ValueError, match="^monte_carlo checks the pair as mmopt.evaluate does.*does not support"):
        mmopt.monte_carlo(W, np.eye(8)[:4], X8, EPS1, runs=3)
    with pytest.raises(ValueError, match="^monte_carlo checks the pair.*domain size n=8 but the strategy has n=4"):
        mmopt.monte_carlo(W, st.identity(4), X8, EPS1, runs=3)
    # the reconstruction's arguments under monte_carlo's name, not the matrix_mechanism it calls
    with pytest.raises(ValueError, match="'total' and 'zeros' parameters of monte_carlo need"):
        mmopt.monte_carlo(W, A, X8, EPS1, runs=3, total=6.0)
    with pytest.raises(TypeError, match="'zeros' parameter of monte_carlo must be a boolean mask"):
        mmopt.monte_carlo(W, A, X8, EPS1, runs=3, reconstruct="nnls", zeros=[0] * 8)
    with pytest.raises(ValueError, match="'reconstruct_options' parameter of monte_carlo accepts"):
        mmopt.monte_carlo(W, A, X8, EPS1, runs=3, reconstruct="nnls", reconstruct_options={"tolerance": 1e-3})
    with pytest.raises(ValueError, match="only its Gram"):
        mmopt.monte_carlo(wl.Workload.from_gram(np.eye(8), n_queries=8), A, X8, EPS1, runs=3)
    with pytest.raises(ValueError, match="would need"):
        mmopt.monte_carlo(W, A, X8, EPS1, runs=10**7, batch=10**7)


def test_progress_bar_can_be_forced(capsys):
    r = mmopt.monte_carlo(wl.prefix(4), st.identity(4), [1.0, 2.0, 3.0, 4.0], EPS1, runs=20, seed=0, batch=5,
                          progress=True)
    assert "monte_carlo" in capsys.readouterr().err and r.runs == 20 and r.batch == 5
