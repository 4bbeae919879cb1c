"""The 2b-band strategy coarse to fine: solved at n/2ᴸ steps, carried to each finer level, refined there.

Notation: see :mod:`mmopt.participation.chain_banded`. At 2,048 steps an evaluation of the 2b-band objective costs
0.74 CPU s at k = 4 and 0.60 s at k = 8 (a triangular inverse and BᵀB, n³/6 multiply-adds each; 1.36 / 1.03 s when
these numbers were taken) and from the free banded start it is time-limited: in 100 CPU s it reached 216,498 at
k = 8, and 211,000 only after 430 s. A step at n/2 costs an eighth as much, and the
strategy's shape carries over. Block i of b steps at n holds the steps of block i of b/2 at n/2, at half the offsets;
so C_n(s, t) is read from C_{n/2} at (s/2, t/2), bilinear in the row and the lag s − t, the rows clamped to their
block (the optimum jumps at block boundaries: within a block its lags grow with the offset, a saw-tooth, so no
smooth or per-block polynomial model of it comes within 1 %). Off the diagonal the entries are multiplied by a
factor c: twice as many lags share the sensitivity (the banded Toeplitz optimum's coefficients decay like
d^{−1/2}, which suggests c ≈ 2^{−1/2}). Measured, the best start lies at c = 0.75–0.8 at every level and both k,
so the level tries :data:`SCALES` and keeps the lowest exact Δ²·error (one triangular inverse and one chain each).

The coarsest level starts from ``start`` when given (optimize passes the chain dual's Lagrangian start at n/2,
:func:`mmopt.participation.chain_dual.lagrangian_start`: at 2,048 steps, k = 4, 90,637 in the route against 90,962
from the free band at 256 steps), else from the free banded strategy (a third of its budget), and each level runs
:func:`~.chain_banded` from the carried start, which keeps the start if it cannot improve on it. The budgets double
with each level up to the finest, which takes the rest (about half).

Measured (prefix sums, one core, ``seconds`` = 80): at n = 2,048, k = 8 levels 256 → 2,048 gave 211,724 (from the
free band at n, 216,498 in 114 s of optimize's route; 209,465 with 300 s); at k = 4, 90,989 (92,403). At 1,024
steps it does not pay: in the route (80 s) 92,016 against 92,066 at k = 8 and 39,397 against 39,110 at k = 4, so
optimize uses it from 2,048 steps (:mod:`mmopt.family.training_separation`).
"""

from __future__ import annotations

import time

import numpy as np

from mmopt._base import validation as v
from mmopt.participation.chain_banded import chain_banded, check_start_band, scaled_error
from mmopt.participation.free_banded import FreeBanded, _check_arguments, band_error, free_banded

__all__ = ["FREE_MAX_LEVELS", "FREE_SCALES", "SCALES", "chain_levels", "free_levels", "prolong"]

SCALES = (0.7, 0.75, 0.8)  # c of the module docstring (0.55 … 1.0 tried at n = 512 … 2,048, k = 4 and 8)
FREE_SCALES = (0.75, 0.8, 0.85)  # c for the free band (4,096 steps, k = 4: 0.6 … 1.0 tried, 0.8 best at each level)
MIN_SEPARATION = 16  # the coarsest level keeps b ≥ this
MAX_LEVELS = 4
FREE_MAX_LEVELS = 5  # free_levels' default (4,096 steps, k = 4, 74 CPU s: 207,611 from 256 steps, 209,028 from
# 512, 209,918 from 1,024, against 211,508 at n alone)
GROWTH = 2.0  # each level's budget over the one before (a step costs 8× as much; 1, 1.5 and 3 no better at 2,048)


