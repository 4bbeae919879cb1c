"""EFPA: keep the k lowest Fourier coefficients, k chosen privately, perturb them (Ács, Castelluccia & Chen 2012).

*Differentially Private Histogram Publishing through Lossy Compression*, §III (Enhanced Fourier Perturbation,
improving Rastogi & Nath's FPA), as DPBench runs it ("EFPA"). Written in the real orthonormal Fourier basis
φ_0 = 1/√n, φ_{2f−1} = √(2/n)·cos(2πf·i/n), φ_{2f} = √(2/n)·sin(2πf·i/n) (and the Nyquist row (−1)^i/√n for
even n), ordered by frequency, so c = Φx has ‖c‖₂ = ‖x‖₂ and keeping "the first k coefficients" keeps the lowest
frequencies (the real form of keeping the low DFT coefficients and their conjugates).

1. Choose k ∈ {1, …, n} with the exponential mechanism (budget ε₁ = ρ·ε) and score
   u(k) = −(‖c_{k:}‖₂ + √(2k)·b_k): the L2 error of dropping the tail plus the L2 norm of the noise the k kept
   coefficients would get (k Laplace variables of scale b_k = Δ₁(k)/ε₂ have Σ E[η²] = 2k·b_k²).
2. Release c_j + Lap(b_k) for j < k (budget ε₂ = ε − ε₁), set the rest to 0, and invert: x̂ = Φᵀĉ.

Privacy (neighbours x' = x ± e_i, both whole-count histograms of at most N = 2³² records,
:data:`~mmopt.dense.exact_answers.MAX_RECORDS`; ``noise="opendp"`` refuses any other x before drawing). The
mechanism is proven for the *computed* quantities, with Φ̂ the float64 matrix it uses (:func:`fourier_matrix`):
the cos/sin values rounded to multiples of 2⁻⁶² (|Φ̂| ≤ 1), whatever libm returned, so nothing rests on libm.

* Coefficients. Φ̂x is computed exactly and ĉ = fl(Φ̂x) rounded once. For n a power of two (from 512 cells) the
  integers 2⁶²Φ̂x are sums Σ_i x_i·Q[f·i mod n] over the tables, which :mod:`~mmopt.adaptive.fourier_exact` forms
  by number-theoretic transforms over the odd residues' group (modulo three or four primes, rebuilt by the CRT
  within its proven range); otherwise Φ̂ = Q/2⁶² is cut into three integer slices of < 2²¹, each slice times the
  counts a BLAS product of integers below 2²¹·N = 2⁵³, hence exact. Both give the same integers. The kept
  coefficients' L1 sensitivity Δ₁(k) = max_i Σ_{j<k} |Φ̂_ji| is bounded for every k at once from Φ̂'s tables
  (float column sums of |cos|, |sin| folded onto a quarter of the columns, widened and rounded upwards:
  :mod:`~mmopt.adaptive.fourier_bounds`, :func:`kept_sensitivity`; data-independent), and the rounding of ĉ
  is charged as for any correctly rounded A x: d_in(k) = Δ₁(k)·(1 + u(2N + 1)) + η
  (:func:`~mmopt.dense.exact_answers.charged_sensitivity`; u = 2⁻⁵³), so b_k = d_in(k)/ε₂ and the Laplace step
  is ε₂-DP given k. Cost, CPU s at n = 4,096 / 16,384 / 65,536 (one thread, measured): 0.04 / 0.10 / 0.31 by the
  transforms, 0.36 / 4.0 / 60 by the slices (O(n·support), still used for other n); the float64 rFFT it replaced,
  outside the proof: 1 ms. The data-independent Δ₁ table is O(n²/4) in O(n) memory, once per n: 0.04 / 0.26 /
  3.1 s (benchmarks/bench_efpa_tables.py; the column blocks of Φ̂ it replaced: 0.31 / 4.0 / 53 s, 48 MB).
* Score. t_k = ‖(Φ̂x)_{k:}‖₂ moves by ≤ C₂ = max_i ‖Φ̂e_i‖₂ (≈ 1, bounded upwards). The computed t̂_k is the
  square root of the exact sum of squares (Python integers), rounded to float64 and rooted: |t̂_k − t_k| ≤ 2u·t_k
  ≤ 2u·N·C₂ (‖Φ̂x‖₂ ≤ Σ_i x_i‖Φ̂e_i‖₂). The score −fl(t̂_k + d_k) (d_k = √(2k)·b_k, data-independent) rounds once
  more, by ≤ u(t̂_k + d_k). So |Δu| ≤ C₂(1 + (2N + 1)(3u + 2u²)) + 2u·max_k d_k =: Δ_u (≈ 1 + 2.9·10⁻⁶,
  :func:`score_sensitivity`; exact rational arithmetic, rounded upwards), the sensitivity the exponential
  mechanism is given, and the choice is ε₁-DP.

Total ε₁ + ε₂ = ε (the samplers' own scale rounding is OpenDP's margin). The inverse transform is
post-processing. The simulation path (``noise="numpy"``) computes the same values; for counts outside the domain
(fractional, or more than N records), which the release refuses, it falls back to float64 products.

Choices the paper leaves open (stated): ρ = 0.5; the real basis above (the paper perturbs complex DFT
coefficients; each complex coefficient is a cos/sin pair here, and an odd k keeps the cosine of the last
frequency only); Δ₁ bounded for Φ̂ itself, tight to its widening by 2(n + 2)u (at most min(1/√n + (k − 1)·√(2/n),
√k), the analytic bound); no rounding or clipping of x̂ (so E[x̂] = the rank-k approximation). Note that the noise
term of u(k) scales as 1/ε₂ while the mechanism weighs scores by ε₁: among the k whose tail is (near) zero, the
choice does not sharpen as ε grows (it depends on ρ/(1 − ρ) only).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from mmopt._base import validation as v
from mmopt.adaptive import fourier_bounds as fb
from mmopt.adaptive import fourier_exact as fe
from mmopt.adaptive._common import AdaptiveResult, check_epsilon, check_fraction, check_histogram, laplace_scale
from mmopt.adaptive._finish import finish, noise_source
from mmopt.dense import exact_answers as ea

__all__ = ["efpa", "fourier_coefficients", "fourier_matrix", "inverse_fourier", "kept_sensitivity",
           "score_sensitivity"]

_FIX = 62  # Φ̂'s entries are multiples of 2⁻⁶² of magnitude ≤ 1: Q = 2⁶²·Φ̂ is an integer below 2⁶²
_SLICE = 21  # Q's slices are integers below 2²¹: a slice times ≤ 2³² records sums to < 2⁵³, exactly in BLAS
_BLOCK = 1 << 21  # entries of Φ̂ built at a time (16 MB)
_FAST_FROM = 512  # powers of two from here: the transforms of mmopt.adaptive.fourier_exact (faster from ≈ 512)


@functools.lru_cache(maxsize=16)
def _tables(n: int) -> tuple[float, np.ndarray, np.ndarray]:
    """1/√n and the tables √(2/n)·cos(2πm/n), √(2/n)·sin(2πm/n), m < n, rounded to multiples of 2⁻⁶². Built once
    per n, so every use of Φ̂ (sensitivities, coefficients) reads the same floats."""
    scale = 2.0**_FIX
    m = 2.0 * math.pi * np.arange(n) / n
    r2 = math.sqrt(2.0 / n)
    cos, sin = (np.round(r2 * f(m) * scale) / scale for f in (np.cos, np.sin))
    r0 = round(scale / math.sqrt(n)) / scale
    # the slices' bound needs |Φ̂| ≤ 1 (√(2/n) ≤ 1 for n ≥ 2, and a rounded value could only pass 1 by 2⁻⁶²)
    cos, sin = np.clip(cos, -1.0, 1.0), np.clip(sin, -1.0, 1.0)
    cos.setflags(write=False)
    sin.setflags(write=False)
    return min(r0, 1.0), cos, sin


def _columns(n: int, cols: np.ndarray) -> np.ndarray:
    """Φ̂[:, cols], the n rows in frequency order (module docstring)."""
    r0, cos, sin = _tables(n)
    half = (n - 1) // 2  # frequencies with a cos/sin pair
    out = np.empty((n, cols.size))
    out[0] = r0
    idx = np.outer(np.arange(1, half + 1, dtype=np.int64), cols)  # f·i mod n: Φ̂ reads the tables only
    if n & (n - 1):
        idx %= n
    else:  # a power of two: the mask is the same residue at a fraction of the division's cost
        idx &= n - 1
    out[1:2 * half + 1:2] = cos[idx]
    out[2:2 * half + 2:2] = sin[idx]
    if n % 2 == 0 and n > 1:
        out[n - 1] = np.where(cols % 2 == 0, r0, -r0)
    return out


def _column_blocks(n: int, cols: np.ndarray):
    step = max(1, _BLOCK // n)
    return (cols[start:start + step] for start in range(0, cols.size, step))


def fourier_matrix(n: int) -> np.ndarray:
    """Φ̂ (n × n): the float64 basis the coefficients are computed in (rows by frequency, module docstring).

    >>> bool(np.allclose(fourier_matrix(5) @ fourier_matrix(5).T, np.eye(5)))
    True
    """
    n = v.check_int(n, name="n", caller="fourier_matrix", low=1)
    return _columns(n, np.arange(n, dtype=np.int64))


def _scaled(x: np.ndarray, fast: bool | None = None) -> list[int]:
    """Y = 2⁶²·Φ̂x exactly (Python integers) for whole counts of ≤ N records: for n a power of two up to 2²⁸ (from
    :data:`_FAST_FROM` cells, or whenever ``fast``) by :func:`~mmopt.adaptive.fourier_exact.multiplicative_sums`,
    else by the BLAS products of Q's slices (module docstring). Both give the same integers."""
    n = x.size
    if fast is None:
        fast = n >= _FAST_FROM
    if fast and 2 <= n <= 1 << fe.MAX_LOG2 and n & (n - 1) == 0:  # the transforms' lengths divide every p − 1
        r0, cos, sin = _tables(n)
        counts = x.astype(np.int64)
        Yc, Ys = fe.multiplicative_sums(counts, [(t * 2.0**_FIX).astype(np.int64) for t in (cos, sin)], n // 2,
                                        ea.MAX_RECORDS)  # rows f = 0 … n/2 − 1; the tables' |Q| ≤ 2⁶², exactly
        R0 = int(r0 * 2.0**_FIX)
        pairs = [y for f in range(1, n // 2) for y in (Yc[f], Ys[f])]
        return [R0 * int(counts.sum()), *pairs, R0 * (int(counts[::2].sum()) - int(counts[1::2].sum()))]
    z = np.zeros((3, n))
    for cols in _column_blocks(n, np.flatnonzero(x)):
        Q = _columns(n, cols) * 2.0**_FIX  # exact: integers |Q| ≤ 2⁶²
        hi = np.trunc(Q / 2.0**(2 * _SLICE))  # |hi| ≤ 2²⁰; each cut and remainder below is exact
        rest = Q - hi * 2.0**(2 * _SLICE)
        mid = np.trunc(rest / 2.0**_SLICE)
        xs = x[cols]
        for s, q in enumerate((rest - mid * 2.0**_SLICE, mid, hi)):
            z[s] += q @ xs  # every partial sum an integer below 2²¹·2³² = 2⁵³: exact in any order
    return [int(a) + (int(b) << _SLICE) + (int(c) << 2 * _SLICE) for a, b, c in z.T.tolist()]


def _exact(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ĉ, t̂) for whole counts of ≤ N records: ĉ = Φ̂x rounded once, t̂_{k−1} = ‖(Φ̂x)_{k:}‖₂ from its exact
    square, rounded to float64 and rooted (module docstring)."""
    n = x.size
    Y = _scaled(x)
    den = 1 << _FIX
    c = np.array([y / den for y in Y])  # Python's int / int is correctly rounded
    tail, acc, den2 = np.zeros(n), 0, 1 << 2 * _FIX
    for j in range(n - 1, 0, -1):
        acc += Y[j] * Y[j]
        tail[j - 1] = math.sqrt(acc / den2)
    return c, tail


def _coefficients(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """(ĉ, t̂, exact): :func:`_exact` for a histogram of the domain, else float64 products (simulation only)."""
    if ea.histogram_problem(x) is None:
        return (*_exact(x), True)
    n = x.size
    c = np.zeros(n)
    for cols in _column_blocks(n, np.arange(n, dtype=np.int64)):
        c += _columns(n, cols) @ x[cols]
    sq = np.concatenate([np.cumsum((c * c)[::-1])[::-1][1:], [0.0]])
    return c, np.sqrt(np.maximum(sq, 0.0)), False


def fourier_coefficients(x: np.ndarray) -> np.ndarray:
    """ĉ = Φ̂x: correctly rounded for whole counts of at most 2³² records (module docstring), float64 otherwise.

    Examples
    --------
    >>> x = np.array([3.0, 1.0, 4.0, 1.0, 5.0])
    >>> bool(np.isclose(np.linalg.norm(fourier_coefficients(x)), np.linalg.norm(x)))
    True
    """
    return _coefficients(np.asarray(x, dtype=float))[0]


def inverse_fourier(c: np.ndarray) -> np.ndarray:
    """x = Φᵀc, the inverse of :func:`fourier_coefficients` (post-processing: float64 inverse FFT)."""
    n = c.size
    F = np.zeros(n // 2 + 1, dtype=complex)
    F[0] = c[0] * math.sqrt(n)
    half = (n - 1) // 2
    r = math.sqrt(n / 2.0)
    F[1:half + 1] = r * (c[1:2 * half + 1:2] - 1j * c[2:2 * half + 2:2])
    if n % 2 == 0 and n > 1:
        F[n // 2] = c[n - 1] * math.sqrt(n)
    return np.fft.irfft(F, n)


@functools.lru_cache(maxsize=16)
def _column_bounds(n: int) -> tuple[np.ndarray, float]:
    """(Δ₁(k) for k = 1..n, C₂): upper bounds on max_i Σ_{j<k} |Φ̂_ji| and max_i ‖Φ̂e_i‖₂, from the tables Φ̂ reads
    (:func:`~mmopt.adaptive.fourier_bounds.column_bounds`: folded column sums, widened; O(n) memory)."""
    return fb.column_bounds(*_tables(n))


def kept_sensitivity(k: np.ndarray | int, n: int) -> np.ndarray:
    """A proven upper bound on Δ₁(k) = max_i Σ_{j<k} |Φ̂_ji|, the L1 sensitivity of the k lowest of n computed
    coefficients, before the rounding charge (module docstring); k ≥ 1.

    >>> 0.5 <= float(kept_sensitivity(1, 4)) < 0.5 + 1e-15  # the constant row: 1/√4
    True
    """
    caller = "kept_sensitivity"
    n = v.check_int(n, name="n", caller=caller, low=1)
    k = np.asarray(k, dtype=float)
    if k.size == 0 or not np.all(np.isfinite(k)) or np.any(k < 1) or np.any(k > n) or np.any(k != np.round(k)):
        raise ValueError(f"The 'k' parameter of {caller} must hold whole numbers in [1, n = {n}] (coefficients kept; "
                         f"0 gave a negative sensitivity). Got {k.tolist()!r:.60} instead.")
    return _column_bounds(n)[0][k.astype(np.int64) - 1]


def score_sensitivity(n: int, noise_terms: np.ndarray, records: int = ea.MAX_RECORDS) -> float:
    """Δ_u ≥ |u_x(k) − u_x'(k)| for every k, the computed scores −fl(t̂_k + d_k) of neighbours of at most
    ``records`` records, with d = ``noise_terms`` (the √(2k)·b_k as computed): C₂(1 + (2N + 1)(3u + 2u²)) +
    2u·max d, rounded upwards (module docstring).

    >>> 1.0 < score_sensitivity(64, np.ones(64)) < 1.00001
    True
    """
    u = Fraction(ea.UNIT_ROUNDOFF)
    c2 = Fraction(_column_bounds(v.check_int(n, name="n", caller="score_sensitivity", low=1))[1])
    d = Fraction(float(np.max(noise_terms)))
    return ea.float_up(c2 * (1 + (2 * records + 1) * (3 * u + 2 * u * u)) + 2 * u * d)


def _plan(n: int, eps2: float) -> tuple[np.ndarray, ...]:
    """(Δ₁(k), d_in(k), b_k = d_in(k)/ε₂, d_k = √(2k)·b_k) for k = 1..n: data-independent. d_in charges the
    rounding of ĉ from n and N alone (n = 1: ĉ = 1.0·x is exact)."""
    ks = np.arange(1, n + 1)
    delta1 = kept_sensitivity(ks, n)
    d_in = np.array([ea.charged_sensitivity(float(d), "l1", int(k), n, exact=n == 1)
                     for k, d in zip(ks, delta1, strict=True)])
    b_all = d_in / eps2
    return delta1, d_in, b_all, np.sqrt(2.0 * ks) * b_all


def efpa(x, epsilon: float, *, ratio: float = 0.5, noise="numpy", rng=None) -> AdaptiveResult:
    """Run EFPA on a 1-D histogram (module docstring: algorithm, privacy argument, open choices).

    Parameters
    ----------
    x : array_like, 1-D (n,)
        Counts; with ``noise="opendp"`` whole counts of at most 2³² records (the proof's domain).
    epsilon : float
    ratio : float in (0, 1), default 0.5
        ρ, the share of ε spent choosing k.
    noise : {"numpy", "opendp"} or Noise, default "numpy"
        numpy (seeded; simulation) or OpenDP's vetted samplers (release; ``rng`` must be None).
    rng : numpy.random.Generator, int or None

    Returns
    -------
    AdaptiveResult
        ``budget = {"select_k": ε₁, "coefficients": ε₂}``; ``details``: "k", "noise_scale" (b_k = d_in/ε₂),
        "sensitivity" (Δ₁(k)), "d_in" (Δ₁(k) with the rounding charge), "score_sensitivity" (Δ_u).

    Examples
    --------
    >>> x = 10 + 5 * np.cos(2 * np.pi * np.arange(64) / 64)
    >>> r = efpa(x, 1e6, rng=0)
    >>> bool(np.allclose(r.estimate, x, atol=1e-3))
    True
    """
    caller = "efpa"
    X = check_histogram(x, caller)
    if X.ndim != 1:
        raise ValueError(f"The 'x' parameter of {caller} must be a 1-D histogram. Got shape {X.shape}.")
    eps = check_epsilon(epsilon, caller)
    rho = check_fraction(ratio, "ratio", caller)
    src = noise_source(noise, rng, caller, data=X)  # on the release path, the proof's domain, before any draw
    n = X.size
    # one cell: k = 1 is the only choice, which reads no data, so the coefficient takes all of ε (ρ·ε went unused:
    # twice the noise scale, a helper's probe)
    eps1, eps2 = (0.0, eps) if n == 1 else (rho * eps, eps - rho * eps)
    laplace_scale(2.0 * math.sqrt(n), eps2, "the Fourier coefficients", caller)  # d_in(k) < 2√n: refuse overflow
    delta1, d_in, b_all, terms = _plan(n, eps2)
    c, tail, _ = _coefficients(X)
    scores = -(tail + terms)
    du = score_sensitivity(n, terms)
    k = 1 if n == 1 else 1 + int(src.exponential(scores, eps1, du))
    b = float(b_all[k - 1])
    kept = np.zeros(n)
    kept[:k] = src.add_laplace(c[:k], b)
    details = {"k": k, "noise_scale": b, "sensitivity": float(delta1[k - 1]), "d_in": float(d_in[k - 1]),
               "score_sensitivity": du}
    return finish("efpa", inverse_fourier(kept), eps, {"select_k": eps1, "coefficients": eps2}, details, src)
