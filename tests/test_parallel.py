"""Parallel restarts (mmopt._base.parallel): the same strategy whatever n_jobs and joblib backend, per-restart seeds,
one BLAS thread per worker, n_jobs checks; and the parallel row sweep of experiments.range_queries."""

import joblib
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import mmopt
from mmopt import workload as wl
from mmopt._base import parallel as _parallel
from mmopt.multidim.kron import solve_kron
from mmopt.multidim.marginals import solve_marginals
from mmopt.multidim.union import solve_union
from mmopt.search.local_search import minimize_l1
from mmopt.strategy import hierarchical
from mmopt.structured import marginals
from mmopt.structured.workloads import identity, kron, prefix, total, union

LOCAL = {"engine": "local", "restarts": 4}
# Two products on 8 × 3 cells: OPT_⊗'s restarts (random attribute orders) end at different errors here.
UNION = union([kron(prefix(8), total(3)), kron(total(8), identity(3))])


def _factors(strategy):
    """Every factor matrix and term weight of an ImplicitStrategy, in order."""
    return [f.matrix for t in strategy.terms for f in t.factors], [t.weight for t in strategy.terms]


def _same_implicit(a, b) -> bool:
    (fa, wa), (fb, wb) = _factors(a.strategy), _factors(b.strategy)
    return wa == wb and len(fa) == len(fb) and all(np.array_equal(x, y) for x, y in zip(fa, fb, strict=True))


@pytest.fixture(scope="module")
def min_error_ref():
    return mmopt.optimize(wl.all_range(16), method="min_error", seed=5, options=LOCAL)


@pytest.fixture(scope="module")
def kron_ref():
    return solve_kron(UNION, restarts=3, seed=1, n_jobs=1)


def test_min_error_restarts_identical_with_two_workers(min_error_ref):
    par = mmopt.optimize(wl.all_range(16), method="min_error", seed=5, options=LOCAL, n_jobs=2)
    assert np.array_equal(par.strategy.matrix, min_error_ref.strategy.matrix)
    assert par.objective == min_error_ref.objective
    local = [h["objective"] for h in min_error_ref.history if h.get("step") == "local_search"]
    assert local == [h["objective"] for h in par.history if h.get("step") == "local_search"]
    assert (min_error_ref.extra["n_jobs"], min_error_ref.extra["backend"]) == (1, "sequential")
    assert (par.extra["n_jobs"], par.extra["backend"]) == (2, "loky")
    assert par.message == min_error_ref.message  # the message never says how it ran: tracked CSVs hold it


def test_minimize_l1_identical_in_both_modes_and_restarts_differ():
    G = wl.all_range(12).gram
    one, two = (minimize_l1(G, restarts=4, seed=11, n_jobs=j) for j in (1, 2))
    assert np.array_equal(one.matrix, two.matrix)
    assert [h["objective"] for h in one.history] == [h["objective"] for h in two.history]
    assert len({h["objective"] for h in one.history}) > 1  # distinct restarts: picking the wrong one would show
    A0 = hierarchical(12).matrix
    one, two = (minimize_l1(G, initial=A0, restarts=3, seed=11, n_jobs=j) for j in (1, 2))
    assert np.array_equal(one.matrix, two.matrix)


def test_restart_k_draws_only_from_child_k():
    """Restart 0 gets SeedSequence(seed).spawn(K)[0] for every K, so its run cannot depend on K."""
    G = wl.prefix(16).gram
    alone = minimize_l1(G, restarts=1, seed=3)
    among = minimize_l1(G, restarts=3, seed=3)
    assert among.history[0]["objective"] == alone.history[0]["objective"]
    assert among.history[0]["iterations"] == alone.history[0]["iterations"]


