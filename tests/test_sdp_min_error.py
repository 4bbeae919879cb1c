"""Tests for mmopt.search.sdp_min_error (Program 5.1 by convex iteration): the spec's n = 4 reference values,
validity of the returned strategy, the best-iterate property, history, warm starts, and validation."""

import numpy as np
import pytest

from mmopt import workload as wl
from mmopt._base.solution import RawSolution
from mmopt.search._convex_iteration import null_projector as _null_projector
from mmopt.search.sdp_min_error import (
    STARTS,
    _starts,
    _svd_bound,
    _true_error,
    solve_min_error_sdp,
)
from mmopt.solvers import choose, mosek_available


def all_range_gram(n):
    return wl.all_range(n).gram


TOTAL_PLUS_CELLS = 100 * np.ones((4, 4)) + np.eye(4)  # W = [10·1ᵀ; I₄]
HISTORY_KEYS = {"iteration", "objective", "rank_gap", "weight", "target", "seconds", "start"}


def check_strategy(res, G):
    """The returned A is square, full rank, has max column L1 = 1, and its error is the one reported."""
    A = res.matrix
    n = G.shape[0]
    assert isinstance(res, RawSolution) and res.gram is None
    assert A.shape == (n, n)
    assert np.abs(A).sum(axis=0).max() == pytest.approx(1.0, abs=1e-12)
    assert np.linalg.svd(A, compute_uv=False)[-1] > 1e-9
    assert _true_error(A, G) == pytest.approx(res.extra["objective"], rel=1e-9)
    assert res.extra["objective"] >= res.extra["svd_bound"] * (1 - 1e-9)
    assert "heuristic with no optimality guarantee" in res.message


def test_true_error_helper():
    G = all_range_gram(4)
    assert _true_error(np.eye(4), G) == pytest.approx(20.0)
    assert _true_error(3 * np.eye(4), G) == pytest.approx(20.0)  # scale-invariant (Prop A.31)
    assert _true_error(np.diag([1.0, 1.0, 1.0, 0.0]), G) == np.inf
    W = np.vstack([10 * np.ones(4), np.eye(4)])
    assert _true_error(np.eye(4), W.T @ W) == pytest.approx(404.0)
    assert _svd_bound(W.T @ W) == pytest.approx(132.5, abs=0.05)


def test_null_projector_vanishes_at_rank_n_point(rng):
    A = rng.standard_normal((3, 3))
    Z = _null_projector(A)
    big = np.block([[np.eye(3), A], [A.T, A.T @ A]])
    assert np.sum(Z * big) == pytest.approx(0.0, abs=1e-10)
    assert np.trace(Z) == pytest.approx(3.0)  # a rank-n projector: a point of the Fantope


def test_identity_workload():
    res = solve_min_error_sdp(np.eye(4))
    check_strategy(res, np.eye(4))
    assert res.extra["objective"] == pytest.approx(4.0, rel=1e-9)
    assert res.status == "optimal" and res.solver == choose(None, size_hint=8)


def test_all_ranges_n4_reaches_identity():
    G = all_range_gram(4)
    res = solve_min_error_sdp(G)
    check_strategy(res, G)
    assert res.extra["objective"] == pytest.approx(20.0, rel=1e-6)
    assert res.status == "optimal"


def test_starts_selects_the_runs():
    """Only the starts asked for run, in the order of STARTS; the identity start ends at tr G (the identity
    strategy's error), which is why min_error, which weighs the identity itself, leaves it out."""
    G = all_range_gram(4)
    only = solve_min_error_sdp(G, starts=("l2", "svd"))
    assert {h["start"] for h in only.history} == {"svd", "l2"}
    assert [h["start"] for h in only.history] == sorted((h["start"] for h in only.history), key=STARTS.index)
    ident = solve_min_error_sdp(G, starts=("identity",))
    assert {h["start"] for h in ident.history} == {"identity"}
    assert ident.extra["objective"] == pytest.approx(np.trace(G), rel=1e-6)


