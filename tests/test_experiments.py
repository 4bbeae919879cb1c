"""experiments/: the §6 table rows, the paper-vs-reproduction checks, main() writing every file, and a command
line that cannot mix runs (argument checks, --resume, the folder lock) with reproducible outputs."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repo root, for `pytest` run as a script
from experiments import _cli, _common, _helpers, _run, geometry, range_queries, theorem_checks  # noqa: E402

TINY = range_queries.Config(sizes=(4, 8), min_error_max=4, sdp_max=4, minsens_max=0)
TRACKED = [
    "range_queries.csv",
    "range_queries.params.json",
    "theorem_checks.csv",
    "thm630_constants.csv",
    "profiles_n16.csv",
    "range_error_n64.csv",
    "ellipses.csv",
    "convergence.csv",
    "total_vs_n.png",
    "ratio_to_svd.png",
    "thm630_constants.png",
    "profiles_n16.png",
    "range_error_n64.png",
    "ellipses.png",
    "convergence.png",
    "README.md",
]
# The quickest real run: closed forms and l2_approx at n = 4, the table only (about a second after imports).
QUICK_TABLE = ["--sizes", "4", "--min-error-max", "0", "--min-sensitivity-max", "0", "--table-only", "--quiet"]


def _ranges(n):
    return np.array([[1.0 if a <= i <= b else 0.0 for i in range(n)] for a in range(n) for b in range(a, n)])


def _total(W, A, eps=1.0):
    """(2/ε²) Δ² ‖W A⁺‖_F², straight from Prop. 4.4 with numpy's pseudo-inverse."""
    delta = np.max(np.abs(A).sum(axis=0))
    return 2 / eps**2 * delta**2 * np.sum((W @ np.linalg.pinv(A)) ** 2)


