"""Augmentation (§5.3, Theorem 5.27): add measurements that use spare sensitivity, never raising Δ.

Notation: see README. Adding rows B to a strategy A can only shrink the profile,
w (A'ᵀA')⁻¹ wᵀ ≤ w (AᵀA)⁻¹ wᵀ for A' = [A; B], with equality iff B (AᵀA)⁻¹ wᵀ = 0 (Woodbury).
So if B uses only the slack Δ − ‖A e_j‖₁ of "deficient" columns, no query's error grows.

The paper says completing deficient columns "is guaranteed to strictly improve accuracy for any query
with a non-zero coefficient in an augmented column". That is false in general (spec §10.1): the
exact condition is B (AᵀA)⁻¹ wᵀ ≠ 0. Completing H₄ minus its row [0,0,1,1] with B = [0,0,1,1] leaves
w = x₃ − x₄ unchanged. :func:`strictly_improved` gives the exact test.
"""

from __future__ import annotations

import numpy as np

from mmopt import _validation as v
from mmopt.error import error_profile
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

    Examples
    --------
    >>> A = Strategy(np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))
    >>> augment(A).matrix.tolist()   # columns 2 and 3 had slack 1 and 2
    [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]
    """
    caller = "augment"
    if not isinstance(strategy, Strategy):
        raise TypeError(f"The 'strategy' parameter of {caller} must be a Strategy. Got {type(strategy).__name__}.")
    v.check_choice(norm, name="norm", caller=caller, choices=("l1", "l2"))
    A = strategy.matrix
    n = A.shape[1]
    delta = strategy.sensitivity(norm)
    if rows is None:
        cols = np.sum(np.abs(A), axis=0) if norm == "l1" else np.sum(A * A, axis=0)
        full = delta if norm == "l1" else delta**2
        slack = np.clip(full - cols, 0.0, None)
        deficient = np.flatnonzero(slack > 1e-12 * full)
        B = np.zeros((deficient.size, n))
        B[np.arange(deficient.size), deficient] = slack[deficient] if norm == "l1" else np.sqrt(slack[deficient])
    else:
        B = v.check_matrix(rows, name="rows", caller=caller)
        if B.shape[1] != n:
            raise ValueError(f"The 'rows' parameter of {caller} must have n={n} columns. Got shape {B.shape}.")
    out = Strategy(np.vstack([A, B]), f"{strategy.name}+aug")
    if out.sensitivity(norm) > delta * (1 + 1e-12):
        raise ValueError(
            f"{caller}: the given rows raise the {norm} sensitivity from {delta:.6g} to "
            f"{out.sensitivity(norm):.6g}. Scale them down, or use rows=None to fill only the slack."
        )
    return out


def strictly_improved(strategy: Strategy, rows, query) -> bool:
    """Whether appending ``rows`` B strictly lowers the profile term of ``query`` w.

    Exact condition from Theorem 5.27's equality clause: B (AᵀA)⁻¹ wᵀ ≠ 0 (A full rank).
    """
    caller = "strictly_improved"
    B = v.check_matrix(rows, name="rows", caller=caller)
    w = v.check_vector(query, name="query", caller=caller, length=strategy.domain_size)
    z = B @ (error_profile(strategy).matrix @ w)
    return bool(np.linalg.norm(z) > 1e-10 * max(np.linalg.norm(B) * np.linalg.norm(w), 1e-300))