def test_all_ranges_from_l2_start_history():
    """From the L2 strategy (error 31.09) the iteration itself must find the identity's 20."""
    G = all_range_gram(4)
    start = dict(_starts(G, "CLARABEL"))["l2"]
    res = solve_min_error_sdp(G, initial=start)
    check_strategy(res, G)
    assert _true_error(start, G) > 31
    assert res.extra["objective"] == pytest.approx(20.0, rel=1e-6)
    assert res.extra["start"] == "initial"
    hist = res.history
    assert len(hist) == res.iterations > 0
    assert all(HISTORY_KEYS <= set(h) for h in hist)
    assert [h["iteration"] for h in hist] == list(range(1, len(hist) + 1))
    assert all(np.isfinite(h["rank_gap"]) and h["rank_gap"] > -1e-6 for h in hist)
    assert min(h["rank_gap"] for h in hist) <= 1e-6  # some target was reached with rank G_big = n
    # Best-iterate property: nothing in the history beats the answer, and the answer beats the start.
    assert res.extra["objective"] <= min(h["objective"] for h in hist) + 1e-12
    assert res.extra["objective"] <= _true_error(start, G)


def test_total_plus_cells_reference():
    """Spec §4: ≈ 222.69 or lower (identity 404, SVD bound 132.5) — for a converged run, within 0.1% of a
    local optimum, since convex iteration is a local heuristic and round-off decides which one it reaches.

    The Theorem 5.25 start Λ^{1/4}Vᵀ takes its basis of G's triple eigenvalue 1 from LAPACK (its error is 314.0
    on OpenBLAS's SkylakeX kernel, 285.6 on Haswell, SandyBridge, Nehalem and Prescott), and the P1 solves differ
    in the last bits from there on. Measured from the 'svd' start: 222.658 after 50 (SkylakeX), 84 (Nehalem) and
    128 (Haswell, SandyBridge) P1 solves; 224.519 after 71 on Prescott. Both are local optima (the penalty form
    also stops at 224.49; min_error's local search goes on to 221.34, test_optimize checks the spec's 222.69
    there). The bar this test once had, ≤ 222.70 after 100 solves, held on SkylakeX only (Haswell: 223.15,
    still improving).
    """
    res = solve_min_error_sdp(TOTAL_PLUS_CELLS, max_iterations=400)
    check_strategy(res, TOTAL_PLUS_CELLS)  # includes objective ≥ the SVD bound, a certified lower bound
    # Converged by its own test (the bisection closed), not cut off: every start needed ≤ 188 of the 400 solves
    # on the five kernels, 1 or 2 threads (the 'identity' and 'l2' starts stay at 404).
    assert res.status == "optimal" and res.extra["start"] == "svd"
    # A run ends once a bisection pass gains < 0.1%, so allow 0.1% above the worse local optimum. Still fails
    # on a start left as it was (285.6, 314.0) or barely moved (234.6–252.9 after 3 solves).
    assert res.extra["objective"] <= 224.52 * (1 + 1e-3)


def test_user_limit_status():
    res = solve_min_error_sdp(TOTAL_PLUS_CELLS, max_iterations=3)
    check_strategy(res, TOTAL_PLUS_CELLS)
    assert res.status == "user_limit" and "max_iterations=3" in res.message
    # Never worse than the best start. Each run begins at its start's error, computed by the same _true_error
    # on the same matrix in this process, so no tolerance. The Theorem 5.25 start's error depends on LAPACK's
    # basis of G's repeated eigenvalue (314.0 or 285.6, see above); 3 solves reach 252.9 or 234.6.
    starts = _starts(TOTAL_PLUS_CELLS, res.solver)
    assert res.extra["objective"] <= min(_true_error(a, TOTAL_PLUS_CELLS) for _, a in starts)


def test_penalty_form():
    start = dict(_starts(TOTAL_PLUS_CELLS, "CLARABEL"))["svd"]
    res = solve_min_error_sdp(TOTAL_PLUS_CELLS, weight=5.0, initial=start)
    check_strategy(res, TOTAL_PLUS_CELLS)
    assert all(h["weight"] == 5.0 and h["target"] is None for h in res.history)
    # The penalty form stops at a local optimum: 224.49 (OpenBLAS's Haswell, SandyBridge, Nehalem, Prescott
    # kernels) or 222.71 (SkylakeX), from a start of 285.6 or 314.0 (see test_total_plus_cells_reference).
    assert res.extra["objective"] < 230


def test_warm_start_non_square_is_reduced():
    H4 = np.vstack([np.ones(4), [1, 1, 0, 0], [0, 0, 1, 1], np.eye(4)])
    G = all_range_gram(4)
    res = solve_min_error_sdp(G, initial=H4, max_iterations=10)
    check_strategy(res, G)
    R = np.linalg.qr(H4, mode="r")
    assert res.extra["objective"] <= _true_error(R, G) + 1e-9


def test_scs_agrees_with_clarabel():
    G = all_range_gram(4)
    start = dict(_starts(G, "CLARABEL"))["l2"]
    a = solve_min_error_sdp(G, initial=start, solver="CLARABEL")
    b = solve_min_error_sdp(G, initial=start, solver="scs")
    assert b.solver == "SCS"
    assert b.extra["objective"] == pytest.approx(a.extra["objective"], rel=1e-4)


