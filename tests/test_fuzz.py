"""A fuzz table over every public entry point (mmopt issue 12, item 8).

Each case states its expected outcome: either a ValueError/TypeError whose message names the function and
the parameter (``raises``), or a result checked against an independent reference (``returns``). Requests
that would exhaust memory must be refused before allocating, quickly, with the size in the message
(:func:`test_huge_request_is_refused_before_allocating`). Cases whose fix belongs to another module are
marked ``xfail(strict=True)`` with the owner in the reason: they turn into failures (to be unmarked) once fixed.
"""

import math
import time
import tracemalloc
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import sparse

import mmopt
from mmopt import Privacy, Strategy, Workload
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt._base import validation as v
from mmopt.augment import augment, strictly_improved
from mmopt.mechanism import factorize, laplace_mechanism, matrix_mechanism, release

LAP, GAU = Privacy(1.0), Privacy(1.0, 1e-6)
H4 = st.hierarchical(4).matrix
X4 = np.array([3.0, 0.0, 2.0, 5.0])
P4 = wl.prefix(4)


def raises(exc, match):
    return ("raises", exc, match)


def returns(check):
    return ("returns", check)


def owner(who: str, what: str):
    return pytest.mark.xfail(strict=True, reason=f"owner: {who} — {what}")


def case(case_id: str, call, expect, marks=()):
    return pytest.param(call, expect, id=case_id, marks=marks)


def close(a, b, rtol=1e-12):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=0)
    return True


def same_draws(out, reference):
    np.testing.assert_array_equal(out.answers, reference.answers)
    return True


def gaussian_delta_exact(sigma: float, epsilon: float) -> mpmath.mpf:
    """δ(σ, ε) of the Gaussian mechanism at Δ₂ = 1 (Balle & Wang 2018, Thm 8), in 60-digit arithmetic."""
    with mpmath.workdps(60):
        s, e = mpmath.mpf(sigma), mpmath.mpf(epsilon)
        return mpmath.ncdf(1 / (2 * s) - e * s) - mpmath.exp(e) * mpmath.ncdf(-1 / (2 * s) - e * s)


def profile_term(A, w):
    """w (AᵀA)⁺ wᵀ by numpy's pinv (the reference for strictly_improved)."""
    return float(w @ np.linalg.pinv(np.asarray(A).T @ np.asarray(A)) @ w)


def _direct(G, m, family, matrix=None):
    return lambda: Workload(G, m, "direct", matrix, family)


