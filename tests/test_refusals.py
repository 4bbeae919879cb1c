"""Up-front refusals (issue "Fresh-machine trust", parts B and C): loop counts and working sets that would
run until killed are refused before any work, with the work or memory they would need; bad options and
silent underflows are refused or warned about.

Each refusal is checked to be *fast* (well under the second it would take to start the work) and, for
memory, to allocate nothing large before refusing (tracemalloc's peak), so a test fails if the guard moves
after the allocation it is meant to prevent.
"""

import math
import time
import tracemalloc
import types
import warnings

import numpy as np
import pytest

import mmopt
from mmopt import Privacy
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt._base import guards as g
from mmopt._base.solution import RawSolution
from mmopt.adaptive import mwem
from mmopt.multidim.kron import solve_kron
from mmopt.multidim.union import solve_union
from mmopt.structured import _checks as ck_mod
from mmopt.structured import workloads as sw

EPS1 = Privacy(1.0)
P8, H8 = wl.prefix(8), st.hierarchical(8)
X8 = np.array([5.0, 0.0, 3.0, 1.0, 0.0, 2.0, 7.0, 4.0])


def _started(*args, **kwargs):
    raise AssertionError("the work started: the refusal must come first")


@pytest.fixture
def no_work(monkeypatch):
    """The loops' first unit of work raises, so a missing guard fails at once instead of running for days."""
    import mmopt.multidim._common as cm
    from mmopt.adaptive._noise import Noise

    monkeypatch.setattr(mmopt.dispatch, "matrix_mechanism", _started)
    monkeypatch.setattr(Noise, "exponential", _started)  # MWEM's selection: every round draws through Noise
    monkeypatch.setattr(cm, "spawn", _started)


def refused_quickly(call, exc, match, seconds=5.0):
    # the work refused would take hours to days; 5 s leaves room for a first import on a loaded machine (0.5 s did
    # not always), and the no_work fixture fails a missing guard in the patched loops at once
    t0 = time.perf_counter()
    with pytest.raises(exc, match=match) as info:
        call()
    assert time.perf_counter() - t0 < seconds, "refused, but only after starting the work"
    return str(info.value)


# -- loop counts ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("runs", [10**12, 10**7])
def test_monte_carlo_refuses_runs_beyond_the_work_limit(runs, no_work):
    msg = refused_quickly(lambda: mmopt.monte_carlo(P8, H8, X8, EPS1, runs=runs, seed=0), ValueError,
                          r"The 'runs' parameter of monte_carlo must be <= [\d,]+ here\. Got [\d,]+ instead")
    assert "operations" in msg and "MAX_WORK" in msg and "1/√runs" in msg  # the work, the limit, a remedy
    limit = int(msg.split("must be <= ")[1].split(" ")[0].replace(",", ""))
    assert limit < runs and limit <= g.MAX_WORK // g.ITERATION_OPS


def test_monte_carlo_limit_is_the_work_budget(monkeypatch):
    """At the limit a call runs; one run more is refused (the boundary, with a tiny budget)."""
    monkeypatch.setattr(g, "MAX_WORK", 50 * (g.ITERATION_OPS + 2 * (15 + 8) * 8))  # 50 runs of prefix(8), H₂
    assert mmopt.monte_carlo(P8, H8, X8, EPS1, runs=50, seed=0).runs == 50
    with pytest.raises(ValueError, match="must be <= 50 here. Got 51 instead"):
        mmopt.monte_carlo(P8, H8, X8, EPS1, runs=51, seed=0)


def test_monte_carlo_spawns_per_batch_like_one_spawn():
    """Seeds are spawned batch by batch (no 10⁶ SeedSequences held at once): still run r's own stream."""
    a = mmopt.monte_carlo(P8, H8, X8, EPS1, runs=30, seed=3, batch=7)
    b = mmopt.monte_carlo(P8, H8, X8, EPS1, runs=30, seed=3, batch=30)
    np.testing.assert_allclose(a.per_run_total, b.per_run_total, rtol=1e-12)
    child = np.random.SeedSequence(3).spawn(30)[29]  # run 29 alone: its noise is default_rng(child)'s
    one = mmopt.matrix_mechanism(P8, H8, X8, EPS1, rng=np.random.default_rng(child))
    assert a.per_run_total[29] == pytest.approx(float(np.sum((one.answers - P8.explicit_matrix() @ X8) ** 2)),
                                                rel=1e-12)


