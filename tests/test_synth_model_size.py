"""AIM's model-size filter (mmopt.synth.model_size): the per-candidate bound is never below the smallest junction
tree of the model with the candidate added (brute force over every elimination order on small graphs), is the
current size when a clique already holds the candidate, is the size of the contracted tree AIM keeps, and AIM's
model stays under its cap."""

import itertools
import math
import warnings

import numpy as np
import pytest

import mmopt
from mmopt.structured.residual import closure as cl
from mmopt.synth import aim
from mmopt.synth.model_size import junction_tree


def _smallest_mb(shape, cliques) -> float:
    """The smallest Σ cells of the maximal cliques over every elimination order (some order attains the optimal
    triangulation, Rose, Tarjan & Lueker 1976)."""
    d = len(shape)
    best = math.inf
    for order in itertools.permutations(range(d)):
        adj = {i: set() for i in range(d)}
        for C in cliques:
            for a, b in itertools.combinations(C, 2):
                adj[a].add(b)
                adj[b].add(a)
        left, found = set(range(d)), []
        for v in order:
            nb = adj[v] & left
            for a, b in itertools.combinations(sorted(nb), 2):
                adj[a].add(b)
                adj[b].add(a)
            found.append(tuple(sorted(nb | {v})))
            left.remove(v)
        best = min(best, sum(cl.cells(shape, K) for K in cl.maximal(found)))
    return best * 8 / 2**20


@pytest.mark.parametrize("seed", range(6))
def test_the_bound_is_never_below_the_smallest_junction_tree(seed):
    g = np.random.default_rng(seed)
    d = 6
    shape = tuple(int(s) for s in g.integers(2, 6, d))
    pairs = list(itertools.combinations(range(d), 2))
    measured = [(i,) for i in range(d)] + [pairs[k] for k in g.choice(len(pairs), 4, replace=False)]
    tree = junction_tree(shape, measured)
    # the tree's own size is that of a triangulation of the measured cliques: at least the optimum
    assert tree.mb >= _smallest_mb(shape, measured) * (1 - 1e-12)
    for C in pairs + [tuple(sorted(g.choice(d, 3, replace=False).tolist()))]:
        bound = tree.bound_mb(C)
        assert bound >= _smallest_mb(shape, measured + [C]) * (1 - 1e-12), C
        if any(set(C) <= set(K) for K in tree.cliques):
            assert bound == tree.mb                        # no growth when a clique already holds C
        else:
            assert bound >= tree.mb                        # a merge never shrinks the model
        grown = tree.with_clique(C)                        # the bound is the size of the contracted tree
        assert grown.mb <= bound * (1 + 1e-12) and any(set(C) <= set(K) for K in grown.cliques)
        assert tree.bound_mb(C, cap_mb=0.0) == (tree.mb if grown is tree else math.inf)


@pytest.mark.parametrize("grow", [(), ((0, 5),), ((0, 5), (2, 6))])
def test_the_junction_tree_has_the_running_intersection_property(grow):
    shape = (3, 4, 2, 5, 3, 2, 4)
    measured = [(i,) for i in range(7)] + [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (1, 4)]
    tree = junction_tree(shape, measured)
    for C in grow:                                          # also after contractions
        tree = tree.with_clique(C)
    for i in range(7):  # the cliques holding i are connected in the tree: exactly one has no parent among them
        holding = {k for k, K in enumerate(tree.cliques) if i in K}
        tops = {k for k in holding if tree.parent[k] not in holding}
        assert len(tops) == 1, (i, holding)


def test_aim_runs_at_d_40_and_keeps_its_model_under_the_cap():
    pd = pytest.importorskip("pandas")
    from mmopt.records import Attribute, Domain
    g = np.random.default_rng(0)
    d, n = 40, 3000
    codes = g.integers(0, 2, (n, d))
    codes[:, 1::2] = codes[:, ::2] ^ (g.random((n, d // 2)) < 0.1)   # pairs (0,1), (2,3), … strongly linked
    D = Domain(tuple(Attribute(f"x{j}", categories=(0, 1)) for j in range(d)))
    df = pd.DataFrame({f"x{j}": codes[:, j] for j in range(d)})
    W = list(itertools.combinations(range(d), 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        s = aim(df, D, W, mmopt.Privacy(1.0, 1e-9), seed=0, max_model_size=0.01, estimator="residual")
        fitted = aim(df, D, W, mmopt.Privacy(1.0, 1e-9), seed=0, max_model_size=0.01, estimator="junction")
    assert s.rho <= s.budget and len(s.details["selected"]) > 0
    # "junction": its own model in the loop too (so its own selections), fitted on a junction tree within the cap
    assert fitted.rho <= fitted.budget and fitted.details["estimator"]["estimator"] == "junction"
    assert sum(mu.size for mu in fitted.model.beliefs) * 8 / 2**20 <= 0.01 * (1 + 1e-9)
    assert all(any(set(C) <= set(K) for K in fitted.model.cliques) for C in fitted.details["selected"])
    # the sampler's structure is a junction tree within the cap, holding every measured clique, and the families
    # of its network lie inside its cliques
    cells = sum(cl.cells(D.shape, K) for K in s.model.structure)
    assert cells * 8 / 2**20 <= 0.01 * (1 + 1e-9)
    assert all(any(set(C) <= set(K) for K in s.model.structure) for C in s.model.cliques)
    for j, parents in s.model.network():
        assert any(set(parents) | {j} <= set(K) for K in s.model.structure)
    # the linked pairs are the strongest signal: AIM measures most of them
    linked = {(j, j + 1) for j in range(0, d, 2)}
    assert len(linked & set(s.details["selected"])) >= d // 4
    assert len(linked & set(fitted.details["selected"])) >= d // 4


def test_along_a_long_path_the_augmented_tree_is_kept_and_is_a_junction_tree():
    shape = (10,) * 6
    tree = junction_tree(shape, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)])
    grown = tree.with_clique((0, 5))   # 0 and 5 added along the path: 0·5 more cells per clique, not 10⁶ merged
    assert sorted(grown.cliques) == [(0, 1, 2, 5), (0, 2, 3, 5), (0, 3, 4, 5)]   # 015 and 045 inside them
    assert grown.mb <= tree.bound_mb((0, 5)) < 10**6 * 8 / 2**20   # (non-maximal cliques dropped)
    for i in range(6):
        holding = {k for k, K in enumerate(grown.cliques) if i in K}
        assert len({k for k in holding if grown.parent[k] not in holding}) == 1, i
