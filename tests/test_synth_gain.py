"""MST's workload gain (mmopt.synth.gain): the dense formula, the stated sensitivity (attained within the factor
the formula gives, never exceeded), and MST's tree with a workload equal to the maximum spanning tree of the dense
scores as the noise vanishes."""

import itertools
import warnings

import numpy as np
import pytest
from test_synth_mst import D, _records

import mmopt
from mmopt.records import marginal_counts
from mmopt.synth import gain as gn
from mmopt.synth import mst


def _dense(m, edge_axes, ind, shares):
    """g_r(e) in floats, straight from the definition."""
    rest = [a for a in range(m.ndim) if a not in edge_axes]
    mm = np.transpose(m, tuple(edge_axes) + tuple(rest)).astype(float)
    me = mm.sum(axis=tuple(range(len(edge_axes), m.ndim)))
    q = np.ones(())
    for s in shares:
        q = np.multiply.outer(q, s)
    est = np.multiply.outer(me, q)
    return np.abs(mm - np.transpose(ind, tuple(edge_axes) + tuple(rest))).sum() - np.abs(mm - est).sum()


def _simplex(g, k):
    p = g.random(k) + 0.01
    return p / p.sum()


def test_the_gain_is_the_dense_formula_up_to_the_grid():
    g = np.random.default_rng(0)
    for _ in range(200):
        shape = tuple(g.integers(2, 6, 3))
        m = g.integers(0, 10**g.integers(1, 6), shape)
        q = [_simplex(g, k) for k in shape]
        ind = m.sum() * np.einsum("i,j,k->ijk", *q)
        e = tuple(sorted(g.choice(3, 2, replace=False).tolist()))
        c = [a for a in range(3) if a not in e][0]
        got = gn.gain(m, e, ind, [q[c]]) / gn.GRID
        # grid rounding: Î by ≤ 2⁻²¹ per cell, Q = ⌊2²⁰q⌋ by < 2⁻²⁰ per cell times m_e ≤ Σm
        tol = (m.size + m.sum() * shape[c]) * 2.0**-20
        assert abs(got - _dense(m, e, ind, [q[c]])) <= tol


def test_the_gain_of_an_edge_alone_is_the_papers_score():
    g = np.random.default_rng(1)
    m = g.integers(0, 1000, (4, 3))
    p = [m.sum(1), m.sum(0)]
    ind = np.outer(*p) / m.sum()
    assert abs(gn.gain(m, (0, 1), ind, []) / gn.GRID - np.abs(m - ind).sum()) <= m.size * 2.0**-20


def test_one_record_moves_the_gain_by_at_most_its_stated_sensitivity():
    g = np.random.default_rng(2)
    for _ in range(1500):
        shape = tuple(g.integers(2, 5, 3))
        m = g.integers(0, 10**g.integers(0, 7), shape)
        q = [_simplex(g, k) for k in shape]
        ind = g.random(shape) * 10.0 ** g.integers(0, 7)                  # any public estimate
        cell = tuple(g.integers(0, k) for k in shape)
        m2 = m.copy()
        m2[cell] += 1
        for e in itertools.combinations(range(3), 2):
            rest = [q[a] for a in range(3) if a not in e]
            change = abs(gn.gain(m2, e, ind, rest) - gn.gain(m, e, ind, rest)) / gn.GRID
            assert change <= gn.gain_sensitivity([rest])


def test_the_sensitivity_is_attained_where_the_formula_says():
    # rest binary with q = (0.1, 0.9); the edge cell's fibre holds (0, 100) and Î is 0 at the new record's cell:
    # adding it raises ‖m − Î‖₁ by 1 and lowers ‖m − m_e ⊗ q‖₁ by 2(1 − 0.1), a gain change of 2.8 (bound 3)
    q = np.array([0.1, 0.9])
    m = np.zeros((2, 2, 2), dtype=np.int64)
    m[0, 0, 1] = 100
    ind = np.full(m.shape, 50.0)
    ind[0, 0, 0] = 0.0
    m2 = m.copy()
    m2[0, 0, 0] += 1
    change = (gn.gain(m2, (0, 1), ind, [q]) - gn.gain(m, (0, 1), ind, [q])) / gn.GRID
    assert change == pytest.approx(1 + 2 * (1 - 0.1), abs=2.0**-16)
    assert change <= gn.gain_sensitivity([[q]]) <= 3 + 2.0**-19


def _kruskal(d, scores):
    up = list(range(d))

    def find(i):
        while up[i] != i:
            i = up[i]
        return i
    edges = []
    for e in sorted(scores, key=lambda e: -scores[e]):
        if find(e[0]) != find(e[1]):
            up[find(e[0])] = find(e[1])
            edges.append(e)
    return sorted(edges)


@pytest.mark.parametrize("workload", [[(0, 1, 2), (1, 2, 3)], list(itertools.combinations(range(4), 3))])
def test_mst_with_a_workload_takes_the_spanning_tree_of_the_dense_gains_as_the_noise_vanishes(workload):
    df = _records()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        s = mst(df, D, mmopt.Privacy(2e4, 1e-9), seed=0, workload=workload)
    assert s.details["compression"].shape == D.shape                        # nothing merged: counts are in the hundreds
    m = marginal_counts(df, D, [(i,) for i in range(4)] + list(itertools.combinations(range(4), 2)) + workload)
    n = len(df)
    q = [m[(i,)] / n for i in range(4)]
    scores = {}
    for e in itertools.combinations(range(4), 2):
        R = [r for r in workload if set(e) < set(r)] or [e]
        scores[e] = np.mean([_dense(m[r], [r.index(i) for i in e], n * np.einsum(
            ",".join("ijk"[:len(r)]) + "->" + "ijk"[:len(r)], *[q[i] for i in r]), [q[i] for i in r if i not in e])
            for r in R])
    assert sorted(s.details["edges"]) == _kruskal(4, scores)


def test_a_bad_workload_is_refused():
    with pytest.raises(ValueError, match="'workload' parameter of mst"):
        mst(_records(100), D, mmopt.Privacy(1.0, 1e-9), workload=[("a", "nope")])
    with pytest.raises(TypeError, match="'workload' parameter of mst"):
        mst(_records(100), D, mmopt.Privacy(1.0, 1e-9), workload="a")


def test_a_workload_too_large_to_score_is_refused_before_reading_the_records(monkeypatch):
    mst_module = __import__("mmopt.synth.mst", fromlist=["mst"])
    monkeypatch.setattr(mst_module, "MAX_SCORED_CELLS", 3 * 2 * 4 - 1)     # (a, b, c) has 24 cells
    with pytest.raises(ValueError, match="'workload' parameter of mst would have MST score edges on 24 cells"):
        mst("/nonexistent.parquet", D, mmopt.Privacy(1.0, 1e-9), workload=[(0, 1, 2)])
