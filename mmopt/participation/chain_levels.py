"""The 2b-band strategy coarse to fine: solved at n/2ᴸ steps, carried to each finer level, refined there.

Notation: see :mod:`mmopt.participation.chain_banded`. At 2,048 steps an evaluation of the 2b-band objective costs
0.74 CPU s at k = 4 and 0.60 s at k = 8 (a triangular inverse and BᵀB, n³/6 multiply-adds each; 1.36 / 1.03 s when
these numbers were taken) and from the free banded start it is time-limited: in 100 CPU s it reached 216,498 at
k = 8, and 211,000 only after 430 s. A step at n/2 costs an eighth as much, and the
strategy's shape carries over. Block i of b steps at n holds the steps of block i of b/2 at n/2, at half the offsets;
so C_n(s, t) is read from C_{n/2} at (s/2, t/2) (:func:`carry`). Interpolated bilinearly in the row and the
lag s − t, the rows clamped to their block (the optimum jumps at block boundaries: within a block its lags grow
with the offset, a saw-tooth, so no smooth or per-block polynomial model of it comes within 1 %), and the entries
off the diagonal multiplied by c = 0.75–0.8 (measured best), the start lost 3 %: at 2,048 steps, k = 4, from the
level at 1,024 (39,048), 91,911 where the route then reached 90,429 after its 53 s at 2,048. :func:`carry` also
keeps what does not stretch with n: the entries near the diagonal follow the same lags at every n (the
coefficients of (1 − z)^{−1/2}, nearly), so they are interpolated relative to that decay, and no entry is
interpolated across lag b, where they jump (only lags ≥ b enter Δ²): 90,008 from the same level. The level tries
:data:`DECAYS` and keeps the lowest exact Δ²·error (one triangular inverse and one chain each).

The coarsest level starts from ``start`` when given (optimize passes the chain dual's Lagrangian start at n/2,
:func:`mmopt.participation.chain_dual.lagrangian_start`: at 2,048 steps, k = 4, 90,637 in the route against 90,962
from the free band at 256 steps), else from the free banded strategy (a third of its budget), and each level runs
:func:`~.chain_banded` from the carried start, which keeps the start if it cannot improve on it. The budgets double
with each level up to the finest, which takes the rest (about half).

Measured (prefix sums, one core, ``seconds`` = 80, before :func:`carry`): at n = 2,048, k = 8 levels 256 → 2,048
gave 211,724 (from the free band at n, 216,498 in 114 s of optimize's route; 209,465 with 300 s); at k = 4, 90,989
(92,403). At 1,024 steps it does not pay: in the route (80 s) 92,016 against 92,066 at k = 8 and 39,397 against
39,110 at k = 4, so optimize uses it from 2,048 steps (:mod:`mmopt.family.training_separation`). With
:func:`carry`, from the dual's start at 1,024 steps (the route's 80 s): 89,720 at k = 4 (90,429 before) and
208,854 at k = 8 (209,075 … 210,624 before); 3 levels from 512 steps reached 208,799, the same within a run's
variation. At k = 8 the 2b-band family itself stops near 1.004× the chain dual at 1,024 steps (91,842 after 87 s
against 91,449), so its 2,048-step strategy cannot be expected much below 1.004× either.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.special import gammaln

from mmopt._base import validation as v
from mmopt.participation.chain_banded import chain_banded, check_start_band, scaled_error
from mmopt.participation.free_banded import FreeBanded, _check_arguments, band_error, free_banded

__all__ = ["DECAYS", "FREE_MAX_LEVELS", "carry", "chain_levels", "free_levels"]

DECAYS = ((0.38, 0.97), (0.4, 0.985), (0.42, 1.0))  # (α, scale) of carry, the lowest exact error kept (α 0.34 …
# 0.45 and scales 0.9 … 1.05 tried at 2,048 steps, k = 4 and 8, and 4,096, k = 4, b bands)
MIN_SEPARATION = 16  # the coarsest level keeps b ≥ this
MAX_LEVELS = 4
FREE_MAX_LEVELS = 5  # free_levels' default (4,096 steps, k = 4, 74 CPU s: 207,611 from 256 steps, 209,028 from
# 512, 209,918 from 1,024, against 211,508 at n alone)
GROWTH = 2.0  # each level's budget over the one before (a step costs 8× as much; 1, 1.5 and 3 no better at 2,048)


def carry(C: np.ndarray, participations: int, decay: float, scale: float = 1.0) -> np.ndarray:
    """C_n from C_{n/2} (2·(n/2)/k bands), respecting the optimum's structure: blocks, lag b and the decay.

    Three things a plain bilinear interpolation in (row, lag) smears, each measured on the 2b-band optimum
    (n = 1,024, k = 4):

    * near the diagonal the entries follow the same lags at every n (1, 0.5, 0.39, 0.29, 0.21, 0.16 at lags 0, 1,
      2, 4, 8, 16: close to the coefficients r_d of (1 − z)^{−1/2}, the single-participation optimum), not lags
      doubled with n. So the entries are divided by r_d^{2α} (α = ``decay``) before the interpolation and
      multiplied by it after;
    * at lag b the entries jump (steps b apart can share a pattern, so only lags ≥ b enter Δ²; the optimum's C is
      positive at lag b − 1 and negative at b): an interpolation corner on the other side of lag b (or off the
      band, or the diagonal for an entry off it and vice versa) is dropped and the weights of the others renormalised
      (with none left, the coarse row's lag D/2 on D's side of b/2);
    * rows are clamped to their block, and so are columns.

    C_n(s, t) interpolates (s/2, t/2) bilinearly in C_{n/2}'s row and column; the entries off the diagonal are then
    multiplied by ``scale``. Measured, 2,048 steps, k = 4, from the 2b-band strategy at 1,024 (39,048): the start's
    exact error 90,008 (α = 0.4, scale 0.985) against 91,911 for the bilinear one in (row, lag) times 0.8 (the
    best of 0.7, 0.75, 0.8); at k = 8, from 91,860: 209,774 against 213,872; the free band at 4,096 steps, k = 4,
    from 2,048 (90,892), cut to b bands: 207,775 against 212,558.

    Parameters
    ----------
    C : ndarray (h, h)
        Lower-triangular with at most 2h/k bands; h a multiple of k.
    participations : int
        k.
    decay : float
        α: the entries are interpolated relative to r_d^{2α} ≈ (π d)^{−α}.
    scale : float, default 1.0
        The factor of the entries off the diagonal.

    Returns
    -------
    ndarray (2h, 2h)
        Lower-triangular with at most 4h/k bands and the coarse diagonal's values on its diagonal.

    Examples
    --------
    >>> C = np.tril(np.ones((8, 8))) - np.tril(np.ones((8, 8)), -4)   # h = 8, k = 4: b = 2, 4 bands of ones
    >>> F = carry(C, 4, 0.0)        # α = 0: plain interpolation, no decay
    >>> F.shape, float(F[5, 5]), float(F[5, 4]), float(F[7, 0]), float(F[8, 0])
    ((16, 16), 1.0, 1.0, 1.0, 0.0)
    """
    caller = "carry"
    C = v.check_matrix(C, name="C", caller=caller, square=True)
    k = v.check_int(participations, name="participations", caller=caller, low=1)
    alpha = v.check_real(decay, name="decay", caller=caller, low=0.0)
    scale = v.check_real(scale, name="scale", caller=caller, low=0.0, low_open=True)
    h = C.shape[0]
    if h % k:
        raise ValueError(f"The 'participations' parameter of {caller} must divide n = {h}. Got {k} instead.")
    n, hb = 2 * h, h // k  # hb: the coarse separation; the fine one is b = 2·hb
    S, T = np.tril_indices(n)
    keep = S - T < 4 * hb
    S, T = S[keep], T[keep]
    D = S - T
    r0, c0 = S // 2, T // 2
    r1 = np.minimum(r0 + 1, (r0 // hb) * hb + hb - 1)  # the row's (and the column's) coarse block ends there
    c1 = np.minimum(c0 + 1, (c0 // hb) * hb + hb - 1)
    wr, wc = S / 2.0 - r0, T / 2.0 - c0
    total, weight = np.zeros(len(S)), np.zeros(len(S))
    plain, count = np.zeros(len(S)), np.zeros(len(S))  # for an entry whose valid corners all weigh 0
    for R, w_row in ((r0, 1.0 - wr), (r1, wr)):
        for Q, w_col in ((c0, 1.0 - wc), (c1, wc)):
            L = R - Q
            ok = (L >= 0) & (L < 2 * hb) & ((L > 0) == (D > 0)) & ((L >= hb) == (D >= 2 * hb))
            value = np.where(ok, C[R, np.minimum(Q, R)] / _decay(np.maximum(L, 0), alpha), 0.0)
            w = np.where(ok, w_row * w_col, 0.0)
            total += w * value
            weight += w
            plain += value
            count += ok
    lone = weight == 0
    total[lone], weight[lone] = plain[lone], count[lone]
    # no valid corner (a block's last row or column beside lag b or the diagonal): the coarse row's own lag D/2,
    # moved onto D's side of lag hb
    lone = weight == 0
    R = r0[lone]
    L = np.where(D[lone] >= 2 * hb, np.clip(D[lone] // 2, hb, 2 * hb - 1), np.clip(D[lone] // 2, 1, hb - 1))
    L = np.minimum(L, R)
    total[lone], weight[lone] = C[R, R - L] / _decay(L, alpha), 1.0
    values = total / weight
    out = np.zeros((n, n))
    out[S, T] = np.where(D > 0, scale * values * _decay(D, alpha), values)
    diagonal = np.diag(out).copy()
    floor = 1e-3 * float(np.abs(diagonal).max()) if np.any(diagonal > 0) else 1.0
    out[np.diag_indices(n)] = np.maximum(diagonal, floor)
    return out


def _decay(d: np.ndarray, alpha: float) -> np.ndarray:
    """r_d^{2α}, r_d = Γ(d + ½)/(Γ(½) Γ(d + 1)) the coefficients of (1 − z)^{−1/2} (r_0 = 1)."""
    d = np.asarray(d, dtype=float)
    return np.exp(2.0 * alpha * (gammaln(d + 0.5) - gammaln(0.5) - gammaln(d + 1.0)))


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
                 start=None, refine_finest: bool = True) -> FreeBanded:
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
    refine_finest : bool, default True
        False: the finest level is carried (the best of :data:`DECAYS`) and not refined, the budget spent below it.
        At 4,096 steps, k = 4 a step costs ~5 CPU s and the route's budget made no progress there: from 2,048 steps
        (70 s) carried, 205,949–206,366 against 212,468 with half the budget spent at 4,096 (a helper's exploration).

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
    refined = len(sizes) if refine_finest or len(sizes) == 1 else len(sizes) - 1
    shares = [GROWTH ** j for j in range(refined)]
    iterations, coarse = 0, None
    for j, m in enumerate(sizes):
        if j == refined:  # the finest, carried only
            error, C, sens = min((scaled_error(carry(coarse.matrix, k, alpha, c), m // k, k) for alpha, c in DECAYS),
                                 key=lambda r: r[0])
            return FreeBanded(C, error, sens, coarse.status, iterations, time.process_time() - t0)
        deadline = t0 + seconds * sum(shares[:j + 1]) / sum(shares)
        if j == 0 and start is None:
            free = free_banded(m, k, seconds=max((deadline - time.process_time()) / 3, 1e-3))
            start, iterations = free.matrix, free.iterations
        elif j:
            start = min((carry(coarse.matrix, k, alpha, c) for alpha, c in DECAYS),
                        key=lambda C: scaled_error(C, m // k, k)[0])
        coarse = chain_banded(m, k, start=start, seconds=max(deadline - time.process_time(), 1e-3))
        iterations += coarse.iterations
    return FreeBanded(coarse.matrix, coarse.error, coarse.sensitivity, coarse.status, iterations,
                      time.process_time() - t0)



def free_levels(n: int, participations: int, *, seconds: float, levels: int | None = None) -> FreeBanded:
    """The free banded strategy (:func:`mmopt.participation.free_banded.free_banded`, b bands) coarse to fine: at
    n/2^(levels − 1) steps from the row-weighted start, each finer level from the coarser one carried by
    :func:`carry` and cut to b bands (the lowest exact error over :data:`DECAYS`), the budgets doubling.
    ``levels`` defaults to halving n while b stays even and ≥ 2·:data:`MIN_SEPARATION`, at most
    :data:`FREE_MAX_LEVELS` levels.

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
            carried = (np.tril(C) - np.tril(C, -b) for C in (carry(coarse.matrix, k, a, c) for a, c in DECAYS))
            start = min((band_error(C, b, k) for C in carried), key=lambda pair: pair[0])[1]
        coarse = free_banded(m, k, seconds=max(deadline - time.process_time(), 1e-3), start=start)
        iterations += coarse.iterations
    return FreeBanded(coarse.matrix, coarse.error, coarse.sensitivity, coarse.status, iterations,
                      time.process_time() - t0)
