"""mmopt.structured.residual: closure, conversion, exact error / bound / sensitivity against the dense path.

Tolerances. The dense reference (mmopt.error.evaluate) works from a QR/SVD of A; its relative error is about
κ(A)²·eps, κ(A)² = max ℓ_S / min ℓ_S (the spread of the strategy's eigenvalues over the subspaces it covers).
Each comparison first asserts κ(A)² < 1e5, so 1e-10 relative leaves a margin of ~10² over round-off
(1e5 · 2.2e-16 ≈ 2e-11). The closure formulas themselves are sums of positive terms (relative error ~ closure
size · eps).
"""

import itertools
import math

import numpy as np
import pytest

import mmopt
from mmopt import error as dense
from mmopt.structured import residual as rp
from mmopt.structured import workloads as sw
from mmopt.structured.residual import spectrum as sp

REL = 1e-10


def _pairs(d):
    return [(i, j) for i in range(d) for j in range(i + 1, d)]


def _conditioning(W, strategy):
    ell = sp.residual_spectrum(strategy, W.closure) if isinstance(strategy, rp.ResidualStrategy) else \
        sp.algebra_spectrum(strategy, W.closure)
    pos = ell[ell > 0]
    return float(pos.max() / pos.min())


def _random_strategy(W, rng):
    C = W.closure
    return rp.ResidualStrategy(W.shape, C.members, rng.uniform(0.5, 2.0, len(C)), "random")


WORKLOADS = [
    ((3, 4, 2), {(0, 1): 1.0, (1, 2): 2.0, (0,): 0.5, (): 1.5}),
    ((2, 2, 2, 2, 2, 2), {A: 1.0 for A in _pairs(6)}),
    ((5, 1, 3, 4), {(0, 2): 1.0, (1, 3): 0.7, (0, 1, 2): 1.3}),      # a size-1 attribute: empty residuals
    ((4, 4, 4, 4, 4), {A: 1.0 for A in _pairs(5)}),                  # 1,024 cells, rank-deficient W
]


def test_closure_is_the_downward_closure_and_never_2_to_the_d():
    C = rp.downward_closure((8,) * 100, _pairs(100))
    assert len(C) == 1 + 100 + 4950
    assert C.multiplicity[C.index[(3, 7)]] == 49 and C.cells[C.index[(5,)]] == 8
    C1 = rp.downward_closure((3, 1, 4), [(0, 1, 2)])                 # members with the size-1 attribute drop out
    assert C1.members == ((), (0,), (2,), (0, 2))


def test_closure_too_large_is_refused_before_enumeration():
    with pytest.raises(ValueError, match="incidences"):
        rp.marginal_workload((2,) * 40, [tuple(range(40))])


@pytest.mark.parametrize("shape,marginals", WORKLOADS)
@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_evaluate_matches_the_dense_path(shape, marginals, norm, rng):
    W = rp.marginal_workload(shape, marginals)
    Wd = W.to_implicit().to_workload()
    for A in (rp.plan(W, norm=norm).strategy, _random_strategy(W, rng)):
        assert _conditioning(W, A) < 1e5
        r = rp.evaluate(W, A, norm=norm)
        ref = dense.evaluate(Wd, A.to_implicit().to_strategy(), norm=norm, per_query=True)
        assert r.sensitivity == pytest.approx(ref.sensitivity, rel=REL) and r.sensitivity_exact
        assert r.total_squared_error == pytest.approx(ref.total_squared_error, rel=REL)
        assert r.max_variance == pytest.approx(ref.max_variance, rel=REL)
        # every cell of a marginal has the same variance, the one reported for that marginal
        start = 0
        for Aset, var in zip(W.sets, r.per_marginal_variance, strict=True):
            k = math.prod(shape[i] for i in Aset)
            cells = ref.per_query_variance[start:start + k]
            start += k
            assert np.allclose(cells, var, rtol=REL, atol=0)
        assert r.svd_bound == pytest.approx(dense.svd_bound(Wd), rel=REL)


@pytest.mark.parametrize("shape,marginals", WORKLOADS[:3])
def test_sensitivity_is_the_dense_column_norm(shape, marginals, rng):
    W = rp.marginal_workload(shape, marginals)
    A = _random_strategy(W, rng)
    M = A.to_implicit().dense()
    assert rp.sensitivity(A, "l1").value == pytest.approx(np.abs(M).sum(axis=0).max(), rel=1e-13)
    assert rp.sensitivity(A, "l2").value == pytest.approx(np.sqrt((M * M).sum(axis=0).max()), rel=1e-13)
    assert rp.sensitivity(A, "l1").exact and np.ptp(np.abs(M).sum(axis=0)) < 1e-12  # every column alike
    assert A.n_rows == M.shape[0]


