"""Free banded strategies under minimum separation: the soft pattern maximum against brute force and finite
differences, the error's gradient against finite differences, exact error and sensitivity against dense
computation and pattern enumeration, above the certified bound, never worse than the row-weighted start."""

import math
import time

import numpy as np
import pytest
from _participation_brute import all_patterns
from _participation_monte_carlo import assert_error_matches_the_mechanism

from mmopt import toeplitz
from mmopt.participation import min_separation, sensitivity_squared
from mmopt.participation.cutting import solve_min_separation
from mmopt.participation.free_banded import _error, _stages, free_banded, soft_pattern_max
from mmopt.participation.toeplitz import schema_error
from mmopt.participation.weighted import weighted_banded


@pytest.mark.parametrize("tau", [0.5, 3.0, 40.0])
def test_soft_pattern_max_is_the_log_sum_exp_over_every_pattern(tau):
    rng = np.random.default_rng(0)
    n, b, k = 13, 3, 3
    x = rng.random(n)
    P = all_patterns(n, b, k)
    sums = np.array([x[list(p)].sum() for p in P])
    want = (np.log(np.exp(tau * (sums - sums.max())).sum()) + tau * sums.max()) / tau
    got, g = soft_pattern_max(x, b, k, tau)
    assert got == pytest.approx(want, rel=1e-12)
    assert sums.max() <= got <= sums.max() + math.log(len(P)) / tau + 1e-12
    # the gradient is the probability of each step under the Gibbs distribution over patterns
    w = np.exp(tau * (sums - sums.max()))
    w /= w.sum()
    occupancy = np.array([sum(wi for wi, p in zip(w, P, strict=True) if t in p) for t in range(n)])
    np.testing.assert_allclose(g, occupancy, rtol=0, atol=1e-12)


def test_error_gradient_against_finite_differences():
    rng = np.random.default_rng(1)
    n, b = 12, 4
    C = np.tril(rng.random((n, n)) + 2 * np.eye(n))
    C[np.tril(np.ones((n, n), dtype=bool), -b)] = 0.0
    E, g = _error(C, b, gradient=True)
    W = np.tril(np.ones((n, n)))
    assert E == pytest.approx(np.linalg.norm(W @ np.linalg.inv(C)) ** 2, rel=1e-12)
    h = 1e-6  # central differences: truncation O(h²), round-off O(u·E/h) ~ 1e-9 here (C well conditioned)
    for i, j in [(3, 1), (5, 5), (7, 4), (11, 8)]:
        Cp, Cm = C.copy(), C.copy()
        Cp[i, j] += h
        Cm[i, j] -= h
        assert g[i, j] == pytest.approx((_error(Cp)[0] - _error(Cm)[0]) / (2 * h), rel=1e-6)


@pytest.mark.parametrize("order", ["C", "F"])
def test_error_and_its_gradient_against_dense_products_over_several_column_blocks(order):
    # LAPACK works on the transposes of C-ordered copies: a Fortran-ordered C and bands wider than one block of
    # columns (256) must give the dense values, −2·(M C⁻ᵀ) on the band with M = BᵀB, B = W C⁻¹
    rng = np.random.default_rng(4)
    n, bands = 300, 120
    C = np.tril(0.1 * rng.standard_normal((n, n))) + 2 * np.eye(n)
    C[np.tril(np.ones((n, n), dtype=bool), -bands)] = 0.0
    B = np.tril(np.ones((n, n))) @ np.linalg.inv(C)
    E, g = _error(np.asarray(C, order=order), bands, gradient=True)
    assert E == pytest.approx(np.linalg.norm(B) ** 2, rel=1e-12)
    assert _error(np.asarray(C, order=order))[0] == pytest.approx(E, rel=1e-14)
    band = np.tril(np.ones((n, n), dtype=bool)) & ~np.tril(np.ones((n, n), dtype=bool), -bands)
    expected = (-2 * B.T @ B @ np.linalg.inv(C).T)[band]
    np.testing.assert_allclose(g[band], expected, rtol=1e-9, atol=1e-11 * np.abs(expected).max())


