"""optimize(method="residual"), its candidate in "auto", and the exact closure paths of mmopt.evaluate /
mmopt.svd_bound on marginal workloads past the 2^d algebra (d > 16)."""

import numpy as np
import pytest

import mmopt
from mmopt import optimize
from mmopt.multidim import search as msearch
from mmopt.structured import residual as rp
from mmopt.structured import workloads as sw


def test_optimize_residual_is_certified_optimal_under_gaussian_noise():
    W = sw.union([sw.marginals((3, 4, 5, 2), 2), sw.marginals((3, 4, 5, 2), 3)], weights=[1.0, 0.5])
    r = optimize(W, method="residual")                                  # its own objective: L2
    assert r.norm == "l2" and r.status == "optimal" and r.success and r.method == "residual"
    assert r.objective == pytest.approx(r.lower_bound, rel=1e-9)
    assert r.objective == pytest.approx(mmopt.evaluate(W, r.strategy, norm="l2").total_squared_error, rel=1e-12)
    assert isinstance(r.extra["residual_strategy"], rp.ResidualStrategy)
    assert r.extra["closure_size"] == 1 + 4 + 6 + 4


def test_optimize_residual_under_laplace_noise_is_a_heuristic_candidate():
    r = optimize(sw.marginals((3, 4, 5), 2), method="residual", norm="l1")
    assert r.status == "closed_form" and r.success and "Heuristic candidate under ε-DP" in r.message
    assert r.objective > r.lower_bound


def test_optimize_residual_on_a_dense_workload_with_structure():
    W = mmopt.workload.marginals((4, 4, 4, 4, 4), 2)                   # dense (1,024 cells)
    r = optimize(W, method="residual", norm="l2")
    assert r.status == "optimal" and r.objective == pytest.approx(948.0591649, rel=1e-9)


def test_optimize_residual_splits_other_products_and_refuses_past_the_limit():
    W = sw.kron(sw.prefix(20), sw.prefix(30))
    r = optimize(W, method="residual", norm="l2")  # a split strategy: fitted bases of 1^⊥, exactly scored
    assert r.extra["family_optimal"] and r.objective >= r.lower_bound and r.status in ("closed_form", "optimal")
    big = sw.kron(*[np.eye(2)] * 23)  # 2²³ residual subspaces, past closure.MAX_INCIDENCES
    with pytest.raises(ValueError, match="residual subspaces number at most"):
        optimize(big, method="residual")


def test_auto_runs_residual_first_and_certifies_it():
    W = sw.marginals((3, 4, 5), 2)
    r = optimize(W, method="auto", norm="l2", seed=0)
    cands = r.extra["candidates"]
    # certified at the exact bound, so the other candidates cannot do better and are not run
    assert list(cands) == ["residual"] and {"kron", "marginals", "l2_approx"} <= set(r.extra["skipped"])
    assert all("proven lower bound" in why for why in r.extra["skipped"].values())
    assert r.method == "auto:residual" and r.status == "optimal"
    assert r.objective == pytest.approx(r.lower_bound, rel=1e-9)
    assert all(c["objective"] >= r.objective * (1 - 1e-9) for c in cands.values())


def test_auto_survives_a_failing_candidate(monkeypatch):
    def broken(*args, **kwargs):
        raise ArithmeticError("overflow in a candidate")
    monkeypatch.setitem(msearch.SOLVERS, "residual", broken)
    r = optimize(sw.marginals((3, 4, 5), 2), method="auto", norm="l2", seed=0)
    assert "residual" not in r.extra["candidates"] and "ArithmeticError" in r.extra["failed"]["residual"]
    assert np.isfinite(r.objective)


def test_auto_runs_the_split_strategy_on_prefix_marginals():
    W = sw.union([sw.kron(sw.prefix(8), sw.total(8)), sw.kron(sw.total(8), sw.prefix(8))])
    r = optimize(W, method="auto", norm="l2", seed=0)
    assert "residual" in r.extra["candidates"] and not r.extra["failed"]
    assert r.objective <= r.extra["candidates"]["residual"]["objective"]
    assert r.extra["candidates"]["residual"]["exact"]


@pytest.mark.parametrize("n", [2, 8])
def test_exact_bound_and_error_at_d_30(n):
    W = sw.marginals((n,) * 30, 2)
    b = mmopt.structured.svd_bound(W)
    assert b.exact and b.method == "closure"
    assert b.value == pytest.approx(rp.svd_bound(W), rel=1e-14)
    assert mmopt.svd_bound(W, mmopt.Privacy(1.0)) == pytest.approx(2 * b.value, rel=1e-14)
    A = rp.plan(W).strategy
    for privacy in (None, mmopt.Privacy(0.5), mmopt.Privacy(1.0, 1e-6)):
        norm = "l2" if privacy is None else None
        rep = mmopt.evaluate(W, A.to_implicit(), privacy, norm=norm)
        ref = rp.evaluate(W, A, privacy, norm=norm)
        assert rep.method == "closure" and rep.total_exact and rep.max_variance_exact and rep.sensitivity_exact
        assert rep.total_squared_error == pytest.approx(ref.total_squared_error, rel=1e-12)
        assert rep.max_variance == pytest.approx(ref.max_variance, rel=1e-12)
    assert mmopt.evaluate(W, A.to_implicit(), norm="l2").total_squared_error == pytest.approx(b.value, rel=1e-9)


def test_marginals_strategy_at_d_30_is_exact_through_the_closure():
    shape = (3,) * 30
    W = sw.marginals(shape, 2)
    theta = {A: 1.0 for A in [(i, j) for i in range(30) for j in range(i + 1, 30)]} | {(): 3.0}
    A = mmopt.structured.marginals_strategy(shape, theta)
    rep = mmopt.evaluate(W, A, norm="l1")
    assert rep.method == "closure" and rep.total_exact and rep.sensitivity == pytest.approx(len(theta) + 2.0)
    assert rep.total_squared_error == pytest.approx(rp.evaluate(W, A, norm="l1").total_squared_error, rel=1e-12)
    worse = optimize(W, method="residual", norm="l2")
    assert worse.objective <= mmopt.evaluate(W, A, norm="l2").total_squared_error


def test_a_strategy_that_does_not_support_the_workload_is_refused_at_d_30():
    W = sw.marginals((2,) * 30, 2)
    A = rp.residual_strategy((2,) * 30, {(): 1.0} | {(i,): 1.0 for i in range(30)})
    with pytest.raises(ValueError, match="does not support"):
        mmopt.evaluate(W, A.to_implicit())


@pytest.mark.slow
def test_the_100_attribute_two_way_table_in_seconds():
    W = sw.marginals((8,) * 100, 2)
    r = optimize(W, method="residual", norm="l2")
    assert r.status == "optimal" and r.extra["bound_exact"] and r.extra["total_exact"]
    assert r.objective == pytest.approx(r.lower_bound, rel=1e-9)
