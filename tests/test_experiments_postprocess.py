"""experiments.postprocess: run() on synthetic 1-D and 2-D data (tests never need ../shared/), tables, command line."""

import numpy as np
import pytest

import mmopt
from experiments import _postprocess_2d as p2
from experiments import postprocess as pp
from mmopt.solvers import SolverError
from mmopt.structured import answer


def _shape(seed):
    x = np.random.default_rng(seed).pareto(1.5, 4096)   # skewed, many near-empty cells: like DPBench's 1-D data
    return x / x.sum()


CFG = pp.Config(("synthA",), ((64, ("prefix", "all_range"), ("identity", "H2"), pp.RECONSTRUCTIONS),),
                scales=(10**3, 10**7), epsilons=(0.1,), runs=8)


@pytest.fixture(scope="module")
def rows():
    return pp.run({"synthA": _shape(0)}, CFG)


def test_rows_and_the_projection_property(rows):
    assert len(rows) == 2 * 2 * 2 * 3
    for r in rows:
        assert r["rmse_ci_low"] <= r["rmse"] <= r["rmse_ci_high"] and r["scaled_error"] > 0
        if r["reconstruct"] == "least_squares":
            assert r["ratio_to_least_squares"] == 1.0
        if r["reconstruct"] == "projection":   # never worse on any draw, so never worse on average
            assert r["ratio_to_least_squares"] <= 1 + 1e-9
    small = [r for r in rows if r["scale"] == 10**3 and r["reconstruct"] == "projection"]
    assert min(r["ratio_to_least_squares"] for r in small) < 0.9   # small counts: projection helps


def test_markdown_and_figure(rows, tmp_path):
    assert "| synthA | 64 | 1e+03 |" in pp.markdown(rows)
    assert pp.plot(rows, tmp_path).stat().st_size > 1000


