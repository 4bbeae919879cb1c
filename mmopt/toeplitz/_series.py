"""Power-series arithmetic behind the Toeplitz layer: a lower-triangular Toeplitz matrix is the series of its
first column, products are truncated convolutions, inverses are series reciprocals.

Notation: a vector ``a`` of length n stands for a(x) = Σ_k a_k x^k mod x^n; the n×n lower-triangular Toeplitz
matrix T(a) has T(a)_{ij} = a_{i−j}, and T(a) T(b) = T(a·b mod x^n). Everything here is O(n log n) (FFT) or
O(n·d) (first-order recursions), never O(n²) in memory.
"""

from __future__ import annotations

import numpy as np
from scipy import fft as sfft
from scipy import signal

_EPS = np.finfo(float).eps


def convolve(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """(a·b mod x^n) by FFT; exact up to round-off of order 1e-16·‖a‖‖b‖ per entry."""
    size = sfft.next_fast_len(len(a) + len(b) - 1, real=True)
    out = sfft.irfft(sfft.rfft(a, size) * sfft.rfft(b, size), size)[:n]
    return np.pad(out, (0, max(0, n - len(out))))


def correlate_tail(s: np.ndarray, a: np.ndarray, k: int) -> np.ndarray:
    """out_j = Σ_{m ≥ j} s_{m−j} a_m for j < k (the adjoint of b ↦ T(s) b restricted to the first k entries).

    ``s`` and ``a`` have the same length n. O(n·k) directly for small k, O(n log n) by FFT otherwise.
    """
    n = len(a)
    if k <= 32:
        return np.array([s[:n - j] @ a[j:] for j in range(k)])
    full = convolve(s, a[::-1], n)  # full[p] = Σ_i s_i a_{n−1−p+i}; j = n−1−p
    return full[::-1][:k]


def convolution_round_off(s: np.ndarray, a: np.ndarray) -> float:
    """A bound on every entry's absolute round-off in an FFT convolution or correlation of ``s`` and ``a``:
    u·log₂(2n)·‖s‖₂‖a‖₂ (Higham, *Accuracy and Stability*, §24.1), taken with the constant 32."""
    return 32 * _EPS * float(np.log2(2 * len(a))) * float(np.linalg.norm(s)) * float(np.linalg.norm(a))


def correlate_tail_accurate(s: np.ndarray, a: np.ndarray, k: int, *, caller: str,
                            scale: float | None = None) -> tuple[np.ndarray, float]:
    """(:func:`correlate_tail`, err): the sums and a bound err on every entry's absolute error, at most 10⁻⁹ of
    ``scale`` (default: the largest |sum|), for what a sensitivity reads (column norms, entries of CᵀC).

    A short ``s`` (≤ 64 non-zero leading entries: a banded C) is summed directly, O(k·64). Otherwise by FFT, whose
    round-off on each entry is at most :func:`convolution_round_off` (as :func:`mmopt.toeplitz.error.decoder_rows`
    allows for); when that is above 10⁻⁹ of the scale the k sums are
    taken directly instead (O(n·k); refused past 10⁹ operations). Row scales spanning 10⁸ made the FFT's largest
    column norm 2 % low at n = 33 (a helper's probe), and the noise with it. A direct sum of w non-negative terms
    carries at most w·u of its value (err then 2w·u·max).

    Raises ValueError naming ``caller`` when the direct sums would cost more than 10⁹ operations.

    >>> c2 = np.array([1e-8, 0.0, 1e8]) ** 2; y = np.array([1e16, 1.0, 1e-16])
    >>> s, a = np.pad(c2, (0, 30)), np.pad(y, (0, 30), constant_values=1.0)   # Σ_m s_m a_m = 1 + 0 + 1
    >>> out, err = correlate_tail_accurate(s, a, 33, caller="f")
    >>> float(out[0]), float(out[1]), bool(err < 1e-14 * out.max()), bool(correlate_tail(s, a, 33)[0] < 0)
    (2.0, 1e+16, True, True)
    """
    n = len(a)
    nonzero = np.flatnonzero(s)
    width = int(nonzero[-1]) + 1 if nonzero.size else 1
    if k > 32 and width > 64:
        out = correlate_tail(s, a, k)
        bound = convolution_round_off(s, a)
        reference = float(np.max(np.abs(out))) if scale is None else scale
        if bound <= 1e-9 * reference:
            return out, bound
        if float(k) * n > 1e9:
            raise ValueError(f"{caller}: the FFT behind this strategy's sensitivity is not accurate enough to trust "
                             f"(its round-off bound {bound:.3g} against sums of {reference:.3g}), and summing its "
                             f"{k:,} entries directly would cost more than 10⁹ operations; its coefficients or row "
                             "scales span too many orders of magnitude. Use the strategy without row scales, or "
                             "rescale its coefficients.")
        width = n
    out, magnitude = np.zeros(k), np.zeros(k)
    for m in range(min(width, n)):  # out_j += s_m a_{j+m}: one pass per coefficient, Σ|s_m a_{j+m}| beside it
        length = min(k, n - m)
        out[:length] += s[m] * a[m:m + length]
        magnitude[:length] += abs(s[m]) * np.abs(a[m:m + length])
    return out, 2 * width * _EPS * float(magnitude.max(initial=0.0))


def reciprocal(c: np.ndarray, n: int) -> np.ndarray:
    """g = 1/c mod x^n (c_0 ≠ 0): the first column of T(c)⁻¹.

    A short c (a banded matrix, ≤ 64 coefficients) uses the recursion c·g = 1 (scipy.signal.lfilter,
    O(n·len(c))); a long one Newton's iteration g ← g(2 − c g), doubling the correct length each step
    (O(n log n) in all).
    """
    if len(c) <= 64:
        impulse = np.zeros(n)
        impulse[0] = 1.0
        return signal.lfilter([1.0], c, impulse)
    g = np.array([1.0 / c[0]])
    while len(g) < n:
        m = min(2 * len(g), n)
        cg = convolve(c[:m], g, m)
        cg[0] -= 2.0
        g = -convolve(g, cg, m)
    return g[:n]


def first_order_sum(theta: np.ndarray, omega: np.ndarray, n: int, *, head: float = 1.0) -> np.ndarray:
    """The coefficients of head + Σ_i θ_i x/(1 − ω_i x) mod x^n: entry k ≥ 1 is Σ_i θ_i ω_i^{k−1}.

    One first-order recursion per term (lfilter), which is stable for |ω_i| < 1 and exact for any ω.
    Complex conjugate pairs (θ, ω) give a real sum; the imaginary round-off is dropped.
    """
    out = np.zeros(n, dtype=complex if np.iscomplexobj(omega) or np.iscomplexobj(theta) else float)
    out[0] = head
    if n > 1:
        impulse = np.zeros(n - 1)
        impulse[0] = 1.0
        for t, w in zip(theta, omega, strict=True):
            out[1:] += t * signal.lfilter([1.0], [1.0, -w], impulse.astype(out.dtype))
    return out.real if np.iscomplexobj(out) else out


#: The largest condition number of M's eigenvectors :func:`blt_inverse` accepts: its θ̂ then carry relative errors
#: below ~10⁻⁸ (cond·eps); optimiser-produced BLTs (n = 64–1,024) measured ≤ 9.1, 2,000 random ones ≤ 6.6.
MAX_POLE_CONDITION = 1e8


def blt_inverse(theta: np.ndarray, omega: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(θ̂, ω̂) with 1/(1 + Σ θ_i x/(1 − ω_i x)) = 1 − Σ θ̂_i x/(1 − ω̂_i x): the inverse of a BLT is a BLT.

    In state-space form C(x) = 1 + x θᵀ(I − xΩ)⁻¹𝟙 with Ω = diag(ω); its inverse is 1 − x θᵀ(I − xM)⁻¹𝟙
    with M = Ω − 𝟙θᵀ (a rank-one update, Dvijotham et al. 2024, §3). Diagonalising M = VΛV⁻¹ gives
    ω̂ = eig(M), θ̂ = (θᵀV) ∘ (V⁻¹𝟙). For θ > 0 and distinct ω the eigenvalues are real (they interlace ω).
    """
    M = np.diag(omega) - np.outer(np.ones(len(omega)), theta)
    lam, V = np.linalg.eig(M)
    cond = float(np.linalg.cond(V))
    if not cond <= MAX_POLE_CONDITION:  # a (nearly) repeated eigenvalue of M: V is singular, θ̂ ~ 10¹⁴ cancels, and
        # the streamed noise, the decoder and the error were silently off by 3 %, 73 % and 4× (no Jordan form here)
        raise ValueError(f"The BLT strategy (theta={np.round(theta, 6).tolist()}, omega={np.round(omega, 6).tolist()}) "
                         f"has an inverse with (nearly) repeated poles: its eigenvectors' condition number is "
                         f"{cond:.2g}, so its coefficients would carry relative errors up to {cond * _EPS:.1g}. "
                         "Perturb theta or omega slightly (e.g. 1e-6 relative), or use another strategy.")
    coef = (theta @ V) * np.linalg.solve(V, np.ones(len(omega)))
    if np.all(np.abs(lam.imag) <= 1e-12 * np.maximum(1.0, np.abs(lam.real))):
        lam, coef = lam.real, coef.real
    return coef, lam
