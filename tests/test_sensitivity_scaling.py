"""Scale-safe sensitivities (issue "Fresh-machine trust", part A): Δ is exact to rounding, or a proven upper
bound, for any finite strategy, and never 0, inf or nan; a Δ outside float64's normal range raises.

Every path is checked against the same reference: Δ(c·A) = c·Δ(A) for a decimal scale c. The relative
tolerances below are derived, not tuned. Writing u = 2⁻⁵³ ≈ 1.1e-16:

* c·A is stored with each entry rounded once (≤ u relative), the power-of-two rescaling inside the
  sensitivity is exact, a column sum of p non-negative terms is within (p − 1)·u·1.01 of its value, a square
  adds u, a square root u/2, a product of d factors d·u, and c·Δ(A) itself one more rounding. For the
  p ≤ 16 rows and d ≤ 3 factors used here that is below 25·u ≈ 3e-15; RTOL = 1e-13 leaves a 30× margin
  while still catching any lost digit (a subnormal intermediate loses at least 1e-4, an underflow all).
* Where the reference is formed in log space (scales whose product underflows or overflows float64 on the
  way), log Δ is compared with a sum of logs, each with an absolute rounding of ≤ u·|log x| ≤ 700·u ≈ 8e-14:
  LOG_TOL = 1e-12.
* Error figures are scale-invariant: the figure for c·A is computed on a moderately scaled copy whose
  entries differ from A's by one rounding each (relative u); for the well-conditioned H₂ and I factors used
  here (κ ≤ 10) that moves the error by at most ~κ²·p·u ≈ 1e-13: ERR_RTOL = 1e-10.
"""

import math
import sys
import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as hs

import mmopt
from mmopt import Privacy, Strategy
from mmopt import strategy as st
from mmopt.dense._error_common import scaled_sensitivity
from mmopt.dense._strategy_core import max_column_norm, max_column_norm_upper
from mmopt.dense.exact_answers import RELATIVE_CHARGE
from mmopt.mechanism import _upper_sensitivity
from mmopt.multidim._common import column_sensitivity, factor_traces
from mmopt.structured import analysis as sa
from mmopt.structured import factors as fc
from mmopt.structured import strategies as ss
from mmopt.structured import workloads as sw
from mmopt.structured.release import upper_sensitivity

RTOL = 1e-13
LOG_TOL = 1e-12
ERR_RTOL = 1e-10
EPS1, GAUSS = Privacy(1.0), Privacy(1.0, 1e-6)

H6 = st.hierarchical(6).matrix          # 11 × 6, Δ₁ = 4, Δ₂ = 2
I5 = np.eye(5)
Q6 = np.arange(36.0).reshape(6, 6) + 7 * np.eye(6)
Q6 /= np.linalg.norm(Q6, axis=0)  # unit columns, a Gram outside the αI + βJ algebra
W65 = sw.kron(sw.prefix(6), sw.identity(5))
W33 = sw.kron(sw.prefix(3), sw.identity(3))
# A fixed small matrix with unequal columns and signs (entries in [0.5, 4]: c·M stays normal for c ≥ 1e-300)
M = np.array([[1.0, -2.0, 0.5, 0.0], [3.0, 0.5, -1.0, 4.0], [0.0, 1.5, 2.0, -0.5]])

exponents = hs.integers(min_value=-300, max_value=300)


def rel(a, b):
    return abs(a - b) / abs(b)


def log_close(value, *logs):
    assert value > 0 and math.isfinite(value)
    assert abs(math.log(value) - math.fsum(logs)) <= LOG_TOL * max(1.0, abs(math.fsum(logs)))


