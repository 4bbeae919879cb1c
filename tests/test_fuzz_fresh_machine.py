"""The fresh-machine fuzz table: inputs that used to kill the interpreter, spend ε twice or answer silently.

Each row states its outcome: ``raises`` (a ValueError/TypeError naming the function and parameter, before any
noise is drawn) or ``returns`` (a result checked against an independent reference). Rows that abort the
interpreter are run in a subprocess so that a regression fails one test instead of killing the whole run.
"""

import subprocess
import sys

import numpy as np
import pytest

import mmopt
from mmopt import Privacy
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.cli import main

LAP, GAU = Privacy(1.0), Privacy(1.0, 1e-6)
X8 = np.arange(8.0)
ALL8 = np.ones(8, bool)
XP = np.ones((6, 5))
ALLP = np.ones((6, 5), bool)
WP, AP = mmopt.structured.kron(wl.prefix(6), wl.identity(5)), st.kron(st.hierarchical(6), st.identity(5))


def raises(exc, match):
    return ("raises", exc, match)


def returns(check):
    return ("returns", check)


def zeros_out(out):
    """Every cell a structural zero: C = {0}, so the estimate and the answers are exactly 0."""
    assert not np.any(out.estimate) and (out.answers is None or not np.any(out.answers))
    assert out.reconstruction.solver == "closed_form" and out.reconstruction.optimality == 0.0
    return True


def mm(*args, **kw):
    return mmopt.matrix_mechanism(*args, rng=0, **kw)


CASES = {
    # glibc "double free" (SIGABRT) from scipy's nnls on an empty problem
    "dense-projection-all-zeros": (lambda: mm(wl.prefix(8), st.hierarchical(8), X8, LAP, reconstruct="projection",
                                              zeros=ALL8), returns(zeros_out)),
    "dense-nnls-all-zeros": (lambda: mm(wl.prefix(8), st.hierarchical(8), X8, GAU, reconstruct="nnls", zeros=ALL8),
                             returns(zeros_out)),
    "dense-all-zeros-total-0": (lambda: mm(wl.all_range(8), st.identity(8), X8, LAP, reconstruct="nnls", total=0.0,
                                           zeros=ALL8), returns(zeros_out)),
    "dense-all-zeros-positive-total": (
        lambda: mm(wl.prefix(8), st.identity(8), X8, LAP, reconstruct="nnls", total=5.0, zeros=ALL8),
        raises(ValueError, "'total' parameter of matrix_mechanism is 5 but 'zeros' marks every cell")),
    "dense-all-zeros-size-3": (lambda: mm(wl.prefix(8), st.identity(8), X8, LAP, reconstruct="projection",
                                          zeros=ALL8, size=3), returns(zeros_out)),
    "implicit-nnls-all-zeros": (lambda: mm(WP, AP, XP, LAP, reconstruct="nnls", zeros=ALLP), returns(zeros_out)),
    "implicit-projection-all-zeros": (lambda: mm(WP, AP, XP, GAU, reconstruct="projection", zeros=ALLP),
                                      returns(zeros_out)),
    "implicit-all-zeros-positive-total": (
        lambda: mm(WP, AP, XP, LAP, reconstruct="projection", total=3.0, zeros=ALLP),
        raises(ValueError, "'total' parameter of matrix_mechanism is 3 but 'zeros' marks every cell")),
}


@pytest.mark.parametrize(("call", "expect"), CASES.values(), ids=CASES.keys())
def test_fuzz(call, expect):
    if expect[0] == "raises":
        with pytest.raises(expect[1], match=expect[2]):
            call()
    else:
        assert expect[1](call())


def test_all_zero_release_does_not_abort_the_interpreter(tmp_path):
    """The release path draws OpenDP noise first: a crash there spent the budget and lost the answers."""
    pytest.importorskip("opendp")
    code = ("import numpy as np, mmopt; from mmopt import workload as wl, strategy as st; "
            "out = mmopt.release(wl.prefix(8), st.hierarchical(8), np.arange(8.0), mmopt.Privacy(1.0), "
            "reconstruct='projection', zeros=np.ones(8, bool)); print(int(np.count_nonzero(out.estimate)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


CLI_CASES = {
    "spec-nested-500-deep": (["evaluate", "stack(" * 500 + "prefix:4" + ")" * 500], "nests deeper than 32 levels"),
    "workload-npy-is-text": (["evaluate", "t.npy"], "is not a numeric .npy array"),
    "strategy-npy-is-text": (["evaluate", "prefix:4", "--strategy", "t.npy"], "is not a numeric .npy array"),
    "workload-npz-is-text": (["evaluate", "t.npz"], "is not a readable .npz archive"),
}


@pytest.mark.parametrize(("argv", "needle"), CLI_CASES.values(), ids=CLI_CASES.keys())
def test_cli_refuses_in_words(argv, needle, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name in ("t.npy", "t.npz"):
        (tmp_path / name).write_text("hello\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and "allow_pickle" not in err and "Please report" not in err


def test_python_dash_m_mmopt_runs_the_command_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mmopt", "evaluate", "prefix:4", "--json"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert '"total_squared_error"' in r.stdout
