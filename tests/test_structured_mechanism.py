"""Structured mechanism: axis-wise products, exact least squares, Monte-Carlo error = evaluate."""

import numpy as np
import pytest

import mmopt
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.structured import analysis, mechanism
from mmopt.structured import strategies as ss
from mmopt.structured import workloads as sw
from mmopt.structured.bounds import svd_bound

EPS1 = mmopt.Privacy(1.0)


def test_apply_and_answer_match_dense(rng):
    shape = (4, 5, 3)
    W = sw.union([sw.kron(wl.all_range(4), wl.prefix(5), sw.identity_total(3)),
                  sw.kron(wl.identity(4), wl.total(5), wl.all_range(3), weight=2.0)])
    A = ss.union_strategy([ss.kron_strategy(st.hierarchical(4), st.identity(5), st.hierarchical(3)),
                           ss.marginals_strategy(shape, {(0, 2): 1.0, (): 2.0})], weights=[1.0, 0.5])
    x = rng.integers(0, 9, shape).astype(float)
    np.testing.assert_allclose(mechanism.answer(W, x), W.dense() @ x.ravel(), rtol=1e-13)
    np.testing.assert_allclose(mechanism.strategy_apply(A, x), A.dense() @ x.ravel(), rtol=1e-13)
    y = rng.normal(size=A.n_rows)
    np.testing.assert_allclose(mechanism.strategy_apply_transpose(A, y).ravel(), A.dense().T @ y, rtol=1e-12)


@pytest.mark.parametrize("kind", ["product", "union", "rank_deficient_union"])
def test_least_squares_is_pinv(kind, rng):
    if kind == "product":
        A = ss.kron_strategy(st.hierarchical(5), st.Strategy(rng.normal(size=(2, 4))), weight=2.0)  # rank 2 of 4
    elif kind == "union":
        A = ss.union_strategy([ss.kron_strategy(st.hierarchical(5), st.identity(4)),
                               ss.kron_strategy(st.identity(5), st.wavelet(4))])
    else:
        A = ss.marginals_strategy((5, 4), [1.0, 2.0, 0.5, 0.0])  # no full identity: rank-deficient
    y = rng.normal(size=A.n_rows)
    xhat, info = mechanism.least_squares(A, y)
    ref = np.linalg.pinv(A.dense()) @ y
    np.testing.assert_allclose(xhat.ravel(), ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())
    assert info.method == ("pinv" if kind == "product" else "lsmr")


@pytest.mark.parametrize("which", ["product", "union"])
def test_monte_carlo_matches_evaluate(which, rng):
    shape = (6, 5)
    W = sw.union([sw.kron(wl.prefix(6), sw.identity_total(5)), sw.marginals(shape, 1)])
    if which == "product":
        A = ss.kron_strategy(st.hierarchical(6), st.identity(5))
    else:
        A = ss.union_strategy([ss.kron_strategy(st.hierarchical(6), st.identity(5)),
                               ss.marginals_strategy(shape, [1.0, 0.0, 1.0, 0.0])])
    x = rng.integers(0, 50, shape).astype(float)
    runs = 400
    out = mechanism.matrix_mechanism(W, A, x, EPS1, rng=3, size=runs)
    err = np.sum((out.answers - mechanism.answer(W, x)) ** 2, axis=1)
    expected = analysis.evaluate(W, A, EPS1).total_squared_error
    assert out.expected_total == pytest.approx(expected)
    # within 4 standard errors of the sample mean
    assert abs(err.mean() - expected) <= 4 * err.std(ddof=1) / np.sqrt(runs)
    again = mechanism.matrix_mechanism(W, A, x, EPS1, rng=3, size=runs)
    np.testing.assert_array_equal(again.answers, out.answers)


def test_mechanism_validation(rng):
    W = sw.kron(wl.prefix(3), wl.prefix(4))
    A = ss.kron_strategy(st.identity(3), st.identity(4))
    with pytest.raises(ValueError, match=r"'x' parameter of matrix_mechanism must have shape \(3, 4\) or \(12,\)"):
        mechanism.matrix_mechanism(W, A, np.ones(11), EPS1)
    with pytest.raises(ValueError, match="counts >= 0"):
        mechanism.matrix_mechanism(W, A, -np.ones(12), EPS1)
    with pytest.raises(TypeError, match="'privacy' parameter"):
        mechanism.matrix_mechanism(W, A, np.ones(12), 1.0)
    with pytest.raises(ValueError, match="'y' parameter of least_squares"):
        mechanism.least_squares(A, np.ones(5))


def test_outputs_on_either_side_of_the_dense_limit_name_their_budget(rng):
    """kron turns implicit past 4,096 cells, and the implicit output had no ``privacy`` (the dense one has): code
    reading out.privacy raised AttributeError at 64×65 cells (a helper's probe)."""
    gauss = mmopt.Privacy(1.0, 1e-6)
    for p, q in ((8, 8), (64, 65)):  # a dense pair (64 cells: the dense side of 4,096 is minutes of O(n³)), then not
        W, A = wl.kron(wl.prefix(p), wl.prefix(q)), st.kron(st.hierarchical(p), st.hierarchical(q))
        assert isinstance(W, wl.Workload) == (p * q <= 4096)
        out = mmopt.matrix_mechanism(W, A, np.ones(p * q), gauss, rng=rng)
        assert out.privacy == gauss and out.estimate.size == p * q