def test_marginals_strategy_matches_the_2_to_the_d_algebra():
    """HDMM's M(θ) through the closure path equals mmopt.structured.evaluate's own algebra path (d = 8)."""
    shape = (3, 2, 4, 2, 3, 2, 2, 3)
    W = sw.marginals(shape, 2)
    theta = {A: 1.0 + 0.1 * k for k, A in enumerate(_pairs(8))} | {(): 2.0, (1,): 0.3}
    A = mmopt.structured.marginals_strategy(shape, theta)
    for norm in ("l1", "l2"):
        ref = mmopt.structured.evaluate(W, A, norm=norm)
        r = rp.evaluate(W, A, norm=norm)
        assert ref.method == "algebra"
        assert r.total_squared_error == pytest.approx(ref.total_squared_error, rel=REL)
        assert r.max_variance == pytest.approx(ref.max_variance, rel=REL)


def test_conversion_of_implicit_workloads():
    W = sw.union([sw.marginals((3, 4, 5), 2), sw.lower_marginals((3, 4, 5), 1)], weights=[1.0, 3.0])
    M = rp.as_marginal_workload(W, caller="test")
    assert M.literal and M.n_queries == W.n_queries and len(M.sets) == len(W.terms)
    assert dict(zip(M.sets, M.weights, strict=True))[(0,)] == 3.0
    assert rp.svd_bound(M) == pytest.approx(dense.svd_bound(W.to_workload()), rel=REL)
    dense_marginals = mmopt.workload.marginals((3, 4, 5), 2)             # dense, remembers its structure
    assert rp.svd_bound(dense_marginals) == pytest.approx(dense.svd_bound(dense_marginals), rel=REL)
    # identity-plus-total factors expand into Gram-equivalent marginals: totals exact, not literal
    IT = sw.kron(sw.identity_total(3), sw.identity(4), sw.identity_total(2))
    G = rp.as_marginal_workload(IT, caller="test")
    assert not G.literal and len(G.sets) == 4 and G.n_queries == IT.n_queries
    A = rp.plan(G).strategy
    ref = dense.evaluate(IT.to_workload(), A.to_implicit().to_strategy(), norm="l2")
    assert rp.evaluate(G, A, norm="l2").total_squared_error == pytest.approx(ref.total_squared_error, rel=REL)
    assert rp.evaluate(G, A, norm="l2").max_variance is None           # per-query figures not those of W
    assert rp.as_marginal_workload(sw.kron(sw.prefix(3), sw.identity(2)), caller="test") is None


# The table of the issue: unit-σ Gaussian total error bound; objective must equal it to 1e-9.
TABLE = [
    ((4,) * 5, 2, False, 948.06),
    ((10,) * 6, 3, True, 394_071.6),
    ((50, 100, 7, 4, 2), 2, False, 28_976.8),
    ((75, 16, 5, 2, 20), 2, False, 20_682.0),
    ((8,) * 10, 2, False, 91_635.5),
]


@pytest.mark.parametrize("shape,k,lower,quoted", TABLE)
def test_plan_meets_the_svd_bound(shape, k, lower, quoted):
    W = (sw.lower_marginals if lower else sw.marginals)(shape, k)
    p = rp.plan(W)
    assert p.status == "optimal"
    assert p.objective == pytest.approx(p.lower_bound, rel=1e-9)
    assert p.lower_bound == pytest.approx(quoted, abs=0.06)
    assert rp.evaluate(W, p.strategy, norm="l2").total_squared_error == pytest.approx(p.objective, rel=1e-12)


def test_optimize_meets_the_svd_bound_at_d_16():
    """(8,)^16: 137 closure members, where the 2^d algebra's (terms × 65,536) tables took 5 s."""
    W = sw.marginals((8,) * 16, 2)
    r = mmopt.optimize(W, method="residual", norm="l2")
    assert r.status == "optimal" and r.objective == pytest.approx(625_034.245, rel=1e-9)
    b = mmopt.structured.svd_bound(W)
    assert b.method == "closure" and r.objective == pytest.approx(b.value, rel=1e-9)
    assert mmopt.evaluate(W, r.strategy, norm="l2").method == "closure"


