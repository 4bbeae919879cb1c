"""mmopt.structured.residual.marginals: weighted marginals on a closure against dense least squares, the
implicit evaluator, and brute-force per-cell weights; the search never worse than each marginal once."""

import itertools
import math

import numpy as np
import pytest

import mmopt
import mmopt.structured as st
from mmopt.structured.residual import error as er
from mmopt.structured.residual import marginals as wm
from mmopt.structured.residual.reconstruct import marginal_counts
from mmopt.structured.residual.workload import marginal_workload

SHAPE = (3, 4, 2, 1, 5)
SETS = [(0, 1), (1, 2, 3), (4,), (0, 4)]


@pytest.fixture(scope="module")
def solved():
    W = marginal_workload(SHAPE, SETS)
    A, unit = wm.solve(W, restarts=5)
    return W, A, unit


def test_unit_error_is_the_implicit_evaluators(solved):
    W, A, unit = solved
    rep = st.evaluate(W.to_implicit(), A.to_implicit(), mmopt.Privacy(1.0))
    assert rep.total_exact and rep.total_squared_error == pytest.approx(2 * unit, rel=1e-10)
    assert A.sensitivity("l1") == pytest.approx(1.0) and A.to_implicit().sensitivity("l1") == pytest.approx(1.0)


def test_search_beats_each_marginal_once(solved):
    W, A, unit = solved
    once = wm.each_once(W)
    ell = wm.spectrum(once, W.closure)
    base = once.sensitivity("l1") ** 2 * er.unit_errors(W, ell, caller="t")[0]
    assert unit <= base * (1 + 1e-12)
    assert unit >= er.unit_bound(W) * (1 - 1e-12)  # never below the SVD bound


def test_reconstruction_is_dense_least_squares(solved):
    W, A, _ = solved
    rng = np.random.default_rng(1)
    x = rng.integers(0, 5, SHAPE).astype(float)
    exact = wm.measure(A, marginal_counts(x, SHAPE, A.subsets))
    y = {S: exact[S] + rng.normal(size=exact[S].shape) for S in A.subsets}
    est = wm.reconstruct_all(A, y, SETS)
    M = A.to_implicit().dense()
    xhat = np.linalg.lstsq(M, np.concatenate([y[S].ravel() for S in A.subsets]), rcond=None)[0].reshape(SHAPE)
    for S in SETS:
        want = xhat.sum(axis=tuple(i for i in range(len(SHAPE)) if i not in S))
        np.testing.assert_allclose(est[S], want, atol=1e-9 * (1 + np.abs(want).max()))
    noiseless = wm.reconstruct_all(A, exact, SETS)
    for S in SETS:
        np.testing.assert_allclose(noiseless[S], x.sum(axis=tuple(i for i in range(5) if i not in S)), atol=1e-9)


def test_cell_weights_are_the_linear_map(solved):
    W, A, _ = solved
    C = W.closure
    ell = wm.spectrum(A, C)
    shapes = {S: tuple(SHAPE[i] for i in S) for S in A.subsets}
    for target in SETS:
        coefs = []
        for S in A.subsets:
            for idx in np.ndindex(shapes[S]):
                y = {T: np.zeros(shapes[T]) for T in A.subsets}
                y[S][idx] = 1.0
                coefs.append(wm.reconstruct_all(A, y, [target])[target].ravel())
        coefs = np.array(coefs)  # entries × cells
        values, counts = wm.cell_weights(A, target, {T: ell[k] for k, T in enumerate(C.members)})
        listed = np.sort(np.repeat(values, counts.astype(int)))
        for cell in range(coefs.shape[1]):  # every cell has the same multiset of weights (module docstring)
            np.testing.assert_allclose(np.sort(coefs[:, cell]), listed, atol=1e-13)


def test_support_adds_unions_and_scales_with_d():
    W = marginal_workload((4,) * 6, list(itertools.combinations(range(6), 2)))
    sets = wm.support(W)
    assert (0, 1, 2) in sets and (0, 1, 2, 3) in sets and len(sets) == len(W.closure) + 20 + 15
    big = marginal_workload((3,) * 120, list(itertools.combinations(range(120), 2)))  # 7,140 pairs: no unions
    assert len(wm.support(big)) == len(big.closure)
    A = wm.each_once(big)
    assert len(A.subsets) == math.comb(120, 2) and A.sensitivity("l1") == math.comb(120, 2)


def test_weighted_marginals_are_evaluated_and_unsupported_marginals_refused():
    """residual.evaluate refused a WeightedMarginals its own message named as accepted; reconstruct_all on a
    marginal no measured set contains raised a bare IndexError."""
    from mmopt.structured import residual as rp
    W = rp.marginal_workload((2, 3), [(0, 1)])
    S = wm.weighted_marginals((2, 3), {(0, 1): 1.0})
    assert rp.evaluate(W, S, norm="l2").total_squared_error == pytest.approx(
        rp.evaluate(W, S.to_implicit(), norm="l2").total_squared_error, rel=1e-12)
    with pytest.raises(ValueError, match="does not support the marginals asked"):
        wm.reconstruct_all(wm.weighted_marginals((2, 3), {(0,): 1.0}), {(0,): np.zeros(2)}, [(0, 1)])
