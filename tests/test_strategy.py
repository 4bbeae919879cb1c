"""Strategies: Fig. 1 instances, sensitivities of §6.1, Table 1 spectra, construction for any n."""

import numpy as np
import pytest

import mmopt
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.dense import _classic
from mmopt.error import error_profile

H4 = [[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
Y4 = [[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]]


def test_fig1_instances_exact():
    np.testing.assert_array_equal(st.identity(4).matrix, np.eye(4))
    np.testing.assert_array_equal(st.hierarchical(4).matrix, H4)
    np.testing.assert_array_equal(st.wavelet(4).matrix, Y4)


def test_example2_sensitivities():
    assert [s.sensitivity("l1") for s in (st.identity(4), st.hierarchical(4), st.wavelet(4))] == [1, 3, 3]


def test_fig2_pseudo_inverses():
    H = st.hierarchical(4)
    H_plus = error_profile(H).matrix @ H.matrix.T  # A⁺ = (AᵀA)⁻¹Aᵀ
    fig2b = np.array([[3, 5, -2, 13, -8, -1, -1], [3, 5, -2, -8, 13, -1, -1],
                      [3, -2, 5, -1, -1, 13, -8], [3, -2, 5, -1, -1, -8, 13]]) / 21
    np.testing.assert_allclose(H_plus, fig2b, atol=1e-12)
    fig2c = [[.25, .25, .5, 0], [.25, .25, -.5, 0], [.25, -.25, 0, .5], [.25, -.25, 0, -.5]]
    np.testing.assert_allclose(np.linalg.inv(st.wavelet(4).matrix), fig2c, atol=1e-15)


@pytest.mark.parametrize("k", range(1, 11))
def test_sec61_sensitivities_power_of_two(k):
    n = 2**k
    for A in (st.hierarchical(n), st.wavelet(n)):
        assert A.sensitivity("l1") == k + 1
        assert A.sensitivity("l2") == pytest.approx(np.sqrt(k + 1), rel=1e-14)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 10])