def test_l1_plan_is_the_hoelder_optimum_among_residual_strategies(rng):
    W = rp.marginal_workload((3, 4, 2, 5), {A: 1.0 for A in _pairs(4)} | {(0, 1, 2): 0.5})
    p = rp.plan(W, norm="l1")
    assert p.status == "closed_form" and "Heuristic" in p.message
    assert p.objective == pytest.approx(rp.planner.predicted_total(rp.as_marginal_workload(W, caller="t"), "l1"),
                                        rel=1e-12)
    for _ in range(20):  # random residual strategies never do better
        assert rp.evaluate(W, _random_strategy(W, rng), norm="l1").total_squared_error >= p.objective * (1 - 1e-12)


@pytest.mark.parametrize("norm", ["l2", "l1"])
def test_max_variance_plan_is_the_best_residual_strategy_for_it(norm, rng):
    W = rp.marginal_workload((3, 4, 5, 2), {(0, 1): 1.0, (1, 2): 1.0, (2, 3): 2.0, (0,): 1.0})
    worst = rp.plan(W, objective="max_variance", norm=norm)
    assert worst.status == "optimal" and worst.kind == "max_variance"
    assert worst.objective == pytest.approx(rp.evaluate(W, worst.strategy, norm=norm).max_variance, rel=1e-12)
    assert worst.objective <= rp.evaluate(W, rp.plan(W, norm=norm).strategy, norm=norm).max_variance
    for _ in range(20):  # the program is convex: random residual strategies never do better (to solver accuracy)
        other = rp.evaluate(W, _random_strategy(W, rng), norm=norm).max_variance
        assert other >= worst.objective * (1 - 1e-6)


def test_max_variance_plan():
    W = rp.marginal_workload((3, 4, 5, 2), {(0, 1): 1.0, (1, 2): 1.0, (2, 3): 2.0, (0,): 1.0})
    total = rp.plan(W)
    worst = rp.plan(W, objective="max_variance")
    r_total, r_worst = rp.evaluate(W, total.strategy, norm="l2"), rp.evaluate(W, worst.strategy, norm="l2")
    assert worst.objective <= r_total.max_variance * (1 + 1e-9)
    assert r_worst.total_squared_error >= total.objective * (1 - 1e-12)
    # targets: a marginal allowed 4× the variance of the others ends up at most 4× their level
    tau = {A: 4.0 if A == (2, 3) else 1.0 for A in W.sets}
    aimed = rp.plan(W, objective="max_variance", targets=tau)
    per = rp.evaluate(W, aimed.strategy, norm="l2").per_marginal_variance
    assert aimed.objective == pytest.approx(max(v / tau[A] for A, v in zip(W.sets, per, strict=True)), rel=1e-12)
    # one marginal alone: every cell has variance total / N_A, so both objectives agree
    one = rp.marginal_workload((3, 4), [(0, 1)])
    assert rp.plan(one, objective="max_variance").objective == pytest.approx(rp.plan(one).objective / 12, rel=1e-6)


