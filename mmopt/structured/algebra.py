"""The marginals algebra: Kronecker products whose factors are αI + βJ, diagonalised over 2^d subsets.

Notation: see README. On attribute i (size nᵢ) let Pᵢ = J/nᵢ (projector on constants). For every subset
T ⊆ [d] the orthogonal projector Q_T = ⊗_{i∈T} (I − Pᵢ) ⊗_{i∉T} Pᵢ has rank ∏_{i∈T} (nᵢ − 1), the Q_T sum
to the identity, and

    ⊗ᵢ (αᵢ I + βᵢ J) = Σ_T λ_T Q_T,   λ_T = ∏_{i∈T} αᵢ · ∏_{i∉T} (αᵢ + nᵢ βᵢ),

since αI + βJ = α(I − P) + (α + nβ)P. A sum of such products is again Σ_T λ_T Q_T, its pseudo-inverse
is Σ_{λ_T>0} Q_T / λ_T, and for any product Gram ⊗ᵢ Gᵢ

    tr((⊗ᵢ Gᵢ) Q_T) = ∏_{i∈T} (tr Gᵢ − 1ᵀGᵢ1/nᵢ) · ∏_{i∉T} 1ᵀGᵢ1/nᵢ.

Marginals (Gram ⊗ (I or J)), IT products (I + J) and weighted marginals strategies (HDMM's M(θ)) all
live here. Source: McKenna et al., "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 2018, §5 (marginals); the identities above are elementary.
"""

from __future__ import annotations

import numpy as np

# Past this many attributes the 2^d subsets are too many to enumerate (2^22 · d floats).
MAX_ATTRIBUTES = 22


def ij_coefficients(X: np.ndarray) -> tuple[float, float] | None:
    """(α, β) with X = αI + βJ exactly up to round-off, or None when X is not of that form.

    α is snapped to 0 when it is round-off of max|X| (X = J), so rank deficiency is seen exactly.
    """
    n = X.shape[0]
    scale = float(np.max(np.abs(X)))
    if n == 1:
        return float(X[0, 0]), 0.0
    beta = float(X[0, 1])
    alpha = float(X[0, 0]) - beta
    tol = 16 * n * np.finfo(float).eps * max(scale, 1e-300)
    R = X - beta
    R[np.diag_indices(n)] -= alpha
    if float(np.max(np.abs(R))) > tol:
        return None
    if abs(alpha) <= tol:
        alpha = 0.0
    return alpha, beta


def constants_eigenvalue(alpha: float, beta: float, n: int) -> float:
    """α + nβ, the eigenvalue of αI + βJ (n × n) on the constants, snapped to 0 when it is round-off of its terms.

    Why: the residual projector's Gram I − J/n (a Helmert factor's HᵀH, every row summing to 0) comes out of
    :func:`ij_coefficients` with α + nβ ≈ 1e-17, not 0; counted as a positive eigenvalue, a strategy that
    cannot answer totals was scored at a finite 10¹⁷ (and its answers were 0) instead of being refused.
    """
    out = alpha + n * beta
    return 0.0 if abs(out) <= 16 * n * np.finfo(float).eps * max(abs(alpha), n * abs(beta)) else out


def subset_bits(d: int) -> np.ndarray:
    """Boolean (2^d, d): row T has bit i set iff attribute i ∈ T (T as a bitmask, bit i = attribute i)."""
    if d > MAX_ATTRIBUTES:
        raise ValueError(f"The marginals algebra enumerates 2^d subsets; d = {d} attributes exceeds "
                         f"{MAX_ATTRIBUTES}. Use a product strategy instead.")
    T = np.arange(2**d)[:, None]
    return ((T >> np.arange(d)) & 1).astype(bool)


def multiplicities(shape) -> np.ndarray:
    """rank Q_T = ∏_{i∈T} (nᵢ − 1) for every subset T, as float64."""
    bits = subset_bits(len(shape))
    n = np.asarray(shape, dtype=float)
    return np.where(bits, n - 1.0, 1.0).prod(axis=1)


