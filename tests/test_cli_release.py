"""``mmopt release`` spends the budget once (mmopt.cli.release): checks before the draw, delivery after it.

In process (``main([...])``): each case is about what is written, what is refused, and the exit code. The
subprocess runs of the command line are in tests/test_cli.py.
"""

import json
import os

import numpy as np
import pytest

import mmopt
from mmopt.cli import main
from mmopt.cli import release as cli_release

pytest.importorskip("opendp")

X = np.arange(16.0)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.savetxt("x.csv", X, delimiter=",")
    np.save("x.npy", X)
    return tmp_path


def _files(folder) -> set:
    return {p.name for p in folder.iterdir()}


@pytest.mark.parametrize("args, needle", [
    (["--data", "x.csv", "--out", "x.csv"], "is the --data input"),
    (["--data", "x.npy", "--out", "./x.npy"], "is the --data input"),
    (["--data", "x.csv", "--out", "a.csv", "--estimate", "a.csv"], "--out and --estimate files are the same"),
    (["--data", "x.csv", "--out", "A.npy", "--strategy", "A.npy"], "is the --strategy input"),
    (["--data", "x.csv", "--out", "a.txt"], "--out file must end in .npy or .csv"),
    (["--data", "x.csv", "--out", "nowhere/a.csv"], "cannot be written"),
])
def test_outputs_never_name_an_input_and_nothing_is_drawn(folder, capsys, args, needle):
    np.save("A.npy", np.eye(16))
    before = {p: os.path.getmtime(p) for p in ("x.csv", "x.npy", "A.npy")}
    assert main(["release", "prefix:16", "--epsilon", "1", *args]) == 2
    assert needle in capsys.readouterr().err
    assert {p: os.path.getmtime(p) for p in before} == before and _files(folder) == {"x.csv", "x.npy", "A.npy"}
    assert np.array_equal(np.loadtxt("x.csv", delimiter=","), X)


@pytest.mark.parametrize("args", [
    ["--epsilon", "1e-300"],                                     # the report's total overflows float64
    ["--epsilon", "1", "--delta", "1e-6", "--strategy", "S.npy"],  # Δ = 1e-170: its square underflows
])
def test_extreme_budgets_and_scales_release_once_and_exit_0(folder, capsys, args):
    np.save("S.npy", 1e-170 * np.eye(16))
    assert main(["release", "prefix:16", "--data", "x.csv", "--out", "a.csv", "--json", *args]) == 0
    report = json.loads(capsys.readouterr().out)
    assert np.loadtxt("a.csv").shape == (16,) and report["answers_file"] == "a.csv"
    # the expected error at the drawn noise, from logarithms: finite log10 whatever the float total did
    log_total = report["log10_expected_total_squared_error_least_squares"]
    P = mmopt.Privacy(float(args[1]), float(args[3]) if "--delta" in args else 0.0)
    A = mmopt.Strategy(np.load("S.npy")) if "S.npy" in args else mmopt.strategy.identity(16)
    unit = mmopt.evaluate(mmopt.workload.prefix(16), A, None, norm=P.sensitivity_norm).total_squared_error
    # log10(v·tr(GM)), v = 2b² or σ² and tr(GM) = unit/Δ²: b² overflows and Δ² underflows, so logarithms here too
    log_v = 2 * np.log10(report["noise_scale"]) + (np.log10(2.0) if P.noise == "laplace" else 0.0)
    expected = log_v + np.log10(unit) - 2 * np.log10(report["sensitivity"])
    assert log_total == pytest.approx(expected, rel=1e-12)


def test_a_failed_write_after_the_draw_keeps_the_answers_and_says_the_budget_was_spent(folder, capsys,
                                                                                       monkeypatch):
    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savetxt", broken)
    assert main(["release", "prefix:16", "--data", "x.npy", "--epsilon", "1", "--out", "a.csv"]) == 1
    captured = capsys.readouterr()
    assert "privacy budget WAS spent" in captured.err and "do not run this release again" in captured.err
    fallback = captured.err.split("it was saved to '")[1].split("'")[0]
    assert np.load(fallback).shape == (16,)
    os.remove(fallback)
    # no partial file under the final name, no temporary left beside it
    assert _files(folder) == {"x.csv", "x.npy"}
    assert "Released 16 answers" in captured.out


def test_post_processing_that_fails_after_the_draw_falls_back_to_least_squares(folder, capsys, monkeypatch):
    from mmopt.reconstruct import dense
    from mmopt.solvers import SolverError

    real = dense.estimate

    def failing(workload, strategy, y, method, **kw):
        if method != "least_squares":
            raise SolverError("reconstruction: simulated non-convergence")
        return real(workload, strategy, y, method, **kw)

    monkeypatch.setattr(dense, "estimate", failing)
    assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", "--reconstruct", "nnls",
                 "--out", "a.npy", "--json"]) == 0
    captured = capsys.readouterr()
    assert "the budget is spent" in captured.err and "simulated non-convergence" in captured.err
    report = json.loads(captured.out)
    assert report["reconstruct"]["method"] == "least_squares" and np.load("a.npy").shape == (16,)


def test_measurements_are_written_when_no_estimate_survives(folder, capsys, monkeypatch):
    from mmopt import _opendp

    monkeypatch.setattr(_opendp, "post_process", lambda *a, **k: None)
    monkeypatch.setattr("mmopt.mechanism.post_process", lambda *a, **k: None)
    assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", "--strategy", "H2",
                 "--out", "y.npy", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["contents"] == "measurements" and np.load("y.npy").shape == (31,)  # H₂ on 16 cells: 31 rows


def test_expected_release_error_is_log_space():
    W, A, P = mmopt.workload.prefix(8), mmopt.strategy.identity(8), mmopt.Privacy(1.0)
    report = mmopt.evaluate(W, A, P)
    total, log_total = cli_release.expected_release_error(report, P, 2.0)  # twice the calibrated b = 1
    assert total == pytest.approx(4 * report.total_squared_error, rel=1e-13)
    assert log_total == pytest.approx(np.log10(total), rel=1e-13)
