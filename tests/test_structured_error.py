"""Structured error, SVD bound and sensitivity against the dense reference path (mmopt.error)."""

import numpy as np
import pytest

import mmopt
from mmopt import strategy as st
from mmopt import workload as wl
from mmopt.structured import analysis, census
from mmopt.structured import bounds as bd
from mmopt.structured import strategies as ss
from mmopt.structured import workloads as sw

REL = 1e-10
EPS1 = mmopt.Privacy(1.0)


def _dense_check(W, A, privacy=EPS1, **kw):
    r = analysis.evaluate(W, A, privacy, **kw)
    ref = mmopt.evaluate(W.to_workload(), A.to_strategy(), privacy)
    return r, ref


def _rank_deficient(n, rng):
    """A supporting rank-deficient factor: rows span everything but the alternating vector (n even)."""
    alt = (-1.0) ** np.arange(n)
    B = rng.normal(size=(n, n))
    B -= np.outer(B @ alt, alt) / n
    return st.Strategy(B, "rankdef")


def _factor_strategies(n, rng):
    out = [st.identity(n), st.hierarchical(n), st.Strategy(rng.normal(size=(n + 2, n)), "random")]
    if n & (n - 1) == 0:
        out.append(st.wavelet(n))
    return out


@pytest.mark.parametrize("shape", [(4, 3), (2, 4, 3), (8, 4)])
def test_product_strategy_matches_dense(shape, rng):
    Wf = [wl.all_range(shape[0]), wl.prefix(shape[1])] + [sw.identity_total(n) for n in shape[2:]]
    W = sw.union([sw.kron(*Wf), sw.marginals(shape, 1), sw.kron(*[wl.total(n) for n in shape], weight=3.0)],
                 weights=[1.0, 2.0, 0.5])
    for k in range(4):
        facs = [_factor_strategies(n, rng)[min(k, len(_factor_strategies(n, rng)) - 1)] for n in shape]
        A = ss.kron_strategy(*facs, weight=1.5)
        r, ref = _dense_check(W, A)
        assert r.method == "product" and r.total_exact and r.max_variance_exact
        assert r.total_squared_error == pytest.approx(ref.total_squared_error, rel=REL)
        assert r.max_variance == pytest.approx(ref.max_variance, rel=REL)
        assert r.sensitivity == pytest.approx(ref.sensitivity, rel=1e-14)
        r2, ref2 = _dense_check(W, A, mmopt.Privacy(1.0, 1e-6))
        assert r2.total_squared_error == pytest.approx(ref2.total_squared_error, rel=REL)


