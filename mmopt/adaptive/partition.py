"""DAWA's private partition step: a least-cost partition of a 1-D histogram into intervals (buckets).

Li, Hay, Miklau & Wang, *A Data- and Workload-Aware Algorithm for Range Queries Under Differential Privacy*
(PVLDB 7(5), 2014), §3. A bucket B = [a, a+L) is summarised by its mean; its cost is its L1 deviation
dev(x, B) = Σ_{j∈B} |x_j − x̄_B| plus a per-bucket penalty c (DAWA: c = 1/ε₂, the expected |noise| of the
bucket's later Laplace measurement). The least-cost partition is found by dynamic programming over the
candidate buckets: ``candidates="dyadic"`` (lengths 1, 2, 4, …, any start: the paper's O(n log n)
approximation, which DPBench runs) or ``"all"`` (every interval, O(n²) windows; use it for n up to a few
thousand). For whole counts each window of 64 cells or more is one query of a wavelet matrix
(:mod:`mmopt.adaptive.wavelet`, O(log σ)); shorter ones, and fractional counts, are summed cell by cell. At 65,536
cells the dyadic deviations take 0.10 CPU s (4.2 s cell by cell; ``benchmarks/bench_partition.py``), the same
floats.

Sensitivity (exact bound). Adding or removing one record in cell i ∈ B moves x̄_B by 1/L: |x_i − x̄_B| moves by
at most 1 − 1/L and each other term by at most 1/L, so dev(x, B) moves by at most Δ_L = 2(1 − 1/L); buckets
not containing i do not move. Δ = max Δ_L over the candidate lengths.

In float64 (:func:`deviations`, :func:`length_sensitivities`): dev is computed as fl(D/L) with the integer
D = L·dev = Σ_{j∈B} |L·x_j − S|, S = Σ_{j∈B} x_j — exact in float64 for whole counts of at most N = MAX_RECORDS
records and L ≤ 2²⁰ (every L·x_j, |L·x_j − S| and partial sum is an integer ≤ 2·L·S ≤ 2⁵³), so dev is the correctly
rounded exact deviation (the former Σ|x_j − fl(S/L)| moved by 1 + 4.8·10⁻⁷ of Δ_L between neighbours at 2³² records,
L = 3; a helper's audit). As dev ≤ Δ_L·S, |fl(dev) − fl(dev')| ≤ Δ_L + u·(dev + dev') ≤ Δ_L·(1 + 2u·N) (u = 2⁻⁵³),
and the proofs below use that charged Δ_L (rounded upwards) for lengths that are not powers of two; for powers of
two the division is exact and Δ_L stays 2(1 − 1/L). Lengths above 2²⁰ are refused. The release path requires whole
counts of at most N records (:mod:`mmopt.adaptive._finish`).

Private selection (``selection=``):

* ``"noisy_cost"`` — DAWA's rule on an integer grid. Costs are counted in units of 1/K record (K = 2²⁰): bucket
  B of length L costs ⌊K·dev(x, B)⌋ + ⌊K·c⌋ + Z_B, the Z_B independent discrete Laplace (Pr[Z = z] ∝ e^{−|z|/b_L}
  on the integers) with b_L = s_L/ε₁, s_L = Δᴷ_L + Δᴷ + 1, Δᴷ_L = ⌈K·Δ_L⌉ and Δᴷ = max_L Δᴷ_L; the partition of
  least total is output, ties going to the shortest final bucket (the dynamic program read backwards: a fixed
  total order on partitions). **ε₁-DP.** Proof: ⌊K·dev⌋ moves by at most Δᴷ_L between neighbours (two reals within
  t have floors within ⌈t⌉). Fix a neighbour pair (cell i) and an output P; let B* ∈ P be its bucket containing i.
  Map the noise z ↦ z − s_{B*}·e_{B*}, an injection of integer vectors whose probability ratio is at most
  e^{s_{B*}/b_{B*}} = e^{ε₁}. Under it P's total moves by at most Δᴷ_{B*} − s_{B*} = −Δᴷ − 1, while a partition
  Q ∌ B* moves by at least −Δᴷ (Q has exactly one bucket containing i), so every such Q is now strictly worse
  than P; every Q ∋ B* moves exactly as P does. So P is still first in the tie order among the least-cost
  partitions, and Pr[P | x] ≤ e^{ε₁} Pr[P | x']. Nothing in this is rounded: dev is the computed float with its
  charged Δ_L (above), K·dev is exact (K a power of two), the totals are sums of Python integers, and OpenDP's
  discrete Laplace sampler is exact. (OpenDP adds in 64-bit integers, which saturate: scales above 2⁴⁵, i.e.
  ε₁ below about 10⁻⁷, are refused so that a saturation needs |Z| > 2⁶², probability below e^{−2¹⁷}.) The grid
  costs 1/K record of resolution and widens each scale by at most 3/(K·(Δ_L + Δ)) relative. (Before this grid,
  the rule drew float Laplace noise and summed it in float64, which the translation argument does not cover.)
  This rule differs from the reference code
  (``dpcomp_core`` ``cutils.L1partition``) in three places, each needed by the proof: the reference draws
  Lap((2 − 1/L − 1/n)/ε₁) ≈ Lap(Δ/ε₁), half of the above — enough only when all costs move the same way,
  whereas here costs of overlapping buckets can move in opposite directions; it gives singletons no noise
  (the shift above needs B*'s noise even when B* = {i}); and it clamps each noisy cost below at c, which
  blocks the shift when B*'s cost sits at the clamp. The reference rule is not ε₁-DP: on x = (0, 5, 10)
  against x' = (0, 6, 10) with ε₁ = 1 and c = 100, it outputs {[0, 1], [2]} with probability 0.500 against
  0.167 (Monte Carlo, 4·10⁶ draws, matching the closed form ½ / (½e^{−2/b}(1 + 1/b)), b = 7/6), a ratio of
  2.99 > e¹; the ratio tends to e^{2/b} = e^{1.71 ε₁} deeper in the tail.
* ``"exponential"`` (default) — the exponential mechanism over partitions: P is drawn with probability
  ∝ exp(−ε₁·cost(P)/(2Δ)), cost(P) = Σ_{B∈P}(dev(x, B) + c), sampled by a forward sum and a backward
  draw over the dynamic program's graph. cost(P) has sensitivity Δ (only the bucket containing i moves), so
  this is ε₁-DP by McSherry & Talwar (2007). In float64 the sampled law is not exactly that: its rounding is
  bounded and, on the release path, charged by building the logits at ε_d slightly below ε₁
  (:mod:`mmopt.adaptive.gibbs`; ε_d = ε₁(1 − 7.6·10⁻⁶/Δ) at 2³² records, refused when it would cost half of ε₁).

Entropy correction (``entropy_correction=True``, a heuristic; it changes no sensitivity, since the penalty is
public). Without DAWA's clamp both rules over-split flat regions: the least noisy cost picks buckets whose
noise is negative (the minimum of K Laplace(b) draws is about −b·ln(K/2)), and the exponential mechanism
favours many buckets because there are more such partitions (at most K^k with k buckets, K = the number of
candidate lengths). Both are offset by adding (2Δ/ε₁)·ln K to the penalty c, i.e. a base measure K^{−k}
over partitions. Measured on a 4,096-cell step histogram at ε = 0.1: 2,300 buckets and 2.8× Uniform's prefix
error at scale 10³ without it, one bucket (Uniform's error) with it; at scale 10⁷ the error is unchanged.
The penalty and the selection's temperature 2Δ/ε₁ both scale as 1/ε₁, so even at huge ε a flat run may be
split into a few buckets (each then estimated exactly); a larger public ``bucket_penalty`` merges them.

Noise (``noise=``): "numpy" (default, seeded; simulation and benchmarking only) or "opendp", release-grade:
every noisy cost is OpenDP's discrete Laplace mechanism at its b_L, and every step of the backward draw is OpenDP's
Gumbel noisy max on the step's logits, which samples their exact softmax (Gumbel-max identity); the drawn
partition's law is within the charged rounding of the Gibbs distribution (:mod:`mmopt.adaptive.gibbs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mmopt._base import validation as v
from mmopt.adaptive._common import check_epsilon
from mmopt.adaptive._finish import noise_source
from mmopt.adaptive.gibbs import draw_epsilon, sample
from mmopt.adaptive.noisy_cost import least_cost, noisy_costs
from mmopt.adaptive.wavelet import at_least, wavelet_matrix
from mmopt.dense.exact_answers import MAX_RECORDS, UNIT_ROUNDOFF, cover_roundings, histogram_problem

__all__ = ["CANDIDATES", "MAX_LENGTH", "SELECTIONS", "Partition", "deviation_terms",
           "deviations", "length_sensitivities", "private_partition", "singletons"]

CANDIDATES = ("dyadic", "all")
SELECTIONS = ("exponential", "noisy_cost")
_CHUNK = 2**20  # entries of the largest temporary window block
# windows from this length on are summed by the wavelet matrix (whole counts). At 65,536 cells a length costs
# 11 / 17 / 33 ms directly at L = 64 / 128 / 256 and ~5 ms by queries, after one 13 ms build
_LONG = 64
# windows a wavelet-matrix query block takes at once (its temporaries, ~20 int64 a window, stay near _CHUNK)
_QUERY = _CHUNK // 16
#: The longest bucket: L·dev is then an exact float64 integer for every histogram of the release domain
MAX_LENGTH = 2**20


def length_sensitivities(lengths) -> np.ndarray:
    """Δ_L = 2(1 − 1/L) per length, times 1 + 2u·MAX_RECORDS (rounded upwards) where L is not a power of two: the
    computed deviations' sensitivity (module docstring).

    >>> length_sensitivities(np.array([1, 2, 3])).tolist()[:2], bool(0 < length_sensitivities([3])[0] - 4 / 3 < 2e-6)
    ([0.0, 1.0], True)
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    exact = 2.0 * (1.0 - 1.0 / lengths)  # exact for powers of two (and 0 at L = 1)
    charged = cover_roundings(exact * (1.0 + 2.0 * UNIT_ROUNDOFF * MAX_RECORDS), 4)
    return np.where((lengths & (lengths - 1)) == 0, exact, charged)


