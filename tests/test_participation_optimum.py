"""The certified optimum under fixed epochs against the dense SDP (cvxpy, Clarabel) with the exact sensitivity
constraint, its bound against strategies, and optimize's participation route."""

import numpy as np
import pytest
from _participation_sdp import sdp_optimum

import mmopt
from mmopt import toeplitz
from mmopt.participation import fixed_epochs, min_separation, sensitivity_squared
from mmopt.participation.optimum import causal_factor, solve_fixed_epochs


def _sdp_optimum(G, k):
    """min tr(G X⁻¹) under the exact fixed-epoch sensitivity: the shared dense SDP on the b = n/k patterns."""
    b = G.shape[0] // k
    return sdp_optimum(G, [range(j, G.shape[0], b) for j in range(b)])


@pytest.mark.parametrize("n,k", [(8, 2), (12, 3), (16, 4), (16, 2), (12, 1)])
def test_matches_the_dense_sdp_on_prefix_sums(n, k):
    G = mmopt.workload.prefix(n).gram
    sol = solve_fixed_epochs(G, k, tol=1e-7)
    sdp = _sdp_optimum(G, k)
    # Clarabel's default accuracy is ~1e-8 relative; the certificate brackets its value up to that
    assert sol.dual <= sdp * (1 + 1e-6) and sol.primal >= sdp * (1 - 1e-6)
    assert sol.status == "optimal" and sol.primal <= sol.dual * (1 + 1e-7)


@pytest.mark.parametrize("seed", range(3))
def test_matches_the_dense_sdp_on_a_random_workload(seed):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((10, 8))
    G = W.T @ W
    sol = solve_fixed_epochs(G, 2, tol=1e-6)
    sdp = _sdp_optimum(G, 2)
    assert sol.dual <= sdp * (1 + 1e-6) <= sol.primal * (1 + 2e-6)
    assert sol.primal <= sdp * (1 + 2e-6)


def test_the_factor_is_causal_and_its_error_is_recomputed():
    n, k = 64, 4
    G = mmopt.workload.prefix(n).gram
    sol = solve_fixed_epochs(G, k, tol=1e-5)
    C = sol.matrix
    np.testing.assert_array_equal(C, np.tril(C))
    s = sensitivity_squared(C, fixed_epochs(k))
    assert s.squared == pytest.approx(1.0, rel=1e-9)  # scaled to unit sensitivity under the schema
    # the error ‖W C⁻¹‖² from the workload matrix itself, not from G
    W = np.tril(np.ones((n, n)))
    error = np.linalg.norm(W @ np.linalg.inv(C)) ** 2
    assert error * s.squared == pytest.approx(sol.primal, rel=1e-8)


@pytest.mark.parametrize("k", [2, 4, 8])
def test_the_bound_is_below_every_strategy(k):
    n = 64
    G = mmopt.workload.prefix(n).gram
    sol = solve_fixed_epochs(G, k, tol=1e-4)
    W = np.tril(np.ones((n, n)))
    rng = np.random.default_rng(k)
    strategies = [np.eye(n), W, toeplitz.sqrt_strategy(n).to_dense(),
                  toeplitz.equalized(toeplitz.sqrt_strategy(n)).to_dense(), np.tril(rng.random((n, n))) + np.eye(n),
                  toeplitz.banded([1.0, 0.5, 0.25], n).to_dense()]
    for C in strategies:
        s = sensitivity_squared(C, fixed_epochs(k))
        error = s.squared * np.linalg.norm(W @ np.linalg.inv(C)) ** 2
        assert error >= sol.dual
    # the single-participation optimum is feasible at k× its sensitivity at most: the optimum is below that
    single = toeplitz.solve_dual(toeplitz.prefix(n)).matrix
    s = sensitivity_squared(single, fixed_epochs(k))
    assert sol.dual <= s.squared * np.linalg.norm(W @ np.linalg.inv(single)) ** 2


