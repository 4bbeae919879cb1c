"""Targets of a workload of marginals (:func:`mmopt.family.targets.marginal_targets`): one per query, constant within
each marginal, is the dict of one per marginal, checked against the dense rows and a dense evaluation."""

import functools
import re

import numpy as np
import pytest
from scipy import optimize as so
from scipy import stats

import mmopt
from mmopt.family.maxvar_routes import marginals_of
from mmopt.family.targets import SAME_TARGET, marginal_targets
from mmopt.structured import workloads as sw

DELTA = 1e-6


def _set_of_row(row: np.ndarray, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The attribute set of a marginal cell row, read from the dense row alone: the attributes its support fixes."""
    support = np.argwhere(row.reshape(shape) != 0)
    return tuple(i for i in range(len(shape)) if np.unique(support[:, i]).size == 1)


def _sets_by_row(workload, shape) -> list:
    rows = workload.to_workload().matrix if isinstance(workload, sw.ImplicitWorkload) else workload.explicit_matrix()
    return [_set_of_row(r, shape) for r in np.asarray(rows)]


BUILDS = {  # (workload, its shape)
    "dense k=2": lambda: (mmopt.workload.marginals((2, 3, 4), 2), (2, 3, 4)),
    "dense attributes": lambda: (mmopt.workload.marginals((3, 2, 4), attributes=[(2,), (0, 1), (1,), (0, 2)]),
                                 (3, 2, 4)),
    # unsorted attribute tuples: the cells of (2, 0) are those of (0, 2) in C order, in the dense rows and the dict
    "dense unsorted": lambda: (mmopt.workload.marginals((3, 2, 4), attributes=[(2, 0), (1,)]), (3, 2, 4)),
    "stack unsorted": lambda: (mmopt.workload.stack([mmopt.workload.marginals((3, 2, 4), attributes=[(2, 1)]),
                                                     mmopt.workload.marginals((3, 2, 4), attributes=[(1, 0), (2,)])]),
                               (3, 2, 4)),
    "implicit": lambda: (sw.marginals((2, 3, 2), attributes=[(1, 2), (0,), ()]), (2, 3, 2)),
    "stack": lambda: (mmopt.workload.stack([mmopt.workload.marginals((3, 2), 1),
                                           mmopt.workload.marginals((3, 2), attributes=[(0, 1)])], [2.0, 1.0]),
                      (3, 2)),
}


@pytest.mark.parametrize("name", BUILDS)
def test_per_query_targets_follow_the_dense_rows(name):
    """The oracle: each dense row's marginal, read from its support; targets per row built from it give the dict,
    and a change in one row is refused naming that row's marginal."""
    W, shape = BUILDS[name]()
    M = marginals_of(W)
    owner = _sets_by_row(W, shape)
    assert len(owner) == W.n_queries == M.n_queries
    tau_of = {A: 1.0 + k for k, A in enumerate(dict.fromkeys(owner))}  # a distinct target per attribute set
    per_query = np.array([tau_of[A] for A in owner])
    assert marginal_targets(M, per_query, "plan") == tau_of
    assert marginal_targets(M, list(per_query), "plan") == tau_of  # a list as an array
    i = len(owner) - 2  # a cell inside the last marginal
    changed = per_query.copy()
    changed[i] *= 1.5
    with pytest.raises(ValueError, match=re.escape(f"parameter of plan varies within marginal {owner[i]!r}")):
        marginal_targets(M, changed, "plan")


def _sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The analytic Gaussian mechanism's σ (Balle & Wang, ICML 2018, Thm 8), solved here with scipy alone."""
    def excess(s):
        a, b = sensitivity / (2 * s), epsilon * s / sensitivity
        return stats.norm.cdf(a - b) - np.exp(epsilon) * stats.norm.cdf(-a - b) - delta
    return so.brentq(excess, 1e-6 * sensitivity, 1e6 * sensitivity, xtol=1e-14, rtol=1e-14)


def _dense_variances(W, p) -> np.ndarray:
    """Each query's variance of the plan's release, dense: σ² wᵢ (AᵀA)⁺ wᵢᵀ with A the strategy's rows."""
    S = p.strategy.to_implicit()
    A = np.vstack([t.weight * functools.reduce(np.kron, [f.matrix for f in t.factors]) for t in S.terms])
    rows = W.explicit_matrix()
    sigma = _sigma(p.privacy.epsilon, DELTA, float(np.max(np.linalg.norm(A, axis=0))))
    return sigma**2 * np.einsum("ij,jk,ik->i", rows, np.linalg.pinv(A.T @ A), rows)


@pytest.mark.parametrize("kind", ["variance", "se"])
def test_plan_takes_per_query_targets_as_the_per_marginal_dict(kind):
    """The stumble: one target per query, equal within each marginal, was refused ("Got shape (26,)"); it now plans
    exactly as the equivalent dict, and the planned release meets every query's target (dense check)."""
    W = mmopt.workload.marginals((2, 3, 4), 2)
    tau = {(0, 1): 2.0, (0, 2): 3.0, (1, 2): 5.0}
    per_query = np.repeat(list(tau.values()), [6, 8, 12])  # the rows, marginal after marginal
    by_dict = mmopt.plan(W, tau, delta=DELTA, kind=kind, calibration="analytic")
    by_query = mmopt.plan(W, per_query, delta=DELTA, kind=kind, calibration="analytic")
    assert by_query.epsilon == by_dict.epsilon and by_query.lower_bound == by_dict.lower_bound
    assert np.array_equal(by_query.strategy.weights, by_dict.strategy.weights)
    assert np.array_equal(by_query.targets, by_dict.targets)
    variance = _dense_variances(W, by_query)
    wanted = per_query**2 if kind == "se" else per_query
    assert np.all(variance <= wanted * (1 + 1e-9))
    assert np.max(variance / wanted) > 1 - 1e-3  # and the budget is not loose: a target binds
    # optimize's residual route reads them the same way
    privacy = mmopt.Privacy(1.0, DELTA)
    a = mmopt.optimize(W, privacy=privacy, targets=tau)
    b = mmopt.optimize(W, privacy=privacy, targets=per_query)
    assert a.objective == b.objective and a.extra["targets"] == b.extra["targets"] == tau


def test_targets_that_vary_within_a_marginal_are_refused_with_the_minimum_as_remedy():
    W = mmopt.workload.marginals((2, 3, 2), 1)  # rows: (0,) 2 cells, (1,) 3 cells, (2,) 2 cells
    varying = [1.0, 2.0, 3.0, 3.0, 6.0, 5.0, 5.0]
    for call, caller in ((lambda t: mmopt.plan(W, t, delta=DELTA), "plan"),
                         (lambda t: mmopt.optimize(W, privacy=mmopt.Privacy(1.0, DELTA), targets=t), "optimize")):
        with pytest.raises(ValueError) as info:
            call(varying)
        text = str(info.value)
        assert f"'targets' parameter of {caller} varies within marginal (0,) (rows 0–1" in text
        assert "2 of 3 marginals vary" in text and "same variance" in text
        assert "pass the minimum per marginal" in text and "targets={(0,): 1.0, (1,): 3.0, (2,): 5.0}" in text
        assert "Workload.from_matrix" in text  # ≤ 4,096 cells: the dense minimax is the other way
    # the remedy, as given, plans and meets every original target
    p = mmopt.plan(W, {(0,): 1.0, (1,): 3.0, (2,): 5.0}, delta=DELTA, calibration="analytic")
    assert np.all(_dense_variances(W, p) <= np.array(varying) * (1 + 1e-9))
    # past 4,096 cells only the minimum is offered (the dense route would refuse the domain)
    big = sw.marginals((20, 20, 20), attributes=[(0,), (1, 2)])
    with pytest.raises(ValueError, match=r"varies within marginal \(1, 2\) \(rows 20–419") as info:
        mmopt.plan(big, np.r_[np.full(20, 1.0), np.linspace(1.0, 2.0, 400)], delta=DELTA)
    assert "from_matrix" not in str(info.value)


def test_float_noise_within_a_marginal_is_one_target_its_smallest():
    M = marginals_of(mmopt.workload.marginals((2, 3), 1))
    t = np.array([0.3, 0.1 * 3, 2.0, 2.0, 2.0])  # 0.1 * 3 is 0.30000000000000004: one ulp
    assert t[0] != t[1] and marginal_targets(M, t, "plan") == {(0,): 0.3, (1,): 2.0}
    t[1] = 0.3 * (1 + 0.5 * SAME_TARGET)
    assert marginal_targets(M, t, "plan") == {(0,): 0.3, (1,): 2.0}  # the smallest: no target is missed
    t[1] = 0.3 * (1 + 10 * SAME_TARGET)
    with pytest.raises(ValueError, match=r"varies within marginal \(0,\)"):
        marginal_targets(M, t, "plan")


def test_one_target_per_marginal_as_an_array_points_to_the_dict():
    """An array is one target per query on every route (Laplace, dense, products); one per marginal is the dict."""
    W = mmopt.workload.marginals((2, 3, 2), 1)
    with pytest.raises(ValueError, match=r"'targets' parameter of plan holds 3 targets, as many as the workload's "
                                         r"marginals, for its 7 queries; .* targets=\{\(0,\): 1.0, \(1,\): 3.0, "
                                         r"\(2,\): 5.0\}"):
        mmopt.plan(W, [1.0, 3.0, 5.0], delta=DELTA)
    with pytest.raises(ValueError, match=r"must be one positive number, 7 \(one per query, in the workload's row "
                                         r"order, equal within each marginal\) or a dict .* Got shape \(5,\)"):
        mmopt.plan(W, [1.0] * 5, delta=DELTA)
    with pytest.raises(TypeError, match="'targets' parameter of plan must be one positive number"):
        mmopt.plan(W, [[1.0], [1.0, 2.0]], delta=DELTA)  # ragged: the shared check's refusal, not numpy's
    with pytest.raises(TypeError, match="'targets' parameter of plan"):
        mmopt.plan(W, ["1"] * 7, delta=DELTA)
    # where every marginal is one cell the two readings coincide: taken (the grand total, asked twice)
    M = marginals_of(mmopt.workload.stack([mmopt.workload.marginals((2, 3), 0)] * 2))
    assert M.n_queries == len(M.sets) == 2 and marginal_targets(M, [4.0, 4.0], "plan") == {(): 4.0}
    one = mmopt.plan(mmopt.workload.marginals((2, 3), 0), [4.0], delta=DELTA)
    assert one.epsilon == mmopt.plan(mmopt.workload.marginals((2, 3), 0), 4.0, delta=DELTA).epsilon


def test_copies_of_a_marginal_with_different_targets_are_refused():
    """The dict holds one target per attribute set: a marginal asked twice with two targets cannot be one."""
    W = mmopt.workload.stack([mmopt.workload.marginals((2, 3), 1), mmopt.workload.marginals((2, 3), 1)], [1.0, 3.0])
    M = marginals_of(W)
    assert M.sets == ((0,), (1,), (0,), (1,))
    same = np.r_[[1.0] * 2, [2.0] * 3, [1.0] * 2, [2.0] * 3]
    assert marginal_targets(M, same, "plan") == {(0,): 1.0, (1,): 2.0}
    differ = np.r_[[1.0] * 2, [2.0] * 3, [9.0] * 2, [2.0] * 3]
    with pytest.raises(ValueError, match=r"gives marginal \(0,\), which the workload asks 2 times, different targets "
                                         r".* its smallest, 1.0"):
        mmopt.plan(W, differ, delta=DELTA)


def test_copies_differing_past_float_noise_are_refused_and_counted():
    """Copies are one target within float noise only (a 1e-9 relative gap is a different target), and the refusal
    counts every copy; the remedy's dict shows its first four marginals, then an ellipsis."""
    M = marginals_of(mmopt.workload.stack([mmopt.workload.marginals((2, 3), 1)] * 3))
    assert M.sets == ((0,), (1,)) * 3
    tau = np.r_[[1.0] * 2, [2.0] * 3] * np.ones((3, 1))
    tau[2, :2] *= 1 + 1e-9
    with pytest.raises(ValueError, match=r"gives marginal \(0,\), which the workload asks 3 times, different "):
        marginal_targets(M, tau.ravel(), "plan")
    tau[2, :2] = 1.0 + 1e-16 * 4  # a few ulps: the same target, its smallest kept
    assert marginal_targets(M, tau.ravel(), "plan") == {(0,): 1.0, (1,): 2.0}
    W = marginals_of(mmopt.workload.marginals((2,) * 5, 1))
    varying = np.arange(1.0, 11.0)
    with pytest.raises(ValueError, match=re.escape("targets={(0,): 1.0, (1,): 3.0, (2,): 5.0, (3,): 7.0, …}.")):
        marginal_targets(W, varying, "plan")
