"""``mmopt release`` spends the budget once (mmopt.cli.release): checks before the draw, delivery after it.

In process (``main([...])``): each case is about what is written, what is refused, and the exit code. The
subprocess runs of the command line are in tests/test_cli.py.
"""

import json
import os
import shlex
import signal

import numpy as np
import pytest

import mmopt
from mmopt import answers as ans
from mmopt._base import opendp as _opendp
from mmopt.cli import main
from mmopt.cli import release as cli_release

pytest.importorskip("opendp")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

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
    (["--data", "x.csv", "--out", "a.txt"], "--out file must end in .npy or .csv or .parquet"),
    (["--data", "x.csv", "--out", "nowhere/a.csv"], "cannot be written"),
    (["--data", "x.csv"], "release needs --out FILE"),
    (["--data", "x.npy", "--estimate", "x.npy"], "is the --data input"),
    (["--data", "x.csv", "--estimate", "e.parquet"], "--estimate file must end in .npy or .csv"),
    (["--data", "x.csv", "--out", "a.parquet", "--strategy", "S.npz"], "S.npz"),
])
def test_outputs_never_name_an_input_and_nothing_is_drawn(folder, capsys, args, needle):
    np.save("A.npy", np.eye(16))
    before = {p: os.path.getmtime(p) for p in ("x.csv", "x.npy", "A.npy")}
    assert main(["release", "prefix:16", "--epsilon", "1", *args]) == 2
    assert needle in capsys.readouterr().err
    assert {p: os.path.getmtime(p) for p in before} == before and _files(folder) == {"x.csv", "x.npy", "A.npy"}
    assert np.array_equal(np.loadtxt("x.csv", delimiter=","), X)


def test_data_of_two_columns_is_refused_not_flattened(folder, capsys):
    """An index,count CSV of 8 rows was read as one 16-cell histogram (indices counted as data) and released."""
    np.savetxt("two.csv", np.c_[np.arange(8), np.arange(8) * 10], delimiter=",")
    assert main(["release", "prefix:16", "--data", "two.csv", "--epsilon", "1", "--out", "a.csv"]) == 2
    assert "must hold one count per cell of 'prefix(16)'" in capsys.readouterr().err and not os.path.exists("a.csv")
    np.save("grid.npy", X.reshape(4, 4))  # the product domain's own shape is a histogram
    assert main(["release", "kron(prefix:4,identity:4)", "--data", "grid.npy", "--epsilon", "1", "--out",
                 "b.csv"]) == 0


def test_bad_data_is_refused_in_the_commands_words_before_the_strategy_search(folder, capsys, monkeypatch):
    """A NaN or a short --data file was reported as "The 'x' parameter of release …", after the search for a
    strategy had run (minutes on a large workload)."""
    def no_search(*args, **kwargs):
        raise AssertionError("the strategy search ran before the data was checked")

    monkeypatch.setattr(cli_release, "_strategy", no_search)
    np.savetxt("nan.csv", np.r_[X[:5], np.nan, X[6:]], delimiter=",")
    np.savetxt("short.csv", X[:15], delimiter=",")
    for data, needle in (("nan.csv", "The --data file 'nan.csv' must hold finite counts. Got 1 NaN or infinite "
                                     "(the first at cell 5"),
                         ("short.csv", "The --data file 'short.csv' must hold one count per cell of 'prefix(16)': "
                                       "16 numbers. Got 15.")):
        assert main(["release", "prefix:16", "--data", data, "--epsilon", "1", "--out", "a.csv"]) == 2
        err = capsys.readouterr().err
        assert needle in err and "'x' parameter" not in err and not os.path.exists("a.csv")


def test_a_header_row_is_read_as_one_and_an_empty_file_said_once(folder, capsys):
    """A spreadsheet's one-column export with a header ('count') was refused ("could not convert string 'count'"),
    and an empty file printed numpy's own warning before the error (a newcomer's audit)."""
    with open("head.csv", "w") as fh:
        fh.write("count\n" + "\n".join(f"{v:g}" for v in X) + "\n")
    assert main(["release", "prefix:16", "--data", "head.csv", "--epsilon", "1", "--strategy", "H2",
                 "--out", "a.csv"]) == 0
    assert "the first row ('count') is read as a header" in capsys.readouterr().err
    with open("bad.csv", "w") as fh:  # a name inside the numbers is still refused
        fh.write("\n".join(f"{v:g}" for v in X[:3]) + "\nseven\n" + "\n".join(f"{v:g}" for v in X[4:]) + "\n")
    assert main(["release", "prefix:16", "--data", "bad.csv", "--epsilon", "1", "--out", "b.csv"]) == 2
    assert "could not convert string 'seven'" in capsys.readouterr().err
    open("empty.csv", "w").close()
    assert main(["release", "prefix:16", "--data", "empty.csv", "--epsilon", "1", "--out", "c.csv"]) == 2
    err = capsys.readouterr().err
    assert "loadtxt" not in err and err.count("mmopt: error") == 1


