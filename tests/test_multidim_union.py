"""OPT_+ (mmopt.multidim.union.solve_union): budget weights, the proven bound, exactness, grouping, validation."""

import numpy as np
import pytest

from mmopt import error as dense_error
from mmopt import structured as S
from mmopt.multidim.union import budget_weights, solve_union
from mmopt.structured import workloads as sw


def _union_small():
    # T factors of size 2 and 3 only: structured.evaluate rejects the optimal 1ᵀ on larger T (reported bug).
    return S.union([sw.kron(sw.prefix(16), sw.total(3), sw.identity(2)),
                    sw.kron(sw.total(16), sw.identity(3), sw.total(2)),
                    sw.kron(sw.all_range(16), sw.identity_total(3), sw.total(2), weight=0.5),
                    sw.kron(sw.prefix(16), sw.total(3), sw.identity(2), weight=2.0)], name="u")   # repeats term 0


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_union_error_is_exact_on_small_domains_and_below_the_theta_bound(norm):
    W = _union_small()
    sol = solve_union(W, norm=norm, restarts=1, seed=0)
    e = sol.extra
    dense = dense_error.evaluate(W.to_workload(), sol.strategy.to_strategy(), None, norm=norm, per_query=False)
    assert e["objective_exact"] and e["objective"] == pytest.approx(dense.total_squared_error, rel=1e-9)
    assert e["objective"] <= e["upper_bound"] * (1 + 1e-12)
    theta = np.array(e["theta"])
    assert (theta.sum() if norm == "l1" else (theta**2).sum()) == pytest.approx(1.0, rel=1e-12)
    _, value = budget_weights(e["group_errors"], norm)
    assert e["upper_bound"] <= value * (1 + 1e-12)   # the union's real Δ is at most Σθ (l1) / √Σθ² (l2)
    assert not sol.strategy.is_product and len(sol.strategy.terms) == 3


def test_repeated_terms_form_one_group_whose_error_is_exact():
    W = _union_small()
    sol = solve_union(W, restarts=1, seed=0)
    assert sol.extra["groups"] == ((0, 3), (1,), (2,))
    merged = S.union([sw.kron(sw.prefix(16), sw.total(3), sw.identity(2), weight=np.sqrt(5.0))])
    part = S.kron_strategy(*sol.strategy.terms[0].factors)
    assert sol.extra["group_errors"][0] == pytest.approx(S.evaluate(merged, part).total_squared_error, rel=1e-12)


def test_budget_weights_minimise_the_bound():
    rng = np.random.default_rng(0)
    E = rng.uniform(0.1, 10.0, 5)
    for norm, power in (("l1", 1), ("l2", 2)):
        theta, value = budget_weights(E, norm)
        assert float(np.sum(E / theta**2)) == pytest.approx(value, rel=1e-12)
        for _ in range(200):   # every other feasible θ does no better
            t = theta * np.exp(0.3 * rng.standard_normal(5))
            t /= np.sum(t**power) ** (1 / power)
            assert float(np.sum(E / t**2)) >= value * (1 - 1e-12)


def test_a_single_product_is_its_own_optimum():
    W = sw.kron(sw.prefix(8), sw.identity_total(3))
    sol = solve_union(W, restarts=1, seed=0)
    assert sol.strategy.is_product and sol.extra["theta"] == (1.0,)
    assert sol.extra["objective"] == pytest.approx(sol.extra["upper_bound"], rel=1e-9)


def test_the_same_seed_gives_the_same_union():
    W = _union_small()
    a, b = solve_union(W, restarts=2, seed=5), solve_union(W, restarts=2, seed=5)
    assert a.extra["objective"] == b.extra["objective"] and a.extra["theta"] == b.extra["theta"]


def test_a_tiny_budget_is_not_optimal():
    W = S.union([sw.kron(sw.prefix(32), sw.identity(2)), sw.kron(sw.total(32), sw.identity(2))])
    sol = solve_union(W, restarts=1, seed=0, max_iterations=1)
    # single-attribute products converge in one sweep, so the budget that can run out is the inner one;
    # either way "optimal" must come with every factor solve converged
    assert sol.status in ("optimal", "user_limit", "optimal_inaccurate")
    assert (sol.status == "optimal") == all(h["status"] == "optimal" for h in sol.history)


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"workload": "sf1"}, TypeError, "'workload' parameter of solve_union"),
    ({"norm": "linf"}, ValueError, "'norm' parameter of solve_union"),
    ({"restarts": -1}, ValueError, "'restarts' parameter of solve_union"),
    ({"seed": 1.5}, TypeError, "'seed' parameter of solve_union"),
    ({"tol": 0.0}, ValueError, "'tol' parameter of solve_union"),
])
def test_bad_inputs_name_the_function_and_parameter(kwargs, exc, match):
    args = {"workload": _union_small(), **kwargs}
    with pytest.raises(exc, match=match):
        solve_union(args.pop("workload"), **args)


def test_union_on_sf1_scores_with_a_certified_bracket_below_the_theta_bound():
    """SF1 (N = 29,440, 33 groups): no exact path and no block supports every term, so evaluate used to raise
    under Gaussian noise (and give 10⁹× kron under Laplace noise from the one block that did). The per-term
    bracket scores it: its upper value is at most the θ bound (that bound is the same per-term argument with
    each term's own group), and its lower value is certified below it."""
    W = S.census.sf1()
    sol = solve_union(W, norm="l2", restarts=1, seed=0)
    e = sol.extra
    assert e["objective_method"] == "loewner_bound" and not e["objective_exact"]
    assert e["objective"] <= e["upper_bound"] * (1 + 1e-12)
    r = S.evaluate(W, sol.strategy, norm="l2")
    assert r.total_squared_error == pytest.approx(e["objective"], rel=1e-12)
    assert S.svd_bound(W).value <= r.total_lower < r.total_squared_error and r.total_width < 0.3
