"""The certified Lagrange-dual bound for Gaussian noise (mmopt.structured.dual_bound) against dense oracles."""

import itertools

import numpy as np
import pytest

import mmopt
from mmopt import workload as wl
from mmopt.structured import dual_bound as db
from mmopt.structured import factors as fc
from mmopt.structured import svd_bound
from mmopt.structured import workloads as sw

GAUSS = mmopt.Privacy(1.0, 1e-6)


def _union(shape, factor, *, weights=(1.0, 1.0), with_total=False):
    d, n = len(shape), shape[0]
    parts, ws = [], []
    for k, w in zip((1, 2), weights, strict=True):
        for S in itertools.combinations(range(d), k):
            parts.append(sw.kron(*[factor if i in S else np.ones((1, n)) for i in range(d)]))
            ws.append(w)
    if with_total:
        parts.append(sw.kron(*[np.ones((1, n))] * d))
        ws.append(1.0)
    return sw.union(parts, ws)


def _dense_dual(G, u):
    s = np.sqrt(u)
    lam = np.linalg.eigvalsh(s[:, None] * G * s[None, :])
    lam[lam < 1e-11 * lam.max()] = 0.0
    return float(np.sum(np.sqrt(lam))) ** 2 / u.sum()


def _kron_power(u, d):
    out = u
    for _ in range(d - 1):
        out = np.kron(out, u)
    return out


RNG = np.random.default_rng(7)
CASES = [((4,) * 2, np.tril(np.ones((4, 4))), (1.0, 1.0)), ((4,) * 3, np.tril(np.ones((4, 4))), (1.0, 1.0)),
         ((3,) * 4, np.tril(np.ones((3, 3))), (2.0, 0.5)), ((5,), np.tril(np.ones((5, 5))), (1.0, 1.0)),
         ((3,) * 3, np.eye(3), (1.0, 3.0)), ((4,) * 3, RNG.random((3, 4)), (1.0, 1.0))]


@pytest.mark.parametrize("shape, factor, weights", CASES)
def test_reduced_blocks_equal_the_dense_dual_objective(shape, factor, weights):
    W = sw.kron(factor, weight=weights[0]) if len(shape) == 1 else _union(shape, factor, weights=weights)
    form = db._form(W, fc.Cache())
    G = W.gram
    for _ in range(2):
        u = RNG.random(shape[0]) + 0.2
        assert db._value(form, u) == pytest.approx(_dense_dual(G, _kron_power(u, len(shape))), rel=1e-8)


@pytest.mark.parametrize("shape", [(4,) * 3, (3,) * 4, (8,) * 3])
@pytest.mark.parametrize("weights", [(1.0, 1.0), (3.0, 0.5)])
def test_bound_is_below_the_dense_optimum_and_above_the_svd_bound(shape, weights):
    W = _union(shape, np.tril(np.ones((shape[0],) * 2)), weights=weights)
    b = db.dual_bound(W, GAUSS)
    opt = mmopt.optimize(wl.Workload.from_matrix(W.dense()), privacy=GAUSS, method="l2_approx", verbose=False)
    c = GAUSS.variance_factor
    svd = svd_bound(W, GAUSS).value
    assert b.exact is False and b.method == "dual_product"
    assert svd * (1 - 1e-9) <= b.value <= opt.objective * c * (1 + 1e-9)
    assert b.value >= 0.98 * opt.objective * c  # tight on these small cases (measured ≥ 0.998)


def test_unequal_weights_and_a_total_stay_valid():
    n, d = 3, 3
    P = np.tril(np.ones((n, n)))
    parts = [sw.kron(*[P if i in S else np.ones((1, n)) for i in range(d)])
             for k in (1, 2) for S in itertools.combinations(range(d), k)]
    weights = list(np.linspace(0.5, 2.0, len(parts)))
    W = sw.union([*parts, sw.kron(*[np.ones((1, n))] * d)], [*weights, 1.5])
    b = db.dual_bound(W)
    opt = mmopt.optimize(wl.Workload.from_matrix(W.dense()), method="l2_approx", privacy=GAUSS, verbose=False)
    assert 0 < b.value <= opt.objective * (1 + 1e-9)  # per-level minimum weights: valid, can be below the SVD bound
    auto = mmopt.optimize(W, privacy=GAUSS, verbose=False)
    assert auto.lower_bound >= svd_bound(W).value * (1 - 1e-9)  # auto keeps the larger bound