def test_seed_children():
    assert [c.spawn_key for c in _parallel.seed_children(4, 3, caller="f")] == [(0,), (1,), (2,)]
    ss = np.random.SeedSequence(9)
    first = _parallel.seed_children(ss, 2, caller="f")
    assert ss.n_children_spawned == 0  # a SeedSequence is copied, not advanced
    assert [c.generate_state(2).tolist() for c in first] == \
           [c.generate_state(2).tolist() for c in _parallel.seed_children(ss, 2, caller="f")]
    g1, g2 = np.random.default_rng(1), np.random.default_rng(1)
    a = _parallel.seed_children(g1, 1, caller="f")[0].generate_state(2)
    assert np.array_equal(a, _parallel.seed_children(g2, 1, caller="f")[0].generate_state(2))  # same state
    assert not np.array_equal(a, _parallel.seed_children(g1, 1, caller="f")[0].generate_state(2))  # consumed
    with pytest.raises(ValueError, match="'seed' parameter of f must be an int >= 0"):
        _parallel.seed_children(-1, 2, caller="f")
    with pytest.raises(TypeError, match="'seed' parameter of f"):
        _parallel.seed_children(1.5, 2, caller="f")


def test_kron_restarts_identical_and_distinct(kron_ref):
    assert len({h["objective"] for h in kron_ref.history}) > 1
    par = solve_kron(UNION, restarts=3, seed=1, n_jobs=2)
    assert _same_implicit(par, kron_ref)
    assert par.extra["objective"] == kron_ref.extra["objective"] and par.extra["restart"] == kron_ref.extra["restart"]
    assert par.extra["backend"] == "loky"


def test_marginals_and_union_identical():
    W = marginals((3, 4, 2), 2)
    one, two = (solve_marginals(W, norm="l1", restarts=6, seed=8, n_jobs=j) for j in (1, 2))
    assert np.array_equal(one.extra["theta"], two.extra["theta"]) and one.extra["restart"] == two.extra["restart"]
    one, two = (solve_union(UNION, restarts=2, seed=4, n_jobs=j) for j in (1, -1))
    assert _same_implicit(one, two) and one.extra["objective"] == two.extra["objective"]


def test_optimize_multidim_passes_n_jobs():
    one, two = (mmopt.optimize(UNION, method="kron", seed=2, options={"restarts": 3}, n_jobs=j) for j in (1, 2))
    assert _same_implicit(one, two) and two.extra["n_jobs"] == 2


def test_min_sensitivity_rotations_identical_and_n_jobs_accepted_everywhere():
    W = wl.prefix(4)
    l2 = mmopt.optimize(W, method="l2_approx")
    one, two = (mmopt.optimize(W, method="min_sensitivity", initial=l2.strategy, seed=0, n_jobs=j) for j in (1, 2))
    assert np.array_equal(one.strategy.matrix, two.strategy.matrix) and one.message == two.message
    # methods without restarts take n_jobs like seed, unused
    assert mmopt.optimize(W, method="identity", n_jobs=2).objective == mmopt.optimize(W, method="identity").objective


def _blas_pools():
    return [(p["filepath"], p["num_threads"]) for p in threadpool_info() if p["user_api"] == "blas"]


def _blas_threads():
    return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}


def test_threading_backend_identical_and_blas_restored(min_error_ref):
    with threadpool_limits(2, user_api="blas"), joblib.parallel_config(backend="threading"):
        before = _blas_pools()  # a BLAS built for one thread stays at 1: compare with this, not with 2
        par = mmopt.optimize(wl.all_range(16), method="min_error", seed=5, options=LOCAL, n_jobs=2,
                             blas_threads=None)
        after = _blas_pools()
    assert np.array_equal(par.strategy.matrix, min_error_ref.strategy.matrix)
    assert par.extra["backend"] == "threading"
    assert 2 in {t for _, t in before}
    assert after == before  # the one-thread cap around the thread workers was lifted afterwards


@pytest.mark.parametrize("config", [{"backend": "threading"}, {"backend": "loky", "inner_max_num_threads": 2}])
def test_workers_run_with_one_blas_thread(config):
    # loky would give each worker 2 BLAS threads here, threads would share the caller's 2: the cap makes it 1
    with threadpool_limits(2, user_api="blas"), joblib.parallel_config(**config):
        seen = list(_parallel.ordered_map(_blas_threads, [()] * 4, n_jobs=2))
    assert seen == [{1}] * 4


