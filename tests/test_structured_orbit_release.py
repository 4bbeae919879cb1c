"""Release and evaluate with an OrbitStrategy (mmopt.structured.orbit_release): the block measurement's Gram is
the dense X, its sensitivity the largest dense column norm, least squares on exact measurements gives W x, the
reported variances are the dense q X⁺ qᵀ and match a Monte-Carlo of OpenDP releases, and mismatches are refused
before any noise is drawn."""

import numpy as np
import pytest

import mmopt
from mmopt.dense._workload_core import Workload
from mmopt.structured import orbit_maxvar as om
from mmopt.structured import orbit_release as orl
from mmopt.structured import workloads as sw
from mmopt.structured.orbit_strategy import OrbitStrategy

pytest.importorskip("opendp")
GAUSS = mmopt.Privacy(1.0, 1e-6)


def _union():
    """A small union with non-trivial orbits on every attribute (intervals of unequal sizes, a one-cell row)."""
    age = Workload.from_matrix(np.array([[1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 0]], float),
                               name="age")
    terms = (sw.Product((sw.total(3), sw.total(6))), sw.Product((sw.identity(3), age), 2.0),
             sw.Product((sw.identity_total(3), sw.identity(6)), 0.5))
    return sw.ImplicitWorkload(terms, "small union")


def _totals_on_the_first():
    """Rank-deficient: attribute 0 is only ever summed, so its zero-sum parts are never measured (blocks None)."""
    age = Workload.from_matrix(np.array([[1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 0]], float),
                               name="age")
    terms = (sw.Product((sw.total(3), sw.total(6))), sw.Product((sw.total(3), age), 2.0))
    return sw.ImplicitWorkload(terms, "totals on the first attribute")


@pytest.fixture(scope="module", params=[_union, _totals_on_the_first], ids=["full rank", "rank deficient"])
def planned(request):
    W = request.param()
    red = om.reduce(W)
    sol = om.solve(red, np.ones(red.n_classes), tol=1e-4)  # the max-variance plan: one target per query class
    return W, OrbitStrategy(red.orbits, red.combinations, sol.blocks)


def _measurement_matrix(W, A):
    """The block measurement as a dense matrix, column by column (A e_x)."""
    roots, blocks = orl._roots(A), orl._Blocks(A)
    cols = []
    for x in range(W.domain_size):
        e = np.zeros(W.domain_size)
        e[x] = 1.0
        e = e.reshape(W.shape)
        cols.append(np.concatenate([(r[0] @ blocks.coefficients(k, e)).ravel()
                                    for k, r in enumerate(roots) if r is not None]))
    return np.array(cols).T


def test_the_block_measurement_has_the_plan_s_gram_and_sensitivity(planned):
    W, A = planned
    M = _measurement_matrix(W, A)
    X = A.gram
    rank = np.linalg.matrix_rank(X)
    assert (rank < W.domain_size) == (W.name == "totals on the first attribute")
    np.testing.assert_allclose(M.T @ M, X, atol=1e-10 * np.abs(X).max())
    brute = np.sqrt((M * M).sum(axis=0).max())
    assert orl._sensitivity(A, orl._roots(A)) == pytest.approx(brute, rel=1e-12)
    assert brute == pytest.approx(np.sqrt(A.sensitivity_squared()), rel=1e-9)


def test_evaluate_is_the_dense_evaluate_of_x_square_root(planned):
    W, A = planned
    got = mmopt.evaluate(W, A, GAUSS)
    dense = mmopt.evaluate(Workload.from_matrix(W.dense()), mmopt.strategy.Strategy(A.matrix), GAUSS)
    assert got.total_squared_error == pytest.approx(dense.total_squared_error, rel=1e-8)
    assert got.max_variance == pytest.approx(dense.max_variance, rel=1e-8)
    assert got.sensitivity == pytest.approx(dense.sensitivity, rel=1e-9)