WORKLOAD_CASES = [
    case("from_matrix-complex", lambda: Workload.from_matrix(np.eye(2) * (1 + 1j)),
         raises(TypeError, r"'matrix' parameter of Workload.from_matrix .*complex")),
    case("from_matrix-complex-zero-imag", lambda: Workload.from_matrix(np.eye(2) + 0j),
         raises(TypeError, r"'matrix' parameter of Workload.from_matrix .*np.real")),
    case("from_matrix-str-array", lambda: Workload.from_matrix(np.array([["1", "0"]])),
         raises(TypeError, r"'matrix' parameter of Workload.from_matrix .*dtype <U1")),
    case("from_matrix-None", lambda: Workload.from_matrix(None),
         raises(TypeError, "'matrix' parameter of Workload.from_matrix must be a 2-D array of real numbers")),
    case("from_matrix-object-None-entry", lambda: Workload.from_matrix(np.array([[1, None]], dtype=object)),
         raises(TypeError, "'matrix' parameter of Workload.from_matrix .*NoneType")),
    case("from_matrix-ragged", lambda: Workload.from_matrix([[1, 0], [1]]),
         raises(ValueError, "'matrix' parameter of Workload.from_matrix .*unequal lengths")),
    case("from_matrix-3d", lambda: Workload.from_matrix(np.ones((2, 2, 2))),
         raises(ValueError, r"'matrix' parameter of Workload.from_matrix must be a 2-D array. Got .*\(2, 2, 2\)")),
    case("from_matrix-empty", lambda: Workload.from_matrix(np.zeros((0, 3))),
         raises(ValueError, "'matrix' parameter of Workload.from_matrix must be non-empty")),
    case("from_matrix-nan", lambda: Workload.from_matrix([[1.0, np.nan]]),
         raises(ValueError, "'matrix' parameter of Workload.from_matrix must be finite. Got 1 NaN")),
    case("from_matrix-int-beyond-float", lambda: Workload.from_matrix([[10**400, 1]]),
         raises(ValueError, "'matrix' parameter of Workload.from_matrix must be finite")),
    case("from_matrix-1e200-overflows-G", lambda: Workload.from_matrix(1e200 * np.eye(2)),
         raises(ValueError, r"Workload.from_matrix: WᵀW/m overflows float64 \(max \|W\| = 1e\+200")),
    case("from_matrix-1e-170-underflows-G", lambda: Workload.from_matrix(1e-170 * np.eye(2)),
         raises(ValueError, "Workload.from_matrix: WᵀW/m underflows float64")),
    case("from_matrix-1e150-scaled", lambda: Workload.from_matrix(1e150 * np.array([[1.0, 2.0], [0.0, 3.0]])),
         returns(lambda w: close(w.mean_gram, 1e300 * np.array([[1.0, 2.0], [2.0, 13.0]]) / 2))),
    case("from_matrix-list", lambda: Workload.from_matrix([[1, 0], [1, 1]]),
         returns(lambda w: close(w.gram, [[2.0, 1.0], [1.0, 1.0]]) and w.n_queries == 2)),
    case("from_matrix-bool-predicates", lambda: Workload.from_matrix(np.array([[True, False], [True, True]])),
         returns(lambda w: close(w.gram, [[2.0, 1.0], [1.0, 1.0]]))),
    case("from_matrix-sparse", lambda: Workload.from_matrix(sparse.csr_matrix(np.tril(np.ones((3, 3))))),
         returns(lambda w: close(w.mean_gram, wl.prefix(3).mean_gram))),
    case("from_matrix-fractions", lambda: Workload.from_matrix(np.array([[Fraction(1, 2), 1]], dtype=object)),
         returns(lambda w: close(w.gram, [[0.25, 0.5], [0.5, 1.0]]))),
    case("from_matrix-1x1", lambda: Workload.from_matrix([[2.0]]),
         returns(lambda w: close(w.mean_gram, [[4.0]]) and w.domain_size == 1)),
    case("from_gram-complex", lambda: Workload.from_gram(np.eye(2) * 1j, n_queries=2),
         raises(TypeError, "'gram' parameter of Workload.from_gram .*complex")),
    case("from_gram-m-beyond-float", lambda: Workload.from_gram(np.eye(2), n_queries=2**2000),
         raises(ValueError, "Workload.from_gram: G/m underflows float64")),
    case("from_gram-m-numpy-int", lambda: Workload.from_gram(2 * np.eye(2), n_queries=np.int64(2)),
         returns(lambda w: close(w.mean_gram, np.eye(2)) and w.n_queries == 2)),
    case("from_gram-near-max-float", lambda: Workload.from_gram(1.7e308 * np.diag([1.0, 0.0]), n_queries=1),
         returns(lambda w: close(w.mean_gram, 1.7e308 * np.diag([1.0, 0.0])))),
    case("from_gram-rank-above-m", lambda: Workload.from_gram(np.eye(3), n_queries=2),
         raises(ValueError, "'gram' parameter of Workload.from_gram has rank 3 .* more than n_queries = 2")),
    case("Workload-direct-rank-above-m", _direct(np.eye(3), 2, "gram"),
         raises(ValueError, "'mean_gram' parameter of Workload has rank 3")),
    case("from_gram-sparse", lambda: Workload.from_gram(sparse.identity(3, format="csr"), n_queries=3),
         returns(lambda w: close(w.mean_gram, np.eye(3) / 3))),
    case("Workload-direct-subnormal", _direct(1e-320 * np.eye(2), 2, "gram"),
         raises(ValueError, "Workload: 'mean_gram' underflows float64")),
    case("from_gram-n_queries-str", lambda: Workload.from_gram(np.eye(2), n_queries="2"),
         raises(TypeError, "'n_queries' parameter of Workload.from_gram must be an integer")),
    case("Workload-direct-list", _direct([[1.0, 0.0], [0.0, 1.0]], 2, "gram"),
         raises(TypeError, "'mean_gram' parameter of Workload must be a float64 numpy array. Got list")),
    case("Workload-direct-family-contradicts-gram", _direct(np.eye(3), 3, "prefix"),
         raises(ValueError, "'mean_gram' parameter of Workload does not match the closed form of family 'prefix'")),
    case("Workload-direct-family-wrong-m", _direct(np.eye(3), 3, "all_range"),
         raises(ValueError, "'n_queries' parameter of Workload must be 6 for family 'all_range'")),
    case("Workload-direct-matching-family", _direct(np.array(P4.mean_gram), 4, "prefix"),
         returns(lambda w: mmopt.evaluate(w, H4).max_variance == mmopt.evaluate(P4, H4).max_variance)),
    case("Workload-direct-matrix-missing", _direct(np.eye(2), 2, "matrix"),
         raises(ValueError, "'matrix' parameter of Workload must be given exactly when family='matrix'")),
    case("Workload-direct-matrix-contradicts", _direct(np.eye(2), 2, "matrix", np.ones((2, 2))),
         raises(ValueError, "does not match WᵀW/m of its 'matrix'")),
    case("Workload-direct-not-psd", _direct(np.array([[1.0, 2.0], [2.0, 1.0]]), 2, "gram"),
         raises(ValueError, "'mean_gram' parameter of Workload must be positive semidefinite")),
    case("Workload-direct-family-unknown", _direct(np.eye(2), 2, "ranges"),
         raises(ValueError, "'family' parameter of Workload must be one of")),
    case("Workload-name-int", lambda: Workload.from_matrix(np.eye(2), name=3),
         raises(TypeError, "'name' parameter of Workload.from_matrix must be a str")),
    case("all_range-0", lambda: wl.all_range(0),
         raises(ValueError, "'n' parameter of all_range must be an integer >= 1")),
    case("all_range-float", lambda: wl.all_range(2.0),
         raises(TypeError, "'n' parameter of all_range must be an integer")),
    case("all_range-numpy-int", lambda: wl.all_range(np.int64(3)),
         returns(lambda w: w.n_queries == 6 and close(w.gram, [[3, 2, 1], [2, 4, 2], [1, 2, 3]]))),
    case("prefix-bool", lambda: wl.prefix(True), raises(TypeError, "'n' parameter of prefix must be an integer")),
    case("total-None", lambda: wl.total(None), raises(TypeError, "'n' parameter of total must be an integer")),
    case("identity-1x1", lambda: wl.identity(1), returns(lambda w: close(w.gram, [[1.0]]) and w.n_queries == 1)),
    case("all_predicate-1", lambda: wl.all_predicate(1),
         returns(lambda w: close(w.gram, [[1.0]]) and w.n_queries == 1)),
    case("random_range-seed-str", lambda: wl.random_range(4, 3, seed="a"),
         raises(TypeError, "'seed' parameter of random_range must be a numpy.random.Generator")),
    case("random_range-seed-negative", lambda: wl.random_range(4, 3, seed=-1),
         raises(ValueError, "'seed' parameter of random_range must be an integer >= 0")),
    case("random_range-generator", lambda: wl.random_range(6, 5, seed=np.random.default_rng(1)),
         returns(lambda w: np.array_equal(w.matrix, wl.random_range(6, 5, seed=1).matrix))),
    case("marginals-empty-shape", lambda: wl.marginals((), 0),
         raises(ValueError, "'shape' parameter of marginals must name at least one attribute")),
    case("marginals-k-negative", lambda: wl.marginals((2, 3), -1), raises(ValueError, "'k' parameter of marginals")),
    case("marginals-shape-str", lambda: wl.marginals("ab", 1),
         raises(TypeError, "'shape' parameter of marginals must be an integer")),
    case("marginals-int-shape", lambda: wl.marginals(4, 1),
         returns(lambda w: w.n_queries == 4 and close(w.gram, np.eye(4)))),
    case("marginals-252-parts-one-gram", lambda: wl.marginals((2,) * 10, 5),  # C(10,5) kron parts, never held
         returns(lambda w: w.n_queries == 252 * 32 and close(np.diag(w.mean_gram), 1 / 32)
                 and w.mean_gram[0, -1] == 0.0 and close(w.mean_gram[0, 1], math.comb(9, 5) / (252 * 32)))),
    case("kron-not-workload", lambda: wl.kron(P4, "x"),
         raises(TypeError, "'factors\\[1\\]' parameter of kron")),
    case("stack-empty", lambda: wl.stack([]),
         raises(TypeError, "'workloads' parameter of stack must be a non-empty list")),
    case("stack-not-a-list", lambda: wl.stack(P4), raises(TypeError, "'workloads' parameter of stack")),
    case("stack-weights-complex", lambda: wl.stack([P4], weights=[1j]),
         raises(TypeError, "'weights' parameter of stack .*complex")),
    case("stack-weight-squared-overflows", lambda: wl.stack([P4], weights=[1e200]),
         raises(ValueError, "'weights' parameter of stack must be non-zero, with squares within float64")),
    case("stack-weight-squared-underflows", lambda: wl.stack([P4], weights=[1e-200]),
         raises(ValueError, "'weights' parameter of stack must be non-zero, with squares within float64")),
    case("stack-weight-nan", lambda: wl.stack([P4], weights=[np.nan]),
         raises(ValueError, "'weights' parameter of stack must be finite")),
]