def test_monte_carlo_of_the_unit_sigma_error():
    # the error formula E‖W C⁻¹ z‖² = ‖W C⁻¹‖_F² (z ~ N(0, I)) at unit σ and unit sensitivity
    n, k = 16, 2
    sol = solve_fixed_epochs(mmopt.workload.prefix(n).gram, k, tol=1e-6)
    W = np.tril(np.ones((n, n)))
    B = W @ np.linalg.inv(sol.matrix)
    z = np.random.default_rng(0).standard_normal((n, 20000))
    samples = np.sum((B @ z) ** 2, axis=0)
    mean, sem = samples.mean(), samples.std(ddof=1) / np.sqrt(len(samples))
    assert abs(mean - sol.primal) <= 5 * sem  # 5 standard errors: a false alarm once in 3.5 million runs


def test_causal_factor():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((6, 6))
    X = A @ A.T + np.eye(6)
    C = causal_factor(X)
    np.testing.assert_allclose(C.T @ C, X, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(C, np.tril(C))


def test_optimize_routes_participation():
    W = mmopt.workload.prefix(64)
    res = mmopt.optimize(W, privacy=mmopt.Privacy(1.0, 1e-6), participation=mmopt.participation.fixed_epochs(4))
    assert res.method == "l2_approx" and res.status == "optimal" and res.lower_bound <= res.objective
    assert res.extra["participation"] == "FixedEpochs(epochs=4)"
    assert res.objective <= res.lower_bound * (1 + 1e-4)
    assert res.objective_per_query == pytest.approx(res.objective / 64, rel=1e-14)
    stream = mmopt.optimize(toeplitz.prefix(64), participation=mmopt.participation.fixed_epochs(4))
    assert stream.objective == pytest.approx(res.objective, rel=1e-9)
    # single participation takes the ordinary routes
    plain = mmopt.optimize(W, privacy=mmopt.Privacy(1.0, 1e-6), participation=mmopt.participation.single(),
                           method="l2_approx")
    assert plain.method == "l2_approx" and "participation" not in plain.extra
    # ... and, like every schema, under Gaussian noise: without a privacy the objective is L2, as with one (it was
    # "auto" on the L1 objective, 67.34 against 31.00 on prefix(12), the ε-DP search's)
    W12 = mmopt.workload.prefix(12)
    gaussian = mmopt.optimize(W12, privacy=mmopt.Privacy(1.0, 1e-6), verbose=False)
    once = mmopt.optimize(W12, participation=mmopt.participation.single(), verbose=False)
    assert once.objective == pytest.approx(gaussian.objective, rel=1e-6) and once.status == "optimal"
    for schema in (mmopt.participation.single(), mmopt.participation.fixed_epochs(3)):
        with pytest.raises(ValueError, match=r"optimize\(participation=.*\) optimises the error under Gaussian"):
            mmopt.optimize(W12, privacy=mmopt.Privacy(1.0), participation=schema)
        with pytest.raises(ValueError, match="no norm='l1'"):
            mmopt.optimize(W12, norm="l1", participation=schema)


@pytest.mark.parametrize("workload", [mmopt.workload.prefix(8), mmopt.participation.momentum(8, 0.5)])
def test_single_participation_returns_a_causal_factor_as_fixed_epochs_1_does(workload):
    """single() took the ordinary routes and returned the L2 optimum's symmetric square root (upper triangle
    0.32 on prefix(8)), which run_privacy refuses; fixed_epochs(1), the same schema, returned a causal factor."""
    from mmopt.participation.noise import run_privacy
    once = mmopt.optimize(workload, participation=mmopt.participation.single(), method="l2_approx", seed=0)
    C = once.strategy.matrix
    assert C.shape == (8, 8) and not np.any(np.triu(C, 1)) and np.all(np.diag(C) > 0)
    assert once.extra["causal_factor"]
    W = workload.explicit_matrix()
    error = np.max(np.sum(C**2, axis=0)) * np.linalg.norm(W @ np.linalg.inv(C)) ** 2
    assert error == pytest.approx(once.objective, rel=1e-9)  # the same X = AᵀA, so the same error
    epoch = mmopt.optimize(workload, participation=fixed_epochs(1), method="l2_approx", seed=0)
    assert once.objective <= epoch.objective * (1 + 1e-4)
    assert run_privacy(C, mmopt.participation.single(), 1.0).rho > 0


@pytest.mark.parametrize("method", ["banded", "toeplitz", "blt"])
def test_single_participation_toeplitz_strategy_is_a_causal_factor(method):
    """A ToeplitzStrategy C = D·T(c) is lower-triangular with c₀ ≠ 0, and run_privacy takes it; the result had said
    causal_factor=False, "not a causal factor for training" (a helper's audit)."""
    from mmopt.participation.noise import run_privacy
    res = mmopt.optimize(mmopt.workload.prefix(64), participation=mmopt.participation.single(), method=method)
    assert res.extra["causal_factor"] and "Not a causal factor" not in res.message
    assert run_privacy(res.strategy, mmopt.participation.single(), 1.0).rho > 0


def test_single_participation_banded_on_momentum_is_fixed_epochs_1s():
    """single() sent method='banded' to the ordinary banded route, which takes prefix sums and all ranges only and
    refused momentum naming mmopt.toeplitz.optimize; fixed_epochs(1), the same schema, ran the banded strategy."""
    W = mmopt.participation.momentum(32, 0.9)
    once = mmopt.optimize(W, participation=mmopt.participation.single(), method="banded")
    epoch = mmopt.optimize(W, participation=fixed_epochs(1), method="banded")
    assert once.objective == pytest.approx(epoch.objective, rel=1e-12)
    assert once.extra["participation"] == "Single()" and once.lower_bound <= once.objective
    # prefix sums keep the ordinary banded route (mmopt.toeplitz.optimize)
    prefix = mmopt.optimize(mmopt.workload.prefix(32), participation=mmopt.participation.single(), method="banded")
    assert "participation" not in prefix.extra


def test_optimize_banded_under_min_separation_is_exact_and_above_the_bound():
    res = mmopt.optimize(toeplitz.prefix(256), participation=min_separation(32, 4), method="banded")
    assert res.extra["sensitivity_exact"] and res.lower_bound <= res.objective
    C = res.strategy.to_dense()
    assert sensitivity_squared(C, min_separation(32, 4)).squared == pytest.approx(res.extra["sensitivity_squared"])
    W = np.tril(np.ones((256, 256)))
    assert res.objective == pytest.approx(res.extra["sensitivity_squared"] * np.linalg.norm(W @ np.linalg.inv(C))
                                          ** 2, rel=1e-8)


@pytest.mark.parametrize("schema", [fixed_epochs(2), min_separation(16, 2), min_separation(4, 2)])
def test_all_ranges_take_the_banded_strategy_under_every_schema(schema):
    """method='banded' refused all ranges under fixed_epochs / min_separation (while single() ran it), and
    mmopt.toeplitz.all_range(32) under min_separation took the banded strategy alone (1.086× the bound at n = 64),
    where the dense all_range(32) ran the cutting planes (1.010×). The error is recomputed densely, and the
    auto route gives the same certified result on both representations."""
    res = mmopt.optimize(toeplitz.all_range(32), participation=schema, method="banded")
    assert res.extra["sensitivity_exact"] and res.lower_bound <= res.objective
    C = res.strategy.to_dense()
    assert sensitivity_squared(C, schema).squared == pytest.approx(res.extra["sensitivity_squared"], rel=1e-9)
    W = mmopt.workload.all_range(32).explicit_matrix()
    assert res.objective == pytest.approx(res.extra["sensitivity_squared"] * np.linalg.norm(W @ np.linalg.inv(C))
                                          ** 2, rel=1e-8)
    budget = None if schema == fixed_epochs(2) else {"seconds": 5}
    stream = mmopt.optimize(toeplitz.all_range(32), participation=schema, options=budget)
    dense = mmopt.optimize(mmopt.workload.all_range(32), participation=schema, options=budget)
    assert stream.method == dense.method == "l2_approx"
    for r in (stream, dense):
        assert r.lower_bound <= r.objective <= res.objective * (1 + 1e-9)  # the banded strategy is a candidate
    assert stream.objective == pytest.approx(dense.objective, rel=0.02)


def test_more_participations_than_fit_is_the_schema_that_fits():
    """min_separation(8, 3) at 16 steps holds the patterns of min_separation(8, 2), but the routes chose by k: the
    banded fallback on prefix sums (99.48, local_optimum, against the certified 93.54) and a refusal on a dense
    workload whose message contradicted itself (an auditor's probe)."""
    for W in (mmopt.workload.prefix(16), mmopt.participation.momentum(16, 0.9)):
        fits = mmopt.optimize(W, participation=min_separation(8, 2))
        more = mmopt.optimize(W, participation=min_separation(8, 3))
        assert more.objective == pytest.approx(fits.objective, rel=1e-9) and more.status == fits.status
        assert more.extra["participation"] == "MinSeparation(separation_steps=8, max_participations=3)"
        assert more.lower_bound <= more.objective


@pytest.mark.parametrize("kwargs,error,match", [
    ({"privacy": mmopt.Privacy(1.0)}, ValueError, "Gaussian"),
    ({"method": "min_error"}, ValueError, "must be one of"),
    ({"participation": "epochs"}, TypeError, "participation schema"),
    ({"solver": "SCS"}, ValueError, "do not apply"),
    ({"options": {"bands": 4}}, ValueError, "Unknown options"),
])
def test_optimize_refuses_what_it_cannot_do(kwargs, error, match):
    kwargs = {"participation": fixed_epochs(2)} | kwargs
    with pytest.raises(error, match=match):
        mmopt.optimize(mmopt.workload.prefix(16), **kwargs)


def test_optimize_refuses_a_workload_without_full_rank_and_says_how_to_mend_it():
    """The last 6 of 12 prefix sums (rank 6): a LinAlgError inside the solver before, under both schemas; the
    remedy given (a small identity stacked on) then runs. An ill-conditioned full-rank W (cond 8·10⁶) still solves
    under fixed epochs (the equalised primal's inverse is skipped when X(M) is past float64) and is refused, with
    the same remedy, where the minimum-separation bound needs its round-off margin."""
    W = mmopt.Workload.from_matrix(np.tril(np.ones((12, 12)))[6:])
    for schema in (fixed_epochs(2), min_separation(6, 2)):
        with pytest.raises(ValueError, match=r"full column rank .* numerical rank 6 of n = 12\. Stack a small"):
            mmopt.optimize(W, participation=schema)
    mended = mmopt.workload.stack([W, mmopt.workload.identity(12)], weights=[1.0, 1e-3])
    res = mmopt.optimize(mended, participation=min_separation(6, 2))
    assert res.lower_bound <= res.objective <= 1.01 * res.lower_bound
    rough = mmopt.Workload.from_matrix(np.tril(np.random.default_rng(0).normal(size=(12, 12))))
    res = mmopt.optimize(rough, participation=fixed_epochs(2))
    assert res.lower_bound <= res.objective * (1 + 1e-12) and res.objective <= 1.01 * res.lower_bound
    with pytest.raises(ValueError, match="too ill-conditioned for a certified bound.*Stack a small identity"):
        mmopt.optimize(rough, participation=min_separation(6, 2))
    with pytest.raises(ValueError, match="too ill-conditioned for a certified bound.*Stack a small identity"):
        mmopt.optimize(rough, participation=min_separation(3, 2))  # k·b < n: the cutting planes too


def test_what_no_route_takes_under_minimum_separation_is_refused_naming_what_runs():
    """Past 2,048 steps with k·b < n only the banded strategies run: l2_approx is refused, and auto (which picks
    'banded') names itself, not method='banded', when refusing the cutting planes' budget."""
    with pytest.raises(ValueError, match="fixed epochs"):
        mmopt.optimize(toeplitz.prefix(4096), participation=min_separation(4, 2), method="l2_approx")
    with pytest.raises(ValueError, match=r"optimize\(method='auto' \(which picked 'banded' at n = 4,096\), "
                                         r"participation=.*apply up to 2,048 steps"):
        mmopt.optimize(toeplitz.prefix(4096), participation=min_separation(4, 2), options={"seconds": 20})


def test_optimize_refuses_a_product_workload():
    with pytest.raises(TypeError, match="participation"):
        mmopt.optimize(mmopt.workload.ranges_2d(8), participation=fixed_epochs(2))


def test_best_primal_equalises_pattern_sensitivities():
    """An X whose patterns have unequal Δ²: the equalised X̃ (every pattern at Δ² = 1) scores better, and the
    returned factor's sensitivity and error are what best_primal reports (dense recomputation)."""
    from mmopt.participation.optimum import best_primal
    from mmopt.participation.schemas import FixedEpochs
    n, k = 16, 2
    G = mmopt.workload.prefix(n).gram
    X = solve_fixed_epochs(G, k, tol=1e-6).matrix
    X = X.T @ X
    scale = np.where(np.arange(n) % (n // k) == 0, 3.0, 1.0)  # pattern 0 (steps 0 and 8) three times louder
    X = X * np.outer(scale, scale)
    plain = float(np.trace(G @ np.linalg.inv(X))) * sensitivity_squared(causal_factor(X), fixed_epochs(k)).squared
    primal, C, sens = best_primal(G.__matmul__, X, FixedEpochs(k))
    assert primal < plain * (1 - 1e-3)
    assert sensitivity_squared(C, fixed_epochs(k)).squared == pytest.approx(1.0, rel=1e-12)
    assert float(np.trace(G @ np.linalg.inv(C.T @ C))) == pytest.approx(primal, rel=1e-9)
    assert np.allclose(C, np.tril(C))


def test_warm_start_from_the_coarse_solution_keeps_the_certificate():
    """coarse=: the solve starts from its own solution at n/2; the result is certified like any other, and its
    bracket overlaps the tridiagonal solver's on the same problem."""
    from mmopt.participation.tridiagonal import solve_tridiagonal
    n, k = 512, 4
    sol = solve_fixed_epochs(mmopt.workload.prefix(n).gram, k, tol=1e-4,
                             coarse=lambda m: mmopt.workload.prefix(m).gram)
    assert sol.status == "optimal" and sol.dual <= sol.primal <= sol.dual * (1 + 1e-4)
    other = solve_tridiagonal("prefix", n, k, tol=1e-4)
    assert sol.dual <= other.primal * (1 + 1e-9) and other.dual <= sol.primal * (1 + 1e-9)
    with pytest.raises(TypeError, match="'coarse' parameter of solve_fixed_epochs"):
        solve_fixed_epochs(mmopt.workload.prefix(8).gram, 2, coarse=3)


def test_solve_fixed_epochs_refuses_a_gram_that_is_not_positive_definite():
    """−I ended in LAPACK's 'Eigenvalues did not converge', diag(1, 1, 1, 0) in 'not positive definite', both with
    divide warnings."""
    for G in (-np.eye(4), np.diag([1.0, 1, 1, 0])):
        with pytest.raises(ValueError, match="'gram' parameter of solve_fixed_epochs must be positive definite"):
            solve_fixed_epochs(G, 2)


@pytest.mark.parametrize("workload", [toeplitz.prefix(1), mmopt.workload.prefix(1)])
def test_one_step_under_minimum_separation_is_single_participation(workload):
    """n = 1 reached the cutting planes, which refused 'the gram parameter of solve_min_separation' (a parameter
    the user never passed): one step is single participation, whatever the schema, with error G₀₀ = 1."""
    res = mmopt.optimize(workload, participation=min_separation(1, 1), method="l2_approx")
    assert res.objective == pytest.approx(1.0, rel=1e-12) and res.lower_bound <= res.objective
    assert res.extra["participation"] == "MinSeparation(separation_steps=1, max_participations=1)"


@pytest.mark.parametrize("schema", [min_separation(1, 1), min_separation(2, 1), min_separation(8, 3)])
def test_a_schema_of_one_step_per_record_takes_the_single_participation_optimum(schema):
    """k = 1 (or b ≥ n) lets a record into one step only, as single() does, but took the banded heuristic capped
    at b bands: on prefix(8) 36 (b = 1), 24.3 (b = 2) and 18.24 (b = 8, k = 3), all 'local_optimum', against the
    certified 17.866 of single() (a helper's probe); all_range(8) was refused ('no method')."""
    for W in (mmopt.workload.prefix(8), mmopt.workload.all_range(8)):
        single = mmopt.optimize(W, participation=fixed_epochs(1))
        res = mmopt.optimize(W, participation=schema)
        assert res.status == "optimal" and res.objective == pytest.approx(single.objective, rel=1e-6)
        assert res.lower_bound <= res.objective and res.extra["participation"] == repr(schema)
        # the strategy's error recomputed under the schema as given: Δ² under it times tr(G X⁻¹)
        C = res.strategy.matrix
        dense = sensitivity_squared(C, schema).squared * np.trace(W.gram @ np.linalg.inv(C.T @ C))
        assert dense == pytest.approx(res.objective, rel=1e-9)