@pytest.mark.parametrize("n,k", [(32, 4), (48, 3), (24, 8)])
def test_exact_error_and_sensitivity_above_the_bound_and_below_the_start(n, k):
    b = n // k
    r = free_banded(n, k, max_iterations=80)
    C = r.matrix
    assert np.all(np.triu(C, 1) == 0) and np.all(C[np.tril(np.ones((n, n), dtype=bool), -b)] == 0)
    # sensitivity: every pattern's 1ᵀ|X_π|1 by enumeration (X's cross terms vanish: exact zeros, disjoint columns)
    X = C.T @ C
    worst = max(np.abs(X[np.ix_(p, p)]).sum() for p in all_patterns(n, b, k) if p)
    assert worst == pytest.approx(1.0, rel=1e-12)
    assert sensitivity_squared(C, min_separation(b, k)).squared == pytest.approx(1.0, rel=1e-12)
    W = np.tril(np.ones((n, n)))
    assert r.error == pytest.approx(np.linalg.norm(W @ np.linalg.inv(C)) ** 2, rel=1e-9)  # cond(C) ≲ 10³ here
    start = schema_error(toeplitz.prefix(n), weighted_banded(n, k), min_separation(b, k))[0]
    assert r.error <= start * (1 + 1e-12)
    bound = solve_min_separation(n, b, k, tol=1e-3).dual
    assert r.error >= bound * (1 - 1e-9)
    assert r.status in ("local_optimum", "user_limit") and r.sensitivity.exact


def test_free_entries_beat_the_row_weighted_strategy():
    # at n = 64, k = 4 the free band and κ lower the error by more than 1 % (module docstring: 3.5 % at n = 256)
    start = schema_error(toeplitz.prefix(64), weighted_banded(64, 4), min_separation(16, 4))[0]
    assert free_banded(64, 4).error < 0.99 * start


