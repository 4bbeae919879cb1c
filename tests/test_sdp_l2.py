"""Tests for mmopt.search.sdp_l2 (Program 5.2 through CVXPY): reference optima, solver agreement, feasibility,
the dual bound, prebuilt problems, and input validation."""

import cvxpy as cp
import numpy as np
import pytest

from mmopt import workload as wl
from mmopt._base.solution import RawSolution
from mmopt.search.sdp_l2 import build_problem, solve_l2_sdp
from mmopt.solvers import SolverError, mosek_available


def all_range_gram(n):
    return wl.all_range(n).gram


def prefix_gram(n):
    return wl.prefix(n).gram


def objective(G, X):
    return float(np.trace(G @ np.linalg.inv(X)))


REFERENCES = [
    ("all ranges n=8", all_range_gram(8), 80.4643),
    ("prefix n=2", prefix_gram(2), (3 + np.sqrt(5)) / 2),
    ("identity n=5", np.eye(5), 5.0),
]


@pytest.mark.parametrize("solver", ["CLARABEL", "SCS"])
@pytest.mark.parametrize(("label", "G", "expected"), REFERENCES, ids=[r[0] for r in REFERENCES])
def test_reference_values(solver, label, G, expected):
    res = solve_l2_sdp(G, solver=solver)
    assert isinstance(res, RawSolution)
    assert res.matrix is None and res.gram.shape == G.shape
    assert res.status == "optimal" and res.solver == solver
    assert res.extra["objective"] == pytest.approx(expected, abs=1e-4 * max(1.0, expected))
    assert objective(G, res.gram) == pytest.approx(res.extra["objective"], rel=1e-10)
    assert res.extra["seconds"] > 0


@pytest.mark.parametrize("solver", ["CLARABEL", "SCS"])
def test_returned_x_is_feasible(solver):
    res = solve_l2_sdp(all_range_gram(8), solver=solver)
    X = res.gram
    assert np.array_equal(X, X.T)
    assert np.diag(X).max() <= 1.0  # exactly, not up to a tolerance
    assert np.linalg.eigvalsh(X)[0] > 0


def test_scs_agrees_with_clarabel(rng):
    for n in (3, 6):
        W = rng.standard_normal((n + 2, n))
        G = W.T @ W
        a = solve_l2_sdp(G, solver="CLARABEL").extra["objective"]
        b = solve_l2_sdp(G, solver="SCS").extra["objective"]
        assert b == pytest.approx(a, rel=1e-4)


@pytest.mark.parametrize("solver", ["CLARABEL", "SCS"])
def test_dual_bound_is_valid_and_tight(solver):
    G = all_range_gram(8)
    res = solve_l2_sdp(G, solver=solver)
    assert res.dual_bound is not None
    assert res.dual_bound <= 80.4642653  # Clarabel's feasible X at tol 1e-8 reaches 80.46426536
    assert res.dual_bound <= res.extra["objective"]
    assert res.dual_bound == pytest.approx(res.extra["objective"], rel=1e-5)


def test_dual_bound_formula_is_weak_duality():
    # Any μ ≥ 0 gives a lower bound: check against a brute-force feasible X for random μ.
    from mmopt.search.sdp_l2 import _dual_bound

    G = prefix_gram(3)
    opt = solve_l2_sdp(G).extra["objective"]
    for mu in ([1.0, 1.0, 1.0], [5.0, 0.1, 0.0], [0.0, 0.0, 0.0]):
        assert _dual_bound(G, np.array(mu)) <= opt * (1 + 1e-9)


def test_singular_gram_gives_full_rank_x():
    G = np.ones((4, 4))  # the single query "total": rank 1
    res = solve_l2_sdp(G)
    assert np.linalg.eigvalsh(res.gram)[0] > 0 and np.diag(res.gram).max() <= 1.0
    assert res.extra["objective"] == pytest.approx(1.0, rel=1e-5)
    assert res.dual_bound <= res.extra["objective"]


def test_prebuilt_problem_with_extra_constraint():
    G = all_range_gram(4)
    problem, X = build_problem(G)
    assert X.name() == "X" and X.shape == (4, 4)
    free = solve_l2_sdp(G, problem=(problem, X)).extra["objective"]
    problem, X = build_problem(G)
    constrained = cp.Problem(problem.objective, [*problem.constraints, X[0, 3] == 0])
    res = solve_l2_sdp(G, problem=constrained)  # X found by name
    assert abs(res.gram[0, 3]) < 1e-6
    assert res.extra["objective"] >= free - 1e-7
    assert res.dual_bound <= free + 1e-7  # still a valid bound: extra constraints only raise the optimum