def _cli_run(*args, timeout=120):
    """The real command line, as a user runs it."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "experiments.range_queries", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.fixture(scope="module")
def rows():
    return range_queries.run(TINY, workloads=("all_range", "prefix"), progress=False)


def test_rows_have_the_columns_and_every_task(rows):
    assert len(rows) == len(range_queries.tasks(TINY, ("all_range", "prefix")))
    for r in rows:
        assert set(range_queries.COLUMNS) <= set(r), set(range_queries.COLUMNS) - set(r)
        if r["status"] in ("optimal", "closed_form", "user_limit"):
            assert r["svd_ratio"] >= 1 - 1e-9  # the SVD bound holds for every strategy
    assert {r["strategy"] for r in rows if r["n"] == 4} == {
        "identity",
        "H2",
        "H_best",
        "wavelet",
        "svd_strategy",
        "l2_approx",
        "min_error",
    }


@pytest.mark.parametrize("n", [4, 8])
def test_identity_and_closed_forms_match_independent_values(rows, n):
    get = {(r["workload"], r["strategy"]): r for r in rows if r["n"] == n}
    assert get["all_range", "identity"]["total_squared_error"] == pytest.approx(2 * n * (n + 1) * (n + 2) / 6)
    assert get["all_range", "identity"]["max_variance"] == pytest.approx(2 * n)
    W = _ranges(n)
    H, Y = _helpers.closed_form("H2", n).matrix, _helpers.closed_form("wavelet", n).matrix
    assert get["all_range", "H2"]["total_squared_error"] == pytest.approx(_total(W, H), rel=1e-9)
    assert get["all_range", "wavelet"]["total_squared_error"] == pytest.approx(_total(W, Y), rel=1e-9)
    P = np.tril(np.ones((n, n)))
    assert get["prefix", "wavelet"]["total_squared_error"] == pytest.approx(_total(P, Y), rel=1e-9)
    best = get["all_range", "H_best"]
    assert best["total_squared_error"] <= get["all_range", "H2"]["total_squared_error"] + 1e-9
    Hb = _helpers.closed_form(f"H{best['branching']}", n).matrix
    assert best["total_squared_error"] == pytest.approx(_total(W, Hb), rel=1e-9)


def test_n4_values_of_the_paper(rows):
    get = {(r["workload"], r["strategy"]): r for r in rows if r["n"] == 4}
    # Δ² tr(W M Wᵀ) for all ranges at n = 4: I 20, H 62.57, Y 54 (docs/paper_notes.md §2.3), ε = 1 doubles them
    assert get["all_range", "identity"]["total_squared_error"] == pytest.approx(40)
    assert get["all_range", "H2"]["total_squared_error"] == pytest.approx(2 * 9 * 146 / 21)
    assert get["all_range", "wavelet"]["total_squared_error"] == pytest.approx(108)
    assert get["all_range", "min_error"]["total_squared_error"] == pytest.approx(40, rel=1e-4)  # I is optimal


def test_range_errors_match_brute_force(rng):
    M = rng.standard_normal((7, 7))
    M = M + M.T
    E = _helpers.range_errors(M)
    for a in range(7):
        for b in range(a, 7):
            w = np.zeros(7)
            w[a : b + 1] = 1
            assert E[a, b] == pytest.approx(w @ M @ w)
    assert np.isnan(E[3, 1])


def test_section_6_1_decompositions():
    for n, want in ((4, 2.8960), (8, 3.8779)):
        assert _helpers.h_decomposition(n).sensitivity() == pytest.approx(want, abs=1e-4)
    assert _helpers.y_modified(8).sensitivity() == pytest.approx(2 + math.sqrt(2))


@pytest.mark.slow  # the default run's ~10 minutes (README): run with `pytest -m slow`
def test_main_writes_every_file_and_checks_agree_with_the_notes(tmp_path, capsys):
    # n = 2 and --min-error-max 2 (no convex-iteration run to plot) both crashed after all the work before
    argv = ["--sizes", "2", "4", "--min-error-max", "2", "--min-sensitivity-max", "0", "--out", str(tmp_path),
            "--no-progress"]  # the old spelling of --quiet, still accepted
    assert range_queries.main(argv) == 0
    for f in TRACKED + [_run.RUN_INFO]:
        assert (tmp_path / f).stat().st_size > 0, f
    assert not (tmp_path / _run.LOCK_NAME).exists()  # released at exit
    checks = _common.read_csv(tmp_path / "theorem_checks.csv")
    wrong = [(c["check"], c["verdict"], c["got"]) for c in checks if c["verdict"] != c["expected"]]
    assert not wrong, wrong  # every PASS is a PASS, every DIFF is a DIFF that notes §7 predicts
    assert sum(c["verdict"] == "DIFF" for c in checks) >= 4  # notes §7.1–7.4 are reported, not hidden
    readme = (tmp_path / "README.md").read_text()
    assert "Where we differ from the paper" in readme and "| identity |" in readme
    assert not re.search(r"\bspec\b", readme, re.IGNORECASE)  # cites the paper and docs/paper_notes.md only
    assert "docs/paper_notes.md" in readme
    assert "Paper vs reproduction" in capsys.readouterr().out
    tracked = {f: (tmp_path / f).read_bytes() for f in TRACKED}
    # re-plot from the CSVs without recomputing: the same README and figures, byte for byte
    assert range_queries.main(["--from-csv", "--out", str(tmp_path)]) == 0
    assert {f: (tmp_path / f).read_bytes() for f in TRACKED} == tracked


def test_notes_cite_sections_that_exist():
    notes = (ROOT / "docs" / "paper_notes.md").read_text()
    heads = {line.split()[1].rstrip(".") for line in notes.splitlines() if line.startswith(("## ", "### "))}
    cited = set()
    for path in (ROOT / "experiments").glob("*.py"):
        text = path.read_text()
        assert "spec §" not in text and "the spec" not in text, path
        cited |= set(re.findall(r"notes §(\d+(?:\.\d+)?)", text))
    assert cited and cited <= heads, cited - heads


def test_thm630_constants_at_1024_match_the_reference():
    fit = theorem_checks._fit(1024)
    assert fit["H2"][0] == pytest.approx(0.278, abs=1e-3)
    assert fit["wavelet"][1] == pytest.approx(0.077, abs=1e-3)


def test_tidy_rounds_noise_away_but_keeps_types():
    t = _common.tidy
    assert t(1 / 3) == 0.3333333333 and t(0.1 + 0.2) == 0.3  # noise below the 10th digit is gone
    assert t(107.76171875 + 3e-14) == t(107.76171875 - 3e-14)  # a value on a rounding tie rounds one way
    assert isinstance(t(3.0), float) and t(7) == 7 and t(True) is True and math.isinf(t(math.inf))
    assert t("a\nb  c") == "a b c"  # one CSV record per line


def test_checks_sweep_stops_at_256_but_runs_for_large_sizes_only():
    # --sizes 512 alone used to end in max() of an empty list, after the whole table
    assert _cli.checks_max_n(range_queries.Config(sizes=(512,))) == 256
    assert _cli.checks_max_n(range_queries.Config(sizes=(2, 8))) == 8


def test_convergence_figure_without_convex_iteration_rows(tmp_path):
    _common.write_csv(tmp_path / "convergence.csv", geometry.CONV_COLUMNS, [])
    _common.write_csv(tmp_path / "ellipses.csv", geometry.ELLIPSE_COLUMNS, [
        {"strategy": "I2", "sensitivity": 1.0, "m11": 1.0, "m12": 0.0, "m22": 1.0}])
    made = geometry.plot(tmp_path)
    assert all(p.stat().st_size > 0 for p in made)


# ---- the command line: every bad argument is refused before any work --------------------------------------

BAD = {
    "size not a power of two": ["--sizes", "3"],
    "size zero": ["--sizes", "4", "0"],
    "negative size": ["--sizes", "-4"],
    "size too large": ["--sizes", "8192"],
    "size not an integer": ["--sizes", "4.5"],
    "epsilon zero": ["--epsilon", "0"],
    "epsilon nan": ["--epsilon", "nan"],
    "epsilon inf": ["--epsilon", "inf"],
    "epsilon negative": ["--epsilon", "-1"],
    "epsilon tiny": ["--epsilon", "1e-300"],
    "epsilon huge": ["--epsilon", "1e300"],
    "min_error limit negative": ["--min-error-max", "-1"],
    "min_sensitivity beyond 16": ["--min-sensitivity-max", "32"],
    "from-csv with computing options": ["--from-csv", "--epsilon", "2"],
}


@pytest.mark.parametrize("argv", BAD.values(), ids=BAD.keys())
def test_bad_argument_exits_2_before_any_work(tmp_path, capsys, argv):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        range_queries.main([*argv, "--out", str(out), "--no-progress"])
    assert e.value.code == 2
    assert "error: " in capsys.readouterr().err
    assert _files(out) == []  # nothing written, not even the folder's lock


def test_bad_output_folders_exit_2(tmp_path, capsys):
    afile, empty = tmp_path / "a_file", tmp_path / "empty"
    afile.write_text("x")
    empty.mkdir()
    cases = [([*QUICK_TABLE, "--out", str(afile)], "is a file"),
             ([*QUICK_TABLE, "--out", str(afile / "sub")], "not a writable folder"),
             (["--from-csv", "--out", str(empty)], "has no range_queries.csv"),
             (["--from-csv", "--out", str(tmp_path / "missing")], "is not a folder")]
    for argv, want in cases:
        with pytest.raises(SystemExit) as e:
            range_queries.main(argv)
        assert e.value.code == 2 and want in capsys.readouterr().err, argv
    assert _files(empty) == [] and not (tmp_path / "missing").exists()


@pytest.mark.parametrize("argv", [["--sizes", "3"], ["--epsilon", "nan"], ["--out", "{file}"], ["--from-csv"]],
                         ids=["size", "epsilon", "out-is-a-file", "from-csv-on-empty-folder"])
def test_the_real_cli_refuses_without_a_traceback(tmp_path, argv):
    afile = tmp_path / "a_file"
    afile.write_text("x")
    out = tmp_path / "out"
    out.mkdir()
    argv = [a.replace("{file}", str(afile)) for a in argv]
    p = _cli_run(*argv, *([] if "--out" in argv else ["--out", out]))
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "error: " in p.stderr
    assert _files(out) == []


# ---- runs on one folder cannot mix -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def table_run(tmp_path_factory):
    """One quick table run; the tests copy its folder rather than recompute."""
    out = tmp_path_factory.mktemp("table")
    assert range_queries.main([*QUICK_TABLE, "--out", str(out)]) == 0
    return out


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_two_runs_write_identical_tracked_files(table_run, tmp_path):
    again = tmp_path / "again"
    assert range_queries.main([*QUICK_TABLE, "--out", str(again)]) == 0
    for f in ("range_queries.csv", "range_queries.params.json"):
        assert (again / f).read_text() == (table_run / f).read_text(), f
    assert "seconds" not in (again / "range_queries.csv").read_text().splitlines()[0]  # timings: run_info.json
    assert "row_seconds" in (again / _run.RUN_INFO).read_text()


def test_duplicate_sizes_are_collapsed(table_run, tmp_path):
    out = tmp_path / "dup"
    assert range_queries.main([*QUICK_TABLE, "--sizes", "4", "4", "--out", str(out)]) == 0
    assert (out / "range_queries.csv").read_text() == (table_run / "range_queries.csv").read_text()


def test_resume_with_another_epsilon_refuses(table_run, tmp_path, capsys):
    out = _copy(table_run, tmp_path / "r")
    before = (out / "range_queries.csv").read_text()
    with pytest.raises(SystemExit) as e:
        range_queries.main([*QUICK_TABLE, "--resume", "--epsilon", "2", "--out", str(out)])
    assert e.value.code == 2
    assert "epsilon=1.0 there, 2.0 now" in capsys.readouterr().err
    assert (out / "range_queries.csv").read_text() == before and not (out / _run.LOCK_NAME).exists()
    # without --resume the new ε recomputes every row
    assert range_queries.main([*QUICK_TABLE, "--epsilon", "2", "--out", str(out)]) == 0
    assert {r["epsilon"] for r in _common.read_csv(out / "range_queries.csv")} == {2.0}


def test_resume_without_parameters_refuses(table_run, tmp_path, capsys):
    out = _copy(table_run, tmp_path / "r")
    (out / _cli.PARAMS).unlink()
    with pytest.raises(SystemExit) as e:
        range_queries.main([*QUICK_TABLE, "--resume", "--out", str(out)])
    assert e.value.code == 2 and "parameters of the rows" in capsys.readouterr().err


def test_resume_recomputes_only_min_error_rows_whose_engine_changes(tmp_path, capsys):
    quick = _cli.params_of(range_queries.Config(sizes=(8, 16)), full=False)  # SDP engine up to n = 8
    full = _cli.params_of(range_queries.Config(sizes=(8, 16), sdp_max=16), full=False)
    _run.write_json(tmp_path / _cli.PARAMS, quick)
    rows = [{"n": n, "workload": "prefix", "strategy": s, "epsilon": 1.0} for n in (8, 16) for s in ("H2", "min_error")]
    _common.write_csv(tmp_path / "range_queries.csv", range_queries.COLUMNS, rows)
    todo = [(n, "prefix", s) for n in (8, 16) for s in ("H2", "min_error")]
    kept = _cli.resume_rows(_cli.parser(""), tmp_path, full, todo, range_queries.COLUMNS, range_queries.KEY)
    assert [(r["n"], r["strategy"]) for r in kept] == [(8, "H2"), (8, "min_error"), (16, "H2")]
    assert "1 min_error row(s) recomputed with the other engine" in capsys.readouterr().out


def test_resume_drops_a_half_written_last_row(table_run, tmp_path, capsys):
    out = _copy(table_run, tmp_path / "r")
    full = (out / "range_queries.csv").read_text()
    (out / "range_queries.csv").write_text(full[:-25])  # killed while writing the last row
    assert range_queries.main([*QUICK_TABLE, "--resume", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    n_rows = len(full.splitlines()) - 1
    assert f"{n_rows - 1} rows kept, 1 incomplete row(s) dropped" in said and "1 to compute" in said
    assert (out / "range_queries.csv").read_text() == full  # recomputed, same bytes, same order


def test_read_complete_rows_drops_only_broken_rows(tmp_path):
    cols = ["a", "b"]
    (tmp_path / "t.csv").write_text("a,b\n1,x\n2\n3,y\n4,")
    rows, dropped = _common.read_complete_rows(tmp_path / "t.csv", cols)
    assert [r["a"] for r in rows] == [1, 3] and dropped == 2  # a short row, and a last row without newline
    (tmp_path / "t.csv").write_text("a,c\n1,x\n")
    with pytest.raises(ValueError, match="expected columns"):
        _common.read_complete_rows(tmp_path / "t.csv", cols)


def test_a_live_lock_makes_a_second_run_exit_2(tmp_path):
    out = tmp_path / "locked"
    out.mkdir()
    (out / _run.LOCK_NAME).write_text(f"{os.getpid()}\n")  # this test process is alive and "holds" it
    p = _cli_run(*QUICK_TABLE, "--out", out)
    assert p.returncode == 2 and "in use by another run" in p.stderr and "Traceback" not in p.stderr
    assert _files(out) == [_run.LOCK_NAME]  # nothing written; the holder's lock untouched
    assert (out / _run.LOCK_NAME).read_text().strip() == str(os.getpid())


def test_a_stale_lock_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid now names no process (reuse within the test is vanishingly unlikely)
    out = tmp_path / "stale"
    out.mkdir()
    (out / _run.LOCK_NAME).write_text(f"{dead.pid}\n")
    assert range_queries.main([*QUICK_TABLE, "--out", str(out)]) == 0
    assert (out / "range_queries.csv").exists() and not (out / _run.LOCK_NAME).exists()


def test_lock_is_exclusive_and_released(tmp_path):
    with _run.hold(tmp_path) as lock:
        assert lock.read_text().strip() == str(os.getpid())
        with pytest.raises(_run.Busy, match="in use by another run"):
            _run.acquire(tmp_path)
    assert not lock.exists()


def test_an_empty_lock_is_live_while_young_and_stale_when_old(tmp_path):
    lock = tmp_path / _run.LOCK_NAME
    lock.write_text("")  # a run between O_EXCL and writing its pid
    with pytest.raises(_run.Busy, match="just starting"):
        _run.acquire(tmp_path)
    os.utime(lock, (0, 0))  # the same empty lock, left by a run killed long ago
    with _run.hold(tmp_path):
        assert lock.read_text().strip() == str(os.getpid())


@pytest.mark.slow
def test_main_twice_gives_byte_identical_tracked_outputs(tmp_path):
    """Every tracked file, PNGs included, is a function of the parameters only (about a minute)."""
    argv = ["--sizes", "4", "8", "--min-error-max", "8", "--min-sensitivity-max", "4", "--no-progress"]
    for name in ("a", "b"):
        p = _cli_run(*argv, "--out", tmp_path / name, timeout=600)
        assert p.returncode == 0, p.stderr
    for f in TRACKED:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