# -- dense ----------------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(k=exponents, norm=hs.sampled_from(["l1", "l2"]))
def test_dense_sensitivity_scales_exactly(k, norm):
    c = 10.0**k
    ref = Strategy(M).sensitivity(norm)
    got = Strategy(c * M).sensitivity(norm)
    assert rel(got, c * ref) <= RTOL
    # every dense path computes the same number
    assert max_column_norm(c * M, norm) == got
    assert column_sensitivity(c * M, norm) == got
    up = _upper_sensitivity(c * M, norm, "test")
    assert got <= up <= got * (1 + 1e-14)  # a proven bound, and a tight one (4(p+2)u ≈ 2e-15 here)


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_dense_report_and_scaled_helper_agree(norm):
    """evaluate's reported Δ is the Strategy's own, at any scale; scaled_sensitivity is the same computation."""
    for c in (1e-300, 1e-170, 1.0, 1e170, 1e300):
        A = Strategy(c * H6[:, :4] + c * np.eye(11, 4))
        W = mmopt.workload.prefix(4)
        p = EPS1 if norm == "l1" else GAUSS
        r = mmopt.evaluate(W, A, p)
        assert r.sensitivity == A.sensitivity(norm)
        e = int(np.frexp(np.max(np.abs(A.matrix)))[1])
        assert rel(scaled_sensitivity(np.ldexp(A.matrix, -e), norm) * 2.0**e / c, A.sensitivity(norm) / c) <= RTOL


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_dense_sensitivity_outside_float64_raises(norm):
    with pytest.raises(ValueError, match=r"Strategy.sensitivity: the l[12] sensitivity .* outside float64's normal "
                                         r"range: below .* rescale"):
        Strategy(1e-310 * np.eye(3)).sensitivity(norm)  # subnormal: would lose digits, never returned
    with pytest.raises(ValueError, match="outside float64's normal range: above"):
        max_column_norm(np.full((4, 1), 1e308), "l1", caller="t")  # Strategy itself refuses this at construction
    assert max_column_norm_upper(np.eye(2) * 1e-300, norm) >= 1e-300


# -- implicit: the reported cases -----------------------------------------------------------------------
def test_reported_implicit_cases_are_exact():
    # Δ₂ of 1e-170·I ⊗ I was reported as 0.0 (squares underflowed)
    A = ss.kron_strategy(1e-170 * np.eye(3), np.eye(3))
    assert rel(ss.sensitivity(A, "l2").value, 1e-170) <= RTOL
    assert rel(A.sensitivity("l2"), 1e-170) <= RTOL
    # weight 1e-163: θ² underflowed
    A = ss.kron_strategy(np.eye(3), np.eye(3), weight=1e-163)
    assert rel(A.sensitivity("l2"), 1e-163) <= RTOL
    # 1e-170 ⊗ 1e170 gave nan (0·inf)
    A = ss.kron_strategy(1e-170 * H6, 1e170 * I5)
    assert rel(A.sensitivity("l2"), 2.0) <= RTOL and rel(A.sensitivity("l1"), 4.0) <= RTOL
    # weight 1e200 raised OverflowError (θ² = 1e400)
    A = ss.kron_strategy(H6, I5, weight=1e200)
    assert rel(A.sensitivity("l2"), 2e200) <= RTOL and rel(A.sensitivity("l1"), 4e200) <= RTOL


@settings(max_examples=60, deadline=None)
@given(e1=exponents, e2=exponents, ew=exponents, norm=hs.sampled_from(["l1", "l2"]))
def test_product_sensitivity_at_any_scale(e1, e2, ew, norm):
    c1, c2, w = 10.0**e1, 10.0**e2, 10.0**ew
    base = ss.kron_strategy(H6, I5).sensitivity(norm)
    A = ss.kron_strategy(c1 * H6, c2 * I5, weight=w)
    logs = (math.log(base), math.log(c1), math.log(c2), math.log(w))
    true_log10 = math.fsum(logs) / math.log(10)
    # float64's normal range is [2.2e-308, 1.8e308]; Δ within 1e-9 (in log10) of either end may round either way
    low, high = math.log10(sys.float_info.min), math.log10(sys.float_info.max)
    if low + 1e-9 < true_log10 < high - 1e-9:
        s = ss.sensitivity(A, norm)
        assert s.exact and s.method == "product"
        log_close(s.value, *logs)
    elif not (low - 1e-9 <= true_log10 <= high + 1e-9):  # not a normal float64: a clear refusal, never 0 or inf
        with pytest.raises(ValueError, match="outside float64's normal range"):
            ss.sensitivity(A, norm)


