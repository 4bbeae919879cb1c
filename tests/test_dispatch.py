"""The public entry points on dense and implicit (product) workloads: one dispatch point, same answers."""

import numpy as np
import pytest

import mmopt
from mmopt import Privacy, toeplitz
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.structured import strategies as ss
from mmopt.structured import workloads as sw


def test_kron_is_dense_up_to_4096_cells_and_implicit_beyond():
    small = wl.kron(wl.prefix(16), wl.identity(16), wl.all_range(16))   # 4,096 cells
    big = wl.kron(wl.prefix(16), wl.identity(16), wl.all_range(17))     # 4,352 cells
    assert isinstance(small, wl.Workload) and isinstance(big, wl.ImplicitWorkload)
    assert small.n_queries == 16 * 16 * 136 and big.n_queries == 16 * 16 * 153
    assert wl.kron(wl.prefix(3), wl.identity(2), name="P⊗I").name == "P⊗I"


def test_two_argument_kron_keeps_working():
    W = wl.kron(wl.prefix(4), wl.identity(3))
    np.testing.assert_allclose(W.gram, np.kron(wl.prefix(4).gram, np.eye(3)))


def test_implicit_and_dense_paths_agree_through_the_public_api():
    """The same product workload and strategy, once dense (small) and once implicit: one number."""
    factors = (wl.prefix(8), wl.identity_total(4), wl.all_range(5))
    W_dense = wl.kron(*factors)
    W_implicit = mmopt.structured.kron(*factors)
    A = st.kron(st.hierarchical(8), st.identity(4), st.hierarchical(5))
    for privacy in (Privacy(1.0), Privacy(0.5, 1e-6)):
        dense = mmopt.evaluate(W_dense, A, privacy)          # implicit strategy densified (N = 160)
        implicit = mmopt.evaluate(W_implicit, A, privacy)
        assert implicit.total_squared_error == pytest.approx(dense.total_squared_error, rel=1e-10)
        assert implicit.max_variance == pytest.approx(dense.max_variance, rel=1e-10)
    assert mmopt.svd_bound(W_implicit) == pytest.approx(mmopt.svd_bound(W_dense), rel=1e-10)


@pytest.mark.parametrize("make,total,m", [
    (wl.sf1, 2_235_124, 4_151),
    (wl.sf1_plus, 227_982_648, 215_852),
    (wl.cps_w2, 5_769_120_000, 600_000),
])
def test_identity_totals_of_the_census_workloads(make, total, m):
    W = make()
    A = st.kron(*[st.identity(d) for d in W.shape])
    r = mmopt.evaluate(W, A, Privacy(1.0))
    assert r.n_queries == m and r.total_squared_error == total and r.total_exact


def test_mixed_pairs_are_densified_when_small_and_refused_when_large():
    W = wl.marginals((4, 4, 4), 2)
    assert isinstance(W, wl.Workload)
    A = st.marginals((4, 4, 4), {(0, 1): 1.0, (1, 2): 1.0, (0, 2): 1.0})
    assert mmopt.evaluate(W, A).total_squared_error > 0
    big = wl.marginals((10, 10, 10, 10), 2)
    with pytest.raises(ValueError, match="evaluate: workload .* is implicit over 10,000 cells"):
        mmopt.evaluate(big, st.identity(10_000))
    with pytest.raises(ValueError, match="per-query variances past 4,096 cells are listed for product strategies "
                                         "only; .* is a union on 10,000 cells"):
        mmopt.evaluate(big, st.stack([st.kron(*[st.identity(10)] * 4)] * 2), per_query=True)


def test_per_query_variances_of_a_product_strategy_match_the_dense_ones():
    factors = (wl.prefix(6), wl.identity_total(4), wl.all_range(5))
    A = st.kron(st.hierarchical(6), st.identity(4), st.hierarchical(5))
    W = mmopt.structured.union([mmopt.structured.kron(*factors), mmopt.structured.kron(
        wl.total(6), wl.identity(4), wl.prefix(5), weight=2.0)])
    dense = mmopt.evaluate(W.to_workload(), A.to_strategy(), Privacy(1.0)).per_query_variance
    implicit = mmopt.evaluate(W, A, Privacy(1.0), per_query=True)
    np.testing.assert_allclose(implicit.per_query_variance, dense, rtol=1e-10)
    assert implicit.per_query_variance.max() == pytest.approx(implicit.max_variance, rel=1e-12)


