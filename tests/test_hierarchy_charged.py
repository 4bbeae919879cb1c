"""mmopt.hierarchy.charged: the residual and node families' measurements against the basis (dense), exact rational
arithmetic, and every neighbour's exact distance against the release's d_in."""

from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest

import mmopt
from mmopt.dense.exact_answers import MAX_RECORDS
from mmopt.hierarchy import Hierarchy, cross, cube, grouping_sets, rollup, solve
from mmopt.hierarchy import basis as hb
from mmopt.hierarchy import charged as hc
from mmopt.hierarchy import release as hr
from mmopt.hierarchy.node_solve import solve_nodes
from mmopt.hierarchy.nodes import NodeStrategy
from mmopt.hierarchy.synthetic import census_like, random_tree
from mmopt.structured.release import upper_sensitivity


@pytest.mark.parametrize("h", [census_like(3, 4, 12, seed=2), Hierarchy.flat(5),
                               Hierarchy.from_parents([np.zeros(3, int), np.repeat(np.arange(3), [1, 4, 2])]),
                               # a first child holding nearly every leaf: 1 − √(n_f/n_g) must not cancel
                               Hierarchy.from_parents([np.zeros(2, int), np.repeat(np.arange(2), [2000, 1])])])
def test_the_closed_form_is_the_basis_and_its_absolute_columns_have_its_norms(h):
    Q, M = hb.analysis(h, np.eye(h.n)), hc.dense(hc.coefficients(h), h)
    assert np.abs(Q - M).max() <= 64 * np.finfo(float).eps  # both in float64; the Householder form's own error
    # the constants against 50-digit arithmetic, to a few ulps of the terms they are made of (a = 1/√n_k − s/√n_g
    # may cancel; that is a difference of Q's own size), also where the first child holds nearly every leaf
    getcontext().prec = 50
    c, sizes = hc.coefficients(h), [Decimal(int(v)) for level in h.sizes for v in level]
    for row in range(1, c.index.shape[0]):
        (k, f, _), g = c.index[row], c.rest[row][0]
        nk, nf, ng = sizes[k], sizes[f], sizes[g]
        s = (nk / ng).sqrt() / (1 - (nf / ng).sqrt())
        exact = (1 / nk.sqrt() - s / ng.sqrt(), s / nf.sqrt() - s / ng.sqrt(), -s / ng.sqrt())
        scale = 1 / nk.sqrt() + s / nf.sqrt() + s / ng.sqrt()
        for got, want in zip(c.values[row], exact, strict=True):
            assert abs(Decimal(float(got)) - want) <= Decimal(8 * 2.0**-53) * scale
    # the charge's premise: disjoint leaf sets, so |M| has M's column norms (the three-sum form's were 12× larger)
    assert np.abs(np.linalg.norm(np.abs(M), axis=0) - np.linalg.norm(M, axis=0)).max() <= 1e-15


def _planned():
    geo = census_like(2, 3, 6, seed=1)
    W = grouping_sets([geo, Hierarchy.flat(2, name="sex")], cross(rollup("state", "county"), cube("sex")))
    return W, solve(W).strategy


def _exact(W, A, x):
    """root ⊙ (⊗ᵢ Mᵢ) x [on] in Fractions, Mᵢ the constants' own matrices (hc.dense)."""
    fraction = np.vectorize(lambda v: Fraction(float(v)), otypes=[object])
    T = fraction(x)
    for i, h in enumerate(W.attributes):
        T = np.moveaxis(np.tensordot(fraction(hc.dense(hc.coefficients(h), h)), T, axes=(1, i)), 0, i)
    xw = A.weights[np.ix_(*[hb.basis(h).component_of for h in W.attributes])]
    on = xw > 0
    return [Fraction(float(r)) * t for r, t in zip(np.sqrt(xw[on]), T[on], strict=True)], on


def test_measurements_within_the_charged_bound_and_every_neighbour_within_d_in():
    W, A = _planned()
    m = hr.measurements(W, A)
    coefs = [hc.coefficients(h) for h in W.attributes]
    xw = A.weights[np.ix_(*[hb.basis(h).component_of for h in W.attributes])]
    c, eta = hc.charge(coefs, float(np.sqrt(xw.max())))
    assert m.sensitivity >= upper_sensitivity(A.sensitivity()) * (1 + c * (2 * MAX_RECORDS + 1))
    rng = np.random.default_rng(0)
    worst = Fraction(0)
    for trial in range(4):
        x = rng.multinomial(MAX_RECORDS - 1, rng.dirichlet(np.full(int(np.prod(W.shape)), 0.5))).reshape(W.shape)
        x = x.astype(float)
        y = m.answer(x)
        if trial < 2:
            exact, on = _exact(W, A, x)
            scale = np.sqrt(xw[on]) * _absolute(W, x)[on]  # √x ⊙ (⊗|Mᵢ|) x, rounded (far below the margin)
            u = Fraction(2.0**-53)
            for got, e, b in zip(y, exact, scale, strict=True):
                err, b = abs(Fraction(float(got)) - e), Fraction(float(b)) * (1 + Fraction(1, 10**9))
                assert err <= Fraction(c) * b + Fraction(eta)  # the bound charged
                # sharper: one rounding of the exact value, and before it (c − u)·b: u² terms, not u
                assert err <= u * abs(e) + (1 + u) * ((Fraction(c) - u) * b + Fraction(eta))
        for j in np.ndindex(*W.shape):
            x2 = x.copy()
            x2[j] += 1
            worst = max(worst, sum((Fraction(float(a)) - Fraction(float(b))) ** 2
                                   for a, b in zip(m.answer(x2), y, strict=True)))
    assert worst <= Fraction(m.sensitivity) ** 2