@settings(max_examples=40, deadline=None)
@given(k=hs.integers(min_value=-290, max_value=290), norm=hs.sampled_from(["l1", "l2"]),
       method=hs.sampled_from(["uniform", "scan", "upper_bound"]))
def test_union_sensitivity_scales_exactly(k, norm, method):
    """Δ(c·U) = c·Δ(U) on every union path: uniform column norms, the exact scan, and the upper bound."""
    c = 10.0**k
    if method == "uniform":  # I ⊗ 1ᵀ and 1ᵀ ⊗ I: every column norm uniform
        parts = [(np.eye(6), np.ones((1, 5))), (np.ones((1, 6)), np.eye(5))]
    else:
        parts = [(H6, I5), (np.eye(6), np.ones((1, 5)))]
    kw = {"scan_limit": 0} if method == "upper_bound" else {}

    def union(scale):
        return ss.union_strategy([ss.kron_strategy(a, b) for a, b in parts], weights=[scale, 0.5 * scale])

    ref = ss.sensitivity(union(1.0), norm, **kw)
    got = ss.sensitivity(union(c), norm, **kw)
    assert got.method == ref.method == method and got.exact == ref.exact
    assert rel(got.value, c * ref.value) <= RTOL


def test_union_with_negligible_term_is_exact():
    """Terms below 2⁻¹⁰⁷⁴ of the largest vanish in the scaled sum: below rounding, and the union is exact."""
    U = st.stack([st.kron(st.identity(70), st.identity(70)), st.kron(st.hierarchical(70), st.identity(70))],
                 weights=[1.0, 1e-300])
    for norm in ("l1", "l2"):
        s = ss.sensitivity(U, norm)
        assert s.value == 1.0 and s.exact


@pytest.mark.parametrize("case,side", [("tiny", "below"), ("huge", "above")])
@pytest.mark.parametrize("path", ["sensitivity", "method", "structured.evaluate", "mmopt.evaluate"])
def test_implicit_sensitivity_outside_float64_raises(case, side, path):
    A = {"tiny": ss.kron_strategy(1e-200 * np.eye(3), 1e-200 * np.eye(3)),  # Δ = 1e-400
         "huge": ss.kron_strategy(1e200 * np.eye(3), np.eye(3), weight=1e200)}[case]  # Δ = 1e400
    call = {"sensitivity": lambda: ss.sensitivity(A, "l2"), "method": lambda: A.sensitivity("l1"),
            "structured.evaluate": lambda: sa.evaluate(W33, A, EPS1),
            "mmopt.evaluate": lambda: mmopt.evaluate(W33, A, GAUSS)}[path]
    with pytest.raises(ValueError, match=rf"outside float64's normal range: {side}.*rescale it"):
        call()


# -- evaluate and the mechanisms at extreme scales -----------------------------------------------------
@settings(max_examples=20, deadline=None)
@given(e1=exponents, e2=exponents, ew=exponents,
       path=hs.sampled_from(["product", "dense", "loewner_bound", "coupled", "eigenbasis"]))
@example(e1=-17, e2=-30, ew=-30, path="eigenbasis")  # D ≈ 10⁻¹⁵⁴: Σ g/D² overflowed, and it left the exact route
def test_implicit_evaluate_is_scale_invariant(e1, e2, ew, path):
    c1, c2, w = 10.0**e1, 10.0**e2, 10.0**ew
    true_log10 = math.log10(2.0) + e1 + e2 + ew  # Δ ≈ 2·c1·c2·w (Δ₂ of H6 ⊗ I5 is 2)
    if not -300 < true_log10 < 300:
        return  # refused (tested above)

    def strategy(a, b, weight):
        # the coupled path needs equal column norms (H6's are not) and no αI + βJ algebra: Q6 there
        A = ss.kron_strategy(a * (Q6 if path == "coupled" else H6), b * I5, weight=weight)
        if path == "product":
            return A
        # I6 ⊗ I5 measures the pair a second time: no coupled path, and its factor Grams commute with H6 ⊗ I5's
        # (the shared eigenbasis scores it); Q6 ⊗ I5 does not commute, so the bracket scores that union
        second = {"loewner_bound": (a * Q6, b * I5), "eigenbasis": (a * np.eye(6), b * I5)}.get(
            path, (a * np.eye(6), b * np.ones((1, 5))))
        return ss.union_strategy([A, ss.kron_strategy(*second, weight=weight)])

    kw = {"dense_limit": 0} if path in ("loewner_bound", "coupled", "eigenbasis") else {}
    ref = sa.evaluate(W65, strategy(1.0, 1.0, 1.0), GAUSS, **kw)
    r = sa.evaluate(W65, strategy(c1, c2, w), GAUSS, **kw)
    assert r.method == ref.method == path
    assert rel(r.total_squared_error, ref.total_squared_error) <= ERR_RTOL
    assert rel(r.max_variance_upper, ref.max_variance_upper) <= ERR_RTOL
    log_close(r.sensitivity, math.log(ref.sensitivity), math.log(c1), math.log(c2), math.log(w))


