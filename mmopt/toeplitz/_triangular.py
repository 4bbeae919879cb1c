"""Strictly-upper-triangular parts of Toeplitz and Hankel matrices times a vector, in O(n log n) / O(n log² n).

For c of length ≥ 2n − 1 and q of length n (0-based t, j):

* :func:`upper_toeplitz`: r_t = Σ_{j > t} c[j − t] q_j, one FFT correlation;
* :func:`upper_hankel`: r_t = Σ_{j > t} c[t + j] q_j. The triangle cuts a Hankel matrix along its anti-structure,
  so no single FFT does it; the standard divide and conquer does: every pair t < j is split exactly once, at
  the level where t and j first fall into different halves, and there the block is a full Hankel product
  (one FFT). The blocks of one level have equal sizes and are batched into one 2-D FFT: log₂ n levels.
"""

from __future__ import annotations

import numpy as np
from scipy import fft as sfft


def upper_toeplitz(c: np.ndarray, q: np.ndarray) -> np.ndarray:
    """r_t = Σ_{j > t} c[j − t] q_j for t < n = len(q)."""
    n = len(q)
    lags = np.concatenate([[0.0], c[1:n]])
    size = sfft.next_fast_len(2 * n - 1, real=True)
    # r_t = Σ_d lags[d] q[t + d]: the convolution of q with lags reversed, read at index t + n − 1
    full = sfft.irfft(sfft.rfft(q, size) * sfft.rfft(lags[::-1], size), size)
    return full[n - 1:2 * n - 1]


def upper_hankel(c: np.ndarray, q: np.ndarray) -> np.ndarray:
    """r_t = Σ_{j > t} c[t + j] q_j for t < n = len(q); c needs entries up to index 2n − 3."""
    n = len(q)
    if n < 2:
        return np.zeros(n)
    N = 1 << (n - 1).bit_length()
    qp = np.zeros(N)
    qp[:n] = q
    cp = np.zeros(2 * N)
    m = min(len(c), 2 * N)
    cp[:m] = c[:m]
    r = np.zeros(N)
    b = N // 2
    while b >= 1:
        P = N // (2 * b)
        Q = qp.reshape(P, 2 * b)[:, b:]  # the j-half of each pair of blocks
        # block p: t = 2pb + t', j = 2pb + b + j', so c[t + j] = c[4pb + b + (t' + j')]
        idx = (4 * b * np.arange(P))[:, None] + b + np.arange(2 * b - 1)[None, :]
        A = cp[idx]
        size = sfft.next_fast_len(3 * b - 2, real=True) if b > 1 else 2
        conv = sfft.irfft(sfft.rfft(A, size, axis=1) * sfft.rfft(Q[:, ::-1], size, axis=1), size, axis=1)
        r.reshape(P, 2 * b)[:, :b] += conv[:, b - 1:2 * b - 1]
        b //= 2
    return r[:n]