@dataclass(frozen=True, eq=False)
class Partition:
    """A partition of cells 0..n−1 into consecutive buckets, and how it was chosen.

    Attributes
    ----------
    bounds : ndarray of shape (k, 2), int
        Bucket b is cells bounds[b, 0] ≤ j < bounds[b, 1], in order.
    epsilon, selection, candidates, bucket_penalty : float, str, str, float
    sensitivity : float
        Δ = max over candidate lengths of 2(1 − 1/L), charged for the rounding (:func:`length_sensitivities`).
    penalty : float
        The per-bucket cost used: c, plus the entropy correction when applied.
    noise : str
        The back-end of its samples: "numpy" (simulation) or "opendp" (vetted, release-grade).
    """

    bounds: np.ndarray = field(repr=False)
    epsilon: float
    selection: str
    candidates: str
    bucket_penalty: float
    sensitivity: float
    penalty: float
    noise: str = "numpy"

    @property
    def n_buckets(self) -> int:
        return int(self.bounds.shape[0])


def candidate_lengths(n: int, candidates: str, max_length: int) -> np.ndarray:
    """The bucket lengths searched: powers of two (dyadic) or 1..max_length (all), capped at n and max_length."""
    top = min(n, max_length)
    if candidates == "all":
        return np.arange(1, top + 1)
    return 1 << np.arange(top.bit_length())