def test_mwem_refuses_rounds_and_replays_beyond_the_work_limit(monkeypatch):
    from mmopt.adaptive._noise import Noise

    real = Noise.exponential
    monkeypatch.setattr(Noise, "exponential", _started)  # every MWEM round selects through Noise
    msg = refused_quickly(lambda: mwem(X8, P8, 1.0, rounds=10**9, rng=0), ValueError,
                          r"The 'rounds' parameter of mwem must be <= [\d,]+ here\. Got 1,000,000,000 instead")
    assert "days" in msg and "operations" in msg and "DPBench uses T = 10" in msg
    refused_quickly(lambda: mwem(X8, P8, 1.0, rounds=10**4, replay_passes=10**4, rng=0), ValueError,
                    r"The 'replay_passes' parameter of mwem must be <= .* With rounds=10,000, each pass replays "
                    r"50,005,000 updates")
    monkeypatch.setattr(Noise, "exponential", real)
    assert mwem(X8, P8, 1.0, rounds=10, replay_passes=100, rng=0).details["rounds"] == 10  # DPBench's setting


@pytest.mark.parametrize("solver", [solve_kron, solve_union])
def test_multidim_searches_refuse_restarts_beyond_the_work_limit(solver, no_work):
    W = sw.kron(sw.prefix(4), sw.identity(3))
    refused_quickly(lambda: solver(W, restarts=10**9, seed=0), ValueError,
                    rf"The 'restarts' parameter of {solver.__name__} must be <= [\d,]+ here\. Got 1,000,000,000")


def test_check_work_messages_and_boundary(monkeypatch):
    monkeypatch.setattr(g, "MAX_WORK", 10**6)
    assert g.check_work(10, name="k", caller="f", per_item=10**5, item="steps", remedy="R") == 10
    with pytest.raises(ValueError, match=r"The 'k' parameter of f must be <= 10 here. Got 11 instead: 11 steps of "
                                         r"about 1e05 operations each would need about 1.1e06 operations .* R$"):
        g.check_work(11, name="k", caller="f", per_item=10**5, item="steps", remedy="R")
    # a non-linear cost: the limit is the largest count that fits
    assert g.check_work(999, name="k", caller="f", work_of=lambda k: k * k, item="x", remedy="") == 999
    with pytest.raises(ValueError, match="must be <= 1,000 here. Got 1,001"):
        g.check_work(1001, name="k", caller="f", work_of=lambda k: k * k, item="x", remedy="")
    with pytest.raises(TypeError, match="'k' parameter of f must be an integer"):
        g.check_work(2.5, name="k", caller="f", per_item=1, item="x", remedy="")


# -- working sets ---------------------------------------------------------------------------------------
@pytest.fixture
def small_memory(monkeypatch):
    """A 4 MB working-set limit, with no always-allowed floor."""
    monkeypatch.setattr(g, "MAX_WORKING_SET_BYTES", 4 * 10**6)
    monkeypatch.setattr(g, "SMALL_WORKING_SET_BYTES", 0)


def test_dense_evaluate_refuses_its_working_set_before_allocating(small_memory):
    W, A = wl.all_range(256), st.hierarchical(256)  # ~9·256² entries ≈ 4.7 MB at its peak
    with pytest.raises(ValueError):  # once untraced: a first call's lazy imports (1.4 MB, 2 s when this test ran
        mmopt.evaluate(W, A, EPS1)   # alone) are neither the working set nor the refusal's time
    tracemalloc.start()
    try:
        msg = refused_quickly(lambda: mmopt.evaluate(W, A, EPS1), ValueError,
                              r"evaluate: evaluating strategy 'H2' on workload 'all_range\(256\)' would hold about "
                              r"[\d,]+ float64 entries \([\d.]+ MB\) in memory at once")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "MAX_WORKING_SET_BYTES" in msg and "per_query=False" in msg
    assert peak < 2 * 256 * 256 * 8  # nothing of the n² working set was built
    g.MAX_WORKING_SET_BYTES = 10**8  # (restored by monkeypatch) with room, the same call runs
    assert mmopt.evaluate(W, A, EPS1).total_squared_error > 0