@pytest.mark.parametrize("call,error,match", [
    (lambda: rp.residual_strategy("ab", {(): 1.0}), TypeError, "'shape' parameter of residual_strategy"),
    (lambda: rp.residual_strategy((2, 3), [(0,)]), TypeError, "'weights' parameter of residual_strategy must be a"),
    (lambda: rp.residual_strategy((2, 3), {(0, 2): 1.0}), ValueError, "'weights' parameter of residual_strategy"),
    (lambda: rp.residual_strategy((2, 3), {(0,): -1.0}), ValueError, r"'weights' .* must be a float"),
    (lambda: rp.residual_strategy((2, 3), {(0,): 0.0}), ValueError, "positive weight"),
    (lambda: rp.residual_strategy((1, 3), {(0,): 1.0}), ValueError, "size 1"),
    (lambda: rp.residual_strategy((2, 3), {(0, 0): 1.0}), ValueError, "repeats an attribute"),
    (lambda: rp.marginal_workload((2, 3), [(0, 5)]), ValueError, "'marginals' parameter of marginal_workload"),
    (lambda: rp.marginal_workload((2, 3), [(0,)], weights=[0.0]), ValueError, "'weights' parameter of marginal_w"),
    (lambda: rp.plan(rp.marginal_workload((2, 3), [(0,)]), objective="mean"), ValueError, "'objective' parameter"),
    (lambda: rp.plan(rp.marginal_workload((2, 3), [(0,)]), norm="l3"), ValueError, "'norm' parameter of residual.plan"),
    (lambda: rp.plan(rp.marginal_workload((2, 3), [(0,)]), targets={(0,): 1.0}), ValueError, "'targets' parameter"),
    (lambda: rp.plan(rp.marginal_workload((2, 3), [(0,), (1,)]), objective="max_variance", targets={(0,): 1.0}),
     ValueError, "target for every marginal"),
    (lambda: rp.evaluate(rp.marginal_workload((2, 3), [(0, 1)]), rp.residual_strategy((2, 3), {(): 1.0, (0,): 1.0})),
     ValueError, "does not support"),
    (lambda: rp.evaluate(rp.marginal_workload((2, 3), [(0,)]), np.eye(6)), TypeError, "'strategy' parameter"),
    (lambda: rp.evaluate(rp.marginal_workload((2, 3), [(0,)]), rp.residual_strategy((2, 4), {(): 1.0})),
     ValueError, "different domains"),
    (lambda: rp.svd_bound(sw.kron(sw.prefix(3), sw.prefix(3))), ValueError, "not a union of marginals"),
    (lambda: rp.svd_bound(np.eye(3)), TypeError, "'workload' parameter of residual.svd_bound"),
])
def test_bad_input_names_function_and_parameter(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_subsets_are_checked_in_the_dataclass_too():
    with pytest.raises(ValueError, match="must not repeat a subset"):
        rp.ResidualStrategy((2, 3), ((0,), (0,)), np.ones(2))
    with pytest.raises(ValueError, match="'weights' parameter of ResidualStrategy"):
        rp.ResidualStrategy((2, 3), ((0,),), np.ones(2))


def test_every_closure_member_has_its_own_measurement():
    shape = (3, 2, 4)
    W = rp.marginal_workload(shape, [(0, 1, 2)])
    assert len(W.closure) == 8 and list(itertools.chain(W.closure.members))[-1] == (0, 1, 2)
    A = rp.plan(W).strategy
    assert A.subsets == W.closure.members and A.sensitivity("l2") == pytest.approx(1.0, rel=1e-14)


def test_a_union_with_an_identity_block_matches_the_2_to_the_d_algebra():
    """An identity block is non-zero on every subset: the closure is scanned rather than its subsets listed."""
    shape = (2, 3) * 8
    W = sw.marginals(shape, attributes=[(0, 1, 2), (3, 4, 5), (7,)])
    R = rp.plan(W).strategy.to_implicit()
    ident = mmopt.structured.kron_strategy(*[np.eye(n) for n in shape], weight=0.01)
    A = mmopt.structured.union_strategy([R, ident])
    for norm in ("l1", "l2"):
        ref = mmopt.structured.evaluate(W, A, norm=norm)
        assert ref.method == "algebra"
        r = rp.evaluate(W, A, norm=norm)
        assert r.total_squared_error == pytest.approx(ref.total_squared_error, rel=REL)
        assert r.max_variance == pytest.approx(ref.max_variance, rel=REL)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # numpy's, on the way to the refusal
def test_an_svd_bound_past_float64_is_a_clear_error():
    """Weights near 1e154 (their squares within float64, as the workload asks) times the marginals' cells: the
    bound's (Σ r √ν) ** 2 raised a bare OverflowError (34, 'Numerical result out of range') from optimize."""
    U = sw.union([sw.marginals((2, 3, 4), attributes=[(0, 1)]), sw.marginals((2, 3, 4), attributes=[(2,)])],
                 weights=[1e154, 1.0])
    with pytest.raises(ValueError, match="SVD bound of .* exceeds float64.*Rescale the queries"):
        mmopt.optimize(U, privacy=mmopt.Privacy(1.0, 1e-6), method="residual")


def test_marginal_workload_checks_its_weights_in_its_own_name():
    """A bool weight was taken as 1, and 1e-200 (its square underflows) was refused by ResidualStrategy."""
    from mmopt.structured.residual.workload import marginal_workload
    with pytest.raises(TypeError, match="'weights' parameter of marginal_workload must hold real numbers"):
        marginal_workload((3, 4, 2), [(0, 1), (1, 2)], weights=[True, 1])
    for bad in ([1e-200, 1.0], [0.0, 1.0], [-1.0, 1.0]):
        with pytest.raises(ValueError, match="'weights' parameter of marginal_workload must be > 0"):
            marginal_workload((3, 4, 2), [(0, 1), (1, 2)], weights=bad)
    assert marginal_workload((3, 4, 2), {(0, 1): 2.0, (1, 2): 1.0}).weights.tolist() == [2.0, 1.0]
