"""Augmentation (§5.3, Theorem 5.27): add measurements that use spare sensitivity, never raising Δ.

Notation: see README. Adding rows B to a strategy A can only shrink the profile,
w (A'ᵀA')⁻¹ wᵀ ≤ w (AᵀA)⁻¹ wᵀ for A' = [A; B], with equality iff B (AᵀA)⁻¹ wᵀ = 0 (Woodbury).
So if B uses only the slack Δ − ‖A e_j‖₁ of "deficient" columns, no query's error grows.

The paper says completing deficient columns "is guaranteed to strictly improve accuracy for any query
with a non-zero coefficient in an augmented column". That is false in general (docs/paper_notes.md §7.1): the
exact condition is B (AᵀA)⁻¹ wᵀ ≠ 0. Completing H₄ minus its row [0,0,1,1] with B = [0,0,1,1] leaves
w = x₃ − x₄ unchanged. :func:`strictly_improved` gives the exact test.
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v
from mmopt.dense._strategy_core import column_norm_parts, norm_from_parts
from mmopt.dense.support import unsupported
from mmopt.error import _as_strategy, error_profile
from mmopt.strategy import Strategy


def augment(strategy: Strategy, *, rows=None, norm: str = "l1") -> Strategy:
    """Complete the deficient columns of A without raising its sensitivity (Theorem 5.27).

    Parameters
    ----------
    strategy : Strategy
        A (p×n).
    rows : array_like of shape (k, n) or None, default=None
        Rows B to append. None appends one row per deficient column j, with the single entry
        Δ − ‖A e_j‖ (L1) or √(Δ² − ‖A e_j‖₂²) (L2), so that every column reaches Δ exactly.
    norm : {"l1", "l2"}, default="l1"
        The sensitivity that must not grow.

    Returns
    -------
    Strategy
        [A; B], with the same sensitivity and an error profile ⪯ A's.

    Raises
    ------
    ValueError
        If the given ``rows`` would raise the sensitivity.

    Notes
    -----
    The slack is computed on A·2⁻ᵉ (max entry in [0.5, 1), an exact scaling) and the new entries scaled
    back by 2ᵉ, so strategies of any finite scale (10⁻¹⁷⁰·I, 10²⁰⁰·H) are completed correctly.

    Examples
    --------
    >>> A = Strategy(np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))
    >>> augment(A).matrix.tolist()   # columns 2 and 3 had slack 1 and 2
    [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]
    """
    caller = "augment"
    strategy = _as_strategy(strategy, caller)  # a matrix, an implicit or Toeplitz strategy (≤ 4,096 cells) too
    v.check_choice(norm, name="norm", caller=caller, choices=("l1", "l2"))
    A = strategy.matrix
    p, n = A.shape
    delta = strategy.sensitivity(norm)
    if rows is None:
        v.check_allocation(2 * p * n + n * n, what=f"the augmented strategy (up to {p + n}×{n})", caller=caller)
        e = int(np.frexp(float(np.max(np.abs(A))))[1])
        As = np.ldexp(A, -e)
        cols = np.sum(np.abs(As), axis=0) if norm == "l1" else np.sum(As * As, axis=0)
        full = float(np.max(cols))
        slack = np.clip(full - cols, 0.0, None)
        deficient = np.flatnonzero(slack > 1e-12 * full)
        B = np.zeros((deficient.size, n))
        fill = slack[deficient] if norm == "l1" else np.sqrt(slack[deficient])
        B[np.arange(deficient.size), deficient] = np.ldexp(fill, e)
        B = _within(A, B, deficient, delta, norm)
    else:
        B = v.check_matrix(rows, name="rows", caller=caller)
        if B.shape[1] != n:
            raise ValueError(f"The 'rows' parameter of {caller} must have n={n} columns. Got shape {B.shape}.")
        v.check_allocation((p + B.shape[0]) * n, what=f"the augmented strategy ({p + B.shape[0]}×{n})",
                           caller=caller)
    out = Strategy(np.vstack([A, B]), f"{strategy.name}+aug")
    if out.sensitivity(norm) > delta:  # strictly: 1e-12 of slack let rows raise Δ by up to that (the promise is none)
        raise ValueError(
            f"{caller}: the given rows raise the {norm} sensitivity from {delta!r} to "
            f"{out.sensitivity(norm)!r}. Scale them down, or use rows=None to fill only the slack."
        )
    return out


def _within(A: np.ndarray, B: np.ndarray, deficient: np.ndarray, delta: float, norm: str) -> np.ndarray:
    """B with each filled entry stepped down one ulp at a time while its column of [A; B] exceeds Δ: fl(c + (Δ − c))
    can land one ulp above Δ (428 of 6,000 random strategies), and "never raising Δ" is the promise."""
    rows = np.arange(deficient.size)
    for _ in range(8 if deficient.size else 0):
        c, k = column_norm_parts(np.vstack([A, B]), norm)  # the whole matrix: its scale sets the rounding
        over = np.array([norm_from_parts(float(cj), k, norm, caller="augment") > delta for cj in c[deficient]])
        if not over.any():
            break
        B[rows[over], deficient[over]] = np.nextafter(B[rows[over], deficient[over]], 0.0)
    return B


def strictly_improved(strategy, rows, query) -> bool:
    """Whether appending ``rows`` B strictly lowers the profile term w (AᵀA)⁺ wᵀ of ``query`` w (its error at fixed Δ).

    * w not supported by A (infinite error): True iff [A; B] supports it (∞ → finite).
    * w supported by A: Error(w) = min{‖u‖² : Aᵀu = w} stays put iff the optimum u₀ = A X⁺ wᵀ
      (X = AᵀA) is still optimal for [A; B], i.e. iff Bλ = 0 for some λ ∈ X⁺wᵀ + null(A). So the
      error strictly drops iff B X⁺ wᵀ ∉ range(B N), N a basis of null(A). For full-rank A this is
      Theorem 5.27's equality clause, B (AᵀA)⁻¹ wᵀ ≠ 0.

    The test is invariant to scaling A and B together, so both are scaled by the same power of two
    first; "≠ 0" means above 1e-10·‖B‖·‖X⁺wᵀ‖ (relative, hence scale-free), and directions of B N
    below 1e-10·‖B‖ are round-off.

    Examples
    --------
    >>> strictly_improved(Strategy([[1.0, 0.0]]), [[0.0, 1.0]], [0.0, 1.0])   # unsupported → supported
    True
    >>> strictly_improved(np.eye(2), [[0.0, 1.0]], [1.0, 0.0])                 # B X⁻¹ w = 0
    False
    """
    caller = "strictly_improved"
    A = _as_strategy(strategy, caller).matrix
    n = A.shape[1]
    B = v.check_matrix(rows, name="rows", caller=caller)
    if B.shape[1] != n:
        raise ValueError(f"The 'rows' parameter of {caller} must have n={n} columns. Got shape {B.shape}.")
    w = v.check_vector(query, name="query", caller=caller, length=n)
    if not np.any(w) or not np.any(B):
        return False
    e = int(np.frexp(max(float(np.max(np.abs(A))), float(np.max(np.abs(B)))))[1])
    As, Bs = np.ldexp(A, -e), np.ldexp(B, -e)
    prof = error_profile(As)
    if not _supported(prof, w):
        return _supported(error_profile(np.vstack([As, Bs])), w)
    Mw = prof.matrix @ w
    z = Bs @ Mw
    tol = 1e-10 * np.linalg.norm(Bs)
    if prof.rank < n:  # remove the part of z that a null-space shift of λ can cancel
        U, s, _ = np.linalg.svd(Bs @ prof.null_basis, full_matrices=False)
        U = U[:, s > tol]  # N is orthonormal, so ‖BN‖ ≤ ‖B‖: smaller singular values are round-off
        z = z - U @ (U.T @ z)
    return bool(np.linalg.norm(z) > tol * np.linalg.norm(Mw))


def _supported(prof, w: np.ndarray) -> bool:
    """w lies in A's row space, by the rule of query_error (:func:`mmopt.dense.support.unsupported`)."""
    return not np.any(w) or not unsupported(np.outer(w, w), prof, w[None, :])[0]