def product_spectrum(coefficients, shape, weight2: float = 1.0) -> np.ndarray:
    """λ_T of w²·⊗ᵢ(αᵢI + βᵢJ) for every T: w² ∏_{i∈T} αᵢ ∏_{i∉T} (αᵢ + nᵢβᵢ)."""
    bits = subset_bits(len(shape))
    a = np.array([c[0] for c in coefficients], dtype=float)
    b = np.array([constants_eigenvalue(*c, n) for c, n in zip(coefficients, shape, strict=True)], dtype=float)
    return weight2 * np.where(bits, np.clip(a, 0.0, None), np.clip(b, 0.0, None)).prod(axis=1)


def projection_traces(grams, shape, weight2: float = 1.0) -> np.ndarray:
    """tr(w²(⊗ᵢ Gᵢ) Q_T) for every T, for any PSD factor Grams Gᵢ (non-negative by construction)."""
    bits = subset_bits(len(shape))
    mean = np.array([float(np.sum(G)) / n for G, n in zip(grams, shape, strict=True)])
    rest = np.array([float(np.trace(G)) for G in grams]) - mean
    # tr G − 1ᵀG1/n = tr(G(I − P)) ≥ 0; clip its round-off (it is exactly 0 for G = J).
    rest = np.where(rest <= 16 * np.finfo(float).eps * np.abs(mean), 0.0, rest)
    return weight2 * np.where(bits, np.clip(rest, 0.0, None), np.clip(mean, 0.0, None)).prod(axis=1)


def row_variances(spectrum_inv: np.ndarray, sq_norms, sums, shape) -> np.ndarray:
    """q X⁺ qᵀ for product queries q = ⊗ᵢ qᵢ, given per-attribute ‖qᵢ‖² and 1ᵀqᵢ (arrays, broadcast).

    q Q_T qᵀ = ∏_{i∈T} (‖qᵢ‖² − (1ᵀqᵢ)²/nᵢ) ∏_{i∉T} (1ᵀqᵢ)²/nᵢ, weighted by 1/λ_T (0 where λ_T = 0).
    """
    bits = subset_bits(len(shape))
    b = np.stack([np.asarray(s, float) ** 2 / n for s, n in zip(sums, shape, strict=True)], axis=-1)
    a = np.clip(np.stack([np.asarray(q, float) for q in sq_norms], axis=-1) - b, 0.0, None)
    a2, b2 = a.reshape(-1, 1, len(shape)), b.reshape(-1, 1, len(shape))
    return (np.where(bits[None], a2, b2).prod(axis=-1) @ spectrum_inv).reshape(a.shape[:-1])


def product_table(inside: np.ndarray, outside: np.ndarray) -> np.ndarray:
    """(k, 2^d) table ∏_{i∈T} inside[:, i] · ∏_{i∉T} outside[:, i] for every subset T, row by row.

    Built by doubling over the attributes (column T = bitmask, bit i = attribute i, as :func:`subset_bits`),
    so it costs O(k·2^d) rather than the O(k·d·2^d) of a masked product.
    """
    inside, outside = np.atleast_2d(inside), np.atleast_2d(outside)
    d = inside.shape[1]
    if d > MAX_ATTRIBUTES:
        subset_bits(d)  # raises the documented error
    out = np.ones((inside.shape[0], 1))
    for i in range(d):
        out = np.concatenate([out * outside[:, i:i + 1], out * inside[:, i:i + 1]], axis=1)
    return out


def superset_sums(values: np.ndarray) -> np.ndarray:
    """z_T = Σ_{S ⊇ T} values_S over the 2^d subsets (zeta transform, O(d·2^d)); a new array."""
    z = np.array(values, dtype=float)
    d = z.size.bit_length() - 1
    for i in range(d):
        v3 = z.reshape(-1, 2, 1 << i)  # axis 1 is bit i
        v3[:, 0, :] += v3[:, 1, :]
    return z


def subset_sums(values: np.ndarray) -> np.ndarray:
    """z_S = Σ_{T ⊆ S} values_T over the 2^d subsets (zeta transform, O(d·2^d)); a new array."""
    z = np.array(values, dtype=float)
    d = z.size.bit_length() - 1
    for i in range(d):
        v3 = z.reshape(-1, 2, 1 << i)
        v3[:, 1, :] += v3[:, 0, :]
    return z