def test_ordered_map_keeps_task_order_and_plan():
    assert list(_parallel.ordered_map(pow, [(k, 2) for k in range(7)], n_jobs=2)) == [k * k for k in range(7)]
    assert _parallel.plan(None, 5) == (1, "sequential")
    assert _parallel.plan(-1, 1) == (1, "sequential")  # one task needs no pool
    assert _parallel.plan(2, 5) == (2, "loky")


def test_progress_bar_and_fallback_without_tqdm(capsys, monkeypatch):
    import sys
    G = wl.prefix(8).gram
    minimize_l1(G, restarts=2, seed=0, verbose=True, n_jobs=2)  # stderr is not a terminal here: no bar (its
    assert "minimize_l1 p-identity restarts" not in capsys.readouterr().err  # redraws went into piped logs)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    minimize_l1(G, restarts=2, seed=0, verbose=True, n_jobs=2)
    assert "minimize_l1 p-identity restarts" in capsys.readouterr().err
    monkeypatch.setitem(__import__("sys").modules, "tqdm.auto", None)  # import tqdm.auto now raises ImportError
    assert _parallel._bar(2, "x", True) is None
    assert minimize_l1(G, restarts=2, seed=0, verbose=True).matrix.shape[1] == 8


@pytest.mark.parametrize("bad, error", [(0, ValueError), (1.5, TypeError), (True, TypeError), ("2", TypeError)])
def test_invalid_n_jobs(bad, error):
    msg = r"The 'n_jobs' parameter of {} must be None or a non-zero integer"
    with pytest.raises(error, match=msg.format("optimize")):
        mmopt.optimize(wl.prefix(4), method="min_error", n_jobs=bad)
    with pytest.raises(error, match=msg.format("optimize")):
        mmopt.optimize(UNION, method="marginals", n_jobs=bad)
    with pytest.raises(error, match=msg.format("minimize_l1")):
        minimize_l1(np.eye(3), n_jobs=bad)
    for fn, name in ((solve_kron, "solve_kron"), (solve_union, "solve_union"), (solve_marginals, "solve_marginals")):
        with pytest.raises(error, match=msg.format(name)):
            fn(UNION, n_jobs=bad)


def test_dask_cluster_gives_the_same_result(min_error_ref, kron_ref):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c, \
            distributed.Client(c), joblib.parallel_config(backend="dask"):
        par = mmopt.optimize(wl.all_range(16), method="min_error", seed=5, options=LOCAL)  # n_jobs=None: the cluster
        kr = solve_kron(UNION, restarts=3, seed=1)
    assert (par.extra["n_jobs"], par.extra["backend"]) == (2, "dask")
    assert np.array_equal(par.strategy.matrix, min_error_ref.strategy.matrix)
    assert _same_implicit(kr, kron_ref)


def test_range_queries_rows_identical_in_parallel():
    from experiments import _cli, range_queries
    from experiments._helpers import Config

    cfg = Config(sizes=(4, 16), min_error_max=16, sdp_max=2, minsens_max=0)

    def strip(rows):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]

    seen = []
    one = range_queries.run(cfg, workloads=("prefix",), progress=False)
    two = range_queries.run(cfg, workloads=("prefix",), progress=False, n_jobs=2, on_row=seen.append)
    assert [(r["n"], r["strategy"]) for r in two] == [t[::2] for t in range_queries.tasks(cfg, ("prefix",))]
    assert strip(one) == strip(two) and seen == two
    assert any(r["strategy"] == "min_error" and r["status"] != "error" for r in two)
    with pytest.raises(ValueError, match="'n_jobs' parameter of experiments.range_queries.run"):
        range_queries.run(cfg, n_jobs=0)
    p = _cli.parser("")
    assert p.parse_args(["--jobs", "-1"]).jobs == -1
    for argv in (["--jobs", "0"], ["--jobs", "x"]):
        with pytest.raises(SystemExit):
            p.parse_args(argv)