def test_a_spreadsheets_csv_is_read_and_an_empty_cell_is_named(folder, capsys):
    """A byte-order mark (written first by spreadsheets saving "CSV UTF-8") was read as part of the first number,
    and an empty cell was reported as numpy's "could not convert string ''"."""
    with open("bom.csv", "w", encoding="utf-8-sig") as fh:
        fh.write("\n".join(f"{v:g}" for v in X) + "\n")
    assert main(["release", "prefix:16", "--data", "bom.csv", "--epsilon", "1", "--out", "a.csv"]) == 0
    with open("a.csv") as fh:
        assert len(fh.read().splitlines()) == 1 + 16  # the header and one answer per prefix sum
    with open("hole.csv", "w") as fh:
        fh.write(",".join(f"{v:g}" for v in X[:3]) + ",," + ",".join(f"{v:g}" for v in X[5:]) + "\n")
    assert main(["release", "prefix:16", "--data", "hole.csv", "--epsilon", "1", "--out", "b.csv"]) == 2
    assert "An empty cell (,,) is not a count: write 0 there" in capsys.readouterr().err


def test_a_ledger_that_cannot_pay_is_said_before_the_search_with_options_that_fit(folder, capsys, monkeypatch):
    """Under zCDP the Accountant's refusal came at the draw, after the strategy search, and named
    privacy=Privacy(...) and privacy='remaining'; each rerun suggested now fits."""
    acc = mmopt.Accountant.open("z.json", mmopt.Privacy(1.0, 1e-6), "zcdp")
    acc.spend(rho=0.01)
    search = cli_release._strategy
    monkeypatch.setattr(cli_release, "_strategy", lambda *a, **k: pytest.fail("the search ran first"))
    assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "0.9", "--delta", "1e-7", "--ledger",
                 "z.json", "--out", "a.csv"]) == 2
    err = capsys.readouterr().err
    assert "The --ledger file 'z.json' (total ε=1, δ=1e-06, zcdp composition) cannot pay" in err
    gaussian, laplace = (part.split(" --delta ") for part in err.split("Rerun with --epsilon ")[1].split(
        ", or --epsilon "))
    monkeypatch.setattr(cli_release, "_strategy", search)
    for epsilon, delta in (gaussian, laplace):
        z = mmopt.Accountant.load("z.json")
        P = mmopt.Privacy(float(epsilon), float(delta.split()[0]))
        assert z.can_spend(P, release=True) and not z.can_spend(mmopt.Privacy(1.01 * P.epsilon, P.delta),
                                                                release=True)
    assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", gaussian[0], "--delta", "1e-06",
                 "--ledger", "z.json", "--out", "a.csv", "--strategy", "identity"]) == 0


def test_a_new_ledger_in_a_missing_folder_is_refused_before_the_search(folder, capsys, monkeypatch):
    """The folder was first touched when the release opened the ledger, after the strategy search (up to 600 s
    with --budget thorough) and the data read."""
    monkeypatch.setattr(cli_release, "_strategy", lambda *a, **k: pytest.fail("the search ran first"))
    assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", "--out", "nd.csv", "--ledger",
                 "nodir/l.json", "--ledger-total", "1"]) == 2
    err = capsys.readouterr().err
    assert "The --ledger file 'nodir/l.json' cannot be written: its folder" in err and "does not exist" in err
    assert not os.path.exists("nd.csv") and not os.path.exists("nodir")