STRATEGY_CASES = [
    case("Strategy-complex", lambda: Strategy(np.eye(2) * 1j),
         raises(TypeError, "'matrix' parameter of Strategy .*complex")),
    case("Strategy-str", lambda: Strategy("abc"),
         raises(TypeError, "'matrix' parameter of Strategy must be a 2-D array")),
    case("Strategy-None", lambda: Strategy(None), raises(TypeError, "'matrix' parameter of Strategy .*NoneType")),
    case("Strategy-empty", lambda: Strategy(np.zeros((0, 2))),
         raises(ValueError, "'matrix' parameter of Strategy must be non-empty")),
    case("Strategy-inf", lambda: Strategy([[1.0, np.inf]]),
         raises(ValueError, "'matrix' parameter of Strategy must be finite")),
    case("Strategy-name-int", lambda: Strategy(np.eye(2), 5),
         raises(TypeError, "'name' parameter of Strategy must be a str")),
    case("Strategy-l1-norm-overflows", lambda: Strategy(np.full((4, 1), 1e308)),
         raises(ValueError, "'matrix' parameter of Strategy has a column whose L1 norm exceeds float64")),
    case("Strategy-sparse", lambda: Strategy(sparse.csr_matrix(H4)),
         returns(lambda A: close(A.matrix, H4) and A.sensitivity() == 3.0)),
    case("Strategy-bool", lambda: Strategy(H4.astype(bool)), returns(lambda A: close(A.matrix, H4))),
    case("Strategy-fractions", lambda: Strategy(np.array([[Fraction(1, 3), 1]], dtype=object)),
         returns(lambda A: close(A.matrix, [[1 / 3, 1.0]]))),
    case("sensitivity-l2-1e-170", lambda: Strategy(1e-170 * H4).sensitivity("l2"),
         returns(lambda d: close(d, 1e-170 * math.sqrt(3), rtol=1e-15))),
    case("sensitivity-l2-1e200", lambda: Strategy(1e200 * H4).sensitivity("l2"),
         returns(lambda d: close(d, 1e200 * math.sqrt(3), rtol=1e-15))),
    case("sensitivity-l1-1e-300", lambda: Strategy(1e-300 * H4).sensitivity("l1"),
         returns(lambda d: close(d, 3e-300, rtol=1e-15))),
    case("sensitivity-norm-L1", lambda: st.identity(2).sensitivity("L1"),
         raises(ValueError, "'norm' parameter of Strategy.sensitivity must be one of 'l1', 'l2'")),
    case("sensitivity-norm-list", lambda: st.identity(2).sensitivity(["l1"]),
         raises(ValueError, "'norm' parameter of Strategy.sensitivity must be one of")),
    case("gram-overflows", lambda: Strategy(1e200 * H4).gram, raises(OverflowError, "AᵀA exceeds float64")),
    case("gram-underflows", lambda: Strategy(1e-170 * H4).gram, raises(FloatingPointError, "AᵀA underflows float64")),
    case("gram-read-only", lambda: st.hierarchical(4).gram.flags.writeable, returns(lambda w: w is False)),
    case("square_root-1e-170", lambda: st.square_root(Strategy(1e-170 * H4)).matrix,
         returns(lambda A: close((A * 1e170).T @ (A * 1e170), H4.T @ H4, rtol=1e-12))),
    case("Strategy.from_gram-complex", lambda: Strategy.from_gram(np.eye(2) * 1j),
         raises(TypeError, "'gram' parameter of Strategy.from_gram .*complex")),
    case("Strategy.from_gram-1e-300", lambda: Strategy.from_gram(1e-300 * np.eye(2)).matrix,
         returns(lambda A: close(A, 1e-150 * np.eye(2)))),
    case("hierarchical-branching-float", lambda: st.hierarchical(8, branching=1.5),
         raises(TypeError, "'branching' parameter of hierarchical must be an integer")),
    case("hierarchical-1", lambda: st.hierarchical(1), returns(lambda A: close(A.matrix, [[1.0]]))),
    case("wavelet-0", lambda: st.wavelet(0), raises(ValueError, "'n' parameter of wavelet must be an integer >= 1")),
    case("wavelet-6", lambda: st.wavelet(6), raises(ValueError, r"wavelet\(n=6\) requires n to be a power of 2")),
    case("from_workload-gram-only", lambda: st.from_workload(Workload.from_gram(np.eye(2), n_queries=2)),
         raises(ValueError, "built from its Gram matrix only")),
    case("from_workload-not-workload", lambda: st.from_workload(np.eye(2)),
         raises(TypeError, "'workload' parameter of from_workload must be a Workload")),
]

