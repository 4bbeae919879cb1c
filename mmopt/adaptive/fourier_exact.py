"""Σ_i x_i·T[f·i mod n] for every f, exactly, when n is a power of two: EFPA's 2⁶²·Φ̂x in O(n log n).

EFPA (:mod:`mmopt.adaptive.efpa`) needs Y = 2⁶²·Φ̂x exactly, Φ̂'s cosine and sine rows reading integer tables T
(|T| ≤ 2⁶², the rounded cos/sin values times 2⁶²) at f·i mod n. Row by row that is O(n·support). For n = 2^k
the products f·i mod n have a group structure (Rader's, over the odd residues modulo 2^m):

* write i = 2^a·i′, f = 2^b·f′ (i′, f′ odd). If a + b ≥ k then f·i ≡ 0; otherwise f·i ≡ 2^c·(f′i′ mod 2^m),
  c = a + b, m = k − c, which depends on i′ and f′ modulo 2^m only. So the terms of one (a, b) sum to
  Z(f′) = Σ_r X_a(r)·T[2^c·(f′r mod 2^m)], r over the odd residues mod 2^m and X_a(r) the sum of the x_i with
  i = 2^a·i′, i′ ≡ r (mod 2^m);
* the odd residues mod 2^m (m ≥ 3) are the group {±1}×⟨5⟩ ≅ Z₂ × Z_{2^{m−2}}: with r = (−1)^α·5^β, Z is a cyclic
  correlation over it, i.e. the 2-D cyclic convolution of X_a read at the inverse residues with
  T[2^c·(−1)^α·5^β]: a length-2 transform (sum and difference) along α and number-theoretic transforms of length
  2^{m−2} along β. T is read at every residue as stored: no symmetry of the table is assumed (its rounded values
  are neither exactly even nor odd, checked at n = 4 … 2¹⁷). m ≤ 2 (one or two residues) is summed directly;
* every sum is formed modulo primes p < 2^31.5 (:func:`~mmopt.toeplitz.exact_product.ntt_forward`: products of
  two residues fit uint64), the contributions of every (a, b) added modulo each, and Y rebuilt once by the CRT
  (:func:`~mmopt.toeplitz.exact_product.garner`): exact while |Y_f| < P/2. |Y_f| ≤ Σ_i |x_i|·max|T| ≤ R·max|T|
  for R the caller's bound on Σ|x_i| (data-independent: EFPA passes N = 2³²), so the fewest of :data:`PRIMES`
  with 2·R·max|T| < P are used: three for EFPA at n ≥ 16 (max|T| ≈ 2⁶²·√(2/n), P₃ ≈ 2⁹³·⁷), four below.

Cost: for each c < k the c + 1 values of a share T's transform; the transforms (length 2^{k−c−2}) hold
≈ (2 + 4·tables)·Σ_c (c + 1)·2^{k−c−2} < (2 + 4·tables)·n entries per prime: O(n log n) work, plus the CRT of
the wanted rows in Python integers. Measured in :mod:`mmopt.adaptive.efpa`'s docstring (0.10 CPU s at n = 2¹⁴
for both tables, against 4.0 s for BLAS products of 21-bit slices).
"""

from __future__ import annotations

import numpy as np

from mmopt.toeplitz import weighted_exact
from mmopt.toeplitz.exact_product import garner, ntt_forward, ntt_inverse

__all__ = ["MAX_LOG2", "PRIMES", "multiplicative_sums"]

#: (p, g): :mod:`mmopt.toeplitz.weighted_exact`'s five primes below 2^31.5 with 2²⁶ | p − 1 (g a primitive root),
#: largest first; their product is ≈ 2¹⁵⁵·⁴
PRIMES = tuple(sorted(weighted_exact.PRIMES, reverse=True))
MAX_LOG2 = 28  # n ≤ 2²⁸: the longest transform, 2^{k−2}, divides every p − 1
_MAX_RECORDS = 2**62  # R: sums of counts stay inside int64


