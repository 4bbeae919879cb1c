"""NoiseFirst and StructureFirst: private v-optimal histograms (Xu, Zhang, Xiao, Yang & Yu, ICDE 2012).

*Differentially Private Histogram Publication* (ICDE 2012; extended in the VLDB Journal, 2013). A k-bucket
v-optimal histogram partitions the n cells into k intervals minimising the sum of squared errors
SSE = Σ_buckets Σ_{i∈B} (x_i − mean_B)², found exactly by dynamic programming (Jagadish et al., VLDB 1998):
E_k[j] = min_{i<j} E_{k−1}[i] + SSE(i, j) over the prefixes x[0:j] (:func:`vopt_table`).

* NoiseFirst (ε-DP, one step): x̃ = x + Lap(1/ε) per cell; the v-optimal histogram of x̃ with k* buckets;
  x̂ = the bucket means of x̃. k* minimises the estimated error Ê(k) = E_k(x̃) − (n − 2k)·2b² (b = 1/ε): a
  bucket of m cells has E[SSE(x̃)] = SSE(x) + (m − 1)·2b², and spreading its mean costs SSE(x) + 2b².
  Privacy: the Laplace step is ε-DP (L1 sensitivity 1); everything after it is post-processing.
* StructureFirst (ε₁ + ε₂): the k − 1 boundaries are drawn right to left by the exponential mechanism (ε₁/(k − 1)
  each) on the data clipped to [0, F]: the boundary before the current right end j is i with score
  −(E_{k'−1}[i] + SSE(i, j)) (k' buckets left); then each bucket's (unclipped) total + Lap(1/ε₂), spread evenly.
  Privacy: on counts in [0, F], adding or removing a record changes one cell by 1 and any SSE(B) by at most
  2F + 1 (Σx² moves by 2x_i + 1 ≤ 2F − 1 and S²/m by (2S + 1)/m ≤ 2F + 1/m); one cell lies in only one of the
  two terms of a score and the min in E_{k'−1} preserves the bound, so Δ = 2F + 1 and each choice is
  (ε₁/(k − 1))-DP; k − 1 choices compose to ε₁. Clipping is applied to the neighbours alike (|clip(a) − clip(b)|
  ≤ |a − b|). Given the boundaries, the disjoint bucket totals have L1 sensitivity 1: ε₂-DP. Total ε₁ + ε₂ = ε.
  The scores are computed in float64, so the proof bounds the computed ones (:func:`score_sensitivity`): with
  whole counts of at most N = 2³² records (``noise="opendp"`` refuses any other x before drawing) clipped at ⌊F⌋,
  the prefix sums P are exact and Σz² is kept exactly as two float parts, so every bucket's D = Σ_B z² is D(1 + δ),
  and SSE = D − S²/m is within 4.03u·D of its value (u = 2⁻⁵³; S²/m ≤ D). Each of the table's k additions adds
  u times a partial sum ≤ T = min(⌊F⌋·N, n·⌊F⌋²) (a bound on Σz², hence on every E), and a min moves no further
  than its arguments: a computed score is within 5.05·k·u·T of its exact value, and the exponential mechanism is
  given Δ = 2F + 1 + 10.1·k·u·T, rounded upwards (+2.6·10⁻¹⁰ at F = 50, n = 23; +1.5·10⁻⁴ relative at F = 10⁸,
  n = 4,096, k = 64). The float64 table had moved scores by 352 past 2F + 1 at F = 10⁸ (a helper's audit).

Choices the paper leaves open (stated): NoiseFirst searches k ≤ ``max_buckets`` = min(n, 64) (the DP costs
O(k·n²): ~2 s at n = 1,024 and ~16 s at n = 4,096 with k = 64, measured on one core); StructureFirst needs k
(default ⌈n/10⌉, at most 64) and the public count bound F (required: it cannot be read from the data
privately); ρ = ε₁/ε = 0.5; no clipping of the outputs.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import guards as g
from mmopt._base import validation as v
from mmopt.adaptive._common import AdaptiveResult, check_epsilon, check_fraction, check_histogram, laplace_scale
from mmopt.adaptive._finish import finish, noise_source
from mmopt.dense.exact_answers import MAX_RECORDS, UNIT_ROUNDOFF, histogram_problem

__all__ = ["noise_first", "score_sensitivity", "structure_first", "vopt_table"]

_CHUNK = 1 << 20


def _prefixes(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(P, H, L): P the prefix sums of z and Σ_{i<j} z_i² = 2³²·H_j + L_j. For a histogram of whole counts of at
    most MAX_RECORDS records both parts are exact (Σz² in Python integers, split: H ≤ n·2³², L < 2³²), so a
    bucket's Σz² is one rounding from exact (module docstring); otherwise float64 sums in H (L = 0)."""
    P = np.concatenate([[0.0], np.cumsum(z)])  # exact for whole counts: integers ≤ N ≤ 2⁵³
    if histogram_problem(z) is not None:
        return P, np.concatenate([[0.0], np.cumsum(z * z)]) / 2.0**32, np.zeros(z.size + 1)
    total, H, L = 0, [0.0], [0.0]
    for value in z.astype(np.int64).tolist():
        total += value * value
        H.append(float(total >> 32))
        L.append(float(total & 0xFFFFFFFF))
    return P, np.array(H), np.array(L)


