"""A Toeplitz release's strategy answers C x, correctly rounded in O(n log n): exact integer convolutions.

Notation: see README. A release's privacy proof covers the *computed* answers ŷ, which OpenDP's measurement is
given with d_in ≥ ‖ŷ(x) − ŷ(x′)‖ for neighbours x, x′ (:mod:`mmopt.dense.exact_answers`, where the dense strategy's
A x is correctly rounded by Dekker's split and ``math.fsum``, and the rounding is charged in d_in). A Toeplitz
strategy's C x used to be a float64 FFT, whose rounding no proof bounded: a review found neighbours' answers apart by
10⁻⁷ of Δ more than d_in allowed (n = 4,096, ~2·10⁹ records, 6 of 40 datasets). The dense route is O(n²).

Here C x (y_t = d_t Σ_{s≤t} c_{t−s} x_s, d an optional row scale) is computed *exactly* and rounded once:

* x holds whole counts of a histogram of at most N = 2³² records (:func:`mmopt.dense.exact_answers.check_histogram`);
* c is cut into slices c = 2^{σ₁} q₁ + 2^{σ₂} q₂ + r with q_j integer vectors of |q_j| ≤ 2⁵⁴: the 54 bits below
  the largest entry, then the next 54 (the cut is exact: every remainder is a float64). Two slices hold every bit
  of the square root's and equalized strategies' coefficients; a BLT's geometric ones reach down to subnormals (20
  slices at 2²⁰ steps), so what is left, r (|r| < 2⁻¹⁰⁷·max|c|), is charged instead (:func:`truncation_charge`);
* each integer convolution z = q_j * x (|z_t| ≤ 2⁵⁴·N = 2⁸⁶) is computed modulo three NTT primes (residues
  below 2³¹, their products fitting uint64 and int64), and rebuilt by the Chinese remainder theorem (Garner's
  mixed radix) in Python integers: below P/2 ≈ 2⁸⁹·⁵ it is exact;
* ŷ_t = d_t Σ_j 2^{σ_j} z_{j,t}, a rational with a power-of-two denominator, is rounded once by Python's correctly
  rounded integer division.

So ŷ is D·Q x correctly rounded (Q = T(c − r)): |ŷ_t − (DQx)_t| ≤ u·|(DQx)_t| (u = 2⁻⁵³; half a subnormal's spacing
below 2⁻¹⁰²²), the dense path's bound, and the dense charge applies
(:func:`mmopt.dense.exact_answers.charged_sensitivity`, exact=False), plus r's: ‖D T(r) x‖_p ≤ max|r|·N·‖d‖_p for
x and for x′, and u·N·Δ_p(D T(r)) ≤ the same again in the dense charge's ‖DQx‖ ≤ N·(Δ_p(DC) + Δ_p(D T(r))):
3·N·max|r|·‖d‖_p in all (:func:`truncation_charge`, 0 when two slices hold c). Nothing depends on the data but the
answers themselves. Cost: 3·(1 + 2·slices) number-theoretic transforms of length L ≥ 2n − 1 and n Python-integer
roundings (benchmarks/bench_exact_product.py).
"""

from __future__ import annotations

import math

import numpy as np

from mmopt.dense.exact_answers import MAX_RECORDS, _abs_max, histogram_problem

__all__ = ["MAX_N", "MAX_SLICES", "causal_exact", "garner", "ntt_convolve", "ntt_forward", "ntt_inverse", "padded",
           "truncation_charge"]

#: (p, g): primes p < 2³¹ with p − 1 divisible by a large power of two, g a primitive root modulo p
PRIMES = ((2013265921, 31), (469762049, 3), (1811939329, 13))
MAX_N = 2**24  # the Toeplitz strategies' own limit (mmopt.toeplitz.strategies.MAX_N): L = 2²⁵ divides every p − 1
_SLICE_BITS = 54  # |q_j| ≤ 2⁵⁴, |z| ≤ 2⁵⁴·2³² = 2⁸⁶ < P/2
MAX_SLICES = 2  # 108 bits below c's largest entry; the rest is charged (truncation_charge): a BLT's geometric
# coefficients took 20 slices at 2²⁰ steps, 132 CPU s against 15 s for two
_MAX_MAGNITUDE = 2.0**900  # c beyond it is refused (ldexp's scaling stays in range)


