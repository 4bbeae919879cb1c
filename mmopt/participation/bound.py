"""A certified lower bound under a participation schema at any n, in O(n log n): the diagonal bound.

Notation: see :mod:`mmopt.participation.optimum`, whose dual gives, for weights on (pattern, Y) pairs summing
to M, tr(G X⁻¹) ≥ S(M)²/(total weight) for every X of sensitivity ≤ 1. Take disjoint allowed patterns
P_1, …, P_m, Y = I on each (unit gradients orthogonal to each other, an allowed choice) with weight λ_j: then
M = diag(λ_j on P_j) and, as ‖Z‖_* ≥ tr(Z) for any square Z (Q = I in ‖Z‖_* = max_{‖Q‖≤1} tr(QᵀZ)),

    S(M) = ‖G^{1/2} M^{1/2}‖_* ≥ Σ_j √λ_j H_j,   H_j = Σ_{t∈P_j} h_t,   h = diag(G^{1/2}),

so the optimum is at least max_λ (Σ_j √λ_j H_j)²/Σ_j λ_j = Σ_j H_j² (λ_j ∝ H_j², Cauchy–Schwarz). With one
participation (P_j = {t}) this is :func:`mmopt.toeplitz.prefix_bound`'s diagonal bound Σ h_t². The patterns:
fixed epochs' own; for minimum separation (b, k), steps s = max(b, ⌈n/k⌉) apart, {j, j + s, …} for j < s
(each at most k steps, all allowed). h comes in closed form for prefix sums and all ranges
(:func:`mmopt.toeplitz.bound.gram_sqrt_diagonal`).

For prefix sums the patterns' correlations count too: with A_j = (G^{1/2}) on P_j × P_j (k×k) and
B_j = λ_j R_j, the pinching inequality (the nuclear norm of a matrix is at least the sum of those of its diagonal
blocks, here in the pattern partition, M^{1/2} being block diagonal) gives S(M) ≥ Σ_j √λ_j ‖A_j R_j^{1/2}‖_*.
Take R_j = D_j⁻¹ A_j² D_j⁻¹, D_j = diag(‖A_j e_t‖) (a correlation matrix): A_j² = D_j R_j D_j makes
(R^{1/2} A² R^{1/2})^{1/2} = R^{1/2} D R^{1/2}, so ‖A_j R_j^{1/2}‖_* = tr(R_j D_j) = Σ_{t∈P_j} ‖A_j e_t‖ =: S_j and
the bound is Σ_j S_j² (S_j ≥ H_j: ‖A e_t‖ ≥ A_tt). The entries come in closed form from W's SVD: with
N = 2n + 1 and F(m) = Σ_k σ_k cos(π(2k − 1)m/N) (one FFT of length 2N), (G^{1/2})_st = (2/N)(F(|s − t|) −
F(2n − s − t)), 0-indexed: "correlated bound".
"""

from __future__ import annotations

import numpy as np

from mmopt.participation.schemas import FixedEpochs, MinSeparation, Single, as_schema

__all__ = ["diagonal_bound", "gram_sqrt_entries"]


def pattern_spacing(schema, n: int) -> int:
    """s: the bound's patterns are {j, j + s, …}, j < s."""
    if isinstance(schema, Single):
        return n
    if isinstance(schema, FixedEpochs):
        return schema.separation(n)
    if isinstance(schema, MinSeparation):
        return max(schema.separation_steps, -(-n // schema.max_participations))
    raise TypeError(f"diagonal_bound: no bound for the schema {schema!r}")


def diagonal_bound(workload, participation) -> float:
    """Σ_j S_j² (prefix sums; Σ_j H_j² for all ranges), a lower bound on Δ²·tr(G X⁻¹) under ``participation``
    (module docstring).

    Parameters
    ----------
    workload : mmopt.toeplitz.prefix(n) / all_range(n), or the dense prefix(n) / all_range(n)
    participation : a schema of :mod:`mmopt.participation`

    Examples
    --------
    >>> import mmopt
    >>> from mmopt import toeplitz
    >>> one = diagonal_bound(toeplitz.prefix(1024), mmopt.participation.single())
    >>> bool(np.isclose(one, toeplitz.prefix_bound(1024).diagonal))
    True
    >>> round(diagonal_bound(toeplitz.prefix(1024), mmopt.participation.fixed_epochs(4)) / one, 3)  # > 4: correlations
    4.167
    """
    from mmopt.toeplitz.bound import gram_sqrt_diagonal
    from mmopt.toeplitz.error import as_stream_workload

    caller = "diagonal_bound"
    W = as_stream_workload(workload, caller)
    schema = as_schema(participation, caller)
    n = W.n
    if not isinstance(schema, Single):
        schema.check_n(n, caller)
    s = pattern_spacing(schema, n)
    if W.kind == "prefix" and s < n:
        H = _correlated_sums(n, s)
    else:
        h = gram_sqrt_diagonal(n, W.kind)
        H = np.bincount(np.arange(n) % s, weights=h, minlength=s)
    return float(H @ H * (1 - 64 * n * np.finfo(float).eps))  # round-off of the FFT and the sums


def _cosine_sums(n: int) -> np.ndarray:
    """F(m), m = 0 … 2n, of the module docstring."""
    from mmopt.toeplitz.bound import prefix_singular_values
    N = 2 * n + 1
    g = np.zeros(2 * N)
    g[1:2 * n:2] = prefix_singular_values(n)
    F = np.fft.rfft(g).real  # m = 0 … N; F(2N − m) = F(m)
    return np.concatenate([F, F[N - 1:0:-1]])[:2 * n + 1]


def gram_sqrt_entries(n: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(G^{1/2})_{st} of the prefix workload for the index arrays ``rows``, ``cols`` (broadcast), O(n log n).

    >>> import scipy.linalg
    >>> W = np.tril(np.ones((6, 6)))
    >>> i = np.arange(6)
    >>> bool(np.allclose(gram_sqrt_entries(6, i[:, None], i[None, :]), scipy.linalg.sqrtm(W.T @ W).real))
    True
    """
    F = _cosine_sums(n)
    return (2.0 / (2 * n + 1)) * (F[np.abs(rows - cols)] - F[2 * n - rows - cols])


def _correlated_sums(n: int, s: int) -> np.ndarray:
    """S_j = Σ_{t∈P_j} ‖A_j e_t‖ for the patterns P_j = {j, j + s, …} ∩ [0, n), j < s."""
    k = -(-n // s)
    F = _cosine_sums(n)
    j = np.arange(s)[:, None, None]
    a, c = np.arange(k)[None, :, None], np.arange(k)[None, None, :]
    rows, cols = j + a * s, j + c * s
    inside = (rows < n) & (cols < n)
    A = np.where(inside, (2.0 / (2 * n + 1)) * (F[np.abs(rows - cols)] - F[np.clip(2 * n - rows - cols, 0, 2 * n)]),
                 0.0)
    return np.sqrt(np.einsum("jac,jac->jc", A, A)).sum(axis=1)