def test_a_light_factor_row_beside_a_heavy_one_is_judged_by_its_own_norm():
    """The implicit twin of test_profile's: a predicates factor [10⁷·(e₀ + e₁); e₂ − e₃] against a factor
    [[1, 1, 0, 0], [0, 0, 1, 1]] leaks 10⁻¹⁴ of the factor's Gram, under 100·n·eps, and got a finite error (the
    dense oracle: e₂ − e₃ is outside the row space). Factor rows are now judged one by one, as dense rows are."""
    W = sw.kron(sw.predicates(np.array([[1e7, 1e7, 0, 0], [0, 0, 1.0, -1.0]])), wl.prefix(3))
    A = ss.kron_strategy(np.array([[1.0, 1, 0, 0], [0, 0, 1, 1]]), np.eye(3))
    with pytest.raises(ValueError, match="does not support"):
        mmopt.structured.evaluate(W, A)
    B = ss.kron_strategy(np.array([[1.0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]), np.eye(3))
    assert np.isfinite(mmopt.structured.evaluate(W, B).total_squared_error)


def test_rank_deficient_supporting_and_unsupported(rng):
    B = _rank_deficient(4, rng)
    alt = (-1.0) ** np.arange(4)
    Wsup = wl.Workload.from_matrix(rng.normal(size=(5, 4)) @ (np.eye(4) - np.outer(alt, alt) / 4), name="perp")
    W = sw.kron(Wsup, wl.all_range(3))
    A = ss.kron_strategy(B, st.hierarchical(3))
    r, ref = _dense_check(W, A)
    assert r.total_squared_error == pytest.approx(ref.total_squared_error, rel=1e-9)
    assert r.max_variance == pytest.approx(ref.max_variance, rel=1e-9)
    with pytest.raises(ValueError, match="does not support"):
        analysis.evaluate(sw.kron(wl.identity(4), wl.all_range(3)), A)


def test_marginals_strategy_algebra_matches_dense(rng):
    shape = (3, 4, 2)
    theta = rng.uniform(0.2, 2.0, 8)
    A = ss.marginals_strategy(shape, theta)
    for W in (sw.lower_marginals(shape, 2), sw.kron(*[sw.identity_total(n) for n in shape]),
              sw.union([sw.kron(wl.all_range(3), wl.prefix(4), sw.identity_total(2)), sw.marginals(shape, 1)])):
        r, ref = _dense_check(W, A)
        assert r.method == "algebra" and r.total_exact
        assert r.total_squared_error == pytest.approx(ref.total_squared_error, rel=REL)
        assert r.max_variance <= ref.max_variance * (1 + 1e-10) <= r.max_variance_upper * (1 + 2e-10)
        if r.max_variance_exact:
            assert r.max_variance == pytest.approx(ref.max_variance, rel=REL)
    assert A.sensitivity("l1") == pytest.approx(theta.sum(), rel=1e-14)
    # Without the full-domain marginal, the 3-way marginal is unsupported.
    theta[-1] = 0.0
    with pytest.raises(ValueError, match="does not support"):
        analysis.evaluate(sw.marginals(shape, 3), ss.marginals_strategy(shape, theta))


def test_general_union_dense_path_and_loewner_bound(rng):
    shape = (4, 6)
    W = sw.union([sw.kron(wl.all_range(4), wl.prefix(6)), sw.marginals(shape, 1)])
    A = ss.union_strategy([ss.kron_strategy(st.hierarchical(4), st.identity(6)),
                           ss.kron_strategy(st.identity(4), st.Strategy(rng.normal(size=(3, 6)))),
                           ss.marginals_strategy(shape, [0.0, 1.0, 1.0, 0.0])], weights=[1.0, 0.7, 1.3])
    r, ref = _dense_check(W, A)
    assert r.method == "dense" and r.total_squared_error == pytest.approx(ref.total_squared_error, rel=1e-12)
    b = analysis.evaluate(W, A, EPS1, dense_limit=0)
    assert b.method == "loewner_bound" and not b.total_exact
    assert b.total_lower <= ref.total_squared_error * (1 + 1e-12) <= b.total_squared_error * (1 + 2e-12)
    assert b.total_width == pytest.approx(1 - b.total_lower / b.total_squared_error, rel=1e-12)
    assert b.max_variance <= ref.max_variance * (1 + 1e-10)
    assert b.max_variance_upper >= ref.max_variance * (1 - 1e-10)
    assert r.total_lower == r.total_squared_error and r.total_width == 0.0  # an exact report is its own bracket


def _prefix_union(n, d):
    """1- and 2-way prefix marginals: prefix sums on the chosen attributes, the total on the others."""
    P, T = np.tril(np.ones((n, n))), np.ones((1, n))
    pairs = [(a,) for a in range(d)] + [(a, b) for a in range(d) for b in range(a + 1, d)]
    return sw.union([sw.kron(*[P if i in S else T for i in range(d)]) for S in pairs], name=f"prefix12({n}^{d})")


def _random_union(shape, rng, blocks=3):
    """Blocks of random full-rank factors, plus one with a total (1ᵀ) factor (rank-deficient)."""
    parts = [ss.kron_strategy(*[st.Strategy(rng.normal(size=(n + 1, n))) for n in shape]) for _ in range(blocks)]
    parts.append(ss.kron_strategy(st.Strategy(np.ones((1, shape[0]))), *[st.identity(n) for n in shape[1:]]))
    return ss.union_strategy(parts, weights=rng.uniform(0.5, 2.0, size=len(parts)).tolist())


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_bracket_contains_the_dense_error(norm, rng):
    """The per-term bracket of a union no exact path covers holds the dense exact error (N ≤ 4,096)."""
    from mmopt.multidim.union import solve_union
    for W, A in [(_prefix_union(4, 4), None), (_prefix_union(8, 3), None),
                 (sw.union([sw.kron(wl.all_range(4), wl.prefix(5), wl.identity(3)),
                            sw.kron(wl.prefix(4), sw.total(5), wl.all_range(3))], weights=[1.0, 0.5]),
                  _random_union((4, 5, 3), rng))]:
        A = A or solve_union(W, norm=norm, restarts=1, seed=0).strategy
        ref = mmopt.evaluate(W.to_workload(), A.to_strategy(), None, norm=norm)
        b = analysis.evaluate(W, A, None, norm=norm, dense_limit=0)
        assert b.method in ("loewner_bound", "algebra", "coupled")
        if b.method == "coupled":  # OPT_+ on 1+2-way unions under L2: one term per pair, scored exactly
            assert b.total_exact and b.total_squared_error == pytest.approx(ref.total_squared_error, rel=1e-8)
        assert b.total_lower <= ref.total_squared_error * (1 + 1e-12), (W.name, b.total_lower, ref)
        assert ref.total_squared_error <= b.total_squared_error * (1 + 1e-12), (W.name, b.total_squared_error, ref)
        assert b.max_variance_upper >= ref.max_variance * (1 - 1e-10)
        if b.max_variance is not None:
            assert b.max_variance <= ref.max_variance * (1 + 1e-10)


@pytest.mark.slow  # ~20 s: the dense reference at N = 1,856 with SF1's 33 terms
def test_bracket_contains_the_dense_error_on_a_reduced_sf1():
    """SF1's 33 terms on every 4th race and age cell (N = 1,856) under its OPT_+ union: the bracket holds the
    dense error (measured: lower end 1.4% below it, upper end 40% above)."""
    from mmopt.multidim.union import solve_union
    keep = [np.arange(2), np.arange(2), np.arange(0, 64, 4), np.arange(0, 115, 4)]
    terms = []
    for t in census.sf1().terms:
        fs = []
        for f, k in zip(t.factors, keep, strict=True):
            M = f.explicit_matrix()[:, k]
            M = M[M.any(axis=1)]
            fs.append(wl.Workload.from_matrix(M if M.size else np.ones((1, len(k))), name=f.name))
        terms.append(sw.Product(tuple(fs), t.weight))
    W = sw.ImplicitWorkload(tuple(terms), "sf1_small")
    A = solve_union(W, norm="l2", restarts=1, seed=0).strategy
    ref = mmopt.evaluate(W.to_workload(), A.to_strategy(), None, norm="l2").total_squared_error
    b = analysis.evaluate(W, A, None, norm="l2", dense_limit=0)
    assert b.method == "loewner_bound" and b.total_lower <= ref * (1 + 1e-12) <= b.total_squared_error * (1 + 1e-12)
    assert b.total_lower >= 0.9 * ref  # the dual point is close (a regression guard, not a proof)


def test_bracket_per_term_upper_is_at_least_each_terms_exact_error(rng):
    """Each term's upper value (one term at a time: the same bracket code) is ≥ its dense exact error, and the
    total's bracket is the sum of the terms'."""
    W, A = _prefix_union(4, 3), _random_union((4, 4, 4), rng)
    ups, lows = 0.0, 0.0
    for t in W.terms:
        Wk = sw.ImplicitWorkload((t,), name="term")
        ref = mmopt.evaluate(Wk.to_workload(), A.to_strategy(), None, norm="l2").total_squared_error
        b = analysis.evaluate(Wk, A, None, norm="l2", dense_limit=0)
        assert b.total_lower <= ref * (1 + 1e-12) <= b.total_squared_error * (1 + 2e-12)
        ups, lows = ups + b.total_squared_error, lows + b.total_lower
    whole = analysis.evaluate(W, A, None, norm="l2", dense_limit=0)
    assert whole.total_squared_error == pytest.approx(ups, rel=1e-12)
    assert whole.total_lower >= lows * (1 - 1e-12)  # at least the terms' (the SVD bound may raise it)


def test_bracket_is_tight_when_the_union_is_a_product(rng):
    """θ₁A⊗B stacked on θ₂A⊗B is the product √(θ₁²+θ₂²)·A⊗B: both ends of the bracket meet the exact value
    (inverse-variance mixing of the blocks above, the product dual point below)."""
    A1, A2 = st.hierarchical(4), st.Strategy(rng.normal(size=(6, 5)))
    A = ss.union_strategy([ss.kron_strategy(A1, A2), ss.kron_strategy(A1, A2)], weights=[1.0, 0.6])
    W = sw.kron(wl.all_range(4), wl.prefix(5))
    exact = mmopt.evaluate(W.to_workload(), A.to_strategy(), None, norm="l2").total_squared_error
    b = analysis.evaluate(W, A, None, norm="l2", dense_limit=0)
    assert b.total_squared_error == pytest.approx(exact, rel=1e-9) and b.total_lower == pytest.approx(exact, rel=1e-9)
    assert b.total_width < 1e-9


def test_bracket_mixes_blocks_that_support_a_term_only_together():
    """1ᵀ⊗I and D⊗I (D the differences, row space ⊥ 1) each miss part of I⊗I; the split F = P₀F + P₁F lets
    each block estimate its piece: an upper value exists and, the pieces being the blocks' ranges, is exact."""
    one, D = st.Strategy(np.ones((1, 3))), st.Strategy(np.array([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0]]))
    A = ss.union_strategy([ss.kron_strategy(one, st.identity(3)), ss.kron_strategy(D, st.identity(3))])
    W = sw.kron(wl.identity(3), wl.prefix(3))
    exact = mmopt.evaluate(W.to_workload(), A.to_strategy(), None, norm="l2").total_squared_error
    b = analysis.evaluate(W, A, None, norm="l2", dense_limit=0)
    assert b.total_squared_error == pytest.approx(exact, rel=1e-9)
    assert b.total_lower <= exact * (1 + 1e-12)