def test_mechanism_dispatches_and_matches_evaluate():
    W = wl.kron(wl.prefix(80), wl.identity_total(60))      # 4,800 cells: implicit
    A = st.kron(st.hierarchical(80), st.identity(60))
    x = np.random.default_rng(0).integers(0, 20, (80, 60)).astype(float)
    out = mmopt.matrix_mechanism(W, A, x, Privacy(1.0), rng=1, size=200)
    truth = mmopt.structured.answer(W, x)
    sq = np.sum((out.answers - truth) ** 2, axis=1)
    expected = mmopt.evaluate(W, A, Privacy(1.0)).total_squared_error
    assert abs(sq.mean() - expected) <= 5 * sq.std() / np.sqrt(sq.size)


@pytest.mark.slow  # the default run's ~10 minutes (README): run with `pytest -m slow`
def test_release_on_a_product_domain_is_verified_and_unbiased():
    """OpenDP noise on A x at Δ rounded upwards; mean squared error over releases ≈ evaluate (Laplace)."""
    W = wl.kron(wl.prefix(70), wl.identity_total(60))      # 4,200 cells: implicit
    A = st.kron(st.hierarchical(70), st.identity(60))
    x = np.random.default_rng(0).integers(0, 20, (70, 60)).astype(float)
    truth = mmopt.structured.answer(W, x)
    sq = []
    for _ in range(40):
        out = mmopt.release(W, A, x, Privacy(1.0))
        sq.append(np.sum((out.answers - truth) ** 2))
    assert out.path == "release" and out.sensitivity >= A.sensitivity("l1") and out.sensitivity_exact
    assert out.noise_scale == pytest.approx(A.sensitivity("l1"), rel=1e-6)   # b = Δ/ε, OpenDP's own search
    sq = np.array(sq)
    expected = mmopt.evaluate(W, A, Privacy(1.0)).total_squared_error
    assert abs(sq.mean() - expected) <= 6 * sq.std() / np.sqrt(sq.size)


def test_release_refuses_a_noise_scale_opendp_cannot_verify():
    W = wl.kron(wl.prefix(70), wl.identity(60))
    A = st.kron(st.identity(70), st.identity(60))
    with pytest.raises(ValueError, match="OpenDP's privacy map does not verify"):
        mmopt.release(W, A, np.ones(4200), Privacy(1.0), noise_scale=0.5)


def test_release_of_an_upper_bounded_union_sensitivity_is_never_below_the_truth():
    from mmopt.structured import release as srel

    W = wl.marginals((8, 8, 70), 1)                           # 4,480 cells
    A = st.stack([st.kron(st.hierarchical(8), st.identity(8), st.identity(70)),
                  st.kron(st.identity(8), st.identity(8), st.hierarchical(70))], weights=[1.0, 0.5])
    dense = np.max(np.sum(np.abs(A.dense()), axis=0))
    assert srel.upper_sensitivity(mmopt.structured.sensitivity(A, "l1").value) >= dense
    out = mmopt.release(W, A, np.zeros(4480), Privacy(1.0))
    assert out.sensitivity >= dense and np.all(np.isfinite(out.answers))


def test_stream_workloads_are_accepted_by_evaluate_and_svd_bound():
    """Issue 31: mmopt.toeplitz.prefix(n) worked in optimize but evaluate and svd_bound refused it (a held-out
    comparison lost a 612-second search to that TypeError)."""
    from mmopt import toeplitz
    big = toeplitz.prefix(65536)
    ws = mmopt.optimize(big, method="weighted_sqrt")
    # the objective is at unit privacy in the method's norm (Δ₂); evaluate's unit privacy is Δ₁ unless told
    assert mmopt.evaluate(big, ws.strategy, norm="l2").total_squared_error == pytest.approx(ws.objective, rel=1e-12)
    gauss = mmopt.Privacy(1.0, 1e-6)
    assert mmopt.svd_bound(big, gauss) == pytest.approx(gauss.variance_factor * mmopt.svd_bound(big), rel=1e-12)
    for n in (64, 600):  # the closed-form SVD bound equals the dense one
        assert mmopt.svd_bound(toeplitz.all_range(n)) == pytest.approx(mmopt.svd_bound(mmopt.workload.all_range(n)),
                                                                       rel=1e-10)
    small = toeplitz.prefix(512)
    me = mmopt.optimize(small, method="min_error", seed=0)   # a p-Identity strategy, Θ only
    assert mmopt.evaluate(small, me.strategy).total_squared_error == pytest.approx(me.objective, rel=1e-9)
    from mmopt.search.min_error_fast import hierarchy_theta
    from mmopt.search.pidentity import PIdentityStrategy
    with pytest.raises(ValueError, match=r"needs the dense path, up to 4,096 cells from a stream workload; "
                                         r"mmopt.workload.prefix\(5,000\) is the dense workload itself"):
        mmopt.evaluate(toeplitz.prefix(5000), mmopt.strategy.kron(mmopt.strategy.identity(50),
                                                                  mmopt.strategy.identity(100)))
    # the p-Identity strategy past 4,096 cells: evaluated as itself (it was refused, mmopt.search.pidentity_stream)
    S = PIdentityStrategy(hierarchy_theta(5000, 8))
    total = S.sensitivity("l1") ** 2 * S.unit_total("prefix")  # unit privacy: Δ₁, as for every family
    assert mmopt.evaluate(toeplitz.prefix(5000), S).total_squared_error == pytest.approx(total, rel=1e-12)
    # what auto returns there under ε-DP now: the tree strategy, evaluated exactly at any n
    eps = mmopt.optimize(toeplitz.prefix(5000), privacy=mmopt.Privacy(1.0), budget="fast")
    report = mmopt.evaluate(toeplitz.prefix(5000), eps.strategy, mmopt.Privacy(1.0))
    assert report.total_squared_error == pytest.approx(2.0 * eps.objective, rel=1e-12)


