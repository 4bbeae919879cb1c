"""mmopt.synth.junction_pairs: every pair (and any other set) against JunctionModel.marginal, the per-set route."""

import itertools

import numpy as np
from test_synth_joint import _exact_estimates

from mmopt.synth import junction, junction_pairs
from mmopt.synth.estimate import ResidualModel
from mmopt.synth.model_size import junction_tree


def test_every_marginal_is_the_per_set_one():
    shape = (3, 2, 4, 2, 3, 2, 2)
    cliques = [(0, 1), (1, 2, 3), (3, 4), (2, 5), (5, 6)]   # a tree of cliques, with a fork at (1, 2, 3)
    x = np.random.default_rng(0).integers(1, 30, size=shape).astype(float)
    P = junction.fit(ResidualModel(_exact_estimates(x, cliques), cliques, x.sum()), junction_tree(shape, cliques),
                     iterations=30)
    sets = [S for k in (1, 2, 3) for S in itertools.combinations(range(7), k)]
    got = junction_pairs.marginals(P, sets)
    assert list(got) == sets
    # the same factorisation, summed in another order: round-off of a few products and sums of O(10³) counts
    for S in sets:
        np.testing.assert_allclose(got[S], P.marginal(S), rtol=1e-10, atol=1e-10 * P.total)


def test_a_forest_gives_products_across_its_trees():
    shape = (2, 3, 2, 2)
    cliques = [(0, 1), (2, 3)]
    x = np.random.default_rng(1).integers(1, 20, size=shape).astype(float)
    P = junction.fit(ResidualModel(_exact_estimates(x, cliques), cliques, x.sum()), junction_tree(shape, cliques),
                     iterations=50)
    got = junction_pairs.marginals(P, [(0, 2), (1, 3)])
    for S in got:
        np.testing.assert_allclose(got[S], P.marginal(S), rtol=1e-10, atol=1e-10 * P.total)
