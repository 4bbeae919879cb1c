"""The exact largest variance over all ranges (mmopt.toeplitz.range_variance) against the dense per-query oracle."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz
from mmopt import workload as wl
from mmopt.toeplitz.range_variance import EXACT_MAX_N, unit_range_variances

GAUSS, LAPLACE = mmopt.Privacy(1.0, 1e-6), mmopt.Privacy(1.0)


def _strategies(n):
    row_scaled = mmopt.optimize(toeplitz.all_range(n), privacy=GAUSS, method="toeplitz").strategy
    return {"weighted_sqrt": (toeplitz.weighted_sqrt(toeplitz.all_range(n)), GAUSS),
            "tree": (toeplitz.tree(n, 2), LAPLACE), "tree4": (toeplitz.tree(n, 4), GAUSS),
            "row-scaled toeplitz": (row_scaled, GAUSS)}


@pytest.mark.parametrize("n", [12, 37])
@pytest.mark.parametrize("name", ["weighted_sqrt", "tree", "tree4", "row-scaled toeplitz"])
def test_the_largest_range_variance_is_the_dense_one(n, name):
    """The weighted square root reported NaN (which compares False both ways) and trees and row-scaled Toeplitz
    strategies a bound 2.3–2.7× the truth on trees; the dense workload named as the remedy took the same path."""
    S, privacy = _strategies(n)[name]
    dense = mmopt.evaluate(wl.all_range(n), S.to_strategy(), privacy, per_query=True)
    for W in (toeplitz.all_range(n), wl.all_range(n)):
        got = mmopt.evaluate(W, S, privacy)
        assert got.max_variance_exact and got.max_variance == pytest.approx(dense.max_variance, rel=1e-8)
        i, j = got.max_variance_query  # the query named attains it: its own variance, from the dense M
        A = S.to_strategy().matrix
        q = np.zeros(n)
        q[i:j + 1] = 1.0
        unit = q @ np.linalg.solve(A.T @ A, q)
        assert got.max_variance == pytest.approx(got.variance_factor * got.sensitivity**2 * unit, rel=1e-8)
        assert got.total_squared_error == pytest.approx(dense.total_squared_error, rel=1e-8)


def test_past_the_limit_the_bound_stays_flagged_and_holds():
    n = EXACT_MAX_N + 1
    S = toeplitz.tree(n, 4)
    tree = mmopt.evaluate(toeplitz.all_range(n), S, GAUSS)
    exact = tree.variance_factor * tree.sensitivity**2 * np.max(unit_range_variances(S.to_dense()))
    # a tree is exact past the dense limit too (one O(n) solve a column, range_maximum's O(n²) pass)
    assert tree.max_variance_exact and tree.max_variance == pytest.approx(exact, rel=1e-9)
    # a row-scaled Toeplitz strategy: the largest prefix's variance (attained) and a proven bound beside it, as the
    # dense reports give them (the bound stood in max_variance itself before)
    C = toeplitz.equalized(toeplitz.sqrt_strategy(n))
    rs = mmopt.evaluate(toeplitz.all_range(n), C, GAUSS)
    truth = rs.variance_factor * rs.sensitivity**2 * np.max(unit_range_variances(C.to_dense()))
    assert not rs.max_variance_exact and rs.max_variance <= truth * (1 + 1e-9) <= rs.max_variance_upper * (1 + 2e-9)
    prefix = mmopt.evaluate(toeplitz.prefix(n), C, GAUSS)
    assert rs.max_variance == pytest.approx(prefix.max_variance, rel=1e-12)  # attained: the largest prefix
    # the weighted square root: NaN before (not computed, its upper bound inf), then the tree's bound (4·the
    # largest prefix's variance, four times the truth); now exact past the dense limit (range_maximum's O(n²) pass)
    R = toeplitz.weighted_sqrt(toeplitz.all_range(n))
    ws = mmopt.evaluate(toeplitz.all_range(n), R, GAUSS)
    exact = ws.variance_factor * np.max(unit_range_variances(R.to_dense()))
    assert ws.max_variance_exact and ws.max_variance == pytest.approx(exact, rel=1e-9)


def test_unit_range_variances_of_a_small_strategy():
    A = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0], [1.0, 1.0, 1.0]])
    M = np.linalg.inv(A.T @ A)
    V = unit_range_variances(A)
    for i in range(3):
        for j in range(3):
            q = np.zeros(3)
            q[i:j + 1] = 1.0
            assert V[i, j] == (pytest.approx(q @ M @ q, rel=1e-12) if i <= j else -np.inf)


def test_the_weighted_square_root_is_evaluated_at_unit_privacy_with_its_l2_sensitivity():
    """evaluate(W, A) without a privacy took Δ₁ and refused the weighted square root (a Gaussian-only strategy,
    its Δ₁ not computed), where the hierarchy's and the orbit's strategies use Δ₂."""
    W = toeplitz.prefix(100)
    R = toeplitz.weighted_sqrt(W)
    r = mmopt.evaluate(W, R)
    assert r.sensitivity_norm == "l2"
    A = R.to_dense()
    dense = np.trace(np.linalg.inv(A.T @ A) @ W.to_workload().gram) * np.max(np.sum(A * A, axis=0))
    assert r.total_squared_error == pytest.approx(dense, rel=1e-9)
