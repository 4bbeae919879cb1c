"""mmopt.synth.sum_product: calibrated clique marginals against the dense product of the potentials, on a forked
tree and a forest, with potentials too large for exp unshifted and separator values of zero mass."""

import itertools

import numpy as np
import pytest

from mmopt.synth.sum_product import calibrate, depths, plan

SHAPE = (2, 3, 2, 4, 3, 2)
# a fork at clique 0 and a chain below clique 2: (0, 1) ← (1, 2), (1, 3) ← (3, 4); and (5,) on its own tree
CLIQUES = [(0, 1), (1, 2), (1, 3), (3, 4), (5,)]
PARENT = [-1, 0, 0, 2, -1]


def _dense(log_pot, cliques, shape, t):
    """P on the whole table, summing to t: each clique's potential broadcast onto it, exp shifted by the maximum."""
    total = np.zeros(shape)
    for lp, K in zip(log_pot, cliques, strict=True):
        total = total + lp.reshape([shape[i] if i in K else 1 for i in range(len(shape))])
    p = np.exp(total - total.max())
    return p * (t / p.sum())


def _marginal(p, K, d):
    return p.sum(axis=tuple(i for i in range(d) if i not in K))


def _random_log_pot(rng, scale):
    return [scale * rng.standard_normal([SHAPE[i] for i in K]) for K in CLIQUES]


@pytest.mark.parametrize("scale", [1.0, 400.0])   # 400: entries near ±1,600, past exp's range unless shifted
def test_calibrated_beliefs_are_the_dense_clique_marginals(scale):
    rng = np.random.default_rng(0)
    log_pot = _random_log_pot(rng, scale)
    got = calibrate(log_pot, plan(CLIQUES, PARENT, SHAPE), 1000.0)
    # two trees: (0..4) and (5,); P is the product of their distributions, each normalised to the total on its own
    p = _dense(log_pot[:4], CLIQUES[:4], SHAPE[:5], 1000.0)
    for k, K in enumerate(CLIQUES[:4]):
        # products and sums of positive numbers: a few ulps per operation, far below 1e-10 relative
        np.testing.assert_allclose(got[k], _marginal(p, K, 5), rtol=1e-10, atol=1e-12 * 1000.0)
    q = np.exp(log_pot[4] - log_pot[4].max())
    np.testing.assert_allclose(got[4], 1000.0 * q / q.sum(), rtol=1e-12)
    assert all(np.isfinite(b).all() for b in got)


def test_a_separator_value_of_zero_mass_gives_zero_beliefs_not_nan():
    rng = np.random.default_rng(1)
    log_pot = _random_log_pot(rng, 1.0)
    log_pot[0][:, 2] = -np.inf     # x_1 = 2 impossible: the separator value 2 of (0, 1)–(1, 2) and (0, 1)–(1, 3)
    log_pot[3][1, :] = -np.inf     # x_3 = 1 impossible below (1, 3)
    got = calibrate(log_pot, plan(CLIQUES, PARENT, SHAPE), 50.0)
    assert all(np.isfinite(b).all() for b in got)
    p = _dense(log_pot[:4], CLIQUES[:4], SHAPE[:5], 50.0)
    for k, K in enumerate(CLIQUES[:4]):
        np.testing.assert_allclose(got[k], _marginal(p, K, 5), rtol=1e-10, atol=1e-12 * 50.0)
    assert not got[1][2, :].any() and not got[2][:, 1].any()


def test_plan_orders_leaves_first_and_depths_count_edges_to_the_root():
    assert depths(PARENT) == [0, 1, 1, 2, 0]
    assert depths([-1]) == [0]
    order, edges = plan(CLIQUES, PARENT, SHAPE)
    assert sorted(order) == list(range(len(CLIQUES)))
    position = {k: i for i, k in enumerate(order)}
    assert all(position[k] < position[PARENT[k]] for k in range(len(CLIQUES)) if PARENT[k] >= 0)
    assert set(edges) == {k for k, p in enumerate(PARENT) if p >= 0}
    # (1, 3) under (0, 1): separator {1}, summed out of the child on axis 1, kept on the parent's axis 1
    p, child_axes, to_parent, parent_axes, to_child = edges[2]
    assert (p, child_axes, to_parent, parent_axes, to_child) == (0, (1,), (1, 3), (0,), (3, 1))


def test_every_clique_of_a_path_sums_to_the_total_and_agrees_on_separators():
    shape = (3, 2, 4, 2)
    cliques = [(0, 1), (1, 2), (2, 3)]
    rng = np.random.default_rng(2)
    log_pot = [rng.standard_normal([shape[i] for i in K]) for K in cliques]
    got = calibrate(log_pot, plan(cliques, [-1, 0, 1], shape), 7.0)
    for b in got:
        assert b.sum() == pytest.approx(7.0, rel=1e-13)
    for (k, K), (j, J) in itertools.pairwise(enumerate(cliques)):
        sep = [i for i in K if i in J]
        np.testing.assert_allclose(_marginal(got[k], [K.index(i) for i in sep], 2),
                                   _marginal(got[j], [J.index(i) for i in sep], 2), rtol=1e-12)
