"""Issue 36: the data-adaptive algorithms at extreme budgets and counts return finite estimates or refuse by name
before any noise (they returned all-NaN at ε = 1e-300 / 1e300 and inf on counts of 1e308)."""

import warnings

import numpy as np
import pytest
from _recording_noise import Recording

from mmopt import adaptive as ad
from mmopt.adaptive._common import EPSILON_RANGE, MAX_COUNT, MAX_TOTAL

ONE_D = ["uniform", "ahp", "efpa", "php", "noise_first"]
TWO_D = ["agrid", "ugrid", "kd_tree"]


def _x(name):
    return np.arange(16.0) if name in ONE_D else np.arange(64.0).reshape(8, 8)


@pytest.mark.parametrize("name", ONE_D + TWO_D)
@pytest.mark.parametrize("epsilon", EPSILON_RANGE)
def test_the_edges_of_the_range_give_finite_estimates_without_warnings(name, epsilon):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow, underflow or invalid operation on the way
        r = getattr(ad, name)(_x(name), epsilon, rng=0)
    assert np.isfinite(r.estimate).all()


@pytest.mark.parametrize("name", ONE_D + TWO_D)
@pytest.mark.parametrize("epsilon", [1e-300, 1e-60, 1e60, 1e300])
def test_budgets_outside_the_range_are_refused_by_name(name, epsilon):
    with pytest.raises(ValueError, match=f"'epsilon' parameter of {name} must be between"):
        getattr(ad, name)(_x(name), epsilon, rng=0)


@pytest.mark.parametrize("name", ONE_D)
def test_counts_past_the_limit_are_refused_and_at_it_are_finite(name):
    with pytest.raises(ValueError, match=f"'x' parameter of {name} must hold counts <=") as e:
        getattr(ad, name)(np.full(8, 1e308), 1.0, rng=0)
    assert "1e+308" not in str(e.value)  # a figure of the data is not printed (the message may be published)
    # a total past 2^52: float64 sums of whole counts stop being exact, and at x = [2^53, 1, …] one record moved a
    # released sum by 2 where Δ = 1 (a loss of 2ε; a helper's audit)
    with pytest.raises(ValueError, match=f"'x' parameter of {name} must hold counts totalling at most 2\\^52") as e:
        getattr(ad, name)(np.array([2.0**53, 1.0, 0.0, 0.0] * 4), 1.0, rng=0)
    assert "3.603e+16" not in str(e.value) and "not printed" in str(e.value)
    r = getattr(ad, name)(np.full(16, MAX_TOTAL / 16), 1.0, rng=0)
    assert np.isfinite(r.estimate).all() and MAX_COUNT > MAX_TOTAL


def test_privbayes_refuses_a_total_whose_sums_are_not_exact():
    with pytest.raises(ValueError, match=r"'data' parameter of privbayes must hold counts totalling at most 2\^52"):
        ad.privbayes(np.full((2, 2), 2.0**51 + 2.0**50), 1.0, rng=0)


@pytest.mark.parametrize("call,match", [
    (lambda: ad.noise_first(np.ones(10**5), 1.0, rng=0), "'x' parameter of noise_first must be <="),
    (lambda: ad.structure_first(np.ones(10**5), 1.0, count_bound=10.0, rng=0),
     "'x' parameter of structure_first must be <="),
    (lambda: ad.php(np.ones(10**6), 1.0, rng=0), "'x' parameter of php must be <="),
    (lambda: ad.ireduct(np.ones((2, 3)), 1.0, rounds=10**9, rng=0), "'rounds' parameter of ireduct must be <="),
])
def test_sizes_they_cannot_finish_are_refused_with_the_work_before_any_noise(call, match):
    """Issue 30: these ran past any reasonable time (or died of MemoryError) instead of refusing up front (the
    checks stand before the first draw in each function)."""
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert "operations" in str(info.value) and "MAX_WORK" in str(info.value)


def test_dawa_refuses_a_budget_whose_split_leaves_the_range_in_its_own_words():
    with pytest.raises(ValueError, match="'epsilon' parameter of dawa splits into ε₁ = 2.5e-51"):
        ad.dawa(np.arange(16.0), 1e-50, rng=0)
    assert np.isfinite(ad.dawa(np.arange(16.0), 1e-49, rng=0).estimate).all()


def test_a_pure_epsilon_privacy_is_accepted_as_epsilon():
    """Newcomer stumble: mmopt takes budgets as Privacy everywhere else; the ε-DP algorithms take Privacy(ε)
    too (same output for the same seed), and refuse a δ > 0 by name."""
    import mmopt
    from mmopt import adaptive
    x = np.arange(32.0)
    a = adaptive.dawa(x, 1.0, rng=0)
    b = adaptive.dawa(x, mmopt.Privacy(1.0), rng=0)
    np.testing.assert_array_equal(getattr(a, "estimate", a), getattr(b, "estimate", b))
    with pytest.raises(ValueError, match="must have delta=0"):
        adaptive.dawa(x, mmopt.Privacy(1.0, 1e-6), rng=0)


def test_steps_with_one_possible_outcome_spend_nothing():
    """AHP on one cell, PHP on two cells without the keep option, MWEM with one query: the clustering, the split
    and every selection have one outcome and read nothing, yet took 15 %, ρ and half of each round's ε (a helper's
    audit). The counts (measurements) now take that ε: Laplace scale 1/ε per cell."""
    rec = Recording("numpy", np.random.default_rng(1))
    r = ad.ahp(np.array([7.0]), 2.0, noise=rec)
    assert dict(r.budget) == {"counts": 0.0, "clusters": 2.0}
    assert [c[:2] for c in rec.calls] == [("laplace", 0.5)]
    rec = Recording("numpy", np.random.default_rng(2))
    r = ad.php(np.array([3.0, 9.0]), 2.0, keep_option=False, noise=rec)
    assert dict(r.budget) == {"partition": 0.0, "counts": 2.0} and r.details["buckets"] == [(0, 1), (1, 2)]
    assert [c[:2] for c in rec.calls] == [("laplace", 0.5)] and rec.calls[0][2] == (2,)
    rec = Recording("numpy", np.random.default_rng(3))
    r = ad.mwem(np.arange(6.0), np.ones((1, 6)), 2.0, rounds=4, total=15.0, noise=rec)
    assert r.budget["select"] == 0.0 and r.budget["measure"] == pytest.approx(2.0)
    assert not [c for c in rec.calls if c[0] == "exponential"]
    assert all(c[1] == pytest.approx(1.0 / 0.5) for c in rec.calls if c[0] == "laplace")  # Δ/ε_round, ε_round = ½