@pytest.mark.parametrize("privacy", [EPS1, mmopt.Privacy(1.0, 1e-6)], ids=["laplace", "gaussian"])
@pytest.mark.parametrize("which", ["rank_deficient_product", "rank_deficient_marginals"])
def test_monte_carlo_matches_evaluate_for_rank_deficient_strategies(which, privacy):
    """Strategies that measure only what the workload uses (singular AᵀA): evaluate is the simulated mean."""
    rng = np.random.default_rng(5)
    if which == "rank_deficient_product":
        W = sw.kron(wl.prefix(6), wl.total(5))
        A = ss.kron_strategy(st.hierarchical(6), np.ones((1, 5)))          # rank 6 of 30
    else:
        W = sw.marginals((4, 5, 3), 1)
        A = ss.marginals_strategy((4, 5, 3), {(0,): 1.0, (1,): 0.5, (2,): 2.0})   # no full identity
    x = rng.integers(0, 50, W.shape).astype(float)
    runs = 4000
    out = mechanism.matrix_mechanism(W, A, x, privacy, rng=7, size=runs)
    err = np.sum((out.answers - mechanism.answer(W, x)) ** 2, axis=1)
    report = analysis.evaluate(W, A, privacy)
    assert report.total_exact and report.total_squared_error >= svd_bound(W, privacy).value * (1 - 1e-9)
    assert abs(err.mean() - report.total_squared_error) <= 5 * err.std(ddof=1) / np.sqrt(runs)


def test_union_least_squares_with_counts_large_against_the_noise():
    """A union of condition number ~2 was refused ('LSMR did not reach the least-squares solution') once ‖y‖/noise
    passed ~10⁶: Aᵀr's round-off from forming r by cancellation was read as non-convergence, and release drew the
    noise and returned no estimate. x̂ now equals the dense pseudo-inverse's, to the round-off of y's scale."""
    W = mmopt.structured.kron(wl.identity(2), wl.identity(3))
    A = st.stack([st.kron(st.identity(2), st.identity(3)), st.kron(st.hierarchical(2), st.identity(3))])
    x = 1e8 * np.arange(1, 7.0)
    Ad = A.dense()
    for seed in range(5):
        y = Ad @ x + np.random.default_rng(seed).laplace(0.0, 3.0, Ad.shape[0])
        xhat, info = mechanism.least_squares(A, y)
        # LSMR stops at tol·‖y‖ (1e-10 × 2·10⁸ = 0.02): within a third of the noise scale b = 3
        np.testing.assert_allclose(xhat.ravel(), np.linalg.lstsq(Ad, y, rcond=None)[0], rtol=0, atol=1.0)
    rel = mmopt.release(W, A, x, mmopt.Privacy(1.0))
    assert rel.estimate is not None and np.allclose(rel.estimate.ravel(), x, rtol=1e-6)


def test_union_least_squares_is_scale_free_at_the_ends_of_the_float_range():
    """x̂ = A⁺y is linear in y. Counts near 1e300 overflowed ‖y‖ inside LSMR and were refused ("normal-equation
    residual 0 > 1e-10"); near 1e-300 LSMR's norms underflowed and x̂ = 0 came back as if solved. Both now equal
    the dense solution (a consistent system: y = A x)."""
    A = st.stack([st.kron(st.identity(2), st.identity(3)), st.kron(st.hierarchical(2), st.identity(3))])
    Ad = A.dense()
    for big in (1e300, 1e-300):
        x = big * np.arange(1, 7.0)
        xhat, info = mechanism.least_squares(A, Ad @ x)
        np.testing.assert_allclose(xhat.ravel(), x, rtol=1e-9)
    xhat, info = mechanism.least_squares(A, np.zeros(Ad.shape[0]))
    assert not np.any(xhat) and info.iterations == 0


def test_a_square_union_of_full_rank_is_solved_on_every_draw():
    """A 48×48 union of condition 41 (a consistent system): LSMR stops by ‖r‖ ≤ btol‖y‖ + atol‖A‖‖x̂‖, which the
    acceptance test read without its second term, so a third of Laplace draws were refused after the noise."""
    W = mmopt.structured.kron(wl.identity(8), wl.identity(6))
    A = st.stack([st.kron(np.tril(np.ones((8, 8))), np.ones((1, 6))), st.kron(np.eye(8), np.eye(6)[:5])])
    Ad, x = A.dense(), np.arange(48.0)
    assert np.linalg.cond(Ad) < 50  # well conditioned: every solve should succeed
    for seed in range(12):  # seeds 4 and 10 were refused
        y = Ad @ x + np.random.default_rng(seed).laplace(0.0, 20.0, 48)
        xhat, info = mechanism.least_squares(A, y)
        exact = np.linalg.solve(Ad, y)
        # ‖x̂ − x*‖ ≤ cond·‖r‖/σ_min-scale: 41 × 10⁻⁹ relative at most, far below the noise (b = 20)
        np.testing.assert_allclose(xhat.ravel(), exact, rtol=0, atol=1e-6 * np.abs(exact).max())
    out = mechanism.matrix_mechanism(W, A, x, mmopt.Privacy(1.0), rng=0, size=50)  # every run of 50 was refused
    assert out.answers.shape == (50, 48)
    # a solve that does stop short names the function that takes max_iterations (release and matrix_mechanism
    # do not: the message told their users to raise it)
    with pytest.raises(ValueError, match=r"istop=7.*mmopt\.structured\.least_squares\(strategy, y, tol=\.\.\., "
                                         r"max_iterations=\.\.\.\) \(a release returns y as \.measurements\)"):
        mechanism.least_squares(A, Ad @ x, max_iterations=2)