@pytest.mark.parametrize("args,kwargs,match", [
    ((30, 4), {}, "must divide n = 30"),
    ((8192, 4), {}, "'n' parameter"),
    ((64, 4), {"seconds": -1.0}, "'seconds' parameter"),
    ((64, 0), {}, "'participations' parameter"),
])
def test_bad_input_is_refused(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        free_banded(*args, **kwargs)


def test_optimize_takes_the_free_banded_strategy_when_it_is_better():
    import mmopt
    n, k = 64, 4
    schema = min_separation(n // k, k)
    res = mmopt.optimize(mmopt.workload.prefix(n), participation=schema)
    free = res.extra["free_banded_error"]
    assert free == pytest.approx(free_banded(n, k, seconds=60.0).error, rel=1e-12)  # deterministic: same start
    assert res.objective <= free * (1 + 1e-12) and res.lower_bound <= res.objective
    without = mmopt.optimize(mmopt.workload.prefix(n), participation=schema, options={"free_banded_seconds": 0})
    assert "free_banded_error" not in without.extra and res.objective <= without.objective * (1 + 1e-12)
    C = np.asarray(res.strategy.matrix, dtype=float)
    W = np.tril(np.ones((n, n)))
    exact = sensitivity_squared(C, schema).squared * np.linalg.norm(W @ np.linalg.inv(C)) ** 2
    assert exact == pytest.approx(res.objective, rel=1e-8)
    with pytest.raises(ValueError, match="free_banded_seconds"):
        mmopt.optimize(mmopt.workload.prefix(n), participation=schema, options={"free_banded_seconds": -1})


def test_a_spent_time_budget_is_a_user_limit():
    r = free_banded(64, 4, seconds=1e-9)
    assert r.status == "user_limit"
    assert r.iterations == 0  # spent before the first line search ends: it stops inside it
    start = schema_error(toeplitz.prefix(64), weighted_banded(64, 4), min_separation(16, 4))[0]
    assert r.error <= start * (1 + 1e-12)


def test_error_against_a_monte_carlo_run_of_the_mechanism():
    # C is triangular with a positive diagonal, so there is no rank-deficient case in this family
    r = free_banded(32, 4, max_iterations=60)
    assert_error_matches_the_mechanism(r.matrix, r.error)


def test_past_the_cutting_planes_prefix_sums_carry_the_2b_bands_finest_level(monkeypatch):
    """Past 2,048 steps (LIFTED_FROM, lowered here) prefix sums under minimum separation take the chain
    dual's lifted bound (solved to LIFTED_SOLVE_STEPS, certified at n), the banded strategies and the 2b-band
    strategy refined to n/2 and carried to n (its steps cost too much there; before, at k = 4 the free band took the
    budget: 207,663 against ~205,500 at 4,096 steps), then equalised when that pays; a dense workload of that size
    is still refused by the cutting planes' cap."""
    import mmopt
    from mmopt.family import training_separation as route
    from mmopt.participation import chain_levels
    n, k = 128, 4
    schema = min_separation(n // k, k)
    assert route.takes_separation(schema, n, toeplitz.prefix(n), None)
    assert route.takes_separation(min_separation(1024, 4), 4096, toeplitz.prefix(4096), None)
    assert not route.takes_separation(min_separation(1024, 4), 4096, None, np.eye(4096))
    assert not route.takes_separation(min_separation(2048, 4), 8192, toeplitz.prefix(8192), None)
    _small_route(monkeypatch, route, n, n // 2, FREE_BANDED_SECONDS=1.0)
    # the cutting planes run to 512 steps only (options seconds=0 here, as past them)
    levels, stepped = [], []
    real = chain_levels.chain_levels
    monkeypatch.setattr(chain_levels, "chain_levels", lambda *a, **kw: levels.append(kw) or real(*a, **kw))
    from mmopt.participation import equalise
    step = equalise.relative_step
    monkeypatch.setattr(equalise, "relative_step", lambda *a, **kw: stepped.append(a[3]) or step(*a, **kw))
    res = mmopt.optimize(mmopt.workload.prefix(n), participation=schema, options={"seconds": 0})
    assert "free_banded_error" not in res.extra and [kw["refine_finest"] for kw in levels] == [False]
    assert res.extra["chain_banded_error"] == pytest.approx(res.objective, rel=1e-12)  # it beat the banded ones
    assert "the finest level carried" in res.solver
    # then one relative step from the equalised strategy, named and kept only when it lowered the exact error
    assert stepped == [res.extra.get("stepped_from", res.extra["chain_banded_error"])]
    assert ("one relative step" in res.solver) == ("stepped_from" in res.extra)
    assert res.objective < res.extra.get("stepped_from", np.inf)
    banded = mmopt.optimize(mmopt.workload.prefix(n), participation=schema, method="banded")
    assert res.objective < banded.objective
    # the lifted bound beats the banded route's (diagonal) bound and is what is reported
    assert banded.lower_bound < res.extra["chain_dual"] == pytest.approx(res.lower_bound, rel=1e-12)
    assert res.lower_bound < res.objective and "chain dual" in res.extra["lower_bound_method"]
    C = np.asarray(res.strategy.matrix, dtype=float)
    W = np.tril(np.ones((n, n)))
    dense = sensitivity_squared(C, schema).squared * np.linalg.norm(W @ np.linalg.inv(C)) ** 2
    assert dense <= res.objective * (1 + 1e-8)  # Δ² is the chain's upper bound
    if res.extra["sensitivity_exact"]:  # and equal to it when exact (so far every run)
        assert dense == pytest.approx(res.objective, rel=1e-8)


def test_past_2048_steps_with_few_bands_the_2b_band_strategy_starts_from_the_lifted_dual(monkeypatch):
    """Past 2,048 steps the 2b-band strategy runs coarse to fine from the chain dual's
    Lagrangian start at its finest solved level (n/4 here, as 1,024 of 4,096 steps; the dual's coarsest is 64), not the
    free band."""
    import mmopt
    from mmopt.family import training_separation as route
    from mmopt.participation import chain_levels
    n, k = 256, 4
    schema = min_separation(n // k, k)
    _small_route(monkeypatch, route, n, n // 4)
    starts = []
    real = chain_levels.chain_levels
    monkeypatch.setattr(chain_levels, "chain_levels", lambda *a, **kw: starts.append(kw.get("start")) or real(*a, **kw))
    res = mmopt.optimize(mmopt.workload.prefix(n), participation=schema, options={"seconds": 0})
    assert "free_banded_error" not in res.extra and "chain_levels" in res.solver
    assert len(starts) == 1 and starts[0].shape == (n // 4, n // 4)
    C = np.asarray(res.strategy.matrix, dtype=float)
    W = np.tril(np.ones((n, n)))
    dense = sensitivity_squared(C, schema).squared * np.linalg.norm(W @ np.linalg.inv(C)) ** 2
    assert dense <= res.objective * (1 + 1e-8) and res.lower_bound < res.objective  # Δ² is the chain's upper bound


def test_from_2048_steps_the_dual_is_lifted_and_the_finest_level_still_refined(monkeypatch):
    """From DUAL_LIFTED_FROM (2,048 steps; lowered here) the chain dual is solved to LIFTED_SOLVE_STEPS and certified
    at n (at 2,048 steps, k = 8: 206,925 in 16 CPU s against 206,378 solved to 2,048 in 31 s), while below
    LIFTED_FROM the 2b bands' finest level is refined, not carried."""
    import mmopt
    from mmopt.family import training_separation as route
    from mmopt.participation import chain_dual as dual_module
    from mmopt.participation import chain_levels
    n, k = 128, 4
    schema = min_separation(n // k, k)
    _small_route(monkeypatch, route, n, n // 2, carried=False)
    duals, levels = [], []
    real_dual, real_levels = dual_module.chain_dual, chain_levels.chain_levels
    monkeypatch.setattr(dual_module, "chain_dual", lambda *a, **kw: duals.append(kw) or real_dual(*a, **kw))
    monkeypatch.setattr(chain_levels, "chain_levels", lambda *a, **kw: levels.append(kw) or real_levels(*a, **kw))
    res = mmopt.optimize(mmopt.workload.prefix(n), participation=schema, options={"seconds": 0})
    assert [(kw["solve_steps"], kw["seconds"]) for kw in duals] == [(n // 2, 1.0)]
    assert [kw["refine_finest"] for kw in levels] == [True] and "the finest level carried" not in res.solver
    assert res.lower_bound == pytest.approx(res.extra["chain_dual"], rel=1e-12) and res.lower_bound < res.objective


def _small_route(monkeypatch, route, n: int, solve_steps: int, *, carried: bool = True, **more) -> None:
    """The 4,096-step route's constants lowered to n steps and budgets of seconds: the dual lifted from
    ``solve_steps`` at n, the levels from n, and (``carried``) the finest level carried; ``more`` sets others."""
    values = {"DUAL_LIFTED_FROM": n, "LEVELS_MIN_N": n, "ROUTE_SECONDS": 3.0, "CHAIN_BANDED_SECONDS": 2.0,
              "LIFTED_SECONDS": 1.0, "LIFTED_SOLVE_STEPS": solve_steps, **more}
    if carried:
        values["LIFTED_FROM"] = n
    for name, value in values.items():
        monkeypatch.setattr(route, name, value)


def _quadratic(x, tau):
    return tau * float(np.sum((x - 1.0) ** 2)), 2.0 * tau * (x - 1.0)


@pytest.mark.parametrize("budget", [True, False])
def test_stages_share_one_deadline_and_a_stage_left_unrun_is_a_user_limit(budget):
    # L-BFGS ends the first stage on its own, well inside the budget; its exact scoring then crosses the deadline.
    # The second stage is not run, so the budget (not L-BFGS) ended the solve: "user_limit" (a review found
    # "local_optimum" reported there). Without a budget every stage runs and ends on its own.
    taus, calls = [], []
    deadline = time.process_time() + 0.2 if budget else None

    def objective(x, tau):
        taus.append(tau)
        return _quadratic(x, tau)

    def exact(x):
        calls.append(1)
        while budget and time.process_time() <= deadline:  # a slow exact evaluation, in CPU time
            pass
        return float(np.sum((x - 1.0) ** 2)), x

    x0 = np.zeros(5)
    best, status, iterations = _stages(objective, exact, x0, (5.0, x0), (1.0, 10.0), 100, deadline)
    assert sorted(set(taus)) == ([1.0] if budget else [1.0, 10.0])
    assert len(calls) == (1 if budget else 2)
    assert status == ("user_limit" if budget else "local_optimum")
    assert best[0] < 1e-12 and iterations >= 1
