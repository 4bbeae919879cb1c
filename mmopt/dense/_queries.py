"""Per-query profile terms w M wᵀ for each workload family, from the profile M alone (never W).

Notation: see README. Orders match :meth:`mmopt.workload.Workload.explicit_matrix`: ranges [a, b]
row-major (a ascending, then b ≥ a); predicates by the integer whose bit j is cell j (1 … 2ⁿ−1).
"""

from __future__ import annotations

import numpy as np

from mmopt._base.cumulative import prefix_sums_2d

# Enumerate all 2ⁿ−1 predicate queries exactly up to this n (2²² floats = 32 MB).
MAX_EXACT_PREDICATE_N = 22


def has_per_query(workload) -> bool:
    """Whether per-query variances can be listed for this workload."""
    if workload.matrix is not None:
        return True
    if workload.family == "all_predicate":
        return workload.domain_size <= MAX_EXACT_PREDICATE_N
    return workload.family in ("identity", "total", "prefix", "all_range")


def per_query_terms(workload, M: np.ndarray | None, F: np.ndarray | None = None) -> np.ndarray:
    """w M wᵀ for every query w of the workload, in the explicit matrix's row order; given a factor F (M = F Fᵀ),
    as the sums of squares ‖w F‖² (:func:`factor_terms`: no cancellation between M's entries)."""
    if F is not None:
        return factor_terms(workload, F)
    if workload.matrix is not None:
        W = workload.matrix
        return np.einsum("ij,ij->i", W @ M, W)
    fam = workload.family
    if fam == "identity":
        return np.diag(M).copy()
    if fam == "total":
        return np.array([M.sum()])
    if fam == "prefix":
        return np.diag(prefix_sums_2d(M, padded=True))[1:].copy()
    if fam == "all_range":
        return range_terms(M)[np.triu_indices(M.shape[0])]
    if fam == "all_predicate":
        return predicate_terms(M)
    raise ValueError(f"per-query terms are not available for workload family {fam!r}.")


def factor_terms(workload, F: np.ndarray) -> np.ndarray:
    """‖w F‖² for every query w, in the explicit matrix's row order: the sums of squares of the query's
    combination of F's rows (for a range, the difference of two prefix sums of them).

    Why: on an ill-conditioned strategy M = F Fᵀ has entries of order 1/s_min², and a query orthogonal to that
    direction sums them to a small number — all ranges' 2-D prefix sums of M gave 8,193 for a variance of 3 at
    κ(A) = 10¹⁰. Here each of the query's components is formed first and squared after, so the error is that of
    F's entries (~|F|·eps each), not of their squares. Cost: all ranges O(n²·r), all predicates O(2ⁿ·r).

    >>> from mmopt import workload
    >>> F = np.array([[1.0, 2.0], [0.0, 1.0], [3.0, 0.0]])
    >>> M = F @ F.T
    >>> bool(np.allclose(factor_terms(workload.all_range(3), F), per_query_terms(workload.all_range(3), M)))
    True
    """
    if workload.matrix is not None:
        WF = workload.matrix @ F
        return np.einsum("ij,ij->i", WF, WF)
    fam = workload.family
    if fam == "identity":
        return np.einsum("ij,ij->i", F, F)
    if fam == "total":
        s = F.sum(axis=0)
        return np.array([float(s @ s)])
    T = np.cumsum(F, axis=0)  # T[b] = Σ_{i≤b} F[i]
    if fam == "prefix":
        return np.einsum("ij,ij->i", T, T)
    if fam == "all_range":
        # range [a, b] is T'[b + 1] − T'[a] with T' = [0; T]; pdist lists the pairs a < b + 1 row-major, the explicit
        # matrix's order, each as a sum of squared differences in C (4× the numpy loop: 1.9 s at n = r = 2,048)
        from scipy.spatial.distance import pdist
        rows = np.ascontiguousarray(np.vstack([np.zeros((1, F.shape[1])), T]))  # (QR's factor is Fortran-ordered:
        return pdist(rows, "sqeuclidean")                                         # strided rows made it 9× slower)
    if fam == "all_predicate":
        n = F.shape[0]
        a = n // 2
        low, high = _bits(a) @ F[:a], _bits(n - a) @ F[a:]
        out = np.empty((2 ** (n - a), 2 ** a))
        for h in range(2 ** (n - a)):  # code = low + 2^a·high, as predicate_terms
            D = low + high[h]
            out[h] = np.einsum("ij,ij->i", D, D)
        return out.reshape(-1)[1:]
    raise ValueError(f"per-query terms are not available for workload family {fam!r}.")