def causal_exact(column, x, row_scale=None, *, caller: str = "causal_exact") -> np.ndarray:
    """y_t = d_t Σ_{s≤t} c_{t−s} x_s for whole counts x (each ≤ 2³², Σx ≤ 2³² — the caller checks the histogram),
    every entry the correctly rounded value of its exact sum with c's first :data:`MAX_SLICES` slices (all of c
    unless its entries span more than 108 bits; module docstring, :func:`truncation_charge`).

    Parameters
    ----------
    column : array_like (n,)
        c, the first column of the lower-triangular Toeplitz C.
    x : array_like (n,)
        Non-negative whole counts.
    row_scale : array_like (n,), optional
        d: row t of C multiplied by d_t.

    >>> from fractions import Fraction
    >>> c, x = np.array([1.0, 0.1, -1 / 3]), np.array([3.0, 2.0**31, 7.0])
    >>> y = causal_exact(c, x)
    >>> exact = sum(Fraction(c[2 - s]) * Fraction(x[s]) for s in range(3))
    >>> bool(y[2] == float(exact)), bool(y[1] == float(Fraction(0.1) * 3 + 2**31))
    (True, True)
    """
    c = np.asarray(column, dtype=float)
    n = c.size
    x = np.asarray(x, dtype=float)
    if x.shape != (n,):
        raise ValueError(f"The 'x' parameter of {caller} must have {n} entries (the column's). Got shape {x.shape}.")
    if histogram_problem(x) is not None:  # outside it the CRT's range argument fails
        raise ValueError(f"The 'x' parameter of {caller} must be a histogram: whole counts ≥ 0, at most "
                         f"{MAX_RECORDS:,} records in all. Got other values (not printed: figures of the data).")
    if n > MAX_N:
        raise ValueError(f"{caller}: exact answers are computed up to {MAX_N:,} steps (the NTT primes' length). Got "
                         f"n = {n:,}. Release the stream in windows of at most that many steps.")
    top = _abs_max(c)  # NaN stays NaN: refused below
    if not (np.all(np.isfinite(c)) and top < _MAX_MAGNITUDE):
        raise ValueError(f"{caller}: the strategy's column must be finite and below 2^900 in magnitude for its "
                         "answers to be computed exactly. Rescale the strategy (C and aC have the same error).")
    if row_scale is None:
        d_num, d_den = [1] * n, [1] * n
    else:
        d = np.asarray(row_scale, dtype=float)
        if d.shape != (n,) or not np.all(np.isfinite(d)):
            raise ValueError(f"The 'row_scale' parameter of {caller} must be {n} finite numbers.")
        d_num, d_den = zip(*(value.as_integer_ratio() for value in d.tolist()), strict=True)
    if top == 0.0:
        return np.zeros(n)
    slices, _ = _slices(c, top)
    z = ntt_convolve([q for _, q in slices], x.astype(np.int64), n)
    total, shift = z[0], slices[0][0]  # Σ_j z_j 2^{σ_j − σ_last}, coarse slice first
    for (sigma, _), zj in zip(slices[1:], z[1:], strict=True):
        total = [(t << (shift - sigma)) + zt for t, zt in zip(total, zj, strict=True)]
        shift = sigma
    # ŷ_t = d_t·total_t·2^shift, one correctly rounded division (CPython's int / int is correctly rounded)
    up, down = (1 << shift, 1) if shift >= 0 else (1, 1 << -shift)
    answers = [(t * num * up) / (den * down) for t, num, den in zip(total, d_num, d_den, strict=True)]
    return np.array(answers, dtype=float)


def truncation_charge(column, row_scale, norm: str, records: int = MAX_RECORDS) -> float:
    """What d_in adds for the slices :func:`causal_exact` leaves out (c's bits past the first 108 below its
    largest entry): 3·N·max|r|·‖d‖_p, r the remainder (module docstring), rounded upwards; 0.0 when none is left.

    >>> truncation_charge(np.array([1.0, 0.5]), None, "l1")
    0.0
    >>> bool(0 < truncation_charge(np.array([1.0, 2.0**-120]), None, "l2") < 1e-25)
    True
    """
    c = np.asarray(column, dtype=float)
    top = _abs_max(c)
    if top == 0.0:
        return 0.0
    r_max = float(np.max(np.abs(_slices(c, top)[1])))
    if r_max == 0.0:
        return 0.0
    d = np.ones(c.size) if row_scale is None else np.abs(np.asarray(row_scale, dtype=float))
    d_norm = float(d.sum()) if norm == "l1" else math.sqrt(float(d @ d))
    # the sum's rounding (≤ n·u relative) and the products' are inside the factor (1 + 10⁻⁶)
    return math.nextafter(3.0 * records * r_max * d_norm * (1.0 + 1e-6), math.inf)


