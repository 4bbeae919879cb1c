"""Exact intervals in answers tables (mmopt.answers.widths): Gaussian closed form, Laplace quantiles of q A⁺z
checked by Monte Carlo coverage per row, identical laws shared, and the refusals."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import mmopt
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.answers import answers_table, iter_tables, write_answers
from mmopt.answers import widths as wd

pytest.importorskip("pandas")
pytest.importorskip("pyarrow")


def test_gaussian_is_the_normal_quantile():
    W, A = mmopt.workload.prefix(8), mmopt.strategy.hierarchical(8)
    out = mmopt.matrix_mechanism(W, A, np.arange(8.0), mmopt.Privacy(1.0, 1e-6), rng=0)
    t = answers_table(out, W, A, alpha=0.1)
    np.testing.assert_allclose((t.upper - t.answer) / t.standard_error, stats.norm.ppf(0.95), rtol=1e-12)
    np.testing.assert_allclose(t.answer - t.lower, t.upper - t.answer, rtol=1e-12)
    assert "exact 0.9 interval" in t.attrs["interval"]


def test_laplace_rows_cover_at_the_nominal_rate():
    W, A = mmopt.workload.prefix(8), mmopt.strategy.hierarchical(8)
    out = mmopt.matrix_mechanism(W, A, np.arange(8.0), mmopt.Privacy(1.0), rng=0)
    t = answers_table(out, W, A, alpha=0.05)
    h = (t.upper - t.answer).to_numpy()
    a = W.explicit_matrix() @ np.linalg.pinv(A.matrix)  # each answer's weights on the measurements
    z = np.random.default_rng(1).laplace(0.0, out.noise_scale, size=(100_000, a.shape[1]))
    miss = np.mean(np.abs(z @ a.T) > h, axis=0)
    assert np.all(np.abs(miss - 0.05) < 5 * math.sqrt(0.05 * 0.95 / z.shape[0])), miss
    assert np.all(h > stats.norm.ppf(0.975) * t.standard_error)  # Laplace tails: wider than the normal band


def test_identical_laws_share_one_quantile(tmp_path):
    W = mmopt.workload.identity(16)
    A = mmopt.strategy.identity(16)
    out = mmopt.matrix_mechanism(W, A, np.ones(16), mmopt.Privacy(0.5), rng=0)
    spec_plan = mmopt.answers.table.plan_table(out, W, A, alpha=0.01)
    frames = list(iter_tables(out, W, A, chunk_rows=5, alpha=0.01))
    assert len(spec_plan.widths.cache) == 0 and sum(len(f) for f in frames) == 16
    h = np.concatenate([(f.upper - f.answer).to_numpy() for f in frames])
    np.testing.assert_allclose(h, out.noise_scale * math.log(100), rtol=1e-12)  # one Laplace cell: b·log(1/α)
    written = write_answers(tmp_path / "a.csv", out, W, A, alpha=0.01)
    assert written.rows == 16 and "lower" in (tmp_path / "a.csv").read_text().splitlines()[0]


def test_refusals():
    W, A = mmopt.workload.prefix(8), mmopt.strategy.hierarchical(8)
    out = mmopt.matrix_mechanism(W, A, np.arange(8.0), mmopt.Privacy(1.0), rng=0)
    with pytest.raises(ValueError, match="'alpha' parameter of answers_table needs the strategy"):
        answers_table(out, W, alpha=0.05)
    with pytest.raises(ValueError, match="'alpha' parameter of answers_table must be a float in the range"):
        answers_table(out, W, A, alpha=1.0)
    nn = mmopt.matrix_mechanism(W, A, np.arange(8.0), mmopt.Privacy(1.0), rng=0, reconstruct="nnls")
    with pytest.raises(ValueError, match="reconstructed by 'nnls', which is biased"):
        answers_table(nn, W, A, alpha=0.05)
    import mmopt.structured as st
    big = st.kron(np.eye(64), np.ones((1, 128)))  # a union of αI + βJ factors that are not marginals
    S = st.union_strategy([st.kron_strategy(np.eye(64) + 0.5, np.ones((1, 128))),
                           st.kron_strategy(np.ones((1, 64)), np.eye(128))])
    res = st.matrix_mechanism(big, S, np.ones(64 * 128), mmopt.Privacy(1.0), rng=0)
    assert mmopt.answers.table.plan_table(res, big, S).model.method == "algebra"
    with pytest.raises(ValueError, match="is neither. Use Gaussian noise"):
        answers_table(res, big, S, alpha=0.05)
    assert wd.MAX_LAPLACE_ROWS >= 10_000


def test_refusals_past_the_row_limits_name_a_remedy_that_works():
    """Past MAX_LAPLACE_ROWS the refusal said "Pass terms=... for fewer rows" (terms names the terms, it never drops
    rows: the same refusal followed); per_query_variances and error_by_term past 4,096 cells said "Pass
    strategy=None", which they refuse with TypeError (a helper's probe)."""
    W, A = mmopt.workload.all_range(316), mmopt.strategy.hierarchical(316)  # 50,086 queries
    out = mmopt.matrix_mechanism(W, A, np.ones(316), mmopt.Privacy(1.0), rng=0)
    with pytest.raises(ValueError, match="has 50,086 queries .*leave alpha=None for the standard errors alone"):
        answers_table(out, W, A, alpha=0.05)
    assert len(answers_table(out, W, A)) == 50_086  # that remedy works
    wl, st = mmopt.workload, mmopt.strategy
    Wu = wl.stack([wl.kron(wl.prefix(64), wl.identity(65)), wl.kron(wl.identity(64), wl.prefix(65))])
    Au = st.stack([st.kron(st.hierarchical(64), st.identity(65)), st.kron(st.identity(64), st.hierarchical(65))])
    for fn in (mmopt.answers.error_by_term, lambda W, A, P: next(mmopt.answers.per_query_variances(W, A, P))):
        with pytest.raises(ValueError, match=r"another union over 4,160 cells. Use a product .*max_variance_upper"):
            fn(Wu, Au, mmopt.Privacy(1.0))
    bound = mmopt.evaluate(Wu, Au, mmopt.Privacy(1.0)).max_variance_upper
    assert bound is not None and math.isfinite(bound)
    x = np.ones(64 * 65)
    released = mmopt.matrix_mechanism(Wu, Au, x, mmopt.Privacy(1.0), rng=0)
    with pytest.raises(ValueError, match="Pass strategy=None for the answers without standard errors"):
        answers_table(released, Wu, Au)
    assert len(answers_table(released, Wu, None)) == Wu.n_queries  # where answers_table's remedy works