def _sse(P, H, L, i, j):
    """SSE of x[i:j] for broadcastable index arrays i < j (clipped at 0 against rounding), from :func:`_prefixes`:
    Σ_B z² = 2³²(H_j − H_i) + (L_j − L_i), each difference exact, their sum rounded once."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s = ((H[j] - H[i]) * 2.0**32 + (L[j] - L[i])) - (P[j] - P[i]) ** 2 / (j - i)
    return np.maximum(s, 0.0)


def score_sensitivity(count_bound: float, n: int, buckets: int) -> float:
    """Δ = 2F + 1 + 10.1·k·u·T (T = min(⌊F⌋·N, n·⌊F⌋²)), rounded upwards: what StructureFirst's computed scores
    of neighbouring histograms of at most N = MAX_RECORDS records can differ by (module docstring).

    >>> 101.0 < score_sensitivity(50, 23, 4) < 101.0 + 1e-9
    True
    """
    F = math.floor(count_bound)
    T = min(F * MAX_RECORDS, n * F * F)  # Python integers: exact
    if T >= 2**1000:
        raise ValueError(f"The 'count_bound' parameter of structure_first must be below 2^968 (the scores' rounding "
                         f"bound, ⌊F⌋·2³², stays finite). Got {count_bound!r} instead.")
    charge = 10.1 * buckets * UNIT_ROUNDOFF * float(T) * (1.0 + 1e-6)  # (1 + 10⁻⁶): this product's own roundings
    return math.nextafter((2.0 * count_bound + 1.0) + charge * (1.0 + 1e-6), math.inf)


def vopt_table(z: np.ndarray, kmax: int, prefixes=None) -> tuple[np.ndarray, np.ndarray]:
    """(E, arg): E[k, j] the least SSE of x[0:j] in k buckets (inf when j < k), arg[k, j] the optimal last start.

    Examples
    --------
    >>> E, _ = vopt_table(np.array([1.0, 1.0, 5.0, 5.0, 9.0]), 3)
    >>> E[1:, 5].round(6).tolist()
    [44.8, 10.666667, 0.0]
    """
    n = z.size
    _check_table(n, kmax, "vopt_table")
    P, H, L = _prefixes(z) if prefixes is None else prefixes  # (structure_first reuses them for its scores)
    E = np.full((kmax + 1, n + 1), np.inf)
    arg = np.zeros((kmax + 1, n + 1), dtype=np.int64)
    E[0, 0] = 0.0
    rows = np.arange(n + 1)[:, None]
    width = max(1, _CHUNK // (n + 1))
    for k in range(1, kmax + 1):
        prev = E[k - 1][:, None]
        for j0 in range(1, n + 1, width):
            js = np.arange(j0, min(n + 1, j0 + width))[None, :]
            M = np.where(rows < js, prev + _sse(P, H, L, rows, js), np.inf)
            best = np.argmin(M, axis=0)
            arg[k, js[0]] = best
            E[k, js[0]] = M[best, np.arange(js.shape[1])]
    return E, arg


#: Operations per (bucket count, start, end) triple of the v-optimal table, measured: noise_first on 4,000 cells
#: (64 buckets, 10⁹ triples) took 8.2 CPU s.
_TABLE_OPS = 8


def _check_table(n: int, kmax: int, caller: str) -> None:
    """Refuse, before any draw, a table (E and arg, plus the chunk temporaries) beyond the allocation limit, or
    one whose O(k·n²) fill is beyond :data:`mmopt._base.guards.MAX_WORK` (noise_first on 10⁵ cells: ~1.5 hours)."""
    v.check_allocation(2 * (kmax + 1) * (n + 1) + 3 * _CHUNK, what="the v-optimal table", caller=caller,
                       remedy=" Lower the number of buckets or coarsen x.")
    g.check_work(n, name="x", caller=caller, item="cells", low=1,
                 work_of=lambda m: _TABLE_OPS * max(kmax, 1) * (m + 1) ** 2,
                 remedy="Coarsen x (merge neighbouring cells) or lower the number of buckets.")


def _spread_means(values: np.ndarray, starts: list[int], n: int) -> np.ndarray:
    """Each bucket [starts[t], starts[t+1]) set to the mean of ``values`` over it."""
    edges = np.array([*starts, n])
    sizes = np.diff(edges)
    return np.repeat(np.add.reduceat(values, edges[:-1]) / sizes, sizes)


def _check_1d(x, caller):
    X = check_histogram(x, caller)
    if X.ndim != 1:
        raise ValueError(f"The 'x' parameter of {caller} must be a 1-D histogram. Got shape {X.shape}.")
    return X


def noise_first(x, epsilon: float, *, max_buckets: int | None = None, noise="numpy", rng=None) -> AdaptiveResult:
    """Run NoiseFirst (module docstring).

    Parameters
    ----------
    x : array_like, 1-D (n,)
    epsilon : float
    max_buckets : int >= 1 or None
        The largest k searched; None means min(n, 64).
    noise : {"numpy", "opendp"} or Noise, default "numpy"
    rng : numpy.random.Generator, int or None

    Returns
    -------
    AdaptiveResult
        ``budget = {"counts": ε}``; ``details``: "k", "buckets" (start indices), "estimated_errors" (Ê(k), k ≥ 1).

    Examples
    --------
    >>> x = np.repeat([2.0, 30.0, 7.0], [10, 5, 9])
    >>> r = noise_first(x, 1e6, rng=0)
    >>> bool(np.allclose(r.estimate, x, atol=1e-3)), r.details["k"] >= 3
    (True, True)
    """
    caller = "noise_first"
    X = _check_1d(x, caller)
    eps = check_epsilon(epsilon, caller)
    n = X.size
    kmax = min(n, 64) if max_buckets is None else min(n, v.check_int(max_buckets, name="max_buckets",
                                                                       caller=caller))
    src = noise_source(noise, rng, caller, data=X)
    _check_table(n, kmax, caller)
    b = laplace_scale(1.0, eps, "the cell counts", caller)
    noisy = np.asarray(src.add_laplace(X, b), dtype=float)
    E, arg = vopt_table(noisy, kmax)
    ks = np.arange(1, kmax + 1)
    est_err = E[1:, n] - (n - 2.0 * ks) * 2.0 * b * b
    k = int(ks[np.argmin(est_err)])
    starts, j = [], n
    for kk in range(k, 0, -1):
        j = int(arg[kk, j])
        starts.append(j)
    estimate = _spread_means(noisy, starts[::-1], n)
    details = {"k": k, "buckets": starts[::-1], "estimated_errors": est_err, "noise_scale": b}
    return finish("noise_first", estimate, eps, {"counts": eps}, details, src)


def structure_first(x, epsilon: float, *, count_bound: float, buckets: int | None = None, ratio: float = 0.5,
                    noise="numpy", rng=None) -> AdaptiveResult:
    """Run StructureFirst (module docstring).

    Parameters
    ----------
    x : array_like, 1-D (n,)
    epsilon : float
    count_bound : float > 0
        F, a public upper bound on the cell counts (cells above it are clipped for the structure step only).
    buckets : int >= 1 or None
        k; None means min(⌈n/10⌉, 64).
    ratio : float in (0, 1), default 0.5
        ρ = ε₁/ε.
    noise : {"numpy", "opendp"} or Noise, default "numpy"
    rng : numpy.random.Generator, int or None

    Returns
    -------
    AdaptiveResult
        ``budget = {"structure": ε₁, "counts": ε₂}`` (ε₁ = 0, ε₂ = ε when k = 1 or k = n); ``details``: "k", "buckets"
        (start indices), "score_sensitivity" (2F + 1 and the rounding's charge, :func:`score_sensitivity`),
        "noise_scale".

    Examples
    --------
    >>> x = np.repeat([2.0, 30.0, 7.0], [10, 5, 9])
    >>> r = structure_first(x, 1e6, count_bound=50, buckets=3, rng=0)
    >>> bool(np.allclose(r.estimate, x, atol=1e-3)), r.details["buckets"]
    (True, [0, 10, 15])
    """
    caller = "structure_first"
    X = _check_1d(x, caller)
    eps = check_epsilon(epsilon, caller)
    F = v.check_real(count_bound, name="count_bound", caller=caller, low=0.0, low_open=True)
    rho = check_fraction(ratio, "ratio", caller)
    n = X.size
    k = min(n, min(math.ceil(n / 10), 64) if buckets is None else v.check_int(buckets, name="buckets",
                                                                              caller=caller))
    src = noise_source(noise, rng, caller, data=X)
    _check_table(n, k - 1, caller)
    # one bucket, or one per cell, has no boundary to choose: all of ε goes to the totals (else ε₁ would be reported
    # but read nothing: every choice had one candidate, and each cell's variance was 4× what ε allows)
    forced = k in (1, n)
    eps1, eps2 = (0.0, eps) if forced else (rho * eps, eps - rho * eps)
    delta = score_sensitivity(F, n, k)  # (the release domain was checked by noise_source, before any draw)
    b = laplace_scale(1.0, eps2, "the bucket totals", caller)
    z = np.minimum(X, math.floor(F))  # whole counts stay whole (⌊F⌋ ≤ F: 2F + 1 still bounds the scores' change)
    starts, j = [], n
    if forced:
        starts = list(range(n - 1, 0, -1))[: k - 1]  # k = n: every cell starts a bucket (reversed below)
    else:
        laplace_scale(delta, eps1 / (k - 1), "a boundary choice", caller)
        P, H, L = prefixes = _prefixes(z)
        E, _ = vopt_table(z, k - 1, prefixes)
        for kk in range(k, 1, -1):
            cand = np.arange(kk - 1, j)  # room for kk − 1 non-empty buckets before, one after
            scores = -(E[kk - 1, cand] + _sse(P, H, L, cand, j))
            j = int(cand[src.exponential(scores, eps1 / (k - 1), delta)])
            starts.append(j)
    starts = [0, *starts[::-1]]
    edges = np.array([*starts, n])
    sizes = np.diff(edges)
    totals = np.asarray(src.add_laplace(np.add.reduceat(X, edges[:-1]), b), dtype=float)
    estimate = np.repeat(totals / sizes, sizes)
    details = {"k": k, "buckets": starts, "score_sensitivity": delta, "noise_scale": b, "count_bound": F}
    budget = {"structure": eps1, "counts": eps2}
    return finish("structure_first", estimate, eps, budget, details, src)