def test_bracket_refuses_a_term_no_block_supports(rng):
    """Two random rank-2 factors on 3 cells support I only together, along no P₀/P₁ split: no upper value."""
    R1, R2 = st.Strategy(rng.normal(size=(2, 3))), st.Strategy(rng.normal(size=(2, 3)))
    A = ss.union_strategy([ss.kron_strategy(R1, st.identity(3)), ss.kron_strategy(R2, st.identity(3))])
    W = sw.kron(wl.identity(3), wl.identity(3))
    with pytest.raises(ValueError, match="supports term 0 of workload"):
        analysis.evaluate(W, A, None, norm="l2", dense_limit=0)


@pytest.mark.parametrize("make", [
    lambda: sw.kron(wl.all_range(5), wl.prefix(4)),
    lambda: sw.kron(sw.identity_total(3), wl.all_range(4), wl.prefix(2), weight=2.0),
    lambda: sw.lower_marginals((3, 4, 2), 2),
    lambda: sw.kron(*[sw.identity_total(n) for n in (3, 2, 4)]),
    lambda: sw.union([sw.kron(wl.all_range(4), wl.prefix(5)), sw.marginals((4, 5), 1)], weights=[1.0, 2.0]),
])
def test_svd_bound_matches_dense(make):
    W = make()
    ref = mmopt.svd_bound(W.to_workload(), EPS1)
    b = bd.svd_bound(W, EPS1)
    assert b.exact and b.value == pytest.approx(ref, rel=REL)
    low = bd.svd_bound(W, EPS1, dense_limit=0)
    assert low.value <= ref * (1 + 1e-12)
    assert low.exact == (low.method in ("product", "algebra", "root_gram"))
    if low.exact:
        assert low.value == pytest.approx(ref, rel=REL)


