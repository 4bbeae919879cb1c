"""MST's domain compression (mmopt.synth.compress): which values merge, what the curator then counts, and that
expansion keeps the tables' margins, so the tree model stays exact and consistent."""

import warnings

import numpy as np
import pandas as pd
import pytest

import mmopt
from mmopt.records import Attribute, Domain, marginal_counts
from mmopt.synth import curator as cu
from mmopt.synth import mst
from mmopt.synth.compress import THRESHOLD, compression

D = Domain((Attribute("a", categories=tuple(range(8))), Attribute("b", categories=(0, 1, 2)),
            Attribute("c", categories=("p", "q"))))


def _records(n=4000, seed=0):
    """a: two common values (0, 1) and six rare ones (≈ 0.5% each); b depends on a, c on b."""
    g = np.random.default_rng(seed)
    a = g.choice(8, n, p=[0.5, 0.47] + [0.005] * 6)
    b = np.where(g.random(n) < 0.8, np.minimum(a, 2), g.integers(0, 3, n))
    c = np.where(g.random(n) < 0.85, b % 2, 1 - b % 2)
    return pd.DataFrame({"a": a, "b": b, "c": np.array(["p", "q"])[c]})


def test_values_below_three_deviations_merge_and_the_rest_stay():
    y = [np.array([100.0, 8.0, 9.1, -4.0, 50.0]), np.array([1.0, 2.0]), np.array([0.5, 0.2, 0.1])]
    c = compression(y, [3.0, 3.0, 3.0], 160.0)
    # 8 < 9 = 3σ merges, 9.1 ≥ 9 stays; the second attribute has one unsupported value: nothing to merge; the
    # third has none supported: the largest stays apart, the other two merge (never a one-cell attribute)
    assert THRESHOLD == 3.0 and c.shape == (4, 2, 2) and c.merged == (0, 2)
    assert c.maps[0].tolist() == [0, 3, 1, 3, 2] and c.maps[2].tolist() == [0, 1, 1]
    # shares inside a merged cell sum to one, and follow the simplex projection of y
    for i in c.merged:
        sums = np.bincount(c.maps[i], weights=c.shares[i])
        np.testing.assert_allclose(sums[np.bincount(c.maps[i]) > 1], 1.0)


@pytest.mark.parametrize("seed", range(5))
def test_coarsen_then_expand_keeps_every_margin(seed):
    g = np.random.default_rng(seed)
    y = [g.normal(20, 30, 6), g.normal(20, 30, 5), g.normal(50, 5, 3)]
    c = compression(y, [10.0, 10.0, 10.0], 200.0)
    T = g.random((6, 5, 3)) * 10
    C = c.coarsen(T, (0, 1, 2))
    assert C.shape == c.shape and np.isclose(C.sum(), T.sum())
    E = c.expand(C, (0, 1, 2))
    assert E.shape == T.shape and np.all(E >= 0)
    # expansion is a right inverse of coarsening (summing the spread cells gives the compressed table back) …
    np.testing.assert_allclose(c.coarsen(E, (0, 1, 2)), C, rtol=1e-12)
    # … and it commutes with taking margins, so consistent tables stay consistent
    np.testing.assert_allclose(E.sum(axis=(1, 2)), c.expand(C.sum(axis=(1, 2)), (0,)), rtol=1e-12)


def test_the_curator_counts_on_the_compressed_domain_with_unchanged_sensitivity():
    df = _records()
    y = [np.array([2000.0, 1900, 20, 20, 20, 20, 20, 20]), np.array([900.0, 1500, 1600]), np.array([2e3, 2e3])]
    c = compression(y, [10.0, 10.0, 10.0], 4000.0)
    assert c.shape == (3, 3, 2)
    cur = cu.Curator(df, D, 1.0, None)
    with pytest.raises(ValueError, match="Curator.compress"):
        cur.compress(compression(y[:2], [10.0, 10.0], 4000.0))
    cur.compress(c)
    exact = marginal_counts(df, D, [(0, 1)])[(0, 1)]
    got = cur._counts([(0, 1)])[(0, 1)]
    np.testing.assert_array_equal(got, np.concatenate([exact[:2], exact[2:].sum(0, keepdims=True)]))
    # every record is in one cell: a neighbour (one record removed) moves the compressed table by one in one cell
    cur2 = cu.Curator(df.iloc[1:], D, 1.0, None)
    cur2.compress(c)
    assert np.abs(cur2._counts([(0, 1)])[(0, 1)] - got).sum() == 1


def test_mst_merges_rare_values_at_low_epsilon_and_none_at_high():
    df = _records()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        low = mst(df, D, mmopt.Privacy(0.1, 1e-9), seed=0)
        high = mst(df, D, mmopt.Privacy(2e4, 1e-9), seed=0)
        off = mst(df, D, mmopt.Privacy(0.1, 1e-9), seed=0, compress=False)
    # at ε = 0.1 the one-way estimates have a per-cell deviation s ≈ 156 (3s ≈ 470) while the six rare values have
    # ≈ 20 records each (each stays below 3s unless its noise exceeds 2.9s: p ≈ 0.002): all merge; the two common
    # values (≈ 1,900 records, 3s + 8.5s) never do
    comp = low.details["compression"]
    assert comp.merged == (0,) and comp.maps[0][:2].tolist() == [0, 1] and set(comp.maps[0][2:]) == {2}
    assert high.details["compression"].merged == () and off.details["compression"].merged == ()
    for s in (low, high):  # the model lives on the original domain, its tables are consistent and non-negative
        assert s.marginal((0,)).shape == (8,) and np.all(s.marginal((0, 1)) >= 0)
        np.testing.assert_allclose(s.marginal((0, 1)).sum(axis=1), s.marginal((0,)), rtol=1e-9, atol=1e-9)
        assert s.records(100).shape == (100, 3)
    # with vanishing noise the compressed-free model is the data's tree model: the 1-way marginal of a is exact
    np.testing.assert_allclose(high.marginal((0,)), marginal_counts(df, D, [(0,)])[(0,)], atol=0.05)


def test_bad_compress_flag_is_refused():
    with pytest.raises(TypeError, match="'compress' parameter of mst"):
        mst(_records(100), D, mmopt.Privacy(1.0, 1e-9), compress="yes")