PRIVACY_CASES = [
    case("Privacy-epsilon-0", lambda: Privacy(0.0), raises(ValueError, "'epsilon' parameter of Privacy")),
    case("Privacy-epsilon-subnormal", lambda: Privacy(5e-324), raises(ValueError, "'epsilon' parameter of Privacy")),
    case("Privacy-epsilon-nan", lambda: Privacy(np.nan), raises(ValueError, "'epsilon' parameter of Privacy")),
    case("Privacy-epsilon-str", lambda: Privacy("1"),
         raises(TypeError, "'epsilon' parameter of Privacy must be a real")),
    case("Privacy-epsilon-complex", lambda: Privacy(1 + 0j), raises(TypeError, "'epsilon' parameter of Privacy")),
    case("Privacy-delta-1", lambda: Privacy(1.0, 1.0), raises(ValueError, "'delta' parameter of Privacy")),
    case("Privacy-delta-None", lambda: Privacy(1.0, None), raises(TypeError, "'delta' parameter of Privacy")),
    case("Privacy-calibration-None", lambda: Privacy(1.0, 1e-5, calibration=None),
         raises(ValueError, "'calibration' parameter of Privacy must be one of")),
    case("Privacy-delta-subnormal-is-private", lambda: Privacy(1.0, 5e-324).unit_noise_scale,
         returns(lambda s: gaussian_delta_exact(s, 1.0) <= mpmath.mpf(5e-324))),
    case("Privacy-large-epsilon-is-private", lambda: Privacy(50.0, 1e-9).unit_noise_scale,
         returns(lambda s: gaussian_delta_exact(s, 50.0) <= mpmath.mpf(1e-9))),
    case("Privacy-noise_scale-underflow", lambda: Privacy(1e300).noise_scale(1e-30),
         raises((ValueError, ArithmeticError), "noise|sensitivity|epsilon|underflow"),
         owner("privacy.py", "noise_scale(1e-30) at ε=1e300 returns 0.0 "
                                                          "(no noise) instead of refusing the underflow")),
]