def max_term(workload, M: np.ndarray | None, terms: np.ndarray | None,
             F: np.ndarray | None = None) -> tuple[float, float] | None:
    """(largest term found, proven upper bound); equal when exact. None for Gram-only workloads."""
    if terms is not None:
        mx = float(np.max(terms))
        return mx, mx
    fam = workload.family
    if workload.matrix is not None or fam in ("identity", "total", "prefix"):
        mx = float(np.max(per_query_terms(workload, M, F)))
        return mx, mx
    if fam == "all_range":
        V = range_terms(M)
        mx = float(np.max(V[np.triu_indices(M.shape[0])]))
        return mx, mx
    if fam == "all_predicate":
        if M.shape[0] <= MAX_EXACT_PREDICATE_N:
            mx = float(np.max(predicate_terms(M)))
            return mx, mx
        return predicate_max_bounds(M)
    return None


def range_terms(M: np.ndarray) -> np.ndarray:
    """V[a, b] = Σ_{a≤i,j≤b} M_ij for a ≤ b (upper triangle; the lower triangle is meaningless).

    Uses 2-D prefix sums S: V[a,b] = S[b+1,b+1] − 2 S[a,b+1] + S[a,a] (M symmetric), O(n²).
    """
    S = prefix_sums_2d(M, padded=True)
    d = np.diag(S)
    V = -2.0 * S[:-1, 1:]
    V += d[1:][None, :]
    V += d[:-1][:, None]
    return V


def predicate_terms(M: np.ndarray) -> np.ndarray:
    """w M wᵀ for all 2ⁿ−1 non-empty 0/1 vectors w, ordered by their integer code (n ≤ 22).

    Splits w = (low bits, high bits): wMwᵀ = l M_LL lᵀ + 2 l M_LH hᵀ + h M_HH hᵀ, one matrix product.
    """
    n = M.shape[0]
    a = n // 2
    L = _bits(a)
    H = _bits(n - a)
    qL = np.einsum("ij,ij->i", L @ M[:a, :a], L)
    qH = np.einsum("ij,ij->i", H @ M[a:, a:], H)
    cross = (L @ M[:a, a:]) @ H.T  # 2^a × 2^(n−a)
    T = qL[:, None] + 2.0 * cross + qH[None, :]
    return T.T.reshape(-1)[1:]  # code = low + 2^a·high; drop the empty query


def _bits(k: int) -> np.ndarray:
    codes = np.arange(2**k, dtype=np.int64)
    return ((codes[:, None] >> np.arange(k)) & 1).astype(np.float64)


def predicate_max_bounds(M: np.ndarray, *, seed: int = 0) -> tuple[float, float]:
    """Bounds on max over 0/1 vectors w of w M wᵀ, for n too large to enumerate.

    Lower bound: the best query found by greedy single-cell flips from structured and random
    starts (every value is attained by a real query). Upper bound: min(n·λ_max(M), Σ_ij max(M_ij, 0)).
    """
    n = M.shape[0]
    rng = np.random.default_rng(seed)
    lam_max, top = _top_eigenpair(M)
    starts = [np.ones(n), (np.arange(n) % 2 == 0).astype(float), (top > 0).astype(float), (top < 0).astype(float)]
    starts += [rng.integers(0, 2, n).astype(float) for _ in range(4)]
    best = max(float(np.max(np.diag(M))), 0.0)
    for w in starts:
        best = max(best, _greedy_flips(M, w))
    upper = min(n * lam_max, float(np.sum(np.clip(M, 0.0, None))))
    return best, max(upper, best)


def _top_eigenpair(M: np.ndarray) -> tuple[float, np.ndarray]:
    # Lanczos needs O(n²) per step, against O(n³) for a full eigh: seconds instead of minutes at n = 4096.
    from scipy.sparse.linalg import ArpackNoConvergence, eigsh

    try:
        lam, vec = eigsh(M, k=1, which="LA", tol=1e-10, v0=np.ones(M.shape[0]))
        return float(lam[0]), vec[:, 0]
    except ArpackNoConvergence:
        lam, vec = np.linalg.eigh(M)
        return float(lam[-1]), vec[:, -1]


def _greedy_flips(M: np.ndarray, w: np.ndarray, max_steps: int | None = None) -> float:
    w = w.copy()
    Mw = M @ w
    value = float(w @ Mw)
    d = np.diag(M)
    for _ in range(max_steps or 4 * len(w)):
        sign = 1.0 - 2.0 * w  # +1 adds the cell, −1 removes it
        gain = sign * 2.0 * Mw + d
        j = int(np.argmax(gain))
        if gain[j] <= 1e-12 * max(abs(value), 1.0):
            break
        value += float(gain[j])
        Mw += sign[j] * M[:, j]
        w[j] += sign[j]
    return value if np.any(w) else 0.0
