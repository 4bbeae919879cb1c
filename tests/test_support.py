"""mmopt.dense.support: whether a strategy supports a workload — the Gram's share on A's null space and each stored
query's own, against the Gram's round-off."""

import numpy as np
import pytest

from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.dense import profile as pf
from mmopt.dense import support as sp


def test_support_leak_sees_an_unmeasured_cell():
    prof = pf.profile_of_matrix(np.diag([1.0, 1.0, 0.0]))
    assert sp.support_leak(np.diag([1.0, 1.0, 0.0]), prof) == 0.0
    assert sp.support_leak(np.eye(3), prof) == pytest.approx(1 / 3)


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
    assert sp.support_tolerance(8) < 2e-13  # and round-off stays below it: the suite's supported cases ≤ 7e-17
    assert mmopt.supports(heavy, st.identity(8))


def test_a_light_query_beside_a_heavy_one_is_judged_by_its_own_norm():
    """x₂ − x₃ weighted 1 beside 10⁷·(x₀ + x₁) leaks 10⁻¹⁴ of tr G, under 100·n·eps: supports() said True of
    A = [1 1 0 0; 0 0 1 1], and the mechanism answered x₂ − x₃ with 0 whatever the data. The stored rows are now
    checked one by one (all of x₂ − x₃ lies outside A's row space)."""
    import mmopt
    W = wl.Workload.from_matrix(np.array([[1e7, 1e7, 0, 0], [0, 0, 1.0, -1.0]]))
    A = st.Strategy(np.array([[1.0, 1, 0, 0], [0, 0, 1, 1]]))
    assert sp.support_leak(W.mean_gram, pf.profile_of_matrix(A.matrix)) < sp.support_tolerance(4)  # G alone
    assert sp.unsupported(W.mean_gram, pf.profile_of_matrix(A.matrix), W.matrix) == (True, pytest.approx(1.0))
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


def test_a_light_direction_of_a_gram_only_workload_is_judged_by_itself():
    """W = diag(10⁷, 10⁷, 1)·Qᵀ given by its Gram alone, against A = Q[:, :2]ᵀ: the light direction (share 5·10⁻¹⁵
    of tr G, under the round-off tolerance) was passed and evaluate returned 2.4·10¹⁴ where the error is unbounded.
    G's eigendirections above its round-off are now tested as rows would be."""
    import mmopt
    Q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))
    W = np.diag([1e7, 1e7, 1.0]) @ Q.T
    gram_only = wl.Workload.from_gram(W.T @ W, n_queries=3)
    assert not mmopt.supports(gram_only, Q[:, :2].T)
    with pytest.raises(ValueError, match="does not support workload"):
        mmopt.evaluate(gram_only, Q[:, :2].T)
    assert mmopt.supports(gram_only, Q.T)


@pytest.mark.parametrize("seed", range(5))
def test_a_gram_only_workload_stays_supported_by_its_own_rows(seed):
    """The round-off eigendirections of fl(WᵀW) for a rank-deficient W point anywhere, A's null space included:
    A = W (and A = W rescaled, ill-conditioned rows) must still support the Gram alone."""
    import mmopt
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(5, 12)) * np.logspace(0, 4, 5)[:, None]
    gram_only = wl.Workload.from_gram(W.T @ W, n_queries=5)
    assert mmopt.supports(gram_only, W)
    assert mmopt.supports(gram_only, rng.normal(size=(5, 5)) @ W)


def test_the_row_wise_leak_reads_sparse_rows_without_densifying_them():
    from scipy import sparse
    W = np.array([[1e7, 1e7, 0, 0], [0, 0, 1.0, -1.0]])
    prof = pf.profile_of_matrix(np.array([[1.0, 1, 0, 0], [0, 0, 1, 1]]))
    assert sp.unsupported(W.T @ W, prof, sparse.csr_matrix(W)) == (True, pytest.approx(1.0))
    assert sp.unsupported(W.T @ W, prof, W) == (True, pytest.approx(1.0))


def test_a_cell_the_strategy_never_measures_is_refused_in_every_representation():
    # w = [1, 1e-8] leaks 1e-16 of its norm off A = [1, 0] (under the share test's tolerance) but uses a cell A's
    # zero column never measures: its answer is off by 1e-8·x₁, unbounded; the Gram-only twin was refused already
    import mmopt
    W, A = np.array([[1.0, 1e-8]]), np.array([[1.0, 0.0]])
    for workload in (mmopt.Workload.from_matrix(W), mmopt.Workload.from_gram(W.T @ W, n_queries=1)):
        with pytest.raises(ValueError, match="does not support workload"):
            mmopt.expected_error(workload, A, mmopt.Privacy(1.0))
        assert not mmopt.supports(workload, A)
    assert mmopt.supports(mmopt.Workload.from_matrix(W), np.eye(2))
    # the same factor inside a Kronecker product (the implicit layer's own support test)
    from mmopt.structured import strategies as ss
    from mmopt.structured import workloads as sw
    with pytest.raises(ValueError, match="does not support workload factor"):
        mmopt.expected_error(sw.kron(mmopt.Workload.from_matrix(W), wl.identity(3)),
                             ss.kron_strategy(st.Strategy(A), st.identity(3)), mmopt.Privacy(1.0))
    # a zero column where no query looks is no obstacle (an eigen-root's round-off there is not a use)
    assert np.isfinite(mmopt.expected_error(sw.kron(mmopt.Workload.from_matrix(A), wl.prefix(3)),
                                            ss.kron_strategy(st.Strategy(A), st.identity(3)), mmopt.Privacy(1.0)))