def test_prebuilt_problem_must_match():
    problem, X = build_problem(np.eye(3))
    with pytest.raises(ValueError, match=r"'problem' parameter of solve_l2_sdp must be built for this gram"):
        solve_l2_sdp(np.eye(4), problem=(problem, X))
    y = cp.Variable((3, 3), symmetric=True)
    with pytest.raises(ValueError, match="must come from build_problem"):
        solve_l2_sdp(np.eye(3), problem=cp.Problem(cp.Minimize(cp.trace(y)), [y >> 0]))


@pytest.mark.skipif(not mosek_available(), reason="needs a licensed MOSEK")
@pytest.mark.mosek
def test_mosek_reference():
    res = solve_l2_sdp(all_range_gram(8), solver="mosek")
    assert res.solver == "MOSEK"
    assert res.extra["objective"] == pytest.approx(80.4643, abs=1e-4)


def test_solver_failure_raises_solver_error(monkeypatch):
    import mmopt.solvers as solvers

    def crash(problem, solver, **kwargs):
        return solvers.SolveOutcome("solver_error", "CLARABEL failed: simulated. Try SCS.", solver, 0.0, None)

    monkeypatch.setattr(solvers, "solve", crash)
    with pytest.raises(SolverError, match="simulated. Try SCS"):
        solve_l2_sdp(np.eye(2), solver="CLARABEL")


def test_doctest_value_prefix_2():
    assert solve_l2_sdp([[2.0, 1.0], [1.0, 1.0]]).extra["objective"] == pytest.approx(2.618034, abs=1e-6)


BAD_GRAMS = [
    ("non-square", np.ones((2, 3)), "must be a square matrix"),
    ("1-D", np.ones(3), "must be a 2-D array"),
    ("empty", np.zeros((0, 0)), "must be non-empty"),
    ("asymmetric", np.array([[1.0, 2.0], [0.0, 1.0]]), "must be symmetric"),
    ("not PSD", np.array([[1.0, 2.0], [2.0, 1.0]]), "must be positive semidefinite"),
    ("NaN", np.array([[1.0, np.nan], [np.nan, 1.0]]), "must be finite"),
    ("zero", np.zeros((3, 3)), "must not be all zeros"),
]


@pytest.mark.parametrize(("label", "G", "match"), BAD_GRAMS, ids=[b[0] for b in BAD_GRAMS])
def test_invalid_gram(label, G, match):
    with pytest.raises(ValueError, match=rf"'gram' parameter of solve_l2_sdp {match}"):
        solve_l2_sdp(G)
    with pytest.raises(ValueError, match=rf"'gram' parameter of build_problem {match}"):
        build_problem(G)


def test_invalid_solver_and_tol():
    with pytest.raises(ValueError, match=r"solver='nope' is not usable here.*Usable SDP solvers"):
        solve_l2_sdp(np.eye(2), solver="nope")
    with pytest.raises(ValueError, match=r"'tol' parameter of solve_l2_sdp must be a float in the range"):
        solve_l2_sdp(np.eye(2), tol=0.0)


def test_iteration_limit_returns_a_feasible_iterate_as_user_limit():
    """Issue 12: max_iterations reaches the solver; its last iterate is made feasible, the status says so."""
    G = all_range_gram(8)
    res = solve_l2_sdp(G, solver="CLARABEL", max_iterations=2)
    assert res.status == "user_limit" and "iteration or time limit" in res.message
    assert np.diag(res.gram).max() <= 1.0 and np.linalg.eigvalsh(res.gram)[0] > 0
    assert res.dual_bound <= 80.4643 <= res.extra["objective"]  # weak duality still brackets the optimum
    with pytest.raises(ValueError, match="'max_iterations' parameter of solve_l2_sdp"):
        solve_l2_sdp(G, max_iterations=0)


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_solve_l2_sdp_refuses_a_gram_past_the_magnitudes_it_can_square(scale):
    """eigvalsh in the validation stopped with LAPACK's 'Eigenvalues did not converge' at 1e200."""
    with pytest.raises(ValueError, match=r"'gram' parameter of solve_l2_sdp must have its largest entry"):
        solve_l2_sdp(np.eye(3) * scale)