def test_huge_attributes_are_refused_by_name_and_only_used_identities_are_built():
    """marginals((10⁶, 2), {(): 1}) built a 10⁶×10⁶ identity it never used (MemoryError); identity_total(10⁶) too."""
    assert st.marginals((10**6, 2), {(): 1.0}).n_rows == 1
    with pytest.raises(ValueError, match=r"marginals_strategy: the identity factors of sizes \[1000000\]"):
        st.marginals((10**6, 2), {(0,): 1.0})
    with pytest.raises(ValueError, match="identity_total: the .* matrix"):
        sw.identity_total(10**6)


@pytest.mark.parametrize("which", ["product", "marginals"])
def test_an_unsupported_pair_is_refused_in_the_name_of_the_function_called(which):
    # the refusal came from the support check inside and said "evaluate: ..." for matrix_mechanism and release
    if which == "product":
        W, A = sw.kron(wl.prefix(8), wl.identity(6)), st.kron(np.kron(np.eye(2), np.ones((1, 4))), np.eye(6))
    else:
        W, A = sw.marginals((4, 5, 3), 1), ss.marginals_strategy((4, 5, 3), {(0,): 1.0, (1,): 1.0})  # no (2,)
    x = np.ones(W.shape)
    for function in (mmopt.matrix_mechanism, mmopt.release):
        with pytest.raises(ValueError, match=rf"^{function.__name__}: .*does not support"):
            function(W, A, x, mmopt.Privacy(1.0))
    with pytest.raises(ValueError, match=r"^evaluate: .*does not support"):
        mmopt.evaluate(W, A, mmopt.Privacy(1.0))


def test_the_implicit_path_takes_the_seeds_the_dense_path_takes():
    """np.int64(3) and SeedSequence(3) were refused by the implicit matrix_mechanism alone ("Got int64")."""
    H, I3 = mmopt.strategy.hierarchical(4), mmopt.strategy.identity(3)
    Wi = sw.kron(mmopt.workload.prefix(4), mmopt.workload.identity(3))
    K = mmopt.strategy.kron(H, I3)
    runs = [mmopt.matrix_mechanism(Wi, K, np.ones(12), mmopt.Privacy(0.5), rng=r).answers
            for r in (3, np.int64(3), np.random.SeedSequence(3))]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])


@pytest.mark.parametrize("bad, exc", [(np.nan, TypeError), (-1, ValueError), (True, TypeError), (2.5, TypeError),
                                      (None, TypeError)])
def test_max_answers_and_scan_limit_are_checked_before_any_noise(bad, exc):
    # each was accepted and gave answers None (in release after the draw), or a bare '<=' TypeError; a bad
    # scan_limit silently turned the exact scan off (a helper's probe)
    from mmopt.structured.release import release
    W = sw.kron(sw.prefix(2), sw.identity(3))
    A = ss.kron_strategy(np.eye(2), np.eye(3))
    x = np.ones((2, 3))
    with pytest.raises(exc, match="'max_answers' parameter of matrix_mechanism"):
        mechanism.matrix_mechanism(W, A, x, mmopt.Privacy(1.0), rng=0, max_answers=bad)
    with pytest.raises(exc, match="'max_answers' parameter of release"):
        release(W, A, x, mmopt.Privacy(1.0), max_answers=bad)
    if bad is not None:
        with pytest.raises(exc, match="'scan_limit' parameter of sensitivity"):
            ss.sensitivity(A, scan_limit=bad)
    assert mechanism.matrix_mechanism(W, A, x, mmopt.Privacy(1.0), rng=0, max_answers=0).answers is None
    with pytest.raises(TypeError, match="'theta' parameter of marginals_strategy must hold real numbers, not bool"):
        ss.marginals_strategy((2, 3), [True, False, True, True])


def test_a_structured_output_points_at_the_table_too():
    W, A = sw.kron(wl.prefix(3), wl.prefix(3)), ss.kron_strategy(st.hierarchical(3), st.hierarchical(3))
    out = mechanism.matrix_mechanism(W, A, np.ones(9), mmopt.Privacy(1.0, 1e-6), rng=0)
    with pytest.raises(AttributeError, match=r"'StructuredOutput' object has no attribute 'std_error'; .*"
                                             r"answers_table"):
        _ = out.std_error
    assert out.privacy == mmopt.Privacy(1.0, 1e-6)
