"""Issue 36: the data-adaptive algorithms at extreme budgets and counts return finite estimates or refuse by name
before any noise (they returned all-NaN at ε = 1e-300 / 1e300 and inf on counts of 1e308)."""

import warnings

import numpy as np
import pytest

from mmopt import adaptive as ad
from mmopt.adaptive._common import EPSILON_RANGE, MAX_COUNT

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
    with pytest.raises(ValueError, match=f"'x' parameter of {name} must hold counts <="):
        getattr(ad, name)(np.full(8, 1e308), 1.0, rng=0)
    r = getattr(ad, name)(np.full(16, MAX_COUNT), 1.0, rng=0)
    assert np.isfinite(r.estimate).all()
