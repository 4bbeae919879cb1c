"""mmopt.hierarchy.dense_release: a dense strategy's grouping-set measurements, against Monte-Carlo runs of the
mechanism (y = A x + N(0, σ²), least squares, group totals) — full-rank and rank-deficient strategies."""

from __future__ import annotations

import numpy as np
import pytest

import mmopt
from mmopt.hierarchy import Hierarchy, cross, grouping_sets, rollup
from mmopt.hierarchy.release import measurements, set_sums

GEO = Hierarchy.from_parents([[0, 0, 0, 1, 2, 2]], level_names=("nation", "state", "county"), name="geo")
W = grouping_sets([GEO, Hierarchy.flat(2, name="sex")], cross(rollup("state", "county"), [("sex",), ()]))


def _monte_carlo(A, runs: int = 20000, sigma: float = 1.0, seed: int = 0):
    m = measurements(W, A)
    x = np.arange(12.0).reshape(W.shape)
    noise = np.random.default_rng(seed).normal(0.0, sigma, (runs, A.matrix.shape[0]))
    answers = [np.stack(s) for s in zip(*(m.finish(m.answer(x) + z) for z in noise), strict=True)]
    return m, x, answers


@pytest.mark.parametrize("kind", ["auto", "rank_deficient"])
def test_variances_and_answers_match_the_mechanism(kind):
    if kind == "auto":
        A = mmopt.optimize(W, privacy=mmopt.Privacy(1.0, 1e-6)).strategy
        assert type(A).__name__ == "Strategy"
    else:  # the state totals per sex and the cells of state 0: counties 4 and 5 (state 2) are not estimable
        state_of = np.repeat([0, 0, 0, 1, 2, 2], 2)  # cell (county c, sex s) is c·2 + s
        sex_of = np.tile([0, 1], 6)
        states = [((state_of == st) & (sex_of == sx)).astype(float) for st in range(3) for sx in range(2)]
        A = mmopt.Strategy(np.vstack([*states, np.eye(12)[:6]]))
    m, x, answers = _monte_carlo(A)
    exact = set_sums(W, x)
    Delta = A.sensitivity("l2")
    measured = 0
    for unit, got, want in zip(m.unit, answers, exact, strict=True):
        finite = np.isfinite(unit)
        if kind == "auto":
            assert finite.all()
        var = unit / Delta**2  # σ = 1
        emp = got.var(axis=0)
        # 20,000 runs: the sample variance's relative sd is √(2/19,999) = 1 %; 5 sd
        np.testing.assert_allclose(emp[finite], var[finite], rtol=0.05, atol=1e-12)
        np.testing.assert_allclose(got.mean(axis=0)[finite], want[finite], atol=5 * np.sqrt(var[finite].max() / 2e4))
        measured += int(finite.sum())
    assert measured > 0
    if kind == "rank_deficient":
        assert not all(np.isfinite(u).all() for u in m.unit)  # the unmeasured county groups: inf, refused
        from mmopt.hierarchy.release import refuse_unmeasured
        with pytest.raises(ValueError, match="does not measure"):
            refuse_unmeasured(m, "test")


def test_every_neighbour_of_the_dense_answers_is_within_d_in_at_the_records_bound():
    """A BLAS product A x moved a neighbour past Δ₂ rounded upwards (by 3.3e-7 of it, one county of 2³² − 1
    records); the answers are now exact_answers' and d_in charges their rounding. Exact rational distances."""
    from fractions import Fraction

    from mmopt.dense.exact_answers import MAX_RECORDS
    from mmopt.hierarchy.synthetic import census_like
    Wd = grouping_sets([census_like(3, 9, seed=4), Hierarchy.flat(3, name="age")],
                       cross(rollup("state", "county"), [("age",), ()]))
    A = mmopt.optimize(Wd, privacy=mmopt.Privacy(1.0, 1e-6)).strategy
    m = measurements(Wd, A)
    assert m.family == "dense" and m.sensitivity > m.exact * (1 + 9e-7)
    n = int(np.prod(Wd.shape))
    rng = np.random.default_rng(0)
    worst = Fraction(0)
    for pos in range(0, n, 3):
        x = rng.integers(0, 1000, n).astype(float)
        x[pos] = 0
        x[pos] = MAX_RECORDS - 1 - x.sum()
        x = x.reshape(Wd.shape)
        y = m.answer(x)
        for j in np.ndindex(*Wd.shape):
            x2 = x.copy()
            x2[j] += 1
            y2 = m.answer(x2)
            worst = max(worst, sum(((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(y2, y, strict=True)
                                    if a != b), Fraction(0)))
    assert worst <= Fraction(m.sensitivity) ** 2


def test_the_dense_grouping_answers_are_correctly_rounded():
    """The neighbour test above cannot tell BLAS from exact answers (the charge absorbs BLAS's 3.3e-7; a review's
    mutant): every answer against its Fraction value."""
    from fractions import Fraction

    from mmopt.dense.exact_answers import MAX_RECORDS
    from mmopt.hierarchy.synthetic import census_like
    W = grouping_sets([census_like(3, 9, seed=4), Hierarchy.flat(3, name="age")],
                      cross(rollup("state", "county"), [("age",), ()]))
    A = mmopt.optimize(W, privacy=mmopt.Privacy(1.0, 1e-6)).strategy
    m, M = measurements(W, A), A.matrix
    assert m.family == "dense"
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.multinomial(MAX_RECORDS - 1, rng.dirichlet(np.full(M.shape[1], 0.3))).astype(float)
        exact = [float(sum(Fraction(float(a)) * int(t) for a, t in zip(row, x, strict=True))) for row in M]
        assert m.answer(x.reshape(W.shape)).tolist() == exact