def test_a_dense_product_workload_and_an_implicit_strategy_in_another_attribute_order_are_refused():
    """The dense route densified the strategy without comparing layouts: kron(prefix(4), all_range(3)) against
    identity(3)⊗H2(4) scored 694.3 (the implicit pair refuses it)."""
    W = wl.kron(wl.prefix(4), wl.all_range(3))
    right = mmopt.evaluate(W, st.kron(st.hierarchical(4), st.identity(3)), Privacy(1.0))
    implicit = mmopt.evaluate(wl.structure_of(W), st.kron(st.hierarchical(4), st.identity(3)), Privacy(1.0))
    assert right.total_squared_error == pytest.approx(implicit.total_squared_error, rel=1e-10)
    with pytest.raises(ValueError, match=r"over the domain \(4, 3\) and strategy .* over \(3, 4\).*attribute order"):
        mmopt.evaluate(W, st.kron(st.identity(3), st.hierarchical(4)), Privacy(1.0))


def test_the_dense_mechanism_takes_x_shaped_like_a_product_workload_and_length_messages_say_what_they_count():
    W = wl.kron(wl.prefix(4), wl.all_range(3))
    A = st.kron(st.hierarchical(4), st.identity(3)).to_strategy()  # a dense strategy: the shape comes from W
    x = np.arange(12.0).reshape(4, 3)
    shaped = mmopt.matrix_mechanism(W, A, x, Privacy(1.0), rng=0).answers
    assert np.array_equal(shaped, mmopt.matrix_mechanism(W, A, x.ravel(), Privacy(1.0), rng=0).answers)
    with pytest.raises(ValueError, match=r"must be flat \(12,\) or shaped like the domain \(4, 3\)\. Got an "
                                         r"array of shape \(3, 4\) \(transposed\?\)"):
        mmopt.matrix_mechanism(W, A, x.T, Privacy(1.0), rng=0)  # not the domain's shape: not guessed
    with pytest.raises(ValueError, match=r"must have length 8 \(2\^d, one weight per attribute subset"):
        st.marginals((2, 3, 4), [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"'weights' parameter of stack must have length 2 \(one per workload\)"):
        wl.stack([wl.prefix(3), wl.identity(3)], weights=[1.0])


@pytest.mark.parametrize("method", ["toeplitz", "weighted_sqrt"])
def test_what_optimize_returns_for_a_dense_prefix_workload_is_taken_with_it(method):
    # optimize(workload.prefix(n), method="toeplitz") returns a ToeplitzStrategy, which evaluate, release and
    # matrix_mechanism refused with that same workload ("must be a 2-D array of real numbers")
    pr = Privacy(1.0, 1e-6)
    W = wl.prefix(16)
    A = mmopt.optimize(W, method=method, privacy=pr).strategy
    dense = mmopt.evaluate(W, A.to_strategy(), pr).total_squared_error  # the oracle: its matrix
    assert mmopt.evaluate(W, A, pr).total_squared_error == pytest.approx(dense, rel=1e-10)
    assert mmopt.matrix_mechanism(W, A, np.arange(16.0), pr, rng=0).answers.shape == (16,)
    other = mmopt.Workload.from_matrix(np.random.default_rng(0).random((5, 16)))  # not a stream: its matrix
    assert mmopt.evaluate(other, A, pr).total_squared_error == pytest.approx(
        mmopt.evaluate(other, A.to_strategy(), pr).total_squared_error, rel=1e-10)


def test_svd_bound_of_a_dense_product_reads_its_factors(monkeypatch):
    """kron/stack/marginals keep a workload dense up to 4,096 cells and remember its product: svd_bound ran the
    N×N eigendecomposition anyway (~60 s at kron(prefix(64), prefix(64)), against milliseconds from the factors'
    spectra; a helper's probe). Oracle: the dense bound, (Σσᵢ(W))²/n from W's own eigenvalues."""
    from mmopt import error
    gauss = mmopt.Privacy(1.0, 1e-6)
    cases = (wl.kron(wl.prefix(8), wl.all_range(8)), wl.marginals((4, 5, 6), 2),
             wl.stack([wl.kron(wl.prefix(8), wl.identity(8)), wl.kron(wl.identity(8), wl.prefix(8))]))
    oracles = [error.svd_bound(W, gauss) for W in cases]
    for W, oracle in zip(cases, oracles, strict=True):
        assert mmopt.svd_bound(W, gauss) == pytest.approx(oracle, rel=1e-12)
        assert mmopt.svd_bound(W, gauss, per_query=True) == pytest.approx(oracle / W.n_queries, rel=1e-12)

    def no_dense(*args, **kwargs):
        raise AssertionError("the dense eigendecomposition ran")
    monkeypatch.setattr(error, "svd_bound", no_dense)
    assert mmopt.svd_bound(cases[0], gauss) == pytest.approx(oracles[0], rel=1e-12)  # a product: its factors alone
    with pytest.raises(AssertionError, match="dense eigendecomposition"):
        mmopt.svd_bound(wl.prefix(16))  # no product structure: the dense bound, as before


def test_a_gram_only_factor_gives_the_total_and_a_bound_on_the_largest_variance():
    """kron(Gram-only, prefix(70)) on 4,900 cells raised 'Gram-only: its per-query errors are unknown', though the
    total needs G alone (the dense route on 100 cells reported it); a union strategy on 12 cells raised too
    (to_workload listed W). Oracle: the same pair with the factor's rows (the same G); a helper's probe."""
    from mmopt.structured import kron as skron
    rng = np.random.default_rng(0)
    M = (rng.random((30, 70)) < 0.3).astype(float)
    A = st.kron(st.identity(70), st.hierarchical(70))
    gram_only = mmopt.evaluate(wl.kron(wl.Workload.from_gram(M.T @ M, n_queries=30), wl.prefix(70)), A,
                               mmopt.Privacy(1.0))
    rows = mmopt.evaluate(wl.kron(wl.predicates(M), wl.prefix(70)), A, mmopt.Privacy(1.0))
    assert gram_only.total_squared_error == pytest.approx(rows.total_squared_error, rel=1e-12)
    assert gram_only.max_variance is None and gram_only.max_variance_upper >= rows.max_variance
    G6 = wl.Workload.from_gram(M[:, :6].T @ M[:, :6], n_queries=30)
    union = st.stack([st.kron(st.identity(6), st.identity(2)), st.kron(st.hierarchical(6), st.identity(2))])
    got = mmopt.evaluate(skron(G6, wl.prefix(2)), union, mmopt.Privacy(1.0)).total_squared_error
    assert got == pytest.approx(mmopt.evaluate(skron(wl.predicates(M[:, :6]), wl.prefix(2)), union,
                                               mmopt.Privacy(1.0)).total_squared_error, rel=1e-12)


def test_per_query_variances_of_a_union_strategy_on_few_cells_are_listed():
    """evaluate(ranges_2d(4), union, per_query=True) refused ('listed for product strategies only … on at most
    4,096 cells the dense path lists any pair's'). Oracle: diag(W X⁺ Wᵀ)·c·Δ₁² from the dense twins."""
    W = wl.ranges_2d(4)
    A = st.stack([st.kron(st.identity(4), st.identity(4)), st.kron(st.hierarchical(4), st.hierarchical(4))])
    got = mmopt.evaluate(W, A, mmopt.Privacy(1.0), per_query=True).per_query_variance
    Wd, Ad = W.to_workload().explicit_matrix(), A.to_strategy().matrix
    delta = np.abs(Ad).sum(axis=0).max()
    want = 2.0 * delta**2 * np.einsum("ij,jk,ik->i", Wd, np.linalg.pinv(Ad.T @ Ad), Wd)
    np.testing.assert_allclose(got, want, rtol=1e-9)


@pytest.mark.parametrize("call", ["evaluate", "release"])
def test_a_result_for_its_strategy_and_swapped_arguments_are_named(call):
    W, A = wl.prefix(4), st.hierarchical(4)
    res = mmopt.optimize(W, privacy=Privacy(1.0), method="hierarchical")
    f = getattr(mmopt, call)
    rest = ([1, 2, 3, 4], Privacy(1.0)) if call == "release" else ()
    with pytest.raises(TypeError, match=rf"'strategy' parameter of {call} is an OptimizeResult: .*res\.strategy"):
        f(W, res, *rest)
    with pytest.raises(TypeError, match=rf"{call} takes the workload first, then the strategy.*Got {call}\(Strategy, "
                                        r"Workload"):
        f(A, W, *rest)
    with pytest.raises(TypeError, match=rf"{call} takes the workload first.*Got {call}\(ImplicitStrategy, "
                                        r"ImplicitWorkload"):
        f(ss.kron_strategy(A, A), sw.kron(W, W), *rest)
    f(W, res.strategy, *rest)  # the strategy it holds is taken


def test_a_keyword_release_does_not_take_says_why_or_names_the_nearest():
    """release(..., seed=1) met Python's bare "unexpected keyword argument": it now says a release cannot be seeded
    and how to reproduce a run; a misspelt keyword gets the nearest one; the lists name every real keyword."""
    import inspect

    from mmopt.dispatch import operations as ops
    W, A, x, p = mmopt.workload.prefix(4), mmopt.strategy.identity(4), np.ones(4), mmopt.Privacy(1.0)
    with pytest.raises(TypeError, match=r"'seed': a release draws its noise from OpenDP's vetted samplers, which "
                                        r"cannot be seeded.*mmopt\.matrix_mechanism\(W, A, x, privacy, rng=seed\)"):
        mmopt.release(W, A, x, p, seed=1)
    with pytest.raises(TypeError, match=r"'noise_scal'\. Did you mean 'noise_scale'\?"):
        mmopt.release(W, A, x, p, noise_scal=1.0)
    with pytest.raises(TypeError, match=r"'seed': pass rng=seed"):
        mmopt.matrix_mechanism(W, A, x, p, seed=1)
    for f, known in ((ops.release, ops._RELEASE_KEYWORDS), (ops.matrix_mechanism, ops._SIMULATE_KEYWORDS)):
        kw = [n for n, q in inspect.signature(f).parameters.items() if q.kind is q.KEYWORD_ONLY]
        assert sorted(kw) == sorted(known)


def test_the_hint_to_simulate_a_release_says_how_its_gaussian_noise_differs():
    """The hint said a simulation "reproduces a run"; under δ > 0 its analytic σ is below the σ OpenDP draws for the
    release, which the hint and matrix_mechanism's docstring now say (4–9 %), and under Laplace b is the same."""
    pytest.importorskip("opendp")
    W, A, x = mmopt.workload.prefix(8), mmopt.strategy.hierarchical(8), np.arange(8.0)
    with pytest.raises(TypeError, match=r"analytic Gaussian σ, which under δ > 0 is 4–9 % below"):
        mmopt.release(W, A, x, Privacy(1.0, 1e-6), seed=1)
    for p, low, high in ((Privacy(1.0, 1e-6), 1.04, 1.09), (Privacy(1.0, 1e-9), 1.04, 1.09), (Privacy(1.0), 1.0, 1.0)):
        released = mmopt.release(W, A, x, p).noise_scale
        simulated = mmopt.matrix_mechanism(W, A, x, p, rng=0).noise_scale
        assert low * (1 - 1e-9) <= released / simulated <= high * (1 + 1e-9)


def test_a_simulation_at_a_releases_noise_scale_has_that_releases_error():
    """noise_scale=out.noise_scale draws at the release's σ: over 4,000 seeded runs the squared error matches
    evaluate's × (σ_release/σ_analytic)² (dense pair, Monte-Carlo, sd of the mean ≈ 2.2 %, allowance 10 %); an
    implicit pair's expected_total follows the scale; a scale below the budget's is refused."""
    pytest.importorskip("opendp")
    p = Privacy(1.0, 1e-6)
    W, A, x = mmopt.workload.prefix(8), mmopt.strategy.hierarchical(8), np.arange(8.0)
    scale = mmopt.release(W, A, x, p).noise_scale
    out = mmopt.matrix_mechanism(W, A, x, p, rng=3, size=4000, noise_scale=scale)
    ratio = (scale / mmopt.matrix_mechanism(W, A, x, p, rng=0).noise_scale) ** 2
    assert out.noise_scale == scale and 1.08 <= ratio <= 1.19
    empirical = np.mean(np.sum((out.answers - W.explicit_matrix() @ x) ** 2, axis=1))
    assert empirical / (mmopt.evaluate(W, A, p).total_squared_error * ratio) == pytest.approx(1.0, abs=0.1)
    Wi = mmopt.structured.workloads.kron(mmopt.structured.workloads.prefix(4), mmopt.structured.workloads.identity(3))
    Ai = mmopt.strategy.kron(mmopt.strategy.hierarchical(4), mmopt.strategy.identity(3))
    base = mmopt.matrix_mechanism(Wi, Ai, np.ones(12), p, rng=0)
    wider = mmopt.matrix_mechanism(Wi, Ai, np.ones(12), p, rng=0, noise_scale=2 * base.noise_scale)
    assert wider.expected_total == pytest.approx(4 * base.expected_total, rel=1e-12)
    assert wider.report.total_squared_error == base.report.total_squared_error   # evaluate's, at privacy's σ
    for pair in ((W, A, x), (Wi, Ai, np.ones(12))):
        floor = mmopt.matrix_mechanism(*pair, p, rng=0).noise_scale
        with pytest.raises(ValueError, match=r"'noise_scale' parameter of matrix_mechanism must be >= "):
            mmopt.matrix_mechanism(*pair, p, rng=0, noise_scale=0.9 * floor)


def test_supports_refuses_a_mismatched_pair_in_its_own_name():
    """A domain mismatch in supports was said as "evaluate: …" (a helper's probe)."""
    from mmopt.structured import workloads as sw
    W = sw.kron(mmopt.workload.prefix(8), mmopt.workload.identity(4))
    with pytest.raises(ValueError, match=r"^supports \(checking the pair as evaluate does\): .*different domains"):
        mmopt.supports(W, mmopt.strategy.kron(mmopt.strategy.identity(4), mmopt.strategy.hierarchical(8)))


def test_gram_only_product_workload_with_implicit_strategy_takes_its_twin():
    """kron(all_range(64), all_range(64)) is dense (4,096 cells) but built from its Gram (4.3 million queries): with
    an implicit strategy the dense path formed the 4,096² strategy (53 s) and reported no largest variance, which
    the twin gives exactly (a product's queries' variances are products of the factors'). Oracles: the factors'
    dense reports, and the dense path itself where it runs."""
    W = wl.kron(wl.all_range(64), wl.all_range(64))
    A = st.kron(st.hierarchical(64), st.hierarchical(64))
    assert W.matrix is None
    r = mmopt.evaluate(W, A)
    f = mmopt.error.evaluate(wl.all_range(64), st.hierarchical(64))
    assert type(r).__name__ == "ErrorReport" and r.n_queries == 2080**2 and r.sensitivity == f.sensitivity**2
    assert r.total_squared_error == pytest.approx(f.total_squared_error**2, rel=1e-10)
    assert r.max_variance_exact and r.max_variance == pytest.approx(f.max_variance**2, rel=1e-10)
    assert mmopt.expected_error(W, A) == r.total_squared_error
    with pytest.raises(TypeError, match="'privacy' parameter of expected_error"):
        mmopt.expected_error(W, A, privacy=1.0)
    # small: the same report as the dense path (whose largest variance needs W's rows; the twin bounds it)
    g8 = mmopt.Workload.from_gram(wl.all_range(8).gram, n_queries=36, name="g8")
    W2, A2 = wl.kron(g8, wl.prefix(6)), st.kron(st.hierarchical(8), st.identity(6))
    twin, dense = mmopt.evaluate(W2, A2, Privacy(1.0)), mmopt.error.evaluate(W2, A2.to_strategy(), Privacy(1.0))
    assert twin.total_squared_error == pytest.approx(dense.total_squared_error, rel=1e-12)
    assert twin.sensitivity == dense.sensitivity and twin.n_queries == dense.n_queries
    assert twin.max_variance is None and twin.max_variance_upper >= twin.total_squared_error / twin.n_queries


def test_a_p_identity_strategy_meets_the_dense_prefix_workload_as_its_matrix():
    """min_error on toeplitz.prefix(n) returns a PIdentityStrategy (n ≥ 512); saved and used on workload.prefix(n)
    it was refused as "must be a 2-D array ... Got an entry PIdentityStrategy" (a helper's probe)."""
    from mmopt.search.pidentity import PIdentityStrategy
    theta = np.abs(np.random.default_rng(0).standard_normal((3, 64)))
    A = PIdentityStrategy(theta)
    dense = mmopt.evaluate(wl.prefix(64), A, Privacy(1.0)).total_squared_error
    assert dense == pytest.approx(mmopt.evaluate(wl.prefix(64), A.to_strategy(), Privacy(1.0)).total_squared_error,
                                  rel=1e-12)


def test_a_missing_strategy_is_one_type_error_whatever_the_workload():
    """evaluate(toeplitz.prefix(16), None, per_query=True) raised AttributeError; each family's check worded None
    differently, naming internal functions (a helper's audit)."""
    import numpy as np

    import mmopt
    from mmopt import toeplitz
    from mmopt.structured import workloads as sw
    P = mmopt.Privacy(1.0, 1e-6)
    for W in (mmopt.workload.prefix(16), toeplitz.prefix(16), sw.kron(mmopt.workload.prefix(16))):
        calls = {"evaluate": lambda W=W: mmopt.evaluate(W, None, P, per_query=True),
                 "expected_error": lambda W=W: mmopt.expected_error(W, None, P),
                 "matrix_mechanism": lambda W=W: mmopt.matrix_mechanism(W, None, np.ones(16), P, rng=0),
                 "release": lambda W=W: mmopt.release(W, None, np.ones(16), P)}
        for caller, call in calls.items():
            with pytest.raises(TypeError, match=rf"'strategy' parameter of {caller} must be a strategy.*Got None.*"
                                                r"mmopt\.svd_bound\(W\)"):
                call()


def test_a_matrix_on_grouping_sets_releases_as_the_same_strategy_does():
    """np.eye(12) on a HierarchyWorkload went the dense way, another output type and layout than Strategy(np.eye(12))
    (a helper's audit)."""
    import numpy as np

    import mmopt
    from mmopt.hierarchy import Hierarchy, grouping_sets
    geo = Hierarchy.balanced((2, 3), level_names=("nation", "state", "county"), name="geo")
    H = grouping_sets([geo, Hierarchy.flat(2, name="sex")], [("state", "sex"), ("county",), ()])
    P = mmopt.Privacy(1.0, 1e-6)
    as_strategy = mmopt.release(H, mmopt.strategy.identity(12), np.arange(12.0), P)
    as_array = mmopt.release(H, np.eye(12), np.arange(12.0), P)
    assert type(as_array) is type(as_strategy) and as_array.noise_scale == as_strategy.noise_scale
    se = [mmopt.answers_table(o, H, A, P)["standard_error"].to_numpy() for o, A in
          ((as_strategy, mmopt.strategy.identity(12)), (as_array, np.eye(12)))]
    np.testing.assert_array_equal(se[0], se[1])


def test_a_dense_twin_too_large_is_refused_in_the_words_of_the_method_called():
    """W.to_workload() was refused as "ImplicitWorkload.gram" and a stream workload's as "prefix: the … Gram
    matrix", with no way on (a helper's audit)."""
    import mmopt
    from mmopt import toeplitz
    W = mmopt.workload.kron(mmopt.workload.prefix(1000), mmopt.workload.prefix(1000))
    with pytest.raises(ValueError, match=r"^ImplicitWorkload\.to_workload: .*take the implicit workload as it is"):
        W.to_workload()
    with pytest.raises(ValueError, match=r"^StreamWorkload\.to_workload: the dense twin of prefix\(1,000,000\) .*"
                                         r"take the stream workload as it is, in O\(n\)\."):
        toeplitz.prefix(10**6).explicit_matrix()


def test_a_domain_split_into_other_attributes_is_not_called_a_reordering():
    """(1, 4) against the quad-tree's (2, 2) was refused as "the same 4 cells in another attribute order"."""
    W = mmopt.workload.kron(mmopt.workload.total(1), mmopt.workload.identity(4))
    with pytest.raises(ValueError, match=r"over \(2, 2\): the same 4 cells split into other attributes"):
        mmopt.evaluate(W, mmopt.strategy.quadtree(2))
    swapped = mmopt.strategy.kron(mmopt.strategy.identity(3), mmopt.strategy.identity(2))
    with pytest.raises(ValueError, match="in another attribute order"):
        mmopt.evaluate(mmopt.workload.kron(mmopt.workload.identity(2), mmopt.workload.identity(3)), swapped)


def test_unit_privacy_is_delta_one_for_a_toeplitz_strategy_as_for_its_matrix():
    """tree(8, 2) on prefix(8) at privacy=None: 21.9 (Δ₂, mmopt.toeplitz.evaluate's own default) as a Toeplitz
    strategy, 87.8 (Δ₁) as the same matrix and with per_query=True in the same call."""
    from mmopt import toeplitz
    S, W = toeplitz.tree(8, 2), mmopt.workload.prefix(8)
    dense = mmopt.evaluate(W, S.to_strategy()).total_squared_error
    assert mmopt.evaluate(W, S).total_squared_error == pytest.approx(dense, rel=1e-12)
    assert mmopt.evaluate(W, S, per_query=True).total_squared_error == pytest.approx(dense, rel=1e-12)
    assert mmopt.expected_error(W, S) == pytest.approx(dense, rel=1e-12)
    assert mmopt.evaluate(W, S, norm="l2").total_squared_error < dense



def _norm_pair(family):
    """A (workload, strategy) pair of ``family``."""
    from mmopt.hierarchy import Hierarchy, grouping_sets
    from mmopt.toeplitz.strategies import sqrt_strategy
    g = Privacy(1.0, 1e-6)
    if family == "dense":
        return wl.prefix(8), st.hierarchical(8, 2)
    if family == "stream":
        return toeplitz.prefix(16), sqrt_strategy(16)
    if family == "product":
        return sw.kron(wl.prefix(5), wl.all_range(4)), mmopt.strategy.kron(st.hierarchical(5, 2), st.identity(4))
    W = sw.marginals((3, 4, 2), 2) if family == "residual" else grouping_sets(
        [Hierarchy.flat(3, name="a"), Hierarchy.flat(4, name="b")], [("a",), ("b",), ()])
    return W, mmopt.optimize(W, privacy=g).strategy


@pytest.mark.parametrize("family", ["dense", "stream", "product", "residual", "hierarchy"])
def test_every_report_says_which_sensitivity_norm_it_scaled_by(family):
    """The report names the norm of its Δ, and its Δ is that norm's largest column of A (dense oracle): a report
    at unit privacy could not say which Δ it used (the dense default is Δ₁, the hierarchy's Δ₂)."""
    W, A = _norm_pair(family)
    gauss = Privacy(1.0, 1e-6)
    cases = [(Privacy(1.0), None, "l1"), (gauss, None, "l2"), (None, "l1", "l1"), (None, "l2", "l2")]
    if family == "hierarchy":  # a hierarchical residual strategy is a Gaussian-noise strategy (no closed-form Δ₁)
        cases = [(gauss, None, "l2"), (None, "l2", "l2"), (None, None, "l2")]
    for privacy, norm, want in cases:
        rep = mmopt.evaluate(W, A, privacy, norm=norm)
        assert rep.sensitivity_norm == want
        if hasattr(rep, "to_row"):
            assert rep.to_row()["sensitivity_norm"] == want
        if family == "hierarchy":  # only its Gram is formed: Δ₂ = √max diag(AᵀA)
            delta = np.sqrt(np.max(np.diag(A.dense_gram())))
        else:
            matrix = A.matrix if family == "dense" else A.to_dense() if family == "stream" else A.dense()
            delta = st.max_column_norm(matrix, want)
        assert rep.sensitivity == pytest.approx(delta, rel=1e-9)


def test_release_and_simulation_take_the_verbose_their_progress_line_names(capsys, monkeypatch):
    # a long release printed "still running; pass verbose=False (--quiet) to silence this", and neither
    # mmopt.release nor `mmopt release` took either (a newcomer's stumble)
    pytest.importorskip("opendp")
    import time

    from mmopt._base import runtime as _runtime
    from mmopt.toeplitz import weighted_exact

    slow = weighted_exact.answers
    monkeypatch.setattr(_runtime, "AUTO_DELAY", 0.0)
    monkeypatch.setattr(weighted_exact, "answers", lambda *a: (time.sleep(0.5), slow(*a))[1])
    W = toeplitz.prefix(64)
    S, x = toeplitz.weighted_sqrt(W), np.arange(64.0)
    mmopt.release(W, S, x, Privacy(1.0, 1e-6))
    assert "still running" in capsys.readouterr().err
    mmopt.release(W, S, x, Privacy(1.0, 1e-6), verbose=False)
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match="The 'verbose' parameter of release must be True, False or None"):
        mmopt.release(W, S, x, Privacy(1.0, 1e-6), verbose="quiet")
    Wd = wl.prefix(8)
    mmopt.matrix_mechanism(Wd, st.hierarchical(8, 2), np.arange(8.0), Privacy(1.0), rng=0, verbose=False)
    assert capsys.readouterr().err == ""
    from mmopt.cli import build_parser
    args = build_parser().parse_args(["release", "prefix:8", "--data", "x.csv", "--epsilon", "1", "-q"])
    assert args.verbose is False