def test_table1_spectra(k):
    n = 2**k
    expected_h = [2 * n - 1] + [2**j - 1 for j in range(1, k + 1) for _ in range(n // 2**j)]
    expected_y = [n] + [2**j for j in range(1, k + 1) for _ in range(n // 2**j)]
    np.testing.assert_allclose(np.linalg.eigvalsh(st.hierarchical(n).gram), sorted(expected_h), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.linalg.eigvalsh(st.wavelet(n).gram), sorted(expected_y), rtol=1e-9, atol=1e-9)
    # eigenvectors: the Haar vectors h_v of block size 2^j (Table 1)
    for j in (1, k):
        h = np.zeros(n)
        h[: 2 ** (j - 1)], h[2 ** (j - 1): 2**j] = 1, -1
        np.testing.assert_allclose(st.hierarchical(n).gram @ h, (2**j - 1) * h, atol=1e-9)
        np.testing.assert_allclose(st.wavelet(n).gram @ h, 2**j * h, atol=1e-9)


@pytest.mark.parametrize("n,b", [(5, 2), (12, 2), (9, 3), (10, 3), (100, 4), (1, 2), (7, 16)])
def test_hierarchical_any_n(n, b):
    A = st.hierarchical(n, branching=b).matrix
    assert A.shape[1] == n
    assert np.linalg.matrix_rank(A) == n
    assert set(np.unique(A)) <= {0.0, 1.0}
    assert A[0].sum() == n  # root counts everything
    # every node's children partition it into near-equal parts: each cell in exactly one node per level
    depth = int(np.max(A.sum(axis=0)))
    assert depth == st.hierarchical(n, branching=b).sensitivity()
    assert depth <= int(np.ceil(np.log(n) / np.log(b) - 1e-12)) + 1 if n > 1 else depth == 1


def test_from_gram_and_square_root_are_profile_equivalent(rng):
    A = rng.normal(size=(9, 5))
    B = st.Strategy.from_gram(A.T @ A)
    np.testing.assert_allclose(B.gram, A.T @ A, rtol=1e-10, atol=1e-10)
    C = st.square_root(st.hierarchical(4))
    np.testing.assert_allclose(C.gram, st.hierarchical(4).gram, atol=1e-12)
    # any profile-equivalent strategy keeps the column L2 norms, so √(log₂n + 1) bounds its Δ₁ below (§6.1)
    assert C.sensitivity("l2") == pytest.approx(np.sqrt(3))
    assert C.sensitivity("l1") >= np.sqrt(3)
    # §6.1 / Fig. 4a: with the Table-1 (Haar) eigenbasis, D_H Q_H has Δ = √(7/4) + √(3/4) + √(1/2)
    Q = np.array([[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]]) / np.array([[2], [2], [2**.5], [2**.5]])
    D = np.sqrt(np.diag(Q @ st.hierarchical(4).gram @ Q.T))  # eigenvalues 7, 3, 1, 1
    fig4a = st.Strategy(D[:, None] * Q)
    np.testing.assert_allclose(fig4a.gram, st.hierarchical(4).gram, atol=1e-12)
    assert fig4a.sensitivity() == pytest.approx(np.sqrt(7 / 4) + np.sqrt(3 / 4) + np.sqrt(1 / 2), rel=1e-12)


def test_strategy_is_read_only():
    A = st.identity(3)
    with pytest.raises(ValueError):
        A.matrix[0, 0] = 5.0


def test_from_gram_of_singular_gram_is_not_below_the_bound():
    """Round-off eigenvalues of a singular X (~1e-17) must become exact zeros of A, not 1e-8 singular values."""
    import mmopt
    from mmopt import workload as wl
    from mmopt.search.l2_fast import solve_l2

    W = wl.marginals((2, 3, 2), 1)
    sol = solve_l2(W.gram)
    A = st.Strategy.from_gram(sol.gram)
    err = mmopt.evaluate(W, A, norm="l2").total_squared_error
    assert err >= sol.dual_bound * (1 - 1e-9)
    assert err == pytest.approx(sol.dual_bound, rel=1e-6)


@pytest.mark.parametrize("k", [-1000, -600, -300, 0, 300, 600, 900])
def test_sensitivity_and_gram_are_scale_covariant(k, rng):
    """A·2ᵏ has exactly 2ᵏ times A's sensitivities (the scaling is exact), at any representable scale."""
    A = rng.normal(size=(7, 5))
    As = st.Strategy(np.ldexp(A, k))
    for norm in st.NORMS:
        assert As.sensitivity(norm) == np.ldexp(st.Strategy(A).sensitivity(norm), k)
    Xs, e = As.scaled_gram()
    np.testing.assert_allclose(np.ldexp(Xs, 2 * e - 2 * k), A.T @ A, rtol=1e-13, atol=1e-13)
    if abs(k) >= 600:  # AᵀA itself is outside float64: refused, never inf or 0
        with pytest.raises(OverflowError if k > 0 else FloatingPointError, match="Rescale A"):
            _ = As.gram


@pytest.mark.parametrize("b", [2, 3, 5, 16])
def test_tree_size_counts_the_rows(b):
    for n in list(range(1, 40)) + [100, 257, 1000]:
        assert _classic._tree_size(n, b) == st.hierarchical(n, b).matrix.shape[0]


def test_strategy_copies_and_freezes():
    M = np.eye(3)
    A = st.Strategy(M)
    M[0, 0] = 7.0  # the caller's array stays theirs
    assert A.matrix[0, 0] == 1.0 and not A.matrix.flags.writeable and not A.gram.flags.writeable


@pytest.mark.parametrize("make", [lambda: wl.all_predicate(64), lambda: wl.prefix(128)])
def test_svd_strategy_is_basis_free(make):
    """Thm 5.25's strategy is G^{1/4}: the same at 1 and 2 BLAS threads (all predicates: an (n−1)-fold σ)."""
    from threadpoolctl import threadpool_limits

    W = make()
    with threadpool_limits(limits=1):
        A1 = st.svd_strategy(W).matrix
    with threadpool_limits(limits=2):
        A2 = st.svd_strategy(W).matrix
    scale = np.max(np.abs(A1))
    assert np.max(np.abs(A1 - A2)) <= 1e-10 * scale
    np.testing.assert_allclose(A1, A1.T, rtol=0, atol=1e-12 * scale)  # symmetric: G^{1/4}
    # symmetric PSD with A⁴ = G: the unique PSD fourth root, so no eigenbasis choice can leak in (the old
    # diag(√σ)·P_W rows were neither symmetric nor basis-free)
    assert np.min(np.linalg.eigvalsh(A1)) >= -1e-10 * scale
    G = W.gram
    np.testing.assert_allclose(np.linalg.matrix_power(A1, 4), G, rtol=0, atol=1e-9 * np.max(np.abs(G)))


def test_svd_strategy_rank_deficient_rows_in_range():
    """Zero directions get no weight: A* = G^{1/4} has rows in the row space of W and supports W."""
    W = wl.Workload.from_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    A = st.svd_strategy(W).matrix
    null = np.array([1.0, -1.0, 1.0]) / np.sqrt(3)  # W @ null = 0
    assert np.max(np.abs(A @ null)) <= 1e-14
    assert mmopt.supports(W, A)
    np.testing.assert_allclose(A.T @ A @ A.T @ A, W.gram, atol=1e-13)


@pytest.mark.parametrize("weakest", [1e-9, 1e-12])
def test_svd_strategy_keeps_a_weak_direction_of_a_stored_w(weakest):
    """σ = 10⁻⁹·σ₁ is an eigenvalue 10⁻¹⁸ of G, under G's rank rule: G^{1/4} from G dropped that direction, and
    the strategy no longer supported W (now refused by evaluate; before, scored as if the direction were not
    asked). From W's own SVD it is kept: A* supports W and its error lies above the SVD bound."""
    rng = np.random.default_rng(0)
    U, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    V, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    W = mmopt.Workload.from_matrix(U[:, :6] @ np.diag(np.logspace(0, np.log10(weakest), 6)) @ V.T)
    A = st.svd_strategy(W)
    sv = np.linalg.svd(A.matrix, compute_uv=False)
    # √(σ₆/σ₁): the weak direction is in A; σ₆ is accurate to eps·σ₁, so relatively to eps/weakest (halved by √)
    assert sv[-1] / sv[0] == pytest.approx(weakest ** 0.5, rel=100 * np.finfo(float).eps / weakest)
    assert mmopt.supports(W, A)
    assert mmopt.evaluate(W, A).total_squared_error >= mmopt.svd_bound(W) * (1 - 1e-9)
    assert np.allclose(A.matrix, A.matrix.T, rtol=0, atol=0)


def test_haar_decompositions_are_figure_4_and_section_6_1():
    """Fig. 4(a)/(b) entry by entry at n = 4, and §6.1's sensitivities and profile-equivalence to n = 1,024."""
    r2, r3, r7 = np.sqrt(2), np.sqrt(3), np.sqrt(7)
    fig4a = [[r7 / 2] * 4, [r3 / 2, r3 / 2, -r3 / 2, -r3 / 2], [1 / r2, -1 / r2, 0, 0], [0, 0, 1 / r2, -1 / r2]]
    fig4b = [[r2, r2, 0, 0], [0, 0, r2, r2], [1, -1, 0, 0], [0, 0, 1, -1]]
    assert np.allclose(st.haar_decomposition(4).matrix, fig4a, rtol=0, atol=1e-15)
    assert np.allclose(st.haar_decomposition(4, "wavelet").matrix, fig4b, rtol=0, atol=1e-15)
    for k in range(1, 11):
        n = 2**k
        H, Y = st.haar_decomposition(n), st.haar_decomposition(n, "wavelet")
        assert H.sensitivity() == pytest.approx(np.sqrt(2 - 1 / n) + sum(np.sqrt(1 - 2.0**-j) for j in range(1, k + 1)),
                                                rel=1e-13) and H.sensitivity() < k + 1
        assert Y.sensitivity() == pytest.approx(k - 1 + np.sqrt(2), rel=1e-13)
        # profile-equivalent (Def. 4.9): the same Gram, to round-off of entries ≤ 2n
        assert np.allclose(H.gram, st.hierarchical(n).gram, rtol=0, atol=1e-12 * n)
        assert np.allclose(Y.gram, st.wavelet(n).gram, rtol=0, atol=1e-12 * n)
    assert [round(st.haar_decomposition(n).sensitivity(), 3) for n in (2, 4, 8, 16)] == [1.932, 2.896, 3.878, 4.869]
    with pytest.raises(ValueError, match="power of 2"):
        st.haar_decomposition(6)
    with pytest.raises(ValueError, match="'kind' parameter of haar_decomposition"):
        st.haar_decomposition(4, "H")


def test_square_root_keeps_the_directions_its_strategy_resolves():
    """square_root read σ² = λ(AᵀA), resolved only to n·eps·λ_max: diag(1, 1e-8) lost its second row, and the root
    (called profile-equivalent) no longer supported the identity that A supports (error 1e16)."""
    for A in (st.Strategy(np.diag([1.0, 1e-8])), st.Strategy(np.diag([3.0, 1e-9, 2e-8]) @ np.eye(3)[[2, 0, 1]])):
        R = st.square_root(A)
        np.testing.assert_allclose(R.gram, A.gram, rtol=1e-12, atol=0)
        W = mmopt.workload.identity(A.domain_size)
        assert mmopt.evaluate(W, R).total_squared_error == pytest.approx(
            mmopt.evaluate(W, A).total_squared_error, rel=1e-9)


def test_a_dense_strategy_says_where_its_shape_is():
    """A.shape (an implicit strategy's domain shape, in the multidim tutorial) was a bare AttributeError on a dense
    result; it still is an AttributeError (getattr/hasattr unchanged), saying where the shapes are."""
    H = st.hierarchical(8)
    with pytest.raises(AttributeError, match=r"A.matrix.shape = \(15, 8\) and its domain A.domain_size = 8"):
        _ = H.shape
    assert not hasattr(H, "shape") and getattr(H, "shape", None) is None
    with pytest.raises(AttributeError, match="'Strategy' object has no attribute 'shap'"):
        _ = H.shap