def test_implicit_evaluate_counts_every_distinct_factor(small_memory):
    """2-way marginals on five attributes of distinct sizes ~200: 10 distinct factors (I and 1ᵀ per size; terms share
    them), each with its own n×n root and Gram (≈ 8·10⁵ entries, 6.4 MB, in all); the sum is refused."""
    shape = (200, 201, 202, 203, 204)
    W = sw.marginals(shape, 2)
    A = st.marginals(shape, np.ones(32))
    with pytest.raises(ValueError):  # once untraced, as above: the first call's imports are not measured
        mmopt.evaluate(W, A)
    tracemalloc.start()
    try:
        msg = refused_quickly(lambda: mmopt.evaluate(W, A), ValueError,
                              r"evaluate: evaluating strategy 'marginals' on workload .* would hold about")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "10 distinct workload factor(s)" in msg
    assert peak < 10 * 200 * 200 * 8  # refused before the 10 roots and Grams were built


def test_reported_marginals_working_set_is_refused(monkeypatch):
    """The reported case, all 2-way marginals of (10⁴,)*5 with a marginals strategy, without building it:
    50 distinct factors of 10⁴×10⁴, each with a root and a Gram, is 10¹⁰ entries (80 GB) held at once."""
    monkeypatch.setattr(g, "MAX_WORKING_SET_BYTES", 16 * 10**9)
    factor = lambda k: types.SimpleNamespace(domain_size=10**4, n_queries=10**4 if k else 1)  # noqa: E731
    W = types.SimpleNamespace(name="marginals(10000x5,k=2)", terms=[
        types.SimpleNamespace(factors=[factor(i in S) for i in range(5)])
        for S in [(a, b) for a in range(5) for b in range(a + 1, 5)]])
    eye = types.SimpleNamespace(matrix=types.SimpleNamespace(shape=(10**4, 10**4)))
    one = types.SimpleNamespace(matrix=types.SimpleNamespace(shape=(1, 10**4)))
    A = types.SimpleNamespace(name="marginals", domain_size=10**20,
                              terms=[types.SimpleNamespace(factors=[eye, one, one, one, eye])])
    # 20 identity factors: root and Gram 2·10⁸ each; 30 total factors: W itself (10⁴) and the Gram 10⁸
    with pytest.raises(ValueError, match=r"would hold about 7,5\d\d,\d{3},\d{3} float64 entries \(60 GB\) in memory "
                                         r"at once \(Gram roots and Grams of 50 distinct workload factor\(s\): 56 GB;"
                                         r".* more than the limit of mmopt._base.guards.MAX_WORKING_SET_BYTES"):
        ck_mod.check_evaluation_memory(W, A, "evaluate", inverses=False, grams=True)


def test_working_set_limit_follows_available_memory(monkeypatch):
    monkeypatch.setattr(g, "available_memory", lambda: 3 * 2**30)
    limit, how = g.working_set_limit()
    assert limit == int(g.WORKING_SET_FRACTION * 3 * 2**30) and "of memory available now" in how
    monkeypatch.setattr(g, "available_memory", lambda: None)
    assert g.working_set_limit()[0] == 4 * 8 * mmopt._base.validation.MAX_ALLOCATION_ENTRIES


def test_available_memory_is_read():
    avail = g.available_memory()
    assert avail is None or avail > 2**20


# -- C: underflow, bad options, custom methods ----------------------------------------------------------
def test_error_underflow_warns_like_overflow():
    """ε = 1e300: the total is ~1e-599; 0.0 is returned only with a warning, and log10_total stays exact."""
    with pytest.warns(RuntimeWarning, match=r"below float64's smallest normal number \(≈1e-59\d\.\d\); returning 0\.0"):
        r = mmopt.evaluate(P8, H8, Privacy(1e300))
    unit = mmopt.evaluate(P8, H8).total_squared_error
    assert r.total_squared_error == 0.0
    assert r.log10_total == pytest.approx(math.log10(unit) + math.log10(2.0) - 600, abs=1e-12)
    with pytest.warns(RuntimeWarning, match="exceeds float64"):  # the overflow side, for comparison
        mmopt.evaluate(P8, H8, Privacy(1e-300))


