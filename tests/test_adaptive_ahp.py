"""AHP (port checked against the reference loop) and the Hilbert order (a bijection, edge-adjacent steps)."""

import math

import numpy as np
import pytest

from mmopt.adaptive import ahp, hilbert_order
from mmopt.adaptive.ahp import _err_star, greedy_clusters


def _err_star_reference(xj, P, j, n, two):
    """The scalar loop of dpcomp_core's ahp_fast.err_star, transcribed."""
    length, best, last1, last2 = 1, two, 0.0, two
    bound = two / float(n - j + 1) ** 2
    for l_ in range(j + 1, n):
        length += 1
        e1 = (xj - (P[l_] - P[j - 1]) / length) ** 2
        e2 = two / length**2
        if e1 - last1 >= last2 - bound:
            break
        best = min(e1 + e2, best)
        last1, last2 = e1, e2
    return best


@pytest.mark.parametrize("eps", [0.05, 1.0, 30.0])
def test_vectorised_err_star_matches_the_reference_loop(eps):
    rng = np.random.default_rng(0)
    vals = np.sort(np.concatenate([np.zeros(150), rng.exponential(20, 60), rng.integers(0, 3, 90)]))
    z = np.concatenate([[0.0], vals])
    P = np.cumsum(z)
    two = 2 / eps**2
    for j in range(1, z.size):
        assert math.isclose(_err_star(z[j], P, j, z.size, two), _err_star_reference(z[j], P, j, z.size, two),
                            rel_tol=1e-12, abs_tol=1e-12)


def test_clusters_tile_the_sorted_sequence_and_group_equal_values():
    spans = greedy_clusters(np.array([0, 0, 0, 5, 5, 9.0]), 1e6)
    assert spans == [(0, 3), (3, 5), (5, 6)]
    rng = np.random.default_rng(1)
    spans = greedy_clusters(np.sort(rng.exponential(5, 200)), 0.5)
    assert spans[0][0] == 0 and spans[-1][1] == 200
    assert all(a[1] == b[0] for a, b in zip(spans[:-1], spans[1:], strict=True))


def test_huge_epsilon_is_near_exact_and_budget_adds_up():
    x = np.array([[0, 0, 9, 9], [9, 0, 30, 0], [2, 2, 2, 0]], float)
    r = ahp(x, 1e6, rng=0)
    assert r.estimate.shape == x.shape and r.method == "ahp"
    np.testing.assert_allclose(r.estimate, x, atol=1e-3)
    assert dict(r.budget) == {"counts": 0.85e6, "clusters": 1e6 - 0.85e6}
    assert math.isclose(sum(r.budget.values()), 1e6, rel_tol=1e-15)
    cells = np.sort(np.concatenate(r.details["clusters"]))
    assert np.array_equal(cells, np.arange(12))  # the clusters partition the cells


def test_small_epsilon_keeps_cluster_totals_and_is_seeded():
    x = np.random.default_rng(2).integers(0, 4, 400).astype(float)
    r = ahp(x, 0.1, rng=3)
    assert np.all(np.isfinite(r.estimate))
    assert math.isclose(r.details["threshold"], 0.35 * math.log(400) / 0.085)
    for cl in r.details["clusters"]:  # uniform within each cluster
        assert np.ptp(r.estimate[cl]) <= 1e-9 * max(1.0, abs(r.estimate[cl[0]]))
    assert np.array_equal(r.estimate, ahp(x, 0.1, rng=3).estimate)
    assert not np.array_equal(r.estimate, ahp(x, 0.1, rng=4).estimate)


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(ratio=0.0), ValueError, "'ratio' parameter of ahp"),
    (dict(eta=-1.0), ValueError, "'eta' parameter of ahp"),
    (dict(epsilon=0.0), ValueError, "'epsilon' parameter of ahp"),
    (dict(rng=-1), ValueError, "'rng' parameter of ahp"),
])
def test_ahp_validation(kwargs, exc, words):
    args = dict(x=np.ones(5), epsilon=1.0, rng=0) | kwargs
    with pytest.raises(exc, match=words):
        ahp(**args)


# -- Hilbert order -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (5, 3), (8, 8), (16, 16), (13, 20)])
def test_hilbert_order_is_a_bijection(shape):
    order = hilbert_order(shape)
    assert order.shape == (shape[0] * shape[1],)
    assert np.array_equal(np.sort(order), np.arange(shape[0] * shape[1]))
    x = np.arange(shape[0] * shape[1], dtype=float).reshape(shape)
    back = np.empty(x.size)
    back[order] = x.ravel()[order]  # the inverse permutation puts every cell back
    assert np.array_equal(back.reshape(shape), x)


@pytest.mark.parametrize("d", [2, 4, 8, 32])
def test_hilbert_curve_steps_between_edge_neighbours(d):
    order = hilbert_order((d, d))
    r, c = np.divmod(order, d)
    assert np.all(np.abs(np.diff(r)) + np.abs(np.diff(c)) == 1)
    assert (r[0], c[0]) == (0, 0)


def test_hilbert_validation():
    with pytest.raises(ValueError, match="'shape' parameter of hilbert_order must have two sizes"):
        hilbert_order((2, 2, 2))
    with pytest.raises(ValueError, match="'shape' parameter of hilbert_order"):
        hilbert_order((0, 3))
