"""The worst-pattern search under minimum separation against brute-force enumeration."""

import numpy as np
import pytest

from mmopt.participation.patterns import pattern_upper_bound, worst_patterns
from mmopt.participation.schemas import MinSeparation


def _brute(Y, b, k):
    return max(float(Y[np.ix_(p, p)].sum()) for p in MinSeparation(b, k).patterns(Y.shape[0]))


@pytest.mark.parametrize("seed", range(40))
def test_branch_and_bound_is_the_brute_force_maximum(seed):
    rng = np.random.default_rng(seed)
    n, b, k = int(rng.integers(3, 22)), int(rng.integers(1, 7)), int(rng.integers(1, 6))
    Y = np.abs(rng.standard_normal((n, n))) ** 3  # heavy-tailed entries: the row bounds are loose, so it branches
    Y = Y + Y.T
    brute = _brute(Y, b, k)
    upper, attained, pattern, _ = pattern_upper_bound(Y, b, k, rtol=1e-12)
    assert pattern in MinSeparation(b, k).patterns(n)
    assert attained == pytest.approx(float(Y[np.ix_(pattern, pattern)].sum()), rel=1e-14)
    # the upper value never below the maximum, and within the pruning tolerance of it
    assert brute * (1 - 1e-12) <= upper <= brute * (1 + 1e-11)
    assert attained == pytest.approx(brute, rel=1e-11)


@pytest.mark.parametrize("seed", range(6))
def test_early_stop_still_bounds_from_above(seed):
    rng = np.random.default_rng(100 + seed)
    n, b, k = 24, 3, 5
    Y = np.abs(rng.standard_normal((n, n)))
    Y = Y + Y.T
    brute = _brute(Y, b, k)
    upper, attained, _, nodes = pattern_upper_bound(Y, b, k, max_nodes=3)
    assert attained <= brute * (1 + 1e-14) and upper >= brute * (1 - 1e-14)


def test_worst_patterns_are_valid_and_their_values_exact():
    rng = np.random.default_rng(7)
    n, b, k = 20, 4, 4
    A = rng.random((n, n))
    X = A @ A.T
    values, patterns = worst_patterns(X, b, k)
    allowed = set(MinSeparation(b, k).patterns(n))
    assert all(p in allowed for p in patterns)
    np.testing.assert_allclose(values, [X[np.ix_(p, p)].sum() for p in patterns], rtol=1e-14)
    assert np.all(np.diff(values) <= 0) and values[0] <= _brute(X, b, k) * (1 + 1e-14)
    # on this smooth X the local search reaches the maximum
    assert values[0] == pytest.approx(_brute(X, b, k), rel=1e-12)


def test_refuses_negative_entries():
    with pytest.raises(ValueError, match="non-negative"):
        pattern_upper_bound(-np.eye(3), 1, 2)
