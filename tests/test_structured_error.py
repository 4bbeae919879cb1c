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
    assert b.total_squared_error >= ref.total_squared_error * (1 - 1e-12)
    assert b.max_variance <= ref.max_variance * (1 + 1e-10)
    assert b.max_variance_upper >= ref.max_variance * (1 - 1e-10)


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
    assert low.exact == (low.method in ("product", "algebra"))
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
    assert bd.svd_bound(W, EPS1, dense_limit=0).value <= ref_b


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
        ss.marginals_strategy((10,) * 10, {tuple(range(10)): 1.0}).gram()