@pytest.mark.parametrize("build,total,m", [
    (census.sf1, 2_235_124, 4151),
    (census.sf1_plus, 227_982_648, 215_852),
    (census.cps_w2, 5_769_120_000, 600_000),
])
def test_identity_totals_exact(build, total, m):
    W = build()
    r = analysis.evaluate(W, ss.kron_strategy(*[st.identity(n) for n in W.shape]), EPS1)
    assert r.n_queries == m and r.total_squared_error == total and r.total_exact


def test_reduced_sf1_matches_dense(rng):
    """The SF1 term structure on a column subset of each attribute, evaluated both ways."""
    keep = [np.arange(2), np.arange(2), np.array([0, 1, 2, 3, 7, 63]), np.array([0, 10, 17, 18, 60, 101, 114])]
    terms = []
    for t in census.sf1().terms:
        fs = []
        for f, k in zip(t.factors, keep, strict=True):
            M = f.explicit_matrix()[:, k]
            fs.append(wl.Workload.from_matrix(M if M.any() else np.ones((1, len(k))), name=f.name))
        terms.append(sw.Product(tuple(fs), t.weight))
    W = sw.ImplicitWorkload(tuple(terms), "sf1_small")
    shape = W.shape
    for A in (ss.kron_strategy(*[st.hierarchical(n) for n in shape]),
              ss.marginals_strategy(shape, rng.uniform(0.5, 1.5, 16))):
        r, ref = _dense_check(W, A)
        assert r.total_squared_error == pytest.approx(ref.total_squared_error, rel=REL)
    ref_b = mmopt.svd_bound(W.to_workload(), EPS1)
    b = bd.svd_bound(W, EPS1, dense_limit=0)  # R = 4,151 query directions ≤ MAX_ROOT_ROWS: exact from the roots
    # two eigenvalue sums of the same spectrum (168 non-zero of them, from a 168² Gram and a 4,151² root Gram):
    # equal up to a few ulps of the largest eigenvalue per term, far below 1e-10 relative on any BLAS kernel
    assert b.exact and b.method == "root_gram" and b.value == pytest.approx(ref_b, rel=1e-10)
    assert bd.svd_bound(W, EPS1, dense_limit=0, root_limit=0).value <= ref_b  # the proven fallback stays below