def test_weighted_marginals_on_products_use_the_closed_form_weights():
    """The algebra route (HDMM's M(θ) on a workload of products) against the dense weights W A⁺, row by row."""
    import mmopt.structured as st
    W = st.union([st.kron(np.tril(np.ones((3, 3))), np.eye(4), np.ones((1, 2))),
                  st.kron(np.ones((1, 3)), np.array([[1.0, 1, 0, 0], [0, 0, 1, 1]]), np.eye(2))])
    S = st.marginals_strategy((3, 4, 2), {(0, 1): 1.0, (1, 2): 0.5, (): 0.3, (0, 1, 2): 0.2})
    out = st.matrix_mechanism(W, S, np.arange(24.0), mmopt.Privacy(0.7), rng=0)
    plan = mmopt.answers.table.plan_table(out, W, S, alpha=0.05)
    assert plan.model.method == "algebra"
    t = answers_table(out, W, S, alpha=0.05)
    a = W.dense() @ np.linalg.pinv(S.dense())
    want = [mmopt.answers.intervals.half_width("laplace", 0.05, weights=row, scale=out.noise_scale) for row in a]
    np.testing.assert_allclose((t.upper - t.answer).to_numpy(), want, rtol=1e-8)


def test_product_strategies_use_the_kronecker_weights():
    """The product route (θ·⊗Aᵢ on a workload of products) against the dense weights W A⁺, row by row."""
    import mmopt.structured as st
    W = st.union([st.kron(np.tril(np.ones((6, 6))), np.eye(5)), st.kron(np.ones((1, 6)), np.tril(np.ones((5, 5))))])
    S = st.kron_strategy(mmopt.strategy.hierarchical(6), mmopt.strategy.hierarchical(5).matrix, weight=0.5)
    out = st.matrix_mechanism(W, S, np.arange(30.0), mmopt.Privacy(0.7), rng=0)
    assert mmopt.answers.table.plan_table(out, W, S, alpha=0.1).model.method == "product"
    t = answers_table(out, W, S, alpha=0.1)
    a = W.dense() @ np.linalg.pinv(S.dense())
    want = [mmopt.answers.intervals.half_width("laplace", 0.1, weights=row, scale=out.noise_scale) for row in a]
    np.testing.assert_allclose((t.upper - t.answer).to_numpy(), want, rtol=1e-8)