def _slices(c: np.ndarray, top: float):
    """([(σ_j, q_j)], r): c = Σ_j 2^{σ_j} q_j + r exactly, q_j int64 of |q_j| ≤ 2⁵⁴, σ_j decreasing by 54, at most
    :data:`MAX_SLICES` slices (r = 0 when they hold every bit)."""
    sigma = math.frexp(top)[1] - _SLICE_BITS  # |c| < 2^(σ + 54)
    rest, out = c.copy(), []
    while np.any(rest) and len(out) < MAX_SLICES:
        q = np.round(np.ldexp(rest, -sigma))  # exact scaling by a power of two (no overflow: |rest| < 2^(σ+54))
        rest = rest - np.ldexp(q, sigma)  # exact: a multiple of ulp(c_t) and below 2^(σ−1)
        out.append((sigma, q.astype(np.int64)))
        sigma -= _SLICE_BITS
    return out, rest


def ntt_convolve(kernels: list, b: np.ndarray, length: int | None = None) -> list[list[int]]:
    """The linear convolutions of each int64 vector in ``kernels`` with the int64 vector b (their first ``length``
    entries) as Python integers, exact while every |(a * b)_t| < P/2 (P = the product of :data:`PRIMES`,
    ≈ 2⁹⁰·⁵): NTTs modulo each prime (b's transformed once), then Garner's CRT.

    >>> ntt_convolve([np.array([1, -2, 3])], np.array([2**40, 5]))
    [[1099511627776, -2199023255547, 3298534883318, 15]]
    """
    n_out = max(a.size for a in kernels) + b.size - 1
    length = n_out if length is None else length
    L = 1 << max(1, (n_out - 1).bit_length())
    residues = [[] for _ in kernels]
    for p, g in PRIMES:
        B = ntt_forward(padded(b % p, L), p, g)
        for a, out in zip(kernels, residues, strict=True):
            A = ntt_forward(padded(a % p, L), p, g)
            A *= B  # products of residues < 2^31.5: below 2⁶³
            A %= np.uint64(p)
            out.append(ntt_inverse(A, p, g)[:length])
    return [garner(r, [p for p, _ in PRIMES]) for r in residues]


def padded(residues: np.ndarray, L: int) -> np.ndarray:
    """Residues in [0, p) as a uint64 vector of length L, zero-padded (the transforms' input)."""
    out = np.zeros(L, np.uint64)
    out[:residues.size] = residues
    return out