def test_sensitivity_paths(rng):
    shape = (5, 6)
    A = ss.union_strategy([ss.kron_strategy(st.hierarchical(5), st.Strategy(rng.normal(size=(4, 6)))),
                           ss.kron_strategy(st.Strategy(rng.uniform(size=(2, 5))), st.wavelet(8).matrix[:, :6])],
                          weights=[1.0, 2.0])
    D = A.dense()
    for norm, ref in (("l1", np.abs(D).sum(0).max()), ("l2", np.sqrt((D * D).sum(0).max()))):
        s = ss.sensitivity(A, norm)
        assert s.exact and s.method == "scan" and s.value == pytest.approx(ref, rel=1e-13)
        u = ss.sensitivity(A, norm, scan_limit=0)
        assert not u.exact and u.value >= ref * (1 - 1e-15)
    m = ss.marginals_strategy(shape, [1.0, 2.0, 0.0, 3.0])
    assert ss.sensitivity(m, "l1").method == "uniform" and m.sensitivity("l2") == pytest.approx(np.sqrt(14))
    assert ss.sensitivity(ss.kron_strategy(st.hierarchical(4), st.wavelet(4)), "l1").value == 9.0
    with pytest.raises(ValueError, match="'norm' parameter of sensitivity"):
        ss.sensitivity(m, "l3")


def test_evaluate_validation():
    W = sw.kron(wl.prefix(3), wl.prefix(4))
    with pytest.raises(ValueError, match="different domains"):
        analysis.evaluate(W, ss.kron_strategy(st.identity(4), st.identity(3)))
    with pytest.raises(TypeError, match="'strategy' parameter of evaluate"):
        analysis.evaluate(W, st.identity(12))
    with pytest.raises(ValueError, match="'theta' parameter of marginals_strategy"):
        ss.marginals_strategy((2, 2), [1, -1, 0, 0])
    with pytest.raises(ValueError, match="entries"):
        _ = ss.marginals_strategy((10,) * 10, {tuple(range(10)): 1.0}).gram


def test_a_helmert_factor_cannot_answer_totals_and_is_refused():
    # HᵀH = I − J/3 is αI + βJ with α + 3β ≈ 1e-17 from round-off, not 0: counted as positive, every row of A
    # summing to 0 on attribute 0 was scored at a finite 2·10¹⁷ (exact), with max variance 5·10¹⁶ and answers 0
    import math

    from mmopt.structured.per_query import kron_variance

    H = np.array([[1, -1, 0], [1, 1, -2]], float) / np.array([[math.sqrt(2)], [math.sqrt(6)]])
    W = sw.kron(sw.total(3), sw.identity(4))
    A = ss.union_strategy([ss.kron_strategy(H, np.eye(4)), ss.kron_strategy(H, np.ones((1, 4)))])
    Wd, Ad = W.dense(), A.dense()
    assert np.linalg.norm(Wd - Wd @ np.linalg.pinv(Ad) @ Ad) > 1.0  # the dense oracle: W is not in A's row space
    for call in (lambda: mmopt.structured.evaluate(W, A), lambda: kron_variance(W, A)):
        with pytest.raises(ValueError, match="does not support"):
            call()


