"""mmopt._base.probe: the probe histogram tells apart groupings of the same sizes, and matches allows round-off only."""

import numpy as np

from mmopt._base.probe import matches, probe_histogram


def test_probe_sums_tell_apart_every_pair_of_two_cell_groups():
    x = probe_histogram(64)
    assert np.all((0 <= x) & (x < 1)) and np.unique(x).size == 64
    sums = np.add.outer(x, x)[np.triu_indices(64, 1)]  # every 2-cell group {i, j}
    assert np.unique(sums).size == sums.size  # no two groupings share a sum


def test_matches_allows_round_off_and_nothing_more():
    x = probe_histogram(10_000)
    forward, backward = np.array([x.sum()]), np.array([np.sum(x[::-1])])
    assert matches(forward, backward) and matches(forward, np.sort(x).sum(keepdims=True))
    assert not matches(forward, forward - x[0])  # one cell left out
    assert not matches(forward, np.array([x.sum(), 1.0]))  # another shape
