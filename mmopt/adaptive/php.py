"""PHP: private recursive bisection, then noisy bucket totals (Ács, Castelluccia & Chen, ICDM 2012).

*Differentially Private Histogram Publishing through Lossy Compression* (P-HPartition), benchmarked in DPBench
(Hay et al., SIGMOD 2016) as "PHP":

1. Partition (ε₁ = ρ·ε): start from one bucket [0, n). For T levels, every open bucket [lo, hi) with at least
   two cells makes one exponential-mechanism choice (budget ε₁/T) among "keep" (the bucket becomes final) and
   the splits s ∈ {lo+1, …, hi−1}, with scores u(keep) = −(dev(lo, hi) + 1/ε₂) and
   u(s) = −(dev(lo, s) + dev(s, hi) + 2/ε₂), where dev(a, b) = Σ_{a≤i<b} |x_i − mean(x[a:b])| is the bucket's
   absolute deviation from its average (the L1 error of spreading its total evenly) and 1/ε₂ = E|Lap(1/ε₂)| the
   L1 error its noisy total will add (the paper's trade-off of approximation against perturbation error; the
   "keep" candidate is this implementation's way of letting a bucket stop).
2. Measure (ε₂ = ε − ε₁): every final bucket's total + Lap(1/ε₂), spread evenly over its cells.

Privacy (neighbours: x' = x ± e_i, one record added or removed). Moving x_i by 1 in a bucket of m cells moves
its mean by 1/m, so |x_i − mean| changes by at most 1 − 1/m and each of the other m − 1 terms by at most 1/m:
dev changes by at most 2(1 − 1/m) < 2. Cell i lies in one side of each candidate split (and in the kept bucket),
and the 1/ε₂ terms are data-independent, so Δu ≤ 2 and each exponential-mechanism call is (ε₁/T)-DP. The open
buckets of one level are disjoint and only the one holding i sees a different score vector, so a level is
(ε₁/T)-DP (parallel composition) given the previous levels, and the T levels compose sequentially to ε₁
(adaptive composition). The final buckets are disjoint, so their totals have L1 sensitivity 1 and step 2 is
ε₂-DP given the partition. Total ε₁ + ε₂ = ε.

In float64 (:func:`split_deviations`, :func:`score_sensitivity`). Each dev(a, b) of L = b − a cells is computed as
fl(D/L) with the integer D = L·dev = Σ|L·x_i − S| (S the part's sum): exact in float64 for whole counts of at
most N = MAX_RECORDS records and L < 2²⁰ (every term and partial sum an integer ≤ 2·L·S < 2⁵³; the guard of
:func:`mmopt._base.guards.check_work` keeps n below 2¹⁸), so each dev is correctly rounded. Then a split's score is
−fl(fl(dev_l + dev_r) + 2c) and keep's −fl(dev + c) (c = 1/ε₂ or 0), so with u = 2⁻⁵³ and V the exact deviations'
sum (V ≤ 2S ≤ 2N, as dev(a, b) ≤ 2(1 − 1/L)·S), |ŝ − s| ≤ (3 + 4u)·u·V + 2u·c, and between neighbours

    |ŝ(x) − ŝ(x')| ≤ 2 + 4(3 + 4u)·u·N + 4u·c = Δ_c   (rounded upwards; 2 + 1.2·10⁻⁵ at c ≤ 1, N = 2³²),

charged as every choice's sensitivity. It depends on N and ε₂ only. (The former scores, from rounded means, stayed
within 2 only thanks to the exact bound's 2/m slack: no proof, and none at all when c is large — ulp(c) alone can
exceed 2.) The release path requires whole counts of at most N records (:mod:`mmopt.adaptive._finish`).

Choices the paper leaves open (stated): ρ = 0.5; T = ⌈log₂ n⌉ levels (enough for balanced splits to reach
single cells); the "keep" candidate and the 1/ε₂ noise terms above (``keep_option=False`` drops them: every
bucket of two or more cells is then split at every level); the noisy totals are not clipped, so Σx̂ is unbiased
for Σx. At very small ε₁/T the choices are close to uniform, so the partition is close to random bisection
(kept with probability ≈ 1/m at m cells): PHP is a low-signal method.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import guards as g
from mmopt._base import validation as v
from mmopt.adaptive._common import AdaptiveResult, check_epsilon, check_fraction, check_histogram, laplace_scale
from mmopt.adaptive._finish import finish, noise_source
from mmopt.adaptive.partition import deviation_terms
from mmopt.dense.exact_answers import MAX_RECORDS, UNIT_ROUNDOFF, cover_roundings

__all__ = ["deviation", "php", "score_sensitivity", "split_deviations"]

_CHUNK = 1 << 20  # entries of the (split × cell) work array evaluated at once
_MAX_CELLS = 1 << 20  # L·dev exact in float64 below it (module docstring)


#: Operations per (cut, cell) pair of a split's scores, measured with the levels below it (php on 40,000 cells:
#: 13 CPU s, 1.6·10⁹ pairs at the top level).
_SPLIT_OPS = 8


def score_sensitivity(penalty: float) -> float:
    """Δ_c = 2 + 4(3 + 4u)·u·MAX_RECORDS + 4u·c, rounded upwards: the computed scores' sensitivity (module
    docstring), c the per-bucket penalty.

    >>> 2 < score_sensitivity(1.0) < 2 + 1.2e-5
    True
    """
    u = UNIT_ROUNDOFF
    return cover_roundings(2.0 + 4.0 * (3.0 + 4.0 * u) * u * MAX_RECORDS + 4.0 * u * penalty, 4)


def deviation(xb: np.ndarray) -> float:
    """dev = Σ|x_i − mean| of a bucket, as fl(Σ|L·x_i − S|/L): correctly rounded (module docstring).

    >>> deviation(np.array([0.0, 1.0, 1.0])) == 4 / 3
    True
    """
    L = xb.size
    return float(deviation_terms(L, xb, xb.sum()).sum()) / L


def split_deviations(xb: np.ndarray) -> np.ndarray:
    """fl(dev(0, s) + dev(s, m)) for every split s = 1, …, m − 1 of a bucket xb of m ≥ 2 cells (step 1's −score),
    each dev correctly rounded (module docstring).

    O(m²) work in chunks of rows, O(m + chunk) memory.

    Examples
    --------
    >>> np.round(split_deviations(np.array([1.0, 1.0, 5.0, 5.0])), 6).tolist()
    [5.333333, 0.0, 5.333333]
    """
    m = xb.size
    cs = np.concatenate([[0.0], np.cumsum(xb)])  # whole partial sums ≤ 2³²: exact
    s = np.arange(1, m)
    out = np.empty(m - 1)
    rows = max(1, _CHUNK // m)
    idx = np.arange(m)
    for a in range(0, m - 1, rows):
        cut = s[a:a + rows]
        r = cut.size
        left = idx[None, :] < cut[:, None]
        ss = cut.astype(np.float64)
        S = cs[a + 1:a + 1 + r, None]
        # row s holds the buckets [0, s) and [s, m): the |L·x_i − S| of both (L = s or m − s) in one array, exact
        # integers; one reduction sums each side exactly (segments from row·m and row·m + s), one division each
        lengths = np.where(left, ss[:, None], m - ss[:, None])
        terms = deviation_terms(lengths, xb, np.where(left, S, cs[m] - S), out=lengths)
        row_starts = np.arange(0, r * m, m)
        sides = np.add.reduceat(terms.ravel(), np.column_stack([row_starts, row_starts + cut]).ravel())
        out[a:a + r] = sides[0::2] / ss + sides[1::2] / (m - ss)
    return out


def php(x, epsilon: float, *, ratio: float = 0.5, depth: int | None = None, keep_option: bool = True,
        noise="numpy", rng=None) -> AdaptiveResult:
    """Run PHP on a 1-D histogram (module docstring: algorithm, privacy argument, open choices).

    Parameters
    ----------
    x : array_like, 1-D (n,)
        Non-negative cell counts.
    epsilon : float
        Total ε > 0.
    ratio : float in (0, 1), default 0.5
        ρ, the share of ε spent on the partition.
    depth : int >= 1 or None
        T, the number of bisection levels; None means ⌈log₂ n⌉ (at least 1). A T above n − 1 is cut to it
        (each split leaves a part one cell shorter at least, so no bucket is split more often, and ε₁/T for
        levels that cannot run would be charged and never drawn; ``details["depth"]`` is the T used).
    keep_option : bool, default True
        Offer the "keep" candidate and count the 1/ε₂ noise terms in the scores.
    noise : {"numpy", "opendp"} or Noise, default "numpy"
        Where every Laplace and exponential-mechanism sample comes from: seeded numpy (simulation) or
        OpenDP's vetted samplers (release; ``rng`` must then be None).
    rng : numpy.random.Generator, int or None
        Seed for ``noise="numpy"``.

    Returns
    -------
    AdaptiveResult
        ``budget = {"partition": ε₁, "counts": ε₂}``; ``details``: "buckets" (list of (lo, hi)), "depth",
        "noise_scale" (1/ε₂), "split_sensitivity" (Δ_c, :func:`score_sensitivity`).

    Examples
    --------
    >>> x = np.array([0, 0, 0, 0, 8, 8, 8, 8], float)
    >>> r = php(x, 1e6, rng=0)
    >>> bool(np.allclose(r.estimate, x, atol=1e-3)), sorted(r.budget)
    (True, ['counts', 'partition'])
    """
    caller = "php"
    if not isinstance(keep_option, bool | np.bool_):  # "no" counted as True
        raise TypeError(f"The 'keep_option' parameter of {caller} must be True or False. Got {keep_option!r} instead.")
    X = check_histogram(x, caller)
    if X.ndim != 1:
        raise ValueError(f"The 'x' parameter of {caller} must be a 1-D histogram (PHP bisects intervals). Got "
                         f"shape {X.shape}; flatten a 2-D histogram in a locality-preserving order first "
                         "(e.g. mmopt.adaptive.hilbert_order).")
    eps = check_epsilon(epsilon, caller)
    rho = check_fraction(ratio, "ratio", caller)
    n = X.size
    # the first split scores every cut of the whole domain, O(n²) (measured: 13 CPU s at 40,000 cells)
    g.check_work(n, name="x", caller=caller, item="cells", work_of=lambda m: _SPLIT_OPS * m * m,
                 remedy="Coarsen x (merge neighbouring cells).")
    if n > _MAX_CELLS:  # (only with a raised MAX_WORK) the deviations' integers L·dev would not be exact
        raise ValueError(f"The 'x' parameter of {caller} must have at most {_MAX_CELLS:,} cells (2^20), where the "
                         f"split scores are computed exactly. Got {n:,}; coarsen x.")
    T = max(1, math.ceil(math.log2(n))) if depth is None else v.check_int(depth, name="depth", caller=caller)
    T = min(T, max(n - 1, 1))  # depth=50 on 8 cells spent 43/50 of ε₁ on levels that cannot run
    src = noise_source(noise, rng, caller, data=X)
    if n == 1 or (n == 2 and not keep_option):  # nothing to choose (one cell, or two that must be split): the
        # counts take all of ε (ρ·ε went unused, or was spent on a choice with one candidate; helpers' probes)
        b = laplace_scale(1.0, eps, "the bucket totals", caller)
        details = {"buckets": [(i, i + 1) for i in range(n)], "depth": 0, "noise_scale": b, "split_sensitivity": 2.0}
        estimate = np.asarray(src.add_laplace(X.astype(float), b), dtype=float)
        return finish("php", estimate, eps, {"partition": 0.0, "counts": eps}, details, src)
    eps1, eps2 = rho * eps, eps - rho * eps
    eps_level = eps1 / T
    laplace_scale(score_sensitivity(1.0 / eps2), eps_level, "a split choice", caller)  # an overflowing ε₁/T, up front
    penalty = 1.0 / eps2 if keep_option else 0.0
    sens = score_sensitivity(penalty)  # the computed scores' (module docstring)
    buckets, final = [(0, n)], set()
    for _ in range(T):
        nxt = []
        for lo, hi in buckets:
            if hi - lo < 2 or (lo, hi) in final:
                nxt.append((lo, hi))
                continue
            xb = X[lo:hi]
            splits = split_deviations(xb) + 2.0 * penalty
            if keep_option:  # candidate 0 keeps the bucket, candidate s >= 1 splits it before lo + s
                keep = deviation(xb) + penalty
                s = src.exponential(-np.concatenate([[keep], splits]), eps_level, sens)
            else:
                s = 1 + src.exponential(-splits, eps_level, sens)
            if s == 0:
                final.add((lo, hi))
                nxt.append((lo, hi))
            else:
                nxt.extend([(lo, lo + s), (lo + s, hi)])
        buckets = nxt
        if all(hi - lo < 2 or (lo, hi) in final for lo, hi in buckets):
            break  # nothing left to split: the remaining levels would spend nothing
    b = laplace_scale(1.0, eps2, "the bucket totals", caller)
    edges = np.array([lo for lo, _ in buckets] + [n])
    totals = np.asarray(src.add_laplace(np.add.reduceat(X, edges[:-1]), b), dtype=float)
    sizes = np.diff(edges)
    estimate = np.repeat(totals / sizes, sizes)
    details = {"buckets": buckets, "depth": T, "noise_scale": b, "split_sensitivity": sens}
    return finish("php", estimate, eps, {"partition": eps1, "counts": eps2}, details, src)