@pytest.mark.skipif(not mosek_available(), reason="needs a licensed MOSEK")
@pytest.mark.mosek
def test_mosek_path():
    res = solve_min_error_sdp(all_range_gram(4), solver="MOSEK")
    assert res.solver == "MOSEK" and res.extra["objective"] == pytest.approx(20.0, rel=1e-6)


def test_all_ranges_n8_from_l2_start():
    G = all_range_gram(8)
    res = solve_min_error_sdp(G, initial=dict(_starts(G, "CLARABEL"))["l2"])
    assert res.extra["objective"] == pytest.approx(120.0, rel=1e-6)  # identity: n(n+1)(n+2)/6


@pytest.mark.slow
def test_all_ranges_n16_from_l2_start():
    G = all_range_gram(16)
    res = solve_min_error_sdp(G, initial=dict(_starts(G, "CLARABEL"))["l2"])
    assert res.extra["objective"] <= 816.0 * 1.001  # the identity, within 0.1%


BAD = [
    ("gram non-square", dict(gram=np.ones((2, 3))), "'gram' parameter .* must be a square"),
    ("gram asymmetric", dict(gram=[[1.0, 1.0], [0.0, 1.0]]), "'gram' parameter .* must be symmetric"),
    ("gram not PSD", dict(gram=[[1.0, 2.0], [2.0, 1.0]]), "'gram' parameter .* positive semidefinite"),
    ("initial shape", dict(initial=np.eye(3)), r"'initial' parameter .* must have shape \(p, 2\)"),
    ("initial singular", dict(initial=np.ones((3, 2))), "'initial' parameter .* full column rank"),
    ("weight negative", dict(weight=-1.0), "'weight' parameter .* must be a float in the range"),
    ("max_iterations", dict(max_iterations=0), "'max_iterations' parameter .* must be an integer >= 1"),
    ("solver", dict(solver="nope"), "solver='nope' is not usable here"),
    ("starts string", dict(starts="svd"), r"'starts' parameter .* non-empty tuple of names .* Got 'svd'"),
    ("starts empty", dict(starts=()), r"'starts' parameter .* Got \(\) instead"),
    ("starts unknown", dict(starts=("svd", "hb")), r"'starts' parameter .* \('svd', 'identity', 'l2'\)"),
]


@pytest.mark.parametrize(("label", "kwargs", "match"), BAD, ids=[b[0] for b in BAD])
def test_invalid_inputs(label, kwargs, match):
    kwargs = {"gram": np.eye(2), **kwargs}
    with pytest.raises(ValueError, match=match):
        solve_min_error_sdp(**kwargs)


def test_duplicated_columns_never_give_a_negative_error():
    """A workload with duplicated columns: the SDP's A is nearly singular on G's null directions, where vᵢᵀGvᵢ is
    G's round-off of either sign; divided by sᵢ² the error came out −6.0, the bisection's next target negative,
    and cvxpy refused it (4 of 8 random 5×3 matrices; a helper's probe). The error is now formed from G's root."""
    B = np.array([[0.3664047989063822, 0.41674173314476903, 0.6803417830461307],
                  [0.7852739522088118, 0.9409580823095943, 0.3757000414797116],
                  [0.706774204473923, 0.3416340099741699, 0.8240017986428428],
                  [0.23064890373883828, 0.871013711841216, 0.5051052531003721],
                  [0.7253440316687976, 0.5349930147477081, 0.3161213492856195]])
    for W in [np.repeat(B, 2, axis=1)] + [np.repeat(np.random.default_rng(s).random((5, 3)), 2, axis=1)
                                          for s in range(4)]:
        G = W.T @ W
        res = solve_min_error_sdp(G)
        A = res.matrix
        # the oracle from W itself: ‖W A⁺‖²_F = Σᵢ ‖W vᵢ‖²/sᵢ² (AᵀA would square A's condition, ~10¹⁷ here)
        _, s, vt = np.linalg.svd(A)
        exact = np.abs(A).sum(axis=0).max() ** 2 * np.sum(np.sum((W @ vt.T) ** 2, axis=0) / s**2)
        assert res.extra["objective"] >= res.extra["svd_bound"] * (1 - 1e-9)
        assert res.extra["objective"] == pytest.approx(exact, rel=1e-6)  # s_min/s_max ≥ 1e-9: ~1e-8 relative