def test_limits_and_budgets_are_checked_by_name():
    # they raised bare TypeErrors ('<=' not supported …), or were accepted (dense_limit=-1, svd_bound's
    # dense_limit='x'), or failed as "LSMR did not reach the solution" (max_iterations=-1 or 1.5)
    from mmopt.structured.mechanism import least_squares

    W = sw.kron(sw.prefix(3), sw.identity(2))
    A = ss.union_strategy([ss.kron_strategy(np.eye(3), np.eye(2)), ss.kron_strategy(np.ones((1, 3)), np.eye(2))])
    for bad, error in (("x", TypeError), (None, TypeError), (-1, ValueError), (1.5, TypeError)):
        with pytest.raises(error, match="'dense_limit' parameter of evaluate"):
            mmopt.structured.evaluate(W, A, dense_limit=bad)
        with pytest.raises(error, match="'dense_limit' parameter of svd_bound"):
            bd.svd_bound(W, dense_limit=bad)
        if bad is not None:
            with pytest.raises(error, match="'root_limit' parameter of svd_bound"):
                bd.svd_bound(W, dense_limit=0, root_limit=bad)
    for bad, error in (("10", TypeError), (-1, ValueError), (0, ValueError), (1.5, TypeError)):
        with pytest.raises(error, match="'max_iterations' parameter of least_squares"):
            least_squares(A, np.ones(A.n_rows), max_iterations=bad)
    assert least_squares(A, np.ones(A.n_rows), max_iterations=50)[0].shape == (3, 2)


@pytest.mark.parametrize("make", [lambda w: sw.kron(wl.prefix(3), wl.all_range(4), weight=w),
                                  lambda w: wl.stack([sw.marginals((3, 4, 2), 2)], [w]),
                                  lambda w: wl.stack([sw.kron(wl.prefix(3), wl.total(4), weight=1e-100)], [w * 1e100])])
@pytest.mark.parametrize("weight", [1e-160, 1e-200, 1e200])
def test_a_weight_whose_square_leaves_float64_is_refused(make, weight):
    """Weight 10⁻²⁰⁰ on kron(prefix(3), all_range(4)) gave error 0.0 and SVD bound 0.0 with no warning (10⁻¹⁶⁰: a
    subnormal with lost digits); the dense stack refuses such weights, the implicit workloads now do too —
    the product of a term's weight and the union's included."""
    with pytest.raises(ValueError, match="must have its square within float64"):
        make(weight)


def test_a_tiny_weight_beside_a_unit_one_is_a_negligible_share_not_an_error():
    W = wl.stack([sw.kron(wl.prefix(3), wl.total(4)), sw.kron(wl.total(3), wl.prefix(4))], [1.0, 1e-160])
    A = mmopt.structured.strategies.kron_strategy(np.eye(3), np.eye(4))
    ref = mmopt.structured.evaluate(sw.kron(wl.prefix(3), wl.total(4)), A).total_squared_error
    assert mmopt.structured.evaluate(W, A).total_squared_error == pytest.approx(ref, rel=1e-15)


@pytest.mark.parametrize("weight", [3e-7, 1.55e-7, 1e-7])
def test_a_union_with_a_faint_term_is_evaluated_from_its_rows(weight):
    """The dense route formed X = AᵀA and evaluated its square root: κ(A)² cost a union with a faint term 1 % of its
    total (reported exact), and at weight 1e-7 it was refused as unsupported. Oracle: the SVD of the explicit
    rows (no Gram formed), Δ₁² Σ‖w V Σ⁻¹‖²."""
    W = wl.kron(np.eye(3), np.tril(np.ones((4, 4))))
    U = st.stack([st.kron(np.ones((1, 3)), np.ones((1, 4))), st.kron(np.eye(3), np.ones((1, 4))),
                  st.kron(st.hierarchical(3), st.wavelet(4), weight=weight)])
    D, Wd = U.dense(), np.kron(np.eye(3), np.tril(np.ones((4, 4))))
    _, s, Vt = np.linalg.svd(D, full_matrices=False)
    per_query = np.abs(D).sum(axis=0).max() ** 2 * np.sum((Wd @ Vt.T / s) ** 2, axis=1)
    r = mmopt.evaluate(W, U)
    # κ(D) ~ 1e7: the oracle's relative round-off is ~eps·κ ≈ 1e-9
    assert r.total_exact and r.total_squared_error == pytest.approx(per_query.sum(), rel=1e-7)
    assert r.max_variance_exact and r.max_variance == pytest.approx(per_query.max(), rel=1e-7)