def test_release_answers_are_unbiased_with_the_reported_variances(planned):
    """400 OpenDP releases at σ = 6: the mean error of every answer is within 5 standard errors of 0, and the
    empirical variance over reported within 5 standard deviations of the chi-square spread (sqrt(2/399)); the
    reported variances are σ² times the dense q X⁺ qᵀ."""
    W, A = planned
    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, W.shape).astype(float)
    truth = W.dense() @ x.ravel()
    outs = [mmopt.release(W, A, x, GAUSS, noise_scale=6.0) for _ in range(400)]
    errors = np.array([o.answers - truth for o in outs])
    var = outs[0].variances
    assert all(np.array_equal(o.variances, var) for o in outs)
    assert np.all(np.abs(errors.mean(axis=0)) <= 5 * np.sqrt(var / 400))
    ratio = errors.var(axis=0, ddof=1) / var
    assert np.all(np.abs(ratio - 1) <= 5 * np.sqrt(2 / 399))
    dense = mmopt.evaluate(Workload.from_matrix(W.dense()), mmopt.strategy.Strategy(A.matrix), GAUSS,
                           per_query=True)
    unit = dense.per_query_variance / (GAUSS.variance_factor * dense.sensitivity**2)  # q X⁺ qᵀ
    np.testing.assert_allclose(var, 36.0 * unit, rtol=1e-8)
    calibrated = mmopt.release(W, A, x, GAUSS)  # OpenDP's calibration: σ at the (rounded-up) Δ₂ for (ε, δ)
    assert calibrated.verified_loss[0] <= GAUSS.epsilon and calibrated.verified_loss[1] <= GAUSS.delta
    np.testing.assert_allclose(calibrated.variances, calibrated.noise_scale**2 * unit, rtol=1e-8)


def test_answers_table_lists_the_release_s_exact_standard_errors(planned):
    """optimize's max-variance strategy for a union past 4,096 cells (sf1) is an OrbitStrategy: answers_table refused
    it ("needs a product or marginals strategy ... Got a dense strategy"), and it had no n_rows nor sensitivity(norm)
    to check an output against. Oracles: the dense measurement's rows, and the dense q X⁺ qᵀ at the noise drawn."""
    pytest.importorskip("pandas")
    from mmopt.answers import answers_table
    W, A = planned
    M = _measurement_matrix(W, A)
    assert A.n_rows == M.shape[0]
    assert A.sensitivity("l2") == pytest.approx(np.sqrt((M * M).sum(axis=0).max()), rel=1e-9)
    x = np.arange(W.domain_size, dtype=float).reshape(W.shape) % 4
    out = mmopt.release(W, A, x, GAUSS)
    assert out.measurements.size == A.n_rows
    with pytest.raises(ValueError, match="release: an OrbitStrategy .* reconstruct_options are not available"):
        mmopt.release(W, A, x, GAUSS, reconstruct_options={"max_iterations": 5})  # (was dropped silently)
    table = answers_table(out, W, A, alpha=0.05)
    Wd = W.dense()
    flat = mmopt.release(W, A, x.ravel(), GAUSS)  # flat, as the implicit release takes it (refused: "of shape")
    assert np.all(np.abs(flat.answers - Wd @ x.ravel()) <= 6 * np.sqrt(flat.variances))  # unbiased: within 6 s.e.
    oracle = out.noise_scale ** 2 * np.einsum("ij,jk,ik->i", Wd, np.linalg.pinv(A.gram, hermitian=True), Wd)
    se = table["standard_error"].to_numpy()
    np.testing.assert_allclose(se ** 2, oracle, rtol=1e-8)
    np.testing.assert_allclose(table["answer"].to_numpy(), out.answers, rtol=1e-12)
    np.testing.assert_allclose(table["upper"] - table["answer"], 1.959963984540054 * se, rtol=1e-9)
    other = OrbitStrategy(A.orbits, A.combinations, tuple(None if X is None else 2.0 * X for X in A.blocks))
    with pytest.raises(ValueError, match="Pass the strategy the output was released with"):
        answers_table(out, W, other)
    with pytest.raises(ValueError, match="'norm' parameter of OrbitStrategy.sensitivity must be 'l2'"):
        A.sensitivity("l1")


