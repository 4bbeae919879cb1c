"""A wavelet matrix over whole counts: the count and sum of the cells at or above a threshold in any window, for
many windows at once, in O(log σ) vectorised steps (σ the number of distinct counts).

Claude, Navarro & Ordóñez, *The wavelet matrix* (Information Systems 47, 2015). The counts are replaced by their
ranks among the distinct values, and level ℓ (top bit first) stores the rank bits in that level's order (the
previous level's, stably partitioned by the previous bit: zeros first), with prefix counts of the ones and prefix
sums of the *counts* of the ones. A query for ``rank ≥ r`` walks the levels: where r's bit is 0, every one in the
range is above r (taken: its count and its sum), and the walk follows the zeros; where it is 1, it follows the
ones; what is left at the bottom equals r (taken). All in int64 integers: exact.

:func:`mmopt.adaptive.partition.deviations` uses it for long windows: the L1 deviation of a window of L cells
with sum S is Σ|L·x_j − S| = 2·(L·Σ_{x_j > S/L} x_j − #{x_j > S/L}·S) (the signed terms sum to zero), so one
query per window at the threshold ⌊S/L⌋ + 1 replaces the O(L) pass over its cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v

__all__ = ["WaveletMatrix", "at_least", "wavelet_matrix"]


@dataclass(frozen=True, eq=False)
class WaveletMatrix:
    """The levels of a wavelet matrix (top bit first).

    Attributes
    ----------
    values : ndarray of int64
        The distinct counts, ascending (rank r stands for values[r]).
    zeros : ndarray of int64
        Per level, how many cells have bit 0 there (they come first at the next level).
    ones : ndarray of int64, shape (levels, n + 1)
        Per level, the number of ones among the first i cells of that level's order.
    one_sums : ndarray of int64, shape (levels, n + 1)
        Per level, the sum of the counts of those ones.
    """

    values: np.ndarray
    zeros: np.ndarray
    ones: np.ndarray
    one_sums: np.ndarray


def wavelet_matrix(x) -> WaveletMatrix:
    """The wavelet matrix of non-negative whole counts ``x`` (int64, each partial sum below 2⁶³).

    >>> wm = wavelet_matrix([3, 0, 5, 3])
    >>> wm.values.tolist(), wm.ones.shape
    ([0, 3, 5], (2, 5))
    """
    counts = np.asarray(x, dtype=np.int64)
    values, ranks = np.unique(counts, return_inverse=True)
    n, levels = counts.size, max(1, int(values.size - 1).bit_length())
    v.check_allocation(2 * levels * (n + 1), what=f"the wavelet matrix ({levels} levels of {n:,} cells)",
                       caller="wavelet_matrix")
    ones = np.zeros((levels, n + 1), dtype=np.int64)
    one_sums = np.zeros((levels, n + 1), dtype=np.int64)
    zeros = np.zeros(levels, dtype=np.int64)
    for level in range(levels):
        bit = (ranks >> (levels - 1 - level)) & 1
        np.cumsum(bit, out=ones[level, 1:])
        np.cumsum(bit * counts, out=one_sums[level, 1:])
        zeros[level] = n - ones[level, -1]
        order = np.argsort(bit, kind="stable")  # zeros first, each side in its previous order
        ranks, counts = ranks[order], counts[order]
    return WaveletMatrix(values, zeros, ones, one_sums)


def at_least(wm: WaveletMatrix, starts, stops, thresholds) -> tuple[np.ndarray, np.ndarray]:
    """(count, sum) of the cells with count ≥ threshold in each window [start, stop) (arrays broadcast together).

    >>> wm = wavelet_matrix([3, 0, 5, 3, 1])
    >>> [a.tolist() for a in at_least(wm, np.array([0, 1]), np.array([4, 5]), np.array([3, 2]))]
    [[3, 2], [11, 8]]
    """
    lo, hi, t = np.broadcast_arrays(np.asarray(starts, dtype=np.int64), np.asarray(stops, dtype=np.int64),
                                    np.asarray(thresholds, dtype=np.int64))
    r = np.searchsorted(wm.values, t, side="left")  # rank ≥ r ⇔ count ≥ t
    count, total = np.zeros(lo.shape, dtype=np.int64), np.zeros(lo.shape, dtype=np.int64)
    if wm.values.size == 0:  # no cells (values[r] below has no r)
        return count, total
    above = r >= wm.values.size  # no count reaches t
    r = np.minimum(r, wm.values.size - 1)
    levels = wm.ones.shape[0]
    lo, hi = lo.copy(), hi.copy()
    for level in range(levels):
        ones, sums = wm.ones[level], wm.one_sums[level]
        bit = ((r >> (levels - 1 - level)) & 1).astype(bool)
        o_lo, o_hi = ones[lo], ones[hi]
        # r's bit 0: the ones here are above r's prefix; take them and follow the zeros
        take = ~bit
        count += np.where(take, o_hi - o_lo, 0)
        total += np.where(take, sums[hi] - sums[lo], 0)
        lo, hi = (np.where(bit, wm.zeros[level] + o_lo, lo - o_lo), np.where(bit, wm.zeros[level] + o_hi, hi - o_hi))
    # what is left has rank r exactly: its count is the value's
    count += hi - lo
    total += (hi - lo) * wm.values[r]
    return np.where(above, 0, count), np.where(above, 0, total)