def multiplicative_sums(x: np.ndarray, tables, rows: int, records: int) -> list[list[int]]:
    """[[Σ_i x_i·T[f·i mod n] for f < ``rows``] for T in ``tables``] as Python integers, exactly (module docstring).

    Parameters
    ----------
    x : int64 array (n,)
        n = 2^k ≤ 2²⁸; Σ|x_i| ≤ ``records``.
    tables : sequence of int64 arrays (n,)
        The tables T, |T| ≤ 2⁶².
    rows : int
        How many f (0 ≤ f < rows ≤ n).
    records : int
        A bound on Σ|x_i| (≤ 2⁶²) fixing the number of primes: pass one that does not depend on the data.

    >>> T = np.array([5, -7, 11, 13], dtype=np.int64)
    >>> multiplicative_sums(np.array([1, 2, 3, 4], dtype=np.int64), [T], 4, 10)
    [[50, 76, 86, 36]]
    """
    caller = "multiplicative_sums"
    n = x.size
    k = n.bit_length() - 1
    if x.dtype != np.int64 or x.ndim != 1 or n == 0 or n != 1 << k or k > MAX_LOG2:
        raise ValueError(f"The 'x' parameter of {caller} must be an int64 vector of 2^k ≤ 2^{MAX_LOG2} entries. Got "
                         f"{x.dtype} of shape {x.shape} instead.")
    if not 0 <= records <= _MAX_RECORDS or _magnitude(x) > records:
        raise ValueError(f"The 'records' parameter of {caller} must bound Σ|x| and be at most 2^62. Got {records}.")
    tables = [np.asarray(T) for T in tables]
    if not tables or any(T.dtype != np.int64 or T.shape != (n,) or _largest(T) > 2**62 for T in tables):
        raise ValueError(f"The 'tables' parameter of {caller} must hold int64 vectors of {n} entries, |T| ≤ 2^62.")
    if not 0 <= rows <= n:
        raise ValueError(f"The 'rows' parameter of {caller} must be in [0, {n}]. Got {rows} instead.")
    bound = records * max(_largest(T) for T in tables)  # ≥ every |Y_f|
    chosen, product = [], 1
    for p, g in PRIMES:  # the fewest primes with |Y_f| < P/2
        if chosen and 2 * bound < product:
            break
        chosen.append((p, g))
        product *= p
    if 2 * bound >= product:  # not reached: 2·2⁶²·2⁶² < P₅ ≈ 2¹⁵⁵
        raise ValueError(f"{caller}: |Y| ≤ {bound} exceeds the CRT's range.")
    f = np.arange(rows, dtype=np.int64)
    b_of = np.where(f > 0, np.frexp((f & -f).astype(float))[1] - 1, k)  # 2-adic valuation (k for f = 0)
    odd = f >> b_of
    # f·i ≡ 0 (mod n) iff 2^{k−b} | i: T[0] times those counts (i = 0 among them; every i when f = 0)
    zeros = np.array([x[::1 << (k - b)].sum() for b in range(k + 1)], dtype=np.int64)[b_of]
    acc = [np.array([(int(T[0]) % p) * (zeros % p) % p for T in tables]) for p, _ in chosen]
    targets = [np.flatnonzero(b_of == b) for b in range(k)]
    for c in range(k):
        m = k - c
        parts = []  # (residue sums X_a, the rows f of valuation b = c − a, their f′'s residue index mod 2^m)
        for a in range(c + 1):
            rows_b = targets[c - a]
            if rows_b.size:
                X = x[1 << a::2 << a].reshape(-1, 1 << (m - 1)).sum(axis=0)  # index j: residue 2j + 1
                parts.append((X, rows_b, (odd[rows_b] >> 1) & ((1 << (m - 1)) - 1)))
        if not parts:
            continue
        Z = _direct(parts, tables, c, m, chosen) if m <= 2 else _by_transforms(parts, tables, c, m, chosen)
        for q, (r, (p, _)) in enumerate(zip(acc, chosen, strict=True)):
            for z, (_, rows_b, j) in zip(Z, parts, strict=True):  # z: (primes, tables, 2^{m−1}) residues
                r[:, rows_b] = (r[:, rows_b] + z[q][:, j]) % p
    return [garner([r[t] for r in acc], [p for p, _ in chosen]) for t in range(len(tables))]