def _absolute(W, x):
    T = x
    for i, h in enumerate(W.attributes):
        T = np.moveaxis(np.tensordot(np.abs(hc.dense(hc.coefficients(h), h)), T, axes=(1, i)), 0, i)
    return T


def test_release_measures_the_charged_answers_and_refuses_fractional_counts(monkeypatch):
    W, A = _planned()
    with pytest.raises(ValueError, match="whole numbers"):
        mmopt.release(W, A, np.full(W.shape, 0.5), mmopt.Privacy(1.0, 1e-6))
    measured = []
    real = hr.measure
    monkeypatch.setattr(hr, "measure", lambda values, *a, **kw: measured.append(values) or real(values, *a, **kw))
    x = np.random.default_rng(1).integers(0, 10**6, W.shape).astype(float)
    mmopt.release(W, A, x, mmopt.Privacy(1.0, 1e-6))
    xw = A.weights[np.ix_(*[hb.basis(h).component_of for h in W.attributes])]
    direct = hc.measure([hc.coefficients(h) for h in W.attributes], np.sqrt(xw[xw > 0]), xw > 0, x)
    assert len(measured) == 1 and np.array_equal(measured[0], direct)


def _node_case(which: str):
    """(W, a NodeStrategy, a cell): got as tests/test_hierarchy_nodes.py gets them, and mmopt.optimize's on a skewed
    tree; at the cell, 2³² − 132 records (131 in the next) moved a neighbour of the plain float64 answers (the
    Householder transforms, then node sums) past the uncharged d_in, by up to 1.09e-6 of it (a helper's probe)."""
    if which == "optimize":
        W = grouping_sets([census_like(6, 40, seed=2), Hierarchy.flat(2, name="sex")],
                          cross(rollup("state", "county"), [("sex",), ()]))
        return W, mmopt.optimize(W, privacy=mmopt.Privacy(1.0, 1e-6), method="hierarchy").strategy, 57
    if which == "three attributes":
        W = grouping_sets([random_tree(5, 3, 4), Hierarchy.flat(2, name="sex"), Hierarchy.flat(3, name="age")],
                          cross(rollup("l1", "l2", "l3"), cube("sex", "age"))[:10])
        return W, solve_nodes(W, max_iterations=50).strategy, 87
    if which == "tree last":
        W = grouping_sets([Hierarchy.flat(2, name="sex"), census_like(3, 9, seed=4)],
                          cross([("sex",), ()], rollup("state", "county")))
        return W, solve_nodes(W, max_iterations=100).strategy, 13
    W = grouping_sets([census_like(4, 12, seed=3)], rollup("state", "county"))  # no other attribute
    return W, solve_nodes(W).strategy, 0


def _node_columns(W, A):
    """Per active component u, the other attributes' coefficient tuples (flat, C order) in u; and the others."""
    others = [i for i in range(len(W.attributes)) if i != A.layout.tree]
    comp = np.zeros(1, dtype=int)
    for i in others:
        of = hb.basis(W.attributes[i]).component_of
        comp = (comp[:, None] * (of.max() + 1) + of[None, :]).ravel()
    return [np.flatnonzero(comp == u) for u in A.layout.components], others


def _exact_nodes(W, A, x):
    """√z ⊙ (1_node ⊗ ⊗_{i≠k} Mᵢ)ᵀ x in Fractions (Mᵢ the constants' own matrices, hc.dense), and its bound's
    √z ⊙ (1_node ⊗ ⊗|Mᵢ|)ᵀ x in float, flat in the release's order (component, level, node, coefficient)."""
    fraction = np.vectorize(lambda v: Fraction(float(v)), otypes=[object])
    cols, others = _node_columns(W, A)
    k, h = A.layout.tree, W.attributes[A.layout.tree]
    levels = []
    for ell in range(max(len(z) for z in A.weights)):
        T = B = hr.level_sums(h, x, k, ell)  # node sums of whole counts: exact
        T = fraction(T)
        for i in others:
            M = hc.dense(hc.coefficients(W.attributes[i]), W.attributes[i])
            T = np.moveaxis(np.tensordot(fraction(M), T, axes=(1, i)), 0, i)
            B = np.moveaxis(np.tensordot(np.abs(M), B, axes=(1, i)), 0, i)
        levels.append([np.moveaxis(v, k, 0).reshape(h.n_groups[ell], -1) for v in (T, B)])
    exact, scale = [], []
    for u, z in enumerate(A.weights):
        for ell, zl in enumerate(z):
            root = np.sqrt(zl)[:, None]
            exact.extend((fraction(root) * levels[ell][0][:, cols[u]]).ravel())
            scale.extend((root * levels[ell][1][:, cols[u]]).ravel())
    return exact, np.array(scale)


