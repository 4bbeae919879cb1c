"""experiments.dpbench: the error measure against brute force, run() on synthetic data (tests never need
../shared/), the verdict, the figure, the command line."""

import dataclasses
import itertools
import json
import pickle

import numpy as np
import pytest

from experiments import _dpbench_algorithms as alg
from experiments import _dpbench_errors as er
from experiments import dpbench as db


def _shape(seed, shape):
    x = np.random.default_rng(seed).pareto(1.5, shape)  # skewed, many near-empty cells: like DPBench's data
    return x / x.sum()


# ---- the error measure --------------------------------------------------------------------------------------

def _all_ranges(n):
    return np.array([(a, b) for a in range(n) for b in range(a + 1, n + 1)])


def test_all_range_mean_abs_error_matches_brute_force():
    gen = np.random.default_rng(1)
    n = 23
    x = gen.integers(0, 9, n).astype(float)
    est = x + gen.laplace(0, 3, (4, n))
    est[2] = x  # a perfect estimate: every range exact
    est[3, :5] = x[:5] + 1.0  # ties among the prefix errors
    W = er.range_matrix(_all_ranges(n), n)
    assert W.shape == (n * (n + 1) // 2, n)
    brute = np.mean(np.abs((est - x) @ W.T), axis=1)
    np.testing.assert_allclose(er.mean_abs_all_ranges(est, x), brute, rtol=1e-12, atol=1e-12)
    assert er.mean_abs_all_ranges(est, x)[2] == 0.0


def test_pairwise_and_prefix_against_brute_force():
    v = np.random.default_rng(2).normal(size=(3, 40)).round(1)  # rounding makes ties
    brute = [np.mean([abs(r[j] - r[i]) for i, j in itertools.combinations(range(40), 2)]) for r in v]
    np.testing.assert_allclose(er.mean_abs_pairwise(v), brute, rtol=1e-12)
    x = np.arange(6.0)
    est = np.array([[1, 1, 2, 3, 4, 5.0]])
    np.testing.assert_allclose(er.mean_abs_prefix(est, x), [1.0])  # every prefix is off by the first cell's 1


def test_rectangle_error_matches_the_explicit_query_matrix():
    gen = np.random.default_rng(3)
    shape = (6, 5)
    x = gen.integers(0, 5, shape).astype(float)
    est = x + gen.laplace(0, 1, (2, *shape))
    rows, cols = er.sample_ranges(6, 50, gen), er.sample_ranges(5, 50, gen)
    Q = er.range_matrix_2d(rows, cols, shape)
    brute = np.mean(np.abs((est.reshape(2, -1) - x.ravel()) @ Q.T), axis=1)
    np.testing.assert_allclose(er.mean_abs_ranges_2d(est, x, rows, cols), brute, rtol=1e-12)


def test_sampled_ranges_are_uniform_over_all_ranges():
    n, m = 4, 30_000
    r = er.sample_ranges(n, m, np.random.default_rng(4))
    assert r.shape == (m, 2) and np.all((0 <= r[:, 0]) & (r[:, 0] < r[:, 1]) & (r[:, 1] <= n))
    counts = np.array([np.sum((r[:, 0] == a) & (r[:, 1] == b)) for a, b in _all_ranges(n)])
    expected = m / 10  # 10 ranges on 4 cells, single cells as likely as long ranges
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))


def test_coarsen():
    x = np.arange(16.0).reshape(4, 4)
    assert alg.coarsen(x, 2).tolist() == [[10.0, 18.0], [42.0, 50.0]]
    assert alg.coarsen(np.arange(8.0), 2).tolist() == [6.0, 22.0]
    with pytest.raises(ValueError, match="cannot be coarsened"):
        alg.coarsen(np.arange(10.0), 4)


# ---- run() --------------------------------------------------------------------------------------------------

CFG = db.Config(("synthA",), ("synthB",), n_1d=64, side_2d=16, scales=(10**3, 10**7), epsilons=(0.1, 1.0),
                trials=3, opt_iterations=50, mwem_queries=200, error_queries_2d=500)
SHAPES = {"synthA": _shape(0, 256), "synthB": _shape(1, (32, 32))}


@pytest.fixture(scope="module")
def rows():
    return db.run(SHAPES, CFG, seed=0)