def test_total_needs_a_constrained_reconstruction_said_in_options(folder, capsys, monkeypatch):
    """--total without --reconstruct was refused, after the strategy search, as "The 'total' and 'zeros'
    parameters of release need reconstruct='nnls' …"."""
    monkeypatch.setattr(cli_release, "_strategy", lambda *a, **k: pytest.fail("the search ran first"))
    assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", "--total", "120", "--out",
                 "a.csv"]) == 2
    err = capsys.readouterr().err
    assert "--total 120 is imposed by a constrained reconstruction: add --reconstruct nnls" in err
    assert "'total'" not in err and not os.path.exists("a.csv")


def test_library_messages_name_the_option_that_was_typed(folder, capsys):
    assert main(["plan", "prefix:4", "--target", "nan"]) == 2
    assert capsys.readouterr().err.startswith("mmopt: error: --target (the 'targets' parameter of plan) must be one "
                                              "positive number or 4")
    assert main(["optimize", "prefix:4", "--max-iterations", "0"]) == 2
    assert "error: --max-iterations (the 'max_iterations' parameter of optimize) must be" in capsys.readouterr().err
    # a Privacy built from --ledger-total is not --epsilon's
    assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", "--ledger", "l.json",
                 "--ledger-total", "-1", "--out", "a.csv", "--strategy", "identity"]) == 2
    err = capsys.readouterr().err
    assert "--ledger-total -1 is not a budget" in err and "--epsilon" not in err
    assert not os.path.exists("l.json") and not os.path.exists("a.csv")
    # a δ = 0 total for a zCDP / PLD ledger: the Accountant's refusal named 'total', which reads as --total (the
    # public Σx, another option)
    for composition in ("zcdp", "pld"):
        assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", "--ledger", "l.json",
                     "--ledger-total", "1", "--composition", composition, "--out", "a.csv",
                     "--strategy", "identity"]) == 2
        err = capsys.readouterr().err
        assert f"--ledger-total 1 has δ = 0, but a {composition} ledger needs δ > 0" in err and "--total " not in err
    assert not os.path.exists("l.json") and not os.path.exists("a.csv")


@pytest.mark.parametrize("args", [
    ["--epsilon", "1e-300", "--strategy", "identity"],           # the report's total overflows float64
    ["--epsilon", "1", "--delta", "1e-6", "--strategy", "S.npy"],  # Δ = 1e-170: its square underflows
])
def test_extreme_budgets_and_scales_release_once_and_exit_0(folder, capsys, args):
    np.save("S.npy", 1e-170 * np.eye(16))
    assert main(["release", "prefix:16", "--data", "x.csv", "--out", "a.csv", "--json", *args]) == 0
    report = json.loads(capsys.readouterr().out)
    table = pd.read_csv("a.csv")
    assert len(table) == 16 and report["answers_file"] == "a.csv" and report["answers_format"] == "table"
    # standard errors at an extreme scale (b = 1e300, or Δ = 1e-170): finite, from the drawn b and the profile
    assert np.all(np.isfinite(table["standard_error"])) and np.all(table["standard_error"] > 0)
    # the expected error at the drawn noise, from logarithms: finite log10 whatever the float total did
    log_total = report["log10_expected_total_squared_error_least_squares"]
    P = mmopt.Privacy(float(args[1]), float(args[3]) if "--delta" in args else 0.0)
    A = mmopt.Strategy(np.load("S.npy")) if "S.npy" in args else mmopt.strategy.identity(16)
    unit = mmopt.evaluate(mmopt.workload.prefix(16), A, None, norm=P.sensitivity_norm).total_squared_error
    # log10(v·tr(GM)), v = 2b² or σ² and tr(GM) = unit/Δ²: b² overflows and Δ² underflows, so logarithms here too
    log_v = 2 * np.log10(report["noise_scale"]) + (np.log10(2.0) if P.noise == "laplace" else 0.0)
    # evaluate's Δ; the release's d_in is above it by the charged rounding of A x (mmopt.dense.exact_answers)
    Delta = A.sensitivity(P.sensitivity_norm)
    assert Delta <= report["sensitivity"] <= Delta * (1 + 2e-6)
    expected = log_v + np.log10(unit) - 2 * np.log10(Delta)
    assert log_total == pytest.approx(expected, rel=1e-12)