def test_refusals_before_any_noise(planned, monkeypatch):
    W, A = planned
    from mmopt._base import opendp as bo

    def no_draw(*a, **k):  # a refused release never reaches the sampler
        raise AssertionError("noise drawn")
    monkeypatch.setattr(orl, "measure", no_draw)
    with pytest.raises(ValueError, match="delta > 0"):
        mmopt.release(W, A, np.ones(W.shape), mmopt.Privacy(1.0))
    with pytest.raises(ValueError, match="shape"):
        mmopt.release(W, A, np.ones(5), GAUSS)
    other = sw.ImplicitWorkload((sw.Product((sw.identity(3), sw.identity(6))),), "cells")
    with pytest.raises(ValueError, match="other cell symmetries"):
        mmopt.release(other, A, np.ones(W.shape), GAUSS)
    with pytest.raises(ValueError, match="released, not simulated"):
        mmopt.matrix_mechanism(W, A, np.ones(W.shape), GAUSS)
    assert bo.measure is not no_draw


def test_a_block_left_unmeasured_is_refused_by_evaluate_as_by_release(planned):
    """evaluate returned inf totals for an OrbitStrategy that does not measure a block the workload uses, where the
    dense path and release refuse it."""
    W, A = planned
    k = max(i for i, X in enumerate(A.blocks) if X is not None)
    blocks = list(A.blocks)
    blocks[k] = np.zeros_like(blocks[k])
    B = OrbitStrategy(A.orbits, A.combinations, blocks)
    for call in (lambda: mmopt.evaluate(W, B), lambda: mmopt.evaluate(W, B, GAUSS),
                 lambda: mmopt.release(W, B, np.ones(W.shape), GAUSS)):
        with pytest.raises(ValueError, match=r"queries of .* are not estimable from the OrbitStrategy"):
            call()


def test_a_block_that_is_not_a_strategy_gram_is_refused():
    # an asymmetric block was read three ways (gram raw, matrix from one triangle, variances from (X + Xᵀ)/2), a
    # NaN one gave sensitivity nan (a helper's probe)
    age = Workload.from_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1]], float), name="age")
    W = sw.ImplicitWorkload((sw.Product((sw.total(3), age)), sw.Product((sw.identity(3), sw.identity(4)), 2.0)),
                            "u")
    red = om.reduce(W)
    sol = om.solve(red, np.ones(red.n_classes))
    assert OrbitStrategy(red.orbits, red.combinations, sol.blocks).sensitivity() > 0
    k = next(i for i, b in enumerate(sol.blocks) if b is not None and b.shape[0] >= 2)
    for change, match in ((lambda B: B.__setitem__((0, 1), B[0, 1] + 0.5), "symmetric positive semidefinite"),
                          (lambda B: B.__setitem__((0, 0), np.nan), "finite"),
                          (lambda B: B.__imul__(-1.0), "symmetric positive semidefinite")):
        blocks = [None if b is None else b.copy() for b in sol.blocks]
        change(blocks[k])
        with pytest.raises(ValueError, match=f"'blocks' parameter of OrbitStrategy must hold .*{match}"):
            OrbitStrategy(red.orbits, red.combinations, tuple(blocks))


