"""UGrid and AGrid: uniform and adaptive grids over a 2-D histogram (Qardaji, Yang & Li, ICDE 2013).

*Differentially Private Grids for Geospatial Data*, §IV (UG) and §V (AG), as DPBench runs them ("UGrid",
"AGrid"). Both partition the n1 × n2 cells into near-equal rectangular blocks, release every block total with
Laplace noise and spread it evenly over the block's cells.

* UGrid: an m × m grid with m = ⌈√(N·ε'/c)⌉ (c = 10, the paper's guideline), ε' the budget of the counts.
* AGrid: a first-level m₁ × m₁ grid, m₁ = max(10, ⌈¼·√(N·ε'/c)⌉), measured with α·ε'; every first-level block
  with noisy count N' is split into m₂ × m₂ sub-blocks, m₂ = ⌈√(max(N', 0)·(1 − α)·ε'/c₂)⌉ (c₂ = c/2), measured
  with (1 − α)·ε'. Constrained inference then makes each block consistent: its total is the inverse-variance
  average of its own noisy count v (variance 2/(αε')²) and the sum of its m₂² sub-block counts (variance
  m₂²·2/((1 − α)ε')²), and the difference is spread equally over the sub-blocks (the least-squares estimate of
  the two-level tree).

N, the number of records, is private. By default (``total=None``) a share ``total_share`` (5%) of ε buys a
noisy N̂ = N + Lap(1/ε_N) (clipped at 0 for the grid sizes only); ε' = ε − ε_N. Passing ``total=N`` treats N as
public knowledge (the papers' assumption): nothing is spent on it, and that is only private if N really is
public. N only sets grid sides, so where the domain fixes them whatever N is (UGrid on one cell; AGrid when
neither side passes the first level's floor of 10, so its first level is the cells) nothing is spent on N either
and ε' = ε (``details["total"]`` is then None).

Privacy (neighbours x' = x ± e_i). N has sensitivity 1 (ε_N-DP). Given N̂, the grid is fixed and its blocks are
disjoint, so the block totals have L1 sensitivity 1: UGrid's counts are ε'-DP. In AGrid, the first level is
(αε')-DP; the second-level partition is a function of the released first level only, and its sub-blocks are
disjoint, so the second level is ((1 − α)ε')-DP given the first; constrained inference is post-processing.
Total ε_N + ε' = ε (sequential composition).

Choices the papers leave open (stated): m rounded up (⌈·⌉) and capped at the domain sides (a grid finer than the
cells is the cells); blocks of near-equal integer sides (the domain is a cell grid, not continuous space); a
first-level block whose m₂ is 1 is measured again as one sub-block (and averaged by the inference); the noisy
counts are not clipped (unbiased totals).
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import validation as v
from mmopt.adaptive._common import AdaptiveResult, check_epsilon, check_fraction, check_histogram, laplace_scale
from mmopt.adaptive._finish import block_edges, finish, noise_source

__all__ = ["agrid", "grid_size", "ugrid"]


def grid_size(records: float, epsilon: float, c: float) -> int:
    """⌈√(max(N, 0)·ε/c)⌉, at least 1 — the grid side guideline of Qardaji et al. (§IV-B).

    Examples
    --------
    >>> grid_size(100_000, 1.0, 10.0)
    100
    """
    caller = "grid_size"
    records = v.check_real(records, name="records", caller=caller)  # a noisy N may be negative: max(N, 0) below
    epsilon = v.check_real(epsilon, name="epsilon", caller=caller, low=0.0, low_open=True)
    c = v.check_real(c, name="c", caller=caller, low=0.0, low_open=True)
    return max(1, math.ceil(math.sqrt(max(records, 0.0) * epsilon / c)))


def _check_2d(x, caller: str) -> np.ndarray:
    X = check_histogram(x, caller)
    if X.ndim != 2:
        raise ValueError(f"The 'x' parameter of {caller} must be a 2-D histogram (n1, n2). Got shape {X.shape}.")
    return X


def _records(X, eps, total, total_share, src, caller, *, needed=True):
    """(N used for the grid sizes, ε', budget entries so far, details so far); ``needed`` False when the grid
    sides do not depend on N, so measuring it would spend ε_N on nothing."""
    share = check_fraction(total_share, "total_share", caller)  # checked even when a public total leaves it unused
    if total is not None:
        N = v.check_real(total, name="total", caller=caller, low=0.0)
        return N, eps, {}, {"total": N, "total_public": True}
    if not needed:
        return 0.0, eps, {}, {"total": None, "total_public": False}
    eps_n = share * eps
    b = laplace_scale(1.0, eps_n, "the record count", caller)
    noisy = float(src.add_laplace(float(X.sum()), b))
    return max(noisy, 0.0), eps - eps_n, {"total": eps_n}, {"total": noisy, "total_public": False}


def _block_sums(X, r_edges, c_edges):
    return np.add.reduceat(np.add.reduceat(X, r_edges[:-1], axis=0), c_edges[:-1], axis=1)


def _spread(block_totals, r_edges, c_edges):
    """The cell array holding each block total divided evenly over the block's cells."""
    rs, cs = np.diff(r_edges), np.diff(c_edges)
    per_cell = block_totals / np.outer(rs, cs)
    return np.repeat(np.repeat(per_cell, rs, axis=0), cs, axis=1)


def ugrid(x, epsilon: float, *, c: float = 10.0, total=None, total_share: float = 0.05, noise="numpy",
          rng=None) -> AdaptiveResult:
    """Run UGrid on a 2-D histogram (module docstring: algorithm, privacy argument, open choices).

    Parameters
    ----------
    x : array_like, 2-D (n1, n2)
    epsilon : float
    c : float > 0, default 10
        The grid constant of m = ⌈√(Nε'/c)⌉.
    total : float >= 0 or None
        None: N is private and estimated with ``total_share``·ε. A number: N, taken as public.
    total_share : float in (0, 1), default 0.05
    noise : {"numpy", "opendp"} or Noise, default "numpy"
    rng : numpy.random.Generator, int or None

    Returns
    -------
    AdaptiveResult
        ``budget = {"total": ε_N, "counts": ε'}`` ("total" absent when N is public or unneeded); ``details``:
        "m" (rows, columns of the grid), "total" (N̂, N when public, None when unneeded), "total_public",
        "noise_scale".

    Examples
    --------
    >>> x = np.full((8, 8), 50.0)
    >>> r = ugrid(x, 1e6, rng=0)
    >>> bool(np.allclose(r.estimate, x, atol=1e-3)), r.details["m"]
    (True, (8, 8))
    """
    caller = "ugrid"
    X = _check_2d(x, caller)
    eps = check_epsilon(epsilon, caller)
    c = v.check_real(c, name="c", caller=caller, low=0.0, low_open=True)
    src = noise_source(noise, rng, caller, data=X)
    # m1 = min(m, n1) and m2 = min(m, n2) are 1 whatever N is only on a single cell
    N, eps_c, budget, details = _records(X, eps, total, total_share, src, caller, needed=max(X.shape) > 1)
    m = grid_size(N, eps_c, c)
    m1, m2 = min(m, X.shape[0]), min(m, X.shape[1])
    re, ce = block_edges(X.shape[0], m1), block_edges(X.shape[1], m2)
    b = laplace_scale(1.0, eps_c, "the grid counts", caller)
    noisy = np.asarray(src.add_laplace(_block_sums(X, re, ce), b), dtype=float)
    details.update(m=(m1, m2), noise_scale=b)
    return finish("ugrid", _spread(noisy, re, ce), eps, {**budget, "counts": eps_c}, details, src)


def agrid(x, epsilon: float, *, c: float = 10.0, alpha: float = 0.5, total=None, total_share: float = 0.05,
          noise="numpy", rng=None) -> AdaptiveResult:
    """Run AGrid on a 2-D histogram (module docstring: algorithm, privacy argument, open choices).

    Parameters
    ----------
    x : array_like, 2-D (n1, n2)
    epsilon : float
    c : float > 0, default 10
        The first-level constant; the second level uses c₂ = c/2.
    alpha : float in (0, 1), default 0.5
        α, the share of ε' spent on the first level.
    total, total_share, noise, rng
        As in :func:`ugrid`.

    Returns
    -------
    AdaptiveResult
        ``budget = {"total": ε_N, "level1": αε', "level2": (1 − α)ε'}``; ``details``: "m1" (first-level grid),
        "m2" (array of the second-level sides m₂ per first-level block, after capping at the block's sides: the
        larger of the two sides used),
        "total", "total_public", "noise_scales".

    Examples
    --------
    >>> x = np.arange(400.0).reshape(20, 20)
    >>> r = agrid(x, 1e6, rng=0)
    >>> bool(np.allclose(r.estimate, x, atol=1e-2)), r.details["m1"]  # huge ε: capped at the cells
    (True, (20, 20))
    """
    caller = "agrid"
    X = _check_2d(x, caller)
    eps = check_epsilon(epsilon, caller)
    c = v.check_real(c, name="c", caller=caller, low=0.0, low_open=True)
    a = check_fraction(alpha, "alpha", caller)
    src = noise_source(noise, rng, caller, data=X)
    # the first level has at least 10 blocks a side, capped at the cells: N moves it only past 10 cells a side
    N, eps_c, budget, details = _records(X, eps, total, total_share, src, caller, needed=max(X.shape) > 10)
    e1, e2 = a * eps_c, eps_c - a * eps_c
    b1 = laplace_scale(1.0, e1, "the first-level counts", caller)
    b2 = laplace_scale(1.0, e2, "the second-level counts", caller)
    side = max(10, math.ceil(0.25 * math.sqrt(N * eps_c / c)))
    g1, g2 = min(side, X.shape[0]), min(side, X.shape[1])
    re, ce = block_edges(X.shape[0], g1), block_edges(X.shape[1], g2)
    level1 = np.asarray(src.add_laplace(_block_sums(X, re, ce), b1), dtype=float)
    var1, var2 = 2.0 * b1 * b1, 2.0 * b2 * b2
    est = np.empty(X.shape)
    m2s = np.empty((g1, g2), dtype=np.int64)
    for i in range(g1):
        for j in range(g2):
            block = X[re[i]:re[i + 1], ce[j]:ce[j + 1]]
            m2 = grid_size(level1[i, j], e2, c / 2.0)
            k1, k2 = min(m2, block.shape[0]), min(m2, block.shape[1])
            m2s[i, j] = max(k1, k2)  # the side used (the guideline can pass int64 at a huge ε, and cells)
            se, te = block_edges(block.shape[0], k1), block_edges(block.shape[1], k2)
            sub = np.asarray(src.add_laplace(_block_sums(block, se, te), b2), dtype=float)
            # constrained inference: inverse-variance average of the two estimates of the block total
            w1, w2 = 1.0 / var1, 1.0 / (sub.size * var2)
            fused = (w1 * level1[i, j] + w2 * sub.sum()) / (w1 + w2)
            sub = sub + (fused - sub.sum()) / sub.size
            est[re[i]:re[i + 1], ce[j]:ce[j + 1]] = _spread(sub, se, te)
    details.update(m1=(g1, g2), m2=m2s, noise_scales=(b1, b2))
    return finish("agrid", est, eps, {**budget, "level1": e1, "level2": e2}, details, src)
