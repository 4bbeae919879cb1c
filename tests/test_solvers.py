"""Tests for mmopt.solvers: discovery, choice, error messages and the status mapping of solve()."""

import cvxpy as cp
import numpy as np
import pytest

from mmopt import solvers
from mmopt.solvers import SolverError, available, choose, mosek_available, solve


def tiny_sdp():
    x = cp.Variable((2, 2), PSD=True)
    return cp.Problem(cp.Minimize(cp.trace(x)), [x[0, 1] == 1]), x


def test_available_is_ordered_subset():
    usable = available()
    assert set(usable) <= set(solvers.SDP_SOLVERS)
    assert usable == [s for s in solvers.SDP_SOLVERS if s in usable]  # preference order kept
    assert "CLARABEL" in usable and "SCS" in usable  # installed in the dev environment
    assert ("MOSEK" in usable) == mosek_available()


def test_mosek_probe_is_cached():
    first = mosek_available()
    assert mosek_available() is first
    assert solvers._mosek_problem.cache_info().hits >= 1


def test_choose_default_and_size_switch():
    expected = "MOSEK" if mosek_available() else "CLARABEL"
    assert choose(None) == expected
    assert choose(None, size_hint=solvers.CLARABEL_MAX_N) == expected
    if not mosek_available():
        assert choose(None, size_hint=solvers.CLARABEL_MAX_N + 1) == "SCS"


@pytest.mark.parametrize("name", ["clarabel", "CLARABEL", " Scs ", "scs"])
def test_choose_is_case_insensitive(name):
    assert choose(name) == name.strip().upper()


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("gurobi-sdp", r"solver='gurobi-sdp' is not usable here: mmopt does not know .*Usable SDP"),
        ("ECOS", r"not usable here.*Usable SDP solvers"),
        ("", r"not usable here"),
    ],
)
def test_choose_rejects_unknown(name, match):
    with pytest.raises(ValueError, match=match):
        choose(name)


def test_choose_rejects_non_string():
    with pytest.raises(ValueError, match="must be a str or None"):
        choose(3)


@pytest.mark.skipif(mosek_available(), reason="MOSEK is usable here")
def test_choose_mosek_unusable_message():
    with pytest.raises(ValueError) as info:
        choose("mosek")
    msg = str(info.value)
    assert "solver='mosek' is not usable here" in msg
    assert "Usable SDP solvers: ['CLARABEL', 'SCS'" in msg
    assert "Pass solver='CLARABEL'" in msg and "pip install mosek" in msg


@pytest.mark.skipif(not mosek_available(), reason="needs a licensed MOSEK")
@pytest.mark.mosek
def test_mosek_solves_tiny_sdp():
    problem, _ = tiny_sdp()
    out = solve(problem, "MOSEK")
    assert out.status == "optimal" and out.solver == "MOSEK"
    assert problem.value == pytest.approx(2.0, rel=1e-6)


@pytest.mark.parametrize("name", ["CLARABEL", "SCS"])
def test_solve_optimal(name):
    problem, x = tiny_sdp()
    out = solve(problem, name, tol=1e-8)
    assert out.status == "optimal" and out.has_solution and out.solver == name
    assert "optimality" in out.message and out.seconds >= 0
    assert problem.value == pytest.approx(2.0, rel=1e-5)  # min tr X with X₁₂ = 1 is X = J


def test_solve_infeasible_and_unbounded():
    x = cp.Variable((2, 2), PSD=True)
    out = solve(cp.Problem(cp.Minimize(cp.trace(x)), [x[0, 0] == -1]), "CLARABEL")
    assert out.status == "infeasible" and not out.has_solution
    assert "Check the input" in out.message
    y = cp.Variable((2, 2), symmetric=True)
    out = solve(cp.Problem(cp.Minimize(y[0, 1]), [y >> 0, cp.diag(y) >= 1]), "CLARABEL")
    assert out.status == "unbounded"


def test_solve_iteration_limit_is_reported():
    problem, _ = tiny_sdp()
    out = solve(problem, "CLARABEL", max_iters=1)
    assert out.status == "user_limit" and not out.has_solution
    assert "Raise the limit" in out.message


def test_an_scs_solve_stopped_by_its_iteration_cap_is_user_limit():
    # SCS calls it "optimal_inaccurate"; a solve that spent the caller's max_iters is "user_limit" (Clarabel's)
    import mmopt
    from mmopt.search.sdp_l2 import solve_l2_sdp
    s = solve_l2_sdp(mmopt.workload.prefix(8).gram, solver="SCS", max_iterations=5)
    assert s.status == "user_limit" and s.iterations == 5
    r = mmopt.optimize(mmopt.workload.all_range(16), method="l2_approx", solver="SCS", max_iterations=5, seed=0)
    assert r.status == "user_limit" and not r.success


def test_solve_maps_crash_to_solver_error(monkeypatch):
    problem, _ = tiny_sdp()

    def crash(*args, **kwargs):
        raise cp.error.SolverError("simulated crash")

    monkeypatch.setattr(problem, "solve", crash)
    out = solve(problem, "CLARABEL")
    assert out.status == "solver_error" and not out.has_solution
    assert "simulated crash" in out.message and "SCS" in out.message  # names an alternative


def test_solver_error_is_runtime_error():
    assert issubclass(SolverError, RuntimeError)
    with pytest.raises(RuntimeError):
        raise SolverError("x")


def test_scs_tolerance_is_floored():
    opts = solvers._options("SCS", 1e-10, None)
    assert opts["eps_abs"] == 1e-6 and np.isfinite(opts["max_iters"])
    assert solvers._options("CLARABEL", 1e-9, 5) == {
        "tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9, "max_iter": 5,
    }  # fmt: skip


def test_import_mmopt_does_not_import_cvxpy():
    """cvxpy (~0.7-1 s to import) is loaded only where an SDP is built or solved, not by `import mmopt`."""
    import subprocess
    import sys

    code = ("import sys, mmopt, mmopt.strategy, mmopt.workload, mmopt.structured, mmopt.solvers; "
            "assert 'cvxpy' not in sys.modules, sorted(m for m in sys.modules if m.startswith('cvxpy'))[:5]; "
            "assert mmopt.solvers.available(); assert 'cvxpy' in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