def test_union_with_1e300_term_evaluates_and_releases():
    """Reported: ZeroDivisionError inside evaluate (θ² = 1e-600 = 0 in the Löwner bound's θ⁻²)."""
    U = st.stack([st.kron(st.identity(70), st.identity(70)), st.kron(st.hierarchical(70), st.identity(70))],
                 weights=[1.0, 1e-300])
    W = sw.kron(sw.prefix(70), sw.identity(70))
    r = mmopt.evaluate(W, U, EPS1)
    # The 1e-300 block adds 1e-600 of AᵀA: the union's error is I⊗I's, (2/ε²)·Σ incidences = 2·70·71/2·70.
    assert r.sensitivity == 1.0 and r.total_squared_error == pytest.approx(2 * 70 * 71 / 2 * 70, rel=1e-12)
    small = st.stack([st.kron(st.identity(3), st.identity(3)), st.kron(st.hierarchical(3), st.identity(3))],
                     weights=[1.0, 1e-300])
    out = mmopt.release(W33, small, np.arange(9.0), EPS1)
    # Δ rounded upwards (10⁻⁷), and the rounding of the 1e-300 block's answers charged (one product each, u·(2N + 1))
    assert 1.0 <= out.sensitivity <= 1.0 + 2e-7 + 1.01 * RELATIVE_CHARGE and np.all(np.isfinite(out.answers))


def test_union_whose_support_is_below_resolution_is_refused_clearly():
    """When the only block supporting W is 2⁴⁰⁰ times below the largest, the error is beyond float64."""
    U = st.stack([st.kron(st.Strategy(np.ones((1, 3))), st.Strategy(np.ones((1, 3)))),
                  st.kron(st.identity(3), st.identity(3))], weights=[1.0, 1e-300])
    with pytest.raises(ValueError, match=r"weights .* span more than float64 can resolve: term\(s\) \[1\]"):
        mmopt.evaluate(W33, U, EPS1)


@pytest.mark.parametrize("weight", [1e-200, 1e200])
def test_per_query_variances_at_extreme_weight(weight):
    """Per-query variances use c·Δ² of the moderately scaled strategy (Δ² = 1e400 would overflow)."""
    A = st.kron(st.hierarchical(6), st.identity(5), weight=weight)
    r = mmopt.evaluate(W65, A, EPS1, per_query=True)
    ref = mmopt.evaluate(W65, st.kron(st.hierarchical(6), st.identity(5)), EPS1, per_query=True)
    np.testing.assert_allclose(r.per_query_variance, ref.per_query_variance, rtol=ERR_RTOL)
    assert rel(float(np.sum(r.per_query_variance)), r.total_squared_error) <= ERR_RTOL