def test_missing_data_is_a_clear_exit(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        pp.main(["--data", str(tmp_path), "--out", str(tmp_path)])
    assert e.value.code == 2 and "DPBench files" in capsys.readouterr().err


def test_main_on_a_tiny_synthetic_folder(tmp_path, monkeypatch):
    data = tmp_path / "data" / "1D"
    data.mkdir(parents=True)
    np.save(data / "SYNTH.n4096.npy", np.round(_shape(1) * 5000))
    monkeypatch.setattr(pp, "QUICK", pp.Config(("SYNTH",), ((64, ("prefix",), ("H2",), pp.RECONSTRUCTIONS),),
                                               scales=(10**3,), epsilons=(1.0,), runs=4))
    assert pp.main(["--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "postprocess.csv").read_text().startswith("dataset,n,scale")


# ---- 2-D: implicit product pairs (experiments._postprocess_2d) on a synthetic 16×16 histogram, coarsened to 8×8


def _shape_2d(seed, k=16):
    rng = np.random.default_rng(seed)
    x = rng.pareto(1.5, (k, k)) * (rng.random((k, k)) < 0.3)   # skewed and mostly empty: like DPBench's 2-D data
    return x / x.sum()


CFG_2D = pp.Config((), (), scales=(10**3,), epsilons=(0.1, 1.0), runs=6, datasets_2d=("synth2",),
                   sizes_2d=((8, ("prefix_2d", "ranges_2d"), ("identity", "H2"), pp.RECONSTRUCTIONS),))


@pytest.fixture(scope="module")
def rows_2d():
    audit = {}
    return pp.run({"synth2": _shape_2d(3)}, CFG_2D, seed=0, audit=audit), audit


def test_2d_rows_and_the_projection_property_run_by_run(rows_2d):
    rows, audit = rows_2d
    assert len(rows) == 2 * 2 * 2 * 3
    assert {(r["n"], r["workload"]) for r in rows} == {(64, "prefix_2d"), (64, "ranges_2d")}
    for r in rows:
        assert r["runs"] == 6 and r["rmse_ci_low"] <= r["rmse"] <= r["rmse_ci_high"] and r["scaled_error"] > 0
        if r["reconstruct"] == "least_squares":
            assert r["ratio_to_least_squares"] == 1.0
    # audit: per projection row, the runs whose total squared error exceeds least squares' on the same noise
    assert len(audit) == 2 * 2 * 2 and set(audit.values()) == {0}
    proj = [r["ratio_to_least_squares"] for r in rows if r["reconstruct"] == "projection"]
    assert max(proj) <= 1 + 1e-9 and min(proj) < 0.8   # small counts next to the noise: projection helps


def test_2d_projection_is_never_worse_at_large_scale():
    """At 10⁵–10⁷ counts: once the KKT test was relative to ‖h‖ it stopped near max(x̂, 0) and lost to LS."""
    cfg = pp.Config((), (), scales=(10**5, 10**7), epsilons=(1.0,), runs=20, datasets_2d=("synth2",),
                    sizes_2d=((8, ("prefix_2d",), ("identity",), ("least_squares", "projection")),))
    audit = {}
    pp.run({"synth2": _shape_2d(3)}, cfg, seed=0, audit=audit)
    assert set(audit.values()) == {0}


@pytest.mark.parametrize("rec", ["nnls", "projection"])
def test_2d_estimates_are_non_negative_and_never_worse_on_each_draw(rec):
    W = p2.WORKLOADS["prefix_2d"](8)
    A = p2.strategy("H2", W, 8, seed=0)
    x = 1000 * p2.coarsen(_shape_2d(4), 8)
    ls = mmopt.matrix_mechanism(W, A, x, mmopt.Privacy(0.5), rng=7, size=5)
    out = mmopt.matrix_mechanism(W, A, x, mmopt.Privacy(0.5), rng=7, size=5, reconstruct=rec)
    assert ls.estimate.min() < 0 and out.estimate.min() >= 0   # the constraint binds, and holds
    truth = answer(W, x)
    err = [np.sum((np.asarray(o.answers) - truth) ** 2, axis=1) for o in (ls, out)]
    if rec == "projection":   # same rng, same noise: the G-norm projection onto h >= 0 never moves away from x
        assert np.all(err[1] <= err[0] * (1 + 1e-9))


def test_2d_reproducible_and_seed_dependent():
    cfg = pp.Config((), (), scales=(10**3,), epsilons=(1.0,), runs=4, datasets_2d=("s",),
                    sizes_2d=((4, ("ranges_2d",), ("H2",), pp.RECONSTRUCTIONS),))
    shapes = {"s": _shape_2d(5)}
    a, b, c = pp.run(shapes, cfg, seed=1), pp.run(shapes, cfg, seed=1), pp.run(shapes, cfg, seed=2)
    assert a == b and [r["rmse"] for r in a] != [r["rmse"] for r in c]


def test_coarsen_and_strategies():
    s = _shape_2d(6)
    c = p2.coarsen(s, 4)
    assert c.shape == (4, 4) and c[1, 2] == pytest.approx(s[4:8, 8:12].sum()) and c.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="cannot be coarsened"):
        p2.coarsen(s, 5)
    W = p2.WORKLOADS["ranges_2d"](4)
    assert W.n_queries == 10 * 10 and W.shape == (4, 4)
    A = p2.strategy("opt_kron", W, 4, seed=0)
    assert A.is_product and A.shape == (4, 4)


def test_2d_markdown_and_figure(rows, rows_2d, tmp_path):
    text = pp.markdown(rows + rows_2d[0])
    assert "| synthA | 64 | 1e+03 |" in text and "## 2-D" in text and "| synth2 | prefix_2d | H2 | 0.1 |" in text
    assert "Projection" in text and "NNLS after identity" in text and "Lowest RMSE on ranges_2d" in text
    assert "n/c" not in text and "†" not in text   # every solve converged, and no projection beat least squares
    assert pp.markdown(rows).count("## 2-D") == 0
    assert pp.plot(rows + rows_2d[0], tmp_path).stat().st_size > 1000


def test_main_2d_part_on_a_tiny_synthetic_folder(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data" / "2D"
    data.mkdir(parents=True)
    np.save(data / "SYN_256_256.npy", np.round(p2.coarsen(_shape_2d(7, 256), 256) * 10**5))
    monkeypatch.setattr(pp, "QUICK", pp.Config(("NOT_NEEDED",), (), scales=(10**3,), epsilons=(1.0,), runs=3,
                                               datasets_2d=("SYN",),
                                               sizes_2d=((4, ("prefix_2d",), ("identity",), pp.RECONSTRUCTIONS),)))
    assert pp.main(["--part", "2d", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]) == 0
    csv = (tmp_path / "out" / "postprocess.csv").read_text().splitlines()
    assert len(csv) == 1 + 3 and csv[1].startswith("SYN,16,1000,1.0,prefix_2d,identity,least_squares,3,")
    with pytest.raises(SystemExit) as e:   # the 2-D file is missing for the default --part all
        monkeypatch.setattr(pp, "QUICK", pp.Config((), (), datasets_2d=("NOPE",)))
        pp.main(["--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")])
    assert e.value.code == 2
    assert "2D/NOPE_256_256.npy" in capsys.readouterr().err


def test_a_solve_that_does_not_converge_is_a_row_of_nans(monkeypatch, tmp_path):
    real = mmopt.monte_carlo

    def flaky(*args, reconstruct="least_squares", **kwargs):
        if reconstruct == "projection":
            raise SolverError("projection: ADMM did not converge (simulated)")
        return real(*args, reconstruct=reconstruct, **kwargs)

    monkeypatch.setattr(mmopt, "monte_carlo", flaky)
    cfg = pp.Config((), (), scales=(10**3,), epsilons=(1.0,), runs=3, datasets_2d=("s",),
                    sizes_2d=((4, ("prefix_2d",), ("identity",), pp.RECONSTRUCTIONS),))
    rows = pp.run({"s": _shape_2d(8)}, cfg)
    bad = [r for r in rows if r["reconstruct"] == "projection"]
    assert len(rows) == 3 and len(bad) == 1 and np.isnan(bad[0]["rmse"]) and np.isnan(bad[0]["ratio_to_least_squares"])
    assert "| s | prefix_2d | identity | 1 | n/c / " in pp.markdown(rows) and "did not converge" in pp.markdown(rows)
    assert pp.plot(rows, tmp_path).stat().st_size > 1000


# ---- parallel: n_jobs workers give the sequential rows -------------------------------------------------------

def test_rows_are_the_same_with_two_workers():
    """1-D and 2-D, closed forms (built in the workers) and OPT_⊗ (made once, as a task of its own; min_error
    would be too, but takes 8 s even at n = 16)."""
    cfg = pp.Config(("synthA", "synthB"), ((16, ("prefix",), ("H2", "wavelet"), ("least_squares", "projection")),),
                    scales=(10**3,), epsilons=(1.0,), runs=3, datasets_2d=("synth2",),
                    sizes_2d=((4, ("ranges_2d",), ("identity", "opt_kron"), ("least_squares", "projection")),))
    shapes = {"synthA": _shape(0), "synthB": _shape(1), "synth2": _shape_2d(3)}
    seq_audit, seq_t, par_audit, par_t = {}, {}, {}, {}
    seq = pp.run(shapes, cfg, seed=2, audit=seq_audit, timings=seq_t, n_jobs=1)
    par = pp.run(shapes, cfg, seed=2, audit=par_audit, timings=par_t, n_jobs=2)
    assert len(seq) == (2 * 2 + 2) * 2 and par == seq
    assert par_audit == seq_audit and len(par_audit) == 6 and list(par_t) == list(seq_t)
    assert len({r["strategy"] for r in seq}) == 4


def test_bad_n_jobs_is_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match="'n_jobs' parameter of experiments.postprocess.run"):
        pp.run({}, CFG_2D, n_jobs=0)
    with pytest.raises(SystemExit) as e:
        pp.main(["--out", str(tmp_path), "--jobs", "0"])
    assert e.value.code == 2 and "--jobs" in capsys.readouterr().err