def test_rows_columns_and_values(rows):
    per_cell = {"1D": 2 * (len(alg.ALGORITHMS) - len(alg.SKIP.get("1D", ()))),
                "2D": len(alg.ALGORITHMS) - len(alg.SKIP.get("2D", ()))}
    assert len(rows) == (per_cell["1D"] + per_cell["2D"]) * 2 * 2
    for r in rows:
        assert list(r) == db.COLUMNS
        assert np.isfinite(r["scaled_error"]) and r["scaled_error"] >= 0 and r["scaled_error_std"] >= 0
        assert r["ci_low"] <= r["scaled_error"] <= r["ci_high"]
        assert r["kind"] == alg.KIND[r["algorithm"]] and r["signal"] == r["scale"] * r["epsilon"]
        assert r["n"] == (64 if r["dims"] == "1D" else 256)
    for key in {(r["dataset"], r["scale"], r["epsilon"], r["workload"]) for r in rows}:
        ind = [r for r in rows if r["kind"] == "data-independent"
               and (r["dataset"], r["scale"], r["epsilon"], r["workload"]) == key]
        assert min(r["ratio_to_best_independent"] for r in ind) == 1.0
        assert len(ind) == len([a for a in alg.INDEPENDENT if a not in alg.SKIP[ind[0]["dims"]]])  # 4 1-D, 5 2-D
    # more signal, less scaled error: the matrix mechanism's error is ~1/(scale·ε)
    err = {(r["scale"], r["epsilon"]): r["scaled_error"] for r in rows
           if (r["dataset"], r["workload"], r["algorithm"]) == ("synthA", "prefix", "HB")}
    assert err[(10**7, 1.0)] < 1e-3 * err[(10**3, 1.0)] and err[(10**3, 1.0)] < err[(10**3, 0.1)]


@pytest.mark.slow  # the default run's ~10 minutes (README): run with `pytest -m slow`
def test_seeded_reproducibility(rows):
    again = db.run(SHAPES, CFG, seed=0)
    assert [r["scaled_error"] for r in again] == [r["scaled_error"] for r in rows]
    other = db.run(SHAPES, CFG, seed=1)
    assert all(a["scaled_error"] != b["scaled_error"] for a, b in zip(rows, other, strict=True))
    # each algorithm's noise is keyed by its own name: running fewer algorithms changes none of the numbers
    few = db.run(SHAPES, dataclasses.replace(CFG, algorithms=("HB", "DAWA")), seed=0)
    mine = {tuple(r[k] for k in ("dataset", "scale", "epsilon", "workload", "algorithm")): r["scaled_error"]
            for r in rows}
    assert len(few) == 2 * 3 * 4 and all(
        r["scaled_error"] == mine[tuple(r[k] for k in ("dataset", "scale", "epsilon", "workload", "algorithm"))]
        for r in few)


def test_a_huge_budget_leaves_only_uniforms_bias():
    """At ε = 10⁹ the noise vanishes: the matrix mechanism is exact and Uniform's error is its bias."""
    cfg = db.Config(("synthA",), (), n_1d=64, scales=(10**3,), epsilons=(1e9,), trials=2, opt_iterations=20,
                    algorithms=("identity", "HB", "Uniform"))
    got = {(r["workload"], r["algorithm"]): r["scaled_error"] for r in db.run(SHAPES, cfg)}
    x = 1e3 * alg.coarsen(SHAPES["synthA"], 64)
    bias = np.cumsum(np.full(64, x.mean()) - x)
    assert got[("prefix", "Uniform")] == pytest.approx(np.mean(np.abs(bias)) / 1e3, rel=1e-6)
    pairs = np.concatenate([[0.0], bias])
    brute = np.mean([abs(pairs[j] - pairs[i]) for i, j in itertools.combinations(range(65), 2)])
    assert got[("all_range", "Uniform")] == pytest.approx(brute / 1e3, rel=1e-6)
    assert max(got[(w, a)] for w in ("prefix", "all_range") for a in ("identity", "HB")) < 1e-9


def test_trials_below_two_are_refused():
    with pytest.raises(ValueError, match="trials must be >= 2"):
        db.run(SHAPES, db.Config(("synthA",), (), n_1d=64, trials=1))


# ---- verdict, markdown, figure ------------------------------------------------------------------------------

def _cell_rows(signal_winners, dataset="d"):
    out = []
    for (scale, eps), adaptive_wins in signal_winners.items():
        for a, e in (("mmopt", 1.0), ("HB", 1.5), ("DAWA", 0.5 if adaptive_wins else 2.0), ("Uniform", 3.0)):
            out.append({"dataset": dataset, "scale": scale, "epsilon": eps, "workload": "prefix", "algorithm": a,
                        "scaled_error": e})
    return out