def test_a_bare_matrix_passed_to_evaluate_is_told_how_to_wrap_it():
    # optimize said so; evaluate, expected_error and svd_bound named the four families only (an auditor's probe)
    import scipy.sparse

    import mmopt
    for W, remedy in ((np.eye(3), r"Got ndarray\. Wrap a query matrix with mmopt\.Workload\.from_matrix\(W\)"),
                      (scipy.sparse.eye(3), r"Got dia_matrix\. Wrap a sparse query matrix with "
                                            r"mmopt\.Workload\.from_matrix\(W\)")):
        with pytest.raises(TypeError, match=remedy):
            mmopt.evaluate(W, st.identity(3))
        with pytest.raises(TypeError, match=remedy):
            mmopt.svd_bound(W)
    mmopt.evaluate(mmopt.Workload.from_matrix(scipy.sparse.eye(3)), st.identity(3))  # the remedy works


def test_supports_answers_for_implicit_pairs_exactly_where_evaluate_refuses():
    """mmopt.supports refused any implicit pair with a TypeError ("must be a 2-D array ... Got an entry
    ImplicitStrategy"): now it answers for every family by the rule the evaluation applies, and the refusal is an
    mmopt.Unsupported (a ValueError) callers can catch by type."""
    import mmopt
    W1, A1 = np.array([[1.0, 0, 0], [0, 1, 1e-6]]), np.array([[1.0, 0, 0], [0, 1, 0]])  # a light row, unmeasured cell
    W = wl.kron(mmopt.Workload.from_matrix(W1), wl.identity(1400))
    assert isinstance(W, wl.ImplicitWorkload)
    bad, good = st.kron(st.Strategy(A1), st.identity(1400)), st.kron(st.identity(3), st.identity(1400))
    assert not mmopt.supports(W, bad) and mmopt.supports(W, good)
    for per_query in (False, True):   # the per-query variances judge each factor by the same rule
        with pytest.raises(mmopt.Unsupported, match="does not support workload factor"):
            mmopt.evaluate(W, bad, per_query=per_query)
    M = wl.marginals((10, 10, 10, 10), 2)   # two-way marginals: the pairs (0, 1) and (2, 3) miss (0, 2), …
    assert not mmopt.supports(M, st.marginals((10, 10, 10, 10), [(0, 1), (2, 3)]))
    assert mmopt.supports(M, st.marginals((10, 10, 10, 10), {(0, 1, 2, 3): 1.0}))
    with pytest.raises(mmopt.Unsupported):
        mmopt.evaluate(M, st.marginals((10, 10, 10, 10), [(0, 1), (2, 3)]))
    from mmopt.toeplitz.strategies import sqrt_strategy
    assert mmopt.supports(wl.prefix(20_000), sqrt_strategy(20_000))   # a stream pair: Toeplitz, invertible


def test_a_gram_only_workload_with_light_but_supported_directions_is_not_refused():
    """Moment queries (rank 10 on 32 cells) given by their Gram: eigendirections just above the round-off cut-off are
    accurate only to ~eps·λ_max/λ, and testing them refused the workload even against A = W (a helper's audit);
    its weight on A's null space is ~10⁻²⁰·λ_max. The rows give the oracle."""
    import mmopt
    x = np.linspace(0, 1, 32)
    W = np.vstack([x**j for j in range(10)])
    P = mmopt.Privacy(1.0)
    want = mmopt.evaluate(mmopt.Workload.from_matrix(W), W, P).total_squared_error
    got = mmopt.evaluate(wl.Workload.from_gram(W.T @ W, n_queries=10), W, P).total_squared_error
    # G's condition number is κ(W)² = 1.2·10¹³, so G alone fixes the total to ~eps·κ(W)² = 3·10⁻³ (3.5·10⁻⁵ seen)
    assert got == pytest.approx(want, rel=3e-3)
    Q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(10, 10)))
    for s in (1e-4, 1e-5, 1e-6, 1e-7):
        W2 = np.diag([1.0, s]) @ Q[:, :2].T
        assert mmopt.supports(wl.Workload.from_gram(W2.T @ W2, n_queries=2), W2), s