ERROR_CASES = [
    case("evaluate-domain-mismatch", lambda: mmopt.evaluate(P4, st.identity(5)),
         raises(ValueError, "evaluate: the workload has domain size n=4 but the strategy has n=5")),
    case("evaluate-strategy-complex", lambda: mmopt.evaluate(P4, H4 * 1j),
         raises(TypeError, "'strategy' parameter of evaluate .*complex")),
    case("evaluate-strategy-workload", lambda: mmopt.evaluate(P4, P4),
         raises(TypeError, "'strategy' parameter of evaluate must be a Strategy or a matrix")),
    case("evaluate-1x1", lambda: mmopt.evaluate(wl.identity(1), [[2.0]], LAP).total_squared_error,
         returns(lambda t: close(t, 2.0))),  # (2/ε²)·Δ²·tr(G (AᵀA)⁻¹) = 2·4·(1/4)
    case("evaluate-norm-l3", lambda: mmopt.evaluate(P4, H4, norm="l3"),
         raises(ValueError, "'norm' parameter of evaluate")),
    case("evaluate-1e-170-strategy", lambda: mmopt.evaluate(P4, 1e-170 * H4, LAP).total_squared_error,
         returns(lambda t: close(t, mmopt.evaluate(P4, H4, LAP).total_squared_error, rtol=1e-9))),
    case("evaluate-1e170-strategy", lambda: mmopt.evaluate(P4, 1e170 * H4, GAU).total_squared_error,
         returns(lambda t: close(t, mmopt.evaluate(P4, H4, GAU).total_squared_error, rtol=1e-9))),
    case("evaluate-per_query-str", lambda: mmopt.evaluate(P4, H4, per_query="yes"),
         raises(TypeError, "'per_query' parameter of evaluate")),
    case("expected_error-sparse", lambda: mmopt.expected_error(P4, sparse.csr_matrix(H4), LAP),
         returns(lambda t: close(t, mmopt.expected_error(P4, H4, LAP)))),
    case("query_error-complex", lambda: mmopt.query_error([1 + 1j, 0], st.identity(2)),
         raises(TypeError, "'query' parameter of query_error .*complex")),
    case("query_error-strings", lambda: mmopt.query_error(["a", "b"], st.identity(2)),
         raises(TypeError, "'query' parameter of query_error must be a 1-D array of real numbers")),
    case("query_error-unsupported", lambda: mmopt.query_error([0.0, 1.0], [[1.0, 0.0]]),
         raises(ValueError, "query_error: strategy 'strategy' does not support this query")),
    case("supports-domain-mismatch", lambda: mmopt.supports(P4, st.identity(5)),
         raises(ValueError, "supports: the workload has domain size n=4 but the strategy has n=5")),
    case("supports-workload-str", lambda: mmopt.supports("W", H4),
         raises(TypeError, "'workload' parameter of supports must be a Workload")),
    case("svd_bound-not-workload", lambda: mmopt.svd_bound(np.eye(2)),
         raises(TypeError, "'workload' parameter of svd_bound must be a Workload")),
    case("svd_bound-privacy-float", lambda: mmopt.svd_bound(P4, 1.0),
         raises(TypeError, "'privacy' parameter of svd_bound")),
    case("error_profile-complex", lambda: mmopt.error_profile(np.eye(2) * 1j),
         raises(TypeError, "'strategy' parameter of error_profile .*complex")),
    case("error_profile-1e-170-not-inf", lambda: mmopt.error_profile(1e-170 * np.eye(2)),
         raises((ArithmeticError, ValueError), "error_profile")),
    case("profile_equivalent-1e-170", lambda: mmopt.profile_equivalent(1e-170 * np.eye(2), 2e-170 * np.eye(2)),
         returns(lambda same: same is False)),
    case("profile_equivalent-domain", lambda: mmopt.profile_equivalent(np.eye(2), np.eye(3)),
         returns(lambda same: same is False)),
    case("eigen_structure-str", lambda: mmopt.eigen_structure("abc"),
         raises(TypeError, "'strategy' parameter of eigen_structure must be a 2-D array")),
    case("eigen_structure-1e-170", lambda: mmopt.eigen_structure(1e-170 * np.eye(2)),
         raises(ArithmeticError, "AᵀA underflows float64")),
]

OPTIMIZE_CASES = [
    case("optimize-not-workload", lambda: mmopt.optimize(np.eye(2)),
         raises(TypeError, "'workload' parameter of optimize")),
    case("optimize-method", lambda: mmopt.optimize(P4, method="best"),
         raises(ValueError, "'method' parameter of optimize")),
    case("optimize-norm", lambda: mmopt.optimize(P4, norm="l3"), raises(ValueError, "'norm' parameter of optimize")),
    case("optimize-tol-0", lambda: mmopt.optimize(P4, tol=0.0), raises(ValueError, "'tol' parameter of optimize")),
    case("optimize-tol-nan", lambda: mmopt.optimize(P4, tol=np.nan), raises(ValueError, "'tol' parameter of optimize")),
    case("optimize-max_iterations-0", lambda: mmopt.optimize(P4, max_iterations=0),
         raises(ValueError, "'max_iterations' parameter of optimize")),
    case("optimize-options-unknown", lambda: mmopt.optimize(P4, options={"bogus": 1}), raises(ValueError, "bogus")),
    case("optimize-seed-str", lambda: mmopt.optimize(P4, method="min_error", seed="a"),
         raises((TypeError, ValueError), "'seed' parameter of optimize")),
    case("optimize-verbose-str", lambda: mmopt.optimize(P4, verbose="yes"),
         raises(TypeError, "'verbose' parameter of optimize")),
    case("optimize-initial-complex", lambda: mmopt.optimize(P4, method="min_sensitivity", initial=H4 * 1j),
         raises(TypeError, "'initial' parameter of optimize .*complex")),
    case("optimize-solver-unknown", lambda: mmopt.optimize(P4, solver="NOPE"), raises(ValueError, "NOPE")),
    case("optimize-callable-returns-int", lambda: mmopt.optimize(P4, method=lambda W, G, opts: 3),
         raises(TypeError, "'method' parameter of optimize")),
    case("optimize-1x1", lambda: mmopt.optimize(wl.identity(1), method="svd_strategy").objective,
         returns(lambda obj: close(obj, 1.0))),
    case("optimize-svd_strategy-closed-form", lambda: mmopt.optimize(P4, method="svd_strategy"),
         returns(lambda r: close(r.objective, mmopt.expected_error(P4, r.strategy), rtol=1e-12)
                 and r.objective >= mmopt.svd_bound(P4) * (1 - 1e-12))),
]