def test_verdict():
    good = {(10**3, 0.01): True, (10**3, 0.1): True, (10**3, 1.0): False, (10**7, 0.01): False}
    holds = db.verdict(_cell_rows(good))
    assert holds["status"] == "holds" and 100 < holds["crossover"] < 1000 and holds["mmopt_best_at_high"] == 2
    assert holds["by_signal"] == {10.0: (1, 1), 100.0: (1, 1), 1000.0: (0, 1), 100000.0: (0, 1)}
    never = db.verdict(_cell_rows({(10**3, 0.01): False, (10**7, 1.0): False}))
    assert never["status"] == "does not hold" and never["adaptive_wins"] == 0
    backwards = db.verdict(_cell_rows({(10**3, 0.01): False, (10**3, 0.1): False, (10**7, 0.1): True,
                                       (10**7, 1.0): True}))
    assert backwards["status"] == "does not hold"
    mixed = _cell_rows({(10, 1.0): True, (10**2, 1.0): True, (10**3, 1.0): True, (10**4, 1.0): False,
                        (10**5, 1.0): False, (10**6, 1.0): True})
    assert db.verdict(mixed)["status"] == "holds with exceptions"
    assert len(db.verdict(mixed)["exceptions"]) == 1
    some = db.verdict(_cell_rows(good) + _cell_rows(dict.fromkeys(good, True), "sparse"))
    assert some["status"] == "holds on some datasets only"
    assert some["datasets"]["d"]["status"] == "holds" and some["datasets"]["sparse"]["largest_adaptive_win"] == 1e5
    assert "does not hold on sparse (data-adaptive wins up to signal 100000)" in db.markdown(
        _cell_rows(good) + _cell_rows(dict.fromkeys(good, True), "sparse"))


def test_markdown_and_figure(rows, tmp_path):
    md = db.markdown(rows)
    assert "**Verdict (this data, every algorithm above): the tutorial's finding" in md
    assert f"at high signal — {db.verdict(rows)['status']}.**" in md
    assert "| synthA | 1e+03 | 0.1 | prefix |" in md and "| synthB | 1e+07 | 1 | ranges_2d |" in md
    png = db.plot(rows, tmp_path)
    assert png.name == "dpbench.png" and png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 1000


# ---- command line -------------------------------------------------------------------------------------------

