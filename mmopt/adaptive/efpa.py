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

Privacy (neighbours x' = x ± e_i). Step 1: only the tail norm depends on x and
|‖P c(x ± e_i)‖ − ‖P c(x)‖| ≤ ‖P Φ e_i‖ ≤ ‖e_i‖ = 1 (P the tail projection, Φ orthonormal), so Δu = 1 and the
choice is ε₁-DP. Step 2: the L1 sensitivity of the k kept coefficients is Δ₁(k) = max_i Σ_{j<k} |φ_j(i)|, bounded
here by min(1/√n + (k − 1)·√(2/n), √k) — the first from |φ_j(i)| ≤ √(2/n), the second by Cauchy–Schwarz since
Σ_j φ_j(i)² = 1 — a proven upper bound, so the Laplace step is ε₂-DP given k. Total ε₁ + ε₂ = ε. The inverse
transform is post-processing.

Floating point (outside the proof, as for every floating-point mechanism; Mironov, CCS 2012): c is computed in
float64, and its rounding is relative to ‖x‖, so the computed coefficients of two neighbours can differ by more than
Δ₁(k), which is tight at k = 2 (cell 0). Measured (a helper's audit, n = 1,000, ~5·10⁸ records): 2.1·10⁻⁹ of ε₂
beyond it, more than the release's 2⁻³⁰ scale allowance covers. A proven allowance needs the coefficients in exact
(fixed-point, integer-noise) arithmetic: not done here.

Choices the paper leaves open (stated): ρ = 0.5; the real basis above (the paper perturbs complex DFT
coefficients; each complex coefficient is a cos/sin pair here, and an odd k keeps the cosine of the last
frequency only); the Δ₁ bound above; no rounding or clipping of x̂ (so E[x̂] = the rank-k approximation).
Note that the noise term of u(k) scales as 1/ε₂ while the mechanism weighs scores by ε₁: among the k whose tail
is (near) zero, the choice does not sharpen as ε grows (it depends on ρ/(1 − ρ) only).
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import validation as v
from mmopt.adaptive._common import AdaptiveResult, check_epsilon, check_fraction, check_histogram, laplace_scale
from mmopt.adaptive._finish import finish, noise_source

__all__ = ["efpa", "fourier_coefficients", "inverse_fourier", "kept_sensitivity"]


def fourier_coefficients(x: np.ndarray) -> np.ndarray:
    """c = Φx in the real orthonormal basis of the module docstring (O(n log n) through the real FFT).

    Examples
    --------
    >>> x = np.array([3.0, 1.0, 4.0, 1.0, 5.0])
    >>> bool(np.isclose(np.linalg.norm(fourier_coefficients(x)), np.linalg.norm(x)))
    True
    """
    n = x.size
    F = np.fft.rfft(x)
    c = np.empty(n)
    c[0] = F[0].real / math.sqrt(n)
    half = (n - 1) // 2  # frequencies with a cos/sin pair
    r2 = math.sqrt(2.0 / n)
    c[1:2 * half + 1:2] = r2 * F[1:half + 1].real
    c[2:2 * half + 2:2] = -r2 * F[1:half + 1].imag
    if n % 2 == 0 and n > 1:
        c[n - 1] = F[n // 2].real / math.sqrt(n)
    return c


def inverse_fourier(c: np.ndarray) -> np.ndarray:
    """x = Φᵀc, the inverse of :func:`fourier_coefficients`."""
    n = c.size
    F = np.zeros(n // 2 + 1, dtype=complex)
    F[0] = c[0] * math.sqrt(n)
    half = (n - 1) // 2
    r = math.sqrt(n / 2.0)
    F[1:half + 1] = r * (c[1:2 * half + 1:2] - 1j * c[2:2 * half + 2:2])
    if n % 2 == 0 and n > 1:
        F[n // 2] = c[n - 1] * math.sqrt(n)
    return np.fft.irfft(F, n)


def kept_sensitivity(k: np.ndarray | int, n: int) -> np.ndarray:
    """The proven bound on Δ₁(k) = max_i Σ_{j<k} |φ_j(i)| (module docstring), k ≥ 1 coefficients of n ≥ 1."""
    caller = "kept_sensitivity"
    n = v.check_int(n, name="n", caller=caller, low=1)
    k = np.asarray(k, dtype=float)
    if k.size == 0 or not np.all(np.isfinite(k)) or np.any(k < 1) or np.any(k != np.round(k)):
        raise ValueError(f"The 'k' parameter of {caller} must hold whole numbers ≥ 1 (coefficients kept; 0 gave a "
                         f"negative sensitivity). Got {k.tolist()!r:.60} instead.")
    return np.minimum(1.0 / math.sqrt(n) + (k - 1.0) * math.sqrt(2.0 / n), np.sqrt(k))


def efpa(x, epsilon: float, *, ratio: float = 0.5, noise="numpy", rng=None) -> AdaptiveResult:
    """Run EFPA on a 1-D histogram (module docstring: algorithm, privacy argument, open choices).

    Parameters
    ----------
    x : array_like, 1-D (n,)
    epsilon : float
    ratio : float in (0, 1), default 0.5
        ρ, the share of ε spent choosing k.
    noise : {"numpy", "opendp"} or Noise, default "numpy"
        numpy (seeded; simulation) or OpenDP's vetted samplers (release; ``rng`` must be None).
    rng : numpy.random.Generator, int or None

    Returns
    -------
    AdaptiveResult
        ``budget = {"select_k": ε₁, "coefficients": ε₂}``; ``details``: "k", "noise_scale" (b_k),
        "sensitivity" (the Δ₁(k) bound).

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
    src = noise_source(noise, rng, caller)
    n = X.size
    # one cell: k = 1 is the only choice, which reads no data, so the coefficient takes all of ε (ρ·ε went unused:
    # twice the noise scale, a helper's probe)
    eps1, eps2 = (0.0, eps) if n == 1 else (rho * eps, eps - rho * eps)
    laplace_scale(math.sqrt(n), eps2, "the Fourier coefficients", caller)  # Δ₁(k) ≤ √n: refuse overflow up front
    c = fourier_coefficients(X)
    # tail[k-1] = ‖c_{k:}‖₂ for k = 1..n, by a reversed cumulative sum of squares
    sq = np.concatenate([np.cumsum((c * c)[::-1])[::-1][1:], [0.0]])
    tail = np.sqrt(np.maximum(sq, 0.0))
    ks = np.arange(1, n + 1)
    b_all = kept_sensitivity(ks, n) / eps2
    scores = -(tail + np.sqrt(2.0 * ks) * b_all)
    k = 1 if n == 1 else int(ks[src.exponential(scores, eps1, 1.0)])
    b = float(b_all[k - 1])
    kept = np.zeros(n)
    kept[:k] = src.add_laplace(c[:k], b)
    details = {"k": k, "noise_scale": b, "sensitivity": float(kept_sensitivity(k, n)), "score_sensitivity": 1.0}
    return finish("efpa", inverse_fourier(kept), eps, {"select_k": eps1, "coefficients": eps2}, details, src)