@pytest.mark.parametrize("shape", [(5,) * 4, (6,) * 5])
def test_bound_is_below_structured_strategies(shape):
    W = _union(shape, np.tril(np.ones((shape[0],) * 2)))
    b = db.dual_bound(W)
    for method in ("residual", "kron"):
        r = mmopt.optimize(W, method=method, privacy=GAUSS, verbose=False)
        assert b.value <= r.objective * (1 + 1e-9)
    if shape[0] == 6:  # one auto run is enough
        auto = mmopt.optimize(W, privacy=GAUSS, verbose=False)
        assert auto.lower_bound >= b.value * (1 - 1e-9)  # auto reports the dual bound
        assert auto.lower_bound <= auto.objective
        assert auto.status != "optimal" or auto.objective <= auto.lower_bound * (1 + 1e-6)


def test_dual_value_at_uniform_weights_is_the_svd_bound():
    W = _union((5,) * 3, np.tril(np.ones((5, 5))))
    assert db.dual_value(W, np.ones(5), GAUSS) == pytest.approx(svd_bound(W, GAUSS).value, rel=1e-9)


def test_not_covered_returns_none():
    P = np.tril(np.ones((4, 4)))
    assert db.dual_bound(sw.kron(P, P, P)) is None  # a 3-way term
    assert db.dual_bound(sw.union([sw.kron(P, np.ones((1, 3))), sw.kron(np.ones((1, 4)), np.eye(3))])) is None
    mixed = sw.union([sw.kron(P, np.ones((1, 4))), sw.kron(np.ones((1, 4)), np.eye(4))])  # prefix and identity
    assert db.dual_bound(mixed) is None
    assert db.optimum_floor(None) == 0.0 and db.optimum_floor(mixed) == 0.0


def test_invalid_input():
    W = _union((3,) * 2, np.eye(3))
    with pytest.raises(TypeError, match="ImplicitWorkload"):
        db.dual_bound(np.eye(9))
    with pytest.raises(TypeError, match="Privacy"):
        db.dual_bound(W, 1.0)
    with pytest.raises(ValueError, match="positive"):
        db.dual_value(W, [1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="positive"):
        db.dual_value(W, [1.0, 1.0])
    # the search's budgets: bare OverflowError / TypeError before, and -5 was taken as 0
    for kw, error in (({"max_work": float("nan")}, ValueError), ({"max_work": -1.0}, ValueError),
                      ({"max_evaluations": "x"}, TypeError), ({"max_evaluations": -5}, ValueError)):
        with pytest.raises(error, match=f"'{next(iter(kw))}' parameter of dual_bound"):
            db.dual_bound(W, **kw)
    capped, free = db.dual_bound(W, max_work=1e6), db.dual_bound(W, max_work=float("inf"))  # inf: no cap
    assert free.value == db.dual_bound(W).value and capped.value <= free.value


def test_the_bound_holds_under_laplace_noise_too():
    """‖a_j‖₁ ≥ ‖a_j‖₂ column by column, so the L2 optimum bounds every strategy's L1 objective: c_Laplace times
    the unit bound, below the ε-DP optimum min_error finds (a heuristic's value is above the optimum)."""
    P = np.tril(np.ones((4, 4)))
    W = _union((4,) * 3, P)
    unit = db.dual_bound(W).value
    assert db.dual_bound(W, mmopt.Privacy(0.5)).value == pytest.approx(mmopt.Privacy(0.5).variance_factor * unit)
    assert db.optimum_floor(W) == pytest.approx(unit)
    res = mmopt.optimize(W.to_workload(), method="min_error", seed=0, verbose=False)
    assert unit <= res.objective and res.lower_bound <= res.objective
