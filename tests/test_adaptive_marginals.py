"""The marginal helpers of iReduct and DualQuery: attribute-set checks, domain sums, and the mirror-descent fit
against an independent QP solution (its certified gap must bracket the optimum)."""

import itertools

import numpy as np
import pytest

from mmopt.adaptive._marginals import check_marginals, domain_max, domain_sum, expand, fit_marginals, project


def test_default_and_given_attribute_sets():
    assert check_marginals(None, 3, (1, 2), "f") == ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2))
    assert check_marginals(None, 3, (2,), "f") == ((0, 1), (0, 2), (1, 2))
    assert check_marginals([(2, 1), [1, 2], (0,)], 3, (2,), "f") == ((1, 2), (0,))
    with pytest.raises(ValueError, match="'marginals' parameter of f"):
        check_marginals(((3,),), 3, (2,), "f")


def test_domain_sum_and_max_by_brute_force():
    shape = (2, 3, 2)
    rng = np.random.default_rng(0)
    tables = {(0, 2): rng.random((2, 2)), (1,): rng.random(3)}
    S = domain_sum(tables, shape)
    for c in itertools.product(*map(range, shape)):
        assert S[c] == pytest.approx(tables[(0, 2)][c[0], c[2]] + tables[(1,)][c[1]])
    assert domain_max(tables, shape) == pytest.approx(S.max())
    X = rng.random(shape)
    np.testing.assert_allclose(project(X, (0, 2)), X.sum(axis=1))
    assert expand(tables[(1,)], (1,), shape).shape == (1, 3, 1)


def test_fit_matches_an_independent_qp_within_its_certified_gap():
    cp = pytest.importorskip("cvxpy")
    shape = (2, 3, 2)
    rng = np.random.default_rng(4)
    X = rng.integers(0, 6, shape).astype(float)
    Ms = ((0,), (1, 2), (0, 1))
    noisy = {M: project(X, M) + rng.normal(0.0, 2.0, project(X, M).shape) for M in Ms}  # inconsistent
    prec = {M: np.full(noisy[M].shape, w) for M, w in zip(Ms, (0.5, 2.0, 1.0), strict=True)}
    t = float(X.sum())
    est, info = fit_marginals(noisy, prec, shape, t, max_iter=5000, tol=1e-7)
    # the same QP over x ≥ 0, Σx = t, with explicit marginal matrices
    N = X.size
    cells = np.array(list(itertools.product(*map(range, shape))))
    x = cp.Variable(N, nonneg=True)
    terms = []
    for M in Ms:
        keys = [tuple(c[list(M)]) for c in cells]
        uniq = list(itertools.product(*(range(shape[a]) for a in M)))
        A = np.array([[1.0 if k == u else 0.0 for k in keys] for u in uniq])
        terms.append(cp.sum(cp.multiply(prec[M].ravel(), cp.square(A @ x - noisy[M].ravel()))))
    prob = cp.Problem(cp.Minimize(sum(terms)), [cp.sum(x) == t])
    prob.solve(solver="CLARABEL")
    f_star = prob.value
    f = sum(float((prec[M] * (project(est, M) - noisy[M]) ** 2).sum()) for M in Ms)
    assert f == pytest.approx(info["objective"], rel=1e-9)
    scale = 1e-7 * max(1.0, f_star)  # the interior-point solver's own tolerance
    assert f_star - scale <= f <= f_star + info["gap"] + scale
    assert info["converged"] and np.all(est >= 0) and est.sum() == pytest.approx(t)


def test_fit_of_nothing_is_zero():
    est, info = fit_marginals({(0,): np.array([-3.0, 1.0])}, {(0,): np.ones(2)}, (2, 2), 0.0)
    assert np.all(est == 0) and info["iterations"] == 0
