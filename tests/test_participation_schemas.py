"""Participation schemas: the patterns each allows, against a direct enumeration of all subsets of steps."""

from itertools import combinations

import numpy as np
import pytest

import mmopt
from mmopt.participation import fixed_epochs, min_separation, single


def _all_min_sep(n, b, k):
    return sorted(p for m in range(1, k + 1) for p in combinations(range(n), m)
                  if all(q - r >= b for r, q in zip(p, p[1:], strict=False)))


@pytest.mark.parametrize("n,b,k", [(6, 2, 2), (7, 3, 3), (8, 2, 4), (5, 1, 2), (4, 3, 2), (9, 4, 5)])
def test_min_separation_lists_every_allowed_pattern_once(n, b, k):
    schema = min_separation(b, k)
    got = schema.patterns(n)
    assert sorted(got) == _all_min_sep(n, b, k)
    assert len(got) == len(set(got)) == schema.count(n)


def test_fixed_epochs_patterns_partition_the_steps():
    U = fixed_epochs(3).vectors(12)
    assert U.shape == (4, 12)
    np.testing.assert_array_equal(U.sum(axis=0), np.ones(12))
    assert fixed_epochs(3).separation(12) == 4 and fixed_epochs(3).participations(12) == 3


def test_single_is_one_step_each():
    np.testing.assert_array_equal(single().vectors(5), np.eye(5))


def test_public_names():
    assert mmopt.participation.fixed_epochs(4) == fixed_epochs(4)
    assert mmopt.participation.min_separation(2, 3).max_participations == 3


@pytest.mark.parametrize("call,error", [
    (lambda: fixed_epochs(0), ValueError), (lambda: fixed_epochs(2.5), TypeError),
    (lambda: min_separation(0, 2), ValueError), (lambda: fixed_epochs(3).patterns(10), ValueError),
    (lambda: min_separation(1, 20).patterns(60), ValueError),
])
def test_bad_input_is_refused(call, error):
    with pytest.raises(error):
        call()