def test_subnormal_error_figure_warns():
    """c = 2/ε² = 1e-305 is normal but c·u is not (u = 1e-6 per query for W = 10⁻³·I): the fast path c·u must
    not hand back a subnormal silently; and a subnormal c itself (ε = 1e154) is not used as a factor."""
    W = wl.Workload.from_matrix(1e-3 * np.eye(4))
    with pytest.warns(RuntimeWarning, match="returning the subnormal"):
        r = mmopt.evaluate(W, st.identity(4), Privacy(math.sqrt(2e305)))
    assert 0.0 < r.mean_squared_error < np.finfo(float).tiny
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # c = 2e-308 is subnormal, but c·u ≈ 1e-306 is a normal, accurate figure
        r = mmopt.evaluate(P8, H8, Privacy(1e154))
    unit = mmopt.evaluate(P8, H8).mean_squared_error
    assert r.mean_squared_error == pytest.approx(unit * 2.0 / 1e308, rel=1e-12)  # 2/ε², formed in normal floats


def test_implicit_error_underflow_warns():
    W = sw.kron(sw.prefix(6), sw.identity(5))
    A = st.kron(st.hierarchical(6), st.identity(5))
    with pytest.warns(RuntimeWarning, match="below float64's smallest normal number"):
        r = mmopt.evaluate(W, A, Privacy(1e300))
    assert r.total_squared_error == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mmopt.evaluate(W, A, EPS1).total_squared_error > 0  # ordinary budgets stay silent


@pytest.mark.parametrize("workload", [P8, sw.kron(sw.prefix(4), sw.identity(3))], ids=["dense", "implicit"])
@pytest.mark.parametrize("bad", ["x", 1, None, np.array([True])])
def test_svd_bound_per_query_must_be_bool(workload, bad):
    with pytest.raises(TypeError, match=r"The 'per_query' parameter of svd_bound must be True or False\. Got"):
        mmopt.svd_bound(workload, per_query=bad)
    assert mmopt.svd_bound(workload, per_query=np.True_) == pytest.approx(
        mmopt.svd_bound(workload) / workload.n_queries, rel=1e-12)


def test_implicit_evaluate_per_query_must_be_bool():
    with pytest.raises(TypeError, match="'per_query' parameter of evaluate must be True, False or None"):
        mmopt.evaluate(sw.kron(sw.prefix(4), sw.identity(3)), st.kron(st.identity(4), st.identity(3)),
                       per_query="x")


@pytest.mark.parametrize("rtol,exc", [(-1, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
                                      (1.0, ValueError), ("1e-9", TypeError), (None, TypeError)])
def test_profile_equivalent_validates_rtol(rtol, exc):
    with pytest.raises(exc, match="'rtol' parameter of profile_equivalent"):
        mmopt.profile_equivalent(st.identity(3), st.identity(3), rtol=rtol)


def test_profile_equivalent_rtol_zero_and_default_still_work():
    H = st.hierarchical(8)
    assert mmopt.profile_equivalent(H, H, rtol=0)
    assert mmopt.profile_equivalent(H, st.square_root(H)) and not mmopt.profile_equivalent(H, st.wavelet(8))


@pytest.mark.parametrize("returned,hint", [(None, ""), (np.eye(4), "wrap it: RawSolution"), (3, "")])
def test_optimize_custom_method_must_return_a_raw_solution(returned, hint):
    def f(W, G, opts):
        return returned

    with pytest.raises(TypeError, match=r"The 'method' parameter of optimize is a callable \('f'\) that must return "
                                        rf"a mmopt._base.solution.RawSolution .* Got {type(returned).__name__} instead"
                                        rf"\..*{hint}"):
        mmopt.optimize(wl.prefix(4), method=f)


def test_optimize_custom_method_returning_a_raw_solution_works():
    def identity(W, G, opts):
        return RawSolution(np.eye(W.domain_size), None, "optimal", "identity", None, None)

    res = mmopt.optimize(wl.prefix(4), method=identity)
    assert res.objective == pytest.approx(mmopt.expected_error(wl.prefix(4), st.identity(4)), rel=1e-12)