def test_product_laplace_widths_use_the_factors_rank_not_numpys_default_cutoff():
    """A factor stacking the partitions of 1,000 cells into pairs and triples (834×1,000, rank 667: its smallest
    non-zero singular value is 0.30·σ₁, the round-off ones ≤ 4·10⁻¹⁵·σ₁). numpy's pinv at 10⁻¹⁵·σ₁ kept 672–701
    of them, by BLAS kernel, and the product route's exact Laplace intervals came out 1.02–1.06× too wide (a
    helper's probe; 2.07× on another factor). The oracle cuts at 10⁻¹⁰·σ₁, anywhere in that gap."""
    import mmopt.structured as st
    from mmopt.answers.intervals import half_width
    n = 1000

    def partition(size):
        P = np.zeros((-(-n // size), n))
        for i in range(P.shape[0]):
            P[i, i * size:(i + 1) * size] = 1.0
        return P

    A1 = np.vstack([partition(2), partition(3)])
    rows = [382, 438, 439]
    W = st.kron(A1[rows], np.ones((1, 2)))
    S = st.kron_strategy(A1, np.ones((1, 2)))
    out = st.matrix_mechanism(W, S, np.arange(2.0 * n), mmopt.Privacy(1.0), rng=0)
    assert mmopt.answers.table.plan_table(out, W, S, alpha=0.1).model.method == "product"
    t = answers_table(out, W, S, alpha=0.1)
    oracle = np.linalg.pinv(A1, rcond=1e-10)
    want = [half_width("laplace", 0.1, weights=q @ oracle, scale=out.noise_scale) for q in A1[rows]]
    np.testing.assert_allclose((t.upper - t.answer).to_numpy(), want, rtol=1e-8)


@pytest.mark.slow  # 14 s: the dense route's 4,096-cell table
def test_dense_laplace_widths_use_the_mechanism_s_pseudo_inverse():
    """numpy's pinv at its default cutoff inverted round-off singular values of this rank-deficient A (4,096 cells):
    W·A⁺·A was off by 0.016 and the exact intervals came out 1.0–1.6× too wide (coverage 0.99 at 95 %). They are
    exact at A⁺ as the mechanism applies it."""
    from mmopt.answers.intervals import half_width
    from mmopt.dense.least_squares import factorize
    shape = (4,) * 6
    W = mmopt.workload.marginals(shape, 1)
    A = mmopt.strategy.marginals(shape, {(i,): 1.0 for i in range(6)} | {(): 0.5}).to_strategy()
    out = mmopt.matrix_mechanism(W, A, np.ones(4096), mmopt.Privacy(1.0), rng=1)
    table = mmopt.answers_table(out, W, A, alpha=0.05)
    Wd, P = W.explicit_matrix(), factorize(A).solve(np.eye(A.matrix.shape[0])).T
    assert np.abs(Wd @ P @ A.matrix - Wd).max() < 1e-12  # this A⁺ reproduces W (numpy's default: 0.016 off)
    exact = [half_width("laplace", 0.05, weights=Wd[i] @ P, scale=out.noise_scale) for i in range(Wd.shape[0])]
    np.testing.assert_allclose((table["upper"] - table["lower"]).to_numpy() / 2, exact, rtol=1e-9)


def test_a_zero_query_on_the_marginals_algebra_route_has_width_zero():
    """Rows [1, 1]⊗…⊗[0, 0] are answered exactly (standard error 0): under Laplace noise the algebra route's law
    was empty and np.concatenate refused the whole table; the dense, product and Gaussian routes gave 0."""
    import mmopt.structured as sst
    S = sst.marginals_strategy((3, 4, 2), {(0, 1): 1.0, (0,): 0.5})
    W = sst.kron(np.eye(3), np.ones((1, 4)), np.array([[1.0, 1], [0, 0]]))
    out = mmopt.matrix_mechanism(W, S, np.ones(24), mmopt.Privacy(1.0), rng=0)
    table = answers_table(out, W, S, alpha=0.1)
    zero = table.standard_error.to_numpy() == 0.0
    assert zero.sum() == 3 and np.all((table.upper - table.lower).to_numpy()[zero] == 0.0)
    assert np.all((table.upper - table.lower).to_numpy()[~zero] > 0.0)


def test_a_marginal_measured_twice_has_the_law_of_two_noises():
    """Weighted marginals merged copies of one marginal into θ = √(θ₁² + θ₂²): the variance held, but the law of an
    answer's error is that of both copies' independent noise, so the "exact" 50 % intervals covered 44 %. Oracle:
    the quantile of Σ aⱼ b Lⱼ for a = q A⁺ from the dense pseudo-inverse of the strategy as stacked."""
    from mmopt.answers import intervals as iv
    from mmopt.structured import strategies as ss
    from mmopt.structured import workloads as sw
    one, eye = (lambda n: np.ones((1, n))), np.eye
    W = sw.union([sw.kron(eye(17), eye(16), one(16)), sw.kron(one(17), one(16), eye(16))])  # 4,352 cells
    A = ss.union_strategy([ss.kron_strategy(eye(17), eye(16), one(16)), ss.kron_strategy(eye(17), eye(16), one(16)),
                           ss.kron_strategy(one(17), one(16), eye(16))])
    x = np.random.default_rng(0).integers(0, 5, size=W.domain_size).astype(float)
    out = mmopt.matrix_mechanism(W, A, x, mmopt.Privacy(1.0), rng=0)
    # a cell of each marginal; A has rank 287 of 560 rows and numpy's default cutoff (1e-15·σ₁) kept a round-off
    # singular value of 2e-14 (the variance 0.7 % off): the rank is cut at 1e-10·σ₁
    a = W.dense()[[0, 272]] @ np.linalg.pinv(A.dense(), rcond=1e-10)
    for alpha in (0.5, 0.2, 0.05):
        t = answers_table(out, W, A, alpha=alpha)
        got = (t.upper - t.answer).to_numpy()[[0, 272]]
        want = [iv.half_width("laplace", alpha, weights=row[np.abs(row) > 1e-12], scale=out.noise_scale)
                for row in a]
        np.testing.assert_allclose(got, want, rtol=1e-6)  # pinv's round-off on a well-conditioned A


@pytest.mark.parametrize("privacy", [mmopt.Privacy(100.0), mmopt.Privacy(100.0, 1e-6)])
def test_intervals_at_the_edge_of_float64_are_widened_not_collapsed(privacy):
    """Counts of 10¹⁵ at noise scale 0.04: every half-width rounded away (lower = upper = the answer) and half the
    intervals missed, the reconstruction's round-off (0.51) exceeding the noise's h (0.09) (a helper's probe). Each h
    is now widened by the round-off allowance, with a warning, and rounded outwards. Oracle: the exact integer
    prefix sums (all below 2⁵³)."""
    W, H = wl.prefix(8), st.hierarchical(8)
    x = np.array([7, 3, 9, 1, 5, 2, 8, 4]) * 1e15
    truth = W.explicit_matrix() @ x
    missed = 0
    for seed in range(25):
        out = mmopt.matrix_mechanism(W, H, x, privacy, rng=seed)
        with pytest.warns(RuntimeWarning, match="float64's round-off .* is no longer exact"):
            table = answers_table(out, W, H, alpha=0.05)
        assert np.all(table.upper.to_numpy() > table.lower.to_numpy())
        missed += int(np.sum((truth < table.lower.to_numpy()) | (truth > table.upper.to_numpy())))
    assert missed <= 0.05 * 200 + 3 * (0.05 * 0.95 * 200) ** 0.5  # the nominal 5 % (was 50 %), 3 SE above
    out = mmopt.matrix_mechanism(W, H, np.arange(8.0), privacy, rng=0)  # ordinary counts: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        answers_table(out, W, H, alpha=0.05)


def test_laplace_intervals_of_a_residual_basis_on_a_small_domain_use_the_dense_laws():
    """answers_table(alpha=...) under Laplace refused optimize's residual strategy on 6 cells, citing a 4,096-cell
    limit (a helper's audit): the dense laws serve any pair that small; the half-widths are those of the same
    strategy as a dense matrix."""
    import warnings

    import mmopt
    from mmopt import workload as wk
    W = wk.marginals((2, 3), attributes=[(0, 1)])
    P = mmopt.Privacy(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        A = mmopt.optimize(W, method="residual", privacy=P).strategy
        out = mmopt.release(W, A, np.arange(6.0), P)
        t = answers_table(out, W, A, alpha=0.1)
        D = A.to_strategy()
        ref = answers_table(mmopt.release(W, D, np.arange(6.0), P), W, D, alpha=0.1)
    np.testing.assert_allclose((t["upper"] - t["lower"]).to_numpy(), (ref["upper"] - ref["lower"]).to_numpy(),
                               rtol=1e-9)
    assert np.all(t["lower"] < t["answer"]) and np.all(t["answer"] < t["upper"])


def test_dense_laws_are_formed_block_by_block_with_the_same_widths(monkeypatch):
    """The dense route formed q A⁺ for the whole chunk at once (up to 50,000 rows × p: 1.93 GB for
    kron(prefix(32), all_range(32)), 0.86 GB now; a helper's audit); blocks smaller than the chunk give the same
    half-widths."""
    W, A = wl.all_range(12), st.hierarchical(12)
    out = mmopt.matrix_mechanism(W, A, np.arange(12.0), mmopt.Privacy(1.0), rng=0)
    whole = answers_table(out, W, A, alpha=0.1)
    monkeypatch.setattr(wd, "DENSE_LAW_BLOCK", 5)  # 78 rows: 16 blocks, the last of 3 rows
    blocks = answers_table(out, W, A, alpha=0.1)
    # equal to round-off: the BLAS kernel may sum a 5-row block's products in another order (OpenBLAS's Haswell
    # kernel did), and a law's quantile moves with its weights at ~10⁻¹⁵
    np.testing.assert_allclose(blocks["upper"].to_numpy(), whole["upper"].to_numpy(), rtol=1e-12)
    M = W.explicit_matrix()
    laws = wd._dense_laws(lambda lo, hi: M[lo:hi], np.linalg.pinv(A.matrix))
    from mmopt.answers.layout import Chunk
    got = list(laws(Chunk(0, 3, 15, 3, 0, (), (3, 15))))
    assert len(got) == 12 and all(c is got[0][1] for _, c in got)  # one counts array shared by every row
    np.testing.assert_allclose(np.array([r for r, _ in got]), M[3:15] @ np.linalg.pinv(A.matrix), atol=1e-12)
