"""optimize(): reference optima, result invariants, lower bounds, engines agreeing, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import mmopt
from mmopt import evaluate, svd_bound
from mmopt import workload as wl
from mmopt.optimize import OptimizeResult, optimize

GOLDEN = (3 + 5**0.5) / 2


@pytest.mark.parametrize("engine", ["sdp", "fast"])
@pytest.mark.parametrize("W,expected", [
    (wl.prefix(2), GOLDEN),            # X = [[1,t],[t,1]], t = (3-√5)/2
    (wl.identity(5), 5.0),
    (wl.all_range(8), 80.4643),        # spec §4, Program 5.2 check
])
def test_l2_approx_reference_values(engine, W, expected):
    r = optimize(W, method="l2_approx", options={"engine": engine})
    assert r.success and r.norm == "l2"
    assert r.objective == pytest.approx(expected, rel=2e-6)
    assert r.lower_bound <= r.objective
    assert np.max(np.diag(r.strategy.gram)) <= 1 + 1e-9


def test_l2_engines_agree_to_1e6():
    for W in (wl.all_range(12), wl.prefix(10), wl.marginals((2, 3, 2), 1)):
        a = optimize(W, method="l2_approx", options={"engine": "sdp"}).objective
        b = optimize(W, method="l2_approx", options={"engine": "fast"}).objective
        assert a == pytest.approx(b, rel=1e-6)


def test_result_objective_is_re_evaluated_and_printable():
    W = wl.all_range(6)
    r = optimize(W, method="l2_approx")
    assert isinstance(r, OptimizeResult)
    assert r.objective == evaluate(W, r.strategy, norm="l2").total_squared_error
    text = str(r)
    for key in ("status", "solver", "objective", "lower_bound", "gap", "seconds"):
        assert key in text
    assert 0 <= r.gap < 0.05 and r.ratio >= 1


@pytest.mark.parametrize("W,reference", [
    (wl.identity(4), 4.0),
    (wl.all_range(4), 20.0),   # the identity is optimal here (spec §4)
    (wl.Workload.from_matrix(np.vstack([10 * np.ones(4), np.eye(4)])), 222.69),  # I: 404, Thm 5.25: 291.2
])
def test_min_error_reference_values(W, reference):
    r = optimize(W, method="min_error", seed=0)
    assert r.norm == "l1"
    assert r.objective <= reference * (1 + 1e-4)
    assert r.objective >= r.lower_bound >= svd_bound(W) * (1 - 1e-9)
    assert r.strategy.sensitivity("l1") == pytest.approx(1.0)
    assert any(h.get("step") == "sdp" for h in r.history)
    assert "heuristic" in r.message


@pytest.mark.parametrize("make", [wl.all_range, wl.prefix])
def test_min_error_beats_baselines_n32(make):
    W = make(32)
    r = optimize(W, method="min_error", seed=1)
    for A in (mmopt.strategy.identity(32), mmopt.strategy.hierarchical(32), mmopt.strategy.wavelet(32)):
        assert r.objective < evaluate(W, A).total_squared_error


def test_svd_bound_strategy_theorem_5_25():
    W = wl.all_range(16)
    r = optimize(W, method="svd_bound")
    A = r.strategy
    # its Frobenius objective ‖A‖_F²·tr(G X⁻¹) equals (Σσᵢ)²; its L1 error is within n of the bound
    frob = np.sum(A.matrix**2) * np.sum(W.gram * mmopt.error_profile(A).matrix)
    sigma = np.sqrt(np.clip(np.linalg.eigvalsh(W.gram), 0, None))
    assert frob == pytest.approx(np.sum(sigma) ** 2, rel=1e-9)
    assert r.objective <= 16 * svd_bound(W)
    assert r.solver is None and r.success


def test_dual_bound_raises_lower_bound_above_svd_bound():
    W = wl.all_range(16)
    r = optimize(W, method="l2_approx", options={"engine": "fast"})
    assert r.lower_bound > svd_bound(W) * 1.005  # the SVD bound is 1–2.3% below the L2 optimum


def test_custom_method_callable():
    def only_identity(W, G, opts):
        from mmopt._solution import RawSolution
        return RawSolution(np.eye(W.domain_size), None, "optimal", "mine", 0, None)
    r = optimize(wl.prefix(3), method=only_identity)
    assert r.method == "only_identity" and r.objective == pytest.approx(6.0)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(n=hs.integers(2, 6), seed=hs.integers(0, 1000))
def test_l2_approx_never_worse_than_identity_and_bounded(n, seed):
    rng = np.random.default_rng(seed)
    W = wl.Workload.from_matrix(rng.integers(0, 2, size=(n + 2, n)) + np.eye(n + 2, n))
    r = optimize(W, method="l2_approx", options={"engine": "fast"})
    assert r.objective <= evaluate(W, mmopt.strategy.identity(n), norm="l2").total_squared_error * (1 + 1e-7)
    assert r.objective >= r.lower_bound
    np.testing.assert_allclose(r.strategy.gram, r.strategy.gram.T)


INVALID = {
    "method": (dict(method="l2-approx"), ValueError, "'method' parameter of optimize must be one of"),
    "norm": (dict(norm="l3"), ValueError, "'norm' parameter of optimize"),
    "option": (dict(options={"engin": "sdp"}), ValueError, r"Unknown options \['engin'\]"),
    "tol": (dict(tol=-1.0), ValueError, "'tol' parameter of optimize"),
    "solver": (dict(solver="NOPE"), ValueError, "NOPE"),
    "min_sensitivity without initial": (dict(method="min_sensitivity"), ValueError, "needs initial="),
    "engine": (dict(method="min_error", options={"engine": "magic"}), ValueError, "'engine' option"),
}


@pytest.mark.parametrize("case", INVALID.values(), ids=INVALID.keys())
def test_invalid_arguments(case):
    kwargs, exc, pattern = case
    with pytest.raises(exc, match=pattern):
        optimize(wl.prefix(3), **kwargs)
    with pytest.raises(TypeError, match="'workload' parameter of optimize"):
        optimize(np.eye(3))


def test_min_sensitivity_post_processes_l2_approx_for_eps_dp():
    """l2_approx then min_sensitivity: same profile, L1 sensitivity never higher, ε-DP error never higher."""
    W = wl.all_range(8)
    l2 = optimize(W, method="l2_approx")
    ms = optimize(W, method="min_sensitivity", initial=l2.strategy, seed=0)
    assert mmopt.profile_equivalent(l2.strategy, ms.strategy, rtol=1e-7)
    assert ms.strategy.sensitivity("l1") <= l2.strategy.sensitivity("l1") + 1e-12
    assert ms.objective <= evaluate(W, l2.strategy, norm="l1").total_squared_error * (1 + 1e-12)
    assert ms.norm == "l1" and ms.objective >= ms.lower_bound


def test_min_sensitivity_reproduces_spec_n4():
    for A, expected in ((mmopt.strategy.hierarchical(4), 1 / 2**0.5 + 3.5**0.5), (mmopt.strategy.wavelet(4), 2.0)):
        r = optimize(wl.all_range(4), method="min_sensitivity", initial=A, seed=0)
        assert r.strategy.sensitivity("l1") == pytest.approx(expected, rel=1e-4)