@pytest.mark.parametrize("scale", [1e-300, 1e-170, 1e170, 1e300])
def test_all_paths_report_the_same_sensitivity(scale):
    """Dense Strategy, its implicit 1-factor product, evaluate (dense and implicit) and the mechanisms' bounds."""
    A = scale * H6
    for norm, p in (("l1", EPS1), ("l2", GAUSS)):
        d = Strategy(A).sensitivity(norm)
        assert rel(d, scale * Strategy(H6).sensitivity(norm)) <= RTOL
        imp = ss.kron_strategy(A)
        assert rel(imp.sensitivity(norm), d) <= RTOL
        assert rel(sa.evaluate(sw.kron(sw.prefix(6)), imp, p).sensitivity, d) <= RTOL
        assert mmopt.evaluate(mmopt.workload.prefix(6), Strategy(A), p).sensitivity == d
        assert d <= _upper_sensitivity(A, norm, "t") <= d * (1 + 1e-14)
        assert d <= upper_sensitivity(imp.sensitivity(norm)) <= d * (1 + 2e-7)


def test_release_upper_sensitivity_refuses_non_normal():
    with pytest.raises(ValueError, match="not a normal positive float64"):
        upper_sensitivity(0.0)
    with pytest.raises(ValueError, match="exceeds float64"):
        upper_sensitivity(1.7976931348623157e308)


@pytest.mark.parametrize("scale", [1e-150, 1e-120, 1e120, 1e150])
def test_factor_traces_are_scale_covariant(scale):
    """tr(G (c²X)⁺) = tr(G X⁺)/c² and the SVD-bound test Δ₂²·tr ≥ floor is taken at a safe scale: at c = 1e150
    Δ₂² = 4e300 and the check's product is formed without it."""
    Wf = mmopt.workload.prefix(6)
    roots, floors = [fc.workload_root(Wf)], [float(np.sum(fc.singular_values(Wf))) ** 2 / 6]
    ref = factor_traces(H6, roots, floors)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or underflow on the way
        got = factor_traces(scale * H6, roots, floors)
    assert rel(got[0] * scale * scale, ref[0]) <= ERR_RTOL


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_factor_traces_beyond_float64_are_nan(scale):
    """A trace of 1e±400 cannot be returned: NaN (skipped by the searches), never 0 (a perfect score) or inf
    (read as "unsupported")."""
    Wf = mmopt.workload.prefix(6)
    roots, floors = [fc.workload_root(Wf)], [float(np.sum(fc.singular_values(Wf))) ** 2 / 6]
    assert np.isnan(factor_traces(scale * H6, roots, floors)[0])
    assert np.isinf(factor_traces(scale * np.eye(6)[:3], roots, floors)[0])  # unsupported stays +inf


def test_max_column_norm_takes_what_a_user_passes():
    """mmopt.strategy.max_column_norm raised AttributeError on a list, numpy's "boolean negative" TypeError on a
    bool array, and warned of an overflow on int8's −128."""
    import warnings

    from mmopt import strategy as st
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert st.max_column_norm([[1, 2], [3, 4]], "l1") == 6.0
        assert st.max_column_norm(np.eye(3, dtype=bool), "l2") == 1.0
        assert st.max_column_norm(np.array([[-128], [1]], dtype=np.int8), "l1") == 129.0
    with pytest.raises(TypeError, match="'A' parameter of max_column_norm must be a 2-D array of real numbers"):
        st.max_column_norm([["a"]], "l1")
    # any norm but 'l1' went down the L2 path un-rooted: 'linf' of [[1, −2], [3, 4]] came back 20.0, the squared L2
    A = np.array([[1.0, -2.0], [3.0, 4.0]])
    assert st.max_column_norm(A, "l1") == 6.0 and st.max_column_norm(A, "l2") == pytest.approx(np.sqrt(20.0))
    for norm in ("linf", "L1", None):
        with pytest.raises(ValueError, match="'norm' parameter of max_column_norm must be one of 'l1', 'l2'"):
            st.max_column_norm(A, norm)
    # float arrays skipped the checks: numpy's zero-size reduction error, a bare unpacking error, "came out as nan"
    for bad, says in ((np.zeros((0, 3)), "must be non-empty"), (np.array([1.0, 2.0]), "must be a 2-D array"),
                      (np.array([[np.nan, 1.0]]), "must be finite")):
        with pytest.raises(ValueError, match=f"'A' parameter of max_column_norm {says}"):
            st.max_column_norm(bad, "l1")