def _twiddles(p: int, g: int, L: int, inverse: bool) -> np.ndarray:
    """w⁰ … w^{L/2 − 1} (uint64) for w the primitive L-th root of unity g^{(p−1)/L} modulo p (its inverse if
    ``inverse``), by doubling; stage h's roots w_{2h}^j are every (L/2h)-th of them."""
    w = pow(g, (p - 1) // L, p)
    if inverse:
        w = pow(w, p - 2, p)
    tw = np.ones(1, np.uint64)
    while tw.size < L // 2:
        tw = np.concatenate([tw, tw * np.uint64(pow(w, tw.size, p)) % np.uint64(p)])
    return tw


def _check_stack(a: np.ndarray, caller: str) -> None:
    """The transforms work in place on a.reshape(−1, 2h): a view for any 1-D a, but a copy for a stack that is not
    C-contiguous (Fortran-ordered, rows sliced), whose stages were then lost: a came back half transformed."""
    if a.ndim > 1 and not a.flags.c_contiguous:
        raise ValueError(f"The 'a' parameter of {caller} must be C-contiguous when it is a stack of transforms "
                         f"(np.ascontiguousarray). Got a non-contiguous array of shape {a.shape} instead.")


def ntt_forward(a: np.ndarray, p: int, g: int) -> np.ndarray:
    """The number-theoretic transform modulo p of a (uint64 residues, length a power of two ≥ 2), in bit-reversed
    order: Gentleman–Sande radix-2 (decimation in frequency), in place. A pointwise product of two such transforms
    is the transform of the cyclic convolution in the same order, which :func:`ntt_inverse` takes back, so no
    permutation is ever made. Every product of two residues fits: p < 2^31.5 (these primes and
    :mod:`mmopt.toeplitz.weighted_exact`'s); sums are reduced by a subtraction and an unsigned minimum (a wrapped
    difference is larger than the right value), cheaper than a %. A C-contiguous 2-D ``a`` is a stack of
    transforms, one per row (every block of a stage lies inside one row)."""
    _check_stack(a, "ntt_forward")
    L, P = a.shape[-1], np.uint64(p)
    tw = _twiddles(p, g, L, inverse=False)
    t, s = np.empty(a.size // 2, np.uint64), np.empty(a.size // 2, np.uint64)
    h = L // 2
    while h >= 1:
        blocks = a.reshape(-1, 2 * h)
        lo, hi, tt, ss = blocks[:, :h], blocks[:, h:], t.reshape(-1, h), s.reshape(-1, h)
        np.subtract(lo, hi, out=tt)  # lo − hi, wrapped past 0: min(it, it + p) is its residue
        np.add(tt, P, out=ss)
        np.minimum(tt, ss, out=tt)
        lo += hi  # < 2p: min(it, it − p) (wrapped when below p)
        np.subtract(lo, P, out=ss)
        np.minimum(lo, ss, out=lo)
        np.multiply(tt, np.ascontiguousarray(tw[::L // (2 * h)]), out=hi)
        np.remainder(hi, P, out=hi)
        h //= 2
    return a


def ntt_inverse(a: np.ndarray, p: int, g: int) -> np.ndarray:
    """The inverse of :func:`ntt_forward` (bit-reversed order in, natural order out, divided by the length):
    Cooley–Tukey radix-2 (decimation in time), in place (row by row for a 2-D ``a``); returned as int64 residues."""
    _check_stack(a, "ntt_inverse")
    L, P = a.shape[-1], np.uint64(p)
    tw = _twiddles(p, g, L, inverse=True)
    t, s = np.empty(a.size // 2, np.uint64), np.empty(a.size // 2, np.uint64)
    h = 1
    while h < L:
        blocks = a.reshape(-1, 2 * h)
        lo, hi, tt, ss = blocks[:, :h], blocks[:, h:], t.reshape(-1, h), s.reshape(-1, h)
        np.multiply(hi, np.ascontiguousarray(tw[::L // (2 * h)]), out=tt)
        np.remainder(tt, P, out=tt)
        np.subtract(lo, tt, out=hi)
        np.add(hi, P, out=ss)
        np.minimum(hi, ss, out=hi)
        lo += tt
        np.subtract(lo, P, out=ss)
        np.minimum(lo, ss, out=lo)
        h *= 2
    a *= np.uint64(pow(L, p - 2, p))
    a %= P
    return a.astype(np.int64)


def garner(residues: list[np.ndarray], primes) -> list[int]:
    """The integers z with |z| < P/2 (P = the product of ``primes``) from their residues modulo each: mixed radix
    z = v₁ + p₁(v₂ + p₂(v₃ + …)), every digit in int64 modular arithmetic (residues below 2^31.5, so a product of
    two fits), the sum in Python integers."""
    digits = [np.asarray(residues[0], np.int64)]
    for i, p in enumerate(primes[1:], start=1):
        # v_i = (r_i − (v₁ + p₁v₂ + … + p₁…p_{i−2}v_{i−1})) / (p₁…p_{i−1}) mod p_i, the bracket by Horner mod p_i
        acc = digits[-1] % p
        for j in range(i - 2, -1, -1):
            acc = (acc * (primes[j] % p) + digits[j]) % p
        inverse = pow(math.prod(primes[:i]) % p, p - 2, p)
        digits.append((np.asarray(residues[i], np.int64) - acc) % p * inverse % p)
    P = math.prod(primes)
    half = P // 2
    out = []
    for column in zip(*(d.tolist() for d in digits), strict=True):
        z = 0
        for value, p in zip(column[::-1], primes[::-1], strict=True):
            z = z * p + value
        out.append(z - P if z > half else z)
    return out