def _squared_distance(a, b) -> Fraction:
    on = np.flatnonzero(a != b)
    return sum(((Fraction(float(a[i])) - Fraction(float(b[i]))) ** 2 for i in on), Fraction(0))


@pytest.mark.parametrize("which", ["optimize", "three attributes", "tree last", "alone"])
def test_node_measurements_within_the_charged_bound_and_every_neighbour_within_d_in(which):
    """The node family: every neighbour's exact distance within the release's d_in, also at 2³² − 1 records with
    one huge cell (the plain float64 answers exceeded the uncharged d_in there); each answer within the charge of
    the exact value of its constants (Fractions, an independent oracle); d_in the charge of hc.charge."""
    W, A, cell = _node_case(which)
    assert isinstance(A, NodeStrategy)
    m = hr.measurements(W, A)
    n = int(np.prod(W.shape))
    rng = np.random.default_rng(0)
    huge = np.zeros(n)
    huge[cell], huge[(cell + 1) % n] = MAX_RECORDS - 132, 131
    histograms = [huge, rng.multinomial(MAX_RECORDS - 1, rng.dirichlet(np.full(n, 0.5))).astype(float),
                  np.full(n, float((MAX_RECORDS - 1) // n))]
    worst = Fraction(0)
    for x in histograms:
        x = x.reshape(W.shape)
        y = m.answer(x)
        for j in np.ndindex(*W.shape):
            x2 = x.copy()
            x2[j] += 1
            worst = max(worst, _squared_distance(m.answer(x2), y))
    assert worst <= Fraction(m.sensitivity) ** 2
    cols, others = _node_columns(W, A)
    coefs = [hc.coefficients(W.attributes[i]) for i in others]
    c, eta = hc.charge(coefs, max(float(np.sqrt(zl).max()) for z in A.weights for zl in z))
    assert m.family == "nodes" and m.size == sum(zl.size * cols[u].size for u, z in enumerate(A.weights) for zl in z)
    assert m.sensitivity >= upper_sensitivity(A.sensitivity()) * (1 + c * (2 * MAX_RECORDS + 1)) > m.exact
    u = Fraction(2.0**-53)
    for x in histograms[:2]:
        exact, scale = _exact_nodes(W, A, x.reshape(W.shape))
        y = m.answer(x.reshape(W.shape))
        assert y.size == len(exact) == m.size
        for got, e, b in zip(y, exact, scale, strict=True):
            err, b = abs(Fraction(float(got)) - e), Fraction(float(b)) * (1 + Fraction(1, 10**9))
            assert err <= Fraction(c) * b + Fraction(eta)  # the bound charged
            assert err <= u * abs(e) + (1 + u) * ((Fraction(c) - u) * b + Fraction(eta))  # one rounding, u² terms


def test_the_node_charge_without_other_attributes_is_the_weights_rounding():
    """Integer node sums times √z: one product rounded, c = u (and the 10⁻⁶ cover), η four subnormal units."""
    c, eta = hc.charge([], 0.75)
    assert 2.0**-53 < c <= 2.0**-53 * (1 + 2e-6) and eta == 4 * 2.0**-1074


def test_release_measures_the_charged_node_answers(monkeypatch):
    W, A, _ = _node_case("three attributes")
    measured, real = [], hr.measure

    def spy(values, d_in, *a, **kw):
        measured.append((values, d_in))
        return real(values, d_in, *a, **kw)

    monkeypatch.setattr(hr, "measure", spy)
    x = np.random.default_rng(1).integers(0, 10**6, W.shape).astype(float)
    out = mmopt.release(W, A, x, mmopt.Privacy(1.0, 1e-6))
    cols, others = _node_columns(W, A)
    roots = [[np.sqrt(zl) for zl in z] for z in A.weights]
    direct = hc.measure_nodes(W.attributes[A.layout.tree], A.layout.tree,
                              [hc.coefficients(W.attributes[i]) for i in others], roots, cols, x)
    m = hr.measurements(W, A)
    assert len(measured) == 1 and np.array_equal(measured[0][0], direct)
    assert measured[0][1] == out.sensitivity == m.sensitivity > upper_sensitivity(m.exact)  # noise at the charged d_in
