"""Answers tables of mmopt.toeplitz.prefix(n) past 4,096 cells: every prefix's variance (mmopt.answers._stream_errors
.prefix_units) against numpy's pseudo-inverse of the dense pair, the table's standard errors against
mmopt.answers.answer's (query by query, through the strategy's own passes), its answers against the cumulative sum
of the estimate, and the refusals that remain (all ranges, the weighted square root)."""

import numpy as np
import pytest

import mmopt
from mmopt import toeplitz as tz
from mmopt.answers import _stream_errors as se
from mmopt.toeplitz.error import decoder_rows

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")


def _dense_prefix_units(A) -> np.ndarray:
    """diag(W (AᵀA)⁻¹ Wᵀ) for W the prefix sums, from the dense strategy (independent of the stream algebra)."""
    Ad = A.to_dense()
    M = np.linalg.inv(Ad.T @ Ad)
    n = Ad.shape[1]
    W = np.tril(np.ones((n, n)))
    return np.einsum("ij,jk,ik->i", W, M, W)


STRATEGIES = {
    "tree": lambda n: tz.tree(n, 4),
    "tree_weighted": lambda n: tz.TreeStrategy(n, 3, level_weights=np.geomspace(1.0, 1e2,
                                                                              len(tz.tree(n, 3).tree.levels))),
    "sqrt": tz.sqrt_strategy,
    "sqrt_rows": lambda n: tz.equalized(tz.sqrt_strategy(n)),
    "banded_rows": lambda n: tz.equalized(tz.banded(np.array([1.0, 0.6, 0.3, 0.1])[:n], n)),
    "weighted_sqrt": lambda n: tz.weighted_sqrt(tz.prefix(n)),
}


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("n", [1, 2, 7, 300])
def test_every_prefix_variance_equals_the_dense_pairs(name, n):
    A = STRATEGIES[name](n)
    units, e = se.prefix_units(A, "test")
    # the dense reference is a Cholesky-free inverse of AᵀA: its round-off grows with cond(AᵀA) (≤ 10⁶ here, the
    # tree's level weights 10² apart), so 10⁻⁸ relative leaves room for both
    np.testing.assert_allclose(np.ldexp(units, -2 * e), _dense_prefix_units(A), rtol=1e-8)


def test_row_scales_many_orders_apart_are_summed_directly():
    """Rows far below the FFT's round-off (row scales 10¹⁶ apart) are summed directly; every row is within the
    10⁻⁶ (relative) that decoder_rows promises (the FFT alone gave 98.3 for the first row, 1.29)."""
    rng = np.random.default_rng(0)
    n = 2000
    b = rng.uniform(0.5, 1.5, n)
    y = np.geomspace(1.0, 1e-16, n)  # 1/y reaches 10¹⁶: the FFT's error swamps the first rows
    rows = decoder_rows(b, y)
    direct = np.array([(b[t::-1] ** 2) @ (1.0 / y[:t + 1]) for t in range(n)])
    np.testing.assert_allclose(rows, direct, rtol=1e-6)


@pytest.mark.parametrize("name,privacy", [("tree", mmopt.Privacy(1.0)), ("sqrt_rows", mmopt.Privacy(1.0)),
                                          ("sqrt", mmopt.Privacy(1.0, 1e-6)),
                                          ("weighted_sqrt", mmopt.Privacy(1.0, 1e-6))])
