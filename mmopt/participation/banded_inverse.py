"""Workloads whose inverse Gram is banded, the structure :mod:`mmopt.participation.tridiagonal` runs on.

Notation: see README; G = WᵀW (n×n), steps 0 … n−1. Three kinds:

* prefix sums and all ranges: G⁻¹ tridiagonal in closed form (:func:`mmopt.toeplitz.dual.inverse_gram`);
* a lower-triangular Toeplitz W = T(a) whose inverse T(p) is a polynomial of degree w (heavy-ball momentum:
  a(x) = 1/((1 − x)(1 − βx)), p = (1, −(1 + β), β), w = 2). Then G⁻¹ = T(p) T(p)ᵀ has bandwidth w:

      (G⁻¹)_{s, s+d} = Σ_{i=0}^{min(s, w−d)} p_i p_{i+d}      (0 ≤ d ≤ w),

  every truncation T(a[:m]) is the same workload on m steps (its inverse T(p[:m])), and G itself is dense.

The bands only drive the optimiser; the certificate is computed from the dense G (:meth:`InverseBands.dense`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

__all__ = ["MAX_WIDTH", "InverseBands", "of_kind", "of_toeplitz", "toeplitz_gram"]

#: the widest inverse taken (a wider one is left to the dense solver)
MAX_WIDTH = 8


@dataclass(frozen=True)
class InverseBands:
    """G⁻¹'s bands for a workload kind at any n (module docstring)."""

    kind: str  # "prefix", "all_range" or "toeplitz"
    coefficients: np.ndarray | None = field(default=None, repr=False)  # a (toeplitz): W's first column
    inverse: np.ndarray | None = field(default=None, repr=False)  # p (toeplitz): W⁻¹'s first column, w + 1 long

    @property
    def width(self) -> int:
        """w: G⁻¹_{st} = 0 for |s − t| > w."""
        return 1 if self.inverse is None else len(self.inverse) - 1

    def bands(self, n: int) -> list[np.ndarray]:
        """[d_0, …, d_w], d_d[s] = (G⁻¹)_{s, s+d} (length n − d).

        >>> spec = of_toeplitz(np.arange(1.0, 9.0))      # a(x) = 1/(1 − x)²: p = (1, −2, 1)
        >>> B = spec.bands(8)
        >>> Gi = sum(np.diag(b, d) + (np.diag(b, -d) if d else 0) for d, b in enumerate(B))
        >>> spec.width, bool(np.allclose(Gi @ spec.dense(8), np.eye(8)))
        (2, True)
        """
        if self.inverse is None:
            from mmopt.toeplitz.dual import inverse_gram
            return list(inverse_gram(self.kind, n))
        p, w = self.inverse, self.width
        out = []
        for d in range(w + 1):
            terms = np.cumsum(p[:w + 1 - d] * p[d:])  # Σ_{i ≤ j} p_i p_{i+d}
            s = np.arange(n - d)
            out.append(terms[np.minimum(s, w - d)])
        return out

    def dense(self, n: int) -> np.ndarray:
        """G = WᵀW on n steps."""
        if self.inverse is None:
            from mmopt.dense import gram_operator
            return (gram_operator.prefix_gram(n) if self.kind == "prefix" else gram_operator.all_range_gram(n)).dense()
        return toeplitz_gram(self.coefficients, n)

    def matmat(self, n: int):
        """M ↦ G M on n steps (O(n²·cols) for prefix sums and all ranges)."""
        if self.inverse is None:
            from mmopt.dense import gram_operator
            return (gram_operator.prefix_gram(n) if self.kind == "prefix" else gram_operator.all_range_gram(n)).matmat
        return self.dense(n).__matmul__

    def smallest_eigenvalue(self, n: int) -> float:
        """λ_min(G⁻¹) (banded eigensolver, O(n·w²))."""
        B = self.bands(n)
        lower = np.zeros((len(B), n))
        for d, b in enumerate(B):
            lower[d, :n - d] = b
        return float(scipy.linalg.eigvals_banded(lower, lower=True, select="i", select_range=(0, 0))[0])


def toeplitz_gram(coefficients: np.ndarray, n: int) -> np.ndarray:
    """G = WᵀW of W = T(a[:n]), the lower-triangular Toeplitz workload on its first n steps."""
    W = scipy.linalg.toeplitz(coefficients[:n], np.zeros(n))
    return W.T @ W


def of_kind(kind: str) -> InverseBands:
    """Prefix sums or all ranges."""
    return InverseBands(kind)


def of_toeplitz(coefficients) -> InverseBands | None:
    """W = T(a) lower-triangular Toeplitz: its bands if T(a)⁻¹ = T(p) with p of degree ≤ :data:`MAX_WIDTH` (entries
    past it below 10⁻¹³ of the largest, relative), else None.

    >>> from mmopt.participation import momentum
    >>> spec = of_toeplitz(momentum(64, 0.9).matrix[:, 0])
    >>> spec.width, np.round(spec.inverse, 12).tolist()
    (2, [1.0, -1.9, 0.9])
    """
    a = np.asarray(coefficients, dtype=float)
    n = len(a)
    if n == 0 or a[0] == 0:
        return None
    e = np.zeros(n)
    e[0] = 1.0
    p = scipy.linalg.solve_triangular(scipy.linalg.toeplitz(a, np.zeros(n)), e, lower=True, check_finite=False)
    big = np.flatnonzero(np.abs(p) > 1e-13 * np.abs(p).max())
    w = int(big[-1])
    if w > MAX_WIDTH or w >= n // 2:
        return None
    return InverseBands("toeplitz", a.copy(), p[:w + 1].copy())