def deviation_terms(lengths, x, sums, out=None) -> np.ndarray:
    """|L·x_j − S| elementwise (broadcast; into ``out``, of the broadcast shape, if given): the terms of
    L·dev = Σ_{j∈B} |L·x_j − S| of a bucket B of L cells and sum S. For whole counts of at most MAX_RECORDS records
    and L ≤ MAX_LENGTH they, and every partial sum of them, are integers below 2⁵³ (module docstring): summed in
    any order and divided once by L, they give the correctly rounded deviation. :func:`deviations` and
    :func:`mmopt.adaptive.php.split_deviations` compute their deviations so.

    >>> x = np.array([1.0, 3.0, 3.0])
    >>> deviation_terms(3, x, x.sum()).tolist(), float(deviation_terms(3, x, x.sum()).sum() / 3)  # dev = 8/3
    ([4.0, 2.0, 2.0], 2.6666666666666665)
    """
    out = np.multiply(lengths, x, out=out)
    np.subtract(out, sums, out=out)
    return np.abs(out, out=out)


def deviations(x, lengths) -> np.ndarray:
    """dev[a, k] = Σ_{j=a}^{a+L_k−1} |x_j − mean|, the L1 deviation of each window; NaN past the end. Computed as
    fl(Σ|L·x_j − S|/L), S the window's sum: correctly rounded for non-negative whole counts of at most 2³² records
    and L ≤ MAX_LENGTH (module docstring).

    Examples
    --------
    >>> deviations([1.0, 3.0, 3.0], [1, 2]).tolist()
    [[0.0, 2.0], [0.0, 0.0], [0.0, nan]]
    """
    x = v.check_vector(x, name="x", caller="deviations")
    lengths = np.asarray(lengths)
    if (lengths.ndim != 1 or lengths.size == 0 or not np.issubdtype(lengths.dtype, np.integer)
            or np.any(lengths < 1)):  # [0] divided by zero
        raise ValueError(f"The 'lengths' parameter of deviations must be a non-empty 1-D array of window lengths ≥ 1. "
                         f"Got {lengths.tolist()!r:.60} instead.")
    lengths = lengths.astype(np.int64)
    n = x.size
    v.check_allocation(n * lengths.size, what=f"the cost table ({n}×{lengths.size})", caller="deviations")
    dev = np.full((n, lengths.size), np.nan)
    # long windows of a histogram of the release domain (non-negative whole counts, ≤ 2³² records; a huge negative
    # count wrapped around in int64 and gave negative deviations): one wavelet-matrix query each instead of a pass
    # over its L cells (O(n log σ) a length instead of O(n·L); the same integer D, so the same float)
    whole = lengths.max() >= _LONG and histogram_problem(x) is None
    if whole:  # the matrix (2·levels·(n+1) int64, σ ≤ min(n, max x + 1)) and its build's temporaries (~8(n+1))
        # live beside the cost table: when they do not fit, the cell-by-cell pass (the same floats) instead
        levels = max(1, (min(n, int(x.max(initial=0)) + 1) - 1).bit_length())
        whole = n * lengths.size + (2 * levels + 8) * (n + 1) <= v.MAX_ALLOCATION_ENTRIES
    counts = x.astype(np.int64) if whole else None
    wm = wavelet_matrix(counts) if whole else None
    prefix = np.concatenate([[0], np.cumsum(counts)]) if whole else None
    for k, L in enumerate(lengths.tolist()):
        if L > n:
            continue
        if whole and L >= _LONG:
            for s in range(0, n - L + 1, _QUERY):
                stop = min(s + _QUERY, n - L + 1)
                starts = np.arange(s, stop)
                S = prefix[s + L:stop + L] - prefix[s:stop]  # window sums, exact int64
                count, total = at_least(wm, starts, starts + L, S // L + 1)  # the cells with L·x_j > S
                # D ≤ 2(L − 1)·S < 2⁵³ for L ≤ MAX_LENGTH: exact, then one correct rounding
                dev[s:stop, k] = (2 * (L * total - count * S)).astype(np.float64) / L
            continue
        windows = sliding_window_view(x, L)
        step = max(1, _CHUNK // L)
        for s in range(0, windows.shape[0], step):
            w = windows[s:s + step]
            # L·dev = Σ|L·x_j − S|: exact integers below 2⁵³ in the release domain, then one correct rounding
            dev[s:s + w.shape[0], k] = deviation_terms(L, w, w.sum(axis=1)[:, None]).sum(axis=1) / L
    return dev


def private_partition(x, epsilon: float, *, bucket_penalty: float, candidates: str = "dyadic",
                      selection: str = "exponential", max_bucket_length: int | None = None,
                      entropy_correction: bool = True, rng=None, noise="numpy") -> Partition:
    """An ε-DP least-cost partition of a 1-D histogram (module docstring for the rules and their proofs).

    Parameters
    ----------
    x : array_like of shape (n,)
        Non-negative counts.
    epsilon : float
        ε₁ > 0, all of it spent here.
    bucket_penalty : float >= 0
        c, the public per-bucket cost (DAWA: 1/ε₂).
    entropy_correction : bool, default True
        Add (2Δ/ε₁)·ln K to c (module docstring); the total is ``Partition.penalty``.
    candidates : {"dyadic", "all"}
    selection : {"exponential", "noisy_cost"}
    max_bucket_length : int or None
        Longest bucket considered (None: n). A smaller cap also lowers Δ.
    rng : numpy.random.Generator, int or None
        Seed for ``noise="numpy"``; must be None with ``noise="opendp"``.
    noise : {"numpy", "opendp"} or Noise, default "numpy"
        Seeded numpy noise (simulation) or OpenDP's vetted samplers (release).

    Examples
    --------
    >>> x = np.repeat([5.0, 40.0, 0.0, 0.0], 8)
    >>> p = private_partition(x, 1e4, bucket_penalty=1.0, rng=0)
    >>> bool(np.all(np.isin([8, 16], p.bounds[:, 0])))
    True
    """
    caller = "private_partition"
    x = v.check_vector(x, name="x", caller=caller)
    if x.size == 0 or np.any(x < 0):
        raise ValueError(f"The 'x' parameter of {caller} must be a non-empty vector of counts >= 0.")
    eps = check_epsilon(epsilon, caller)
    c = v.check_real(bucket_penalty, name="bucket_penalty", caller=caller, low=0.0)
    candidates = v.check_choice(candidates, name="candidates", caller=caller, choices=CANDIDATES)
    selection = v.check_choice(selection, name="selection", caller=caller, choices=SELECTIONS)
    cap = x.size if max_bucket_length is None else v.check_int(max_bucket_length, name="max_bucket_length",
                                                                caller=caller)
    entropy_correction = v.check_bool(entropy_correction, name="entropy_correction", caller=caller)
    src = noise_source(noise, rng, caller, data=x)
    lengths = candidate_lengths(x.size, candidates, cap)
    if lengths[-1] > MAX_LENGTH:
        raise ValueError(f"The 'max_bucket_length' parameter of {caller} must be at most {MAX_LENGTH:,} (2^20) here "
                         f"(x has {x.size:,} cells): the deviations of longer buckets are not exact in float64. Pass "
                         "max_bucket_length=2**20 or less.")
    delta_L = length_sensitivities(lengths)
    delta = float(np.max(delta_L))  # (a charged length can exceed the next power of two's exact Δ_L)
    if lengths[-1] == 1:  # singletons only: a single possible partition, nothing to hide
        return singletons(x.size, eps, selection, candidates, c, src.backend)
    penalty = c + (2.0 * delta / eps) * np.log(lengths.size) if entropy_correction else c
    if not np.isfinite(penalty):
        raise ValueError(f"{caller}: the entropy correction (2Δ/ε₁)·ln K overflows at epsilon={eps!r}. "
                         "Use a larger 'epsilon' or entropy_correction=False.")
    dev = deviations(x, lengths)
    valid = ~np.isnan(dev)
    if selection == "noisy_cost":
        last = least_cost(noisy_costs(dev, valid, delta_L, eps, float(penalty), src, caller), lengths)
    else:
        eps_d = draw_epsilon(src, eps, x.size, lengths.size, delta, float(penalty), caller)
        last = sample(-(eps_d / (2.0 * delta)) * (dev + penalty), lengths, src)
    return Partition(_bounds(last), eps, selection, candidates, c, delta, float(penalty), src.backend)


def singletons(n: int, epsilon: float, selection: str, candidates: str, bucket_penalty: float,
               noise: str) -> Partition:
    """The partition of n cells into n one-cell buckets: the only one when no bucket may be longer (Δ = 0)."""
    ends = np.arange(n + 1)
    return Partition(np.stack([ends[:-1], ends[1:]], axis=1), epsilon, selection, candidates, bucket_penalty, 0.0,
                     bucket_penalty, noise)


def _bounds(last: np.ndarray) -> np.ndarray:
    """Buckets [start, stop) in order, from the final-bucket lengths (only the chain from n is used)."""
    stops = []
    e = last.size - 1
    while e > 0:
        stops.append(e)
        e -= int(last[e])
    stops = np.array(stops[::-1], dtype=np.int64)
    return np.stack([np.concatenate([[0], stops[:-1]]), stops], axis=1)
