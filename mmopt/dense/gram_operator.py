"""The workload Gram G = WᵀW as an operator: products G V and diag G without an n×n matrix where W is structured.

Notation: see README. A local search over p-Identity strategies needs G only through products G V (V of
shape n×k, k ≤ p) and diag G (:mod:`mmopt.search.pidentity`). For the prefix and all-range workloads both cost
O(nk): their Grams are *semiseparable*, G_ij = a_min(i,j) · b_max(i,j) (1-indexed) with

* prefix sums: a_k = 1, b_k = n + 1 − k (G_ij = n + 1 − max(i, j));
* all ranges: a_k = k, b_k = n + 1 − k (G_ij = min(i, j)(n + 1 − max(i, j)));

so (G v)_i = b_i Σ_{j ≤ i} a_j v_j + a_i Σ_{j > i} b_j v_j, two cumulative sums. A workload with a known
(sparse or small) W gives G V = Wᵀ(W V); any other Gram is used densely. Every operator carries a positive
``scale`` (mmopt.optimize works on G scaled to mean diagonal 1).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from mmopt._base import validation as v
from mmopt._base.cumulative import cumulative_rows

__all__ = ["DenseGram", "FactoredGram", "GramOperator", "SemiseparableGram", "all_range_gram", "as_gram_operator",
           "prefix_gram"]


@runtime_checkable
class GramOperator(Protocol):
    """What a p-Identity search needs of G: its size n, G V for V of shape (n, k), V G for V of shape (k, n), and
    diag G (G is symmetric, so V G = (G Vᵀ)ᵀ; ``rmatmat`` exists because the search holds Θ as p×n rows, and
    the semiseparable sums run 7× faster along contiguous rows than down strided columns at n = 8,192)."""

    n: int

    def matmat(self, V: np.ndarray) -> np.ndarray: ...

    def rmatmat(self, V: np.ndarray) -> np.ndarray: ...

    def diagonal(self) -> np.ndarray: ...


@dataclass(frozen=True, eq=False)
class DenseGram:
    """G held as an n×n array: G V costs O(n²k)."""

    G: np.ndarray
    scale: float = 1.0

    @property
    def n(self) -> int:
        return self.G.shape[0]

    def matmat(self, V: np.ndarray) -> np.ndarray:
        return self.scale * (self.G @ V)

    def rmatmat(self, V: np.ndarray) -> np.ndarray:
        return self.scale * (V @ self.G)

    def diagonal(self) -> np.ndarray:
        return self.scale * np.diag(self.G).copy()

    def scaled(self, c: float) -> DenseGram:
        return dataclasses.replace(self, scale=self.scale * c)


@dataclass(frozen=True, eq=False)
class SemiseparableGram:
    """G_ij = scale · a_min(i,j) · b_max(i,j): G V in O(nk) by two cumulative sums (see the module docstring)."""

    a: np.ndarray
    b: np.ndarray
    scale: float = 1.0
    name: str = "semiseparable"

    @property
    def n(self) -> int:
        return self.a.shape[0]

    def matmat(self, V: np.ndarray) -> np.ndarray:
        V = np.asarray(V, dtype=float)
        vec = V.ndim == 1
        V = V[:, None] if vec else V
        a, b = self.a[:, None], self.b[:, None]
        head = cumulative_rows(a * V)  # Σ_{j ≤ i} a_j v_j
        tail = np.zeros_like(V)  # Σ_{j > i} b_j v_j
        tail[:-1] = cumulative_rows((b * V)[1:], reverse=True)
        out = self.scale * (b * head + a * tail)
        return out[:, 0] if vec else out

    def rmatmat(self, V: np.ndarray) -> np.ndarray:
        """V G for V of shape (k, n), summed along rows: (V G)_j = b_j Σ_{i ≤ j} a_i V_i + a_j Σ_{i > j} b_i V_i."""
        V = np.asarray(V, dtype=float)
        if self._is_prefix:  # G = LᵀL with L the prefix-sum matrix: two running sums, nothing else
            head = np.cumsum(V, axis=1)
            out = np.empty_like(head)
            np.cumsum(head[:, ::-1], axis=1, out=out[:, ::-1])
            out *= self.scale
            return out
        # every pass runs along contiguous rows; the tail sums are accumulated from the right (reversed sums, so
        # no cancellation) into their own buffer
        out = np.cumsum(V * self.a, axis=1)
        out *= self.b
        tail = np.empty_like(out)
        np.cumsum((V * self.b)[:, ::-1], axis=1, out=tail[:, ::-1])  # Σ_{i ≥ j} b_i V_i
        tail[:, 1:] *= self.a[:-1]
        out[:, :-1] += tail[:, 1:]
        out *= self.scale
        return out

    @functools.cached_property
    def _is_prefix(self) -> bool:
        """a ≡ 1 and b_k = n + 1 − k: the prefix-sum Gram (2× faster products by two running sums)."""
        return bool(np.all(self.a == 1.0) and np.array_equal(self.b, self.n + 1 - np.arange(1.0, self.n + 1)))

    def diagonal(self) -> np.ndarray:
        return self.scale * self.a * self.b

    def dense(self) -> np.ndarray:
        """The n×n matrix (for tests and small n)."""
        i = np.arange(self.n)
        lo, hi = np.minimum.outer(i, i), np.maximum.outer(i, i)
        return self.scale * self.a[lo] * self.b[hi]

    def scaled(self, c: float) -> SemiseparableGram:
        return dataclasses.replace(self, scale=self.scale * c)


@dataclass(frozen=True, eq=False)
class FactoredGram:
    """G = scale · WᵀW with W (m×n, a dense array or scipy.sparse matrix) known: G V = Wᵀ(W V), O(nnz(W)·k)."""

    W: object
    scale: float = 1.0

    @property
    def n(self) -> int:
        return self.W.shape[1]

    def matmat(self, V: np.ndarray) -> np.ndarray:
        return self.scale * np.asarray(self.W.T @ (self.W @ V))

    def rmatmat(self, V: np.ndarray) -> np.ndarray:
        return self.matmat(np.asarray(V).T).T

    def diagonal(self) -> np.ndarray:
        sq = self.W.multiply(self.W) if hasattr(self.W, "multiply") else np.square(self.W)
        return self.scale * np.asarray(sq.sum(axis=0)).ravel()

    def scaled(self, c: float) -> FactoredGram:
        return dataclasses.replace(self, scale=self.scale * c)


def prefix_gram(n: int) -> SemiseparableGram:
    """G of the n prefix sums, G_ij = n + 1 − max(i, j) (1-indexed), as an O(n) operator.

    Examples
    --------
    >>> G = prefix_gram(3)
    >>> G.dense().tolist()
    [[3.0, 2.0, 1.0], [2.0, 2.0, 1.0], [1.0, 1.0, 1.0]]
    >>> G.matmat(np.ones(3)).tolist()
    [6.0, 5.0, 3.0]
    """
    n = v.check_int(n, name="n", caller="prefix_gram")
    k = np.arange(1.0, n + 1)
    return SemiseparableGram(np.ones(n), n + 1 - k, name="prefix")


def all_range_gram(n: int) -> SemiseparableGram:
    """G of all n(n+1)/2 ranges, G_ij = min(i, j)(n + 1 − max(i, j)) (1-indexed), as an O(n) operator.

    Examples
    --------
    >>> all_range_gram(3).dense().tolist()
    [[3.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 3.0]]
    """
    n = v.check_int(n, name="n", caller="all_range_gram")
    k = np.arange(1.0, n + 1)
    return SemiseparableGram(k, n + 1 - k, name="all_range")


def as_gram_operator(workload) -> GramOperator:
    """The total Gram G = WᵀW of ``workload`` as an operator, structured where the workload is.

    ``workload``: a :class:`~mmopt.toeplitz.StreamWorkload` or a dense :class:`~mmopt.workload.Workload` of
    the prefix or all_range family (O(n) operators, no n×n matrix); a Workload with W known and m·n ≤ n²
    (:class:`FactoredGram`); else the Workload's dense G (:class:`DenseGram`); or an n×n array (dense).
    """
    from mmopt.toeplitz.error import StreamWorkload
    from mmopt.workload import Workload

    builders = {"prefix": prefix_gram, "all_range": all_range_gram}
    if isinstance(workload, StreamWorkload):
        return builders[workload.kind](workload.n)
    if isinstance(workload, Workload):
        n = workload.domain_size
        if workload.family in builders:
            return builders[workload.family](n)
        if workload.matrix is not None and workload.matrix.shape[0] <= n:
            return FactoredGram(workload.matrix)
        return DenseGram(workload.gram)
    if isinstance(workload, np.ndarray):
        return DenseGram(v.check_gram(workload, caller="as_gram_operator"))
    raise TypeError("The 'workload' parameter of as_gram_operator must be a Workload, a StreamWorkload or an n×n "
                    f"array. Got {type(workload).__name__} instead.")
