"""The p-Identity objective on a Gram operator (mmopt.search.pidentity) against the dense objective and exact errors.

Notation: see README. Tolerances: both objectives compute tr C − tr(RΘCΘᵀ) from O(p²n) products, so they agree
to a few u·(tr C / f) relative (u = 2⁻⁵³; tr C / f < 10 at these sizes), asserted as 1e-11; gradients to 1e-10
of their largest entry. The finite-difference check has truncation error O(h²) with h = 1e-6.
"""

import numpy as np
import pytest

from mmopt import workload as wl
from mmopt.dense.gram_operator import DenseGram, all_range_gram, prefix_gram
from mmopt.error import unit_objective
from mmopt.search import pidentity as pi
from mmopt.search._local_objectives import pidentity_objective
from mmopt.toeplitz import prefix_bound


def _cases():
    rng = np.random.default_rng(7)
    F = rng.standard_normal((12, 12))
    return [("prefix", prefix_gram(12), wl.prefix(12).gram), ("all_range", all_range_gram(33), wl.all_range(33).gram),
            ("dense", DenseGram(F @ F.T), F @ F.T)]


@pytest.mark.parametrize(("name", "op", "G"), _cases(), ids=[c[0] for c in _cases()])
def test_objective_matches_dense(name, op, G):
    n, p = G.shape[0], 4
    z = np.random.default_rng(3).random(p * n)
    f, g = pi.objective(z, op, p, n)
    f_dense, g_dense = pidentity_objective(np.r_[z, np.zeros(p * n)], G, p, n)  # V = 0: the same A
    assert f == pytest.approx(f_dense, rel=1e-11)
    assert np.max(np.abs(g - g_dense[: p * n])) < 1e-10 * np.max(np.abs(g_dense))
    A = pi.PIdentityStrategy(z.reshape(p, n)).matrix
    assert pi.true_error(z.reshape(p, n), op) == pytest.approx(unit_objective(A, G), rel=1e-11)
    e = np.random.default_rng(4).standard_normal(p * n)
    h = 1e-6
    fd = (pi.objective(z + h * e, op, p, n)[0] - pi.objective(z - h * e, op, p, n)[0]) / (2 * h)
    assert fd == pytest.approx(g @ e, rel=1e-5)


def test_strategy():
    theta = np.array([[1.0, 0.0, 2.0], [0.5, 0.5, 0.0]])
    S = pi.PIdentityStrategy(theta)
    A = S.matrix
    assert A.shape == (5, 3) and np.allclose(np.abs(A).sum(axis=0), 1.0)
    assert np.allclose(A[:3] * S.column_scale, np.eye(3))
    assert S.to_strategy().matrix.shape == (5, 3)
    assert S.json_summary()["shape"] == [5, 3] and "p=2" in repr(S)


def test_search_beats_identity_and_respects_bound():
    G = prefix_gram(64)
    res = pi.search(G, seed=0, max_iterations=300)
    assert prefix_bound(64).value < res.objective < np.trace(G.dense())
    assert res.objective == pytest.approx(pi.true_error(res.strategy.theta, G), rel=1e-13)
    assert res.p == 4 and np.all(res.strategy.theta >= 0)
    again = pi.search(G, seed=0, max_iterations=300)
    assert again.objective == res.objective  # same seed, same result


def test_search_status_and_restarts():
    G = all_range_gram(40)
    res = pi.search(G, seed=1, restarts=3, max_iterations=3)
    assert res.status == "user_limit" and "3 of 3 run(s) hit max_iterations=3" in res.message
    assert len(res.history) == 3 and res.objective == min(h["objective"] for h in res.history)


@pytest.mark.parametrize(("kw", "match"), [({"p": 0}, "'p'"), ({"restarts": 0}, "'restarts'"),
                                           ({"tol": 2.0}, "'tol'"), ({"max_iterations": 1.5}, "'max_iterations'")])
def test_search_refuses_bad_parameters(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        pi.search(prefix_gram(8), **kw)


def test_search_needs_an_operator():
    with pytest.raises(TypeError, match="'G' parameter of search must be a GramOperator"):
        pi.search(np.eye(4))