def test_answers_refuse_another_orbit_plan_and_evaluate_names_a_bad_privacy():
    """Orbit releases recorded no fingerprint: a plan of the same workload for other targets (the same rows, Δ₂ = 1)
    passed answers_table, its standard errors 0.79–1.77× the truth; evaluate(W, A, 1.0) raised a raw
    AttributeError; per_query_variances(W, A) without privacy defaulted to l1 and refused the pair evaluate answers
    (a helper's audit)."""
    from mmopt import answers as ans
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    W = _union()
    red = om.reduce(W)
    A1 = OrbitStrategy(red.orbits, red.combinations, om.solve(red, np.ones(red.n_classes)).blocks)
    A2 = OrbitStrategy(red.orbits, red.combinations, om.solve(red, np.linspace(1, 5, red.n_classes)).blocks)
    assert A1.n_rows == A2.n_rows and A1.sensitivity() == pytest.approx(A2.sensitivity(), rel=1e-9)
    out = mmopt.release(W, A1, np.ones(W.shape), GAUSS)
    np.testing.assert_allclose(orl.orbit_apply(A1)(np.arange(18.0)), _measurement_matrix(W, A1) @ np.arange(18.0),
                               rtol=1e-12, atol=1e-12)
    t = ans.answers_table(out, W, A1, GAUSS)
    np.testing.assert_allclose(t["standard_error"] ** 2, out.variances, rtol=1e-9)
    with pytest.raises(ValueError, match="not the strategy the output was released with"):
        ans.answers_table(out, W, A2, GAUSS)
    for bad in (1.0, "gaussian"):
        with pytest.raises(TypeError, match="'privacy' parameter of evaluate must be a Privacy or None"):
            mmopt.evaluate(W, A1, bad)
    unit = np.concatenate([v for _, _, v in ans.per_query_variances(W, A1)])
    np.testing.assert_allclose(unit, mmopt.evaluate(W, A1).per_query_variance, rtol=1e-12)


def test_a_hand_built_orbit_strategy_is_checked_as_a_saved_one():
    W = _union()
    red = om.reduce(W)
    A = OrbitStrategy(red.orbits, red.combinations, om.solve(red, np.ones(red.n_classes)).blocks)
    k = next(i for i, X in enumerate(A.blocks) if X is not None)
    c = list(A.combinations[k])
    j = next(i for i, cj in enumerate(c) if cj >= 0) if any(cj >= 0 for cj in c) else None
    bad_combos = []
    if j is not None:
        for wrong in (99, next((q for q in range(red.orbits[j].r) if red.orbits[j].sizes[q] < 2), 99)):
            bad_combos.append(tuple(wrong if i == j else cj for i, cj in enumerate(c)))
    bad_combos.append(tuple(c[:-1]))  # too few attributes
    for bad in bad_combos:
        combos = tuple(bad if i == k else cc for i, cc in enumerate(A.combinations))
        with pytest.raises(ValueError, match="'combinations' parameter of OrbitStrategy must hold, per attribute"):
            OrbitStrategy(A.orbits, combos, A.blocks)
    with pytest.raises(TypeError, match="'blocks' parameter of OrbitStrategy must be a tuple"):
        OrbitStrategy(A.orbits, A.combinations, None)
    complex_blocks = tuple(None if X is None else X.astype(complex) for X in A.blocks)
    with pytest.raises(TypeError, match="'blocks' parameter of OrbitStrategy must hold real matrices"):
        OrbitStrategy(A.orbits, A.combinations, complex_blocks)
    assert OrbitStrategy(A.orbits, A.combinations, list(A.blocks)).n_rows == A.n_rows  # a list is a sequence too


@pytest.mark.parametrize("v", [0.1, 0.3, 0.7])
def test_a_row_constant_on_an_orbit_asks_no_standard_block(v):
    """Its computed energy ‖Pᵢf‖² was cancellation (2.2e-16 for 0.7 on three cells), which made blocks no query
    needs: 12 rows for 0.7 where 4 serve 0.1 (a helper's audit)."""
    f = Workload.from_matrix(np.array([[v, v, v]]), name="f")
    W = sw.ImplicitWorkload((sw.Product((f, sw.identity(4))), sw.Product((f, sw.total(4)), 2.0)), "u")
    red = om.reduce(W)
    assert not np.any(red.orbits[0].energies(np.array([[v, v, v]])))
    A = OrbitStrategy(red.orbits, red.combinations, om.solve(red, np.ones(red.n_classes)).blocks)
    assert A.n_rows == 4
    dense = mmopt.evaluate(Workload.from_matrix(W.dense()), mmopt.Strategy(A.matrix), norm="l2")  # the oracle
    np.testing.assert_allclose(mmopt.evaluate(W, A).max_variance, dense.max_variance, rtol=1e-9)


