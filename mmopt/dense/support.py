"""Whether a strategy supports a workload (Def. 3.1): the share of the workload on A's numerical null space, for the
Gram and for each stored query, against the Gram's own round-off.

Notation: see :mod:`mmopt.dense.profile`, whose :class:`~mmopt.dense.profile.Profile` carries A's null basis N
(the directions its rank rule cut).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

__all__ = ["gram_direction_leak", "gram_tolerance", "row_leak", "support_leak", "support_tolerance", "unmeasured_cells",
           "unsupported"]

_EPS = np.finfo(float).eps


def support_tolerance(n: int) -> float:
    """The share of a Gram's trace (n×n) that may lie on A's numerical null space in a supported workload:
    100·n·eps. Forming G = WᵀW in floating point puts round-off of order √m·eps·tr G (m queries) on any
    direction, and the null basis's own error enters only to second order; supported workloads in the test
    suite leak at most 7·10⁻¹⁷ (0.02·n·eps). A fixed share let a query outside A's row space through when the
    rest of the workload outweighed it: e₇ beside 10⁵·(e₀ … e₆) leaks 1.4·10⁻¹¹ of the trace, under the 10⁻⁹
    used before, and was answered with variance 0 (its error x₇², unbounded).

    >>> support_tolerance(8) < 1.4e-11 < 1e-9
    True
    """
    return float(100 * n * _EPS)


def support_leak(G: np.ndarray, prof) -> float:
    """Share of tr(G) on A's numerical null space: 0 when A supports G (Def. 3.1); compare it with
    :func:`support_tolerance` (G's own round-off)."""
    if prof.null_basis.shape[1] == 0:
        return 0.0
    N = prof.null_basis
    return float(np.sum(N * (G @ N))) / max(float(np.trace(G)), 1e-300)


def unsupported(G: np.ndarray, prof, rows=None, matrix=None) -> tuple[bool, float]:
    """(whether A fails to support the workload, the largest share found): G's share on A's null space
    (:func:`support_leak`) and, with the workload's ``rows`` (W, when stored), each query's own share
    ‖w N‖²/‖w‖², both against :func:`support_tolerance`: G's share alone let a light query outside the row space
    through beside a heavy one (weights 10⁷ : 1 leak 10⁻¹⁴ of tr G). Without rows, G's eigendirections above its
    round-off are tested in their place (:func:`gram_direction_leak`).

    The tolerance is G's round-off, not the null space's: an exact row could be held to the computed null space's
    angle (~eps·σ₁/σ_r, which would refuse w = e₀ + 10⁻⁷·e₃ against A = I[:3]), but strategies built from an
    optimiser's Gram span W's row space only to the solver's accuracy (10⁻¹⁰ for the max-variance minimax on a
    random 6×8 W), and that rule refused them. A query with less than √(100·n·eps) of its norm off the row space
    is therefore taken as supported.

    The strategy's ``matrix`` (A, any scale), when given, settles one case exactly: a cell A never measures
    (a zero column) that some query uses (G_jj > 0) is off A's row space, however small its share of tr G (beside
    a 10⁷-weighted query it was below round-off, and evaluate returned 5·10¹⁴ for a Gram-only workload).

    >>> from mmopt.dense.profile import profile_of_matrix
    >>> A = np.eye(4)[:3]
    >>> W = np.array([[1e7, 0, 0, 0], [0, 0, 0, 1.0]])   # e₃ is never measured; its share of tr G is 10⁻¹⁴
    >>> unsupported(W.T @ W, profile_of_matrix(A), W)[0], unsupported(W.T @ W, profile_of_matrix(A))[0]
    (True, True)
    """
    n = G.shape[0]
    leak = support_leak(G, prof)
    if leak > support_tolerance(n) or prof.null_basis.shape[1] == 0:
        return bool(leak > support_tolerance(n)), leak
    if matrix is not None:  # with rows too: w = [1, 10⁻⁸] against A = [1, 0] passed the share test, error 2 (an
        # auditor's probe) where the Gram-only twin was refused; its answer is off by 10⁻⁸·x₁, unbounded
        unmeasured = unmeasured_cells(matrix, np.diag(G))
        if np.any(unmeasured):
            return True, max(leak, float(np.diag(G)[unmeasured].sum() / np.trace(G)))
    if rows is None:  # a Gram alone: G's largest weight on A's null space, against its largest eigenvalue
        share = gram_direction_leak(G, prof.null_basis)
        return bool(share > gram_tolerance(n)), max(leak, share)
    share = row_leak(prof.null_basis, rows)
    return bool(share > support_tolerance(n)), max(leak, share)


def gram_tolerance(n: int) -> float:
    """10·n·eps: the largest ‖NᵀGN‖₂/λ_max(G) of a supported Gram-only workload (:func:`gram_direction_leak`).
    fl(WᵀW)'s round-off eigenvalues stay below 0.2·n·eps·λ_max (200 random rank-deficient W, 1–30 queries, 2–60 cells,
    row scales e^±5); the weight a supported G puts on N is of that size."""
    return float(10 * n * _EPS)


def gram_direction_leak(G: np.ndarray, N: np.ndarray) -> float:
    """‖NᵀGN‖₂ / λ_max(G): G's largest weight on a direction of A's null space, against G's scale — the row test
    of a Gram-only workload (compare with :func:`gram_tolerance`).

    G's share of its trace alone let a light direction through beside heavy ones (W = diag(10⁷, 10⁷, 1)·Qᵀ, a
    rotation, against A = Q[:, :2]ᵀ: share 5·10⁻¹⁵, evaluate 2.4·10¹⁴ where the error is unbounded): here it weighs
    10⁻¹⁴ of λ_max, over 10·n·eps. Testing G's eigendirections above the cut-off instead (as this function first
    did) relied on eigenvectors that are accurate only to ~eps·λ_max/λ just above it: a supported moment workload
    (rank 10 on 32 cells) leaked 2.7·10⁻⁷ through them and was refused even against A = W (a helper's audit); its
    weight on N is 2·10⁻²⁰·λ_max. This test needs no eigenvector of G.

    >>> Q = np.linalg.qr(np.arange(9.0).reshape(3, 3) ** 2 + np.eye(3))[0]
    >>> W = np.diag([1e7, 1e7, 1.0]) @ Q.T
    >>> gram_direction_leak(W.T @ W, Q[:, 2:]) > gram_tolerance(3)
    True
    """
    top = float(np.linalg.eigvalsh(G)[-1])
    if N.shape[1] == 0 or not top > 0:
        return 0.0
    M = N.T @ G @ N
    return float(np.linalg.eigvalsh((M + M.T) / 2)[-1]) / top


def unmeasured_cells(matrix, gram_diagonal: np.ndarray) -> np.ndarray:
    """Cells a query uses (G_jj > 0) that A never measures (an exactly zero column): off A's row space however
    small their share, which round-off cannot make up (a strategy's zero column is exact)."""
    return ~np.any(np.asarray(matrix) != 0, axis=0) & (np.asarray(gram_diagonal) > 0)


def row_leak(N: np.ndarray, rows) -> float:
    """max over the rows w (dense or scipy.sparse, all-zero rows skipped) of ‖w N‖²/‖w‖²."""
    if sparse.issparse(rows):  # never densified: W N is m×r, the row norms a sparse sum
        W = sparse.csr_matrix(rows, dtype=float)
        top = np.asarray(abs(W).max(axis=1).todense()).ravel()
        keep = top > 0
        W = sparse.diags(1.0 / top[keep]) @ W[keep]
        norms = np.asarray(W.multiply(W).sum(axis=1)).ravel()
    else:
        W = np.asarray(rows, dtype=float)
        top = np.abs(W).max(axis=1)
        W = W[top > 0] / top[top > 0, None]  # each row scaled to max |w| = 1: no overflow in ‖w‖²
        norms = np.sum(W * W, axis=1)
    return float((np.sum(np.asarray(W @ N) ** 2, axis=1) / norms).max(initial=0.0))