def _largest(a: np.ndarray) -> int:
    """max_i |a_i| of int64 entries as a Python integer: np.abs wraps −2⁶³ to itself, which passed |T| ≤ 2⁶²."""
    return max(int(a.max()), -int(a.min()))


def _magnitude(x: np.ndarray) -> int:
    """Σ|x_i| exactly, as int64 sums of the high and low 31 bits (each below 2³²·2²⁸): np.abs(x).sum() wrapped
    past 2⁶³, so four counts of 2⁶² passed records = 0 and came back wrong."""
    if int(x.min()) == np.iinfo(np.int64).min:  # |−2⁶³| is no int64: above every bound allowed
        return 1 << 63
    a = np.abs(x)
    return (int((a >> 31).sum()) << 31) + int((a & ((1 << 31) - 1)).sum())


def _direct(parts, tables, c: int, m: int, chosen) -> np.ndarray:
    """Z(f′) by residue index for m ≤ 2 (one or two odd residues), summed in Python integers and reduced modulo
    each prime: (parts, primes, tables, 2^{m−1}) int64."""
    M = 1 << m
    out = []
    for X, _, _ in parts:
        Z = [[sum(int(X[s]) * int(T[((2 * j + 1) * (2 * s + 1) % M) << c]) for s in range(X.size))
              for j in range(X.size)] for T in tables]
        out.append([[[z % p for z in row] for row in Z] for p, _ in chosen])
    return np.array(out, dtype=np.int64)


def _by_transforms(parts, tables, c: int, m: int, chosen) -> np.ndarray:
    """Z(f′) by residue index for m ≥ 3 modulo each prime, (parts, primes, tables, 2^{m−1}) int64: the cyclic
    correlation over {±1}×⟨5⟩ as a 2-D cyclic convolution (module docstring)."""
    L, M = 1 << (m - 2), 1 << m
    pw = np.ones(L, dtype=np.int64)
    for s in range(1, L):  # 5^β mod 2^m: the cyclic factor ⟨5⟩, of order 2^{m−2}
        pw[s] = pw[s - 1] * 5 % M
    G = np.stack([pw, M - pw])  # G[α, β] = (−1)^α·5^β mod 2^m: every odd residue once
    index = (G - 1) >> 1  # the residue index of each group element
    inverse = index[:, (-np.arange(L)) % L]  # (−1)^α·5^{−β}, the inverse of G[α, β]
    X = np.stack([X[inverse] for X, _, _ in parts])  # (A, 2, L): X_a read at the inverse residues
    S = np.stack([T[G << c] for T in tables])  # (tables, 2, L): T[2^c·r] at every residue r, as stored
    Z = np.empty((len(parts), len(chosen), len(tables), 2 * L), dtype=np.int64)
    for q, (p, g) in enumerate(chosen):
        P = np.uint64(p)
        U, V = (_pair((A % p).astype(np.uint64), P) for A in (X, S))
        U = ntt_forward(U.reshape(-1, L), p, g).reshape(-1, 1, 2, L)
        V = ntt_forward(V.reshape(-1, L), p, g).reshape(1, -1, 2, L)
        W = ntt_inverse(np.ascontiguousarray(U * V % P).reshape(-1, L), p, g).reshape(len(parts), -1, 2, L)
        half = pow(2, p - 2, p)  # the length-2 inverse divides by 2
        # (w₀ ± w₁) mod p < 2^31.5, times half < 2^31.5: below 2⁶³
        Z[:, q][..., index[0]] = (W[:, :, 0] + W[:, :, 1]) % p * half % p
        Z[:, q][..., index[1]] = (W[:, :, 0] - W[:, :, 1]) % p * half % p
    return Z


def _pair(A: np.ndarray, P: np.uint64) -> np.ndarray:
    """The length-2 transform along axis 1 of residues (…, 2, L): (u₀ + u₁, u₀ − u₁) mod p, C-contiguous."""
    return np.ascontiguousarray(np.stack([(A[:, 0] + A[:, 1]) % P, (A[:, 0] + P - A[:, 1]) % P], axis=1))
