"""mmopt.hierarchy.charged: the residual family's measurements against the basis (dense), exact rational arithmetic,
and every neighbour's exact distance against the release's d_in."""

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
from mmopt.hierarchy.synthetic import census_like
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
