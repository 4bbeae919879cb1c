"""experiments.postprocess: run() on synthetic data (tests never need ../shared/), tables, command line."""

import numpy as np
import pytest

from experiments import postprocess as pp


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