def test_missing_data_is_a_clear_exit(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        db.main(["--data", str(tmp_path), "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "DPBench files" in err and "dpcomp_core" in err


def test_main_on_a_tiny_synthetic_folder(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "1D").mkdir(parents=True)
    (data / "2D").mkdir()
    np.save(data / "1D" / "SYNTH.n4096.npy", np.round(_shape(1, 4096) * 5000))
    np.save(data / "2D" / "GRID_256_256.npy", np.round(_shape(2, (256, 256)) * 5000))
    monkeypatch.setattr(db, "QUICK", db.Config(("SYNTH",), ("GRID",), n_1d=64, side_2d=16, scales=(10**3,),
                                               epsilons=(1.0,), trials=2, opt_iterations=20, mwem_queries=100,
                                               error_queries_2d=200, sweep_scales=(10**5,), sweep_epsilon=1.0,
                                               figure_dataset="SYNTH", figure_n=128))
    out = tmp_path / "out"
    assert db.main(["--data", str(data), "--out", str(out)]) == 0
    assert (out / "dpbench.csv").read_text().startswith(",".join(db.COLUMNS))
    assert "Verdict" in (out / "dpbench.md").read_text() and (out / "dpbench.png").stat().st_size > 1000
    assert json.loads((out / "dpbench.run_info.json").read_text())["seconds"] >= 0
    md = (out / "dpbench.md").read_text()
    assert "## Measured run times" in md and "| NoiseFirst | data-adaptive |" in md and "| QuadTree |" in md
    assert "![every algorithm](dpbench_algorithms.png)" in md and "![error against scale](dpbench_scale.png)" in md
    again = tmp_path / "again"  # tracked outputs are deterministic, byte for byte, but the measured run times
    assert db.main(["--data", str(data), "--out", str(again)]) == 0
    for f in ("dpbench.csv", "dpbench.png", "dpbench_algorithms.csv", "dpbench_algorithms.png", "dpbench_scale.csv",
              "dpbench_scale.png"):
        assert (again / f).read_bytes() == (out / f).read_bytes(), f
    cut = "## Measured run times"
    assert (again / "dpbench.md").read_text().split(cut)[0] == md.split(cut)[0]


# ---- parallel: n_jobs workers give the sequential rows ------------------------------------------------------

def test_rows_are_the_same_with_two_workers():
    """Every algorithm, 1-D and 2-D; the strategies are made once, in the parent, and recorded there."""
    cfg = db.Config(("synthA",), ("synthB",), n_1d=32, side_2d=8, scales=(10**3,), epsilons=(0.1, 1.0), trials=2,
                    opt_iterations=20, mwem_queries=50, error_queries_2d=100)
    (seq_info, seq_t), (par_info, par_t) = ({}, {}), ({}, {})
    seq = db.run(SHAPES, cfg, seed=3, info=seq_info, timings=seq_t, n_jobs=1)
    par = db.run(SHAPES, cfg, seed=3, info=par_info, timings=par_t, n_jobs=2)
    n1, n2 = (len(alg.ALGORITHMS) - len(alg.SKIP.get(d, ())) for d in ("1D", "2D"))
    assert len(seq) == (2 * n1 + n2) * 2 and par == seq
    assert list(par_t) == list(seq_t)
    strip = lambda info: {k: {a: b for a, b in v.items() if a != "seconds"} for k, v in info.items()}  # noqa: E731
    assert len(par_info) == 2 * 4 + 5 and strip(par_info) == strip(seq_info)  # 2-D: with the QuadTree


def test_a_worker_keeps_one_copy_of_a_context():
    """Copies sent to a worker are one object there (mmopt caches each strategy's factorisation on the object);
    strategies made after an earlier copy still arrive, the parent's strategy records do not."""
    ctx = alg.Context(0, opt_iterations=5, mwem_queries=10, error_queries_2d=10)
    H2 = ctx.strategy("H2", "prefix", 8)
    ctx.queries("all_range", 8)
    first = pickle.loads(pickle.dumps(ctx))
    assert first is not ctx and list(first._cache) == [("A", "H2", "prefix", 8)] and first.info == {}
    ctx.strategy("identity", "prefix", 8)
    again = pickle.loads(pickle.dumps(ctx))
    assert again is first and first.strategy("identity", "prefix", 8).name == "identity"
    assert np.array_equal(first.strategy("H2", "prefix", 8).matrix, H2.matrix) and list(ctx.info) == [
        "prefix/8/H2", "prefix/8/identity"]
    other = pickle.loads(pickle.dumps(alg.Context(0, opt_iterations=5, mwem_queries=10, error_queries_2d=10)))
    assert other is not first


def test_bad_n_jobs_is_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match="'n_jobs' parameter of experiments.dpbench.run"):
        db.run(SHAPES, CFG, n_jobs=0)
    with pytest.raises(SystemExit) as e:
        db.main(["--out", str(tmp_path), "--jobs", "zero"])
    assert e.value.code == 2 and "--jobs" in capsys.readouterr().err


# ---- the QuadTree, StructureFirst's count bound, the multi-attribute panel, the figures ------------------------

def test_quadtree_least_squares_is_the_librarys_exact_solve():
    """The Haar-basis solve against the library's LSMR least squares (tol 1e-10) on one 8 × 8 tree."""
    from experiments import _dpbench_quadtree as qt
    from mmopt.baselines import hierarchies as hi
    from mmopt.structured import mechanism as smech

    A = hi.quadtree(8)
    gen = np.random.default_rng(5)
    x = gen.integers(0, 9, (8, 8)).astype(float)
    y = smech.strategy_apply(A, x) + gen.normal(size=A.n_rows)
    ref = smech.least_squares(A, y)[0]
    np.testing.assert_allclose(qt.least_squares(A, y)[0], ref, atol=1e-8 * np.abs(ref).max())  # LSMR's tol
    np.testing.assert_allclose(qt.mechanism(A, x, 1e12, gen, 2), np.stack([x, x]), atol=1e-6)  # no noise left
    with pytest.raises(ValueError, match="not diagonal in the Haar basis"):
        qt.haar_spectrum(_random_product(8))


def _random_product(n):
    from mmopt import strategy as st

    return st.kron(np.random.default_rng(0).random((n, n)), np.eye(n))


def test_structure_first_spends_a_share_on_its_count_bound():
    x = np.repeat([0.0, 40.0, 3.0], [20, 4, 8])
    r = alg.structure_first(x, 1e9, np.random.default_rng(0))
    assert r.details["count_bound"] == pytest.approx(max(1.0, x.sum() / x.size), rel=1e-6)  # noise-free ñ/n
    assert sum(r.budget.values()) == pytest.approx((1 - alg.SF_TOTAL_SHARE) * 1e9)
    np.testing.assert_allclose(r.estimate.sum(), x.sum(), rtol=1e-6)


def test_marginal_errors_and_queries_match_brute_force():
    from experiments import _dpbench_marginals as ma

    gen = np.random.default_rng(6)
    shape = (3, 2, 4)
    x = gen.integers(0, 5, shape).astype(float)
    est = x + gen.normal(size=(2, *shape))
    sets = ma.attribute_sets(3, 2)
    Q = ma.marginal_matrix(shape, sets)
    assert sets == [(0, 1), (0, 2), (1, 2)] and Q.shape == (6 + 12 + 8, 24)
    assert np.all(Q.sum(axis=0) == 3)  # each cell lies in one cell of each marginal
    brute = np.mean(np.abs((est.reshape(2, -1) - x.ravel()) @ Q.T), axis=1)
    np.testing.assert_allclose(ma.marginal_errors(est, x, sets), brute, rtol=1e-12)
    draw = ma.sample(x / x.sum(), 1000, gen)
    assert draw.shape == shape and draw.sum() == 1000 and np.all(draw == np.round(draw))


def test_the_multi_attribute_panel():
    """At ε = 10⁹ the matrix mechanism is exact and Uniform's error is its bias, as in 1-D (DualQuery, whose
    rounds grow with ε, runs at ε = 1 only)."""
    from experiments import _dpbench_marginals as ma

    shapes = {"M": _shape(7, (3, 4, 2))}
    everything = [a for a in alg.ALGORITHMS if a not in alg.SKIP["MA"] and a not in ma.missing()]
    cfg = db.Config((), (), scales=(10**4,), epsilons=(1e9,), trials=2, datasets_ma=("M",), mwem_queries=50,
                    algorithms=tuple(a for a in everything if a != "DualQuery"))
    rt = {}
    rows = db.run(shapes, cfg, runtimes=rt)
    got = {r["algorithm"]: r for r in rows}
    assert list(got) == list(cfg.algorithms) and {"PrivBayes", "MWEM", "mmopt"} <= set(got)
    assert all(r["dims"] == "MA" and r["workload"] == "marginals" and r["n"] == 24 for r in rows)
    assert got["identity"]["scaled_error"] < 1e-9 and got["mmopt"]["scaled_error"] < 1e-9
    x = ma.sample(shapes["M"], 10**4, np.random.default_rng([0, 13, 0, 0]))  # the draw run() made
    bias = ma.marginal_errors(np.full(x.shape, x.mean())[None], x, ma.attribute_sets(3, 2))[0] / 1e4
    assert got["Uniform"]["scaled_error"] == pytest.approx(bias, rel=1e-6)
    assert set(rt) == {("MA", a) for a in cfg.algorithms} and all(k == 2 for _, k in rt.values())
    rest = db.run(shapes, dataclasses.replace(cfg, epsilons=(1.0,), algorithms=("identity", "DualQuery")))
    assert [r["algorithm"] for r in rest] == [a for a in ("identity", "DualQuery") if a in everything]
    assert all(np.isfinite(r["scaled_error"]) and r["scaled_error"] > 0 for r in rest)


def test_the_every_algorithm_figure_and_the_scale_figure(tmp_path):
    from experiments import _dpbench_figures as fg

    cfg = db.Config(("synthA",), ("synthB",), n_1d=32, side_2d=8, scales=(10**3,), epsilons=(1.0,), trials=2,
                    opt_iterations=20, mwem_queries=50, error_queries_2d=100, sweep_scales=(10**5,),
                    sweep_epsilon=1.0, figure_dataset="synthA", figure_n=64)
    assert db.grid(cfg) == [(10**3, 1.0), (10**5, 1.0)]
    figure, rt, info = [], {}, {}
    rows = db.run(SHAPES, cfg, figure=figure, runtimes=rt, info=info)
    algs = fg.algorithms(cfg)
    assert "mmopt" not in algs and "NoiseFirst" in algs  # more cells than the main grid: no optimised strategy
    assert len(figure) == 2 * len(algs) and {r["n"] for r in figure} == {64}
    assert "mmopt" in fg.algorithms(dataclasses.replace(cfg, figure_n=32))
    srows = fg.scale_rows(rows, 1.0)
    hb = {r["scale"]: r for r in srows if (r["workload"], r["algorithm"]) == ("prefix", "HB")}
    assert set(hb) == {10**3, 10**5} and hb[10**3]["datasets"] == 1 and hb[10**5]["scaled_error"] < hb[10**3][
        "scaled_error"]
    for png in (fg.plot_algorithms(figure, tmp_path), fg.plot_scale(srows, tmp_path)):
        assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 1000
    table = "\n".join(fg.runtime_lines(rt, figure, info))
    assert "| QuadTree | data-independent | — |" in table and "| StructureFirst | data-adaptive |" in table
    assert table.count("\n") + 1 == 2 + len({a for _, a in rt} | {r["algorithm"] for r in figure})
