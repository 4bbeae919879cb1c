"""experiments.multidim: run() on tiny workloads, the tables it writes, and its command line."""

import math

import pytest

from experiments import multidim
from mmopt import workload as wl

TINY = {"tiny_marginals": lambda: wl.marginals((3, 4, 5), 2),
        "tiny_ranges": lambda: wl.kron(wl.all_range(8), wl.all_range(8))}


@pytest.fixture(scope="module")
def rows():
    return multidim.run(TINY, gaussian=("tiny_ranges",))


def test_rows_cover_every_strategy_and_respect_the_bound(rows):
    got = {(r["workload"], r["noise"], r["strategy"]) for r in rows}
    for name in TINY:
        for s in ("identity", "H2 (product)", "workload", "auto"):
            assert (name, "laplace", s) in got
    assert ("tiny_ranges", "gaussian", "auto") in got
    for r in rows:
        assert r["total_squared_error"] >= r["svd_bound"] * (1 - 1e-9)
        assert r["rmse_ratio_to_identity"] == pytest.approx(math.sqrt(r["ratio_to_identity"]))
    auto = [r for r in rows if r["strategy"] == "auto"]
    assert all(r["ratio_to_identity"] <= 1 + 1e-9 for r in auto)


def test_markdown_and_figure(rows, tmp_path):
    text = multidim.markdown(rows)
    assert "| tiny_marginals | laplace | auto |" in text and "Beside the HDMM tutorial" in text
    assert multidim.plot(rows, tmp_path).stat().st_size > 1000


def test_main_writes_its_outputs(tmp_path, monkeypatch):
    monkeypatch.setattr(multidim, "FULL", TINY)
    assert multidim.main(["--out", str(tmp_path), "--only", "tiny_marginals"]) == 0
    assert (tmp_path / "multidim.csv").read_text().startswith("workload,noise,cells")
    assert (tmp_path / "multidim.md").exists() and (tmp_path / "multidim.png").exists()


def test_main_refuses_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        multidim.main(["--out", str(tmp_path), "--only", "nope"])
    assert e.value.code == 2 and "unknown workloads" in capsys.readouterr().err


def test_rows_are_the_same_with_two_workers(rows):
    timings = {}
    assert multidim.run(TINY, gaussian=("tiny_ranges",), timings=timings, n_jobs=2) == rows
    assert len(timings) == len(rows)


def test_bad_n_jobs_is_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match="'n_jobs' parameter of experiments.multidim.run"):
        multidim.run(TINY, n_jobs=0)
    with pytest.raises(TypeError, match="'n_jobs' parameter of experiments.multidim.run"):
        multidim.run(TINY, n_jobs=1.5)
    with pytest.raises(SystemExit) as e:
        multidim.main(["--out", str(tmp_path), "--jobs", "0"])
    assert e.value.code == 2 and "--jobs" in capsys.readouterr().err