def test_an_implicit_gram_past_float64_is_refused_not_zero():
    """ImplicitStrategy.gram returned zeros (AᵀA = 1e-400·I underflowed: "measures nothing"), and a weight of
    1e160 raised the bare OverflowError of weight**2; Strategy.gram refuses both by name."""
    for A, kind in ((st.kron(np.eye(2), np.eye(3), weight=1e-200), FloatingPointError),
                    (st.kron(np.eye(2) * 1e-100, np.eye(3) * 1e-100), FloatingPointError),
                    (st.kron(np.eye(2), np.eye(3), weight=1e-160), FloatingPointError),  # subnormal
                    (st.kron(np.eye(2), np.eye(3), weight=1e160), OverflowError)):
        with pytest.raises(kind, match=r"ImplicitStrategy .*: AᵀA (underflows|exceeds) float64.*Rescale"):
            _ = A.gram
    assert st.kron(np.eye(2), np.eye(3), weight=1e-150).gram[0, 0] == pytest.approx(1e-300)


def test_stack_weights_are_one_per_term_in_both_representations():
    """The implicit stack read weights=[[1, 2]] as [1, 2] (the dense one refuses it), and named union_strategy."""
    a, b = st.kron(np.eye(2), np.eye(3)), st.kron(np.ones((1, 2)), np.eye(3))
    A, B = wl.kron(wl.prefix(100), wl.total(100)), wl.kron(wl.total(100), wl.prefix(100))
    for call in (lambda w: st.stack([a, b], weights=w), lambda w: wl.stack([A, B], weights=w),
                 lambda w: st.stack([a.to_strategy(), b.to_strategy()], weights=w)):
        for bad in (np.array([[1.0, 2.0]]), np.array([[1.0], [2.0]])):
            with pytest.raises(ValueError, match="'weights' parameter of stack"):
                call(bad)
        assert call(np.array([1.0, 2.0])) is not None


def test_a_gram_only_factor_is_evaluated_and_optimised_from_its_gram():
    """kron(from_gram(G), prefix(3)) against a marginals strategy: evaluate raised that W is unknown, and Gaussian
    method='marginals' and method='residual' failed, though only the Gram enters the total. Now every route gives
    the figures of the same Gram built from rows, the largest variance bounded by the total."""
    rows = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 0], [0, 0, 1.0]])
    gram_only = wl.Workload.from_gram(rows.T @ rows, n_queries=4)
    explicit = wl.Workload.from_matrix(rows)
    A, P = st.marginals((3, 3), [0.1, 0.5, 0.5, 1.0]), mmopt.Privacy(1.0)
    for make in (wl.kron, sw.kron):
        r, ref = (mmopt.evaluate(make(F, wl.prefix(3)), A, P) for F in (gram_only, explicit))
        assert r.total_squared_error == pytest.approx(ref.total_squared_error, rel=1e-12)
        assert r.max_variance is None and r.max_variance_upper >= ref.max_variance
    for method, privacy in (("marginals", mmopt.Privacy(1.0, 1e-6)), ("residual", mmopt.Privacy(1.0, 1e-6)),
                            ("residual", P)):
        got, ref = (mmopt.optimize(wl.kron(F, wl.prefix(3)), privacy=privacy, method=method).objective
                    for F in (gram_only, explicit))
        assert got == pytest.approx(ref, rel=1e-6)