def prolong(C: np.ndarray, participations: int, scale: float) -> np.ndarray:
    """C_n from C_{n/2} (2·(n/2)/k bands): C_n(s, t) = c^{[s ≠ t]}·C_{n/2}(s/2, t/2), bilinear in the row and the
    lag, rows clamped to their block of b/2 (module docstring).

    Parameters
    ----------
    C : ndarray (h, h)
        Lower-triangular with at most 2h/k bands; h a multiple of k.
    participations : int
        k.
    scale : float
        c, the factor of the entries off the diagonal.

    Returns
    -------
    ndarray (2h, 2h)
        Lower-triangular with at most 4h/k bands and a positive diagonal.

    Examples
    --------
    >>> C = np.tril(np.ones((8, 8))) - np.tril(np.ones((8, 8)), -4)   # h = 8, k = 4: 2·2 = 4 bands of ones
    >>> F = prolong(C, 4, 0.5)
    >>> F.shape, float(F[5, 5]), float(F[5, 4]), float(F[7, 0]), float(F[8, 0])
    ((16, 16), 1.0, 0.5, 0.5, 0.0)
    """
    caller = "prolong"
    C = v.check_matrix(C, name="C", caller=caller, square=True)
    k = v.check_int(participations, name="participations", caller=caller, low=1)
    h = C.shape[0]
    if h % k:
        raise ValueError(f"The 'participations' parameter of {caller} must divide n = {h}. Got {k} instead.")
    n, hb = 2 * h, h // k  # hb: the coarse separation; the fine one is b = 2·hb
    lag = np.zeros((h, 2 * hb))  # lag[s, d] = C[s, s − d]
    s, t = np.tril_indices(h)
    near = s - t < 2 * hb
    lag[s[near], (s - t)[near]] = C[s[near], t[near]]
    S, T = np.tril_indices(n)
    near = S - T < 4 * hb
    S, T = S[near], T[near]
    D = S - T
    r = S / 2.0
    r0 = np.floor(r).astype(int)
    r1 = np.minimum(r0 + 1, (r0 // hb) * hb + hb - 1)  # the row's coarse block ends there
    d = np.minimum(D / 2.0, 2 * hb - 1)
    d0 = np.floor(d).astype(int)
    d1 = np.minimum(d0 + 1, 2 * hb - 1)
    wr, wd = r - r0, d - d0
    values = ((1 - wr) * ((1 - wd) * lag[r0, d0] + wd * lag[r0, d1])
              + wr * ((1 - wd) * lag[r1, d0] + wd * lag[r1, d1]))
    out = np.zeros((n, n))
    out[S, T] = np.where(D > 0, scale * values, values)
    diagonal = np.diag(out).copy()
    floor = 1e-3 * float(np.abs(diagonal).max()) if np.any(diagonal > 0) else 1.0
    out[np.diag_indices(n)] = np.maximum(diagonal, floor)
    return out


def _level_sizes(n: int, k: int, levels, max_levels: int, caller: str) -> list[int]:
    """The levels' steps, coarse to fine: ``levels`` of them (checked: b = n/k must halve that often), or by default
    n halved while b stays even and ≥ 2·:data:`MIN_SEPARATION`, at most ``max_levels`` levels."""
    if levels is not None:
        levels = v.check_int(levels, name="levels", caller=caller, low=1)
        if (n // k) % 2 ** (levels - 1):
            raise ValueError(f"The 'levels' parameter of {caller} must leave b = n/k = {n // k} a whole number "
                             f"at the coarsest level (b/2^(levels − 1)). Got {levels} instead.")
        return [n >> (levels - 1 - j) for j in range(levels)]
    sizes = [n]
    while len(sizes) < max_levels and (sizes[0] // k) % 2 == 0 and sizes[0] // k >= 2 * MIN_SEPARATION:
        sizes.insert(0, sizes[0] // 2)
    return sizes


def chain_levels(n: int, participations: int, *, seconds: float, levels: int | None = None,
                 start=None) -> FreeBanded:
    """The 2b-band strategy for prefix sums of n steps under ``min_separation(n/k, k)``, coarse to fine.

    Parameters
    ----------
    n : int
        Steps, a multiple of k, at most :data:`mmopt.participation.free_banded.MAX_N`.
    participations : int
        k; the separation is b = n/k.
    seconds : float
        The CPU budget of all levels (each level's status "user_limit" when its share is spent). Each level's
        exact evaluations (of the carried starts and of each stage's end) come on top: ~3 CPU s at 2,048 steps.
    levels : int, optional
        How many (default: halve n while b stays even and ≥ 2·:data:`MIN_SEPARATION`, at most
        :data:`MAX_LEVELS`; 1 is the free band then :func:`~.chain_banded` at n).
    start : array_like (m, m), optional
        The coarsest level's start instead of the free band: a strategy with 2b bands on m = n/2ʲ steps (b = m/k),
        which sets the levels (m, 2m, …, n); optimize passes the chain dual's at n/2
        (:func:`mmopt.participation.chain_dual.lagrangian_start`).

    Returns
    -------
    FreeBanded
        The finest level's strategy, its exact error and the chain's Δ² (as :func:`~.chain_banded`); iterations
        and seconds of all levels.

    Examples
    --------
    >>> r = chain_levels(128, 4, seconds=2.0)    # how far a budget goes is the benchmark's (it was asserted here)
    >>> r.matrix.shape, bool(np.all(np.tril(r.matrix, -64) == 0)), r.sensitivity.squared
    ((128, 128), True, 1.0)
    """
    caller = "chain_levels"
    n, k, _, seconds = _check_arguments(n, participations, 0, seconds, caller)
    if seconds is None:
        raise TypeError(f"The 'seconds' parameter of {caller} must be a positive number. Got None instead.")
    t0 = time.process_time()
    if start is not None:
        if levels is not None:
            raise TypeError(f"{caller} takes 'levels' or 'start', not both: the start's size sets the levels.")
        start = v.check_matrix(start, name="start", caller=caller, square=True)
        m = start.shape[0]
        if m > n or m % k or n % m or (n // m) & (n // m - 1):
            raise ValueError(f"The 'start' parameter of {caller} must be m×m with m = n/2ʲ a multiple of k = {k}. "
                             f"Got {m}×{m} for n = {n} instead.")
        check_start_band(start, m // k, caller)  # b = m/k on the start's m steps
        sizes = [m]
        while sizes[-1] < n:
            sizes.append(2 * sizes[-1])
    else:
        sizes = _level_sizes(n, k, levels, MAX_LEVELS, caller)
    shares = [GROWTH ** j for j in range(len(sizes))]
    iterations, coarse = 0, None
    for j, m in enumerate(sizes):
        deadline = t0 + seconds * sum(shares[:j + 1]) / sum(shares)
        if j == 0 and start is None:
            free = free_banded(m, k, seconds=max((deadline - time.process_time()) / 3, 1e-3))
            start, iterations = free.matrix, free.iterations
        elif j:
            start = min((prolong(coarse.matrix, k, c) for c in SCALES), key=lambda C: scaled_error(C, m // k, k)[0])
        coarse = chain_banded(m, k, start=start, seconds=max(deadline - time.process_time(), 1e-3))
        iterations += coarse.iterations
    return FreeBanded(coarse.matrix, coarse.error, coarse.sensitivity, coarse.status, iterations,
                      time.process_time() - t0)



def free_levels(n: int, participations: int, *, seconds: float, levels: int | None = None) -> FreeBanded:
    """The free banded strategy (:func:`mmopt.participation.free_banded.free_banded`, b bands) coarse to fine: at
    n/2^(levels − 1) steps from the row-weighted start, each finer level from the coarser one carried by
    :func:`prolong` (the lowest exact error over :data:`FREE_SCALES`), the budgets doubling. ``levels`` defaults
    to halving n while b stays even and ≥ 2·:data:`MIN_SEPARATION`, at most :data:`FREE_MAX_LEVELS` levels.

    Measured (4,096 steps, k = 4, one core, 74 CPU s): levels 256 → 4,096 reached 207,611, 512 → 4,096 209,028,
    1,024 → 4,096 209,918 and 2,048 → 4,096 210,461, where one level reached 211,508 (209,066 with 107 s); the start
    carried to 4,096 was 211,149–212,287 against the row-weighted 215,144. The finest level takes ~7 steps: the
    differences among the first three are within a run's variation.

    >>> r = free_levels(128, 4, seconds=3.0)
    >>> r.matrix.shape, bool(np.all(np.tril(r.matrix, -32) == 0)), r.sensitivity.exact
    ((128, 128), True, True)
    """
    caller = "free_levels"
    n, k, _, seconds = _check_arguments(n, participations, 0, seconds, caller)
    if seconds is None:
        raise TypeError(f"The 'seconds' parameter of {caller} must be a positive number. Got None instead.")
    sizes = _level_sizes(n, k, levels, FREE_MAX_LEVELS, caller)
    t0 = time.process_time()
    shares = [GROWTH ** j for j in range(len(sizes))]
    iterations, coarse = 0, None
    for j, m in enumerate(sizes):
        deadline = t0 + seconds * sum(shares[:j + 1]) / sum(shares)
        start = None
        if j:
            b = m // k
            carried = (np.tril(C) - np.tril(C, -b) for C in (prolong(coarse.matrix, k, c) for c in FREE_SCALES))
            start = min((band_error(C, b, k) for C in carried), key=lambda pair: pair[0])[1]
        coarse = free_banded(m, k, seconds=max(deadline - time.process_time(), 1e-3), start=start)
        iterations += coarse.iterations
    return FreeBanded(coarse.matrix, coarse.error, coarse.sensitivity, coarse.status, iterations,
                      time.process_time() - t0)
