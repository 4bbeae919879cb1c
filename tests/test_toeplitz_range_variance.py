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


@pytest.mark.parametrize("scale", [1e-160, 1e-155, 10**153.75, 1e154])
def test_the_exact_pass_is_scale_free(scale):
    """Coefficients near 1e±154 made AᵀA or Δ² under- or overflow in the dense pass: NaN or inf went out labelled
    exact (a helper's audit). The error is scale-free: the value is the unscaled strategy's."""
    n = 20
    base = toeplitz.equalized(toeplitz.sqrt_strategy(n))
    want = mmopt.evaluate(toeplitz.all_range(n), base, GAUSS)
    S = toeplitz.ToeplitzStrategy(base.coefficients * scale, n, "x", "toeplitz", row_scale=base.row_scale)
    got = mmopt.evaluate(toeplitz.all_range(n), S, GAUSS)
    assert got.max_variance_exact and got.max_variance == pytest.approx(want.max_variance, rel=1e-9)
    assert got.max_variance_query == want.max_variance_query


def test_an_ill_conditioned_strategy_keeps_its_attained_value_and_bound():
    """A Cholesky of AᵀA squared cond(A) ≈ 4·10⁷: the 'exact' figure was 3 % below the variance of the range
    (0, 39), which the prefix report attains (an upper bound below an attained value). Now the dense pass works
    from QR and refuses past MAX_CONDITION, and the report keeps the attained value and its proven bound."""
    n = 40
    B = toeplitz.banded([1.0, -1.5], n)
    y = np.random.default_rng(2).uniform(0.5, 2.0, n)
    S = toeplitz.ToeplitzStrategy(B.coefficients, n, "rs", B.kind, row_scale=y)
    r = toeplitz.evaluate(toeplitz.all_range(n), S)
    p = toeplitz.evaluate(toeplitz.prefix(n), S)
    assert r.max_variance >= p.max_variance * (1 - 1e-9) and r.max_variance_upper >= p.max_variance * (1 - 1e-9)
    assert not r.max_variance_exact
    assert unit_range_variances(S.to_dense()) is None


def test_a_well_conditioned_row_scaled_strategy_is_exact_against_every_range():
    n = 50
    S = toeplitz.ToeplitzStrategy(toeplitz.sqrt_strategy(n).coefficients, n, "rs", "toeplitz",
                                  row_scale=np.linspace(1.0, 3.0, n))
    r = toeplitz.evaluate(toeplitz.all_range(n), S)
    A = S.to_dense()
    M = np.linalg.inv(A.T @ A)  # cond(A) ~ 10: the oracle's own round-off is far below the tolerance
    best = max((M[i:j + 1, i:j + 1].sum(), (i, j)) for i in range(n) for j in range(i, n))
    assert r.max_variance_exact and r.max_variance_query == best[1]
    assert r.max_variance == pytest.approx(r.variance_factor * r.sensitivity**2 * best[0], rel=1e-10)