def _broken(*args, **kwargs):
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("out, patch", [
    (["--out", "a.csv"], "mmopt.answers.files.stream_batches"),      # the labelled table
    pytest.param(["--out", "a.parquet"], "pyarrow.parquet.ParquetWriter.write_table",  # fails after opening
                 marks=pytest.mark.slow),  # (the default run's ~10 minutes: each case a subprocess)
    pytest.param(["--estimate", "e.csv"], "numpy.savetxt", marks=pytest.mark.slow),   # x̂ alone
])
def test_a_failed_write_after_the_draw_keeps_the_answers_and_says_the_budget_was_spent(folder, capsys,
                                                                                       monkeypatch, out, patch):
    monkeypatch.setattr(patch, _broken)
    assert main(["release", "prefix:16", "--data", "x.npy", "--epsilon", "1", *out]) == 1
    captured = capsys.readouterr()
    assert "privacy budget WAS spent" in captured.err and "do not run this release again" in captured.err
    fallback = captured.err.split("it was saved to '")[1].split("'")[0]
    assert np.load(fallback).shape == (16,)
    os.remove(fallback)
    # no partial file under the final name, no temporary left beside it
    assert _files(folder) == {"x.csv", "x.npy"}
    assert "Released 16 answers" in captured.out or "Released the estimate" in captured.out


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


@pytest.mark.parametrize("out", [["--out", "y.npy"], ["--out", "y.csv"], ["--estimate", "y.npy"]])
def test_measurements_are_written_when_no_estimate_survives(folder, capsys, monkeypatch, out):
    from mmopt._base import opendp as _opendp

    monkeypatch.setattr(_opendp, "post_process", lambda *a, **k: None)
    monkeypatch.setattr("mmopt.mechanism.post_process", lambda *a, **k: None)
    assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", "--strategy", "H2", *out,
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    y = pd.read_csv("y.csv")["measurement"].to_numpy() if out[1] == "y.csv" else np.load("y.npy")
    assert report["contents"] == "measurements" and y.shape == (31,)  # H₂ on 16 cells: 31 rows


