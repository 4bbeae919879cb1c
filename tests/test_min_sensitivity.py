"""Tests for mmopt.search.min_sensitivity (Program 5.3 + rotation polish): the spec's n = 4 optima, exact
profile equivalence, never worse than the input, determinism, history, and validation."""

import numpy as np
import pytest

import mmopt
from mmopt import strategy as st
from mmopt._base.solution import RawSolution
from mmopt.search.min_sensitivity import _polish, solve_min_sensitivity
from mmopt.solvers import mosek_available

H4 = np.array(
    [[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], float
)
Y4 = np.array([[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]], float)
Y4_PRIME2 = np.vstack([[1, 1, 0, 0], [0, 0, 1, 1], np.sqrt(2) * np.eye(4)])  # L2's Y'' (6×4), Δ = 1 + √2


def hierarchical(n):
    return st.hierarchical(n).matrix


def wavelet(n):
    return st.wavelet(n).matrix


def delta(A):
    return np.abs(A).sum(axis=0).max()


def check(res, X0):
    A = res.matrix
    assert isinstance(res, RawSolution) and res.gram is None
    assert np.allclose(A.T @ A, X0, rtol=0, atol=1e-10 * np.abs(X0).max())  # exactly profile-equivalent
    assert delta(A) == pytest.approx(res.extra["sensitivity"], rel=1e-12)
    assert res.extra["sensitivity"] <= res.extra["start_sensitivity"] + 1e-12
    assert res.extra["sensitivity"] >= np.sqrt(np.diag(X0).max()) - 1e-12  # column L2 norms are fixed
    assert "heuristic with no optimality guarantee" in res.message


def test_h4_profile_reaches_spec_optimum():
    X0 = H4.T @ H4
    res = solve_min_sensitivity(X0, seed=0)
    check(res, X0)
    assert res.matrix.shape == (4, 4)
    assert res.extra["sensitivity"] == pytest.approx(1 / np.sqrt(2) + np.sqrt(3.5), abs=1e-6)  # < 2.896
    assert res.extra["sdp_sensitivity"] == pytest.approx(2.8960, abs=1e-3)  # the SDP alone: Fig. 4(a)
    hist = res.history
    assert hist and all({"iteration", "objective", "rank_gap", "target"} <= set(h) for h in hist)
    assert res.extra["sdp_sensitivity"] <= min(h["objective"] for h in hist) + 1e-12


def test_y4_profile_reaches_two():
    X0 = Y4.T @ Y4
    res = solve_min_sensitivity(X0, seed=0, max_iterations=20)
    check(res, X0)
    assert res.extra["sensitivity"] == pytest.approx(2.0, abs=1e-6)  # Fig. 4(b) has 2.414


def test_never_worse_than_initial_and_deterministic():
    X0 = Y4.T @ Y4
    a = solve_min_sensitivity(X0, initial=Y4_PRIME2, seed=3, max_iterations=5)
    b = solve_min_sensitivity(X0, initial=Y4_PRIME2, seed=3, max_iterations=5)
    check(a, X0)
    assert a.extra["sensitivity"] <= delta(Y4_PRIME2) + 1e-12
    assert np.array_equal(a.matrix, b.matrix)  # same seed, same answer


def test_non_square_initial_is_returned_when_nothing_square_beats_it(monkeypatch):
    import mmopt.search.min_sensitivity as ms

    # Δ = 2, while every canonical square factor of its profile (and its QR factor R) has Δ ≥ 2.13.
    tall = np.array([[0, 0, 0], [1, 0, 1], [0, 0, 0], [0, 1, 0], [0, 1, 1]], float)
    X0 = tall.T @ tall
    monkeypatch.setattr(ms, "_polish", lambda a, max_steps=0: (a, delta(a), 0))  # cripple the search
    res = ms.solve_min_sensitivity(X0, initial=tall, seed=0, max_iterations=1)
    assert np.array_equal(res.matrix, tall) and res.extra["sensitivity"] == 2.0
    monkeypatch.undo()
    res = ms.solve_min_sensitivity(X0, initial=tall, seed=0, max_iterations=1)
    assert res.extra["sensitivity"] <= 2.0 + 1e-12


def test_polish_keeps_profile_and_descends(rng):
    X0 = H4.T @ H4
    q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    lam, vec = np.linalg.eigh(X0)
    A = q @ (np.sqrt(lam)[:, None] * vec.T)
    B, d, steps = _polish(A)
    assert np.allclose(B.T @ B, X0, atol=1e-10)
    assert d == pytest.approx(delta(B)) and d <= delta(A) and steps >= 1


def test_scs_path_runs():
    X0 = Y4.T @ Y4
    res = solve_min_sensitivity(X0, solver="SCS", seed=0, max_iterations=10)
    assert res.solver == "SCS"
    check(res, X0)
    assert res.extra["sensitivity"] == pytest.approx(2.0, abs=1e-6)


@pytest.mark.skipif(not mosek_available(), reason="needs a licensed MOSEK")
@pytest.mark.mosek
def test_mosek_path():
    X0 = H4.T @ H4
    res = solve_min_sensitivity(X0, solver="MOSEK", seed=0)
    assert res.solver == "MOSEK" and res.extra["sensitivity"] <= 2.5780


N8_CASES = [("H8", hierarchical(8), 3.358), ("Y8", wavelet(8), 2.82843)]


@pytest.mark.slow
@pytest.mark.parametrize(("label", "S", "target"), N8_CASES)
def test_n8_spec_values(label, S, target):
    X0 = S.T @ S
    res = solve_min_sensitivity(X0, seed=0)
    check(res, X0)
    assert res.extra["sensitivity"] <= target


PG = "'profile_gram' parameter .* "
BAD = [
    ("singular", dict(profile_gram=np.diag([1.0, 0.0])), PG + "must be positive definite"),
    ("asymmetric", dict(profile_gram=[[2.0, 1.0], [0.0, 2.0]]), PG + "must be symmetric"),
    ("not PSD", dict(profile_gram=[[1.0, 2.0], [2.0, 1.0]]), PG + "positive semidefinite"),
    ("non-square", dict(profile_gram=np.ones((2, 3))), PG + "must be a square matrix"),
    ("initial wrong profile", dict(initial=2 * np.eye(2)), "'initial' parameter .* must satisfy AᵀA"),
    ("initial shape", dict(initial=np.eye(3)), r"'initial' parameter .* must have shape \(p, 2\)"),
    ("max_iterations", dict(max_iterations=0), "'max_iterations' parameter .* integer >= 1"),
    ("solver", dict(solver="nope"), "solver='nope' is not usable here"),
]


@pytest.mark.parametrize(("label", "kwargs", "match"), BAD, ids=[b[0] for b in BAD])
def test_invalid_inputs(label, kwargs, match):
    kwargs = {"profile_gram": np.eye(2), **kwargs}
    with pytest.raises(ValueError, match=match):
        solve_min_sensitivity(**kwargs)


def test_status_is_user_limit_when_a_phase_runs_out_of_budget(monkeypatch):
    """Issue 12: "optimal" needs the convex iteration's test and every full polish's to pass."""
    import mmopt.search.min_sensitivity as ms

    X0 = H4.T @ H4
    spent_sdp = ms.solve_min_sensitivity(X0, seed=0, max_iterations=1)
    assert spent_sdp.status == "user_limit" and "max_iterations=1" in spent_sdp.message
    full = ms.solve_min_sensitivity(X0, seed=0)
    assert full.status == "optimal" and "local optimum" in full.message
    real = ms._polish
    monkeypatch.setattr(ms, "_POLISH_STEPS", 2)
    monkeypatch.setattr(ms, "_polish", lambda a, max_steps=400: real(a, max_steps=min(max_steps, 2)))
    spent_polish = ms.solve_min_sensitivity(X0, seed=0)
    assert spent_polish.status == "user_limit" and "rotation polishes stopped at their 2-step budget" in (
        spent_polish.message)
    check(spent_polish, X0)


@pytest.mark.parametrize("scale", [1e-60, 1e60])
def test_optimize_takes_an_initial_strategy_at_any_scale(scale):
    # 1e-60·H was refused with "the 'profile_gram' parameter of solve_min_sensitivity ... call mmopt.optimize,
    # which rescales for you" — raised from mmopt.optimize; a strategy's error does not depend on its scale
    H = mmopt.strategy.hierarchical(4).matrix
    kw = dict(method="min_sensitivity", seed=0, privacy=mmopt.Privacy(1.0), max_iterations=5)
    base = mmopt.optimize(mmopt.workload.prefix(4), initial=H, **kw)
    r = mmopt.optimize(mmopt.workload.prefix(4), initial=scale * H, **kw)
    assert r.objective == pytest.approx(base.objective, rel=1e-6)  # the same problem (H·c, c in [0.5, 1))
    X, X0 = r.strategy.matrix.T @ r.strategy.matrix, (scale * H).T @ (scale * H)
    assert np.allclose(X, X0, rtol=1e-8, atol=1e-8 * np.abs(X0).max())  # its profile, at the initial's scale


def test_no_sdp_solver_is_recorded_when_no_sdp_ran():
    """The identity's profile starts at its L2 floor: the convex iteration returns before any P1 solve, and the
    result recorded SCS/CLARABEL as its solver all the same."""
    r = mmopt.optimize(mmopt.workload.prefix(4), method="min_sensitivity", initial=st.identity(4), seed=0)
    assert r.iterations == 0 and r.solver is None and r.success


def test_max_iterations_bounds_the_polishing_search_too(monkeypatch):
    """An auditor's probe: optimize(prefix(32), method='min_sensitivity', max_iterations=1) ran the full polishing
    search (64 rotations × 8 LP steps, 3 polishes of up to 400; an LP step ~3 s at n = 32), minutes after one
    P1 solve. Now each polish takes ≤ 8·max_iterations LP steps, each race ≤ max_iterations, and ≤ 8·max_iterations
    rotations race: here ≤ 8 × 1 + 3 × 8 LP solves."""
    from mmopt.search import min_sensitivity as ms
    calls = []
    real = ms.linprog
    monkeypatch.setattr(ms, "linprog", lambda *a, **k: calls.append(1) or real(*a, **k))
    H = st.hierarchical(8).matrix
    raw = solve_min_sensitivity(H.T @ H, initial=H, max_iterations=1, seed=0)
    assert 0 < len(calls) <= 8 * 1 + 3 * 8
    assert raw.status in ("user_limit", "optimal", "local_optimum")
    assert np.abs(raw.matrix.T @ raw.matrix - H.T @ H).max() < 1e-9 * np.abs(H.T @ H).max()
    assert np.abs(raw.matrix).sum(axis=0).max() <= np.abs(H).sum(axis=0).max() * (1 + 1e-12)  # never worse