def test_charged_answers_cover_every_neighbour_exactly(planned):
    """The measured answers within c·|A|x + η of the exact ones (Fractions, from the dense measurement matrix), Δ_abs
    above |A|'s column norms, and every neighbour of histograms of 2³² − 1 records within d_in (plain BLAS moved 2
    of 360 past it: a review's check)."""
    import math
    from fractions import Fraction

    from mmopt.structured import charged_answers as ca
    from mmopt.structured.release import upper_sensitivity
    W, A = planned
    roots, blocks = orl._roots(A), orl._Blocks(A)
    c, eta = orl._charge(roots, blocks)
    d_in = ca.charged_sensitivity(upper_sensitivity(orl._sensitivity(A, roots)), c, eta, "l2",
                                  orl._n_rows(roots, blocks))
    fraction = np.vectorize(lambda v: Fraction(float(v)), otypes=[object])

    def exact(x, absolute=False):  # (S_c ⊗ I)·(⊗ⱼ Bⱼᵀ) x in Fractions from the factors' floats (or with |·|)
        out = []
        for k, r in enumerate(roots):
            if r is not None:
                T = fraction(x)
                for j, B in enumerate(blocks.bases[k]):
                    T = np.moveaxis(np.tensordot(fraction(np.abs(B.T) if absolute else B.T), T, axes=(1, j)), 0, j)
                T = np.transpose(T, blocks.order[k]).reshape(blocks.rows[k], -1)
                out.extend((fraction(np.abs(r[0]) if absolute else r[0]) @ T).ravel())
        return out

    def answers(x):
        return np.concatenate([P.ravel() for _, P in orl._charged_parts(roots, blocks, x)])

    rng = np.random.default_rng(0)
    worst = Fraction(0)
    for trial in range(6):
        x = rng.multinomial(2**32 - 1, rng.dirichlet(np.full(W.domain_size, 0.5))).reshape(W.shape).astype(float)
        y = answers(x)
        if trial < 2:  # entrywise, against the exact answers
            for got, e, b in zip(y, exact(x), exact(x, absolute=True), strict=True):
                assert abs(Fraction(float(got)) - e) <= Fraction(c) * b + Fraction(eta)
            # ‖(|S|⊗I)(⊗|B|ᵀ) x‖ ≤ ‖x‖₁·Δ: the charge's premise (its columns have A's norms, _charge)
            norm = math.sqrt(float(sum(b * b for b in exact(x, absolute=True))))
            assert norm <= float(x.sum()) * orl._sensitivity(A, roots) * (1 + 1e-12)
        for j in np.ndindex(*W.shape):
            x2 = x.copy()
            x2[j] += 1
            sq = sum((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(answers(x2), y, strict=True))
            worst = max(worst, sq)
    assert worst <= Fraction(d_in) ** 2


def test_release_refuses_fractional_counts_before_the_draw(planned):
    W, A = planned
    with pytest.raises(ValueError, match="whole numbers"):
        orl.release(W, A, np.full(W.shape, 0.5), GAUSS)


def test_release_measures_the_charged_answers_at_the_charged_sensitivity(planned, monkeypatch):
    from mmopt.structured.release import upper_sensitivity
    W, A = planned
    measured = []
    real = orl.measure
    monkeypatch.setattr(orl, "measure", lambda values, *a, **kw: measured.append(values) or real(values, *a, **kw))
    x = np.random.default_rng(1).integers(0, 10**6, W.shape).astype(float)
    out = orl.release(W, A, x, GAUSS)
    roots = orl._roots(A)
    charged = np.concatenate([P.ravel() for _, P in orl._charged_parts(roots, orl._Blocks(A), x)])
    assert len(measured) == 1 and np.array_equal(measured[0], charged)
    c, _ = orl._charge(roots, orl._Blocks(A))
    up = upper_sensitivity(orl._sensitivity(A, roots))
    assert out.sensitivity >= up * (1 + c * (2 * 2**32 + 1)) > up
