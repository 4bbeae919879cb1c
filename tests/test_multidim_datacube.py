"""optimize(method="datacube"): Ding et al.'s cuboid choice — support, exact vs dense evaluation, the model
bound, the budget's closed form against a numerical optimum, Monte Carlo, and refusals."""

import numpy as np
import pytest
import scipy.optimize

import mmopt
from mmopt import structured as S
from mmopt import workload as wl
from mmopt.multidim.datacube import allocate, solve_datacube

EPS1 = mmopt.Privacy(1.0)


def _supports(cuboids, sets):
    return all(any(set(A) <= set(C) for C in cuboids) for A in sets)


@pytest.mark.parametrize("W, sets", [
    (S.marginals((3, 4, 2), 1), [(0,), (1,), (2,)]),
    (S.lower_marginals((3, 3, 2), 2), [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2)]),
    (S.marginals((2, 2, 2, 2), 2), None),
], ids=["1-way", "lower 2-way", "2-way binary"])
@pytest.mark.parametrize("objective", ["total", "max"])
def test_strategy_supports_the_workload_and_implicit_equals_dense(W, sets, objective):
    sol = solve_datacube(W, objective=objective)
    if sets is not None:
        assert _supports(sol.extra["cuboids"], sets)
    assert sol.extra["theta"].sum() == pytest.approx(1.0, rel=1e-12)     # Δ₁ = Σθ = 1
    implicit = mmopt.evaluate(W, sol.strategy, EPS1)
    dense = mmopt.evaluate(W.to_workload(), mmopt.Strategy(sol.strategy.dense(), "datacube"), EPS1)
    assert implicit.total_squared_error == pytest.approx(dense.total_squared_error, rel=1e-9)
    assert dense.sensitivity == pytest.approx(1.0, rel=1e-12)
    if objective == "total":   # least squares (BLUE) is never worse than the model's direct aggregation
        assert implicit.total_squared_error <= 2 * sol.extra["model_objective"] * (1 + 1e-9)
    else:
        assert dense.max_variance <= 2 * sol.extra["model_objective"] * (1 + 1e-9)


def test_one_cuboid_is_measured_directly():
    W = S.marginals((3, 3, 3), attributes=[(0, 2)])
    sol = solve_datacube(W)
    assert sol.extra["cuboids"] == [(0, 2)] and sol.extra["model_objective"] == pytest.approx(9.0)
    assert mmopt.evaluate(W, sol.strategy).total_squared_error == pytest.approx(9.0)


def test_binary_pairs_are_best_served_by_the_full_cube():
    """2-way marginals of 8 binary attributes: 28 cuboids of 4 cells against one of 256 cells. Measuring the full
    cube gives total 28·4·64 = 7,168; measuring the 28 cuboids directly with θ = 1/28 gives 28·4·784 = 87,808."""
    sol = solve_datacube(S.marginals((2,) * 8, 2))
    assert sol.extra["cuboids"] == [tuple(range(8))]
    assert sol.extra["model_objective"] == pytest.approx(7168.0)


@pytest.mark.parametrize("objective", ["total", "max"])
@pytest.mark.parametrize("l1", [True, False])
def test_budget_closed_form_matches_a_numerical_optimum(objective, l1, rng):
    cost = rng.uniform(0.5, 20.0, 5)
    theta, value = allocate(cost, objective=objective, l1=l1)
    assert (theta.sum() if l1 else theta @ theta) == pytest.approx(1.0, rel=1e-12)

    def model(z):
        t = np.exp(z)
        t = t / (t.sum() if l1 else np.linalg.norm(t))
        per = cost / t**2
        return per.sum() if objective == "total" else per.max()

    assert model(np.log(theta)) == pytest.approx(value, rel=1e-12)
    if objective == "max":
        # minimax: every cuboid's variance equals the value, so lowering the max would need every θ_C larger,
        # impossible on the sphere/simplex; that equalisation is the certificate (Nelder-Mead stalls on a kink)
        np.testing.assert_allclose(cost / theta**2, value, rtol=1e-12)
        return
    best = min(scipy.optimize.minimize(model, rng.standard_normal(5), method="Nelder-Mead",
                                        options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000}).fun
                for _ in range(3))
    assert value <= best * (1 + 1e-9) and best <= value * (1 + 1e-4)


def test_through_optimize_and_never_an_auto_candidate():
    W = S.marginals((4, 3, 5), 2)
    res = mmopt.optimize(W, method="datacube", privacy=EPS1)
    assert res.method == "datacube" and res.status == "local_optimum" and res.success
    assert res.objective >= res.lower_bound and "Ding et al." in res.message
    gauss_budget = mmopt.Privacy(1.0, 1e-6)
    gauss = mmopt.optimize(W, method="datacube", privacy=gauss_budget)
    assert gauss.norm == "l2" and np.isfinite(gauss.objective)
    auto = mmopt.optimize(W, privacy=gauss_budget, seed=0)   # Gaussian: auto's quick candidates only
    assert "datacube" not in auto.extra["candidates"] and "residual" in auto.extra["candidates"]


def test_monte_carlo_matches_the_evaluated_error():
    W = S.marginals((3, 4, 2), 2)
    A = solve_datacube(W).strategy
    x = np.random.default_rng(3).integers(0, 20, W.shape).astype(float)
    r = mmopt.monte_carlo(W, A, x, EPS1, runs=1500, seed=4)
    assert r.expected == pytest.approx(mmopt.evaluate(W, A, EPS1).total_squared_error, rel=1e-12)
    assert abs(r.z_score) <= 4.0


def test_refusals():
    with pytest.raises(ValueError, match="solve_datacube needs a weighted union of marginals"):
        solve_datacube(S.kron(wl.prefix(3), wl.prefix(4)))
    with pytest.raises(ValueError, match="at most d = 12 attributes. Got d = 13"):
        solve_datacube(S.marginals((2,) * 13, 1))
    with pytest.raises(ValueError, match="'objective' parameter of solve_datacube"):
        solve_datacube(S.marginals((2, 3), 1), objective="mean")
    with pytest.raises(ValueError, match="needs a workload on a product domain"):
        mmopt.optimize(wl.prefix(8), method="datacube")
