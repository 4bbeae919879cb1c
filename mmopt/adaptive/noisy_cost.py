"""DAWA's noisy-cost selection on an integer grid: the costs, their discrete Laplace noise, and the least-cost
partition with its tie order.

The rule and its proof (ε₁-DP, nothing rounded) are in :mod:`mmopt.adaptive.partition` (selection
``"noisy_cost"``); the exponential rule's sampler is :mod:`mmopt.adaptive.gibbs`. Costs are integers in units of
1/:data:`COST_GRID` record, summed as Python integers.
"""

from __future__ import annotations

import numpy as np

from mmopt.adaptive._noise import Noise
from mmopt.adaptive._opendp_noise import MAX_DISCRETE_SCALE

__all__ = ["COST_GRID", "least_cost", "noisy_costs"]

#: Costs are counted in units of 1/COST_GRID record, in integers
COST_GRID = 2**20


def noisy_costs(dev: np.ndarray, valid: np.ndarray, delta_L: np.ndarray, epsilon: float, penalty: float,
                 noise: Noise, caller: str) -> np.ndarray:
    """The noisy-cost rule's costs in units of 1/K record: ⌊K·dev⌋ + ⌊K·c⌋ + discrete Lap(b_L) as Python integers on
    the valid entries (None elsewhere), b_L = (⌈K·Δ_L⌉ + max⌈K·Δ_L⌉ + 1)/ε₁ rounded up."""
    K = float(COST_GRID)
    steps = np.ceil(delta_L * K)  # ⌈K·Δ_L⌉, exact: K is a power of two
    scales = np.nextafter((steps + steps.max() + 1.0) / epsilon, np.inf)  # ≥ s_L/ε₁ (the quotient rounds once)
    grid = dev * K  # exact, for the same reason
    if not scales.max() <= MAX_DISCRETE_SCALE:
        raise ValueError(f"{caller}: selection='noisy_cost' adds its noise in 64-bit integers, and epsilon={epsilon!r} "
                         f"needs scales of up to {scales.max() / K:.3g} records (at most "
                         f"{MAX_DISCRETE_SCALE / K:.3g}). "
                         "Use selection='exponential' (the default) or a larger 'epsilon'.")
    if not penalty * K < 2.0**62:  # (c is added in Python integers; the bound only keeps ⌊K·c⌋ a finite float)
        raise ValueError(f"{caller}: selection='noisy_cost' counts the per-bucket penalty in units of 2^-20 record, "
                         f"up to 2^42 records; got {penalty:.3g}. Use a smaller 'bucket_penalty'.")
    if np.nanmax(grid) >= 2.0**53:  # only in a simulation past the release domain (whole counts of <= 2^32 records)
        raise ValueError(f"The 'x' parameter of {caller} has bucket deviations of {np.nanmax(dev):.3g} records; "
                         "selection='noisy_cost' counts them exactly only below 2^33. Use selection='exponential'.")
    c = int(np.floor(penalty * K))  # public: any rounding is post-processing
    cost = np.full(dev.shape, None, dtype=object)
    for k, b in enumerate(scales.tolist()):
        rows = valid[:, k]
        noisy = noise.add_discrete_laplace(np.floor(grid[rows, k]).astype(np.int64), b)
        cost[rows, k] = [t + c for t in noisy.tolist()]  # Python integers: the totals below are exact
    return cost


def least_cost(cost: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """last[e] = length of the final bucket of the least-cost partition of cells [0, e) (dynamic programming), ties
    to the shortest (argmin's first index, lengths ascending): backwards, the least partition in one fixed order."""
    n = cost.shape[0]
    best = np.zeros(n + 1, dtype=cost.dtype)
    last = np.zeros(n + 1, dtype=np.int64)
    for e in range(1, n + 1):
        k = int(np.searchsorted(lengths, e, side="right"))  # candidate lengths <= e
        starts = e - lengths[:k]
        total = best[starts] + cost[starts, np.arange(k)]
        j = int(np.argmin(total))
        best[e], last[e] = total[j], lengths[j]
    return last
