"""Error analysis: paper values (Fig. 3, Ex. 4.7, Thms 6.29/6.30), oracles and properties."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from hypothesis.extra.numpy import arrays

import mmopt
from mmopt import Privacy, evaluate, query_error, svd_bound
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.error import error_profile
from mmopt.structured import workloads as sw

UNIT = None


def test_fig3_error_profiles():
    np.testing.assert_allclose(error_profile(st.identity(4)).matrix, np.eye(4), atol=1e-15)
    M_H = np.array([[13, -8, -1, -1], [-8, 13, -1, -1], [-1, -1, 13, -8], [-1, -1, -8, 13]]) / 21
    M_Y = np.array([[3, -1, 0, 0], [-1, 3, 0, 0], [0, 0, 3, -1], [0, 0, -1, 3]]) / 8
    np.testing.assert_allclose(error_profile(st.hierarchical(4)).matrix, M_H, atol=1e-14)
    np.testing.assert_allclose(error_profile(st.wavelet(4)).matrix, M_Y, atol=1e-14)


@pytest.mark.parametrize("w,expected", [
    ([1, 0, 0, 0], (1, 9 * 13 / 21, 9 * 3 / 8)),
    ([1, 1, 0, 0], (2, 9 * 10 / 21, 4.5)),
    ([1, 1, 1, 1], (4, 9 * 12 / 21, 9)),
    ([1, -1, 0, 0], (2, 18, 9)),
])
def test_example_4_7(w, expected):
    got = [query_error(w, A) for A in (st.identity(4), st.hierarchical(4), st.wavelet(4))]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 8, 33, 128])
def test_theorem_6_30_identity_all_ranges(n):
    r = evaluate(wl.all_range(n), st.identity(n), Privacy(0.5))
    assert r.total_squared_error == pytest.approx((2 / 0.25) * n * (n + 1) * (n + 2) / 6, rel=1e-12)
    assert r.max_variance == pytest.approx((2 / 0.25) * n, rel=1e-12)  # the full range


@pytest.mark.parametrize("n", [1, 4, 10, 20, 64, 1100])
def test_theorem_6_30_identity_all_predicates(n):
    import contextlib
    overflow = pytest.warns(RuntimeWarning, match="exceeds float64") if n > 1000 else contextlib.nullcontext()
    with overflow:  # the total is beyond float64 there: it must say so, not return inf silently
        r = evaluate(wl.all_predicate(n), st.identity(n), Privacy(1.0), per_query=False)
    # (2/ε²)·n·2^(n−1) over the 2ⁿ queries (the empty one adds 0): compare in log10 for huge n
    assert r.log10_total == pytest.approx(np.log10(2 * n) + (n - 1) * np.log10(2), rel=1e-12)
    assert r.mean_squared_error == pytest.approx(2 * n * 2 ** (n - 1) / (2**n - 1) if n < 1000 else n, rel=1e-9)
    assert r.max_variance == pytest.approx(2 * n) and r.max_variance_exact


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_theorem_6_29_ratio_over_all_ranges(k):
    n = 2**k
    W = wl.all_range(n)
    h = evaluate(W, st.hierarchical(n)).per_query_variance
    y = evaluate(W, st.wavelet(n)).per_query_variance
    ratio = h / y
    assert ratio.min() > 0.5 and ratio.max() <= 2.0 + 1e-9
    assert query_error(np.r_[1, -1, np.zeros(n - 2)], st.hierarchical(n)) == pytest.approx(
        2 * query_error(np.r_[1, -1, np.zeros(n - 2)], st.wavelet(n)), rel=1e-9)  # ratio 2 attained


@pytest.mark.parametrize("make", [wl.all_range, wl.prefix, wl.all_predicate, wl.identity, wl.total])
def test_family_per_query_equals_explicit(make):
    n = 7
    W = make(n)
    dense = wl.Workload.from_matrix(W.explicit_matrix())
    A = st.hierarchical(n)
    fam, exp = evaluate(W, A), evaluate(dense, A)
    np.testing.assert_allclose(fam.per_query_variance, exp.per_query_variance, rtol=1e-10)
    assert fam.total_squared_error == pytest.approx(exp.total_squared_error, rel=1e-12)
    assert fam.max_variance == pytest.approx(exp.max_variance, rel=1e-12)


def test_predicate_bounds_bracket_exact_maximum(rng):
    # n = 23 is past exact enumeration: the bounds must bracket the true maximum, computed here by brute force.
    from mmopt.dense._queries import predicate_max_bounds, predicate_terms
    n = 16
    A = rng.normal(size=(20, n))
    M = error_profile(A).matrix
    lo, hi = predicate_max_bounds(M)
    exact = predicate_terms(M).max()
    assert lo <= exact * (1 + 1e-12) and exact <= hi * (1 + 1e-12)
    r = evaluate(wl.all_predicate(40), st.wavelet(32) if False else st.hierarchical(40), per_query=False)
    assert not r.max_variance_exact and r.max_variance <= r.max_variance_upper


def test_rank_deficient_strategy_supporting_workload():
    A = np.array([[1.0, 1.0, 1.0]])
    r = evaluate(wl.total(3), A)
    assert r.total_squared_error == pytest.approx(1.0)  # measure the total once, Δ = 1
    with pytest.raises(ValueError, match="does not support"):
        evaluate(wl.identity(3), A)


def test_near_singular_strategy_never_below_lower_bound():
    # Cholesky of AᵀA on this A gave errors under the SVD bound; the QR/SVD path must not.
    n = 8
    W = wl.all_range(n)
    A = np.eye(n)
    A[-1] = A[-2] + 1e-9 * np.eye(n)[-1]
    r = evaluate(W, A)
    assert r.total_squared_error >= svd_bound(W)
    A[-1] = A[-2]  # exactly singular: unsupported
    with pytest.raises(ValueError, match="does not support"):
        evaluate(W, A)


def test_gaussian_evaluation_uses_l2_sensitivity():
    p = Privacy(1.0, 1e-6)
    H = st.hierarchical(16)
    r = evaluate(wl.all_range(16), H, p)
    u = evaluate(wl.all_range(16), H, norm="l2")
    assert r.sensitivity == pytest.approx(np.sqrt(5))
    assert r.total_squared_error == pytest.approx(p.variance_factor * u.total_squared_error, rel=1e-12)


def test_example_4_8_workload_as_strategy():
    W = wl.prefix(6)
    r = evaluate(W, st.from_workload(W))
    assert r.total_squared_error == pytest.approx(6**2 * 6)  # Δ_W² · n


def test_svd_bound_prefix2_and_to_row():
    assert svd_bound(wl.prefix(2)) == pytest.approx(2.5)
    row = evaluate(wl.prefix(2), st.identity(2), Privacy(1.0)).to_row()
    assert row["total_squared_error"] == pytest.approx(6.0) and row["noise"] == "laplace"


# -- properties (hypothesis) ---------------------------------------------------------------------
def _full_rank(n):
    return arrays(np.float64, (n + 2, n), elements=hs.floats(-3, 3, allow_nan=False)).filter(
        lambda A: np.linalg.cond(A) < 1e6)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(A=_full_rank(5), c=hs.floats(0.01, 100), seed=hs.integers(0, 2**31))
def test_scale_and_row_permutation_invariance(A, c, seed):
    W = wl.all_range(5)
    base = evaluate(W, A).total_squared_error
    perm = np.random.default_rng(seed).permutation(A.shape[0])
    # tr(G (AᵀA)⁻¹) from a QR of A: Householder QR is backward stable, ‖ΔA‖ ≤ γ_{c·m·n}‖A‖ (Higham, Accuracy and
    # Stability, Thm 19.4), and the trace moves by ≤ 2κ(A)‖ΔA‖/‖A‖ relative, so a row permutation (another
    # rounding of R) moves it by up to ~2c·m·n·κ(A)·eps. Measured up to 280·κ·eps (numpy 2.0.0's OpenBLAS,
    # m·n = 35): rtol = 100·m·n·κ(A)·eps, ≤ 8e-7 at κ < 1e6, far below what a row-order bug would change.
    m, n = A.shape
    rtol = max(1e-12, 100 * m * n * np.linalg.cond(A) * np.finfo(float).eps)
    assert evaluate(W, c * A).total_squared_error == pytest.approx(base, rel=max(1e-8, rtol))
    assert evaluate(W, A[perm]).total_squared_error == pytest.approx(base, rel=rtol)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(A=_full_rank(4), Wm=arrays(np.float64, (6, 4), elements=hs.floats(-2, 2, allow_nan=False)))
def test_gram_path_equals_matrix_path_and_bound_holds(A, Wm):
    if not np.any(Wm.T @ Wm):  # all entries so small that WᵀW underflows: not a workload
        return
    by_matrix = wl.Workload.from_matrix(Wm)
    by_gram = wl.Workload.from_gram(Wm.T @ Wm, n_queries=6)
    r = evaluate(by_matrix, A)
    assert evaluate(by_gram, A).total_squared_error == pytest.approx(r.total_squared_error, rel=1e-9)
    assert np.sum(r.per_query_variance) == pytest.approx(r.total_squared_error, rel=1e-9)
    assert r.max_variance == pytest.approx(np.max(r.per_query_variance))
    for norm in ("l1", "l2"):
        assert evaluate(by_matrix, A, norm=norm).total_squared_error >= svd_bound(by_matrix) * (1 - 1e-9)


def test_profile_equivalence():
    H = st.hierarchical(8)
    assert mmopt.profile_equivalent(H, st.square_root(H))
    assert not mmopt.profile_equivalent(H, st.wavelet(8))
    lam, V = mmopt.eigen_structure(st.wavelet(8))
    assert lam[0] == pytest.approx(8) and V.shape == (8, 8)


@pytest.mark.parametrize("make", [lambda: st.hierarchical(64), lambda: st.wavelet(64), lambda: st.hierarchical(50, 3),
                                  lambda: st.Strategy(np.random.default_rng(1).normal(size=(70, 40)))])
def test_cholesky_fast_path_equals_qr_path(make, monkeypatch):
    """The guarded Cholesky fast path (well-conditioned A) against the QR path it short-cuts."""
    import mmopt.dense.profile as prof

    A = make()
    fast = error_profile(A)
    assert fast.method == "cholesky"
    monkeypatch.setattr(prof, "CHOLESKY_MAX_RELATIVE_ERROR", 0.0)  # disable the fast path
    slow = error_profile(st.Strategy(A.matrix))  # a new Strategy: error_profile caches per Strategy object
    assert slow.method == "qr"
    np.testing.assert_allclose(fast.matrix, slow.matrix, rtol=1e-9, atol=1e-12 * np.abs(slow.matrix).max())


def test_ill_conditioned_strategy_skips_cholesky():
    A = np.diag([1.0, 1.0, 1e-5])  # κ(AᵀA) = 1e10: squaring would cost 10 digits
    assert error_profile(A).method in ("qr", "svd")


def test_to_row_with_more_queries_than_float64_holds():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the total overflows, and says so
        row = evaluate(wl.all_predicate(1100), st.identity(1100), Privacy(1.0), per_query=False).to_row()
    assert row["m"] == "~1.3e331" and np.isfinite(row["log10_total"]) and np.isfinite(row["rmse"])


@pytest.mark.parametrize("epsilon,delta", [
    (1e-300, 0.0), (1e300, 0.0), (2.3e-308, 0.0),       # c = 2/ε² overflows / underflows float64
    (1e-300, 1e-300), (1e-200, 5e-324), (1e300, 1e-300),  # Gaussian: σ² overflows / least δ / σ² underflows
])
def test_log10_total_at_extreme_budgets(epsilon, delta):
    """log10_total is finite and exact at budgets where the variance factor c is not a float.

    Direct formula: log₁₀ total = log₁₀(Δ²·tr(G M)) + log₁₀ c, with the unit-privacy total from evaluate
    (privacy=None) and log₁₀ c = log₁₀ 2 − 2 log₁₀ ε (Laplace) or 2 log₁₀ σ (Gaussian, σ at Δ₂ = 1).
    """
    import math
    import warnings

    from mmopt.privacy import analytic_gaussian_sigma

    W, A = wl.all_range(8), st.hierarchical(8)
    p = Privacy(epsilon, delta)
    unit = evaluate(W, A, UNIT, norm=p.sensitivity_norm).total_squared_error
    if delta == 0:
        log10_c = math.log10(2.0) - 2.0 * math.log10(epsilon)
    else:
        log10_c = 2.0 * math.log10(analytic_gaussian_sigma(epsilon, delta))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the float total may be inf (with a warning) or 0
        r = mmopt.evaluate(W, A, p)
    assert math.isfinite(r.log10_total)
    expected = math.log10(unit) + log10_c
    assert r.log10_total == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert abs(expected) > 100  # the case is really extreme: c itself is not a usable float


# -- the diagonal bound Σᵢ ((WᵀW)^{1/2})ᵢᵢ² (mmopt.error.diagonal_bound) -------------------------------------
def _dense_sqrt_diagonal(W) -> np.ndarray:
    lam, Q = np.linalg.eigh(W.gram)
    return np.diag((Q * np.sqrt(np.clip(lam, 0, None))) @ Q.T)


@pytest.mark.parametrize("W", [wl.prefix(12), wl.all_range(9), wl.random_range(10, 25, seed=1)],
                         ids=["prefix", "all_range", "random_range"])
def test_diagonal_bound_is_sum_of_squared_sqrt_gram_diagonal(W):
    from mmopt.error import diagonal_bound
    h = _dense_sqrt_diagonal(W)  # the oracle: G^{1/2} from numpy's own eigendecomposition of the full Gram
    np.testing.assert_allclose(diagonal_bound(W), h @ h, rtol=1e-10)
    p = Privacy(0.5, 1e-6)
    np.testing.assert_allclose(diagonal_bound(W, p, per_query=True), h @ h * p.variance_factor / W.n_queries,
                               rtol=1e-10)


@pytest.mark.parametrize("W", [wl.identity(7), wl.total(7)], ids=["identity", "total"])
def test_diagonal_bound_equals_svd_bound_when_the_diagonal_is_constant(W):
    from mmopt.error import diagonal_bound
    np.testing.assert_allclose(diagonal_bound(W), svd_bound(W), rtol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_diagonal_bound_between_svd_bound_and_certified_optimum(seed):
    """Cauchy–Schwarz below, and never above the certified L2 optimum (l2_approx's duality-gap-checked value)."""
    from mmopt.error import diagonal_bound
    rng = np.random.default_rng(seed)
    W = wl.Workload.from_matrix(rng.standard_normal((9, 6)) * rng.uniform(0.1, 3.0, 6))  # uneven columns
    d, s = diagonal_bound(W), svd_bound(W)
    assert d >= s * (1 - 1e-12)
    res = mmopt.optimize(W, method="l2_approx")
    assert res.status == "optimal"
    assert d <= res.objective * (1 + 1e-7)
    assert res.lower_bound >= d * (1 - 1e-12)  # optimize reports the strongest of its bounds


@pytest.mark.parametrize("weight", [1e4, 1e6, 3e6, 1e7, 1e9])
def test_a_workload_of_widely_spread_singular_values_keeps_every_direction(weight):
    # G = WᵀW squares W's range: eigh resolved its eigenvalues to eps·λ_max only, and the rank rule cut W's weak
    # directions — a 10⁷ : 1 stack of the total and the identity reported 1.0e14 for 8.0e14 (per-query 0 for
    # 8.75e13), 2e-4 to 3e-3 off at 10⁶–3·10⁶. The oracle: Δ₁² ‖w A⁺‖² from A's own pseudo-inverse (SVD of A).
    W = wl.stack([wl.total(8), wl.identity(8)], weights=[weight, 1.0])
    A = st.from_workload(W)
    r = mmopt.evaluate(W, A, per_query=True)
    P = W.explicit_matrix() @ np.linalg.pinv(A.matrix)
    oracle = np.sum(P * P, axis=1) * np.abs(A.matrix).sum(axis=0).max() ** 2
    # the oracle's own error is ~κ(A)·eps (κ = 2.8·10⁹ at the largest weight): 1e-9 relative covers it
    np.testing.assert_allclose(r.per_query_variance, oracle, rtol=1e-9)
    assert r.total_squared_error == pytest.approx((weight + 1) ** 2 * 8, rel=1e-9)


def test_figures_past_float64_say_so_rather_than_raise_a_bare_overflow():
    """W = 10¹⁵⁴·I is accepted (G/m = 2.5·10³⁰⁷) but its SVD bound, 4·10³⁰⁸, is not a float: (Σσ)**2 raised
    Python's bare OverflowError from svd_bound, evaluate and optimize; now inf with a warning, and evaluate says
    the error itself exceeds float64 (it blamed the strategy's conditioning)."""
    W = wl.Workload.from_matrix(1e154 * np.eye(4))
    with pytest.warns(RuntimeWarning, match="SVD bound of workload 'workload' exceeds float64"):
        assert mmopt.svd_bound(W) == np.inf
    with pytest.warns(RuntimeWarning), pytest.raises(mmopt.error.NumericalError, match="exceeds float64"):
        mmopt.evaluate(W, np.eye(4))
    W = sw.kron(wl.prefix(3), wl.all_range(4), weight=1e154)
    with pytest.raises(ValueError, match="exceeds float64 .so does its SVD lower bound"):
        mmopt.evaluate(W, mmopt.structured.strategies.kron_strategy(np.eye(3), np.eye(4)))


def test_unit_objective_checks_its_norm_and_gram():
    """mmopt.error.unit_objective (an optimiser's score, public) read any norm but 'l1' as 'l2' ('L1' gave 0.75 for
    Δ₁(I)²·tr(I) = 3) and met a list or a mismatched Gram with AttributeError / numpy's broadcast error."""
    from mmopt.error import unit_objective
    assert unit_objective(np.eye(3), np.eye(3), "l1") == pytest.approx(3.0)
    assert unit_objective(np.eye(3), np.eye(3).tolist(), "l2") == pytest.approx(3.0)
    with pytest.raises(ValueError, match="'norm' parameter of unit_objective must be one of 'l1', 'l2'. Got 'L1'"):
        unit_objective(np.eye(3), np.eye(3), "L1")
    with pytest.raises(ValueError, match="'G' parameter of unit_objective must be 3×3, the Gram over A's 3 columns"):
        unit_objective(np.eye(3), np.eye(2))
    with pytest.raises(ValueError, match="'G' parameter of unit_objective must be a symmetric"):
        unit_objective(np.eye(3), np.triu(np.ones((3, 3))))
    with pytest.raises(ValueError, match="'G' parameter of unit_objective must be finite"):
        unit_objective(np.eye(2), [[1.0, np.nan], [np.nan, 1.0]])


def test_gram_svd_bound_matches_the_eigenvalues_and_refuses_what_is_not_a_gram():
    """mmopt.error.gram_svd_bound (public) checked nothing: a NaN or infinite G and −I gave the "lower bound" 0.0,
    an asymmetric G a number, an empty one ZeroDivisionError, a list AttributeError (a helper's probe)."""
    from mmopt.error import gram_svd_bound
    W = np.random.default_rng(3).standard_normal((7, 5))
    oracle = np.sqrt(np.linalg.eigvalsh(W.T @ W).clip(0)).sum() ** 2 / 5  # (Σσᵢ(W))²/n
    assert gram_svd_bound(W.T @ W) == pytest.approx(oracle, rel=1e-12)
    assert gram_svd_bound(np.ones((3, 3)).tolist()) == pytest.approx(1.0, rel=1e-12)  # rank one, as a list
    for G, match in ((np.full((2, 2), np.nan), "finite"), (-np.eye(3), "positive semidefinite"),
                     ([[1.0, 5.0], [5.0, 1.0]], "positive semidefinite"), ([[1.0, 5.0], [0.0, 1.0]], "symmetric"),
                     (np.zeros((0, 0)), "non-empty"), (np.ones((2, 3)), "square")):
        with pytest.raises(ValueError, match=f"'G' parameter of gram_svd_bound must be .*{match}"):
            gram_svd_bound(G)


def _weak_strategy(s: float) -> np.ndarray:
    """A 4-cell strategy whose one weak direction (e₀ − e₂)/√2 has singular value s: κ(A) = 1/s."""
    v = np.array([1.0, 0.0, -1.0, 0.0]) / np.sqrt(2)
    Q = np.linalg.qr(np.column_stack([v, np.eye(4)[:, [1, 3]], [1.0, 0.0, 1.0, 0.0]]))[0]
    return (Q * np.array([s, 1.0, 1.0, 1.0])).T


@pytest.mark.parametrize("family", ["all_range", "prefix", "all_predicate", "identity"])
def test_per_query_variances_of_an_ill_conditioned_strategy_match_the_stored_rows(family):
    """A query orthogonal to the weak direction has a variance of order 1, while M = (AᵀA)⁺ has entries of order
    1/s² = 10²⁰: the families' prefix sums of M's entries gave 8,193 for range [0, 2] (variance 3) and 8,192 for
    the predicate {0, 2} (variance 2). Oracle: the same rows stored (‖w F‖², sums of squares), and the exact
    variances of the queries orthogonal to the weak direction (A's other rows are orthonormal)."""
    A = _weak_strategy(1e-10)
    W = getattr(mmopt.workload, family)(4)
    got = mmopt.evaluate(W, A, norm="l2").per_query_variance
    rows = W.explicit_matrix()
    want = mmopt.evaluate(mmopt.Workload.from_matrix(rows), A, norm="l2").per_query_variance
    assert np.allclose(got, want, rtol=1e-9, atol=0)
    orthogonal = np.abs(rows @ np.array([1.0, 0.0, -1.0, 0.0])) < 0.5  # w₀ = w₂: no weight on the weak direction
    assert np.allclose(got[orthogonal], np.sum(rows[orthogonal] ** 2, axis=1), rtol=1e-9)


def test_rmse_is_reported_where_only_its_square_overflows():
    """ε = 1e-300: the mean squared error (~1.7·10⁶⁰¹) leaves float64, its root (~4·10³⁰⁰) does not, and was reported
    inf (a newcomer's audit). Oracle: the RMSE at ε = 1 scaled by 10³⁰⁰ (Laplace: RMSE ∝ 1/ε)."""
    import warnings
    W, A = mmopt.workload.prefix(16), mmopt.strategy.identity(16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the total's own overflow warning
        far = mmopt.evaluate(W, A, mmopt.Privacy(1e-300))
    assert math.isinf(far.mean_squared_error)
    assert far.rmse == pytest.approx(mmopt.evaluate(W, A, mmopt.Privacy(1.0)).rmse * 1e300, rel=1e-10)


def test_implicit_and_toeplitz_strategies_are_analysed_as_their_matrices():
    """error_profile, eigen_structure, query_error and augment said "must be a 2-D array … Got an entry
    ImplicitStrategy" (augment: "must be a Strategy") where evaluate takes them (a helper's audit): up to the dense
    limit they are their matrices; past it the refusal names the size and evaluate."""
    import mmopt
    from mmopt import strategy as st
    from mmopt import toeplitz
    from mmopt.augment import augment
    implicit = st.kron(st.identity(3), st.hierarchical(4))
    for A in (implicit, toeplitz.sqrt_strategy(16)):
        D = A.to_strategy()
        np.testing.assert_array_equal(mmopt.error_profile(A).matrix, mmopt.error_profile(D).matrix)
        np.testing.assert_array_equal(mmopt.eigen_structure(A)[0], mmopt.eigen_structure(D)[0])
        q = np.arange(D.domain_size, dtype=float)
        assert mmopt.query_error(q, A) == mmopt.query_error(q, D)
        np.testing.assert_array_equal(augment(A).matrix, augment(D).matrix)
    with pytest.raises(ValueError, match=r"ToeplitzStrategy over 10,000 cells; error_profile works on the dense "
                                         r"matrix, up to 4,096 cells\. mmopt\.evaluate takes it at any size\."):
        mmopt.error_profile(toeplitz.sqrt_strategy(10_000))


def test_a_gram_only_workload_bounds_its_largest_variance_by_the_total():
    """The dense path gave max_variance_upper None where the implicit routes give the total (no query's variance
    exceeds it): the two layers disagreed on the same pair."""
    from mmopt.structured import workloads as sw
    G = np.eye(6) + 1.0
    W = mmopt.Workload.from_gram(G, n_queries=6, name="g")
    r = mmopt.evaluate(W, mmopt.strategy.identity(6), mmopt.Privacy(1.0))
    assert r.max_variance is None and not r.max_variance_exact
    assert r.max_variance_upper == r.total_squared_error == pytest.approx(2.0 * np.trace(G))
    implicit = mmopt.structured.evaluate(sw.kron(W, sw.total(1)), mmopt.structured.strategies.kron_strategy(
        np.eye(6), np.ones((1, 1))), mmopt.Privacy(1.0))
    assert implicit.max_variance_upper == pytest.approx(r.max_variance_upper, rel=1e-12)
