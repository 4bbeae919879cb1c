"""Least squares for the matrix mechanism: x̂ = A⁺y from a factorisation of A, never forming A⁺.

Notation: see README. Def. 3.2 estimates x̂ = A⁺y, the (minimum-norm) least-squares solution of
min ‖A x̂ − y‖₂. :func:`factorize` keeps a QR factorisation of A when R is well conditioned, else an SVD
truncated by the rank rule of :mod:`mmopt.dense.profile`; one factorisation serves every noise draw.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from mmopt._base import validation as v
from mmopt.dense._error_common import as_strategy
from mmopt.dense.profile import QR_MAX_CONDITION, numerical_rank

__all__ = ["LeastSquares", "factorize"]


@dataclass(frozen=True, eq=False)
class LeastSquares:
    """A reusable factorisation of A solving min ‖A x̂ − y‖₂ (minimum-norm when rank-deficient).

    ``method="qr"``: ``left`` = Q (p×n), ``right`` = R (n×n), x̂ = R⁻¹Qᵀy.
    ``method="svd"``: ``left`` = U_r (p×r), ``right`` = V_r S_r⁻¹ (n×r), x̂ = V_r S_r⁻¹ U_rᵀ y.
    """

    method: str
    rank: int
    left: np.ndarray = field(repr=False)
    right: np.ndarray = field(repr=False)

    def solve(self, y) -> np.ndarray:
        """x̂ for y of shape (p,), or for each row of y of shape (k, p) (one solve per noise draw)."""
        p = self.left.shape[0]
        y = v.check_matrix(y, name="y", caller="LeastSquares.solve") if np.ndim(y) == 2 else \
            v.check_vector(y, name="y", caller="LeastSquares.solve")
        if y.shape[-1] != p:
            raise ValueError(f"The 'y' parameter of LeastSquares.solve must have shape ({p},) or (k, {p}). "
                             f"Got shape {y.shape}.")
        z = y @ self.left
        if self.method == "qr":
            return linalg.solve_triangular(self.right, z.T, check_finite=False).T
        return z @ self.right.T


def factorize(strategy) -> LeastSquares:
    """Factorise A once for :meth:`LeastSquares.solve` (Def. 3.2: x̂ = A⁺y, never forming A⁺).

    Examples
    --------
    >>> from mmopt import strategy
    >>> ls = factorize(strategy.hierarchical(4))
    >>> ls.method, ls.rank, np.round(ls.solve([4., 2., 2., 1., 1., 1., 1.]), 12).tolist()
    ('qr', 4, [1.0, 1.0, 1.0, 1.0])
    """
    strategy = as_strategy(strategy, "factorize")
    cached = _FACTORS.get(strategy)
    if cached is None:
        cached = _factorize(strategy.matrix)
        for M in (cached.left, cached.right):
            M.setflags(write=False)  # shared by every later call: nobody may change it
        _FACTORS[strategy] = cached
    return cached


# A Strategy's matrix is read-only, so its factorisation can be reused by every call (Monte-Carlo studies call
# the mechanism thousands of times with one strategy; QR of H₂ at n = 4,096 takes ~11 s). Weak keys: the
# cache never keeps a strategy alive.
_FACTORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _factorize(A: np.ndarray) -> LeastSquares:
    p, n = A.shape
    if p >= n:
        Q, R = linalg.qr(A, mode="economic", check_finite=False)
        rcond, info = lapack.dtrcon(R, norm="1", uplo="U", diag="N")
        if info == 0 and rcond * QR_MAX_CONDITION > 1.0:
            return LeastSquares("qr", n, Q, R)
    U, s, Vt = linalg.svd(A, full_matrices=False, check_finite=False)
    r = numerical_rank(s, A.shape)
    return LeastSquares("svd", r, U[:, :r].copy(), Vt[:r].T / s[:r])
