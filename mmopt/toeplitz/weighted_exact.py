"""The weighted square root's release inside the privacy proof: its exact Δ₂ and its answers correctly rounded.

Notation: see :mod:`mmopt.toeplitz.weighted` (the frame, f(G) = T(a) − H(a), 1-indexed (T(a) − H(a))_ij =
a(|i − j|) − a(i + j)) and :mod:`mmopt.toeplitz.exact_product` (why a release's answers must be computed with a
bounded rounding: OpenDP's d_in bounds the *computed* answers' change). A = G^{1/4}E⁻¹ was released by float64 sine
transforms, at Δ₂ = 1 — the exact strategy's, not the computed one's, whose rounding no proof bounded.

Here the strategy released is, in the frame, Â = 2^{σ+τ}·(T(α) − H(α))·diag(φ) with integers

* α(m) = round(a(m)·2^{−σ}), |α| ≤ 2⁵³ (a = G^{1/4}'s sequence, 53 bits below its largest entry), made to have the
  frame's symmetries exactly: even, and periodic with period P = 2(n + 1) (all ranges) or anti-periodic with
  P = 2n + 1 (prefix sums, α(m + P) = −α(m)) — only α(0..n+1) or α(0..n) is rounded, the rest is its mirror;
* φ_j = round(f_j·2^{−τ}) < 2⁵³, f = 1/e the column scale (:func:`~mmopt.toeplitz.weighted.column_scale`).

Its Δ₂ is computed exactly. Column j of T(α) − H(α), extended to all i, is odd in i and has P's (anti-)period
with zeros at 0 (and n + 1), so its squared norm over i = 1..n is half that over one period:

    ‖(T(α) − H(α)) e_j‖² = C(0) − C(2j),    C(k) = Σ_{i=0}^{P−1} α(i)·α(i + k)

(the products α(i ∓ j)² sum to C(0) each over a period, the cross term to C(2j)). C at even lags is two integer
correlations (α's even and odd entries), and Δ₂² = 2^{2(σ+τ)}·max_j φ_j²·(C(0) − C(2j)) in Python integers, its
square root rounded upwards. The answers are one integer convolution, z_i = Σ_{k=−n}^{n} α(i − k)·ĝ_k with ĝ
the odd extension of φ ⊙ x (ĝ_{±j} = ±φ_j x_j), so ŷ = 2^{σ+τ}·z correctly rounded: the dense release's bound
|ŷ − Âx| ≤ u·|Â|x, and |Â| has Â's column norms (it is Â entrywise), so the dense charge applies
(:func:`mmopt.dense.exact_answers.charged_sensitivity`). Both are number-theoretic transforms modulo five primes
(|z| ≤ 2⁵³·2·2⁵³·2³² = 2¹³⁹, C ≤ P·2¹⁰⁶; the primes' product is 2¹⁵⁵·⁴) and Garner's reconstruction; nothing depends on
the data but the answers. The estimate x̂ = e ⊙ G^{−1/4}y stays a float64 sine transform: post-processing (Â is
G^{1/4}E⁻¹ to α's and φ's 2⁻⁵³, so x̂'s bias is float64's).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from mmopt._base import validation as v
from mmopt._base.readonly import read_only
from mmopt.dense.exact_answers import MAX_RECORDS, histogram_problem, sqrt_up
from mmopt.toeplitz import weighted as ws
from mmopt.toeplitz.exact_product import garner, ntt_forward, ntt_inverse, padded

__all__ = ["MAX_N", "PRIMES", "Released", "answers", "released"]

#: (p, g): five primes with 2²⁶ | p − 1 (transforms up to 2²⁶ long) below 2^31.5 (a product of two residues fits
#: int64), g a primitive root; their product is ≈ 2¹⁵⁵·⁴
PRIMES = ((1811939329, 13), (2013265921, 31), (2281701377, 3), (2483027969, 3), (2885681153, 3))
MAX_N = 2**24  # 3n ≤ 2²⁶: the answers' transform length
_BITS = 53


@dataclass(frozen=True, eq=False)
class Released:
    """The strategy a release measures (module docstring): α(0..2n) and φ (frame order) as int64, their
    exponents σ and τ, and its Δ₂ rounded upwards."""

    kind: str
    n: int
    alpha: np.ndarray
    sigma: int
    phi: np.ndarray
    tau: int
    sensitivity: float

    @property
    def exponent(self) -> int:
        """σ + τ: Â = 2^{σ+τ}·(T(α) − H(α))·diag(φ)."""
        return self.sigma + self.tau


def _period(kind: str, n: int) -> int:
    return 2 * n + 2 if kind == "all_range" else 2 * n + 1


def _fixed_point(values: np.ndarray) -> tuple[np.ndarray, int]:
    """(q, s) with q = round(values·2^{−s}) integers of |q| ≤ 2⁵³, s from the largest |value| (exact scaling)."""
    s = math.frexp(float(np.max(np.abs(values))))[1] - _BITS
    return np.round(np.ldexp(values, -s)).astype(np.int64), s


def _alpha(kind: str, n: int, length: int) -> tuple[np.ndarray, int]:
    """(α(0..length − 1), σ): the rounded base values and their mirror images (module docstring)."""
    a = ws.spectral_sequence(kind, n, 0.25)
    base = n + 2 if kind == "all_range" else n + 1  # α(0..n+1) / α(0..n): every other value is a mirror of these
    q, sigma = _fixed_point(a[:base])
    P, m = _period(kind, n), np.arange(length)
    r = m % P
    if kind == "all_range":  # even and P-periodic: α(r) = α(P − r)
        return q[np.minimum(r, P - r)], sigma
    sign = np.where((m // P) % 2 == 0, 1, -1)  # α(m + P) = −α(m)
    folded = np.where(r <= n, q[np.minimum(r, n)], -q[np.minimum(P - r, n)])  # α(r) = −α(P − r) for r > n
    return sign * folded, sigma


@functools.lru_cache(maxsize=2)
def released(kind: str, n: int) -> Released:
    """The released strategy of ``weighted_sqrt`` on ``kind``(n) and its exact Δ₂ (module docstring), from (kind, n)
    alone; kept for the last two (kind, n) (its correlations are the release's larger half): α(0..2n), all
    :func:`answers` reads (8·(2n + 1) bytes, with φ 24n: 400 MB at 2²⁴ steps)."""
    if not 1 <= n <= MAX_N:
        raise ValueError(f"released: the weighted square root's answers are computed exactly up to {MAX_N:,} "
                         f"steps. Got n = {n:,}.")
    P = _period(kind, n)
    alpha, sigma = _alpha(kind, n, P + 2 * n)
    f = 1.0 / ws.column_scale(kind, n)
    phi, tau = _fixed_point(f[::-1] if kind == "prefix" else f)  # frame order
    # C(2j) = Σ_t α(2t)α(2t + 2j) + Σ_t α(2t + 1)α(2t + 1 + 2j), t over the period: two correlations
    h = (P + 1) // 2  # even entries of one period (the odd ones padded with a zero to as many)
    even, odd = alpha[0::2], np.append(alpha[1::2], 0)
    odd_head = odd[:h].copy()
    odd_head[(P // 2):] = 0  # only i < P
    C = _products([(even, even[:h][::-1]), (odd, odd_head[::-1])], h - 1, n + 1)
    top = max(int(p) * int(p) * (C[0] - c) for p, c in zip(phi.tolist(), C[1:], strict=True))
    # read-only: the cached strategy is shared by every release of this (kind, n), and Δ₂ was computed from it
    return Released(kind, n, read_only(alpha[:2 * n + 1], np.int64), sigma, read_only(phi, np.int64), tau,
                    sqrt_up(Fraction(top) * Fraction(2) ** (2 * (sigma + tau))))


def answers(r: Released, x: np.ndarray) -> np.ndarray:
    """Â x correctly rounded (module docstring), in cell order, for whole counts x of at most MAX_RECORDS records
    (refused otherwise: past them the transforms' range argument fails, and int64 would truncate fractions)."""
    n = r.n
    z = np.asarray(x, dtype=float)
    if z.shape != (n,) or histogram_problem(z) is not None:
        raise ValueError(f"The 'x' parameter of answers must be a histogram of {n:,} cells: whole counts ≥ 0, at most "
                         f"{MAX_RECORDS:,} records in all. Got shape {z.shape} or other values (not printed: "
                         "figures of the data).")
    z = (z[::-1] if r.kind == "prefix" else z).astype(np.int64)
    # w(t) = α(t − n + 1), t = 0..3n − 1 (α even); ĝ(s) = sign(s − n)·φ_|s−n| x_|s−n|, s = 0..2n
    w = np.concatenate([r.alpha[n - 1:0:-1], r.alpha[:2 * n + 1]])
    g_phi = np.concatenate([r.phi[::-1], [0], r.phi])
    g_x = np.concatenate([-z[::-1], [0], z])
    exact = _products([(w, (g_phi, g_x))], 2 * n, n)
    out = np.ldexp(np.array([float(t) for t in exact]), r.exponent)  # int → float correctly rounded; 2^s exact
    return out[::-1] if r.kind == "prefix" else out


def _products(pairs: list, start: int, count: int) -> list[int]:
    """Σ over ``pairs`` (a, b) of the linear convolution a * b, entries start..start + count − 1, as exact Python
    integers (valid while |Σ| < P/2 over :data:`PRIMES`, and every wanted entry is one no cyclic wrap reaches:
    start ≥ len(b) − 1). b may be a pair of int64 vectors whose product is b (held as residues: it exceeds int64)."""
    L = 1 << max(1, (max(a.size for a, _ in pairs) - 1).bit_length())
    v.check_allocation(6 * L, what=f"the weighted square root's exact transforms (length {L:,})", caller="release",
                       remedy=" Release the steps in windows, or raise the limit on a machine with that memory.")
    residues = []
    for p, g in PRIMES:
        acc = np.zeros(L, np.uint64)
        for a, b in pairs:
            A = ntt_forward(padded(a % p, L), p, g)
            # b's residues: a product of two residues < 2^31.5 fits int64
            B = padded((b[0] % p) * (b[1] % p) % p if isinstance(b, tuple) else b % p, L)
            A *= ntt_forward(B, p, g)
            A %= np.uint64(p)
            acc += A
            acc %= np.uint64(p)
        residues.append(ntt_inverse(acc, p, g)[start:start + count])
    return garner(residues, [p for p, _ in PRIMES])