AUGMENT_CASES = [
    case("augment-matrix", lambda: augment(np.eye(2)),  # a matrix is the Strategy it is, as everywhere
         returns(lambda A: isinstance(A, Strategy) and close(A.matrix, np.eye(2)))),
    case("augment-list", lambda: augment("abc"), raises(TypeError, "'strategy' parameter of augment")),
    case("augment-norm", lambda: augment(st.identity(2), norm="l3"), raises(ValueError, "'norm' parameter of augment")),
    case("augment-rows-complex", lambda: augment(st.identity(2), rows=[[1j, 0]]),
         raises(TypeError, "'rows' parameter of augment .*complex")),
    case("augment-rows-width", lambda: augment(st.identity(2), rows=[[1.0, 0.0, 0.0]]),
         raises(ValueError, "'rows' parameter of augment must have n=2 columns")),
    case("augment-1e-170-scale", lambda: augment(Strategy(1e-170 * np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))),
         returns(lambda A: close(A.matrix * 1e170, [[1, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 2]], rtol=1e-12))),
    case("augment-1e200-l2", lambda: augment(Strategy(1e200 * np.array([[1.0, 0.6], [0.0, 0.0]])), norm="l2"),
         returns(lambda A: close(A.matrix[-1] * 1e-200, [0.0, 0.8], rtol=1e-12))),
    case("strictly_improved-unsupported-to-supported", lambda: strictly_improved([[1.0, 0.0]], [[0.0, 1.0]], [0, 1]),
         returns(lambda r: r is True)),
    case("strictly_improved-unsupported-stays", lambda: strictly_improved([[1.0, 0, 0]], [[0, 1.0, 0]], [0, 0, 1]),
         returns(lambda r: r is False)),
    case("strictly_improved-scale-free", lambda: strictly_improved(1e6 * np.eye(2), [[1e6, 0.0]], [1.0, 0.0]),
         returns(lambda r: r is True and profile_term(np.vstack([1e6 * np.eye(2), [[1e6, 0]]]), np.array([1.0, 0]))
                 < 0.6 * profile_term(1e6 * np.eye(2), np.array([1.0, 0])))),
    case("strictly_improved-rank-deficient-no-gain", lambda: strictly_improved([[1.0, 1, 0]], [[1.0, 0, 1]], [1, 1, 0]),
         returns(lambda r: r is False and close(profile_term([[1, 1, 0], [1, 0, 1]], np.array([1, 1, 0])), 1.0))),
    case("strictly_improved-rank-deficient-gain", lambda: strictly_improved([[1.0, 1, 0]], [[1.0, 1, 0]], [1, 1, 0]),
         returns(lambda r: r is True)),
    case("strictly_improved-query-length", lambda: strictly_improved(st.identity(3), [[1.0, 0, 0]], [1, 0]),
         raises(ValueError, "'query' parameter of strictly_improved must have length 3")),
    case("strictly_improved-rows-str", lambda: strictly_improved(st.identity(2), "ab", [1, 0]),
         raises(TypeError, "'rows' parameter of strictly_improved")),
]

