"""Strategies A (p×n): the queries the matrix mechanism actually measures, and the classic baselines.

Notation: see README. A :class:`Strategy` holds A itself (sensitivity depends on A, not only on
X = AᵀA). Baselines: identity I, hierarchical H_b (any n, any branching b), Haar wavelet Y (§6), the
workload itself, and the canonical square strategy of a Gram matrix (Theorem 4.13).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mmopt import _validation as v

NORMS = ("l1", "l2")


def _psd_eigh(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """eigh of a PSD matrix with round-off eigenvalues (≤ n·eps·λ_max) set to exact zeros.

    Eigenvalues of X are accurate only to ~n·eps·λ_max; below that their square roots (~1e-8) would
    pose as real singular values of a factor A, and the error computed from A has come out *below*
    the proven lower bound.
    """
    lam, V = np.linalg.eigh(X)
    lam[lam <= X.shape[0] * np.finfo(float).eps * max(lam[-1], 0.0)] = 0.0
    return lam, V


@dataclass(frozen=True, eq=False)
class Strategy:
    """A strategy matrix A (p×n).

    Attributes
    ----------
    matrix : ndarray of shape (p, n)
    name : str
        A short label for tables ("H2", "wavelet", "identity", ...).

    Examples
    --------
    >>> H = hierarchical(4)
    >>> H.matrix.shape, H.sensitivity("l1"), round(H.sensitivity("l2") ** 2, 12)
    ((7, 4), 3.0, 3.0)
    """

    matrix: np.ndarray = field(repr=False)
    name: str = "strategy"

    def __post_init__(self) -> None:
        original = self.matrix
        A = v.check_matrix(original, name="matrix", caller="Strategy")
        if A is original or np.shares_memory(A, original):
            A = A.copy()  # never freeze the caller's own array
        if not np.any(A):
            raise ValueError("The 'matrix' parameter of Strategy must have a non-zero entry. Got all zeros.")
        A.setflags(write=False)
        object.__setattr__(self, "matrix", A)

    @classmethod
    def from_gram(cls, gram, *, name: str = "strategy") -> Strategy:
        """The canonical square strategy A = X^{1/2} with AᵀA = X (Theorem 4.13, Q = I).

        Any other strategy with the same Gram has the same error profile; only its sensitivity
        differs (see :func:`mmopt.min_sensitivity`).
        """
        X = v.check_gram(gram, caller="Strategy.from_gram")
        lam, V = _psd_eigh(X)
        return cls((V * np.sqrt(lam)) @ V.T, name)

    @property
    def domain_size(self) -> int:
        """n, the number of columns of A."""
        return self.matrix.shape[1]

    @cached_property
    def gram(self) -> np.ndarray:
        """X = AᵀA."""
        A = self.matrix
        return A.T @ A

    def sensitivity(self, norm: str = "l1") -> float:
        """Largest column norm of A: L1 for ε-DP (Prop. 1), L2 for (ε,δ)-DP (Thm 5.22)."""
        v.check_choice(norm, name="norm", caller="Strategy.sensitivity", choices=NORMS)
        A = self.matrix
        if norm == "l1":
            return float(np.max(np.sum(np.abs(A), axis=0)))
        return float(np.sqrt(np.max(np.sum(A * A, axis=0))))

    def __repr__(self) -> str:
        p, n = self.matrix.shape
        return f"Strategy(name={self.name!r}, shape=({p}, {n}))"


def identity(n: int) -> Strategy:
    """Iₙ: measure every cell once (Δ₁ = 1)."""
    n = v.check_int(n, name="n", caller="identity")
    return Strategy(np.eye(n), "identity")


def hierarchical(n: int, branching: int = 2) -> Strategy:
    """The hierarchical strategy H_b (Hay et al.; §6 of the paper) for any n.

    The root counts all cells; each node's interval is split into ``branching`` near-equal
    children (sizes differ by at most one) down to single cells. Rows are listed breadth-first,
    root first, so ``hierarchical(4)`` is H₄ of Fig. 1. For n = bᵏ, Δ₁ = k + 1.

    Examples
    --------
    >>> hierarchical(4).matrix.astype(int).tolist()[:3]
    [[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1]]
    >>> hierarchical(9, branching=3).sensitivity()
    3.0
    """
    caller = "hierarchical"
    n = v.check_int(n, name="n", caller=caller)
    b = v.check_int(branching, name="branching", caller=caller, low=2)
    intervals, level = [], [(0, n)]
    while level:
        intervals.extend(level)
        nxt = []
        for lo, hi in level:
            if hi - lo > 1:
                k = min(b, hi - lo)
                cuts = [lo + (j * (hi - lo)) // k for j in range(k + 1)]  # integer split: sizes differ by <= 1
                nxt.extend(zip(cuts[:-1], cuts[1:], strict=True))
        level = nxt
    lo, hi = np.array(intervals).T
    cells = np.arange(n)
    A = ((cells >= lo[:, None]) & (cells < hi[:, None])).astype(np.float64)
    return Strategy(A, "H" + str(b))


def wavelet(n: int) -> Strategy:
    """The Haar wavelet strategy Yₙ (Privelet, §6; Appendix E), n a power of two.

    Row 0 is 1ᵀ; then, breadth-first over the dyadic tree, each node has +1 on its left half
    and −1 on its right half (unnormalised, as in the paper), so Δ₁ = log₂n + 1.

    Examples
    --------
    >>> wavelet(4).matrix.astype(int).tolist()
    [[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]]
    """
    n = v.check_int(n, name="n", caller="wavelet")
    if n & (n - 1):
        raise ValueError(
            f"wavelet(n={n}) requires n to be a power of 2. Got n={n}. Pad the domain to "
            f"n={1 << n.bit_length()} with empty cells, or use hierarchical(n), which takes any n."
        )
    rows = [np.ones(n)]
    size = n
    while size > 1:
        for start in range(0, n, size):
            r = np.zeros(n)
            r[start:start + size // 2] = 1.0
            r[start + size // 2:start + size] = -1.0
            rows.append(r)
        size //= 2
    return Strategy(np.array(rows), "wavelet")


def from_workload(workload) -> Strategy:
    """The workload itself as strategy, A = W (needs the explicit W)."""
    from mmopt.workload import Workload

    if not isinstance(workload, Workload):
        raise TypeError(f"The 'workload' parameter of from_workload must be a Workload. Got {type(workload).__name__}.")
    return Strategy(workload.explicit_matrix(), "workload")


def square_root(strategy: Strategy, *, name: str | None = None) -> Strategy:
    """The canonical square strategy D^{1/2}Q profile-equivalent to ``strategy`` (Theorem 4.13).

    Its rows are √λᵢ times the eigenvectors of X = AᵀA; for H and Y this is the "decomposition"
    of §6.1 whose sensitivity is below log₂n + 1.
    """
    if not isinstance(strategy, Strategy):
        raise TypeError(f"The 'strategy' parameter of square_root must be a Strategy. Got {type(strategy).__name__}.")
    lam, V = _psd_eigh(strategy.gram)
    A = (V * np.sqrt(lam)).T[::-1]
    return Strategy(A, name or f"sqrt({strategy.name})")


def singular_value_bound(workload) -> Strategy:
    """Theorem 5.25's closed-form strategy A* = diag(√σᵢ(W)) P_W, optimal for ‖A‖_F²·‖W A⁺‖_F².

    With G = WᵀW = P_Wᵀ diag(σᵢ²) P_W, the rows are σᵢ^{1/2} times the right singular vectors of W.
    Its error is within a factor n of optimal (Thm 5.26). Directions W does not use get no row:
    A* still supports W.

    Examples
    --------
    >>> from mmopt import workload, evaluate
    >>> A = singular_value_bound(workload.identity(3))
    >>> np.allclose(A.gram, np.eye(3))
    True
    """
    from mmopt.workload import Workload

    if not isinstance(workload, Workload):
        raise TypeError("The 'workload' parameter of singular_value_bound must be a Workload. "
                        f"Got {type(workload).__name__}.")
    try:
        G = workload.gram  # σᵢ(W)² exactly, when G fits in float64
    except OverflowError:
        G = workload.mean_gram  # same strategy up to scale, which error ignores
    lam, V = _psd_eigh(G)
    keep = lam > 0
    A = (V[:, keep] * np.sqrt(np.sqrt(lam[keep]))).T[::-1]
    return Strategy(A, "svd_bound")