def test_a_light_term_off_the_row_space_is_refused_by_the_algebra_route():
    """The algebra route summed the terms' traces before its support test: a 10⁻³-weighted term wholly off A's row
    space (unit cells, against total + attribute-1 marginal) beside a 10⁴-weighted supported one passed as
    round-off and got an 'exact' total of 8·10⁹ (a helper's audit); the dense path refuses the pair."""
    from mmopt._base.guards import Unsupported
    A = ss.marginals_strategy((4, 3), {(1,): 1.0, (): 1.0})
    W = sw.union([sw.marginals((4, 3), attributes=[(1,)]), sw.kron(sw.identity(4), sw.identity(3))], [1e4, 1e-3])
    with pytest.raises(Unsupported, match="does not support"):
        analysis.evaluate(W, A, mmopt.Privacy(1.0, 1e-6))
    with pytest.raises(ValueError, match="does not support"):
        mmopt.evaluate(W.to_workload(), A.to_strategy(), mmopt.Privacy(1.0, 1e-6))
    # a light row inside one factor (e₀ beside 10⁷·1ᵀ): each query by its own norm; the supported twin is kept
    light = sw.kron(sw.predicates(np.array([[1e7] * 4, [1.0, 0, 0, 0]])), sw.identity(3))
    with pytest.raises(Unsupported, match="does not support"):
        analysis.evaluate(light, A, mmopt.Privacy(1.0, 1e-6))
    twin = sw.kron(sw.predicates(np.array([[1e7] * 4, [1.0, 1, 1, 1]])), sw.identity(3))
    r = analysis.evaluate(twin, A, mmopt.Privacy(1.0, 1e-6))
    dense = mmopt.evaluate(twin.to_workload(), A.to_strategy(), mmopt.Privacy(1.0, 1e-6))
    assert (r.method, r.total_exact) == ("algebra", True)
    assert r.total_squared_error == pytest.approx(dense.total_squared_error, rel=1e-9)


def test_the_bracket_judges_each_query_by_its_own_norm():
    """mixed_upper accepted a piece of a factor's root, and the bracket's algebra sub-union a term, on the Gram's
    share alone: (1, −2, 1) beside 10⁷·(1, 0, −1) is 10⁻¹⁴ of it, and a workload whose light queries no block
    measures got a finite bracket (and a finite max_variance_upper for a query of infinite variance; a helper's
    audit). The dense oracle refuses each pair; forced past the dense path, so does the bracket (the second pair's
    total and attribute-1 marginal blocks are its algebra sub-union)."""
    A0 = np.array([[1.0, 1, 1], [1, 0, -1]])  # its row space misses (1, −2, 1) and (1, −1, 0)
    rng = np.random.default_rng(1)
    P = mmopt.Privacy(1.0)  # Laplace: the coupled route (L2 only) does not take the last pair first
    mixed = ss.union_strategy([ss.kron_strategy(A0, rng.normal(size=(6, 4)), np.eye(4)),
                               ss.kron_strategy(A0, rng.normal(size=(6, 4)), np.eye(4))])
    W1 = sw.kron(sw.predicates(np.array([[1e7, 0, -1e7], [1.0, -2, 1]])), wl.identity(4), wl.identity(4))
    blocks = ss.union_strategy([ss.kron_strategy(np.ones((1, 3)), np.eye(4)), ss.kron_strategy(np.ones((1, 3)),
                                np.ones((1, 4))), ss.kron_strategy(A0, rng.normal(size=(5, 4)))])
    W2 = sw.kron(sw.predicates(np.array([[1e7] * 3, [1.0, -1, 0]])), wl.identity(4))
    for W, A in ((W1, mixed), (W2, blocks)):
        with pytest.raises(ValueError, match="does not support|no block"):
            analysis.evaluate(W, A, P, dense_limit=0)
        with pytest.raises(ValueError, match="does not support"):
            mmopt.evaluate(W.to_workload(), A.to_strategy(), P)
    # supported, but its light query e₂ = 1 − e₀ − e₁ only the union answers: the sub-union's 'certified' upper end
    # 2.6740734556852564e16 left its error out, below the dense total 2.6740734556853348e16. No block, piece or
    # sub-union certifies it now, so the bracket declines, as it does the same pair without the heavy row
    alg = ss.union_strategy([ss.kron_strategy(np.ones((1, 3)), np.eye(4)), ss.kron_strategy(np.ones((1, 3)),
                            np.ones((1, 4))), ss.kron_strategy(np.eye(3)[:2], rng.normal(size=(5, 4)))])
    W3 = sw.kron(sw.predicates(np.array([[1e7] * 3, [0, 0, 1.0]])), wl.identity(4))
    truth = mmopt.evaluate(W3.to_workload(), alg.to_strategy(), P).total_squared_error
    try:
        r = analysis.evaluate(W3, alg, P, dense_limit=0)
    except ValueError as exc:
        assert "no exact method" in str(exc)  # no claim that A misses a query
    else:
        assert r.total_lower <= truth * (1 + 1e-15) and truth * (1 - 1e-15) <= r.total_squared_error