MM = lambda x, **kw: matrix_mechanism(P4, H4, x, LAP, **kw)  # noqa: E731
MECHANISM_CASES = [
    case("mm-x-nan", lambda: MM([1.0, np.nan, 0, 0], rng=0),
         raises(ValueError, "'x' parameter of matrix_mechanism must be finite")),
    case("mm-x-inf", lambda: MM([1.0, np.inf, 0, 0], rng=0),
         raises(ValueError, "'x' parameter of matrix_mechanism must be finite")),
    case("mm-x-negative", lambda: MM([1.0, -1.0, 0, 0], rng=0),
         raises(ValueError, "'x' parameter of matrix_mechanism must hold counts >= 0")),
    case("mm-x-length", lambda: MM([1.0, 2.0], rng=0),
         raises(ValueError, "'x' parameter of matrix_mechanism must have length 4")),
    case("mm-x-2d", lambda: MM(np.ones((2, 4)), rng=0),
         raises(ValueError, "'x' parameter of matrix_mechanism must be a 1-D array")),
    case("mm-x-complex", lambda: MM(X4 + 0j, rng=0), raises(TypeError, "'x' parameter of matrix_mechanism .*complex")),
    case("mm-x-str", lambda: MM("abcd", rng=0), raises(TypeError, "'x' parameter of matrix_mechanism")),
    case("mm-x-sparse", lambda: MM(sparse.csr_matrix(X4), rng=0),
         raises(TypeError, "'x' parameter of matrix_mechanism must be a dense")),
    case("mm-x-huge", lambda: MM(np.full(4, 1e308), rng=0),
         raises(ValueError, "'x' parameter of matrix_mechanism is too large")),
    case("mm-x-list-of-ints", lambda: MM([3, 0, 2, 5], rng=7), returns(lambda out: same_draws(out, MM(X4, rng=7)))),
    case("mm-x-int-dtype", lambda: MM(X4.astype(np.int32), rng=7), returns(lambda out: same_draws(out, MM(X4, rng=7)))),
    case("mm-rng-str", lambda: MM(X4, rng="seed"), raises(TypeError, "'rng' parameter of matrix_mechanism")),
    case("mm-rng-float", lambda: MM(X4, rng=1.5), raises(TypeError, "'rng' parameter of matrix_mechanism")),
    case("mm-rng-seedsequence", lambda: MM(X4, rng=np.random.SeedSequence(3)),
         returns(lambda out: same_draws(out, MM(X4, rng=np.random.SeedSequence(3))))),
    case("mm-size-0", lambda: MM(X4, rng=0, size=0), raises(ValueError, "'size' parameter of matrix_mechanism")),
    case("mm-size-float", lambda: MM(X4, rng=0, size=2.0), raises(TypeError, "'size' parameter of matrix_mechanism")),
    case("mm-privacy-None", lambda: matrix_mechanism(P4, H4, X4, None),
         raises(TypeError, "'privacy' parameter of matrix_mechanism")),
    case("mm-strategy-complex", lambda: matrix_mechanism(P4, H4 * 1j, X4, LAP),
         raises(TypeError, "'strategy' parameter of matrix_mechanism .*complex")),
    case("mm-noise-scale-underflows", lambda: matrix_mechanism(P4, 1e-30 * H4, X4, Privacy(1e300), rng=0),
         raises(ValueError, "matrix_mechanism: the noise scale .* outside float64's normal range")),
    case("mm-1e-170-strategy", lambda: matrix_mechanism(P4, 1e-170 * H4, X4, LAP, rng=0),
         returns(lambda out: close(out.noise_scale, 3e-170, rtol=1e-15) and np.all(np.isfinite(out.answers)))),
    case("mm-1x1", lambda: matrix_mechanism(wl.identity(1), [[2.0]], [5.0], LAP, rng=0),
         returns(lambda out: close(out.estimate, out.measurements / 2) and close(out.answers, out.estimate))),
    case("lm-gram-only", lambda: laplace_mechanism(Workload.from_gram(np.eye(4), n_queries=4), X4, LAP),
         raises(ValueError, "laplace_mechanism needs the explicit query matrix W")),
    case("lm-x-huge", lambda: laplace_mechanism(P4, np.full(4, 1e308), LAP),
         raises(ValueError, "'x' parameter of laplace_mechanism is too large")),
    case("lm-rng-bool", lambda: laplace_mechanism(P4, X4, LAP, rng=True),
         raises(TypeError, "'rng' parameter of laplace_mechanism")),
    case("factorize-complex", lambda: factorize(H4 * 1j),
         raises(TypeError, "'strategy' parameter of factorize .*complex")),
    case("solve-y-complex", lambda: factorize(H4).solve(np.ones(7) * 1j),
         raises(TypeError, "'y' parameter of LeastSquares.solve")),
    case("solve-1x1", lambda: factorize([[2.0]]).solve([4.0]), returns(lambda xhat: close(xhat, [2.0]))),
]

RELEASE_CASES = [
    case("release-1e-170-gaussian-delta", lambda: release(wl.identity(2), 1e-170 * np.eye(2), [1.0, 2.0], GAU),
         returns(lambda out: 1e-170 <= out.sensitivity <= 1e-170 * (1 + 2e-6) and out.noise_scale > 1e-170)),
    case("release-1e200-gaussian-delta", lambda: release(wl.identity(2), Strategy(1e200 * np.eye(2)), [1.0, 2.0], GAU),
         returns(lambda out: 1e200 <= out.sensitivity <= 1e200 * (1 + 2e-6))),
    case("release-subnormal-delta", lambda: release(wl.identity(2), Strategy(1e-310 * np.eye(2)), [1.0, 2.0], LAP),
         raises(ValueError, "release: the l1 sensitivity of the strategy .* outside float64's normal range")),
    case("release-1x1", lambda: release(wl.identity(1), [[2.0]], [5.0], LAP),
         returns(lambda out: close(out.estimate, out.measurements / 2) and out.sensitivity >= 2.0)),
    case("release-x-huge", lambda: release(P4, H4, np.full(4, 1e308), LAP),
         raises(ValueError, "'x' parameter of release must hold at most 4,294,967,296 records in all.*Got more")),
    case("release-noise_scale-inf", lambda: release(P4, H4, X4, LAP, noise_scale=np.inf),
         raises(ValueError, "'noise_scale' parameter of release")),
    case("release-noise_scale-subnormal", lambda: release(P4, H4, X4, LAP, noise_scale=5e-324),
         raises(ValueError, "release: OpenDP's privacy map does not verify")),
    case("release-noise_scale-str", lambda: release(P4, H4, X4, LAP, noise_scale="3"),
         raises(TypeError, "'noise_scale' parameter of release")),
    case("release-noise_scale-bool", lambda: release(P4, H4, X4, LAP, noise_scale=True),
         raises(TypeError, "'noise_scale' parameter of release")),
]

ALL = (WORKLOAD_CASES + STRATEGY_CASES + PRIVACY_CASES + ERROR_CASES + OPTIMIZE_CASES + AUGMENT_CASES
       + MECHANISM_CASES)