def test_a_prefix_table_past_4096_cells_has_every_standard_error(name, privacy):
    n = 5000
    W, A = tz.prefix(n), STRATEGIES[name](n)
    x = np.random.default_rng(1).integers(0, 9, n).astype(float)
    out = mmopt.release(W, A, x, privacy)
    alpha = 0.05 if privacy.noise == "gaussian" else None
    table = mmopt.answers.answers_table(out, W, A, alpha=alpha)
    assert len(table) == n and table.a0.iloc[[0, n - 1]].tolist() == ["≤ 0", f"≤ {n - 1}"]
    np.testing.assert_allclose(table.answer, np.cumsum(out.estimate), rtol=1e-12, atol=1e-9 * np.abs(x).sum())
    rows = [0, 1, 977, n // 2, n - 1]
    Q = (np.arange(n)[None, :] <= np.array(rows)[:, None]).astype(float)
    theirs = np.asarray(mmopt.answers.answer(Q, out, A).standard_error)
    np.testing.assert_allclose(table.standard_error.to_numpy()[rows], theirs, rtol=1e-9)
    if alpha is not None:  # Gaussian: z·standard error, widened by the round-off allowance only
        half = (table.upper - table.answer).to_numpy()
        np.testing.assert_allclose(half, 1.959963984540054 * table.standard_error.to_numpy(), rtol=1e-6)


def test_what_a_stream_table_still_refuses():
    n = 5000
    x = np.ones(n)
    out = mmopt.release(tz.all_range(n), tz.tree(n, 8), x, mmopt.Privacy(1.0))
    with pytest.raises(ValueError, match=r"all_range\(5000\), 12,502,500 queries.*mmopt.answers.answer"):
        mmopt.answers.answers_table(out, tz.all_range(n), tz.tree(n, 8))
    out = mmopt.release(tz.prefix(n), tz.tree(n, 8), x, mmopt.Privacy(1.0))
    with pytest.raises(ValueError, match=r"released with Gaussian noise only"):  # a mix-up, said as such
        mmopt.answers.answers_table(out, tz.prefix(n), tz.weighted_sqrt(tz.prefix(n)))
    A = tz.weighted_sqrt(tz.all_range(n))  # built for all ranges: its prefixes' variances are not listed
    with pytest.raises(ValueError, match=r"weighted square root of prefix\(n\); got 'weighted_sqrt'"):
        se.prefix_units(A, "test")


@pytest.mark.parametrize("kind, n", [("prefix", 128), ("all_range", 64), ("all_range", 91)])
def test_small_stream_workloads_list_their_variances_under_any_strategy(kind, n):
    """prefix(128) under H2 was refused as "past 4,096 cells", and all ranges at every size (64 cells too), while
    evaluate(per_query=True) lists them (a helper's probe): below 4,096 cells they go through the dense twin, for
    a dense strategy, a Toeplitz strategy and the weighted square root alike."""
    from mmopt.answers import per_query_variances
    from mmopt.toeplitz.strategies import sqrt_strategy
    from mmopt.toeplitz.weighted import weighted_sqrt
    W = getattr(mmopt.toeplitz, kind)(n)
    P = mmopt.Privacy(1.0, 1e-6)
    for A in (mmopt.strategy.hierarchical(n), sqrt_strategy(n), weighted_sqrt(W)):
        listed = np.concatenate([c for (_, _, c) in per_query_variances(W, A, P)])
        assert np.allclose(listed, mmopt.evaluate(W, A, P, per_query=True).per_query_variance, rtol=1e-8)
    laplace = mmopt.Privacy(1.0)
    listed = np.concatenate([c for (_, _, c) in per_query_variances(W, mmopt.strategy.hierarchical(n), laplace)])
    assert np.allclose(listed, mmopt.evaluate(W, mmopt.strategy.hierarchical(n), laplace, per_query=True)
                       .per_query_variance, rtol=1e-10)


def test_a_stream_strategy_of_the_same_size_and_sensitivity_is_refused():
    """The stream releases (Toeplitz, trees, weighted square root) recorded no fingerprint: a Toeplitz strategy
    with the square root's coefficients in another sign pattern (the same n rows, the same column norms and Δ₂)
    passed, and its standard errors were another strategy's."""
    from mmopt import answers as ans
    from mmopt import toeplitz as T
    n = 5000
    W, A = T.prefix(n), T.sqrt_strategy(n)
    c = np.asarray(A.coefficients, dtype=float)
    B = T.banded(c * (-1.0) ** np.arange(c.size), n)
    assert B.sensitivity("l2") == pytest.approx(A.sensitivity("l2"), rel=1e-12)
    out = mmopt.release(W, A, np.ones(n), mmopt.Privacy(1.0, 1e-6))
    assert out.strategy_probe is not None and len(ans.answers_table(out, W, A)) == n
    with pytest.raises(ValueError, match="not the strategy the output was released with"):
        ans.answers_table(out, W, B)
    tree = T.tree(n, 8)
    out = mmopt.release(W, tree, np.ones(n), mmopt.Privacy(1.0))
    assert len(ans.answers_table(out, W, T.tree(n, 8))) == n  # an equal tree built again passes


def test_per_query_variances_of_the_weighted_square_root_at_unit_privacy():
    """evaluate took the weighted square root's Δ₂ at unit privacy; per_query_variances (and error_by_term /
    error_by_shape) still defaulted to Δ₁ and refused it as 'Laplace noise' (the review of this change)."""
    from mmopt import answers as ans
    W = tz.prefix(64)
    A = tz.weighted_sqrt(W)
    got = np.concatenate([b[2] for b in ans.per_query_variances(W, A)])
    np.testing.assert_allclose(got, mmopt.evaluate(W, A, per_query=True).per_query_variance, rtol=1e-9)


def test_a_sparse_strategy_reads_as_its_matrix_in_per_query_variances():
    import scipy.sparse

    from mmopt import answers as ans
    from mmopt import strategy as st
    from mmopt import workload as wl
    W, H = wl.prefix(16), st.hierarchical(16)
    got = np.concatenate([b[2] for b in ans.per_query_variances(W, scipy.sparse.csr_matrix(H.matrix))])
    np.testing.assert_allclose(got, np.concatenate([b[2] for b in ans.per_query_variances(W, H)]), rtol=1e-12)