def test_expected_release_error_is_log_space():
    W, A, P = mmopt.workload.prefix(8), mmopt.strategy.identity(8), mmopt.Privacy(1.0)
    report = mmopt.evaluate(W, A, P)
    total, log_total = cli_release.expected_release_error(report, P, 2.0)  # twice the calibrated b = 1
    assert total == pytest.approx(4 * report.total_squared_error, rel=1e-13)
    assert log_total == pytest.approx(np.log10(total), rel=1e-13)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_out_table_has_labels_answers_and_the_standard_errors_of_the_noise_drawn(folder, capsys, fmt):
    x = np.random.default_rng(0).integers(0, 9, (70, 60)).astype(float)  # 4,200 cells: implicit
    np.save("x2.npy", x)
    assert main(["release", "kron(all_range:70,identity:60)", "--data", "x2.npy", "--epsilon", "0.5", "--strategy",
                 "kron(H2,identity)", "--out", f"a.{fmt}", "--estimate", "e.npy", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    labels = {"table": str, "a0": str, "a1": str}  # read back as text: "1" is cell 1, not the number 1
    table = pd.read_csv(f"a.{fmt}", dtype=labels) if fmt == "csv" else pd.read_parquet(f"a.{fmt}")
    W = mmopt.workload.kron(mmopt.workload.all_range(70), mmopt.workload.identity(60))
    A = mmopt.strategy.kron(mmopt.strategy.hierarchical(70), mmopt.strategy.identity(60))
    assert list(table.columns) == ["query", "term", "table", "a0", "a1", "answer", "standard_error"]
    assert len(table) == W.n_queries == report["n_answers"] and report["standard_error"] == "least_squares"
    assert table.loc[61, ["a0", "a1"]].tolist() == ["[0, 1]", "1"]
    # the answers are W x̂ of the x̂ written beside them; the standard errors those of the b drawn
    xhat = np.load("e.npy").reshape(70, 60)
    np.testing.assert_allclose(table["answer"], mmopt.structured.answer(W, xhat), rtol=1e-12, atol=1e-9)
    se = ans.answer(np.eye(1, 4200), xhat, A, mmopt.Privacy(0.5), calibration="analytic").standard_error  # b = Δ/ε
    b = report["noise_scale"]
    assert table["standard_error"].iloc[0] == pytest.approx(se[0] * b / (A.sensitivity("l1") / 0.5), rel=1e-9)
    # from the bare x̂ alone, the b a release draws: never below the one drawn, within 10⁻⁵
    bare = ans.answer(np.eye(1, 4200), xhat, A, mmopt.Privacy(0.5)).standard_error[0]
    assert table["standard_error"].iloc[0] <= bare <= table["standard_error"].iloc[0] * (1 + 1e-5)


@pytest.mark.parametrize("method", ["toeplitz", "weighted_sqrt"])
def test_a_saved_toeplitz_strategy_writes_its_table(folder, capsys, method):
    """A Toeplitz-type strategy has no rows to count: the table's provenance check raised IndexError after the
    noise was drawn ("the privacy budget WAS spent … could not be written"; a helper's probe). Its standard errors
    are its dense matrix's, at the noise drawn (evaluate's per-query variances times σ_drawn² / σ_analytic²)."""
    assert main(["optimize", "prefix:16", "--delta", "1e-6", "--method", method, "--save", "S.npz", "-q"]) == 0
    capsys.readouterr()
    assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", "--delta", "1e-6", "--strategy",
                 "S.npz", "--out", "a.csv", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    table = pd.read_csv("a.csv")
    S, P = mmopt.load("S.npz").strategy, mmopt.Privacy(1.0, 1e-6)
    v = mmopt.evaluate(mmopt.workload.prefix(16), S, P, per_query=True).per_query_variance
    scale = report["noise_scale"] ** 2 / P.variance_factor
    np.testing.assert_allclose(table["standard_error"], np.sqrt(v * scale), rtol=1e-9)


def test_ranges_2d_128_releases_its_estimate_alone_and_refuses_what_cannot_be_written(folder, capsys):
    """68,161,536 queries: x̂ alone is released; a bare .npy of the answers, or a table past 10⁷ rows without
    --allow-large-output, is refused before any noise is drawn."""
    np.save("x2.npy", np.random.default_rng(0).integers(0, 9, (128, 128)).astype(float))
    base = ["release", "ranges_2d:128", "--data", "x2.npy", "--epsilon", "1", "--strategy", "kron(H2,H2)"]
    for out, needle in ((["--out", "a.npy"], "to a .npy file"), (["--out", "a.parquet"], "--allow-large-output")):
        assert main([*base, *out]) == 2
        assert needle in capsys.readouterr().err and _files(folder) == {"x.csv", "x.npy", "x2.npy"}
    assert main([*base, "--estimate", "xhat.npy", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["contents"] == "estimate" and report["estimate_file"] == "xhat.npy"
    assert report["answers_file"] is None and report["workload"]["n_queries"] == 68_161_536
    assert np.load("xhat.npy").shape == (16384,) and report["workload"]["domain_shape"] == [128, 128]


def test_the_report_gives_the_domain_shape_a_flat_estimate_is_answered_with(folder, capsys):
    """x̂ is written flat; the report now says the domain's shape, so answer(..., shape=) reads a range spec per
    attribute (a dense strategy on a flat x̂ read (2, 3) as the cells 2 … 3 of one attribute, nothing saying more)."""
    assert main(["release", "kron(prefix:4,prefix:4)", "--data", "x.npy", "--epsilon", "1", "--estimate",
                 "xhat.npy", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    xhat = np.load("xhat.npy")
    assert report["workload"]["domain_shape"] == [4, 4] and xhat.shape == (16,)
    got = ans.answer([(2, 3), ((0, 1), None)], xhat, shape=report["workload"]["domain_shape"])
    np.testing.assert_allclose(got.answers, [xhat[11], xhat[:8].sum()], rtol=1e-12)
    assert main(["release", "prefix:16", "--data", "x.npy", "--epsilon", "1", "--estimate", "x1.npy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["workload"]["domain_shape"] == [16]


def test_a_table_without_pyarrow_is_refused_before_the_noise(folder, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    assert main(["release", "prefix:16", "--data", "x.npy", "--epsilon", "1", "--out", "a.csv"]) == 1
    assert "pip install pyarrow" in capsys.readouterr().err and _files(folder) == {"x.csv", "x.npy"}


def test_alpha_writes_exact_intervals_and_is_checked_before_the_noise(folder, capsys, monkeypatch):
    assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", "--strategy", "H2", "--out", "a.csv",
                 "--alpha", "0.05", "--json"]) == 0
    b = json.loads(capsys.readouterr().out)["noise_scale"]
    table = pd.read_csv("a.csv")
    assert list(table.columns)[-3:] == ["standard_error", "lower", "upper"]
    W, A = mmopt.workload.prefix(16), mmopt.strategy.hierarchical(16)
    a = W.explicit_matrix() @ np.linalg.pinv(A.matrix)
    want = [mmopt.answers.intervals.half_width("laplace", 0.05, weights=row, scale=b) for row in a[:3]]
    np.testing.assert_allclose((table.upper - table.answer)[:3], want, rtol=1e-6)
    capsys.readouterr()

    def never(*args, **kwargs):
        raise AssertionError("noise drawn")

    monkeypatch.setattr(_opendp, "measure", never)
    monkeypatch.setattr(mmopt.mechanism, "measure", never)  # the name mmopt.release draws through
    for extra, needle in [(["--out", "b.npy"], "pass --out FILE.csv or FILE.parquet"),
                          (["--out", "b.csv", "--reconstruct", "nnls"], "reconstructed by 'nnls'"),
                          (["--out", "b.csv", "--alpha", "2"],
                           "not a percentage. Got 2.0 instead: for 98 % intervals pass alpha=0.02"),
                          (["--out", "b.csv", "--alpha", "-1"], "must be a float in the range"),
                          # checked when the widths were written, after the draw (an audit)
                          (["--out", "b.csv", "--alpha", "1e-9"], "≥ 1e-08 for intervals under Laplace noise"),
                          (["--out", "b.csv", "--alpha", "nan"], "in the range (0, 0.5] (0.05 for 95 % intervals). "
                                                                 "Got nan")]:
        args = ["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", "--strategy", "H2", *extra]
        if "--alpha" not in extra:
            args += ["--alpha", "0.05"]
        assert main(args) == 2
        assert needle in capsys.readouterr().err


def test_a_bad_alpha_is_refused_before_the_strategy_search(folder, capsys, monkeypatch):
    """--alpha 1.5 (or --alpha beside an .npy answer file) was refused only after --strategy auto's search, which may
    plan up to --budget's minutes (a newcomer's audit)."""
    def never(*args, **kwargs):
        raise AssertionError("strategy searched")

    monkeypatch.setattr(mmopt, "optimize", never)
    for extra, needle in [(["--out", "b.csv", "--alpha", "1.5"], "not a percentage"),
                          (["--out", "b.npy", "--alpha", "0.05"], "pass --out FILE.csv or FILE.parquet")]:
        assert main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", *extra]) == 2
        err = capsys.readouterr().err
        assert needle in err and "strategy auto" not in err


def test_a_stream_prefix_table_past_4096_cells_has_its_standard_errors(folder, capsys):
    """prefix:5000 with tree:8 writes every prefix labelled with its standard error (they were refused past 4,096
    cells), and so does auto's weighted square root under Gaussian noise, with intervals."""
    n = 5000
    np.save("big.npy", np.ones(n))
    assert main(["release", f"prefix:{n}", "--data", "big.npy", "--epsilon", "1", "--strategy", "tree:8",
                 "--out", "t.csv"]) == 0
    table = pd.read_csv("t.csv")
    A = mmopt.toeplitz.tree(n, 8)
    b = A.sensitivity("l1") / 1.0  # Laplace scale at ε = 1 (OpenDP's calibration is within 10⁻⁶ of it)
    rows = [0, 2500, n - 1]
    Q = (np.arange(n)[None, :] <= np.array(rows)[:, None]).astype(float)
    expected = np.sqrt(2.0) * b * A.query_norms(Q)
    np.testing.assert_allclose(table.standard_error.to_numpy()[rows], expected, rtol=1e-5)
    capsys.readouterr()
    # auto searches the stream twin past 4,096 cells: the dense optimum's O(n³) release took 66 s here
    assert main(["release", f"prefix:{n}", "--data", "big.npy", "--epsilon", "1", "--delta", "1e-6",
                 "--out", "g.parquet", "--alpha", "0.05"]) == 0
    assert "strategy auto:weighted_sqrt" in capsys.readouterr().err
    table = pd.read_parquet("g.parquet")
    assert len(table) == n and np.all(table.lower < table.answer) and np.all(table.standard_error > 0)


def test_plan_save_then_release_meets_the_targets(folder, capsys):
    """plan printed the strategy's name only: a release at the planned ε with release's default strategy missed the
    standard-error target on 27 of 64 queries (up to 5.45 against 5; a helper's probe). plan --save writes the
    planned strategy, and the printed release command carries the ε in full."""
    np.save("x.npy", np.arange(64.0))
    assert main(["plan", "prefix:64", "--target", "5", "--kind", "se", "--delta", "1e-9", "--save", "s.npz",
                 "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["saved"] == "s.npz" and os.path.exists("s.npz")
    eps = record["epsilon"]
    assert f"--strategy s.npz --epsilon {eps!r} --delta 1e-09" in record["release_with"]
    # the printed command runs as printed (it lacked --out, so it stopped with exit 2: an auditor's probe)
    argv = shlex.split(record["release_with"].replace("--data FILE", "--data x.npy"))
    assert argv[0] == "mmopt" and main(argv[1:]) == 0
    assert pd.read_csv("answers.csv")["standard_error"].max() <= 5.0
    assert main(["plan", "prefix:64", "--target", "5", "--kind", "se", "--delta", "1e-9", "--save", "s.npz"]) == 2
    assert "Pass --force" in capsys.readouterr().err  # an existing --save is refused before the search


def test_a_large_delta_typed_on_the_command_line_is_warned_about(folder, capsys):
    """``--delta 0.5`` was taken without a word (the library's warning is for budgets the user wrote, and the CLI is
    mmopt's own code); the release still runs, as Privacy(1, 0.5) does in Python."""
    assert main(["release", "prefix:16", "--data", "x.csv", "--out", "a.csv", "--strategy", "H2",
                 "--epsilon", "0.5", "--delta", "0.5"]) == 0
    err = capsys.readouterr().err
    assert "mmopt: warning: Privacy: delta=0.5 lets the guarantee fail outright" in err and "omit --delta" in err
    assert main(["release", "prefix:16", "--data", "x.csv", "--out", "b.csv", "--strategy", "H2",
                 "--epsilon", "0.5", "--delta", "1e-6"]) == 0
    assert "delta=" not in capsys.readouterr().err


def test_a_saved_strategy_made_for_other_noise_is_warned_about_at_release(folder, capsys):
    """evaluate takes a saved file's δ; release (which spends) must be told: --delta omitted is refused before any
    noise (it drew Laplace noise with a warning beside the answers; a newcomer's audit), --delta 0 said."""
    mmopt.save("g.npz", mmopt.strategy.hierarchical(16), privacy=mmopt.Privacy(1.0, 1e-9))
    assert main(["release", "prefix:16", "--data", "x.csv", "--out", "a.csv", "--strategy", "g.npz",
                 "--epsilon", "1"]) == 2
    err = capsys.readouterr().err
    assert "planned for Gaussian noise at δ = 1e-09, and --delta is not given" in err and "Pass --delta 1e-09" in err
    assert not os.path.exists("a.csv")
    assert main(["release", "prefix:16", "--data", "x.csv", "--out", "a.csv", "--strategy", "g.npz",
                 "--epsilon", "1", "--delta", "0"]) == 0
    err = capsys.readouterr().err
    assert "optimised for gaussian noise (δ = 1e-09); this release draws laplace noise" in err
    assert "pass --delta 1e-09" in err
    assert main(["release", "prefix:16", "--data", "x.csv", "--out", "b.csv", "--strategy", "g.npz",
                 "--epsilon", "1", "--delta", "1e-9"]) == 0
    assert "optimised for" not in capsys.readouterr().err


def test_a_plan_released_at_a_smaller_budget_is_said(folder, capsys):
    """A plan's file released under more noise than planned gave standard errors above its targets with no word (a
    helper's probe: s.e. 2.5 planned at ε = 3.73, 8.52 at ε = 1); at the plan's budget or a larger one, none."""
    spec = "kron(prefix:4,all_range:3)"
    np.save("x12.npy", np.arange(12.0))
    assert main(["plan", spec, "--target", "2.5", "--kind", "se", "--delta", "1e-7", "--save", "pl.npz",
                 "--json"]) == 0
    eps = json.loads(capsys.readouterr().out)["epsilon"]
    for k, (e, d) in enumerate([(1.0, 1e-7), (eps, 1e-7), (eps * 1.5, 1e-7), (eps, 1e-12)]):
        assert main(["release", spec, "--data", "x12.npy", "--strategy", "pl.npz", "--epsilon", repr(e), "--delta",
                     repr(d), "--out", f"a{k}.csv"]) == 0
        err = capsys.readouterr().err
        said = "was planned to meet its targets" in err
        assert said == (k in (0, 3)), (k, err)
        if k == 0:
            se = pd.read_csv("a0.csv")["standard_error"].max()
            factor = float(err.split("standard errors are up to ")[1].split("×")[0])
            assert se > 2.5 and se <= 2.5 * factor * (1 + 1e-3)  # the bound said holds (4 significant digits)
    # released under the other noise (Laplace here): the targets were not said before (s.e. 9.80 against 3)
    assert main(["release", spec, "--data", "x12.npy", "--strategy", "pl.npz", "--epsilon", repr(eps), "--delta",
                 "0", "--out", "lap.csv"]) == 0
    err = capsys.readouterr().err
    assert "accuracy targets were planned for that noise only" in err and "this release draws laplace" in err
    # a plan made for the analytic Gaussian mechanism, released through OpenDP at its own ε: its larger σ missed the
    # targets (variance 5.66 for 5) without a word (a helper's probe)
    assert main(["plan", spec, "--target", "2.5", "--kind", "se", "--delta", "1e-7", "--calibration", "analytic",
                 "--save", "an.npz", "--json"]) == 0
    eps_an = json.loads(capsys.readouterr().out)["epsilon"]
    assert main(["release", spec, "--data", "x12.npy", "--strategy", "an.npz", "--epsilon", repr(eps_an), "--delta",
                 "1e-7", "--out", "an.csv"]) == 0
    err = capsys.readouterr().err
    assert "(analytic calibration)" in err and "plan again without --calibration analytic" in err
    factor = float(err.split("standard errors are up to ")[1].split("×")[0])
    se = pd.read_csv("an.csv")["standard_error"].max()
    assert 2.5 < se <= 2.5 * factor * (1 + 1e-3)  # missed, within the bound said


def test_missing_packages_are_said_together_before_any_work(folder, capsys, monkeypatch):
    """A bare install met pyarrow's error after the strategy search, then OpenDP's, each with a suffix that named
    opendp even when it was installed (a newcomer's audit): both now, before the data is read."""
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("opendp", "pyarrow") else real(name, *a))
    assert main(["release", "prefix:16", "--data", "missing.csv", "--epsilon", "1", "--out", "a.csv"]) == 1
    err = capsys.readouterr().err
    assert "release needs opendp and pyarrow, not installed" in err and ".[release,tables]" in err
    assert "missing.csv" not in err and err.count("pip install") == 2  # its own remedy, no second suffix


def test_a_second_ctrl_c_between_two_outputs_keeps_the_one_written_and_says_so(folder, capsys, monkeypatch):
    """A first Ctrl-C as --out is written is held; a second as --estimate is about to be written stops at once. The
    message said "before the release is written" though --out was there: now it says a file not yet written is
    not written. --out is whole, --estimate absent, no temporary file, the ledger's spend settled."""
    real, sent = cli_release.atomic_save, []

    def save(path, vector, ext):  # a Ctrl-C before each write: the first is held, the second is obeyed
        sent.append(path)
        os.kill(os.getpid(), signal.SIGINT)
        real(path, vector, ext)

    def stop(signum, frame):  # an interactive run's handler (a background shell ignores SIGINT)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, stop)
    try:
        monkeypatch.setattr(cli_release, "atomic_save", save)
        code = main(["release", "prefix:16", "--data", "x.csv", "--epsilon", "1", "--strategy", "H2", "--out",
                     "a.npy", "--estimate", "e.npy", "--ledger", "l.json", "--ledger-total", "2"])
        assert signal.getsignal(signal.SIGINT) is stop  # the command's hold is gone
    finally:
        signal.signal(signal.SIGINT, previous)
    err = capsys.readouterr().err
    assert code == 130 and sent == ["a.npy", "e.npy"]
    assert "a second SIGINT: stopping now; a file not written yet is not written" in err and "WAS spent" in err
    assert "before the release is written" not in err
    assert _files(folder) == {"x.csv", "x.npy", "a.npy", "l.json"} and np.load("a.npy").shape == (16,)
    (entry,) = json.loads((folder / "l.json").read_text())["spends"]
    assert entry["status"] == "spent" and entry["epsilon"] == pytest.approx(1.0)