def _run(call, expect):
    if expect[0] == "raises":
        with pytest.raises(expect[1], match=expect[2]):
            call()
    else:
        assert expect[1](call())


@pytest.mark.parametrize(("call", "expect"), ALL)
def test_fuzz(call, expect):
    _run(call, expect)


@pytest.mark.parametrize(("call", "expect"), RELEASE_CASES)
def test_fuzz_release(call, expect):
    pytest.importorskip("opendp")
    _run(call, expect)


HUGE = {
    # issue 31: mmopt.workload.prefix / all_range at these sizes are the O(n) stream workloads (not refused);
    # the dense constructors still refuse before allocating
    "dense all_range(200000)": (lambda: wl.core.all_range(200000), "80,000,000,000 float64 entries"),
    "dense prefix(100000)": (lambda: wl.core.prefix(100000), "20,000,000,000 float64 entries"),
    "all_predicate(100000)": (lambda: wl.all_predicate(100000), "20,000,000,000 float64 entries"),
    "kron(all_range(1000), all_range(1000)).gram": (
        lambda: wl.kron(wl.all_range(1000), wl.all_range(1000)).gram,
        r"1,000,000,000,000 entries \(8 TB of float64\)"),
    "marginals((1000, 1000), 1).dense()": (
        lambda: wl.marginals((1000, 1000), 1).dense(), r"2,000,000,000 entries \(16 GB of float64\)"),
    "random_range(10**6, 10**4)": (lambda: wl.random_range(10**6, 10**4), r"W \(10000×1000000\)"),
    "explicit_matrix(all_predicate(40))": (lambda: wl.all_predicate(40).explicit_matrix(max_entries=10**20),
                                           r"\(1099511627775×40\) would need ~4.3e13"),
    "strategy.identity(10**5)": (lambda: st.identity(10**5), "10,000,000,000 float64 entries"),
    "hierarchical(200000)": (lambda: st.hierarchical(200000), "at least n×n"),
    "hierarchical(10000)": (lambda: st.hierarchical(10000), r"\(19999×10000\) would need 199,990,000 float64"),
    "wavelet(2**20)": (lambda: st.wavelet(2**20), r"1048576×1048576 wavelet strategy would need ~1.0e12"),
    "Strategy(sparse 1e5×1e5)": (lambda: Strategy(sparse.identity(10**5, format="csr")),
                                 r"dense copy of the sparse 'matrix' \(100000×100000\)"),
    "Strategy(1×100000).gram": (lambda: Strategy(np.ones((1, 10**5))).gram, r"100000×100000 Gram matrix AᵀA"),
    "matrix_mechanism(size=10**9)": (lambda: MM(X4, rng=0, size=10**9), "15,000,000,000 float64 entries"),
    "laplace_mechanism(size=10**9)": (lambda: laplace_mechanism(P4, X4, LAP, size=10**9), "4,000,000,000"),
}


def test_huge_prefix_and_ranges_are_streams_built_without_allocating():
    # built once first: the modules the stream path imports lazily (20 MB traced, scipy.stats among them, when this
    # test ran alone) are not the workloads' memory; the second build is measured
    wl.prefix(100000), wl.all_range(200000)
    tracemalloc.start()
    try:
        got = [wl.prefix(100000), wl.all_range(200000)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # 0.6 kB measured; one float64 vector of n entries would be 0.8 / 1.6 MB
    assert [type(w).__name__ for w in got] == ["StreamWorkload", "StreamWorkload"] and peak < 256e3


@pytest.mark.parametrize("call, pattern", HUGE.values(), ids=HUGE.keys())
def test_huge_request_is_refused_before_allocating(call, pattern, monkeypatch):
    # hierarchical(10000) needs 199,990,000 entries: under the default limit, so refuse it at a lower one
    monkeypatch.setattr(v, "MAX_ALLOCATION_ENTRIES", 10**8 if "19999" in pattern else v.MAX_ALLOCATION_ENTRIES)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ValueError, match=pattern) as info:
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 10.0  # allocating would take minutes; tracemalloc slows a loaded machine
    assert peak < 64e6  # refused before allocating: the requests range from 0.8 GB to 16 TB
    assert "MAX_ALLOCATION_ENTRIES" in str(info.value) or "more than the limit" in str(info.value)


@pytest.mark.parametrize("make", [lambda: wl.kron(wl.all_range(1000), wl.all_range(1000)),
                                  lambda: wl.marginals((1000, 1000), 1)], ids=["kron", "marginals"])
def test_large_products_are_implicit_and_small(make):
    """Past 4,096 cells a product or marginal workload keeps its factors: nothing N×N is allocated."""
    tracemalloc.start()
    try:
        W = make()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(W, wl.ImplicitWorkload) and W.domain_size == 10**6 and peak < 64e6


def test_allocation_limit_is_configurable(monkeypatch):
    assert wl.identity(30).domain_size == 30
    monkeypatch.setattr(v, "MAX_ALLOCATION_ENTRIES", 1000)
    with pytest.raises(ValueError, match=r"identity: the 30×30 Gram matrix .* 1,800 float64 entries"):
        wl.identity(30)
    assert v.check_allocation(1000, what="x", caller="c") == 1000


def test_table_is_large_enough():
    assert len(ALL) + len(RELEASE_CASES) + len(HUGE) >= 80
