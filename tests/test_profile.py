"""mmopt.dense.profile: the profile factor, the one rank rule, and sums of squares that cannot go negative."""

import numpy as np
import pytest

from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.dense import profile as pf


def _paths():
    rng = np.random.default_rng(0)
    ill = np.diag([1.0, 1.0, 1e-5]) @ rng.normal(size=(3, 3))   # κ(AᵀA) ≈ 1e10: QR, not Cholesky
    deficient = rng.normal(size=(2, 5))                          # rank 2 of 5: SVD
    return {"cholesky": st.hierarchical(8).matrix, "qr": ill, "svd": deficient}


@pytest.mark.parametrize("method", ["cholesky", "qr", "svd"])
def test_factor_reproduces_the_pseudo_inverse(method):
    A = _paths()[method]
    prof = pf.profile_of_matrix(A)
    assert prof.method == method
    top = np.abs(prof.matrix).max()
    np.testing.assert_allclose(prof.factor @ prof.factor.T, prof.matrix, rtol=1e-12, atol=1e-12 * top)
    np.testing.assert_allclose(prof.matrix, np.linalg.pinv(A.T @ A, rcond=1e-12, hermitian=True),
                               rtol=1e-6, atol=1e-6 * np.abs(prof.matrix).max())


@pytest.mark.parametrize("k", [-600, -170, 0, 170, 600])
def test_rank_rule_is_relative_to_the_objects_own_scale(k):
    A = np.ldexp(np.random.default_rng(1).normal(size=(3, 6)), k // 2)
    s = np.linalg.svd(A, compute_uv=False)
    assert pf.numerical_rank(s, A.shape) == 3
    assert pf.numerical_rank(np.zeros(3), A.shape) == 0


def test_power_of_two_scale_is_exact():
    A = np.array([[3e-170, -1e-171], [0.0, 7e-170]])
    e = pf.power_of_two_scale(A)
    As = np.ldexp(A, -e)
    assert 0.5 <= np.abs(As).max() < 1.0 and np.array_equal(np.ldexp(As, e), A)


def test_spectrum_cuts_roundoff_eigenvalues():
    W = np.random.default_rng(2).normal(size=(3, 8))
    spec = pf.spectrum(W.T @ W)
    assert spec.rank == 3
    np.testing.assert_allclose(spec.factor @ spec.factor.T, W.T @ W, atol=1e-12)
    np.testing.assert_allclose(spec.svd_sum, np.linalg.svd(W, compute_uv=False).sum(), rtol=1e-12)


def test_trace_is_a_sum_of_squares_where_the_elementwise_sum_cancels():
    """Round-off directions (s ≈ 1e-9) that G does not use: Σ G∘M is garbage, ‖FᵀB‖² is not."""
    G = wl.marginals((3, 3, 3), 1).mean_gram        # rank 7 of 27
    spec = pf.spectrum(G)
    null = np.linalg.svd(np.eye(27) - spec.basis @ spec.basis.T)[0][:, :20]
    A = np.diag(np.r_[np.ones(7), np.full(20, 1e-9)]) @ np.hstack([spec.basis, null]).T
    prof = pf.profile_of_matrix(A)
    assert prof.method in ("qr", "svd")
    exact = float(np.sum(spec.factor**2))           # G's weight sits on the unit directions only
    assert pf.trace_with_profile(G, prof, spec) == pytest.approx(exact, rel=1e-6)
    assert abs(np.sum(G * prof.matrix) - exact) > 1e-3 * exact   # what the old elementwise sum gave
    with pytest.raises(ValueError, match="spectrum"):
        pf.trace_with_profile(G, prof, None)


def test_effective_profile_agrees_with_the_profile_on_the_workloads_queries():
    W = wl.marginals((2, 3, 4), 2)
    spec = pf.spectrum(W.mean_gram)
    A = np.diag(np.geomspace(1.0, 1e-5, 24)) @ np.random.default_rng(4).normal(size=(24, 24))
    prof = pf.profile_of_matrix(A)
    assert not prof.certified and spec.rank < 24
    Me = pf.effective_profile(prof, spec)
    Wm = W.explicit_matrix()
    exact = np.einsum("ij,ij->i", Wm @ prof.matrix, Wm)
    np.testing.assert_allclose(np.einsum("ij,ij->i", Wm @ Me, Wm), exact, rtol=1e-6)
    assert pf.effective_profile(pf.profile_of_matrix(np.eye(24)), spec) is not None


def test_support_leak_sees_an_unmeasured_cell():
    prof = pf.profile_of_matrix(np.diag([1.0, 1.0, 0.0]))
    assert pf.support_leak(np.diag([1.0, 1.0, 0.0]), prof) == 0.0
    assert pf.support_leak(np.eye(3), prof) == pytest.approx(1 / 3)


def test_a_query_outside_the_row_space_is_seen_however_much_the_rest_weighs():
    """e₇ beside 10⁵·(e₀ … e₆) leaks 1.4·10⁻¹¹ of the trace: under the fixed 10⁻⁹ it passed, and evaluate gave
    its query variance 0 and the mechanism answered it with 0 (error x₇², unbounded). Also one coefficient of
    3·10⁻⁵ outside the row space (leak 3·10⁻¹⁰)."""
    import mmopt
    A = st.Strategy(np.eye(8)[:7])
    heavy = wl.stack([wl.Workload.from_matrix(np.eye(8)[:7]), wl.Workload.from_matrix(np.eye(8)[7:])],
                     weights=[1e5, 1.0])
    W = np.eye(8)[:3].copy()
    W[0, 7] = 3e-5
    for workload in (heavy, wl.Workload.from_matrix(W)):
        assert not mmopt.supports(workload, A)
        with pytest.raises(ValueError, match="does not support workload"):
            mmopt.evaluate(workload, A, mmopt.Privacy(1.0))
    assert pf.support_tolerance(8) < 2e-13  # and round-off stays below it: the suite's supported cases ≤ 7e-17
    assert mmopt.supports(heavy, st.identity(8))


def test_a_light_query_beside_a_heavy_one_is_judged_by_its_own_norm():
    """x₂ − x₃ weighted 1 beside 10⁷·(x₀ + x₁) leaks 10⁻¹⁴ of tr G, under 100·n·eps: supports() said True of
    A = [1 1 0 0; 0 0 1 1], and the mechanism answered x₂ − x₃ with 0 whatever the data. The stored rows are now
    checked one by one (all of x₂ − x₃ lies outside A's row space)."""
    import mmopt
    W = wl.Workload.from_matrix(np.array([[1e7, 1e7, 0, 0], [0, 0, 1.0, -1.0]]))
    A = st.Strategy(np.array([[1.0, 1, 0, 0], [0, 0, 1, 1]]))
    assert pf.support_leak(W.mean_gram, pf.profile_of_matrix(A.matrix)) < pf.support_tolerance(4)  # G alone
    assert pf.unsupported(W.mean_gram, pf.profile_of_matrix(A.matrix), W.matrix) == (True, pytest.approx(1.0))
    assert not mmopt.supports(W, A)
    with pytest.raises(ValueError, match="does not support workload"):
        mmopt.evaluate(W, A, mmopt.Privacy(1.0))
    with pytest.raises(ValueError, match="does not support workload"):
        mmopt.matrix_mechanism(W, A, [0, 0, 50, 0], mmopt.Privacy(1.0), rng=0)
    assert mmopt.supports(W, st.Strategy(np.array([[1.0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])))


def test_an_optimisers_rank_deficient_strategy_supports_its_workload():
    """The max-variance minimax's strategy (Strategy.from_gram of the solver's Gram, rank 6 of 8) spans W's row
    space to the solver's accuracy, ~10⁻¹⁰: a tolerance at the computed null space's angle (~10⁻¹³, tried in
    development) refused it, and plan() failed on 16 of 20 random 6×8 workloads. Rows are held to G's round-off."""
    import mmopt
    W = wl.Workload.from_matrix(np.array([[0, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 0, 1, 0, 1], [0, 0, 1, 1, 1, 1, 0, 0],
                                          [0, 1, 0, 0, 0, 0, 0, 1], [1, 0, 0, 1, 1, 0, 0, 1], [0, 1, 0, 1, 1, 0, 1, 0]],
                                         dtype=float))
    G = mmopt.Privacy(1.0, 1e-6)
    r = mmopt.optimize(W, privacy=G, objective="max_variance", targets=16.0)
    assert mmopt.supports(W, r.strategy)
    report = mmopt.evaluate(W, r.strategy, G, per_query=True)
    assert np.max(report.per_query_variance) / G.variance_factor == pytest.approx(r.objective * 16.0, rel=1e-6)
    p = mmopt.plan(W, targets=4.0, kind="se", delta=1e-6)
    assert np.max(mmopt.evaluate(W, p.strategy, p.privacy, per_query=True).per_query_variance) <= 16.0 * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_queries_in_an_ill_conditioned_row_space_stay_supported(seed):
    """The angle bound widens with σ₁/(σ_r − σ_{r+1}): rows built from A's own rows (exactly in its row space up
    to the round-off of forming them) pass for A of condition 10⁸ with a null space."""
    import mmopt
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    V, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    A = U[:, :6] @ np.diag(np.logspace(0, -8, 6)) @ V[:, :6].T  # rank 6 of n = 8, κ = 10⁸
    W = np.vstack([U.T @ A, rng.normal(size=(3, 6)) @ A])  # each singular direction, the weakest too
    assert mmopt.supports(mmopt.Workload.from_matrix(W), A)


def test_the_row_wise_leak_reads_sparse_rows_without_densifying_them():
    from scipy import sparse
    W = np.array([[1e7, 1e7, 0, 0], [0, 0, 1.0, -1.0]])
    prof = pf.profile_of_matrix(np.array([[1.0, 1, 0, 0], [0, 0, 1, 1]]))
    assert pf.unsupported(W.T @ W, prof, sparse.csr_matrix(W)) == (True, pytest.approx(1.0))
    assert pf.unsupported(W.T @ W, prof, W) == (True, pytest.approx(1.0))
